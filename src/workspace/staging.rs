//! What a landing stages and commits of a worktree: everything but what is excluded and what
//! agent CLIs keep for themselves, and the tracker's own files of the person's checkout.

use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::git::{git, git_ok};

/// Stages everything in the worktree but `exclude` and what agent CLIs keep there for
/// themselves ([`crate::agent::TOOL_STATE`], never work), then `include` even if excluded.
pub(in crate::workspace) fn stage(
    dir: &Path,
    exclude: &[PathBuf],
    include: &[PathBuf],
) -> Result<()> {
    let mut args: Vec<String> = ["add", "--all", "--", "."].map(String::from).to_vec();
    args.extend(
        exclude
            .iter()
            .map(|p| format!(":(exclude,top){}", p.to_string_lossy()))
            .chain(
                crate::agent::TOOL_STATE
                    .iter()
                    .map(|p| format!(":(exclude,top){p}")),
            )
            .chain(
                crate::workspace::ready::copied_unignored(dir)
                    .iter()
                    .map(|p| format!(":(exclude,top,literal){}", p.to_string_lossy())),
            ),
    );
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    // `.` excluded means nothing but `include` (git reads `:(exclude).` as excluding nothing).
    if !exclude.iter().any(|p| p == Path::new(".")) {
        git_ok(dir, &refs)?;
    }
    let present: Vec<String> = include
        .iter()
        .filter(|p| dir.join(p).exists())
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    if !present.is_empty() {
        let mut args = vec!["add", "--force", "--"];
        args.extend(present.iter().map(String::as_str));
        git_ok(dir, &args)?;
    }
    Ok(())
}

/// Commits what is staged, if anything; returns whether it did.
pub(in crate::workspace) fn commit_staged(dir: &Path, message: &str) -> Result<bool> {
    if git(dir, &["diff", "--cached", "--quiet"])?.success() {
        return Ok(false);
    }
    git_ok(dir, &["commit", "--quiet", "--no-verify", "-m", message])?;
    Ok(true)
}

/// Files under the project-relative `rel` that git would see: a directory (`.beads`) is
/// expanded to its tracked and not-ignored files.
pub(super) fn tracker_paths(project: &Path, rel: &Path) -> Result<Vec<PathBuf>> {
    let meta = std::fs::symlink_metadata(project.join(rel));
    if meta.as_ref().is_ok_and(|m| m.file_type().is_file()) {
        return Ok(vec![rel.to_path_buf()]);
    }
    if meta.is_ok_and(|m| m.file_type().is_symlink()) {
        return Ok(vec![]);
    }
    if !project.join(rel).is_dir() {
        return Ok(vec![]);
    }
    let shown = rel.to_string_lossy();
    let out = git_ok(
        project,
        &[
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
            "--",
            &shown,
        ],
    )?;
    Ok(out
        .split('\0')
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        // The tracker's folder carries the tracker's own files only, whatever else is there.
        .filter(|p| !crate::git::tree::in_tracker_dir(p) || crate::git::tree::is_tracker_file(p))
        .filter(|p| {
            std::fs::symlink_metadata(project.join(p)).is_ok_and(|m| m.file_type().is_file())
        })
        .collect())
}
