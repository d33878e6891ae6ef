//! Test counts are measured, not claimed (CONTRACTS 10.9): after a step that has a test
//! command (`impl` and `verify` by default, from PROJECT.md's `TestCommand:`; any step from
//! its own `test_command:`), braids runs the tests itself and what the runner reported is
//! STATE's `tests` and `failing_tests`. The agent's report is kept beside them. A step the
//! agent passed fails when the real tests fail; a step the agent failed stays failed, since
//! passing tests do not prove the rest of its work.

use serde::Serialize;

use super::handoff::Handoff;
use super::rules::Rule;
use super::step::{Status, Step};
use super::story_state::{StoryState, Tests};
use crate::format::project::test_command::TestCommand;
use crate::testrun::Ran;

/// The test command a step runs after its executor: its own, else the project's for `impl`
/// and `verify`.
#[must_use]
pub fn command_for(rule: &Rule, project: Option<&TestCommand>) -> Option<TestCommand> {
    rule.test_command.clone().or_else(|| {
        matches!(rule.step, Step::Impl | Step::Verify)
            .then(|| project.cloned())
            .flatten()
    })
}

/// A step's state once the real run is in, and what the agent said that the run did not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[must_use]
pub struct Judged {
    pub state: StoryState,
    /// Set when the agent's report and the run disagree: for the story's log and tracing.
    pub disagreement: Option<String>,
}

/// Puts the run of `command` into `applied` (the state with the agent's report applied).
pub fn judge(
    applied: &StoryState,
    claim: Option<&Handoff>,
    command: &str,
    ran: &Ran,
    rule: &Rule,
) -> Judged {
    let mut s = applied.clone();
    let claimed_tests = claim.and_then(|h| h.tests);
    let claimed_failing = claim.map(|h| h.failing_tests.clone()).unwrap_or_default();
    s.tests_measured_by = Some(command.to_string());
    s.claimed_tests = claimed_tests;
    s.claimed_failing_tests = claimed_failing.clone();
    let measured = ran.counts.as_ref().map(|c| Tests {
        pass: c.pass,
        fail: c.fail,
        skip: c.skip,
    });
    s.tests = measured;
    s.failing_tests = ran
        .counts
        .as_ref()
        .map(|c| c.failing.clone())
        .unwrap_or_default();
    let failed = !ran.ok || measured.is_some_and(|t| t.fail > 0);
    let real = describe(command, ran, measured, &s.failing_tests);
    if failed && !rule.treat_failing_as_pass {
        match s.status {
            Status::Pass => {
                s.status = Status::Failing;
                s.reason = None;
                s.last_error = Some(real.clone());
            }
            Status::Failing => {
                s.last_error = Some(match s.last_error.take() {
                    Some(e) => format!("{e}; {real}"),
                    None => real.clone(),
                });
            }
            _ => {}
        }
    }
    let mut differences = Vec::new();
    if claim.is_some_and(|h| h.status == Some(Status::Pass))
        && failed
        && !rule.treat_failing_as_pass
    {
        differences.push("pass".to_string());
    }
    if let (Some(c), Some(m)) = (claimed_tests, measured) {
        if c != m {
            differences.push(counts(c));
        }
    }
    let mut claimed_sorted = claimed_failing;
    claimed_sorted.sort();
    let mut real_sorted = s.failing_tests.clone();
    real_sorted.sort();
    if !claimed_sorted.is_empty() && claimed_sorted != real_sorted {
        differences.push(format!("failing {}", claimed_sorted.join(", ")));
    }
    let disagreement = (!differences.is_empty())
        .then(|| format!("the agent said {}; the run: {real}", differences.join(", ")));
    Judged {
        state: s,
        disagreement,
    }
}

/// The counts as `braids story show` says them: measured by which command, or the agent's
/// claim; `None` when there are none either way.
pub fn summary(s: &StoryState) -> Option<String> {
    let failing = match s.failing_tests.is_empty() {
        true => String::new(),
        false => format!(
            "; failing: {}",
            crate::system::templates::clip(&s.failing_tests.join(", "), 300)
        ),
    };
    match (&s.tests_measured_by, s.tests) {
        (Some(cmd), Some(t)) => {
            let claim = match s.claimed_tests {
                Some(c) if c != t => format!(" (the agent reported {})", counts(c)),
                _ => String::new(),
            };
            Some(format!("{}, measured by `{cmd}`{failing}{claim}", counts(t)))
        }
        (Some(cmd), None) => Some(format!("`{cmd}` gave no test results braids can read")),
        (None, Some(t)) => Some(format!(
            "{}{failing} (the agent's claim: no test command measured them; see TestCommand in docs/protocol.md)",
            counts(t)
        )),
        (None, None) => None,
    }
}

fn counts(t: Tests) -> String {
    format!("{} pass, {} fail, {} skip", t.pass, t.fail, t.skip)
}

/// The run in one clause: `cargo test (exit 101) counted 2 pass, 1 fail, 0 skip: a::b`.
fn describe(command: &str, ran: &Ran, measured: Option<Tests>, failing: &[String]) -> String {
    let mut d = format!("`{command}` ({})", ran.ended);
    match measured {
        Some(t) => d.push_str(&format!(" counted {}", counts(t))),
        None => d.push_str(" gave no test results braids can read"),
    }
    if !failing.is_empty() {
        d.push_str(&format!(
            ": {}",
            crate::system::templates::clip(&failing.join(", "), 300)
        ));
    }
    d
}

#[cfg(test)]
mod tests;
