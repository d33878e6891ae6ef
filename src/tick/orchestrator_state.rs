//! `.orchestrator-state.json` (CONTRACTS 1.6, 2.7): idle tracking and backoff.
//!
//! The three contract fields are `idleSince`, `idleReason` and `lastRunAt`. braids also keeps
//! the beads it claimed (so a crashed worker's claim can be released), the last check-in per
//! project, and what it already told about (dry projects, stories their tracker does not know),
//! so a notice or a warning goes out once rather than on every run; fields it does not know are carried through unchanged, so an older braids never
//! destroys a newer one's data. Loading never fails: a missing or corrupt file means a full run.
//! The transitions are pure functions of the previous state and the clock.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};

use crate::model::{BeadId, IterationName};

/// How close to its due time a run counts as due (2.7): schedulers start a run a little
/// early or late, and a run skipped a second before its time waits a whole interval.
pub const DUE_SLACK_SECS: i64 = 5;

/// Why nothing was spawned (1.6), with its backoff interval (2.7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum IdleReason {
    NoActiveIterations,
    NoReadyBeads,
    AllAtCapacity,
    /// Beads are ready, but the provider breaker holds every spawn back.
    SpawningPaused,
    /// Beads are ready, but no project that has them can start a worker (preflight: no
    /// executor, a program missing, a repository that cannot host one).
    NoWorkerCanStart,
}

impl IdleReason {
    pub fn as_str(self) -> &'static str {
        match self {
            IdleReason::NoActiveIterations => "no-active-iterations",
            IdleReason::NoReadyBeads => "no-ready-beads",
            IdleReason::AllAtCapacity => "all-at-capacity",
            IdleReason::SpawningPaused => "spawning-paused",
            IdleReason::NoWorkerCanStart => "no-worker-can-start",
        }
    }

    /// How long an idle installation waits before the next full run (2.7).
    pub fn backoff(self) -> Duration {
        match self {
            IdleReason::NoActiveIterations => Duration::minutes(30),
            IdleReason::NoReadyBeads => Duration::minutes(15),
            IdleReason::AllAtCapacity => Duration::minutes(10),
            // The breaker's next probe wakes the run earlier (`next_run_by`).
            IdleReason::SpawningPaused => Duration::minutes(10),
            // A fixed config.toml or PROJECT.md wakes it earlier (`tick::wake`).
            IdleReason::NoWorkerCanStart => Duration::minutes(15),
        }
    }
}

impl std::fmt::Display for IdleReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A bead braids claimed for a worker, remembered until the bead leaves `in_progress`.
///
/// A claim belongs to the project's directory, not its slug: a slug renamed in the registry (or
/// a garbled row pointing a slug at another directory for a run) must neither hand the claim to
/// another project's tracker nor lose it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Claim {
    /// The slug the project had when the bead was claimed: for people and logs, and the key of
    /// a claim with no `path`.
    pub project: String,
    /// The project's directory as the registry resolves it. `None` in files written before
    /// claims carried it: such a claim is matched by slug until a run upgrades it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<PathBuf>,
    pub bead: BeadId,
    pub claimed_at: DateTime<Utc>,
}

impl Claim {
    /// Whether this claim belongs to the registered project `slug` at `path`: by directory, or
    /// by slug for a claim an older braids recorded without one. Slugs and paths are unique in
    /// a registry, so at most one project owns a claim.
    pub fn belongs_to(&self, slug: &str, path: &Path) -> bool {
        match &self.path {
            Some(p) => p == path,
            None => self.project == slug,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OrchestratorState {
    pub idle_since: Option<DateTime<Utc>>,
    pub idle_reason: Option<IdleReason>,
    pub last_run_at: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub claims: Vec<Claim>,
    /// Per project slug, when its last check-in was sent.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub checkins: BTreeMap<String, DateTime<Utc>>,
    /// Projects already told `no-ready-beads` in their current dry spell.
    #[serde(default, alias = "dry", skip_serializing_if = "BTreeSet::is_empty")]
    pub told_no_ready: BTreeSet<String>,
    /// Stories already warned about as unknown to their tracker (1.3), per project slug and
    /// iteration name, so the tick log warns once, not on every run.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub unknown_stories: UnknownStories,
    /// Orphan sessions (`<label> <id>`) already warned about, so the log warns once (2.2).
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub orphans: BTreeSet<String>,
    /// The kill-storm guard held kills and people were told; cleared when a run needs it no
    /// more, so the next storm is told again.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub kill_storm_told: bool,
    /// Per project slug, the preflight problem already told, so it is told once and again only
    /// when it changes.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub preflight: BTreeMap<String, String>,
    /// Per project slug, the fingerprint releases before the observation cache recorded here.
    /// Read so an old file loads; a full run clears it (the fingerprints now live in each
    /// cache entry, and a map of 10,000 here made every skipped run parse it).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tracker_fingerprints: BTreeMap<String, String>,
    /// Stranded claims the release-storm guard held last run (`decide::guards::held_key`):
    /// still stranded next run, they are released.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub held_claims: BTreeSet<String>,
    /// The next full run is due by then even while idle: a bead's retry backoff or the
    /// provider breaker's next probe ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_run_by: Option<DateTime<Utc>>,
    /// The provider breaker's status line while it is open, for `braids status`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spawning_paused: Option<String>,
    /// The errors and warnings the last full run logged, so the next logs only what is new
    /// or changed at WARN.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub told: BTreeSet<String>,
    /// When retention last ran (`tick::tell::retention`), at most once an hour.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention_at: Option<DateTime<Utc>>,
    /// The generation of the observation cache the last full run wrote (`tick::cache`), which
    /// vouches for that file: written after it, so a run killed in between leaves a mismatch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observe_cache: Option<String>,
    /// Fields written by another version, kept as they were.
    #[serde(flatten)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

impl Default for OrchestratorState {
    fn default() -> Self {
        OrchestratorState {
            idle_since: None,
            idle_reason: None,
            last_run_at: None,
            claims: Vec::new(),
            checkins: BTreeMap::new(),
            told_no_ready: BTreeSet::new(),
            unknown_stories: BTreeMap::new(),
            orphans: BTreeSet::new(),
            kill_storm_told: false,
            preflight: BTreeMap::new(),
            tracker_fingerprints: BTreeMap::new(),
            held_claims: BTreeSet::new(),
            next_run_by: None,
            spawning_paused: None,
            told: BTreeSet::new(),
            retention_at: None,
            observe_cache: None,
            extra: serde_json::Map::new(),
        }
    }
}

/// Per project slug, per iteration, the story ids warned about as unknown to the tracker.
pub type UnknownStories = BTreeMap<String, BTreeMap<IterationName, BTreeSet<BeadId>>>;

/// Whether this run does the work or backs off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum RunKind {
    Full,
    /// Idle, and the reason's interval has not passed since the last run (2.7).
    Skipped {
        reason: IdleReason,
        next_full_run: DateTime<Utc>,
    },
}

impl OrchestratorState {
    /// The claim-retention rule after a run: forget the claims the run settled (released, or
    /// whose bead left in_progress), keep every other one (a project briefly missing from the
    /// registry keeps its claims), give the project's directory to the old claims the run
    /// matched by slug (`upgrades`: the claim as remembered, and its project's directory), and
    /// remember the run's new claims. Claims are named as they were remembered, so a slug
    /// renamed since cannot make the wrong claim go.
    pub fn settle_claims<'a>(
        &mut self,
        settled: impl IntoIterator<Item = &'a Claim>,
        upgrades: impl IntoIterator<Item = (&'a Claim, &'a Path)>,
        new_claims: &[Claim],
    ) {
        let settled: Vec<&Claim> = settled.into_iter().collect();
        self.claims.retain(|c| !settled.contains(&c));
        for (old, path) in upgrades {
            for c in self.claims.iter_mut().filter(|c| *c == old) {
                c.path = Some(path.to_path_buf());
            }
        }
        self.claims.extend(new_claims.iter().cloned());
    }

    /// Reads the state file. `Ok(None)` when it does not exist; `Err` with a one-line reason
    /// when it exists but cannot be used, which the caller logs before doing a full run.
    pub fn load(path: &Path) -> Result<Option<OrchestratorState>, String> {
        let bytes = match crate::system::atomic::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(format!(
                    "cannot read {}: {e}; doing a full run",
                    path.display()
                ))
            }
        };
        serde_json::from_slice(&bytes).map(Some).map_err(|e| {
            format!(
                "{} is not valid state ({e}); doing a full run and rewriting it",
                path.display()
            )
        })
    }

    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).expect("state serialises");
        s.push('\n');
        s
    }

    /// The backoff rule of 2.7, as a pure function of the state and the clock.
    pub fn run_kind(&self, now: DateTime<Utc>, force: bool) -> RunKind {
        match (force, self.idle_since, self.idle_reason, self.last_run_at) {
            (false, Some(_), Some(reason), Some(last)) => {
                let next = self.next_run_by.map_or(last + reason.backoff(), |by| {
                    by.min(last + reason.backoff())
                });
                // A clock that went backwards must not postpone work indefinitely. A run due in
                // a moment is due now: skipped, it would wait a whole scheduling interval more.
                if now + Duration::seconds(DUE_SLACK_SECS) < next && now >= last {
                    RunKind::Skipped {
                        reason,
                        next_full_run: next,
                    }
                } else {
                    RunKind::Full
                }
            }
            _ => RunKind::Full,
        }
    }

    /// The state after a full run (2.7): spawning clears idle; idling sets `idleSince` only on
    /// the transition into idle and keeps it across idle runs; `lastRunAt` is always now.
    pub fn after_run(
        &self,
        now: DateTime<Utc>,
        spawned: bool,
        idle_reason: IdleReason,
    ) -> OrchestratorState {
        let mut next = self.clone();
        next.last_run_at = Some(now);
        if spawned {
            next.idle_since = None;
            next.idle_reason = None;
        } else {
            next.idle_since = Some(self.idle_since.unwrap_or(now));
            next.idle_reason = Some(idle_reason);
        }
        next
    }
}

/// How long a command that makes work eligible waits for a running tick before it leaves the
/// idle backoff to run out by itself.
pub const WAKE_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Ends the idle backoff (2.7) because a person's command just made work eligible (`init`,
/// `new`, `iteration activate`): the next scheduled run is a full one instead of 10–30 minutes
/// away. Under the tick lock, waited for up to `wait`: a tick that was running when the command
/// changed the files writes its state first (perhaps idle), and this comes after. Best effort,
/// as the backoff only delays: says whether it was ended.
pub fn wake(paths: &crate::system::paths::Paths, wait: std::time::Duration) -> bool {
    let file = paths.state();
    if !file.exists() {
        return false;
    }
    let Ok(Some(_lock)) = crate::system::lock::TickLock::acquire(&paths.lock(), wait) else {
        return false;
    };
    let Ok(Some(mut state)) = OrchestratorState::load(&file) else {
        return false;
    };
    if state.idle_since.is_none() && state.idle_reason.is_none() {
        return false;
    }
    state.idle_since = None;
    state.idle_reason = None;
    crate::system::atomic::write(&file, state.to_json().as_bytes()).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn t(min: i64) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 1, 1, 12, 0, 0).unwrap() + Duration::minutes(min)
    }

    fn claim(p: &str, path: Option<&str>, b: &str) -> Claim {
        Claim {
            project: p.into(),
            path: path.map(PathBuf::from),
            bead: BeadId::new(b).unwrap(),
            claimed_at: t(0),
        }
    }

    #[test]
    fn settle_claims_forgets_settled_keeps_the_rest_upgrades_and_adds_new() {
        let a1 = claim("a", Some("/p/a"), "a1");
        let old = claim("a", None, "a2");
        let mut s = OrchestratorState {
            claims: vec![
                a1.clone(),
                old.clone(),
                claim("gone", Some("/p/gone"), "g1"),
            ],
            ..OrchestratorState::default()
        };
        // the same bead and slug at another directory is another claim: it stays
        let other = claim("a", Some("/p/other"), "a1");
        s.settle_claims(
            [&a1, &other],
            [(&old, Path::new("/p/a"))],
            &[claim("b", Some("/p/b"), "b1")],
        );
        let left: Vec<(&str, Option<&Path>, &str)> = s
            .claims
            .iter()
            .map(|c| (c.project.as_str(), c.path.as_deref(), c.bead.as_str()))
            .collect();
        // a project missing from the registry ("gone") keeps its claim
        assert_eq!(
            left,
            [
                ("a", Some(Path::new("/p/a")), "a2"),
                ("gone", Some(Path::new("/p/gone")), "g1"),
                ("b", Some(Path::new("/p/b")), "b1")
            ]
        );
    }

    #[test]
    fn c2_10_a_claim_belongs_to_its_directory_or_for_an_old_claim_its_slug() {
        let new = claim("web", Some("/p/web"), "w1");
        assert!(new.belongs_to("web", Path::new("/p/web")));
        assert!(new.belongs_to("site", Path::new("/p/web")), "slug renamed");
        assert!(
            !new.belongs_to("web", Path::new("/p/api")),
            "slug on another dir"
        );
        let old = claim("web", None, "w1");
        assert!(old.belongs_to("web", Path::new("/p/web")));
        assert!(!old.belongs_to("site", Path::new("/p/web")));
    }

    /// A state file exactly as the release before claims carried directories wrote it.
    const PREVIOUS_RELEASE_STATE: &str = r#"{
  "idleSince": null,
  "idleReason": null,
  "lastRunAt": "2026-11-23T11:18:09.728606485Z",
  "claims": [
    {
      "project": "web-app",
      "bead": "web-app-3f2",
      "claimedAt": "2026-11-23T11:18:09.728702097Z"
    }
  ],
  "checkins": {
    "web-app": "2026-11-23T11:18:09.728704581Z"
  },
  "trackerFingerprints": {
    "web-app": "9c1e"
  },
  "future": {
    "x": 1
  }
}
"#;

    #[test]
    fn c2_10_a_state_file_of_the_previous_release_loads_and_its_claims_are_upgraded() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.json");
        std::fs::write(&p, PREVIOUS_RELEASE_STATE).unwrap();
        let mut s = OrchestratorState::load(&p).unwrap().unwrap();
        assert_eq!(s.claims.len(), 1);
        let c = s.claims[0].clone();
        assert_eq!(
            (c.project.as_str(), c.bead.as_str()),
            ("web-app", "web-app-3f2")
        );
        assert_eq!(c.path, None);
        assert_eq!(
            c.claimed_at.to_rfc3339(),
            "2026-11-23T11:18:09.728702097+00:00"
        );
        assert!(
            c.belongs_to("web-app", Path::new("/anywhere")),
            "matched by slug"
        );
        assert_eq!(s.tracker_fingerprints["web-app"], "9c1e");
        // written back unchanged in form: no path invented, unknown fields kept
        assert_eq!(s.to_json(), PREVIOUS_RELEASE_STATE);
        // the first run that matches it gives it the project's directory, which sticks
        s.settle_claims([], [(&c, Path::new("/home/u/web"))], &[]);
        std::fs::write(&p, s.to_json()).unwrap();
        let back = OrchestratorState::load(&p).unwrap().unwrap();
        assert_eq!(
            back.claims[0].path.as_deref(),
            Some(Path::new("/home/u/web"))
        );
        assert!(back.claims[0].belongs_to("renamed", Path::new("/home/u/web")));
        assert!(!back.claims[0].belongs_to("web-app", Path::new("/home/u/api")));
        assert!(back.to_json().contains("\"path\": \"/home/u/web\""));
        assert!(back.to_json().contains("\"future\""));
    }

    #[test]
    fn c2_7_idle_since_set_on_transition_and_preserved() {
        let s0 = OrchestratorState::default();
        let s1 = s0.after_run(t(0), false, IdleReason::NoReadyBeads);
        assert_eq!(
            (s1.idle_since, s1.idle_reason, s1.last_run_at),
            (Some(t(0)), Some(IdleReason::NoReadyBeads), Some(t(0)))
        );
        let s2 = s1.after_run(t(20), false, IdleReason::AllAtCapacity);
        assert_eq!(s2.idle_since, Some(t(0)), "preserved across idle runs");
        assert_eq!(
            s2.idle_reason,
            Some(IdleReason::AllAtCapacity),
            "reason follows the latest run"
        );
        let s3 = s2.after_run(t(40), true, IdleReason::NoReadyBeads);
        assert_eq!(
            (s3.idle_since, s3.idle_reason, s3.last_run_at),
            (None, None, Some(t(40)))
        );
        let s4 = s3.after_run(t(45), false, IdleReason::NoActiveIterations);
        assert_eq!(s4.idle_since, Some(t(45)));
    }

    #[test]
    fn c2_7_backoff_intervals() {
        for (reason, mins) in [
            (IdleReason::NoActiveIterations, 30),
            (IdleReason::NoReadyBeads, 15),
            (IdleReason::AllAtCapacity, 10),
        ] {
            let s = OrchestratorState::default().after_run(t(0), false, reason);
            assert!(
                matches!(s.run_kind(t(mins - 1), false), RunKind::Skipped { .. }),
                "{reason} skips before {mins}m"
            );
            assert_eq!(
                s.run_kind(t(mins), false),
                RunKind::Full,
                "{reason} runs at {mins}m"
            );
            assert_eq!(s.run_kind(t(1), true), RunKind::Full, "--force");
        }
        assert_eq!(
            OrchestratorState::default().run_kind(t(0), false),
            RunKind::Full
        );
        let busy = OrchestratorState::default().after_run(t(0), true, IdleReason::NoReadyBeads);
        assert_eq!(busy.run_kind(t(1), false), RunKind::Full);
    }

    #[test]
    fn c2_7_a_run_due_in_a_moment_is_due_now() {
        let s = OrchestratorState::default().after_run(t(0), false, IdleReason::NoReadyBeads);
        let due = t(15);
        let just_before = due - Duration::milliseconds(870);
        assert_eq!(
            s.run_kind(just_before, false),
            RunKind::Full,
            "not skipped for 0.87 s"
        );
        let early = due - Duration::seconds(DUE_SLACK_SECS + 1);
        assert!(matches!(s.run_kind(early, false), RunKind::Skipped { .. }));
        for reason in [IdleReason::SpawningPaused, IdleReason::NoWorkerCanStart] {
            let s = OrchestratorState::default().after_run(t(0), false, reason);
            let v: serde_json::Value = serde_json::from_str(&s.to_json()).unwrap();
            assert_eq!(v["idleReason"], reason.as_str());
            assert!(matches!(s.run_kind(t(1), false), RunKind::Skipped { .. }));
        }
    }

    #[test]
    fn clock_going_backwards_runs() {
        let s = OrchestratorState::default().after_run(t(0), false, IdleReason::NoReadyBeads);
        assert_eq!(s.run_kind(t(-60), false), RunKind::Full);
    }

    #[test]
    fn c1_6_field_names_and_old_files_load() {
        let s = OrchestratorState::default().after_run(t(0), false, IdleReason::AllAtCapacity);
        let v: serde_json::Value = serde_json::from_str(&s.to_json()).unwrap();
        assert_eq!(v["idleSince"], "2026-01-01T12:00:00Z");
        assert_eq!(v["idleReason"], "all-at-capacity");
        assert_eq!(v["lastRunAt"], "2026-01-01T12:00:00Z");
        // the file the LLM orchestrator wrote: only the three fields, offsets, nulls
        let old =
            r#"{"idleSince":null,"idleReason":null,"lastRunAt":"2026-02-01T09:30:00.123+01:00"}"#;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.json");
        std::fs::write(&p, old).unwrap();
        let s = OrchestratorState::load(&p).unwrap().unwrap();
        assert_eq!(
            s.last_run_at.unwrap().to_rfc3339(),
            "2026-02-01T08:30:00.123+00:00"
        );
        // unknown fields survive a round trip
        std::fs::write(
            &p,
            r#"{"idleSince":null,"idleReason":null,"lastRunAt":null,"future":{"x":1}}"#,
        )
        .unwrap();
        let s = OrchestratorState::load(&p).unwrap().unwrap();
        assert!(s.to_json().contains("\"future\""));
        assert!(s.tracker_fingerprints.is_empty(), "older files have none");
        assert_eq!(s.observe_cache, None, "older files have none");
        // the cache's generation (5.2) round-trips under its camelCase name
        let mut s = s;
        s.observe_cache = Some("00ff".into());
        std::fs::write(&p, s.to_json()).unwrap();
        let back = OrchestratorState::load(&p).unwrap().unwrap();
        assert!(s.to_json().contains("\"observeCache\": \"00ff\""));
        assert_eq!(back.observe_cache.as_deref(), Some("00ff"));
    }

    #[test]
    fn corrupt_or_missing_state_is_not_fatal() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(OrchestratorState::load(&dir.path().join("none")), Ok(None));
        let p = dir.path().join("s.json");
        std::fs::write(&p, "{\"idleSince\": \"yesterday\"").unwrap();
        assert!(OrchestratorState::load(&p)
            .unwrap_err()
            .contains("full run"));
        std::fs::write(&p, [0xff, 0xfe, 0]).unwrap();
        assert!(OrchestratorState::load(&p).is_err());
        assert!(OrchestratorState::load(dir.path()).is_err(), "a directory");
    }
}
