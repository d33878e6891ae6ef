//! An iteration's status changes under the repository lock: the checks of 1.3 (at most one
//! active iteration) and 4.5 (a complete iteration is frozen), the write and the commit, and
//! 3.7's completion once every story is closed. One place for the people's commands
//! (`app::iteration`), the worker that closes the last story, and the tick, which completes an
//! iteration whose last worker died after closing its bead and before completing it (7.2).

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};

use crate::format::{iteration, iteration::Iteration};
use crate::git::RepoLock;
use crate::model::{Bead, BeadStatus, IterationName, IterationStatus, NotificationEvent};

/// Where trackers keep bead state inside a project: it travels with every commit braids makes
/// for a bead or an iteration, so git carries a bead's closure with its work (4.4).
pub const TRACKER_FILES: [&str; 2] = crate::git::BOOKKEEPING;

/// The tracker's files in the project, if it keeps any there.
pub fn tracker_files(root: &Path) -> Vec<PathBuf> {
    TRACKER_FILES
        .iter()
        .map(|f| root.join(f))
        .filter(|p| p.exists())
        .collect()
}

/// Commits what the tracker recorded of a bead that landed nothing (a failed attempt, a
/// block, a release), so the person's checkout is left clean of braids' writes: only the
/// tracker's files git already tracks (never what an agent put beside them), and only while
/// the base branch is checked out (a person's own branch is theirs). Under the repository
/// lock; `Ok(None)` when there was nothing to commit. The caller pushes.
pub fn commit_tracker(root: &Path, message: &str) -> Result<Option<(git2::Oid, String)>> {
    let lock = RepoLock::acquire(root)?;
    commit_tracker_held(root, message, &lock)
}

/// [`commit_tracker`] by a caller that holds the repository lock already.
pub fn commit_tracker_held(
    root: &Path,
    message: &str,
    _held: &RepoLock,
) -> Result<Option<(git2::Oid, String)>> {
    let Ok(base) = crate::workspace::base_branch(root) else {
        return Ok(None);
    };
    if crate::git::checked_out(root).as_deref() != Some(base.as_str()) {
        return Ok(None);
    }
    let files: Vec<PathBuf> = crate::git::git_ok(
        root,
        &[
            "ls-files",
            "-z",
            "--",
            ".beads/issues.jsonl",
            ".braids/WORKPLAN.md",
        ],
    )?
    .split('\0')
    .filter(|f| !f.is_empty())
    .map(|f| root.join(f))
    .collect();
    if files.is_empty() {
        return Ok(None);
    }
    Ok(crate::git::commit_paths(root, &files, message)?.map(|c| (c, base)))
}

/// [`commit_tracker`], then a push when the base branch has an upstream; a push that fails is
/// owed and retried by later ticks. For a person's commands (the tick never commits, 2.1);
/// errors are logged.
pub fn record_tracker(root: &Path, message: &str) {
    match commit_tracker(root, message) {
        Ok(Some((_, base))) if crate::git::has_upstream(root, &base) => {
            let _ = crate::git::expect_push(root);
            let timeout = std::time::Duration::from_secs(120);
            if let Err(e) = crate::git::push_recorded(root, &base, timeout) {
                tracing::warn!(project = %root.display(), "the tracker's record is not pushed yet: {e:#}");
            }
        }
        Ok(_) => {}
        Err(e) => {
            tracing::warn!(project = %root.display(), "the tracker's record is not committed: {e:#}")
        }
    }
}

/// An iteration after a change was asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The iteration's directory name as written.
    pub name: IterationName,
    /// Its ITERATION.md.
    pub file: PathBuf,
    pub status: IterationStatus,
    /// False when it already had that status.
    pub changed: bool,
}

/// What [`complete_if_done`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Completion {
    /// ITERATION.md lists no stories: a person completes it.
    NoStories,
    /// This many stories are not closed yet.
    StoriesOpen(usize),
    /// Someone else completed it first.
    AlreadyComplete,
    /// Marked complete and committed now.
    Completed,
}

/// 3.7: marks `iteration` complete and commits it, with `also` (the tracker's files), when every
/// story it lists is closed in `all` (every bead the tracker has) — exactly once even when two workers finish together: the caller
/// holds the repository lock and the status is re-read under it. The caller pushes and notifies
/// (see [`notice`]).
pub fn complete_if_done(
    root: &Path,
    slug: &str,
    held: &RepoLock,
    iteration: &Iteration,
    all: &[Bead],
    also: &[PathBuf],
) -> Result<Completion> {
    let of_milestone = iteration.milestone_stories(all);
    if of_milestone.is_none() && iteration.stories.is_empty() && iteration.maybe_stories.is_empty()
    {
        return Ok(Completion::NoStories);
    }
    let stories = match &of_milestone {
        Some(own) => own.iter().collect(),
        None => iteration.stories_known(|id| all.iter().any(|b| &b.id == id)),
    };
    if stories.is_empty() {
        return Ok(Completion::NoStories);
    }
    let open = stories
        .iter()
        .filter(|s| {
            !all.iter()
                .any(|b| b.id == s.id && b.status == BeadStatus::Closed)
        })
        .count();
    if open > 0 {
        return Ok(Completion::StoriesOpen(open));
    }
    let its = iteration::read_iterations(root).value;
    let now = its
        .iter()
        .find(|i| i.dir == iteration.dir)
        .ok_or_else(|| anyhow!("cannot read {}", iteration.file().display()))?;
    let to = IterationStatus::Complete;
    let change = transition(root, slug, held, &its, now, to, also)?;
    Ok(if change.changed {
        Completion::Completed
    } else {
        Completion::AlreadyComplete
    })
}

/// The notification of an iteration reaching `status` (3.8).
pub fn notice(
    slug: &str,
    name: IterationName,
    status: IterationStatus,
) -> (NotificationEvent, String) {
    match status {
        IterationStatus::Active => (
            NotificationEvent::IterationStart,
            format!("[{slug}] Iteration {name} started."),
        ),
        _ => (
            NotificationEvent::IterationComplete,
            format!("[{slug}] Iteration {name} is complete."),
        ),
    }
}

/// Sets `it`'s status to `to` and commits its directory with `also`, after the checks of 1.3
/// and 4.5 against `its`, read under the lock. Setting the status it has is no change.
pub fn transition(
    root: &Path,
    slug: &str,
    _held: &RepoLock,
    its: &[Iteration],
    it: &Iteration,
    to: IterationStatus,
    also: &[PathBuf],
) -> Result<Change> {
    let name = it.name;
    let file = it.file();
    let mut change = Change {
        name,
        file: file.clone(),
        status: to,
        changed: false,
    };
    if it.status == Some(to) {
        return Ok(change);
    }
    if it.status == Some(IterationStatus::Complete) {
        bail!("iteration {name} of {slug} is complete and may not be modified (4.5); plan a new one with `braids iteration new {slug}`");
    }
    if to == IterationStatus::Active {
        let other = its
            .iter()
            .find(|i| i.status == Some(IterationStatus::Active) && i.dir != it.dir);
        if let Some(other) = other.map(|i| i.name) {
            bail!("iteration {other} of {slug} is active; at most one iteration may be active (1.3): complete it first with `braids iteration complete {slug} {other}`");
        }
    }
    // What the commit holds of ITERATION.md is HEAD's text with the new status: a person's
    // uncommitted edit stays in the file, theirs to commit. An iteration never committed goes
    // in whole, with its folder.
    let committed = crate::git::head_blob(root, &file)?;
    iteration::write_status(&file, to)
        .with_context(|| format!("cannot update {}", file.display()))?;
    let verb = if to == IterationStatus::Active {
        "Activate"
    } else {
        "Complete"
    };
    let message = format!("{verb} iteration {name}");
    match committed {
        Some(old) => {
            let ours = iteration::with_status(&old, to, &file)?;
            crate::git::commit_with(root, &[(file.clone(), ours)], also, &message)?;
        }
        None => {
            let mut paths = vec![it.dir.clone()];
            paths.extend_from_slice(also);
            crate::git::commit_paths(root, &paths, &message)?;
        }
    }
    change.changed = true;
    Ok(change)
}
