//! A dry run's effects: nothing is touched, and the outcome says what a live run would do.

use chrono::{DateTime, Utc};

use super::{Effects, Outcome, Spawned};
use crate::session::{KillOutcome, Session};
use crate::tick::decide::{DependencyUpdate, FailedAttempt, OrphanedStep, Plan, Release, Zombie};

/// Records instead of doing: every zombie found, every stranded claim released, and the
/// workers the plan intends.
pub struct DryRun;

impl Effects for DryRun {
    fn stop(
        &mut self,
        _: &Zombie,
        _: Option<&FailedAttempt>,
        _: DateTime<Utc>,
        _: &mut Outcome,
    ) -> Result<Option<KillOutcome>, String> {
        Ok(None)
    }

    fn forget_ended(&mut self, _: &Session, _: &mut Outcome) {}

    fn mark_orphaned(&mut self, _: &OrphanedStep, _: DateTime<Utc>, _: &mut Outcome) {}

    fn set_blocked_by(&mut self, _: &DependencyUpdate, _: &mut Outcome) {}

    fn release(&mut self, _: &Release, _: Option<&FailedAttempt>, _: &mut Outcome) -> bool {
        true
    }

    fn sweep(&mut self, _: &Plan, _: &mut Outcome) {}

    fn spawn(&mut self, plan: &Plan, _: DateTime<Utc>, out: &mut Outcome) {
        out.spawned = plan
            .intended()
            .into_iter()
            .map(Spawned::from_candidate)
            .collect();
    }
}
