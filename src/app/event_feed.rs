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
    each: impl FnMut(&Event) -> bool,
) {
    follow_rescanning(sources, cursor, stop, stream::RESCAN_WATCHED, each);
}

/// [`follow`] with the given safety rescan while inotify watches every folder.
fn follow_rescanning(
    sources: &[Source],
    cursor: &mut Cursor,
    stop: &AtomicBool,
    rescan: Duration,
    mut each: impl FnMut(&Event) -> bool,
) {
    let going = std::cell::Cell::new(true);
    let mut take = |e: &Event| {
        going.set(each(e));
        going.get()
    };
    // Watching first: an event written while the backlog is read wakes the loop below.
    let mut waker = Waker::with_rescan(sources, rescan);
    list(sources, cursor, &mut take);
    while going.get() {
        let wake = waker.wait(Duration::from_secs(3600), stop);
        if wake == Wake::Stop {
            return;
        }
        let woken = stream::woken(sources, &wake);
        stream::read_after(&woken, cursor, &mut take, warn);
        // A folder that appeared since is watched itself from now on.
        if woken.iter().any(|s| waker.outdated_for(s)) {
            waker = Waker::with_rescan(sources, rescan);
            // Whatever was written while the new watches were set up.
            let all: Vec<&Source> = sources.iter().collect();
            stream::read_after(&all, cursor, &mut take, warn);
        }
    }
}

fn warn(u: Unreadable) {
    tracing::warn!("skipping {}: {}", u.path.display(), u.error);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::{Draft, Kind};
    use std::sync::atomic::Ordering;
    use std::sync::Arc;

    /// With the safety rescan an hour away, only inotify can wake the follower: each event,
    /// in a folder that exists and in one whose parents appear only with its first event, is
    /// seen while the test waits (30 s at most, so load cannot fail it; the time it takes is
    /// `cargo bench --bench events`'s).
    #[test]
    fn c8_5_a_follower_is_woken_by_each_write_not_by_the_rescan() {
        let dir = tempfile::tempdir().unwrap();
        let roots: Vec<_> = ["a", "b"].iter().map(|s| dir.path().join(s)).collect();
        std::fs::create_dir(&roots[0]).unwrap();
        std::fs::create_dir(&roots[1]).unwrap();
        let a = Journal::of_project(&roots[0]);
        a.append("a", vec![Draft::new(Kind::Error)], chrono::Utc::now())
            .unwrap();
        let sources: Vec<Source> = ["a", "b"]
            .iter()
            .zip(&roots)
            .map(|(s, r)| Source {
                slug: s.to_string(),
                journal: Journal::of_project(r),
            })
            .collect();
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = std::sync::mpsc::channel();
        let follower = {
            let stop = stop.clone();
            let sources = sources.clone();
            std::thread::spawn(move || {
                let mut cursor = Cursor::new();
                follow_rescanning(
                    &sources,
                    &mut cursor,
                    &stop,
                    Duration::from_secs(3600),
                    |e| tx.send(format!("{}{}", e.project, e.id)).is_ok(),
                );
            })
        };
        let next = || rx.recv_timeout(Duration::from_secs(30));
        assert_eq!(next().as_deref(), Ok("a1"), "the backlog");
        // `b` has no `.braids` folder yet: its first event makes both folders.
        for (i, want) in ["b1", "a2", "b2", "a3", "b3"].iter().enumerate() {
            let (slug, journal) = if i % 2 == 0 {
                ("b", &sources[1].journal)
            } else {
                ("a", &sources[0].journal)
            };
            journal
                .append(slug, vec![Draft::new(Kind::Error)], chrono::Utc::now())
                .unwrap();
            assert_eq!(next().as_deref(), Ok(*want), "woken by the write of {want}");
        }
        stop.store(true, Ordering::SeqCst);
        follower.join().unwrap();
    }
}
