//! The tick's edge to `attempts.json` ([`crate::retry`]): what it tells `decide` (beads waiting
//! out a backoff, the provider breaker's gate, each worker's last activity), and the failed
//! attempts the tick itself sees (a worker stopped for its time or a stall, a claim whose worker
//! vanished). Workers record their own attempts.

use std::path::Path;

use chrono::{DateTime, Duration, Utc};

use super::decide::{FailedAttempt, Plan};
use super::observe::Observed;
use crate::config::Config;
use crate::model::BeadId;
use crate::retry::breaker::Transition;
use crate::retry::store::Store;
use crate::retry::{AfterFailure, Attempts};
use crate::system::paths::Paths;
use crate::tick::orchestrator_state::OrchestratorState;

/// How long the record of a bead that is no longer waiting is kept (retention).
const KEEP: Duration = Duration::days(30);

/// The retry store with the installation's rules.
pub struct RetryEdge {
    store: Store,
    config: Config,
}

impl RetryEdge {
    pub fn new(paths: &Paths, config: &Config) -> RetryEdge {
        RetryEdge {
            store: Store::in_dir(&paths.braids_dir),
            config: config.clone(),
        }
    }

    /// Looks at the breaker (recording what it decides unless `read_only`), prunes old
    /// records, and fills the snapshot's `waiting`, `gate`, `next_probe`, `activity`,
    /// `finishing`, `held_before` and `story_claims`.
    /// Returns a breaker transition to tell people about, and the breaker's status line.
    pub fn observe(
        &self,
        paths: &Paths,
        observed: &mut Observed,
        state: &OrchestratorState,
        now: DateTime<Utc>,
        read_only: bool,
    ) -> (Option<Transition>, Option<String>) {
        let policy = self.config.breaker.policy();
        // The workers running now, by when they started: a probe spawned before all of them
        // (or none) has no worker left to report on the provider.
        let started: Vec<DateTime<Utc>> = observed
            .snapshot
            .sessions
            .iter()
            .filter(|s| s.running && !s.worker_gone)
            .map(|s| s.started_at)
            .collect();
        let look = |a: &mut Attempts| {
            let running = |p: DateTime<Utc>| started.iter().any(|t| *t >= p);
            let lost = a
                .breaker
                .probing_since
                .and_then(|p| crate::retry::breaker::probe_gone(&a.breaker, &a.recent, running(p)));
            if let Some(b) = lost {
                tracing::warn!(
                    "the provider probe's worker is gone unanswered; a new probe may go"
                );
                a.breaker = b;
            }
            let t = a.assess(&policy, now);
            a.prune(now, KEEP);
            (a.clone(), t)
        };
        let (attempts, transition) = if read_only {
            look(&mut self.store.load())
        } else {
            self.store.update(look).unwrap_or_else(|e| {
                tracing::warn!("cannot update the retry records: {e:#}");
                look(&mut self.store.load())
            })
        };
        let snap = &mut observed.snapshot;
        snap.waiting = attempts.waiting();
        snap.gate = attempts.breaker.gate(now);
        snap.next_probe = attempts.breaker.next_probe;
        snap.held_before = state.held_claims.clone();
        snap.activity = snap
            .sessions
            .iter()
            .filter(|s| s.running)
            .filter_map(|s| {
                let mark = paths.activity(s.label.slug(), s.label.bead());
                let newest = [Some(mark.as_path()), s.log.as_deref()]
                    .into_iter()
                    .flatten()
                    .filter_map(mtime)
                    .max()?;
                Some((s.label.to_string(), newest))
            })
            .collect();
        // Marked by this session's own worker: a stale mark (a worker that died finishing) is
        // older than the session.
        snap.finishing = snap
            .sessions
            .iter()
            .filter(|s| s.running)
            .filter(|s| {
                mtime(&paths.finishing(s.label.slug(), s.label.bead()))
                    .is_some_and(|written| written >= s.started_at)
            })
            .map(|s| s.label.to_string())
            .collect();
        snap.story_claims = snap
            .claims
            .iter()
            .filter_map(|c| Some((c.path.clone()?, c.bead.clone())))
            .filter(|(dir, bead)| crate::protocol::story_state::path_of(dir, bead).exists())
            .collect();
        (transition, attempts.breaker.status_line())
    }

    /// Records a failed attempt the tick saw (`decide::retries` says which), and a stopped
    /// worker's attempt in the cost ledger under `braids_dir` like any other (its time spent,
    /// its tokens unknown). `None` when it cannot be recorded (logged), or when the attempt of
    /// its claim is already recorded (a worker that recorded its failure and died before
    /// releasing its bead).
    pub fn record(&self, a: &FailedAttempt, braids_dir: &Path) -> Option<AfterFailure> {
        let policy = self.config.worker.retry_policy();
        let recorded = self.store.update(|r| {
            if a.claimed_at
                .is_some_and(|t| r.failed_since(&a.dir, &a.bead, t))
            {
                return None;
            }
            Some(r.fail(&a.dir, &a.bead, a.failure.clone(), &policy, false))
        });
        let verdict = recorded.unwrap_or_else(|e| {
            tracing::warn!(bead = %a.bead, "cannot record the failed attempt: {e:#}");
            None
        })?;
        if let Some(secs) = a.ran_secs {
            let attempt = crate::cost::Attempt {
                at: a.failure.at,
                project: a.slug.clone(),
                bead: a.bead.to_string(),
                outcome: a.failure.signature.clone().unwrap_or_default(),
                duration_seconds: secs,
                usage: Default::default(),
            };
            if let Err(e) = crate::cost::ledger::Ledger::in_dir(braids_dir).record(attempt) {
                tracing::warn!(bead = %a.bead, "the stopped attempt is not in the cost ledger: {e:#}");
            }
        }
        Some(verdict)
    }

    /// The probe the breaker let through was spawned: no other until its outcome is known.
    pub fn probing(&self, plan: &Plan, spawned: usize, now: DateTime<Utc>) {
        if !plan.probe || spawned == 0 {
            return;
        }
        if let Err(e) = self.store.update(|a| a.breaker.probing_since = Some(now)) {
            tracing::warn!("cannot record the breaker's probe: {e:#}");
        }
    }
}

/// A failed attempt the tick ended (a worker stopped for its WorkerTimeout or a stall).
#[derive(Debug, Clone)]
pub struct Failed {
    pub project: String,
    pub bead: BeadId,
    pub cause: String,
    /// Failures in a row, this one included.
    pub failures: u32,
    pub retry_at: DateTime<Utc>,
}

fn mtime(p: &Path) -> Option<DateTime<Utc>> {
    std::fs::metadata(p)
        .ok()?
        .modified()
        .ok()
        .map(DateTime::<Utc>::from)
}
