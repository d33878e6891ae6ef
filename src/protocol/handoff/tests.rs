use proptest::prelude::*;

use super::*;
use crate::model::BeadId;
use crate::protocol::rules::Rules;
use crate::protocol::step::Step;

fn rule(step: Step) -> Rule {
    Rules::defaults().get(step).unwrap().clone()
}

fn running(step: Step) -> StoryState {
    let mut s = StoryState::new("app", &BeadId::new("app-1").unwrap(), step);
    s.status = Status::Running;
    s
}

fn now() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-03-01T10:00:00Z")
        .unwrap()
        .with_timezone(&Utc)
}

#[test]
fn executor_result_values_valid_and_the_common_mistakes() {
    let h = parse_executor_result("status: pass\nreason: null\nsummary: Fixed it\n").unwrap();
    assert_eq!(
        (h.status, h.reason, h.summary.as_deref()),
        (Some(Status::Pass), None, Some("Fixed it"))
    );
    assert!(h.warnings.is_empty());
    for wrong in ["passing", "passed", "failed", "fail", "PASS", "done"] {
        let h = parse_executor_result(&format!("status: {wrong}\n")).unwrap();
        assert_eq!(h.status, Some(Status::Failing), "{wrong}");
        assert!(
            h.warnings[0].contains(&format!("`{wrong}`")),
            "{wrong}: {:?}",
            h.warnings
        );
    }
    let h = parse_executor_result("status: failing\nreason: tests were flaky\n").unwrap();
    assert_eq!(h.reason, None);
    assert!(h.warnings[0].starts_with("invalid reason `tests were flaky`"));
    for r in Reason::ALL {
        let h = parse_executor_result(&format!("status: failing\nreason: {r}\n")).unwrap();
        assert_eq!(h.reason, Some(r));
    }
    assert_eq!(
        parse_executor_result("status: timeout\n").unwrap().status,
        Some(Status::Failing)
    );
    assert!(parse_executor_result("no status here").is_none());
}

#[test]
fn front_matter_lists_counts_and_body() {
    let text = "---\nstory: US-005\nstep: impl\nattempt: 2\nstatus: failing\nreason: null\n\
                files_changed:\n  - internal/cart/service.go\n  - internal/discount/engine.go\n\
                tests_pass: 42\ntests_fail: \"2\"\ntests_skip: 1\nfailing_tests:\n  - cart_test.go:TestApplyCoupon\n\
                commit_hash: abc123\n---\n\n# HANDOFF — US-005 impl\n\n## Not yet resolved\n";
    let h = parse_handoff(text).unwrap();
    assert_eq!(h.status, Some(Status::Failing));
    assert_eq!(h.story.as_deref(), Some("US-005"));
    assert_eq!(
        h.files_changed,
        ["internal/cart/service.go", "internal/discount/engine.go"]
    );
    assert_eq!(
        h.tests,
        Some(Tests {
            pass: 42,
            fail: 2,
            skip: 1
        })
    );
    assert_eq!(h.failing_tests, ["cart_test.go:TestApplyCoupon"]);
    assert_eq!(h.commit_hash.as_deref(), Some("abc123"));
    assert!(h.body.starts_with("# HANDOFF"));
    // a single string where a list belongs, no tests at all
    let h = parse_handoff("---\nstatus: pass\nfiles_changed: a.rs\n---\n").unwrap();
    assert_eq!(
        (h.files_changed.as_slice(), h.tests),
        (&["a.rs".to_string()][..], None)
    );
    // front matter that is not a mapping: failing, said why
    let h = parse_handoff("---\n- a\n- b\n---\n").unwrap();
    assert_eq!(h.status, Some(Status::Failing));
    assert!(!h.warnings.is_empty());
    // front matter without a status: found, but no status
    assert_eq!(
        parse_handoff("---\nstep: bdd\n---\nbody").unwrap().status,
        None
    );
}

#[test]
fn the_keyword_fallback_and_no_report() {
    let h = parse_handoff(
        "# Notes\nThe BDD is ambiguous. NEEDS CLARIFICATION on coupons.\nSCOPE WARNING too",
    )
    .unwrap();
    assert_eq!(
        (h.status, h.reason),
        (Some(Status::Failing), Some(Reason::NeedsClarification))
    );
    assert_eq!(h.source, "HANDOFF.md keywords");
    let h = parse_handoff("CONSTITUTION VIOLATION: layering").unwrap();
    assert_eq!(h.reason, Some(Reason::ConstitutionViolation));
    assert!(parse_handoff("# Notes\nall good\n").is_none());
    let s = apply(&running(Step::Impl), None, &rule(Step::Impl), now());
    assert_eq!(s.status, Status::Failing);
    assert!(s.last_error.unwrap().contains("wrote no handoff"));
}

#[test]
fn reading_prefers_the_result_file_and_takes_lists_from_the_handoff() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".ai")).unwrap();
    assert!(read(dir.path(), HANDOFF).is_none());
    std::fs::write(
        dir.path().join(HANDOFF),
        "---\nstatus: failing\nfiles_changed: [x.rs]\ntests_pass: 3\n---\n",
    )
    .unwrap();
    assert_eq!(
        read(dir.path(), HANDOFF).unwrap().status,
        Some(Status::Failing)
    );
    std::fs::write(
        dir.path().join(EXECUTOR_RESULT),
        "status: pass\nsummary: ok\n",
    )
    .unwrap();
    let h = read(dir.path(), HANDOFF).unwrap();
    assert_eq!((h.status, h.source), (Some(Status::Pass), EXECUTOR_RESULT));
    assert_eq!(h.files_changed, ["x.rs"]);
    assert_eq!(h.tests.unwrap().pass, 3);
}

#[test]
fn apply_table() {
    let found = |status: Option<Status>, reason: Option<Reason>| Handoff {
        status,
        reason,
        files_changed: vec!["a.rs".into()],
        tests: Some(Tests {
            pass: 1,
            fail: 1,
            skip: 0,
        }),
        failing_tests: vec!["t".into()],
        source: HANDOFF,
        ..Handoff::default()
    };
    // (step, status, reason) → status after
    let cases = [
        (Step::Impl, Some(Status::Pass), None, Status::Pass),
        (Step::Impl, Some(Status::Failing), None, Status::Failing),
        (
            Step::Impl,
            Some(Status::NeedsHuman),
            None,
            Status::NeedsHuman,
        ),
        (Step::Impl, None, None, Status::Failing),
        (Step::Scaffold, Some(Status::Failing), None, Status::Pass),
        (
            Step::Scaffold,
            Some(Status::Failing),
            Some(Reason::ScopeWarning),
            Status::Failing,
        ),
        (Step::Scaffold, None, None, Status::Failing),
    ];
    for (step, status, reason, after) in cases {
        let s = apply(
            &running(step),
            Some(&found(status, reason)),
            &rule(step),
            now(),
        );
        assert_eq!(s.status, after, "{step} {status:?} {reason:?}");
        assert_eq!(s.reason, reason);
        assert_eq!(s.completed_at, Some(now()));
        assert_eq!(s.files_changed, ["a.rs"]);
        assert_eq!(
            s.failing_tests.is_empty(),
            after == Status::Pass,
            "{step} {status:?}"
        );
        assert_eq!(
            s.last_error.is_some(),
            (after == Status::Failing && status.is_none()) || after == Status::NeedsHuman
        );
    }
}

#[test]
fn post_check_sets_lint_and_keeps_a_failure_failing() {
    let mut s = running(Step::Impl);
    s.status = Status::Pass;
    let ok = apply_post_check(&s, true, "");
    assert_eq!((ok.status, ok.lint_pass), (Status::Pass, Some(true)));
    let bad = apply_post_check(&s, false, "go vet: unused x");
    assert_eq!((bad.status, bad.lint_pass), (Status::Failing, Some(false)));
    assert_eq!(
        bad.last_error.as_deref(),
        Some("post_check failed: go vet: unused x")
    );
    let mut f = s.clone();
    f.status = Status::Failing;
    f.last_error = Some("tests fail".into());
    let both = apply_post_check(&f, false, "");
    assert_eq!(
        both.last_error.as_deref(),
        Some("tests fail; post_check failed")
    );
}

#[test]
fn the_archive_entry_names_the_run() {
    let mut s = running(Step::Impl);
    s.status = Status::Failing;
    s.attempt = 2;
    let h = parse_handoff("---\nstatus: failing\n---\n# HANDOFF body\n").unwrap();
    let e = archive_entry(&s, Some(&h), now());
    assert!(
        e.contains("## app-1 impl attempt 2 — failing (2026-03-01T10:00:00Z)"),
        "{e}"
    );
    assert!(e.contains("# HANDOFF body"));
    assert!(archive_entry(&s, None, now()).contains("(no handoff)"));
}

fn fragment() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("---\n".to_string()),
        Just("status: ".to_string()),
        Just("reason: ".to_string()),
        Just("files_changed:\n  - ".to_string()),
        Just("tests_pass: ".to_string()),
        Just("failing_tests: [".to_string()),
        Just("pass\n".to_string()),
        Just("needs_human\n".to_string()),
        Just("NEEDS CLARIFICATION".to_string()),
        Just("constitution_violation\n".to_string()),
        Just("$(rm -rf /); `x` | &&\n".to_string()),
        "[a-z0-9 :\\-\\[\\]{}'\"\n]{0,20}",
    ]
}

proptest! {
    /// Any bytes in: never a panic, and whatever is read applies to a valid state.
    #[test]
    fn any_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2000)) {
        let text = String::from_utf8_lossy(&bytes);
        for h in [parse_handoff(&text), parse_executor_result(&text)].into_iter().flatten() {
            let s = apply(&running(Step::Impl), Some(&h), &rule(Step::Impl), now());
            prop_assert!(matches!(s.status, Status::Pass | Status::Failing | Status::NeedsHuman));
        }
    }

    /// Text shaped like a report, from its own fragments: the same.
    #[test]
    fn report_shaped_text_never_panics(parts in proptest::collection::vec(fragment(), 0..40)) {
        let text = parts.concat();
        for h in [parse_handoff(&text), parse_executor_result(&text)].into_iter().flatten() {
            for step in [Step::Scaffold, Step::Impl] {
                let s = apply(&running(step), Some(&h), &rule(step), now());
                prop_assert!(matches!(s.status, Status::Pass | Status::Failing | Status::NeedsHuman));
                let s = apply_post_check(&s, false, &text);
                prop_assert!(s.status != Status::Pass);
            }
        }
    }
}

#[test]
fn c10_14_a_question_at_any_step_waits_for_a_person_and_spends_no_attempt() {
    use crate::protocol::{dispatch, Action};
    let rules = Rules::defaults();
    let asked = |status, body: &str| Handoff {
        status: Some(status),
        reason: Some(Reason::NeedsClarification),
        body: body.into(),
        source: HANDOFF,
        ..Handoff::default()
    };
    for step in Step::ALL {
        let Some(rule) = rules.get(step) else {
            continue;
        };
        if rule.requires_human || rule.runner == crate::protocol::Runner::Braids {
            continue;
        }
        for status in [Status::Failing, Status::Pass, Status::NeedsHuman] {
            let mut run = running(step);
            run.attempt = 2;
            run.max_attempts = rule.max_attempts.max(2);
            let h = asked(status, "# HANDOFF\n\nShould coupons stack?\n");
            let s = apply(&run, Some(&h), rule, now());
            assert_eq!(s.status, Status::NeedsHuman, "{step} {status}");
            assert_eq!(s.last_error.as_deref(), Some("Should coupons stack?"));
            // the dispatch asks a person at this step: no route, no attempt
            let d = dispatch(&s, &rules, now());
            match &d.action {
                Action::NeedsHuman { step: at, message } => {
                    assert_eq!(*at, step);
                    assert!(message.contains("Should coupons stack?"), "{message}");
                }
                other => panic!("{step}: {other:?}"),
            }
            assert_eq!((d.state.step, d.state.attempt), (step, 2));
            // answered: the same step and attempt again, the answer in its prompt
            let mut answered = d.state.clone();
            answered.status = Status::Pending;
            answered.reason = None;
            answered.human_note = Some("Q: Should coupons stack? A: No.".into());
            let d = dispatch(&answered, &rules, now());
            match &d.action {
                Action::Dispatched {
                    step: at,
                    attempt,
                    prompt,
                } => {
                    assert_eq!((*at, *attempt), (step, 2), "no attempt spent");
                    assert!(prompt.contains("A: No."), "{prompt}");
                }
                other => panic!("{step}: {other:?}"),
            }
        }
    }
    // a summary is the question; the old format's keyword too
    let mut h = asked(Status::Failing, "");
    h.summary = Some("Which currency?".into());
    let s = apply(&running(Step::Bdd), Some(&h), &rule(Step::Bdd), now());
    assert_eq!(s.last_error.as_deref(), Some("Which currency?"));
    let kw = parse_handoff("Stopped: NEEDS CLARIFICATION on the refund rule").unwrap();
    let s = apply(
        &running(Step::Verify),
        Some(&kw),
        &rule(Step::Verify),
        now(),
    );
    assert_eq!(s.status, Status::NeedsHuman);
    // another reason still fails and routes
    let mut h = asked(Status::Failing, "x");
    h.reason = Some(Reason::ConstitutionViolation);
    let s = apply(&running(Step::Impl), Some(&h), &rule(Step::Impl), now());
    assert_eq!(s.status, Status::Failing);
}

#[test]
fn c10_13_a_guardrail_conflict_is_read_and_fails_the_step() {
    let fm = parse_handoff(
        "---\nstatus: needs_human\nreason: guardrail_conflict\nsummary: Never touch billing\n---\nbody\n",
    )
    .unwrap();
    assert!(
        fm.guardrail_conflict && fm.reason.is_none() && fm.warnings.is_empty(),
        "{fm:?}"
    );
    let er = parse_executor_result("status: needs_human\nreason: guardrail_conflict\nsummary: x\n")
        .unwrap();
    assert!(er.guardrail_conflict && er.warnings.is_empty(), "{er:?}");
    let other = parse_handoff("---\nstatus: failing\nreason: scope_warning\n---\n").unwrap();
    assert!(!other.guardrail_conflict);
    // at any executor step: failing (never a question, never a pass), the guardrail named
    for step in [Step::Bdd, Step::Scaffold, Step::Impl, Step::Verify] {
        let s = apply(&running(step), Some(&fm), &rule(step), now());
        assert_eq!(s.status, Status::Failing, "{step}");
        assert_eq!(
            s.last_error.as_deref(),
            Some("guardrail conflict: Never touch billing")
        );
    }
    // a team: one role's conflict is the step's
    let mut s = running(Step::Impl);
    s.story = Some("app-1".into());
    let pass = Handoff {
        status: Some(Status::Pass),
        ..Handoff::default()
    };
    let merged = crate::protocol::team::merge(
        &s,
        &[
            ("backend".into(), Some(pass)),
            ("frontend".into(), Some(fm.clone())),
        ],
    );
    assert!(merged.handoff.guardrail_conflict);
    assert_eq!(
        merged.handoff.summary.as_deref(),
        Some("frontend: Never touch billing")
    );
}
