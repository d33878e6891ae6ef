//! `dispatch`: the protocol's decision, a pure function of a story's state, the rules and the
//! clock (seed 000, "Decision Flow"). It returns the state to write and what to do; the caller
//! writes the one and does the other.
//!
//! Where braids departs from the reference, and why:
//! - A `timeout` is a failed attempt at the next dispatch (the reference leaves it to a person
//!   forever; unattended for weeks, braids retries within `max_attempts`).
//! - A failure at a human step (a rejected review) routes by reason at once; the reference's
//!   order would ask the person again before reading their answer.
//! - A person's note reaches exactly one prompt: the next dispatched one, whatever step it is
//!   (the reference clears it on the pass that a note given with an approval comes with).

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::rules::Rules;
use super::step::{Status, Step};
use super::story_state::StoryState;

/// What to do with a story now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Action {
    /// Run `step` (attempt `attempt`) now, with `prompt`; the state is marked running.
    Dispatched {
        step: Step,
        attempt: u32,
        prompt: String,
    },
    /// Out of attempts, or waiting for other stories: a person must step in.
    Blocked { step: Step, reason: String },
    /// A review, or a question the executor asked: waits for a person.
    NeedsHuman { step: Step, message: String },
    /// The chain is complete.
    Done { story: String },
    /// The step is still running within its timeout.
    AlreadyRunning { step: Step, elapsed_min: i64 },
    /// The running step is past its timeout: now marked `timeout`.
    Timeout { step: Step, elapsed_min: i64 },
}

impl Action {
    pub fn kind(&self) -> &'static str {
        match self {
            Action::Dispatched { .. } => "dispatched",
            Action::Blocked { .. } => "blocked",
            Action::NeedsHuman { .. } => "needs_human",
            Action::Done { .. } => "done",
            Action::AlreadyRunning { .. } => "already_running",
            Action::Timeout { .. } => "timeout",
        }
    }
}

/// A decision: the state to write, and the action.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub struct Dispatch {
    pub state: StoryState,
    pub action: Action,
}

/// The decision flow. Pure: the same state, rules and clock give the same answer.
pub fn dispatch(state: &StoryState, rules: &Rules, now: DateTime<Utc>) -> Dispatch {
    let mut s = state.clone();
    let story = s.story.clone().unwrap_or_default();
    let done = |s: StoryState| Dispatch {
        action: Action::Done {
            story: story.clone(),
        },
        state: s,
    };
    if s.step == Step::Done {
        return done(s);
    }
    let Some(rule) = rules.get(s.step) else {
        return done(s);
    };
    if s.status == Status::Running {
        let elapsed_min = s.elapsed_min(now);
        if s.timed_out(now) {
            s.status = Status::Timeout;
            s.completed_at = Some(now);
            s.last_error = Some(format!(
                "{} timed out after {elapsed_min} min (timeout_min {})",
                s.step, s.timeout_min
            ));
            return Dispatch {
                action: Action::Timeout {
                    step: s.step,
                    elapsed_min,
                },
                state: s,
            };
        }
        return Dispatch {
            action: Action::AlreadyRunning {
                step: s.step,
                elapsed_min,
            },
            state: s,
        };
    }
    if !s.blocked_by.is_empty() {
        let reason = format!("waits for {}", s.blocked_by.join(", "));
        return Dispatch {
            action: Action::Blocked {
                step: s.step,
                reason,
            },
            state: s,
        };
    }
    // A timeout counts as a failed attempt, routed like a failure without a reason.
    if s.status == Status::Timeout {
        s.status = Status::Failing;
        s.reason = None;
    }
    let mut rule = rule;
    match s.status {
        Status::Pass => {
            s.step = rule.next_on_pass;
            s.attempt = 1;
            s.status = Status::Pending;
            s.reason = None;
            s.failing_tests.clear();
            s.last_error = None;
            let Some(next) = rules.get(s.step) else {
                s.completed_at = Some(now);
                return done(s);
            };
            rule = next;
            if rule.requires_human {
                return needs_human(s, rules);
            }
        }
        Status::Failing => {
            if s.attempt >= s.max_attempts.max(1) {
                let reason = format!(
                    "stuck at {} after {} attempt{}",
                    s.step,
                    s.attempt,
                    if s.attempt == 1 { "" } else { "s" }
                );
                return Dispatch {
                    action: Action::Blocked {
                        step: s.step,
                        reason,
                    },
                    state: s,
                };
            }
            let to = rule.on_fail.target(s.step, s.reason);
            if to != s.step {
                s.step = to;
                s.attempt = 1;
                s.failing_tests.clear();
                let Some(next) = rules.get(to) else {
                    return done(s);
                };
                rule = next;
                if rule.requires_human {
                    s.status = Status::Pending;
                    return needs_human(s, rules);
                }
            } else {
                s.attempt += 1;
            }
        }
        Status::NeedsHuman => return needs_human(s, rules),
        Status::Pending if rule.requires_human => return needs_human(s, rules),
        Status::Pending | Status::Running | Status::Timeout => {}
    }
    let note = s.human_note.take();
    s.max_attempts = rule.max_attempts;
    s.timeout_min = rule.timeout_min;
    s.status = Status::Running;
    s.reason = None;
    s.dispatched_at = Some(now);
    s.completed_at = None;
    let prompt = super::prompt::build(&s, rule, note.as_deref());
    Dispatch {
        action: Action::Dispatched {
            step: s.step,
            attempt: s.attempt,
            prompt,
        },
        state: s,
    }
}

fn needs_human(mut s: StoryState, rules: &Rules) -> Dispatch {
    s.status = Status::NeedsHuman;
    if let Some(rule) = rules.get(s.step) {
        s.max_attempts = rule.max_attempts;
        s.timeout_min = rule.timeout_min;
    }
    let story = s.story.clone().unwrap_or_default();
    let message = match s.step {
        Step::Review => format!("{story} is ready for review"),
        step => format!(
            "{story} needs a person at {step}: {}",
            s.last_error
                .as_deref()
                .unwrap_or("the executor asked a question")
        ),
    };
    Dispatch {
        action: Action::NeedsHuman {
            step: s.step,
            message,
        },
        state: s,
    }
}

#[cfg(test)]
mod tests;
