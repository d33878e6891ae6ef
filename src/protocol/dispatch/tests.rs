//! The seed's decision flow and rules table, row by row: every step's pass, every step's
//! failure with every reason, out of attempts, human steps, timeouts and notes.

use chrono::{DateTime, Duration, Utc};

use super::*;
use crate::model::BeadId;
use crate::protocol::rules::Rules;
use crate::protocol::step::Reason;

fn t0() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-03-01T10:00:00Z")
        .unwrap()
        .with_timezone(&Utc)
}

fn story(step: Step, status: Status, attempt: u32) -> StoryState {
    let rules = Rules::defaults();
    let mut s = StoryState::new("app", &BeadId::new("app-1").unwrap(), step);
    s.status = status;
    s.attempt = attempt;
    if let Some(r) = rules.get(step) {
        s.max_attempts = r.max_attempts;
        s.timeout_min = r.timeout_min;
    }
    s
}

/// (step, attempt) after a dispatch that ran something, or the action's kind.
fn outcome(d: &Dispatch) -> (String, Option<(Step, u32)>) {
    let ran = match d.action {
        Action::Dispatched { step, attempt, .. } => Some((step, attempt)),
        _ => None,
    };
    (d.action.kind().to_string(), ran)
}

#[test]
fn pass_advances_along_the_table_for_every_step() {
    let rules = Rules::defaults();
    // step → (action kind, step dispatched)
    let table = [
        (Step::Bootstrap, "dispatched", Some(Step::Bdd)),
        (Step::Bdd, "dispatched", Some(Step::SddDelta)),
        (Step::SddDelta, "dispatched", Some(Step::Contract)),
        (Step::Contract, "needs_human", None),
        (Step::Review, "dispatched", Some(Step::Scaffold)),
        (Step::Scaffold, "dispatched", Some(Step::Impl)),
        (Step::Impl, "dispatched", Some(Step::Verify)),
        (Step::Verify, "dispatched", Some(Step::Commit)),
        (Step::Commit, "dispatched", Some(Step::UpdateMemory)),
        (Step::UpdateMemory, "done", None),
    ];
    for (step, kind, next) in table {
        let d = dispatch(&story(step, Status::Pass, 2), &rules, t0());
        let (k, ran) = outcome(&d);
        assert_eq!(k, kind, "{step} pass");
        assert_eq!(
            ran,
            next.map(|n| (n, 1)),
            "{step} pass: attempt resets to 1"
        );
        if let Some(n) = next {
            let rule = rules.get(n).unwrap();
            assert_eq!(
                (d.state.step, d.state.status, d.state.dispatched_at),
                (n, Status::Running, Some(t0()))
            );
            assert_eq!(
                (d.state.max_attempts, d.state.timeout_min),
                (rule.max_attempts, rule.timeout_min),
                "{n} takes its limits from its rule"
            );
        }
    }
    let d = dispatch(&story(Step::Contract, Status::Pass, 1), &rules, t0());
    assert_eq!(
        (d.state.step, d.state.status),
        (Step::Review, Status::NeedsHuman)
    );
    let d = dispatch(&story(Step::UpdateMemory, Status::Pass, 1), &rules, t0());
    assert_eq!(d.state.step, Step::Done);
    assert_eq!(d.state.completed_at, Some(t0()));
}

#[test]
fn failure_routes_by_reason_for_every_step_and_reason() {
    let rules = Rules::defaults();
    let reasons: Vec<Option<Reason>> = std::iter::once(None)
        .chain(Reason::ALL.into_iter().map(Some))
        .collect();
    // (step, reason) → where the failure goes; anything not listed retries the step.
    let routed = |step: Step, r: Option<Reason>| -> Step {
        use Reason::*;
        match (step, r) {
            (Step::Review, Some(NeedsClarification)) => Step::Bdd,
            (Step::Review, Some(ConstitutionViolation | ScopeWarning)) => Step::SddDelta,
            (Step::Review, _) => Step::Bdd,
            (Step::Impl, Some(ConstitutionViolation)) => Step::SddDelta,
            (Step::Impl, Some(NeedsClarification | ScopeWarning)) => Step::Review,
            (Step::Verify, _) => Step::Impl,
            (s, _) => s,
        }
    };
    for step in Step::ALL.into_iter().filter(|s| *s != Step::Done) {
        for reason in &reasons {
            let mut s = story(step, Status::Failing, 1);
            s.max_attempts = 5;
            s.reason = *reason;
            s.failing_tests = vec!["t::a".into()];
            let d = dispatch(&s, &rules, t0());
            let to = routed(step, *reason);
            let what = format!("{step} failing with {reason:?}");
            if rules.get(to).unwrap().requires_human {
                assert_eq!(d.action.kind(), "needs_human", "{what}");
                assert_eq!((d.state.step, d.state.attempt), (to, 1), "{what}");
            } else if to == step {
                assert_eq!(outcome(&d).1, Some((step, 2)), "{what}: a retry counts");
                assert_eq!(
                    d.state.failing_tests,
                    ["t::a"],
                    "{what}: a retry keeps them"
                );
            } else {
                assert_eq!(
                    outcome(&d).1,
                    Some((to, 1)),
                    "{what}: a routed step restarts"
                );
                assert!(d.state.failing_tests.is_empty(), "{what}");
            }
        }
    }
}

#[test]
fn out_of_attempts_is_blocked_and_nothing_changes() {
    let rules = Rules::defaults();
    for step in Step::ALL.into_iter().filter(|s| *s != Step::Done) {
        let max = rules.get(step).unwrap().max_attempts;
        let s = story(step, Status::Failing, max);
        let d = dispatch(&s, &rules, t0());
        assert_eq!(d.action.kind(), "blocked", "{step} at {max} of {max}");
        assert_eq!(d.state, s, "{step}: a blocked story is left as it is");
        assert!(d.state.is_blocked());
    }
    // routing is not a way round the limit: the seed checks the count first
    let mut s = story(Step::Impl, Status::Failing, 5);
    s.reason = Some(Reason::ConstitutionViolation);
    assert_eq!(dispatch(&s, &rules, t0()).action.kind(), "blocked");
    // one attempt short: retried
    let s = story(Step::Impl, Status::Failing, 4);
    assert_eq!(
        outcome(&dispatch(&s, &rules, t0())).1,
        Some((Step::Impl, 5))
    );
}

#[test]
fn human_steps_wait_until_a_person_decides() {
    let rules = Rules::defaults();
    for status in [Status::Pending, Status::NeedsHuman] {
        let d = dispatch(&story(Step::Review, status, 1), &rules, t0());
        assert_eq!(d.action.kind(), "needs_human", "review {status}");
        assert_eq!(d.state.status, Status::NeedsHuman);
    }
    // the executor asked a question at impl: waits too
    let d = dispatch(&story(Step::Impl, Status::NeedsHuman, 2), &rules, t0());
    assert_eq!(
        (d.action.kind(), d.state.step, d.state.attempt),
        ("needs_human", Step::Impl, 2)
    );
    // approval: review passes to scaffold
    let d = dispatch(&story(Step::Review, Status::Pass, 1), &rules, t0());
    assert_eq!(outcome(&d).1, Some((Step::Scaffold, 1)));
}

#[test]
fn running_steps_wait_or_time_out() {
    let rules = Rules::defaults();
    let mut s = story(Step::Impl, Status::Running, 2);
    s.dispatched_at = Some(t0());
    let d = dispatch(&s, &rules, t0() + Duration::minutes(9));
    assert_eq!(
        d.action,
        Action::AlreadyRunning {
            step: Step::Impl,
            elapsed_min: 9
        }
    );
    assert_eq!(d.state, s);
    let d = dispatch(&s, &rules, t0() + Duration::minutes(11));
    assert_eq!(
        d.action,
        Action::Timeout {
            step: Step::Impl,
            elapsed_min: 11
        }
    );
    assert_eq!(d.state.status, Status::Timeout);
    assert!(d.state.last_error.as_deref().unwrap().contains("timed out"));
    // the next dispatch counts the timeout as a failed attempt
    let next = dispatch(&d.state, &rules, t0() + Duration::minutes(12));
    assert_eq!(outcome(&next).1, Some((Step::Impl, 3)));
    // at the last attempt, a timeout blocks
    let mut last = d.state.clone();
    last.attempt = 5;
    assert_eq!(dispatch(&last, &rules, t0()).action.kind(), "blocked");
}

#[test]
fn a_note_reaches_exactly_one_prompt() {
    let rules = Rules::defaults();
    let mut s = story(Step::Review, Status::Pass, 1);
    s.human_note = Some("Use UTC everywhere".into());
    let d = dispatch(&s, &rules, t0());
    let Action::Dispatched { prompt, .. } = &d.action else {
        panic!("{:?}", d.action)
    };
    assert!(prompt.contains("=== Human Instruction ===\nUse UTC everywhere\n"));
    assert_eq!(d.state.human_note, None, "given once");
    let mut after = d.state.clone();
    after.status = Status::Pass;
    let Action::Dispatched { prompt, .. } = dispatch(&after, &rules, t0()).action else {
        panic!()
    };
    assert!(!prompt.contains("Human Instruction"));
}

#[test]
fn done_and_waiting_for_other_stories() {
    let rules = Rules::defaults();
    let d = dispatch(&story(Step::Done, Status::Pass, 1), &rules, t0());
    assert_eq!(
        d.action,
        Action::Done {
            story: "app-1".into()
        }
    );
    let mut s = story(Step::Bdd, Status::Pending, 1);
    s.blocked_by = vec!["app-0".into()];
    let d = dispatch(&s, &rules, t0());
    assert_eq!(
        d.action,
        Action::Blocked {
            step: Step::Bdd,
            reason: "waits for app-0".into()
        }
    );
    // a fresh story dispatches its first step
    let d = dispatch(&story(Step::Bdd, Status::Pending, 1), &rules, t0());
    assert_eq!(outcome(&d).1, Some((Step::Bdd, 1)));
}

#[test]
fn the_same_input_gives_the_same_decision() {
    let rules = Rules::defaults();
    for step in Step::ALL {
        for status in Status::ALL {
            let mut s = story(step, status, 1);
            s.dispatched_at = Some(t0());
            assert_eq!(
                dispatch(&s, &rules, t0() + Duration::minutes(3)),
                dispatch(&s, &rules, t0() + Duration::minutes(3))
            );
        }
    }
}
