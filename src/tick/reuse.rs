//! Unchanged since the last run costs no tracker work.
//!
//! A full run records, per project, a fingerprint of every file its observation read: the
//! tracker's state files ([`Tracker::state_files`]), PROJECT.md and the iteration files (their
//! directory and each ITERATION.md), each as (size, mtime, ctime, inode) or absent. The next
//! run that finds the same fingerprint reuses that run's tracker answers (bead statuses and
//! the ready list) instead of asking the tracker. Sessions are still surveyed every run.
//!
//! The fingerprints live in the state file ([`OrchestratorState::tracker_fingerprints`], small,
//! read by every run); the answers they vouch for live beside it in `tracker-cache.json`,
//! read only by full runs and written before the state, each entry carrying its own
//! fingerprint, so a run killed between the two writes costs a re-read, never a wrong answer.
//!
//! Answers are only recorded when they can be trusted to stay true: the tracker says how long
//! ([`Tracker::answers_valid`]: forever for WORKPLAN.md, until the next deferral ends for br's
//! JSONL, never when br itself answered), and no file was written within [`RACY`] of the
//! observation (two writes inside one timestamp tick would look the same).
//!
//! The decisions ([`fingerprint`], [`settled`], [`Answers::reusable`]) are pure; [`stamp`],
//! [`project_files`], [`Prior::load`] and [`save`] are the I/O edge.
//!
//! [`OrchestratorState::tracker_fingerprints`]: crate::state::OrchestratorState::tracker_fingerprints

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::model::{Bead, BeadId, BeadStatus};
use crate::tracker::Tracker;

/// Files written this close to the observation are not vouched for: a second write within the
/// same timestamp tick (coarse on some file systems) would leave the same stamp.
pub const RACY: chrono::Duration = chrono::Duration::seconds(2);

/// The sidecar holding the answers, in braids' own directory.
pub const CACHE_FILE: &str = "tracker-cache.json";

/// What identifies one version of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    pub size: u64,
    /// Nanoseconds since the epoch.
    pub mtime: i128,
    pub ctime: i128,
    pub inode: u64,
}

/// A file's stamp, or `None` when it does not exist (absence is part of the fingerprint).
pub fn stamp(path: &Path) -> Option<Stamp> {
    let m = std::fs::metadata(path).ok()?;
    let ns = |s: i64, n: i64| i128::from(s) * 1_000_000_000 + i128::from(n);
    Some(Stamp {
        size: m.len(),
        mtime: ns(m.mtime(), m.mtime_nsec()),
        ctime: ns(m.ctime(), m.ctime_nsec()),
        inode: m.ino(),
    })
}

/// PROJECT.md, the iterations directory and every `iterations/*/ITERATION.md`, in a stable
/// order.
pub fn project_files(root: &Path) -> Vec<PathBuf> {
    let dot = root.join(".braids");
    let iterations = dot.join("iterations");
    let mut files = vec![dot.join("PROJECT.md"), iterations.clone()];
    let mut its: Vec<PathBuf> = std::fs::read_dir(&iterations)
        .map(|d| d.flatten().map(|e| e.path().join("ITERATION.md")).collect())
        .unwrap_or_default();
    its.sort();
    files.extend(its);
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

/// One string for all the stamps (64-bit FNV-1a over paths and stamps, in hex): stable across
/// builds and platforms, unlike `std`'s hasher.
pub fn fingerprint(stamps: &[(PathBuf, Option<Stamp>)]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for b in bytes {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
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
    format!("{h:016x}")
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Answers {
    pub fingerprint: String,
    /// When the answers stop being true though no file changed (a deferral ends).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<DateTime<Utc>>,
    /// Every listed bead's status.
    pub beads: Vec<(BeadId, BeadStatus)>,
    /// The ready beads in the tracker's order, when that run asked (descriptions left out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready: Option<Vec<Bead>>,
}

impl Answers {
    /// Whether these answers stand in for the tracker now: the files are as they were, no
    /// deferral has ended, and the ready list is there if this run needs one.
    pub fn reusable(&self, fingerprint: &str, now: DateTime<Utc>, eligible: bool) -> bool {
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
                    .map(|b| Bead {
                        description: String::new(),
                        ..b.clone()
                    })
                    .collect()
            }),
        })
    }
}

/// What the last full run left: the fingerprints from the state, and the answers from the
/// sidecar for those that match.
#[derive(Debug, Default)]
pub struct Prior {
    pub answers: BTreeMap<String, Answers>,
}

#[derive(Serialize, Deserialize)]
struct CacheFile {
    version: u32,
    projects: BTreeMap<String, Answers>,
}

impl Prior {
    /// The answers the state's fingerprints vouch for; the sidecar is not read when the state
    /// has none. A missing or unreadable sidecar means no reuse.
    pub fn load(braids_dir: &Path, fingerprints: &BTreeMap<String, String>) -> Prior {
        if fingerprints.is_empty() {
            return Prior::default();
        }
        let file: Option<CacheFile> = crate::atomic::read(&braids_dir.join(CACHE_FILE))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .filter(|f: &CacheFile| f.version == 1);
        let mut answers = file.map(|f| f.projects).unwrap_or_default();
        answers.retain(|slug, a| fingerprints.get(slug) == Some(&a.fingerprint));
        Prior { answers }
    }
}

/// Writes the sidecar (before the state that points into it).
pub fn save(braids_dir: &Path, answers: &BTreeMap<String, Answers>) -> anyhow::Result<()> {
    let path = braids_dir.join(CACHE_FILE);
    if answers.is_empty() {
        return match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
            _ => Ok(()),
        };
    }
    let file = CacheFile {
        version: 1,
        projects: answers.clone(),
    };
    let json = serde_json::to_vec(&file)?;
    crate::atomic::write(&path, &json)
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
    pub path: String,
}

/// Asks the tracker (`list`, then `ready` where an eligible project has an open bead), or
/// reuses `prior` when the files are as they were. `stamps` is `None` when this run neither
/// records nor has anything to compare with.
pub fn read_tracker(
    tracker: &dyn Tracker,
    prior: Option<&Answers>,
    stamps: Option<&[(PathBuf, Option<Stamp>)]>,
    eligible: bool,
    now: DateTime<Utc>,
) -> Result<TrackerRead, crate::tracker::TrackerError> {
    let fp = stamps.map(fingerprint);
    if let (Some(a), Some(fp)) = (prior, &fp) {
        if a.reusable(fp, now, eligible) {
            return Ok(TrackerRead {
                beads: a.beads.clone(),
                ready: a.ready.clone().map(Ok),
                answers: Some(a.clone()),
                path: "unchanged since the last full run".into(),
            });
        }
    }
    let listed = tracker.list()?;
    let ready = (eligible && listed.iter().any(|b| b.status == BeadStatus::Open))
        .then(|| tracker.ready_among(&listed));
    let answers = match (stamps, &ready) {
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
            .unwrap_or_else(|| tracker.kind().as_str().to_string()),
    })
}

/// Writes the sidecar and returns the fingerprints the next state records: none when the
/// sidecar could not be written (the next run then asks every tracker).
pub fn remember(
    braids_dir: &Path,
    answers: &BTreeMap<String, Answers>,
) -> BTreeMap<String, String> {
    match save(braids_dir, answers) {
        Ok(()) => answers
            .iter()
            .map(|(slug, a)| (slug.clone(), a.fingerprint.clone()))
            .collect(),
        Err(e) => {
            tracing::warn!(
                "cannot write {}: {e:#}",
                braids_dir.join(CACHE_FILE).display()
            );
            BTreeMap::new()
        }
    }
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
        assert_eq!(base.len(), 16);
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
            fingerprint: "f".into(),
            until: Some(at(100)),
            beads: vec![open.clone()],
            ready: None,
        };
        assert!(a.reusable("f", at(0), false));
        assert!(!a.reusable("g", at(0), false), "a file changed");
        assert!(!a.reusable("f", at(100), false), "a deferral ended");
        assert!(
            !a.reusable("f", at(0), true),
            "no ready list, and one is needed"
        );
        let with_ready = Answers {
            ready: Some(vec![]),
            until: None,
            ..a
        };
        assert!(with_ready.reusable("f", at(1_000_000), true));
    }

    #[test]
    fn c5_2_the_sidecar_round_trips_and_only_vouched_entries_load() {
        let dir = tempfile::tempdir().unwrap();
        let a = Answers {
            fingerprint: "f1".into(),
            until: None,
            beads: vec![(BeadId::new("t-1").unwrap(), BeadStatus::InProgress)],
            ready: Some(vec![Bead::new(
                BeadId::new("t-2").unwrap(),
                "x",
                BeadStatus::Open,
            )]),
        };
        let all = BTreeMap::from([("a".to_string(), a.clone()), ("b".to_string(), a.clone())]);
        save(dir.path(), &all).unwrap();
        let fps = BTreeMap::from([
            ("a".to_string(), "f1".to_string()),
            ("b".into(), "f2".into()),
        ]);
        let prior = Prior::load(dir.path(), &fps);
        assert_eq!(prior.answers.keys().collect::<Vec<_>>(), ["a"]);
        assert_eq!(prior.answers["a"], a);
        assert!(Prior::load(dir.path(), &BTreeMap::new()).answers.is_empty());
        std::fs::write(dir.path().join(CACHE_FILE), "{garbage").unwrap();
        assert!(Prior::load(dir.path(), &fps).answers.is_empty());
        save(dir.path(), &BTreeMap::new()).unwrap();
        assert!(!dir.path().join(CACHE_FILE).exists());
    }
}
