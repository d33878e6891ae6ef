//! Trees of files: walking, copying and comparing them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// Every file and directory under `root`, relative to it (not following symlinks to
/// directories); an unreadable directory is skipped.
pub fn walk(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(p.clone());
            }
            out.push(p.strip_prefix(root).unwrap().to_path_buf());
        }
    }
    out
}

/// Every regular file under `root` (absolute paths).
pub fn files_under(root: &Path) -> Vec<PathBuf> {
    walk(root)
        .into_iter()
        .map(|r| root.join(r))
        .filter(|p| p.is_file())
        .collect()
}

/// Every file under `root` with its bytes, keyed by absolute path.
pub fn contents(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    files_under(root)
        .into_iter()
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap();
            (p, bytes)
        })
        .collect()
}

/// Copies the tree `from` into `to` (created as needed).
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let p = e.path();
        let t = to.join(e.file_name());
        if p.is_dir() {
            copy_tree(&p, &t);
        } else {
            std::fs::copy(&p, &t).unwrap();
        }
    }
}

/// A file's bytes and mtime, or `None` when it does not exist.
pub fn snapshot(p: &Path) -> Option<(Vec<u8>, SystemTime)> {
    let bytes = std::fs::read(p).ok()?;
    Some((bytes, std::fs::metadata(p).unwrap().modified().unwrap()))
}

/// Writes an executable `sh` script with this body at `path`.
pub fn write_script(path: &Path, body: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// The files of beads' worktrees under a braids home's `workspaces` folder: not the pools of
/// finished ones (`<project>/.pool/`) nor the note naming each folder's project.
pub fn bead_worktree_files(workspaces: &Path) -> Vec<PathBuf> {
    files_under(workspaces)
        .into_iter()
        .filter(|p| {
            let rel = p.strip_prefix(workspaces).unwrap();
            !rel.components().any(|c| c.as_os_str() == ".pool")
                && rel.file_name().is_some_and(|n| n != ".project")
        })
        .collect()
}

/// `git worktree list` of `root` without the pooled worktrees.
pub fn worktrees_in_use(listing: &str) -> usize {
    listing
        .lines()
        .filter(|l| l.starts_with("worktree ") && !l.contains("/.pool/"))
        .count()
}
