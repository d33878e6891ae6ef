//! What a worker tells the supervisor's stream (`crate::events`): the task started, the steps
//! status.json shows, and how the run ended. [`ending`] is pure; the worker writes what it
//! returns.

use crate::events::status::State;
use crate::events::{Draft, Kind};

use super::{Ending, Step};

/// The events for how the run of `bead` in `iteration` ended.
pub fn ending(
    ending: &Ending,
    bead: &str,
    iteration: &str,
    steps: &[Step],
    duration_seconds: u64,
) -> Vec<Draft> {
    let d = |k: Kind| {
        Draft::new(k)
            .bead(bead)
            .with("duration_seconds", duration_seconds)
    };
    match ending {
        Ending::Completed {
            commit,
            pushed,
            iteration_completed,
        } => {
            let mut out = vec![d(Kind::TaskComplete)
                .with("tests_passed", true)
                .with("commit", commit)
                .with("pushed", pushed)];
            if *iteration_completed {
                out.push(
                    Draft::new(Kind::IterationComplete)
                        .with("iteration", iteration)
                        .with("completed_by", bead),
                );
            }
            if *pushed == Some(false) {
                let why = last(steps, "push").unwrap_or("the push failed");
                out.push(Draft::new(Kind::PushFailed).bead(bead).with("message", why));
            }
            out
        }
        Ending::InReview {
            number,
            url,
            opened_now: true,
        } => vec![d(Kind::PrOpened).with("number", number).with("url", url)],
        Ending::InReview { .. } => Vec::new(),
        Ending::ClaimRefused | Ending::IterationFrozen | Ending::HandedBack { .. } => Vec::new(),
        Ending::DependenciesOpen { open } => vec![d(Kind::BeadBlocked)
            .with("reason", "its dependencies are open")
            .with(
                "open",
                open.iter().map(|b| b.to_string()).collect::<Vec<_>>(),
            )],
        Ending::AwaitingHuman => {
            let q = last(steps, "question")
                .map(|q| {
                    q.trim_start_matches("bead blocked until answered: ")
                        .trim_start_matches("waiting for a person: ")
                })
                .unwrap_or("the agent needs a person's answer");
            vec![d(Kind::Question).with("message", q)]
        }
        Ending::AwaitingApproval => vec![d(Kind::NeedsHuman).with(
            "reason",
            "ask-first: the plan waits for a person's approval",
        )],
        Ending::Retrying {
            not_before,
            failures,
            cause,
        } => vec![d(Kind::ValidationFailed)
            .with("tests_passed", false)
            .with("failures", failures)
            .with("cause", cause)
            .with("retry_at", not_before)],
        Ending::Blocked { reason } => vec![d(Kind::BeadBlocked).with("reason", reason)],
        Ending::Held {
            reason,
            kept,
            commit,
        } => vec![d(Kind::BeadBlocked)
            .with("reason", reason)
            .with("kept", kept)
            .with("kept_commit", commit)],
        Ending::Failed { error, blocked } => {
            let mut out = vec![d(Kind::Error).with("message", error)];
            if let Some(reason) = blocked {
                let kept = last(steps, "workspace")
                    .and_then(|w| w.strip_prefix("unlanded work kept on branch "));
                let mut b = d(Kind::BeadBlocked).with("reason", reason);
                if let Some(kept) = kept {
                    b = b.with("kept", kept);
                }
                out.push(b);
            }
            out
        }
    }
}

/// Where a step puts the task in status.json.
pub fn state_of(step: &str) -> Option<State> {
    match step {
        "execute" => Some(State::Coding),
        "deliverable" => Some(State::Validation),
        "close" | "commit" => Some(State::Commit),
        _ => None,
    }
}

fn last<'a>(steps: &'a [Step], name: &str) -> Option<&'a str> {
    steps
        .iter()
        .rev()
        .find(|s| s.name == name)
        .map(|s| s.detail.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::BeadId;

    fn kinds(ds: &[Draft]) -> Vec<Kind> {
        ds.iter().map(|d| d.kind).collect()
    }

    #[test]
    fn c8_2_every_worker_ending_has_its_events() {
        let step = |name, detail: &str| Step {
            name,
            detail: detail.into(),
        };
        let steps = [
            step("question", "bead blocked until answered: which API?"),
            step("push", "push failed: no remote"),
        ];
        let now = chrono::Utc::now();
        let cases: Vec<(Ending, Vec<Kind>)> = vec![
            (
                Ending::Completed {
                    commit: Some("abc".into()),
                    pushed: Some(true),
                    iteration_completed: false,
                },
                vec![Kind::TaskComplete],
            ),
            (
                Ending::Completed {
                    commit: None,
                    pushed: Some(false),
                    iteration_completed: true,
                },
                vec![
                    Kind::TaskComplete,
                    Kind::IterationComplete,
                    Kind::PushFailed,
                ],
            ),
            (Ending::ClaimRefused, vec![]),
            (Ending::IterationFrozen, vec![]),
            (
                Ending::DependenciesOpen {
                    open: vec![BeadId::new("p-2").unwrap()],
                },
                vec![Kind::BeadBlocked],
            ),
            (Ending::AwaitingHuman, vec![Kind::Question]),
            (Ending::AwaitingApproval, vec![Kind::NeedsHuman]),
            (
                Ending::Retrying {
                    not_before: now,
                    failures: 2,
                    cause: "exit 1".into(),
                },
                vec![Kind::ValidationFailed],
            ),
            (
                Ending::Held {
                    reason: "x".into(),
                    kept: "braids/kept/p-1-x".into(),
                    commit: "0123abc".into(),
                },
                vec![Kind::BeadBlocked],
            ),
            (
                Ending::Blocked { reason: "x".into() },
                vec![Kind::BeadBlocked],
            ),
            (
                Ending::Failed {
                    error: "x".into(),
                    blocked: None,
                },
                vec![Kind::Error],
            ),
            (
                Ending::Failed {
                    error: "x".into(),
                    blocked: Some("worker error: x".into()),
                },
                vec![Kind::Error, Kind::BeadBlocked],
            ),
        ];
        for (e, want) in cases {
            let got = ending(&e, "p-1", "001", &steps, 7);
            assert_eq!(kinds(&got), want, "{e:?}");
            if let Some(first) = got.first() {
                assert_eq!(first.fields["duration_seconds"], 7, "{e:?}");
                assert_eq!(first.bead.as_deref(), Some("p-1"), "{e:?}");
            }
        }
        let q = ending(&Ending::AwaitingHuman, "p-1", "001", &steps, 1);
        assert_eq!(q[0].fields["message"], "which API?");
        let p = ending(
            &Ending::Completed {
                commit: None,
                pushed: Some(false),
                iteration_completed: true,
            },
            "p-1",
            "001",
            &steps,
            1,
        );
        assert_eq!(p[1].bead, None, "the iteration's, not the bead's");
        assert_eq!(p[1].fields["iteration"], "001");
        assert_eq!(p[2].fields["message"], "push failed: no remote");
        assert!(!p[0].fields.contains_key("commit"), "a None adds nothing");
    }

    #[test]
    fn steps_map_to_states() {
        assert_eq!(state_of("deliverable"), Some(State::Validation));
        assert_eq!(state_of("close"), Some(State::Commit));
        assert_eq!(state_of("notify"), None);
    }
}
