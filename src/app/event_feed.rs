//! `braids events`: every project's events as one ordered stream, once or followed live.

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::{bail, Result};

use crate::events::stream::{self, Cursor, Source, Unreadable, Wake, Waker};
use crate::events::{Event, Journal};
use crate::system::paths::Paths;

/// The registry's projects as event sources, or just `project`. An unknown project is an
/// error naming the registry.
pub fn sources(paths: &Paths, project: Option<&str>) -> Result<Vec<Source>> {
    if !crate::format::layout::registry_file(paths).is_file() {
        bail!(
            "{} does not exist, so there are no projects and no events; run `braids init` (HOME is {})",
            paths.registry().display(),
            paths.home.display()
        );
    }
    let registry = crate::format::registry::read_registry(paths).value;
    let all: Vec<Source> = registry
        .entries
        .iter()
        .filter(|e| project.is_none_or(|p| p == e.slug))
        .map(|e| Source {
            slug: e.slug.clone(),
            journal: Journal::of_project(&e.path),
        })
        .collect();
    if let (Some(p), true) = (project, all.is_empty()) {
        bail!(
            "no project named {p} in {}; `braids status` lists them",
            paths.registry().display()
        );
    }
    Ok(all)
}

/// Where reading starts: after id `since` in every project (ids are per project), or at the
/// beginning.
pub fn cursor(sources: &[Source], since: Option<u64>) -> Cursor {
    match since {
        Some(n) => sources.iter().map(|s| (s.slug.clone(), n)).collect(),
        None => Cursor::new(),
    }
}

/// Hands every event after `cursor` to `each`, earliest first; unreadable files are logged.
pub fn list(sources: &[Source], cursor: &mut Cursor, each: impl FnMut(&Event) -> bool) {
    let all: Vec<&Source> = sources.iter().collect();
    stream::read_after(&all, cursor, each, warn);
}

/// [`list`], then every new event as it is written, until `stop` is raised or `each` returns
/// `false`.
pub fn follow(
    sources: &[Source],
    cursor: &mut Cursor,
    stop: &AtomicBool,
    mut each: impl FnMut(&Event) -> bool,
) {
    let going = std::cell::Cell::new(true);
    let mut take = |e: &Event| {
        going.set(each(e));
        going.get()
    };
    // Watching first: an event written while the backlog is read wakes the loop below.
    let mut waker = Waker::new(sources);
    list(sources, cursor, &mut take);
    while going.get() {
        let wake = waker.wait(Duration::from_secs(3600), stop);
        if wake == Wake::Stop {
            return;
        }
        let woken = stream::woken(sources, &wake);
        stream::read_after(&woken, cursor, &mut take, warn);
        // A folder that appeared since is watched itself from now on.
        if woken
            .iter()
            .any(|s| s.journal.dir.is_dir() && !waker.watches_exactly(&s.journal.dir))
        {
            waker = Waker::new(sources);
            // Whatever was written while the new watches were set up.
            let all: Vec<&Source> = sources.iter().collect();
            stream::read_after(&all, cursor, &mut take, warn);
        }
    }
}

fn warn(u: Unreadable) {
    tracing::warn!("skipping {}: {}", u.path.display(), u.error);
}
