//! Team dispatch without a coordinator's tokens (seed 000, "Complexity-Based Dispatch"; seed
//! 002, "Multi-Executor Collaboration"): a story's size and parallel parts decide whether a
//! step with `team_roles` runs as one executor per role, and the roles' handoffs are merged
//! into the step's HANDOFF.md by a pure, deterministic rule instead of a coordinating agent.

use std::collections::BTreeMap;

use serde::Serialize;

use super::handoff::Handoff;
use super::rules::{Role, Rule};
use super::step::Status;
use super::story_state::{StoryState, Tests};

/// A story's size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Complexity {
    S,
    M,
    L,
}

impl Complexity {
    fn parse(s: &str) -> Option<Complexity> {
        match s.trim().to_ascii_uppercase().as_str() {
            "S" => Some(Complexity::S),
            "M" => Some(Complexity::M),
            "L" => Some(Complexity::L),
            _ => None,
        }
    }
}

/// A `size:S|M|L` label, else a `[S]`/`[M]`/`[L]` title prefix.
pub fn complexity(labels: &[String], title: &str) -> Option<Complexity> {
    labels
        .iter()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case("size")
                .then(|| Complexity::parse(v))
                .flatten()
        })
        .or_else(|| {
            let rest = title.trim_start().strip_prefix('[')?;
            let (size, _) = rest.split_once(']')?;
            Complexity::parse(size)
        })
}

/// How many `[P]` (parallel) tags a description carries.
pub fn parallel_tags(description: &str) -> usize {
    description.matches("[P]").count()
}

/// One executor, or one per role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    Single,
    Team,
}

/// `S` (or no size) single, `M` a team when at least two parts are parallel, `L` a team.
pub fn mode(c: Option<Complexity>, parallel: usize) -> Mode {
    match c {
        Some(Complexity::L) => Mode::Team,
        Some(Complexity::M) if parallel >= 2 => Mode::Team,
        _ => Mode::Single,
    }
}

/// The role that checks the implementers' work. It never runs beside them: verification
/// starts once their handoffs are merged and passed, as the story's own `verify` step (seed
/// 002 v0.11: "parallel impl (backend/frontend/test teammates)"; seed 000's consolidated
/// HANDOFF leaves the "integration test ready to run in verify step").
pub const VERIFY_ROLE: &str = "verify";

/// The roles that run at once for a dispatched step: one executor per role of a team story's
/// step, never the [`VERIFY_ROLE`]. Empty: one executor, the step's own (a single story, a
/// step without roles, or one role left).
#[must_use]
pub fn at_once(rule: &Rule, mode: Mode) -> Vec<Role> {
    let roles: Vec<Role> = rule
        .team_roles
        .iter()
        .filter(|r| r.name != VERIFY_ROLE)
        .cloned()
        .collect();
    match mode {
        Mode::Team if roles.len() > 1 => roles,
        _ => Vec::new(),
    }
}

/// Where a role writes its own handoff, relative to the workspace.
pub fn handoff_of(role: &str) -> String {
    format!(".ai/handoffs/{role}.md")
}

/// The roles' handoffs as one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Merged {
    pub handoff: Handoff,
    /// A file two or more roles wrote, and the roles, in role order.
    pub conflicts: Vec<(String, Vec<String>)>,
    /// The consolidated `.ai/HANDOFF.md`.
    pub text: String,
}

/// How bad a role's outcome is: a question stops the step, a failure fails it.
fn severity(s: Option<Status>) -> u8 {
    match s {
        Some(Status::NeedsHuman) => 3,
        Some(Status::Failing | Status::Timeout) | None => 2,
        Some(Status::Running | Status::Pending) => 2,
        Some(Status::Pass) => 0,
    }
}

/// Merges the roles' handoffs (`None`: the role wrote none, a failure). Pure.
#[must_use]
pub fn merge(state: &StoryState, roles: &[(String, Option<Handoff>)]) -> Merged {
    let status = match roles
        .iter()
        .map(|(_, h)| severity(h.as_ref().and_then(|h| h.status)))
        .max()
    {
        Some(3) => Status::NeedsHuman,
        Some(2) => Status::Failing,
        Some(_) => Status::Pass,
        None => Status::Failing,
    };
    let reason = roles
        .iter()
        .find_map(|(_, h)| h.as_ref().and_then(|h| h.reason));
    // A role that would break a guardrail stops the whole step, naming the guardrail.
    let conflict = roles.iter().find_map(|(role, h)| {
        h.as_ref()
            .filter(|h| h.guardrail_conflict)
            .map(|h| format!("{role}: {}", h.summary.as_deref().unwrap_or("a guardrail")))
    });
    let mut files: Vec<String> = Vec::new();
    let mut writers: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut tests: Option<Tests> = None;
    let mut failing = Vec::new();
    let mut warnings = Vec::new();
    let mut progress = Vec::new();
    for (role, h) in roles {
        let Some(h) = h else {
            progress.push(format!("- {role}: failing (wrote no handoff)"));
            continue;
        };
        progress.push(format!(
            "- {role}: {}{}",
            h.status.map_or("no status", Status::as_str),
            h.reason.map_or(String::new(), |r| format!(" ({r})"))
        ));
        for f in &h.files_changed {
            if !files.contains(f) {
                files.push(f.clone());
            }
            let w = writers.entry(f.clone()).or_default();
            if !w.contains(role) {
                w.push(role.clone());
            }
        }
        if let Some(t) = h.tests {
            let sum = tests.get_or_insert_with(Tests::default);
            sum.pass += t.pass;
            sum.fail += t.fail;
            sum.skip += t.skip;
        }
        failing.extend(h.failing_tests.iter().cloned());
        warnings.extend(h.warnings.iter().map(|w| format!("{role}: {w}")));
    }
    let conflicts: Vec<(String, Vec<String>)> = files
        .iter()
        .filter_map(|f| {
            let w = &writers[f];
            (w.len() > 1).then(|| (f.clone(), w.clone()))
        })
        .collect();
    let summary = format!(
        "team of {}: {}",
        roles.len(),
        progress
            .iter()
            .map(|p| p.trim_start_matches("- ").to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    let story = state.story.clone().unwrap_or_default();
    let text = render(
        state, status, reason, &files, tests, &failing, &progress, &conflicts,
    );
    Merged {
        handoff: Handoff {
            status: Some(status),
            reason,
            guardrail_conflict: conflict.is_some(),
            summary: Some(conflict.unwrap_or(summary)),
            story: Some(story),
            step: Some(state.step.to_string()),
            files_changed: files,
            tests,
            failing_tests: failing,
            commit_hash: None,
            body: text
                .split_once("\n---\n")
                .map_or(String::new(), |(_, b)| b.to_string()),
            source: "team merge",
            warnings,
        },
        conflicts,
        text,
    }
}

#[allow(clippy::too_many_arguments)]
fn render(
    state: &StoryState,
    status: Status,
    reason: Option<super::step::Reason>,
    files: &[String],
    tests: Option<Tests>,
    failing: &[String],
    progress: &[String],
    conflicts: &[(String, Vec<String>)],
) -> String {
    let story = state.story.as_deref().unwrap_or("");
    let q = |s: &str| serde_json::to_string(s).expect("a string serialises");
    let mut t = format!(
        "---\nstory: {}\nstep: {}\nattempt: {}\nstatus: {status}\nreason: {}\n",
        q(story),
        state.step,
        state.attempt,
        reason.map_or("null".to_string(), |r| r.to_string())
    );
    t.push_str("files_changed:");
    if files.is_empty() {
        t.push_str(" []\n");
    } else {
        t.push('\n');
        for f in files {
            t.push_str(&format!("  - {}\n", q(f)));
        }
    }
    let tt = tests.unwrap_or_default();
    t.push_str(&format!(
        "tests_pass: {}\ntests_fail: {}\ntests_skip: {}\n",
        tt.pass, tt.fail, tt.skip
    ));
    if !failing.is_empty() {
        t.push_str("failing_tests:\n");
        for f in failing {
            t.push_str(&format!("  - {}\n", q(f)));
        }
    }
    t.push_str(&format!(
        "---\n\n# HANDOFF — {story} {} (multi-executor)\n\n## Executor Progress\n{}\n\n## File Conflict Log\n",
        state.step,
        progress.join("\n")
    ));
    if conflicts.is_empty() {
        t.push_str("- None\n");
    } else {
        for (f, roles) in conflicts {
            t.push_str(&format!("- {f}: written by {}\n", roles.join(" and ")));
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::BeadId;
    use crate::protocol::handoff::parse_handoff;
    use crate::protocol::step::{Reason, Step};

    #[test]
    fn complexity_and_mode_tables() {
        let l = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(complexity(&l(&["size:L"]), "x"), Some(Complexity::L));
        assert_eq!(
            complexity(&l(&["Size: m"]), "[S] x"),
            Some(Complexity::M),
            "the label first"
        );
        assert_eq!(complexity(&[], "[L] Payments"), Some(Complexity::L));
        assert_eq!(complexity(&[], "  [s] tiny"), Some(Complexity::S));
        assert_eq!(complexity(&[], "Payments [L]"), None, "a prefix only");
        assert_eq!(complexity(&l(&["size:XL"]), "[Q] x"), None);
        assert_eq!(parallel_tags("- [P] api\n- [P] ui\n- db"), 2);
        let cases = [
            (None, 5, Mode::Single),
            (Some(Complexity::S), 5, Mode::Single),
            (Some(Complexity::M), 1, Mode::Single),
            (Some(Complexity::M), 2, Mode::Team),
            (Some(Complexity::L), 0, Mode::Team),
        ];
        for (c, p, m) in cases {
            assert_eq!(mode(c, p), m, "{c:?} with {p} [P]");
        }
        assert_eq!(handoff_of("backend"), ".ai/handoffs/backend.md");
    }

    fn h(
        status: Status,
        reason: Option<Reason>,
        files: &[&str],
        tests: (u32, u32),
    ) -> Option<Handoff> {
        Some(Handoff {
            status: Some(status),
            reason,
            files_changed: files.iter().map(|s| s.to_string()).collect(),
            tests: Some(Tests {
                pass: tests.0,
                fail: tests.1,
                skip: 0,
            }),
            failing_tests: if tests.1 > 0 {
                vec!["t::x".into()]
            } else {
                vec![]
            },
            ..Handoff::default()
        })
    }

    #[test]
    fn the_worst_status_wins_files_union_tests_sum_conflicts_recorded() {
        let mut s = StoryState::new("app", &BeadId::new("app-9").unwrap(), Step::Impl);
        s.attempt = 2;
        let all_pass = merge(
            &s,
            &[
                (
                    "backend".into(),
                    h(Status::Pass, None, &["a.go", "shared.go"], (10, 0)),
                ),
                (
                    "frontend".into(),
                    h(Status::Pass, None, &["b.ts", "shared.go"], (5, 0)),
                ),
                ("test".into(), h(Status::Pass, None, &["a_test.go"], (3, 0))),
            ],
        );
        let m = &all_pass.handoff;
        assert_eq!(m.status, Some(Status::Pass));
        assert_eq!(m.files_changed, ["a.go", "shared.go", "b.ts", "a_test.go"]);
        assert_eq!(
            m.tests,
            Some(Tests {
                pass: 18,
                fail: 0,
                skip: 0
            })
        );
        assert_eq!(
            all_pass.conflicts,
            [(
                "shared.go".to_string(),
                vec!["backend".to_string(), "frontend".to_string()]
            )]
        );
        assert!(all_pass
            .text
            .contains("- shared.go: written by backend and frontend"));
        // the merged text parses back to the same values
        let back = parse_handoff(&all_pass.text).unwrap();
        assert_eq!(
            (
                back.status,
                back.reason,
                &back.files_changed,
                back.tests,
                back.story.as_deref()
            ),
            (m.status, m.reason, &m.files_changed, m.tests, Some("app-9"))
        );
        let failing = merge(
            &s,
            &[
                ("backend".into(), h(Status::Pass, None, &[], (1, 0))),
                (
                    "frontend".into(),
                    h(Status::Failing, Some(Reason::ScopeWarning), &[], (1, 1)),
                ),
                ("test".into(), None),
            ],
        );
        assert_eq!(failing.handoff.status, Some(Status::Failing));
        assert_eq!(failing.handoff.reason, Some(Reason::ScopeWarning));
        assert_eq!(failing.handoff.failing_tests, ["t::x"]);
        assert!(
            failing.text.contains("- test: failing (wrote no handoff)"),
            "{}",
            failing.text
        );
        let back = parse_handoff(&failing.text).unwrap();
        assert_eq!(
            (back.status, back.reason),
            (Some(Status::Failing), Some(Reason::ScopeWarning))
        );
        let asked = merge(
            &s,
            &[
                ("backend".into(), h(Status::Failing, None, &[], (0, 1))),
                (
                    "frontend".into(),
                    h(
                        Status::NeedsHuman,
                        Some(Reason::NeedsClarification),
                        &[],
                        (0, 0),
                    ),
                ),
            ],
        );
        assert_eq!(
            asked.handoff.status,
            Some(Status::NeedsHuman),
            "a question is the worst"
        );
        assert_eq!(
            merge(&s, &[]).handoff.status,
            Some(Status::Failing),
            "no roles, no pass"
        );
    }

    #[test]
    fn c10_6_verification_runs_after_the_implementers_merge() {
        use crate::protocol::rules::Rules;
        use crate::protocol::{dispatch, Action};
        let rules = Rules::defaults();
        let names = |r: &[Role]| r.iter().map(|r| r.name.clone()).collect::<Vec<_>>();
        // (step, mode) → the roles that run at once, with the default roles
        let cases: [(Step, Mode, &[&str]); 6] = [
            (Step::Impl, Mode::Team, &["backend", "frontend", "test"]),
            (Step::Impl, Mode::Single, &[]),
            (Step::Verify, Mode::Team, &[]),
            (Step::Bdd, Mode::Team, &[]),
            (Step::Scaffold, Mode::Team, &[]),
            (Step::UpdateMemory, Mode::Team, &[]),
        ];
        for (step, mode, want) in cases {
            let got = names(&at_once(rules.get(step).unwrap(), mode));
            assert_eq!(got, want, "{step} in {mode:?}");
        }
        assert!(
            rules
                .get(Step::Impl)
                .unwrap()
                .team_roles
                .iter()
                .any(|r| r.name == VERIFY_ROLE),
            "seed 000's table keeps its verify role; it is never run beside the implementers"
        );
        // a project's own roles: a verify role is left out, and one role left is no team
        let mut rule = rules.get(Step::Bdd).unwrap().clone();
        let role = |n: &str| Role {
            name: n.into(),
            claude_reads: vec![],
            claude_writes: vec![],
        };
        rule.team_roles = vec![role("writer"), role("verify")];
        assert!(at_once(&rule, Mode::Team).is_empty());
        rule.team_roles = vec![role("a"), role("verify"), role("b")];
        assert_eq!(names(&at_once(&rule, Mode::Team)), ["a", "b"]);
        // the implementers' merged pass dispatches the verify step, one executor
        let t0 = chrono::DateTime::UNIX_EPOCH;
        let mut s = StoryState::new("app", &BeadId::new("app-3").unwrap(), Step::Impl);
        s.status = Status::Running;
        s.max_attempts = rules.get(Step::Impl).unwrap().max_attempts;
        let merged = merge(
            &s,
            &[
                ("backend".into(), h(Status::Pass, None, &["a.go"], (1, 0))),
                ("frontend".into(), h(Status::Pass, None, &["b.ts"], (1, 0))),
                ("test".into(), h(Status::Pass, None, &["a_test.go"], (2, 0))),
            ],
        );
        let impl_rule = rules.get(Step::Impl).unwrap();
        let after = crate::protocol::handoff::apply(&s, Some(&merged.handoff), impl_rule, t0);
        let d = dispatch(&after, &rules, t0);
        assert!(
            matches!(
                d.action,
                Action::Dispatched {
                    step: Step::Verify,
                    attempt: 1,
                    ..
                }
            ),
            "{:?}",
            d.action
        );
        assert!(at_once(rules.get(Step::Verify).unwrap(), Mode::Team).is_empty());
        // a failing merge retries impl: verification waits for a merge that passes
        let failed = merge(
            &s,
            &[
                ("backend".into(), h(Status::Pass, None, &[], (1, 0))),
                ("test".into(), h(Status::Failing, None, &[], (0, 1))),
            ],
        );
        let after = crate::protocol::handoff::apply(&s, Some(&failed.handoff), impl_rule, t0);
        assert!(matches!(
            dispatch(&after, &rules, t0).action,
            Action::Dispatched {
                step: Step::Impl,
                attempt: 2,
                ..
            }
        ));
    }
}
