//! Carrying out a [`Plan`]: kill zombies, forget ended sessions, release stranded claims, and
//! claim-then-spawn, in that order, through [`Effects`]: [`Live`] does it, [`DryRun`] only says
//! what it would do.
//!
//! The orchestrator never does bead work (2.1): the only tracker writes here are the claim, the
//! release of a claim whose worker is gone, and undoing a claim whose worker could not start.
//! A claim comes before the spawn, and a refused claim means another worker holds the bead, so
//! the next candidate stands in.

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::model::{BeadId, IterationName};
use crate::session::{KillOutcome, Session};
use crate::tick::orchestrator_state::Claim;

pub use super::attempts::Failed;
use super::decide::{
    DependencyUpdate, FailedAttempt, OrphanedStep, Plan, Release, SpawnCandidate, Zombie,
    ZombieReason,
};

mod dry;
mod landings;
mod live;

pub use dry::DryRun;
pub use live::Live;

/// A worker started this run, as `--json` reports it.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct Spawned {
    pub project: String,
    pub bead: BeadId,
    /// The iteration's directory name as written (`008`), a string in `--json`.
    pub iteration: IterationName,
    pub channel: Option<String>,
    pub path: String,
    pub label: String,
    pub worker_timeout: u64,
}

impl Spawned {
    pub fn from_candidate(c: &SpawnCandidate) -> Spawned {
        Spawned {
            project: c.slug.clone(),
            bead: c.bead.clone(),
            iteration: c.iteration,
            channel: c.channel.clone(),
            path: c.path.display().to_string(),
            label: c.label().to_string(),
            worker_timeout: c.worker_timeout,
        }
    }
}

#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct Killed {
    pub label: String,
    pub bead: BeadId,
    pub reason: ZombieReason,
    /// `None` on a dry run.
    pub outcome: Option<KillOutcome>,
}

#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct Released {
    pub project: String,
    pub bead: BeadId,
}

/// What acting did.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    pub spawned: Vec<Spawned>,
    pub killed: Vec<Killed>,
    pub released: Vec<Released>,
    pub new_claims: Vec<Claim>,
    pub errors: Vec<String>,
    /// Work dead workers left, kept on branches by the sweep: (project, bead, branch).
    pub kept: Vec<(String, BeadId, String)>,
    /// Beads whose breaker tripped on a failure this run saw: (project, bead, reason).
    pub blocked: Vec<(String, BeadId, String)>,
    /// Protocol steps stopped for their timeout: (project, bead, what the story recorded).
    pub step_timeouts: Vec<(String, BeadId, String)>,
    /// Sessions the backend itself ended (Slurm's time or memory limit): (project, bead, why).
    pub backend_ended: Vec<(String, BeadId, String)>,
    /// Claims the plan would release whose worker could not be stopped: still held.
    pub still_held: Vec<BeadId>,
    /// Attempts this run ended for their time or a stall, retried later.
    pub failed: Vec<Failed>,
}

/// The effects of acting, one method per kind of step of the plan.
pub trait Effects {
    /// Stops zombie `z`'s worker and forgets its session; records `attempt`, blocking the bead
    /// when its breaker trips; records a protocol step's timeout. `Ok(None)` when nothing was
    /// stopped (a dry run); `Err` (for the run's errors) when it could not be.
    fn stop(
        &mut self,
        z: &Zombie,
        attempt: Option<&FailedAttempt>,
        now: DateTime<Utc>,
        out: &mut Outcome,
    ) -> Result<Option<KillOutcome>, String>;
    /// Forgets a session that ended by itself, telling why the backend ended it.
    fn forget_ended(&mut self, s: &Session, out: &mut Outcome);
    /// Records in its story that a protocol step lost its worker.
    fn mark_orphaned(&mut self, o: &OrphanedStep, now: DateTime<Utc>, out: &mut Outcome);
    /// Records a protocol story's open dependencies.
    fn set_blocked_by(&mut self, u: &DependencyUpdate, out: &mut Outcome);
    /// Opens a stranded claim's bead again, or blocks it when `attempt` trips its breaker.
    /// Whether the claim was released.
    fn release(&mut self, r: &Release, attempt: Option<&FailedAttempt>, out: &mut Outcome) -> bool;
    /// Lands what dead workers left and removes the worktrees no worker uses.
    fn sweep(&mut self, plan: &Plan, out: &mut Outcome);
    /// Claims and spawns, walking the plan's slots.
    fn spawn(&mut self, plan: &Plan, now: DateTime<Utc>, out: &mut Outcome);
}

/// Acts on `plan` through `fx`.
pub fn act(plan: &Plan, fx: &mut dyn Effects, now: DateTime<Utc>) -> Outcome {
    let mut out = Outcome::default();
    // Beads whose worker could not be stopped: their claims are not released.
    let mut unkilled = std::collections::BTreeSet::new();
    for z in &plan.zombies {
        let outcome = match fx.stop(z, plan.retries.of_stop(z), now, &mut out) {
            Ok(o) => o,
            Err(e) => {
                out.errors.push(e);
                unkilled.insert(z.session.label.bead().clone());
                continue;
            }
        };
        tracing::debug!(label = %z.session.label, reason = %z.reason, "zombie {}", if outcome.is_some() { "killed" } else { "found" });
        out.killed.push(Killed {
            label: z.session.label.to_string(),
            bead: z.session.label.bead().clone(),
            reason: z.reason,
            outcome,
        });
    }
    for s in &plan.ended {
        fx.forget_ended(s, &mut out);
    }
    for o in &plan.orphaned_steps {
        fx.mark_orphaned(o, now, &mut out);
    }
    for u in &plan.dependency_updates {
        fx.set_blocked_by(u, &mut out);
    }
    out.still_held = unkilled.iter().cloned().collect();
    for r in plan.releases.iter().filter(|r| !unkilled.contains(&r.bead)) {
        // Its stop this run tripped its breaker: blocked, never opened again.
        if out
            .blocked
            .iter()
            .any(|(s, b, _)| *s == r.slug && *b == r.bead)
        {
            continue;
        }
        if fx.release(r, plan.retries.of_release(r), &mut out) {
            tracing::warn!(project = %r.slug, bead = %r.bead, "stranded claim released");
            out.released.push(Released {
                project: r.slug.clone(),
                bead: r.bead.clone(),
            });
        }
    }
    fx.sweep(plan, &mut out);
    fx.spawn(plan, now, &mut out);
    out
}

#[cfg(test)]
mod tests;
