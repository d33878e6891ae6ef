//! Iteration changes: `braids iteration new|activate|complete`, and the worker completing an
//! iteration whose stories are all closed (3.7). The one place that enforces 1.3 (at most one
//! active iteration) and 4.5 (a complete iteration is frozen). Every status change is made under
//! the repository lock the workers commit under, after re-reading the iterations: a person and a
//! worker, or two workers, changing one project at once cannot both pass the checks.
//!
//! Iterations are named by their directories as written (`008`), in messages, commits and
//! notifications alike; a name given on the command line finds its directory by text, else by
//! number, so `8` and `008` both name `008`.

pub use crate::git::RepoLock;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};

use crate::format::{self, iteration, iteration::Iteration, registry::RegistryEntry};
use crate::model::{BeadStatus, IterationName, IterationStatus, NotificationEvent};
use crate::paths::Paths;
use crate::tracker::Tracker;

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

/// `braids iteration new`: writes ITERATION.md for iteration `name` (by default the one after
/// the highest), in planning, in a directory named with at least three digits (`8` → `008`).
/// Under the repository lock when the project is a repository, so two at once cannot take one
/// number.
pub fn create(paths: &Paths, slug: &str, name: Option<IterationName>) -> Result<Change> {
    let entry = locate(paths, slug)?;
    let _lock = match crate::git::open(&entry.path) {
        Ok(_) => Some(RepoLock::acquire(&entry.path)?),
        Err(_) => None,
    };
    let dirs = iteration::list_iteration_dirs(&entry.path);
    let name = match name {
        Some(n) => n.padded(),
        None => {
            let last = dirs.iter().map(|(n, _)| n.number()).max().unwrap_or(0);
            let next = last
                .checked_add(1)
                .ok_or_else(|| anyhow!("{slug} has no iteration number left after {last}"))?;
            IterationName::from(next).padded()
        }
    };
    if let Some((_, d)) = dirs.iter().find(|(n, _)| n.number() == name.number()) {
        bail!(
            "iteration {} of {slug} already exists at {}",
            name.number(),
            d.display()
        );
    }
    let file = iteration::iterations_dir(&entry.path)
        .join(name.as_str())
        .join("ITERATION.md");
    crate::atomic::write(
        &file,
        crate::templates::render(crate::templates::ITERATION, &[("number", name.as_str())])
            .as_bytes(),
    )?;
    Ok(Change {
        name,
        file,
        status: IterationStatus::Planning,
        changed: true,
    })
}

/// `braids iteration activate|complete`: sets the status of iteration `name` — by default the
/// lowest one in planning to activate, the active one to complete — commits it, and sends the
/// iteration-start or iteration-complete notification (3.8).
pub fn set_status(
    paths: &Paths,
    slug: &str,
    name: Option<IterationName>,
    to: IterationStatus,
) -> Result<Change> {
    let entry = locate(paths, slug)?;
    let root = &entry.path;
    let lock = RepoLock::acquire(root)?;
    let its = iteration::read_iterations(root).value;
    let name = match name {
        Some(n) => n,
        None => default_name(slug, &its, to)?,
    };
    let it = name.find(&its, |i| i.name).ok_or_else(|| {
        anyhow!(
            "{slug} has no iteration {name} (no .braids/iterations/{name}/ITERATION.md); `braids status` shows its iterations"
        )
    })?;
    let change = transition(root, slug, &lock, &its, it, to, &[])?;
    drop(lock);
    if change.changed {
        notify(paths, &entry, change.name, to);
    }
    Ok(change)
}

/// The iteration `activate` or `complete` means when none is named.
fn default_name(slug: &str, its: &[Iteration], to: IterationStatus) -> Result<IterationName> {
    let active: Vec<IterationName> = its
        .iter()
        .filter(|i| i.status == Some(IterationStatus::Active))
        .map(|i| i.name)
        .collect();
    if to == IterationStatus::Complete {
        return match active.as_slice() {
            [n] => Ok(*n),
            [] => bail!("{slug} has no active iteration to complete; name one: `braids iteration complete {slug} <N>`"),
            _ => bail!(
                "{slug} has several active iterations ({}); name the one to complete",
                active.iter().map(|n| n.as_str()).collect::<Vec<_>>().join(", ")
            ),
        };
    }
    its.iter()
        .filter(|i| i.status == Some(IterationStatus::Planning))
        .map(|i| i.name)
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
    if iteration.stories.is_empty() && iteration.maybe_stories.is_empty() {
        return Ok(Completion::NoStories);
    }
    let all = tracker.list()?;
    let stories = iteration.stories_known(|id| all.iter().any(|b| &b.id == id));
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
fn transition(
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
    iteration::write_status(&file, to)
        .with_context(|| format!("cannot update {}", file.display()))?;
    let verb = if to == IterationStatus::Active {
        "Activate"
    } else {
        "Complete"
    };
    let mut paths = vec![it.dir.clone()];
    paths.extend_from_slice(also);
    crate::git::commit_paths(root, &paths, &format!("{verb} iteration {name}"))?;
    change.changed = true;
    Ok(change)
}

/// Sends the notice of a status change made outside a worker, when the project asks for it.
fn notify(paths: &Paths, entry: &RegistryEntry, name: IterationName, to: IterationStatus) {
    let Ok(loaded) = crate::config::Config::load(&paths.config()) else {
        return;
    };
    let md = entry.path.join(".braids/PROJECT.md");
    let Ok(bytes) = std::fs::read(&md) else {
        return;
    };
    let project = format::project::parse_project(&format::decode(&bytes), &md).value;
    let (event, text) = notice(&entry.slug, name, to);
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
            std::thread::sleep(std::time::Duration::from_millis(300));
            assert_eq!(
                status(),
                Some(IterationStatus::Active),
                "changed under the lock"
            );
            drop(held);
            let done = complete.join().unwrap().unwrap();
            assert_eq!((done.name, done.changed), (made.name, true));
        });
        assert_eq!(status(), Some(IterationStatus::Complete));
        assert_eq!(made.name.as_str(), "001");
        let err = set_status(&paths, "app", Some(1.into()), IterationStatus::Active).unwrap_err();
        assert!(err.to_string().contains("(4.5)"), "{err}");
    }
}
