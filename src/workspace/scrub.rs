//! The checks and chores of putting a finished worktree back in the pool (see
//! [`super::pool`]): its stash entries, a process still in it, index flags git's own checkout
//! trusts, its size on disk; and the sparse checkout a worktree is given.

use std::path::Path;

use anyhow::Result;

use super::guard;
use crate::git::{git, git_ok};

/// Folders a sparse checkout always has.
const ALWAYS: &[&str] = &[".braids/", ".beads/", ".ai/", ".claw/"];

/// Checks out only `sparse` in the worktree at `dir` from now on (everything when empty).
/// Folders alone (`src/app/`, `docs`) use git's cone mode, which keeps the files at the top
/// (a `Cargo.toml`, a `package.json`) too; anything else is read as gitignore patterns. The
/// settings go in the worktree's own `config.worktree`, never the person's.
pub(super) fn set_sparse(dir: &Path, sparse: &[String]) -> Result<()> {
    if sparse.is_empty() {
        let admin = guard::admin_of(dir)?;
        if admin.join("config.worktree").exists() {
            git_ok(dir, &["sparse-checkout", "disable"])?;
        }
        return Ok(());
    }
    // What braids itself writes and lands (the deliverable, the tracker's files, a story's
    // state) is always checked out.
    let sparse: Vec<String> = sparse
        .iter()
        .cloned()
        .chain(ALWAYS.iter().map(|a| a.to_string()))
        .collect();
    let cone = sparse
        .iter()
        .all(|p| !p.contains(['*', '?', '[', '!', '\\']) && !p.starts_with('/'));
    let mut args = vec![
        "sparse-checkout",
        "set",
        if cone { "--cone" } else { "--no-cone" },
    ];
    let entries: Vec<String> = sparse
        .iter()
        .map(|p| match cone {
            true => p.trim_end_matches('/').to_string(),
            false => p.clone(),
        })
        .collect();
    args.extend(entries.iter().map(String::as_str));
    git_ok(dir, &args)?;
    Ok(())
}

/// Drops the stash entries made on `branch` (a bead's): the stash is the repository's, so the
/// next bead's agent would find them.
pub(super) fn drop_stashes(dir: &Path, branch: &str) -> Result<()> {
    let mine = format!("on {branch}:").to_lowercase();
    // One at a time, each checked to be the entry listed: a stash made meanwhile renumbers them.
    loop {
        let list = git(dir, &["stash", "list", "--format=%gd %H %gs"])?;
        let Some((entry, sha)) = list.stdout.lines().find_map(|l| {
            let mut it = l.splitn(3, ' ');
            let (entry, sha, subject) = (it.next()?, it.next()?, it.next()?);
            subject
                .to_lowercase()
                .contains(&mine)
                .then(|| (entry.to_string(), sha.to_string()))
        }) else {
            return Ok(());
        };
        let now = git_ok(dir, &["rev-parse", "--verify", "--quiet", &entry])?;
        if now.trim() != sha {
            continue;
        }
        git_ok(dir, &["stash", "drop", "--quiet", &entry])?;
    }
}

/// A process that still holds the folder at `dir` (its working directory, root, program or an
/// open file there), however it left the bead's session: such a workspace is never pooled.
pub(super) fn process_in(dir: &Path) -> Option<u32> {
    crate::system::container::any_holders(&[dir.to_path_buf()])
        .first()
        .map(|p| *p as u32)
}

/// Why the index of the scrubbed worktree at `dir` cannot be vouched for: an entry git is told
/// to assume unchanged, or to skip outside a sparse checkout (git's own checkout and status
/// trust those flags, so a file planted under one would survive them).
pub(super) fn flagged(dir: &Path, sparse: bool) -> Result<Option<String>> {
    if sparse {
        git_ok(dir, &["sparse-checkout", "reapply"])?;
    }
    let listed = git_ok(dir, &["ls-files", "-v", "-z"])?;
    let odd = listed.split('\0').find(|e| {
        let tag = e.chars().next().unwrap_or('H');
        tag.is_ascii_lowercase() || (!sparse && tag == 'S')
    });
    Ok(odd.map(|e| {
        format!(
            "its index marks {} as not to be looked at",
            e.get(2..).unwrap_or(e)
        )
    }))
}

/// Bytes under `dir`, links not followed.
pub(super) fn disk_usage(dir: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    // A bound on the walk: a cache of millions of files is shown as at least this much.
    let mut budget = 500_000;
    while let Some(d) = stack.pop() {
        budget -= 1;
        if budget == 0 {
            break;
        }
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let Ok(meta) = e.metadata() else { continue };
            if meta.is_dir() {
                stack.push(e.path());
            } else {
                total += meta.len();
            }
        }
    }
    total
}
