//! Unchanged since the last run costs no tracker work.
//!
//! A full run records, per project, a fingerprint of every file its observation read: the
//! tracker's state files ([`Tracker::state_files`]), PROJECT.md and the iteration files (their
//! directory and each ITERATION.md), each as (size, mtime, ctime, inode) or absent. The next
//! run that finds the same fingerprint reuses that run's tracker answers (bead statuses and
//! the ready list) instead of asking the tracker. Sessions are still surveyed every run. The
//! answers are kept with the rest of the project's observation in the observation cache
//! ([`super`]), each entry carrying its own fingerprints.
//!
//! Answers are only recorded when they can be trusted to stay true: the tracker says how long
//! ([`Tracker::answers_valid`]: forever for WORKPLAN.md, until the next deferral ends for br's
//! JSONL, never when br itself answered), and no file was written within [`RACY`] of the
//! observation (two writes inside one timestamp tick would look the same).
//!
//! The decisions ([`fingerprint`], [`settled`], [`Answers::reusable`]) are pure; [`stamp`] and
//! [`read_tracker`] are the I/O edge.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};

use crate::model::{Bead, BeadId, BeadStatus};
use crate::tracker::Tracker;

/// Files written this close to the observation are not vouched for: a second write within the
/// same timestamp tick (coarse on some file systems) would leave the same stamp.
pub const RACY: chrono::Duration = chrono::Duration::seconds(2);

/// What identifies one version of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    pub size: u64,
    /// Nanoseconds since the epoch.
    pub mtime: i128,
    pub ctime: i128,
    pub inode: u64,
}

impl Stamp {
    pub fn of(m: &std::fs::Metadata) -> Stamp {
        let ns = |s: i64, n: i64| i128::from(s) * 1_000_000_000 + i128::from(n);
        Stamp {
            size: m.len(),
            mtime: ns(m.mtime(), m.mtime_nsec()),
            ctime: ns(m.ctime(), m.ctime_nsec()),
            inode: m.ino(),
        }
    }
}

/// A file's stamp, or `None` when it does not exist (absence is part of the fingerprint).
pub fn stamp(path: &Path) -> Option<Stamp> {
    match std::fs::metadata(path) {
        Ok(m) => Some(Stamp::of(&m)),
        // A missing markdown file stands for its EDN form, so an edit there is seen too.
        Err(_) => crate::format::layout::edn_twin(path)
            .and_then(|p| std::fs::metadata(p).ok())
            .map(|m| Stamp::of(&m)),
    }
}

/// PROJECT.md, the iterations directory and `iterations/<name>/ITERATION.md` for every name
/// `listing` holds (sorted, as [`crate::format::iteration::list_entries`] gives them), in that
/// order. The directory's own stamp vouches for the listing: adding, removing or renaming an
/// entry changes it.
pub fn project_files<'a>(
    root: &Path,
    listing: impl IntoIterator<Item = &'a std::ffi::OsStr>,
) -> Vec<PathBuf> {
    let dot = root.join(".braids");
    let iterations = crate::format::iteration::iterations_dir(root);
    let mut files = vec![dot.join("PROJECT.md"), iterations.clone()];
    files.extend(
        listing
            .into_iter()
            .map(|name| iterations.join(name).join("ITERATION.md")),
    );
    files
}

/// Stamps every file, in order.
pub fn stamps(files: Vec<PathBuf>) -> Vec<(PathBuf, Option<Stamp>)> {
    files
        .into_iter()
        .map(|f| {
            let s = stamp(&f);
            (f, s)
        })
        .collect()
}

/// One number for all the stamps (FNV-1a over paths and stamps, eight bytes at a step):
/// stable across builds and platforms, unlike `std`'s hasher. Each step is a bijection of the
/// state, so stamps that differ in one word always differ in the result.
pub fn fingerprint(stamps: &[(PathBuf, Option<Stamp>)]) -> u64 {
    const PRIME: u64 = 0x0100_0000_01b3;
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        let mut words = bytes.chunks_exact(8);
        for w in &mut words {
            h = (h ^ u64::from_le_bytes(w.try_into().expect("eight bytes"))).wrapping_mul(PRIME);
        }
        for b in words.remainder() {
            h = (h ^ u64::from(*b)).wrapping_mul(PRIME);
        }
    };
    for (path, s) in stamps {
        eat(path.as_os_str().as_encoded_bytes());
        eat(&[0]);
        match s {
            None => eat(b"-"),
            Some(s) => {
                eat(&s.size.to_le_bytes());
                eat(&s.mtime.to_le_bytes());
                eat(&s.ctime.to_le_bytes());
                eat(&s.inode.to_le_bytes());
            }
        }
    }
    h
}

/// Whether every file was last written at least [`RACY`] before `now`.
pub fn settled(stamps: &[(PathBuf, Option<Stamp>)], now: DateTime<Utc>) -> bool {
    let limit = i128::from(now.timestamp_nanos_opt().unwrap_or(i64::MAX))
        - i128::from(RACY.num_nanoseconds().unwrap_or(0));
    stamps
        .iter()
        .filter_map(|(_, s)| s.as_ref())
        .all(|s| s.mtime < limit)
}

/// One project's tracker answers, as a full run found them.
#[derive(Debug, Clone, PartialEq)]
pub struct Answers {
    /// Of the project's files and the tracker's.
    pub fingerprint: u64,
    /// When the answers stop being true though no file changed (a deferral ends).
    pub until: Option<DateTime<Utc>>,
    /// Every listed bead's status.
    pub beads: Vec<(BeadId, BeadStatus)>,
    /// The ready beads in the tracker's order, when that run asked: id, title and status, all
    /// a tick reads of them.
    pub ready: Option<Vec<Bead>>,
}

impl Answers {
    /// Whether these answers stand in for the tracker now: the files are as they were, no
    /// deferral has ended, and the ready list is there if this run needs one.
    pub fn reusable(&self, fingerprint: u64, now: DateTime<Utc>, eligible: bool) -> bool {
        let needs_ready = eligible && self.beads.iter().any(|(_, s)| *s == BeadStatus::Open);
        self.fingerprint == fingerprint
            && self.until.is_none_or(|u| now < u)
            && (!needs_ready || self.ready.is_some())
    }

    /// What a run that asked the tracker may record, if anything: nothing when the tracker
    /// cannot vouch for its answers or a file was written too recently.
    pub fn record(
        tracker: &dyn Tracker,
        stamps: &[(PathBuf, Option<Stamp>)],
        now: DateTime<Utc>,
        listed: &[Bead],
        ready: Option<&[Bead]>,
    ) -> Option<Answers> {
        let until = tracker.answers_valid()?;
        if !settled(stamps, now) {
            return None;
        }
        Some(Answers {
            fingerprint: fingerprint(stamps),
            until,
            beads: listed.iter().map(|b| (b.id.clone(), b.status)).collect(),
            ready: ready.map(|r| {
                r.iter()
                    .map(|b| Bead::new(b.id.clone(), b.title.clone(), b.status))
                    .collect()
            }),
        })
    }
}

/// One project's tracker answers for this run.
pub struct TrackerRead {
    /// Every listed bead's status.
    pub beads: Vec<(BeadId, BeadStatus)>,
    /// The ready beads, when asked (an eligible project with an open bead).
    pub ready: Option<Result<Vec<Bead>, crate::tracker::TrackerError>>,
    /// What this run may record for the next one.
    pub answers: Option<Answers>,
    /// How the answers were had, for `-v`.
    pub path: std::borrow::Cow<'static, str>,
}

/// Asks the tracker (`list`, then `ready` where an eligible project has an open bead), or
/// reuses `prior` when the files are as they were. `stamps` is `None` when this run neither
/// records nor has anything to compare with; `recording` says whether it records (only then
/// are the answers kept for the next run, and only then is `prior` copied rather than moved).
pub fn read_tracker(
    tracker: &dyn Tracker,
    prior: Option<Answers>,
    stamps: Option<&[(PathBuf, Option<Stamp>)]>,
    recording: bool,
    eligible: bool,
    now: DateTime<Utc>,
) -> Result<TrackerRead, crate::tracker::TrackerError> {
    let fp = stamps.map(fingerprint);
    if let (Some(mut a), Some(fp)) = (prior, fp) {
        if a.reusable(fp, now, eligible) {
            let (beads, ready) = match recording {
                true => (a.beads.clone(), a.ready.clone()),
                false => (std::mem::take(&mut a.beads), a.ready.take()),
            };
            return Ok(TrackerRead {
                beads,
                ready: ready.map(Ok),
                answers: recording.then_some(a),
                path: "unchanged since the last full run".into(),
            });
        }
    }
    let listed = tracker.list()?;
    let ready = (eligible && listed.iter().any(|b| b.status == BeadStatus::Open))
        .then(|| tracker.ready_among(&listed));
    let answers = match (stamps.filter(|_| recording), &ready) {
        (Some(s), None) => Answers::record(tracker, s, now, &listed, None),
        (Some(s), Some(Ok(r))) => Answers::record(tracker, s, now, &listed, Some(r)),
        _ => None,
    };
    Ok(TrackerRead {
        beads: listed.into_iter().map(|b| (b.id, b.status)).collect(),
        ready,
        answers,
        path: tracker
            .read_path()
            .map_or(tracker.kind().as_str().into(), Into::into),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at(secs: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_800_000_000 + secs, 0).unwrap()
    }

    fn st(secs: i64, size: u64, inode: u64) -> Option<Stamp> {
        let ns = i128::from(1_800_000_000 + secs) * 1_000_000_000;
        Some(Stamp {
            size,
            mtime: ns,
            ctime: ns,
            inode,
        })
    }

    #[test]
    fn c5_2_fingerprints_change_with_any_stamp_and_only_then() {
        let files =
            |s: Option<Stamp>| vec![(PathBuf::from("/p/a"), st(0, 1, 1)), ("/p/b".into(), s)];
        let base = fingerprint(&files(st(0, 5, 7)));
        assert_eq!(base, fingerprint(&files(st(0, 5, 7))));
        for other in [st(1, 5, 7), st(0, 6, 7), st(0, 5, 8), None] {
            assert_ne!(base, fingerprint(&files(other)));
        }
        let renamed = vec![
            (PathBuf::from("/q/a"), st(0, 1, 1)),
            ("/p/b".into(), st(0, 5, 7)),
        ];
        assert_ne!(base, fingerprint(&renamed));
    }

    #[test]
    fn c5_2_files_written_just_now_are_not_vouched_for() {
        let files = vec![
            (PathBuf::from("/p/a"), st(0, 1, 1)),
            ("/p/gone".into(), None),
        ];
        assert!(settled(&files, at(3)));
        assert!(!settled(&files, at(1)));
    }

    #[test]
    fn c5_2_answers_are_reused_only_while_they_hold() {
        let open = (BeadId::new("t-1").unwrap(), BeadStatus::Open);
        let a = Answers {
            fingerprint: 0xf,
            until: Some(at(100)),
            beads: vec![open.clone()],
            ready: None,
        };
        assert!(a.reusable(0xf, at(0), false));
        assert!(!a.reusable(0xe, at(0), false), "a file changed");
        assert!(!a.reusable(0xf, at(100), false), "a deferral ended");
        assert!(
            !a.reusable(0xf, at(0), true),
            "no ready list, and one is needed"
        );
        let with_ready = Answers {
            ready: Some(vec![]),
            until: None,
            ..a
        };
        assert!(with_ready.reusable(0xf, at(1_000_000), true));
    }
}
