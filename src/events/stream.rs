//! Every project's events as one ordered stream, and waiting for more.
//!
//! Within a project the order is the ids'. Across projects events are merged by time (then
//! project, then id) one head per project at a time, so reading a backlog holds one event per
//! project in memory besides the file names. [`Waker`] wakes a follower when a folder changes:
//! inotify through the `notify` crate, with a slow rescan beside it for folders that appear
//! later and for file systems where inotify says nothing (NFS); when no watch can be set up it
//! polls alone, twice a second. Neither is a busy loop.

use std::collections::{BTreeMap, BinaryHeap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::journal::Windowed;
use super::{Event, Journal};

/// One project's journal, under its slug.
#[derive(Debug, Clone)]
pub struct Source {
    pub slug: String,
    pub journal: Journal,
}

/// The last id read per project: where a follower goes on from.
pub type Cursor = BTreeMap<String, u64>;

/// An event file that could not be read: named, and skipped (a person can look at it).
#[derive(Debug)]
pub struct Unreadable {
    pub path: PathBuf,
    pub error: String,
}

struct Head {
    event: Event,
    source: usize,
}

impl PartialEq for Head {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other).is_eq()
    }
}
impl Eq for Head {}
impl PartialOrd for Head {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Head {
    /// Reversed: the heap's top is the earliest.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        let key = |h: &Head| (h.event.timestamp, h.event.project.clone(), h.event.id);
        key(other).cmp(&key(self))
    }
}

/// Reads the events after `cursor` from every source, earliest first, handing each to `each`
/// (which returns `false` to stop) and moving the cursor past it. Unreadable files go to
/// `bad` and are passed over.
pub fn read_after(
    sources: &[&Source],
    cursor: &mut Cursor,
    mut each: impl FnMut(&Event) -> bool,
    mut bad: impl FnMut(Unreadable),
) {
    let mut pending: Vec<Windowed> = sources
        .iter()
        .map(|s| {
            let after = cursor.get(&s.slug).copied().unwrap_or(0);
            s.journal.entries_after(after)
        })
        .collect();
    let mut next_of = |i: usize, bad: &mut dyn FnMut(Unreadable)| -> Option<Head> {
        for entry in pending[i].by_ref() {
            match entry.read() {
                Ok(mut event) => {
                    // The file's place is the truth about its id and project.
                    event.id = entry.id;
                    event.project.clone_from(&sources[i].slug);
                    return Some(Head { event, source: i });
                }
                Err(e) => bad(Unreadable {
                    path: entry.path(),
                    error: format!("{e:#}"),
                }),
            }
        }
        None
    };
    let mut heap = BinaryHeap::new();
    for i in 0..sources.len() {
        if let Some(h) = next_of(i, &mut bad) {
            heap.push(h);
        }
    }
    while let Some(Head { event, source }) = heap.pop() {
        cursor.insert(sources[source].slug.clone(), event.id);
        if !each(&event) {
            return;
        }
        if let Some(h) = next_of(source, &mut bad) {
            heap.push(h);
        }
    }
}

/// Moves the cursor to the newest event of every source, reading nothing: a follower that
/// starts "from now".
pub fn cursor_at_end(sources: &[&Source]) -> Cursor {
    sources
        .iter()
        .filter_map(|s| Some((s.slug.clone(), s.journal.listing().last()?.id)))
        .collect()
}

/// How a follower waits for folders to change.
pub struct Waker {
    rx: mpsc::Receiver<Vec<PathBuf>>,
    /// Kept alive for as long as the watches should be.
    _watcher: Option<notify::RecommendedWatcher>,
    watched: Vec<PathBuf>,
    /// How long to wait when nothing says a folder changed.
    pub rescan: Duration,
}

/// What ended a wait.
#[derive(Debug, PartialEq, Eq)]
pub enum Wake {
    /// These paths changed (files or folders inside a watched folder).
    Changed(Vec<PathBuf>),
    /// Nothing said anything: rescan everything.
    Rescan,
    /// The stop flag was raised.
    Stop,
}

/// With inotify: a slow safety rescan. Without: polling.
pub const RESCAN_WATCHED: Duration = Duration::from_secs(5);
const POLL: Duration = Duration::from_millis(500);
/// How often a wait looks at the stop flag.
const STOP_CHECK: Duration = Duration::from_millis(200);

impl Waker {
    /// Watches every source's events folder that exists now (and its `.claw` or project
    /// folder when it does not yet, so its first event wakes the follower too).
    pub fn new(sources: &[Source]) -> Waker {
        Waker::with_rescan(sources, RESCAN_WATCHED)
    }

    /// [`Waker::new`] with another safety rescan when every folder is watched: a test sets it
    /// long enough that only inotify can wake the follower.
    pub fn with_rescan(sources: &[Source], rescan_watched: Duration) -> Waker {
        use notify::Watcher as _;
        let (tx, rx) = mpsc::channel();
        let watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
            if let Ok(e) = res {
                let _ = tx.send(e.paths);
            }
        });
        let mut waker = Waker {
            rx,
            _watcher: None,
            watched: Vec::new(),
            rescan: POLL,
        };
        let Ok(mut watcher) = watcher else {
            return waker;
        };
        let mut all = true;
        for s in sources {
            let Some(target) = nearest_folder(&s.journal.dir) else {
                continue;
            };
            match watcher.watch(&target, notify::RecursiveMode::NonRecursive) {
                Ok(()) => waker.watched.push(target.to_path_buf()),
                Err(e) => {
                    tracing::debug!("cannot watch {}: {e}; polling", target.display());
                    all = false;
                }
            }
        }
        if all {
            waker.rescan = rescan_watched;
        }
        waker._watcher = Some(watcher);
        waker
    }

    /// Whether every folder is watched by inotify (otherwise some are polled).
    pub fn watching(&self) -> bool {
        self.rescan != POLL
    }

    /// Waits until a watched folder changes, `at_most` passes (never longer than the rescan
    /// period) or `stop` is raised; then takes what else arrived meanwhile.
    pub fn wait(&self, at_most: Duration, stop: &AtomicBool) -> Wake {
        let deadline = Instant::now() + at_most.min(self.rescan);
        loop {
            if stop.load(Ordering::SeqCst) {
                return Wake::Stop;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Wake::Rescan;
            }
            match self.rx.recv_timeout(left.min(STOP_CHECK)) {
                Ok(mut paths) => {
                    while let Ok(more) = self.rx.try_recv() {
                        paths.extend(more);
                    }
                    return Wake::Changed(paths);
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    std::thread::sleep(left.min(STOP_CHECK));
                }
            }
        }
    }

    /// Whether `source`'s events folder, or a folder on the way to it, appeared since its
    /// watch was set: the caller then makes a new waker, so the next write there wakes it too.
    pub fn outdated_for(&self, source: &Source) -> bool {
        nearest_folder(&source.journal.dir).is_some_and(|f| !self.watched.contains(&f))
    }
}

/// The events folder, or the closest of its two parents that exists: what a watch is set on.
fn nearest_folder(events: &std::path::Path) -> Option<PathBuf> {
    std::iter::successors(Some(events), |d| d.parent())
        .take(3)
        .find(|d| d.is_dir())
        .map(std::path::Path::to_path_buf)
}

/// The sources a wake concerns: those whose folder (or a parent of it) holds a changed path;
/// every source on a rescan.
pub fn woken<'a>(sources: &'a [Source], wake: &Wake) -> Vec<&'a Source> {
    match wake {
        Wake::Changed(paths) => sources
            .iter()
            .filter(|s| {
                let project = s.journal.dir.parent().and_then(|c| c.parent());
                paths.iter().any(|p| {
                    p.starts_with(&s.journal.dir)
                        || project.is_some_and(|root| {
                            p.parent() == Some(root) || p.parent() == s.journal.dir.parent()
                        })
                })
            })
            .collect(),
        Wake::Rescan => sources.iter().collect(),
        Wake::Stop => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Draft, Kind};
    use super::*;
    use chrono::{DateTime, Utc};

    fn t(s: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + s, 0).unwrap()
    }

    #[test]
    fn c8_5_merges_projects_by_time_and_resumes_from_the_cursor() {
        let dir = tempfile::tempdir().unwrap();
        let sources: Vec<Source> = ["a", "b"]
            .iter()
            .map(|s| {
                std::fs::create_dir(dir.path().join(s)).unwrap();
                Source {
                    slug: s.to_string(),
                    journal: Journal::of_project(&dir.path().join(s)),
                }
            })
            .collect();
        let put = |i: usize, at: i64| {
            sources[i]
                .journal
                .append(&sources[i].slug, vec![Draft::new(Kind::Error)], t(at))
                .unwrap();
        };
        put(0, 1);
        put(1, 2);
        put(0, 3);
        put(1, 3);
        let mut cursor = Cursor::new();
        let sources: Vec<&Source> = sources.iter().collect();
        let read = |cursor: &mut Cursor| {
            let mut seen = Vec::new();
            read_after(
                &sources,
                cursor,
                |e| {
                    seen.push(format!("{}{}", e.project, e.id));
                    true
                },
                |_| panic!(),
            );
            seen
        };
        assert_eq!(read(&mut cursor), ["a1", "b1", "a2", "b2"]);
        put(1, 4);
        assert_eq!(read(&mut cursor), ["b3"]);
        assert_eq!(cursor_at_end(&sources), cursor);
    }

    #[test]
    fn an_unreadable_event_is_named_and_passed_over() {
        let dir = tempfile::tempdir().unwrap();
        let s = Source {
            slug: "a".into(),
            journal: Journal::of_project(dir.path()),
        };
        s.journal
            .append(
                "a",
                vec![Draft::new(Kind::Error), Draft::new(Kind::Error)],
                t(1),
            )
            .unwrap();
        std::fs::write(s.journal.entries()[0].path(), "{half").unwrap();
        let mut bad = Vec::new();
        let mut ids = Vec::new();
        read_after(
            &[&s],
            &mut Cursor::new(),
            |e| {
                ids.push(e.id);
                true
            },
            |u| bad.push(u.path),
        );
        assert_eq!(ids, [2]);
        assert_eq!(bad.len(), 1);
    }
}
