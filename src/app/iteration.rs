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
use crate::lifecycle::transition;
pub use crate::lifecycle::{complete_if_done, notice, Change, Completion};

use anyhow::{anyhow, bail, Result};

use crate::format::{self, iteration, iteration::Iteration, registry::RegistryEntry};
use crate::model::{IterationName, IterationStatus};
use crate::system::paths::Paths;

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
    let dir = iteration::iterations_dir(&entry.path).join(name.as_str());
    // A project in the EDN layout gets its iterations in EDN too (CONTRACTS 1.7).
    let (file, text) = if format::layout::is_edn(&format::layout::project_file(&entry.path)) {
        let text = format!(
            "{{:number {} :status :planning :stories [] :notes []}}\n",
            format::edn::edit::edn_string(name.as_str())
        );
        (dir.join("iteration.edn"), text)
    } else {
        let text = crate::system::templates::render(
            crate::system::templates::ITERATION,
            &[("number", name.as_str())],
        );
        (dir.join("ITERATION.md"), text)
    };
    crate::system::atomic::write(&file, text.as_bytes())?;
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
        if to == IterationStatus::Active {
            crate::tick::orchestrator_state::wake(
                paths,
                crate::tick::orchestrator_state::WAKE_WAIT,
            );
        }
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

/// Sends the notice of a status change made outside a worker, when the project asks for it.
fn notify(paths: &Paths, entry: &RegistryEntry, name: IterationName, to: IterationStatus) {
    let Ok(loaded) = crate::config::Config::load(&paths.config()) else {
        return;
    };
    let md = format::layout::project_file(&entry.path);
    let Ok(bytes) = std::fs::read(&md) else {
        return;
    };
    let project = format::layout::parse_project(&format::decode(&bytes), &md).value;
    let (event, text) = notice(&entry.slug, name, to);
    let notifier = crate::notifier::from_config(&loaded.config.notify);
    crate::notifier::send(&notifier, &project, &entry.slug, event, None, &text);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Priority, ProjectStatus};
    use std::path::{Path, PathBuf};

    /// The fixed bug: `braids iteration complete` changed ITERATION.md and committed while a
    /// worker held the repository lock.
    /// A registered project `app` with a git repository, in `home`.
    fn project(home: &Path) -> (Paths, PathBuf) {
        let paths = Paths::new(home.to_path_buf(), None);
        let root = home.join("Projects/app");
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
        crate::system::atomic::write(&paths.registry(), row.as_bytes()).unwrap();
        (paths, root)
    }

    #[test]
    fn completing_an_iteration_never_commits_a_persons_unsaved_edit() {
        let home = tempfile::tempdir().unwrap();
        let (paths, root) = project(home.path());
        create(&paths, "app", None).unwrap();
        set_status(&paths, "app", None, IterationStatus::Active).unwrap();
        let file = iteration::read_iterations(&root).value[0].file();
        let mut text = std::fs::read_to_string(&file).unwrap();
        text.push_str("- app-late: typed by a person, not saved to git\n");
        std::fs::write(&file, &text).unwrap();

        set_status(&paths, "app", None, IterationStatus::Complete).unwrap();
        let committed = crate::git::head_blob(&root, &file).unwrap().unwrap();
        let committed = String::from_utf8(committed).unwrap();
        assert!(committed.contains("complete"), "{committed}");
        assert!(!committed.contains("app-late"), "{committed}");
        let working = std::fs::read_to_string(&file).unwrap();
        assert!(
            working.contains("app-late"),
            "the person's line stays: {working}"
        );
        assert_eq!(
            iteration::read_iterations(&root).value[0].status,
            Some(IterationStatus::Complete)
        );
        let dirty = crate::git::dirty(&root).unwrap();
        let rel = file.strip_prefix(&root).unwrap();
        assert!(
            dirty.contains_key(rel),
            "still the person's to commit: {dirty:?}"
        );
    }

    #[test]
    fn set_status_waits_for_the_repository_lock() {
        let home = tempfile::tempdir().unwrap();
        let (paths, root) = project(home.path());
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
