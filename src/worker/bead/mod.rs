//! The plain bead pipeline, after the gates every pipeline shares (`claim.rs`): one agent
//! attempt judged by its exit code, report and deliverable (`attempt.rs`), then the fixed steps
//! of a success (`finish.rs`).

pub(super) mod attempt;
pub(super) mod finish;
pub(super) mod propose;

use std::time::Instant;

use anyhow::Result;

use crate::model::{Bead, NotificationEvent};
use crate::worker::context::Loaded;
use crate::worker::{clip, Ending, Run, Worker};

use attempt::AttemptEnd;

impl Worker<'_> {
    /// A plain bead after the gates: its workspace, one agent attempt, then the fixed steps.
    pub(in crate::worker) fn bead(
        &self,
        run: &mut Run<'_, '_>,
        l: &Loaded,
        bead: &Bead,
        expected: &std::path::Path,
        started: Instant,
    ) -> Result<Ending> {
        let bead_id = &run.msg.bead;
        let (ws, ready) = self.open_workspace(run, l)?;
        if let Some(setup) = ready.setup.filter(|s| !s.ok) {
            // The agent does not run; the next attempt's prompt shows what the setup said.
            let why = format!(
                "the project's setup command failed in the new workspace ({}): {}",
                setup.ended,
                clip(&setup.output, 1500)
            );
            return self.failed_before(run, l, &ws, bead, expected, why, setup.output);
        }
        run.started(l, &bead.title);
        run.notify(
            l,
            NotificationEvent::BeadStart,
            &format!("[{}] Started {bead_id}: {}", l.slug, bead.title),
        );
        let attempts = self.attempt(run, l, &ws, bead, expected, started)?;
        crate::crash_point!("worker::after_agent");
        // The agent answered (a pass, a question, a guardrail): the provider works and the
        // bead's earlier failures are behind it; a pass once its work got past the repository's
        // commit hooks (a refusal there is a failure that counts).
        let succeeded = || {
            let store = crate::retry::store::Store::in_dir(&self.paths.braids_dir);
            let now = chrono::Utc::now();
            if let Err(e) = store.update(|a| a.succeed(&run.msg.project, bead_id, now)) {
                tracing::warn!(bead = %bead_id, "cannot record the attempt: {e:#}");
            }
        };
        if matches!(attempts, AttemptEnd::Question | AttemptEnd::Guardrail(_)) {
            succeeded();
        }
        match attempts {
            AttemptEnd::Passed {
                report,
                deliverable,
            } => {
                let ending = self.finish(run, l, &ws, bead, &report, &deliverable);
                if !matches!(ending, Ok(Ending::Retrying { .. }) | Err(_))
                    && !run.steps.iter().any(|s| s.name == "retry")
                {
                    succeeded();
                }
                ending
            }
            AttemptEnd::Question => Ok(Ending::AwaitingHuman),
            AttemptEnd::Guardrail(report) => {
                self.guardrail(run, l, bead, report.summary.as_deref())
            }
            AttemptEnd::Failed(failure) => {
                self.after_failed_attempt(run, l, &ws, bead, expected, failure)
            }
        }
    }
}
