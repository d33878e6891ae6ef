//! One project's event folder, `.claw/events/`: appending under a lock, listing in id order, and
//! pruning what a supervisor has processed.
//!
//! An append takes the folder's `flock`, reads the counter `.seq` (the last id handed out),
//! writes the counter forward and only then writes the events, each by temp + fsync + link
//! (`atomic::publish`: a watcher's `inotifywait -e create` sees it, whole, under its final name). A
//! crash anywhere leaves whole events and, at worst, a gap in the ids; an id is never handed out
//! twice. The counter is only a cache of the largest id: when it is missing or unreadable the
//! folder is scanned, and retention never prunes the newest event, so the scan always finds the
//! largest id there ever was.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, Context as _, Result};
use chrono::{DateTime, Utc};

use super::{Draft, Event};

const SEQ: &str = ".seq";
const LOCK: &str = ".lock";
/// The ids' width in file names: wide enough that `ls` and a shell glob list them in order.
const WIDTH: usize = 6;
const LOCK_WAIT: Duration = Duration::from_secs(30);
/// Files a killed writer left half-written are removed by retention after this long.
const STALE_TEMP: Duration = Duration::from_secs(3600);

/// One `NNNNNN-<type>.event` file. Small on purpose: listing a folder of 100,000 events
/// holds one of these per event, sharing the folder's path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub id: u64,
    dir: Arc<Path>,
    name: Box<str>,
}

impl Entry {
    pub fn path(&self) -> PathBuf {
        self.dir.join(&*self.name)
    }

    /// The supervisor's marker: `<file>.processed`.
    pub fn marker(&self) -> PathBuf {
        self.dir.join(format!("{}.processed", self.name))
    }

    /// The type its file name gives (`task_complete` of `000007-task-complete.event`), so a
    /// reader looking for some types opens only those files.
    pub fn kind(&self) -> String {
        let stem = self.name.strip_suffix(".event").unwrap_or(&self.name);
        stem.split_once('-')
            .map_or("", |(_, k)| k)
            .replace('-', "_")
    }

    pub fn is_processed(&self) -> bool {
        self.marker().exists()
    }

    /// The event, or why it cannot be read (naming the file).
    pub fn read(&self) -> Result<Event> {
        let path = self.path();
        let bytes = crate::system::atomic::read(&path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let event: Event = serde_json::from_slice(&bytes)
            .with_context(|| format!("{} is not a valid event", path.display()))?;
        Ok(event)
    }
}

#[derive(Debug, Clone)]
pub struct Journal {
    pub dir: PathBuf,
}

impl Journal {
    pub fn of_project(root: &Path) -> Journal {
        Journal {
            dir: root.join(super::CLAW_DIR).join("events"),
        }
    }

    /// Writes `drafts` as the next events, in order, and returns them as written.
    pub fn append(&self, slug: &str, drafts: Vec<Draft>, now: DateTime<Utc>) -> Result<Vec<Event>> {
        if drafts.is_empty() {
            return Ok(Vec::new());
        }
        self.hold()?.append(slug, drafts, now)
    }

    /// Takes the journal's lock until the guard is dropped: events written through it come
    /// before any another process writes meanwhile (the tick holds it across a spawn, so the
    /// worker's first event follows the tick's `worker_spawned`).
    pub fn hold(&self) -> Result<Held<'_>> {
        self.prepare()?;
        Ok(Held {
            journal: self,
            _lock: self.lock()?,
        })
    }

    /// Applies `f` to status.json under the journal's lock (a worker's step, a tick's
    /// observation), then settles and writes it when it changed.
    pub fn update_status(
        &self,
        now: DateTime<Utc>,
        f: impl FnOnce(&mut super::status::Status),
    ) -> Result<()> {
        self.prepare()?;
        let _lock = self.lock()?;
        let mut status = self.load_status(now);
        f(&mut status);
        status.settle(now);
        super::status::store(&self.status_path(), &status)
    }

    pub fn status_path(&self) -> PathBuf {
        self.dir.with_file_name("status.json")
    }

    fn load_status(&self, now: DateTime<Utc>) -> super::status::Status {
        super::status::load(&self.status_path(), now)
    }

    /// The events in id order, listed under the folder's lock: a directory listing taken while
    /// a writer adds files may show a later event and not an earlier one, and a reader that
    /// moved past the missing one would never see it. For readers; a writer holding the lock
    /// uses [`Journal::entries`].
    pub fn listing(&self) -> Vec<Entry> {
        let _lock = read_lock(&self.dir);
        self.entries()
    }

    /// The events in id order (names only; nothing is read), without the lock.
    pub fn entries(&self) -> Vec<Entry> {
        let Ok(rd) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let dir: Arc<Path> = Arc::from(self.dir.as_path());
        let mut out: Vec<Entry> = rd
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let name = e.file_name();
                let name = name.to_str()?;
                let id = parse_name(name)?;
                Some(Entry {
                    id,
                    dir: dir.clone(),
                    name: name.into(),
                })
            })
            .collect();
        out.sort_by_key(|e| e.id);
        out
    }

    /// The events after id `after`, in id order, read from the folder a window of ids at a
    /// time: memory stays bounded however many events the folder holds, at the cost of one
    /// directory scan per window.
    pub fn entries_after(&self, after: u64) -> Windowed {
        Windowed {
            dir: Arc::from(self.dir.as_path()),
            next: after,
            buffer: std::collections::VecDeque::new(),
            done: false,
        }
    }

    /// The largest id handed out: the counter, or a scan when it is missing or unreadable.
    fn last_id(&self) -> u64 {
        let counted = std::fs::read_to_string(self.dir.join(SEQ))
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok());
        match counted {
            Some(n) => n,
            None => self.entries().last().map_or(0, |e| e.id),
        }
    }

    /// Removes processed events whose time is before `cutoff` (with their markers), never the
    /// newest event, and half-written temp files a killed writer left. Returns how many events
    /// went.
    pub fn prune(&self, cutoff: DateTime<Utc>) -> Result<usize> {
        if !self.dir.is_dir() {
            return Ok(0);
        }
        let _lock = self.lock()?;
        let entries = self.entries();
        let newest = entries.last().map(|e| e.id);
        let mut removed = 0;
        for e in &entries {
            if Some(e.id) == newest || !e.is_processed() {
                continue;
            }
            // An event that cannot be read is kept for a person to look at.
            let Ok(event) = e.read() else { continue };
            if event.timestamp >= cutoff {
                continue;
            }
            std::fs::remove_file(e.path())
                .with_context(|| format!("cannot remove {}", e.path().display()))?;
            let _ = std::fs::remove_file(e.marker());
            removed += 1;
        }
        self.remove_stale_temps();
        Ok(removed)
    }

    fn remove_stale_temps(&self) {
        let Ok(rd) = std::fs::read_dir(&self.dir) else {
            return;
        };
        for e in rd.filter_map(|e| e.ok()) {
            let stale = e
                .metadata()
                .ok()
                .and_then(|m| m.modified().ok())
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age > STALE_TEMP);
            if stale && e.file_name().to_string_lossy().starts_with(".braids-tmp-") {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }

    /// The folder, and the `.gitignore`s that keep braids' files out of people's commits.
    fn prepare(&self) -> Result<()> {
        if self.dir.join(LOCK).exists() {
            return Ok(());
        }
        // Never creates the project itself: a project folder that went away stays away.
        let project = self.dir.parent().and_then(|c| c.parent());
        if let Some(p) = project.filter(|p| !p.is_dir()) {
            anyhow::bail!("the project folder {} does not exist", p.display());
        }
        std::fs::create_dir_all(&self.dir)
            .with_context(|| format!("cannot create {}", self.dir.display()))?;
        crate::system::atomic::write_new(&self.dir.join(".gitignore"), b"*\n")?;
        if let Some(claw) = self.dir.parent() {
            crate::system::atomic::write_new(&claw.join(".gitignore"), GITIGNORE.as_bytes())?;
        }
        Ok(())
    }

    fn lock(&self) -> Result<crate::system::lock::TickLock> {
        let path = self.dir.join(LOCK);
        crate::system::lock::TickLock::acquire(&path, LOCK_WAIT)
            .with_context(|| format!("cannot lock {}", path.display()))?
            .ok_or_else(|| anyhow!("{} is held by another process", path.display()))
    }
}

/// How many ids one scan of [`Journal::entries_after`] takes.
const WINDOW: u64 = 16_384;

/// See [`Journal::entries_after`].
pub struct Windowed {
    dir: Arc<Path>,
    /// Every id up to this one has been handed out.
    next: u64,
    buffer: std::collections::VecDeque<Entry>,
    done: bool,
}

impl Windowed {
    /// One scan: the entries in `(next, next + WINDOW]`, or, when a gap is wider than the
    /// window, from the first id past it.
    fn fill(&mut self) {
        let _lock = read_lock(&self.dir);
        let Ok(rd) = std::fs::read_dir(&self.dir) else {
            self.done = true;
            return;
        };
        let (lo, hi) = (self.next, self.next.saturating_add(WINDOW));
        let mut beyond: Option<u64> = None;
        let mut found = Vec::new();
        for e in rd.filter_map(|e| e.ok()) {
            let name = e.file_name();
            let Some((id, name)) = name.to_str().and_then(|n| Some((parse_name(n)?, n))) else {
                continue;
            };
            if id > lo && id <= hi {
                found.push(Entry {
                    id,
                    dir: self.dir.clone(),
                    name: name.into(),
                });
            } else if id > hi {
                beyond = Some(beyond.map_or(id, |b| b.min(id)));
            }
        }
        found.sort_by_key(|e| e.id);
        self.buffer.extend(found);
        match (self.buffer.is_empty(), beyond) {
            (_, None) => {
                self.next = hi;
                self.done = true;
            }
            (false, Some(_)) => self.next = hi,
            (true, Some(b)) => {
                self.next = b - 1;
                self.fill();
            }
        }
    }
}

impl Iterator for Windowed {
    type Item = Entry;

    fn next(&mut self) -> Option<Entry> {
        if self.buffer.is_empty() && !self.done {
            self.fill();
        }
        self.buffer.pop_front()
    }
}

/// The folder's lock for a reader, when the folder has one (a reader never creates it); `None`
/// when there is none or it cannot be had in time (the listing goes on without it).
fn read_lock(dir: &Path) -> Option<crate::system::lock::TickLock> {
    let path = dir.join(LOCK);
    if !path.exists() {
        return None;
    }
    crate::system::lock::TickLock::acquire(&path, LOCK_WAIT)
        .ok()
        .flatten()
}

/// A held journal lock: see [`Journal::hold`].
pub struct Held<'j> {
    journal: &'j Journal,
    _lock: crate::system::lock::TickLock,
}

impl Held<'_> {
    /// Writes `drafts` as the next events and applies them to status.json.
    pub fn append(&self, slug: &str, drafts: Vec<Draft>, now: DateTime<Utc>) -> Result<Vec<Event>> {
        let j = self.journal;
        let last = j.last_id();
        let n = drafts.len() as u64;
        crate::system::atomic::write(&j.dir.join(SEQ), format!("{}\n", last + n).as_bytes())?;
        crate::crash_point!("events::after_seq");
        let mut written = Vec::with_capacity(drafts.len());
        for (i, d) in drafts.into_iter().enumerate() {
            let event = Event {
                id: last + 1 + i as u64,
                kind: d.kind.as_str().to_string(),
                timestamp: now,
                project: slug.to_string(),
                bead: d.bead,
                fields: d.fields,
            };
            let name = format!("{:0WIDTH$}-{}.event", event.id, d.kind.file_part());
            // One line: `cat *.event >> log.jsonl` is JSON Lines.
            let mut bytes = serde_json::to_vec(&event)?;
            bytes.push(b'\n');
            crate::system::atomic::publish(&j.dir.join(name), &bytes)?;
            written.push(event);
        }
        let mut status = j.load_status(now);
        for e in &written {
            status.apply(e);
        }
        status.settle(now);
        super::status::store(&j.status_path(), &status)?;
        Ok(written)
    }
}

const GITIGNORE: &str = "# Written by braids for supervisors; not part of the project's history.\n/.gitignore\n/events/\n/status.json\n/context/\n/loop.json\n/ISSUES.md\n/.workplan.lock\n";

/// `000042-task-complete.event` → 42; anything else (markers, temp files, the counter) → `None`.
pub fn parse_name(name: &str) -> Option<u64> {
    let stem = name.strip_suffix(".event")?;
    let (digits, kind) = stem.split_once('-')?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) || kind.is_empty() {
        return None;
    }
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::super::Kind;
    use super::*;

    fn journal() -> (tempfile::TempDir, Journal) {
        let dir = tempfile::tempdir().unwrap();
        let j = Journal::of_project(dir.path());
        (dir, j)
    }

    #[test]
    fn names_parse_only_events() {
        assert_eq!(parse_name("000042-task-complete.event"), Some(42));
        assert_eq!(parse_name("7-error.event"), Some(7));
        for bad in [
            "000042-task-complete.event.processed",
            ".seq",
            ".braids-tmp-abc",
            "-error.event",
            "42.event",
            "4a-error.event",
            "000001-.event",
        ] {
            assert_eq!(parse_name(bad), None, "{bad}");
        }
    }

    #[test]
    fn c8_1_appends_in_order_with_names_the_seed_uses() {
        let (_d, j) = journal();
        let now = Utc::now();
        let a = j
            .append("p", vec![Draft::new(Kind::TaskStarted).bead("p-1")], now)
            .unwrap();
        let b = j
            .append(
                "p",
                vec![
                    Draft::new(Kind::TaskComplete).with("duration_seconds", 3),
                    Draft::new(Kind::Error).with("message", "x"),
                ],
                now,
            )
            .unwrap();
        assert_eq!(a[0].id, 1);
        assert_eq!(b.iter().map(|e| e.id).collect::<Vec<_>>(), vec![2, 3]);
        let names: Vec<String> = j
            .entries()
            .iter()
            .map(|e| e.path().file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            [
                "000001-task-started.event",
                "000002-task-complete.event",
                "000003-error.event"
            ]
        );
        let read = j.entries()[1].read().unwrap();
        assert_eq!(read, b[0]);
        assert_eq!(read.fields["duration_seconds"], 3);
        assert!(j.dir.join(".gitignore").is_file());
        assert!(j.dir.parent().unwrap().join(".gitignore").is_file());
    }

    #[test]
    fn c8_5_windowed_listing_finds_every_event_across_windows_and_gaps() {
        let (dir, j) = journal();
        std::fs::create_dir_all(&j.dir).unwrap();
        let ids: Vec<u64> = [1u64, 2, 5]
            .into_iter()
            .chain(WINDOW - 1..=WINDOW + 2)
            .chain([5 * WINDOW + 3, 5 * WINDOW + 4])
            .collect();
        for id in &ids {
            std::fs::write(j.dir.join(format!("{id:06}-error.event")), "{}").unwrap();
        }
        std::fs::write(j.dir.join("000003-error.event.processed"), "").unwrap();
        let all: Vec<u64> = j.entries_after(0).map(|e| e.id).collect();
        assert_eq!(all, ids);
        let after: Vec<u64> = j.entries_after(WINDOW).map(|e| e.id).collect();
        assert_eq!(after, ids[5..]);
        assert_eq!(j.entries_after(10 * WINDOW).count(), 0);
        drop(dir);
    }

    #[test]
    fn c8_1_a_lost_counter_is_recovered_from_the_folder_and_ids_never_go_back() {
        let (_d, j) = journal();
        let now = Utc::now();
        let drafts = || vec![Draft::new(Kind::Error), Draft::new(Kind::Error)];
        j.append("p", drafts(), now).unwrap();
        std::fs::remove_file(j.dir.join(SEQ)).unwrap();
        assert_eq!(j.append("p", drafts(), now).unwrap()[0].id, 3);
        std::fs::write(j.dir.join(SEQ), "garbage").unwrap();
        assert_eq!(j.append("p", drafts(), now).unwrap()[0].id, 5);
        // A counter ahead of the folder (a crash after it was written) leaves a gap.
        std::fs::write(j.dir.join(SEQ), "10\n").unwrap();
        assert_eq!(j.append("p", drafts(), now).unwrap()[0].id, 11);
    }

    #[test]
    fn c8_3_prune_takes_only_old_processed_events_and_never_the_newest() {
        let (_d, j) = journal();
        let old = Utc::now() - chrono::Duration::days(40);
        j.append("p", (0..4).map(|_| Draft::new(Kind::Error)).collect(), old)
            .unwrap();
        j.append("p", vec![Draft::new(Kind::Error)], Utc::now())
            .unwrap();
        let all = j.entries();
        // 1 and 2 processed and old; 3 old but unprocessed; 4 old, processed, newest-but-one;
        // 5 new and processed.
        for e in [&all[0], &all[1], &all[3], &all[4]] {
            std::fs::write(e.marker(), "").unwrap();
        }
        let cutoff = Utc::now() - chrono::Duration::days(30);
        assert_eq!(j.prune(cutoff).unwrap(), 3);
        let left: Vec<u64> = j.entries().iter().map(|e| e.id).collect();
        assert_eq!(left, vec![3, 5]);
        assert!(!all[0].marker().exists());
        // Everything old and processed, the newest included: the newest stays, so a lost
        // counter is still recovered past it.
        std::fs::write(all[2].marker(), "").unwrap();
        let future = Utc::now() + chrono::Duration::days(1);
        assert_eq!(j.prune(future).unwrap(), 1);
        std::fs::remove_file(j.dir.join(SEQ)).unwrap();
        assert_eq!(
            j.append("p", vec![Draft::new(Kind::Error)], Utc::now())
                .unwrap()[0]
                .id,
            6
        );
    }
}
