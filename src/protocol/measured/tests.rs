use chrono::Utc;

use super::*;
use crate::model::BeadId;
use crate::protocol::{handoff, Rules};
use crate::testrun::Counts;

fn ran(ok: bool, counts: Option<(u32, u32, u32, &[&str])>) -> Ran {
    Ran {
        ok,
        ended: if ok {
            "exit 0".into()
        } else {
            "exit 101".into()
        },
        counts: counts.map(|(pass, fail, skip, failing)| Counts {
            pass,
            fail,
            skip,
            failing: failing.iter().map(|s| s.to_string()).collect(),
            format: "libtest",
        }),
        output: String::new(),
    }
}

fn claim(status: Status, tests: Option<(u32, u32, u32)>) -> Handoff {
    Handoff {
        status: Some(status),
        tests: tests.map(|(pass, fail, skip)| Tests { pass, fail, skip }),
        source: handoff::HANDOFF,
        ..Handoff::default()
    }
}

/// The state of `step` after the agent's report and then braids' own run.
fn judged(step: Step, agent: &Handoff, run: &Ran) -> Judged {
    let rules = Rules::defaults();
    let rule = rules.get(step).unwrap();
    let mut running = StoryState::new("p", &BeadId::new("b-1").unwrap(), step);
    running.status = Status::Running;
    let applied = handoff::apply(&running, Some(agent), rule, Utc::now());
    judge(&applied, Some(agent), "cargo test", run, rule)
}

#[test]
fn the_real_run_decides_the_counts_and_a_failure_fails_the_step() {
    use Status::*;
    let some = Some((3, 0, 0));
    // (step, agent's status, agent's counts, run ok, run counts, status, disagreement?)
    #[allow(clippy::type_complexity)]
    let table: &[(
        Step,
        Status,
        Option<(u32, u32, u32)>,
        bool,
        Option<(u32, u32, u32, &[&str])>,
        Status,
        bool,
    )] = &[
        // agreeing pass
        (
            Step::Verify,
            Pass,
            some,
            true,
            Some((3, 0, 0, &[])),
            Pass,
            false,
        ),
        // the agent's word against a failing run: failing, logged
        (
            Step::Verify,
            Pass,
            some,
            false,
            Some((2, 1, 0, &["t::x"])),
            Failing,
            true,
        ),
        (
            Step::Impl,
            Pass,
            some,
            false,
            Some((2, 1, 0, &["t::x"])),
            Failing,
            true,
        ),
        // no counts claimed, failing run: still failing and said
        (
            Step::Verify,
            Pass,
            None,
            false,
            Some((2, 1, 0, &["t::x"])),
            Failing,
            true,
        ),
        // a build error: non-zero exit with nothing to count fails
        (Step::Verify, Pass, some, false, None, Failing, true),
        // exit 0 but failures counted (a shell that swallowed the status) fails
        (
            Step::Verify,
            Pass,
            None,
            true,
            Some((2, 1, 0, &["t::x"])),
            Failing,
            true,
        ),
        // scaffold's red tests are its output: counted, not failed
        (
            Step::Scaffold,
            Failing,
            None,
            false,
            Some((0, 4, 0, &["a", "b", "c", "d"])),
            Pass,
            false,
        ),
        // the agent failed the step: passing tests do not pass the rest of its work
        (
            Step::Verify,
            Failing,
            some,
            true,
            Some((3, 0, 0, &[])),
            Failing,
            false,
        ),
        // counts differ though both pass: the run's stand, the difference is logged
        (
            Step::Verify,
            Pass,
            Some((9, 0, 0)),
            true,
            Some((3, 0, 0, &[])),
            Pass,
            true,
        ),
        // a question to a person stays a question
        (
            Step::Impl,
            NeedsHuman,
            None,
            false,
            Some((0, 1, 0, &["t::x"])),
            NeedsHuman,
            false,
        ),
    ];
    for (i, (step, agent, claimed, ok, counts, status, disagrees)) in table.iter().enumerate() {
        let run = ran(*ok, *counts);
        let j = judged(*step, &claim(*agent, *claimed), &run);
        assert_eq!(j.state.status, *status, "row {i}");
        assert_eq!(
            j.disagreement.is_some(),
            *disagrees,
            "row {i}: {:?}",
            j.disagreement
        );
        assert_eq!(
            j.state.tests_measured_by.as_deref(),
            Some("cargo test"),
            "row {i}"
        );
        assert_eq!(
            j.state.tests,
            counts.map(|(pass, fail, skip, _)| Tests { pass, fail, skip }),
            "row {i}: the counts are the run's"
        );
        assert_eq!(
            j.state.claimed_tests,
            claimed.map(|(pass, fail, skip)| Tests { pass, fail, skip }),
            "row {i}: the claim is kept"
        );
        if *status == Failing && *agent == Pass {
            let e = j.state.last_error.as_deref().unwrap_or("");
            assert!(e.contains("`cargo test` (exit"), "row {i}: {e}");
        }
    }
}

#[test]
fn the_failing_names_are_the_runs_and_the_claims_are_kept_beside() {
    let mut agent = claim(Status::Failing, Some((2, 1, 0)));
    agent.failing_tests = vec!["t::y".into()];
    let j = judged(
        Step::Verify,
        &agent,
        &ran(false, Some((2, 1, 0, &["t::x"]))),
    );
    assert_eq!(j.state.failing_tests, ["t::x"]);
    assert_eq!(j.state.claimed_failing_tests, ["t::y"]);
    let d = j.disagreement.unwrap();
    assert!(
        d == "the agent said failing t::y; the run: `cargo test` (exit 101) counted 2 pass, 1 fail, 0 skip: t::x",
        "{d}"
    );
    // a later step's claim (no test command there) does not replace measured counts
    let rules = Rules::defaults();
    let commit = rules.get(Step::UpdateMemory).unwrap();
    let later = handoff::apply(
        &j.state,
        Some(&claim(Status::Pass, Some((50, 0, 0)))),
        commit,
        Utc::now(),
    );
    assert_eq!(
        later.tests,
        Some(Tests {
            pass: 2,
            fail: 1,
            skip: 0
        })
    );
    assert_eq!(
        later.claimed_tests,
        Some(Tests {
            pass: 50,
            fail: 0,
            skip: 0
        })
    );
}

#[test]
fn impl_and_verify_take_the_projects_command_and_a_steps_own_wins() {
    let project = TestCommand::argv(vec!["cargo".into(), "test".into()], None);
    let own = TestCommand::argv(vec!["make".into(), "check".into()], None);
    let mut rules = Rules::defaults();
    for step in [Step::Impl, Step::Verify] {
        assert_eq!(
            command_for(rules.get(step).unwrap(), Some(&project)),
            Some(project.clone())
        );
    }
    for step in [Step::Bdd, Step::Scaffold, Step::Commit, Step::UpdateMemory] {
        assert_eq!(
            command_for(rules.get(step).unwrap(), Some(&project)),
            None,
            "{step}"
        );
    }
    assert_eq!(command_for(rules.get(Step::Verify).unwrap(), None), None);
    rules.steps.get_mut(&Step::Scaffold).unwrap().test_command = Some(own.clone());
    rules.steps.get_mut(&Step::Verify).unwrap().test_command = Some(own.clone());
    assert_eq!(
        command_for(rules.get(Step::Scaffold).unwrap(), Some(&project)),
        Some(own.clone())
    );
    assert_eq!(
        command_for(rules.get(Step::Verify).unwrap(), Some(&project)),
        Some(own)
    );
}

#[test]
fn story_show_says_whether_the_counts_were_measured_or_claimed() {
    let mut s = StoryState::new("p", &BeadId::new("b-1").unwrap(), Step::Verify);
    assert_eq!(summary(&s), None);
    s.tests = Some(Tests {
        pass: 4,
        fail: 0,
        skip: 1,
    });
    let said = summary(&s).unwrap();
    assert!(
        said.starts_with("4 pass, 0 fail, 1 skip") && said.contains("the agent's claim"),
        "{said}"
    );
    s.tests_measured_by = Some("cargo test".into());
    s.tests = Some(Tests {
        pass: 3,
        fail: 1,
        skip: 0,
    });
    s.failing_tests = vec!["t::x".into()];
    s.claimed_tests = Some(Tests {
        pass: 4,
        fail: 0,
        skip: 0,
    });
    assert_eq!(
        summary(&s).unwrap(),
        "3 pass, 1 fail, 0 skip, measured by `cargo test`; failing: t::x (the agent reported 4 pass, 0 fail, 0 skip)"
    );
    s.tests = None;
    s.failing_tests.clear();
    assert!(summary(&s).unwrap().contains("no test results"));
}
