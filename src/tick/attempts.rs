//! The tick's edge to `attempts.json` ([`crate::retry`]): what it tells `decide` (beads waiting
//! out a backoff, the provider breaker's gate, each worker's last activity), and the failed
//! attempts the tick itself sees (a worker stopped for its time or a stall, a claim whose worker
//! vanished). Workers record their own attempts.

use std::path::Path;

use chrono::{DateTime, Duration, Utc};

use super::decide::{Plan, Zombie, ZombieOwner, ZombieReason};
use super::observe::Observed;
use crate::config::Config;
use crate::model::BeadId;
use crate::retry::breaker::Transition;
use crate::retry::store::Store;
use crate::retry::{AfterFailure, Attempts, Failure};
use crate::system::paths::Paths;
use crate::tick::orchestrator_state::OrchestratorState;

/// How long the record of a bead that is no longer waiting is kept (retention).
const KEEP: Duration = Duration::days(30);

/// The retry store with the installation's rules.
pub struct RetryEdge {
    store: Store,
    config: Config,
    dry_run: bool,
}

impl RetryEdge {
    pub fn new(paths: &Paths, config: &Config, dry_run: bool) -> RetryEdge {
        RetryEdge {
            store: Store::in_dir(&paths.braids_dir),
            config: config.clone(),
            dry_run,
        }
    }

    /// Looks at the breaker (recording what it decides unless a dry run), prunes old records,
    /// and fills the snapshot's `waiting`, `gate`, `next_probe`, `activity` and `held_before`.
    /// Returns a breaker transition to tell people about, and the breaker's status line.
    pub fn observe(
        &self,
        paths: &Paths,
        observed: &mut Observed,
        state: &OrchestratorState,
        now: DateTime<Utc>,
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
        let (attempts, transition) = if self.dry_run {
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
        (transition, attempts.breaker.status_line())
    }

    /// Records a failed attempt the tick saw; `None` in a dry run, when it cannot be recorded
    /// (logged), or when the attempt of the claim made at `claimed_at` is already recorded (a
    /// worker that recorded its failure and died before releasing its bead).
    pub fn failed(
        &self,
        dir: &Path,
        bead: &BeadId,
        claimed_at: Option<DateTime<Utc>>,
        failure: Failure,
    ) -> Option<AfterFailure> {
        if self.dry_run {
            return None;
        }
        let policy = self.config.worker.retry_policy();
        let recorded = self.store.update(|a| {
            if claimed_at.is_some_and(|t| a.failed_since(dir, bead, t)) {
                return None;
            }
            Some(a.fail(dir, bead, failure, &policy, false))
        });
        recorded.unwrap_or_else(|e| {
            tracing::warn!(%bead, "cannot record the failed attempt: {e:#}");
            None
        })
    }

    /// The probe the breaker let through was spawned: no other until its outcome is known.
    pub fn probing(&self, plan: &Plan, spawned: usize, now: DateTime<Utc>) {
        if self.dry_run || !plan.probe || spawned == 0 {
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

/// What a tick's stop of a worker did to its bead.
#[derive(Debug, Clone)]
pub enum Stopped {
    /// Its failures in a row tripped its breaker: to be blocked, in project `slug`.
    Blocked { slug: String, reason: String },
    /// Open again, retried from a time.
    Retried(Failed),
}

impl RetryEdge {
    /// Records the stop of zombie `z` when it is a failed attempt (its WorkerTimeout, a
    /// stall): in the retry store, and in the cost ledger under `braids_dir` as an attempt
    /// like any other (its time spent, its tokens unknown). `None` when it is not one, or in
    /// a dry run.
    pub fn stopped(&self, z: &Zombie, now: DateTime<Utc>, braids_dir: &Path) -> Option<Stopped> {
        let (owner, failure) = kill_failure(z, now)?;
        let bead = z.session.label.bead();
        let cause = failure.why.clone();
        let outcome = failure.signature.clone().unwrap_or_default();
        let recorded = self.failed(&owner.path, bead, None, failure)?;
        let attempt = crate::cost::Attempt {
            at: now,
            project: owner.slug.clone(),
            bead: bead.to_string(),
            outcome,
            duration_seconds: u64::try_from((now - z.session.started_at).num_seconds())
                .unwrap_or(0),
            usage: Default::default(),
        };
        if let Err(e) = crate::cost::ledger::Ledger::in_dir(braids_dir).record(attempt) {
            tracing::warn!(%bead, "the stopped attempt is not in the cost ledger: {e:#}");
        }
        Some(match recorded {
            AfterFailure::Block { reason, .. } => Stopped::Blocked {
                slug: owner.slug.clone(),
                reason,
            },
            AfterFailure::Retry {
                not_before,
                failures,
            } => Stopped::Retried(Failed {
                project: owner.slug.clone(),
                bead: bead.clone(),
                cause,
                failures,
                retry_at: not_before,
            }),
        })
    }
}

/// The failure a zombie's kill stands for, when it is one: a worker stopped for its
/// WorkerTimeout or a stall did not finish its bead.
pub fn kill_failure(z: &Zombie, now: DateTime<Utc>) -> Option<(&ZombieOwner, Failure)> {
    let owner = z.owner.as_ref()?;
    let sig = match z.reason {
        ZombieReason::Timeout => "timed out",
        ZombieReason::Stalled => "stalled",
        // A protocol step's timeout is an attempt of the story's own count, not the bead's; a
        // gone worker's attempt is counted when its claim is released.
        ZombieReason::SessionEnded
        | ZombieReason::WorkerGone
        | ZombieReason::BeadClosed
        | ZombieReason::StepTimeout => return None,
    };
    let why = z.why();
    let f = Failure {
        signature: Some(sig.into()),
        ..Failure::new(now, why)
    };
    Some((owner, f))
}

fn mtime(p: &Path) -> Option<DateTime<Utc>> {
    std::fs::metadata(p)
        .ok()?
        .modified()
        .ok()
        .map(DateTime::<Utc>::from)
}
