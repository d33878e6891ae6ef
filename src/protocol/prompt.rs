//! The dispatch prompt (seed 000, "buildPrompt"; seed 002, "Dispatch Prompt Template"):
//! template filling, zero tokens. Rebuilt for every attempt, so a retry sees the tests that
//! failed and a person's note reaches the executor.

use std::fmt::Write;

use super::rules::{resolve, Role, Rule};
use super::step::{Reason, Status, Step};
use super::story_state::StoryState;

/// The prompt of one dispatch of `state.step` (already marked running, attempt counted).
/// `note` is a person's instruction, given once.
pub fn build(state: &StoryState, rule: &Rule, note: Option<&str>) -> String {
    build_for(state, rule, note, None)
}

/// The prompt of one role of a team step: the role's reads and writes instead of the step's,
/// and its own handoff file.
pub fn build_for(
    state: &StoryState,
    rule: &Rule,
    note: Option<&str>,
    role: Option<&Role>,
) -> String {
    let story = state.story.as_deref().unwrap_or("");
    let mut p = String::new();
    let _ = writeln!(
        p,
        "You are executing step {} for {story}.",
        rule.display_name
    );
    if let Some(role) = role {
        let _ = writeln!(p, "You are the {} executor of a team; other executors work on the other roles at the same time.", role.name);
    }
    if state.attempt > 1 {
        let _ = writeln!(p, "(Attempt {} of {})", state.attempt, state.max_attempts);
    }
    let (reads, writes) = match role {
        Some(r) => (&r.claude_reads, &r.claude_writes),
        None => (&rule.claude_reads, &rule.claude_writes),
    };
    if !reads.is_empty() {
        p.push_str("\nPlease read the following files in order:\n");
        for f in reads {
            let _ = writeln!(p, "- {}", resolve(f, story));
        }
    }
    if !writes.is_empty() {
        p.push_str("\nYou may write only these files:\n");
        for f in writes {
            let _ = writeln!(p, "- {}", resolve(f, story));
        }
    }
    if let Some(note) = note.map(str::trim).filter(|n| !n.is_empty()) {
        let _ = write!(
            p,
            "\n=== Human Instruction ===\n{note}\n==========================\n"
        );
    }
    if state.attempt > 1 && !state.failing_tests.is_empty() {
        p.push_str("\nThese tests failed in the previous attempt:\n");
        for t in &state.failing_tests {
            let _ = writeln!(p, "- {t}");
        }
    }
    if state.attempt > 1 {
        if let Some(e) = &state.last_error {
            let _ = writeln!(p, "\nThe previous attempt ended with: {e}");
        }
    }
    if state.step == Step::UpdateMemory {
        p.push_str("\nResults of this story (from the orchestrator's state):\n");
        match state.tests {
            Some(t) => {
                let _ = writeln!(
                    p,
                    "- tests: {} pass, {} fail, {} skip",
                    t.pass, t.fail, t.skip
                );
            }
            None => p.push_str("- tests: none reported\n"),
        }
        match state.files_changed.is_empty() {
            true => p.push_str("- files changed: none reported\n"),
            false => {
                let _ = writeln!(p, "- files changed: {}", state.files_changed.join(", "));
            }
        }
        if let Some(c) = &state.commit_hash {
            let _ = writeln!(p, "- commit: {c}");
        }
    }
    let _ = writeln!(p, "\n{}", resolve(&rule.step_instruction, story));
    let _ = match rule.next_on_pass {
        Step::Done => write!(
            p,
            "\nStep boundary: do only the {} step; it is the last, and the orchestrator closes the story.\n",
            state.step
        ),
        next => write!(
            p,
            "\nStep boundary: do only the {} step. Do not start {next} or any later step; the \
             orchestrator dispatches it.\n",
            state.step
        ),
    };
    let handoff = match role {
        Some(r) => format!(".ai/handoffs/{}.md", r.name),
        None => ".ai/HANDOFF.md".to_string(),
    };
    let _ = write!(
        p,
        "\nOutput rules:\n\
         - Only modify affected files and paragraphs, don't rewrite unrelated content.\n\
         - When done, overwrite {handoff} with YAML front matter between `---` lines:\n\
         \x20 story: {story}\n\
         \x20 step: {step}\n\
         \x20 attempt: {attempt}\n\
         \x20 status: one of {statuses}\n\
         \x20 reason: null, or one of {reasons}\n\
         \x20 files_changed: the list of files you changed\n\
         \x20 tests_pass, tests_fail, tests_skip: the test counts\n\
         \x20 failing_tests: the list of failing tests, by name\n\
         \x20 then a markdown body: what was done, what is unresolved, what the next session should note.\n\
         - If requirements are unclear, set reason to needs_clarification.\n\
         - If the work would violate the Constitution, set reason to constitution_violation.\n\
         - If touching Non-Goals scope, set reason to scope_warning.\n",
        step = state.step,
        attempt = state.attempt,
        statuses = [Status::Pass, Status::Failing, Status::NeedsHuman]
            .map(Status::as_str)
            .join(", "),
        reasons = Reason::spellings(),
    );
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::BeadId;
    use crate::protocol::rules::Rules;
    use crate::protocol::story_state::Tests;

    /// One prompt per step, as its first dispatch would build it; the retry, the note, the
    /// test results and the team role each in the step where they matter.
    #[test]
    fn every_steps_prompt() {
        let rules = Rules::defaults();
        let bead = BeadId::new("cart-7").unwrap();
        for step in Step::ALL.into_iter().filter(|s| *s != Step::Done) {
            let rule = rules.get(step).unwrap();
            let mut s = StoryState::new("cart", &bead, step);
            s.status = Status::Running;
            s.max_attempts = rule.max_attempts;
            let mut note = None;
            match step {
                Step::Impl => {
                    s.attempt = 3;
                    s.failing_tests = vec![
                        "cart_test.go:TestApplyCoupon".into(),
                        "cart_test.go:TestRemoveExpired".into(),
                    ];
                    s.last_error = Some("post_check failed: go vet: unused variable".into());
                }
                Step::Scaffold => note = Some("Approved. Keep the coupon rules in one module."),
                Step::UpdateMemory => {
                    s.tests = Some(Tests {
                        pass: 42,
                        fail: 0,
                        skip: 1,
                    });
                    s.files_changed = vec!["internal/cart/service.go".into()];
                    s.commit_hash = Some("3f2a9c1".into());
                }
                _ => {}
            }
            insta::assert_snapshot!(format!("prompt_{step}"), build(&s, rule, note));
        }
        let rule = rules.get(Step::Impl).unwrap();
        let mut s = StoryState::new("cart", &bead, Step::Impl);
        s.max_attempts = rule.max_attempts;
        insta::assert_snapshot!(
            "prompt_impl_team_role_test",
            build_for(&s, rule, None, Some(&rule.team_roles[2]))
        );
    }

    #[test]
    fn a_first_attempt_shows_no_retry_details() {
        let rules = Rules::defaults();
        let rule = rules.get(Step::Impl).unwrap();
        let mut s = StoryState::new("cart", &BeadId::new("cart-7").unwrap(), Step::Impl);
        s.failing_tests = vec!["x".into()];
        let p = build(&s, rule, Some("  "));
        assert!(!p.contains("Attempt"), "{p}");
        assert!(!p.contains("previous attempt"), "{p}");
        assert!(!p.contains("Human Instruction"), "a blank note is no note");
        assert!(p.contains("Step boundary: do only the impl step"));
    }
}
