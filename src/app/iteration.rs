//! Iteration changes: `braids iteration new|activate|complete`, and the worker completing an
//! iteration whose stories are all closed (3.7). The one place that enforces 1.3 (at most one
//! active iteration) and 4.5 (a complete iteration is frozen). Every status change is made under
//! the repository lock the workers commit under, after re-reading the iterations: a person and a
//! worker, or two workers, changing one project at once cannot both pass the checks.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};

use crate::format::{self, iteration, iteration::Iteration, registry::RegistryEntry};
use crate::lock::TickLock;
use crate::model::{BeadStatus, IterationStatus, NotificationEvent};
use crate::paths::Paths;
use crate::tracker::Tracker;

/// How long to wait for another holder of the repository lock, such as a worker committing and
/// pushing.
const REPO_LOCK_WAIT: Duration = Duration::from_secs(600);

/// The repository's commit lock, held; released on drop. Commits, pushes and iteration status
/// changes of one repository happen one at a time: concurrent index writes or `git push`es fail
/// or lose work, and an iteration checked without it could be completed twice, or frozen before
/// a bead's commit.
pub struct RepoLock {
    _lock: TickLock,
}

impl RepoLock {
    /// Waits up to ten minutes for the lock of the repository at `root`.
    pub fn acquire(root: &Path) -> Result<RepoLock> {
        let path = crate::git::lock_path(root)?;
        let lock = TickLock::acquire(&path, REPO_LOCK_WAIT)
            .with_context(|| format!("cannot lock {}", path.display()))?
            .ok_or_else(|| {
                anyhow!(
                    "another worker held {} for over {}s",
                    path.display(),
                    REPO_LOCK_WAIT.as_secs()
                )
            })?;
        Ok(RepoLock { _lock: lock })
    }
}

/// An iteration after a change was asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub number: u32,
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

/// The registry row of `slug`, or a sentence saying how to create it.
pub fn locate(paths: &Paths, slug: &str) -> Result<RegistryEntry> {
    let reg = format::registry::read_registry(paths);
    reg.value
        .entries
        .into_iter()
        .find(|e| e.slug == slug)
        .ok_or_else(|| {
            anyhow!(
                "no project {slug} in {}; create it with `braids new {slug}`",
                paths.registry().display()
            )
        })
}

/// `braids iteration new`: writes ITERATION.md for iteration `number` (by default the one after
/// the highest), in planning. Under the repository lock when the project is a repository, so two
/// at once cannot take one number.
pub fn create(paths: &Paths, slug: &str, number: Option<u32>) -> Result<Change> {
    let entry = locate(paths, slug)?;
    let _lock = match crate::git::open(&entry.path) {
        Ok(_) => Some(RepoLock::acquire(&entry.path)?),
        Err(_) => None,
    };
    let dirs = iteration::list_iteration_dirs(&entry.path);
    let number = number.unwrap_or_else(|| dirs.iter().map(|(n, _)| *n).max().unwrap_or(0) + 1);
    if let Some((_, d)) = dirs.iter().find(|(n, _)| *n == number) {
        bail!(
            "iteration {number} of {slug} already exists at {}",
            d.display()
        );
    }
    let file = iteration::iterations_dir(&entry.path)
        .join(format!("{number:03}"))
        .join("ITERATION.md");
    let n = number.to_string();
    crate::atomic::write(
        &file,
        crate::templates::render(crate::templates::ITERATION, &[("number", &n)]).as_bytes(),
    )?;
    Ok(Change {
        number,
        file,
        status: IterationStatus::Planning,
        changed: true,
    })
}

/// `braids iteration activate|complete`: sets the status of iteration `number` — by default the
/// lowest one in planning to activate, the active one to complete — commits it, and sends the
/// iteration-start or iteration-complete notification (3.8).
pub fn set_status(
    paths: &Paths,
    slug: &str,
    number: Option<u32>,
    to: IterationStatus,
) -> Result<Change> {
    let entry = locate(paths, slug)?;
    let root = &entry.path;
    let lock = RepoLock::acquire(root)?;
    let its = iteration::read_iterations(root).value;
    let number = match number {
        Some(n) => n,
        None => default_number(slug, &its, to)?,
    };
    let it = its
        .iter()
        .find(|i| i.number == number)
        .ok_or_else(|| anyhow!("{slug} has no iteration {number}"))?;
    let change = transition(root, slug, &lock, &its, it, to, &[])?;
    drop(lock);
    if change.changed {
        notify(paths, &entry, number, to);
    }
    Ok(change)
}

/// The iteration `activate` or `complete` means when none is named.
fn default_number(slug: &str, its: &[Iteration], to: IterationStatus) -> Result<u32> {
    let active: Vec<u32> = its
        .iter()
        .filter(|i| i.status == Some(IterationStatus::Active))
        .map(|i| i.number)
        .collect();
    if to == IterationStatus::Complete {
        return match active.as_slice() {
            [n] => Ok(*n),
            [] => bail!("{slug} has no active iteration to complete; name one: `braids iteration complete {slug} <N>`"),
            _ => bail!("{slug} has several active iterations ({active:?}); name the one to complete"),
        };
    }
    its.iter()
        .filter(|i| i.status == Some(IterationStatus::Planning))
        .map(|i| i.number)
        .min()
        .ok_or_else(|| {
            anyhow!("{slug} has no iteration in planning; create one with `braids iteration new {slug}`")
        })
}

/// 3.7: marks `iteration` complete and commits it, with `also` (the tracker's files), when every
/// story it lists is closed — exactly once even when two workers finish together: the caller
/// holds the repository lock and the status is re-read under it. The caller pushes and notifies
/// (see [`notice`]).
pub fn complete_if_done(
    root: &Path,
    slug: &str,
    held: &RepoLock,
    iteration: &Iteration,
    tracker: &dyn Tracker,
    also: &[PathBuf],
) -> Result<Completion> {
    if iteration.stories.is_empty() {
        return Ok(Completion::NoStories);
    }
    let all = tracker.list()?;
    let open = iteration
        .stories
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
pub fn notice(slug: &str, number: u32, status: IterationStatus) -> (NotificationEvent, String) {
    match status {
        IterationStatus::Active => (
            NotificationEvent::IterationStart,
            format!("[{slug}] Iteration {number} started."),
        ),
        _ => (
            NotificationEvent::IterationComplete,
            format!("[{slug}] Iteration {number} is complete."),
        ),
    }
}

/// Sets `it`'s status to `to` and commits its directory with `also`, after the checks of 1.3
/// and 4.5 against `its`, read under the lock. Setting the status it has is no change.
fn transition(
    root: &Path,
    slug: &str,
    _held: &RepoLock,
    its: &[Iteration],
    it: &Iteration,
    to: IterationStatus,
    also: &[PathBuf],
) -> Result<Change> {
    let number = it.number;
    let file = it.file();
    let mut change = Change {
        number,
        file: file.clone(),
        status: to,
        changed: false,
    };
    if it.status == Some(to) {
        return Ok(change);
    }
    if it.status == Some(IterationStatus::Complete) {
        bail!("iteration {number} of {slug} is complete and may not be modified (4.5); plan a new one with `braids iteration new {slug}`");
    }
    if to == IterationStatus::Active {
        let other = its
            .iter()
            .find(|i| i.status == Some(IterationStatus::Active) && i.number != number);
        if let Some(other) = other.map(|i| i.number) {
            bail!("iteration {other} of {slug} is active; at most one iteration may be active (1.3): complete it first with `braids iteration complete {slug} {other}`");
        }
    }
    iteration::write_status(&file, to)
        .with_context(|| format!("cannot update {}", file.display()))?;
    let verb = if to == IterationStatus::Active {
        "Activate"
    } else {
        "Complete"
    };
    let mut paths = vec![it.dir.clone()];
    paths.extend_from_slice(also);
    crate::git::commit_paths(root, &paths, &format!("{verb} iteration {number}"))?;
    change.changed = true;
    Ok(change)
}

/// Sends the notice of a status change made outside a worker, when the project asks for it.
fn notify(paths: &Paths, entry: &RegistryEntry, number: u32, to: IterationStatus) {
    let Ok(loaded) = crate::config::Config::load(&paths.config()) else {
        return;
    };
    let md = entry.path.join(".braids/PROJECT.md");
    let Ok(bytes) = std::fs::read(&md) else {
        return;
    };
    let project = format::project::parse_project(&format::decode(&bytes), &md).value;
    let (event, text) = notice(&entry.slug, number, to);
    let notifier = crate::notify::from_config(&loaded.config.notify);
    crate::notify::send(&notifier, &project, &entry.slug, event, None, &text);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Priority, ProjectStatus};

    /// The fixed bug: `braids iteration complete` changed ITERATION.md and committed while a
    /// worker held the repository lock.
    #[test]
    fn set_status_waits_for_the_repository_lock() {
        let home = tempfile::tempdir().unwrap();
        let paths = Paths::new(home.path().to_path_buf(), None);
        let root = home.path().join("Projects/app");
        std::fs::create_dir_all(&root).unwrap();
        crate::git::init(&root).unwrap();
        let row = format::registry::upsert_row(
            "",
            "app",
            ProjectStatus::Active,
            Priority::Normal,
            &root.to_string_lossy(),
        )
        .unwrap();
        crate::atomic::write(&paths.registry(), row.as_bytes()).unwrap();
        let made = create(&paths, "app", None).unwrap();
        set_status(&paths, "app", None, IterationStatus::Active).unwrap();
        let status = || iteration::read_iterations(&root).value[0].status;

        let held = RepoLock::acquire(&root).unwrap();
        std::thread::scope(|s| {
            let complete = s.spawn(|| set_status(&paths, "app", None, IterationStatus::Complete));
            // Not a deadline: a correct run never changes the file while the lock is held.
            std::thread::sleep(Duration::from_millis(300));
            assert_eq!(
                status(),
                Some(IterationStatus::Active),
                "changed under the lock"
            );
            drop(held);
            let done = complete.join().unwrap().unwrap();
            assert_eq!((done.number, done.changed), (made.number, true));
        });
        assert_eq!(status(), Some(IterationStatus::Complete));
        let err = set_status(&paths, "app", Some(1), IterationStatus::Active).unwrap_err();
        assert!(err.to_string().contains("(4.5)"), "{err}");
    }
}
