//! The immutability of completed iterations (4.5): the commit that completed one, and what
//! changed in its folder since.

use std::path::{Path, PathBuf};

use anyhow::Result;
use git2::Repository;

use crate::model::IterationStatus;

/// The result of checking one completed iteration against history (4.5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frozen {
    /// Unchanged since the commit that completed it.
    Intact { commit: String },
    /// Paths (relative to the work tree) changed since the completing commit.
    Modified { commit: String, paths: Vec<PathBuf> },
    /// Marked complete in the work tree but never committed that way.
    Uncommitted,
    /// Not a git repository, or no history.
    NoHistory,
}

/// Finds the commit that completed the iteration in `iteration_dir` (the oldest commit of the
/// unbroken run, back from HEAD, in which its ITERATION.md says complete) and reports anything
/// in the directory that changed since, in the index or the work tree, untracked files included.
pub fn check_frozen(root: &Path, iteration_dir: &Path) -> Result<Frozen> {
    let Ok(repo) = Repository::open(root) else {
        return Ok(Frozen::NoHistory);
    };
    let Ok(head) = repo.head().and_then(|h| h.peel_to_commit()) else {
        return Ok(Frozen::NoHistory);
    };
    let rel_dir = iteration_dir
        .strip_prefix(root)
        .unwrap_or(iteration_dir)
        .to_path_buf();
    // An iteration's file in either form: `braids migrate` changes the form, not the iteration.
    let forms = [rel_dir.join("ITERATION.md"), rel_dir.join("iteration.edn")];
    let read_at = |c: &git2::Commit| -> Option<crate::format::iteration::Iteration> {
        let tree = c.tree().ok()?;
        let (file, entry) = forms
            .iter()
            .find_map(|f| tree.get_path(f).ok().map(|e| (f, e)))?;
        let blob = repo.find_blob(entry.id()).ok()?;
        let text = crate::format::decode(blob.content()).into_owned();
        let it = crate::format::layout::parse_iteration(&text, file, 0.into(), rel_dir.clone());
        Some(it.value)
    };
    let status_at = |c: &git2::Commit| read_at(c).and_then(|it| it.status);
    let mut completing = None;
    let mut cur = Some(head);
    let mut steps = 0;
    while let Some(c) = cur {
        if status_at(&c) != Some(IterationStatus::Complete) || steps > 20_000 {
            break;
        }
        steps += 1;
        cur = c.parent(0).ok();
        completing = Some(c);
    }
    let Some(commit) = completing else {
        return Ok(Frozen::Uncommitted);
    };
    let tree = commit.tree()?;
    let mut opts = git2::DiffOptions::new();
    opts.pathspec(&rel_dir)
        .include_untracked(true)
        .recurse_untracked_dirs(true);
    let diff = repo.diff_tree_to_workdir_with_index(Some(&tree), Some(&mut opts))?;
    let now = crate::format::layout::iteration_file(iteration_dir);
    let converted = std::fs::read(&now).ok().is_some_and(|bytes| {
        let text = crate::format::decode(&bytes);
        let it = crate::format::layout::parse_iteration(&text, &now, 0.into(), rel_dir.clone());
        let view = |i: &crate::format::iteration::Iteration| {
            let stories: Vec<_> = i.stories.iter().map(|s| (&s.id, &s.title)).collect();
            (i.status, stories.len(), format!("{stories:?}"))
        };
        read_at(&commit).is_some_and(|then| view(&then) == view(&it.value))
    });
    let paths: Vec<PathBuf> = diff
        .deltas()
        .filter_map(|d| {
            d.new_file()
                .path()
                .or(d.old_file().path())
                .map(Path::to_path_buf)
        })
        // The same iteration in the other form is no change.
        .filter(|p| !(converted && forms.contains(p)))
        .collect();
    let id = commit.id().to_string()[..10].to_string();
    Ok(if paths.is_empty() {
        Frozen::Intact { commit: id }
    } else {
        Frozen::Modified { commit: id, paths }
    })
}
