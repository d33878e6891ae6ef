//! braids' own test run after a step (CONTRACTS 10.9): the command in the story's workspace,
//! in a process group of its own with the step's deadline; its whole output kept in the
//! story's work directory and its tail in the session log; the counts judged against the
//! agent's report (`protocol::measured`).

use std::time::Duration;

use crate::format::project::test_command::TestCommand;
use crate::model::BeadId;
use crate::protocol::handoff::Handoff;
use crate::protocol::story_state::StoryState;
use crate::protocol::{measured, Rule};
use crate::workspace::Workspace;

use super::super::context::Loaded;
use super::super::{work_dir, Run, Worker};

/// Lines of a test run's output the session log keeps; the whole is in the work directory.
const TAIL_LINES: usize = 40;

impl Worker<'_> {
    /// Runs `cmd` in the workspace and returns `applied` with the measured counts in it.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn measure(
        &self,
        run: &mut Run<'_, '_>,
        l: &Loaded,
        bead: &BeadId,
        ws: &Workspace,
        applied: &StoryState,
        claim: Option<&Handoff>,
        cmd: &TestCommand,
        rule: &Rule,
    ) -> StoryState {
        let deadline = Duration::from_secs(u64::from(rule.timeout_min.max(1)) * 60);
        // The run counts as activity, so a quiet suite is not stopped as stalled.
        let _ = super::super::executor::tee::touch(&self.paths.activity(&l.slug, bead));
        let ran = crate::testrun::run(&ws.dir, cmd, deadline);
        let file = work_dir(&self.paths.braids_dir, &l.slug, bead)
            .join(format!("tests-{}-{}.log", applied.step, applied.attempt));
        let kept = match crate::system::atomic::write(&file, ran.output.as_bytes()) {
            Ok(()) => format!("; output in {}", file.display()),
            Err(e) => {
                tracing::warn!(bead = %bead, "cannot keep the test output: {e:#}");
                String::new()
            }
        };
        let tail: Vec<&str> = ran.output.lines().rev().take(TAIL_LINES).collect();
        for line in tail.iter().rev() {
            tracing::info!(bead = %bead, step = "tests", "| {line}");
        }
        let judged = measured::judge(applied, claim, &cmd.shown, &ran, rule);
        let counted = match &judged.state.tests {
            Some(t) => format!(
                "{} pass, {} fail, {} skip ({})",
                t.pass,
                t.fail,
                t.skip,
                ran.counts.as_ref().map_or("", |c| c.format)
            ),
            None => "no test results braids can read".into(),
        };
        run.step(
            "tests",
            format!("`{}` {}: {counted}{kept}", cmd.shown, ran.ended),
        );
        if let Some(d) = &judged.disagreement {
            tracing::warn!(bead = %bead, step = %applied.step, "the agent's report and the tests disagree: {d}");
            run.step(
                "tests",
                format!("the agent's report and the tests disagree: {d}"),
            );
        }
        judged.state
    }
}
