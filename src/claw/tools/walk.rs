//! Every file of a tree, in parallel, the way ripgrep walks: `.gitignore` honoured, hidden
//! files and directories skipped.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Calls `each` on every file under `root` from several threads; returns what it kept,
/// sorted by path so output never depends on thread timing.
pub fn files<T: Send>(root: &Path, each: impl Fn(&Path) -> Option<T> + Sync) -> Vec<(PathBuf, T)> {
    let out = Mutex::new(Vec::new());
    ignore::WalkBuilder::new(root)
        .require_git(false)
        .build_parallel()
        .run(|| {
            Box::new(|entry| {
                if let Ok(e) = entry {
                    if e.file_type().is_some_and(|t| t.is_file()) {
                        if let Some(v) = each(e.path()) {
                            out.lock().expect("not poisoned").push((e.into_path(), v));
                        }
                    }
                }
                ignore::WalkState::Continue
            })
        });
    let mut out = out.into_inner().expect("not poisoned");
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// `path` relative to `root`, for display.
pub fn rel(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .display()
        .to_string()
}

/// Every file under `root` (ignore rules applied), sorted.
pub fn all(root: &Path) -> Vec<PathBuf> {
    files(root, |_| Some(()))
        .into_iter()
        .map(|(p, ())| p)
        .collect()
}
