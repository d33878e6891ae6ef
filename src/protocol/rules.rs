//! The step rules table (seed 002 v0.11, "Step Transition Rules Table"): data, no logic. The
//! defaults are one const table; a project overrides them field by field in its own
//! `.ai/step-rules.yaml` ([`super::overrides`]). What braids adds to the seed's fields:
//! `runner` (the `commit` step runs in braids unless a project gives it to the executor) and
//! `post_check` as an argv list (a shell string only when a project writes `{shell: …}`).

use std::collections::BTreeMap;

use serde::Serialize;

use super::step::{Reason, Step};
use crate::format::project::test_command::TestCommand;

/// A check run in the workspace after the executor: argv run directly, or a shell string a
/// project wrote itself in its own rules file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PostCheck {
    Argv(Vec<String>),
    Shell(String),
}

impl PostCheck {
    /// The argv to run: a shell string goes to `sh -c` as one argument, never spliced.
    pub fn argv(&self) -> Vec<String> {
        match self {
            PostCheck::Argv(v) => v.clone(),
            PostCheck::Shell(s) => vec!["sh".into(), "-c".into(), s.clone()],
        }
    }

    /// How a person reads it.
    pub fn shown(&self) -> String {
        match self {
            PostCheck::Argv(v) => v.join(" "),
            PostCheck::Shell(s) => s.clone(),
        }
    }
}

/// Who carries out a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Runner {
    /// The agent, from the dispatch prompt.
    Executor,
    /// braids itself, deterministically (the `commit` step by default).
    Braids,
}

/// Where a failure goes: `default`, and per reason.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct OnFail {
    pub default: Option<Step>,
    pub by_reason: BTreeMap<Reason, Step>,
}

impl OnFail {
    /// The step a failure with `reason` goes to; the step itself (a retry) when nothing says.
    pub fn target(&self, step: Step, reason: Option<Reason>) -> Step {
        reason
            .and_then(|r| self.by_reason.get(&r).copied())
            .or(self.default)
            .unwrap_or(step)
    }
}

/// One role of a team step: what its executor reads and may write.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Role {
    pub name: String,
    pub claude_reads: Vec<String>,
    pub claude_writes: Vec<String>,
}

/// One step's rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Rule {
    pub step: Step,
    pub display_name: String,
    pub next_on_pass: Step,
    pub on_fail: OnFail,
    pub max_attempts: u32,
    pub timeout_min: u32,
    pub requires_human: bool,
    pub claude_reads: Vec<String>,
    pub claude_writes: Vec<String>,
    pub post_check: Option<PostCheck>,
    /// The step's own test command, run by braids after the executor; `impl` and `verify`
    /// fall back to PROJECT.md's `TestCommand:` ([`super::measured::command_for`]).
    pub test_command: Option<TestCommand>,
    pub step_instruction: String,
    pub treat_failing_as_pass: bool,
    pub runner: Runner,
    /// The roles of a team run of this step, in order; empty: never a team step.
    pub team_roles: Vec<Role>,
}

/// The whole table: a rule for every step but `done`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Rules {
    pub steps: BTreeMap<Step, Rule>,
}

impl Rules {
    /// The rule of `step`; `None` for `done`, which has none.
    pub fn get(&self, step: Step) -> Option<&Rule> {
        self.steps.get(&step)
    }

    /// The canonical defaults of seed 002 v0.11.
    pub fn defaults() -> Rules {
        let steps = DEFAULTS
            .iter()
            .map(|d| {
                let strings = |v: &[&str]| v.iter().map(|s| s.to_string()).collect();
                let rule = Rule {
                    step: d.step,
                    display_name: d.display_name.into(),
                    next_on_pass: d.next_on_pass,
                    on_fail: OnFail {
                        default: d.on_fail_default,
                        by_reason: d.on_fail.iter().copied().collect(),
                    },
                    max_attempts: d.max_attempts,
                    timeout_min: d.timeout_min,
                    requires_human: d.requires_human,
                    claude_reads: strings(d.claude_reads),
                    claude_writes: strings(d.claude_writes),
                    post_check: None,
                    test_command: None,
                    step_instruction: d.step_instruction.into(),
                    treat_failing_as_pass: d.treat_failing_as_pass,
                    runner: d.runner,
                    team_roles: DEFAULT_TEAM_ROLES
                        .iter()
                        .filter(|r| r.step == d.step)
                        .map(|r| Role {
                            name: r.name.into(),
                            claude_reads: strings(r.claude_reads),
                            claude_writes: strings(r.claude_writes),
                        })
                        .collect(),
                };
                (d.step, rule)
            })
            .collect();
        Rules { steps }
    }
}

/// `{story}` in a path or instruction, resolved for one story.
pub fn resolve(text: &str, story: &str) -> String {
    text.replace("{story}", story)
}

/// One row of the const table.
pub struct DefaultRule {
    pub step: Step,
    pub display_name: &'static str,
    pub next_on_pass: Step,
    pub on_fail_default: Option<Step>,
    pub on_fail: &'static [(Reason, Step)],
    pub max_attempts: u32,
    pub timeout_min: u32,
    pub requires_human: bool,
    pub claude_reads: &'static [&'static str],
    pub claude_writes: &'static [&'static str],
    pub step_instruction: &'static str,
    pub treat_failing_as_pass: bool,
    pub runner: Runner,
}

use Reason::{ConstitutionViolation, NeedsClarification, ScopeWarning};

/// The defaults, in chain order (seed 002 v0.11 and the instructions of "Fixed Step
/// Instructions"; `bootstrap` from seed 001). `review` has no executor; its attempts bound how
/// often a person may send it back before it counts as stuck.
pub const DEFAULTS: &[DefaultRule] = &[
    DefaultRule {
        step: Step::Bootstrap,
        display_name: "Bootstrap",
        next_on_pass: Step::Bdd,
        on_fail_default: None,
        on_fail: &[],
        max_attempts: 1,
        timeout_min: 5,
        requires_human: false,
        claude_reads: &[".ai/HANDOFF.md"],
        claude_writes: &[
            "PROJECT_CONTEXT.md",
            "docs/sdd.md",
            "docs/constitution.md",
            "PROJECT_MEMORY.md",
        ],
        step_instruction: "Set up the project for the framework: write PROJECT_CONTEXT.md (why, who, what, tech stack, structure), the SDD skeleton in docs/sdd.md, 3-5 core principles in docs/constitution.md, the initial PROJECT_MEMORY.md, and the directories docs/bdd/, docs/deltas/ and docs/api/.",
        treat_failing_as_pass: false,
        runner: Runner::Executor,
    },
    DefaultRule {
        step: Step::Bdd,
        display_name: "BDD",
        next_on_pass: Step::SddDelta,
        on_fail_default: None,
        on_fail: &[],
        max_attempts: 3,
        timeout_min: 5,
        requires_human: false,
        claude_reads: &["PROJECT_CONTEXT.md", "PROJECT_MEMORY.md", ".ai/HANDOFF.md"],
        claude_writes: &["docs/bdd/US-{story}.md"],
        step_instruction: "Based on MEMORY's NOW/NEXT, write BDD scenarios for this Story. Use RFC 2119 language, tag test levels. Mark unclear items [NEEDS CLARIFICATION].",
        treat_failing_as_pass: false,
        runner: Runner::Executor,
    },
    DefaultRule {
        step: Step::SddDelta,
        display_name: "SDD Delta",
        next_on_pass: Step::Contract,
        on_fail_default: None,
        on_fail: &[],
        max_attempts: 3,
        timeout_min: 5,
        requires_human: false,
        claude_reads: &[
            "PROJECT_CONTEXT.md",
            "PROJECT_MEMORY.md",
            "docs/bdd/US-{story}.md",
            "docs/sdd.md",
            ".ai/HANDOFF.md",
        ],
        claude_writes: &["docs/deltas/US-{story}.md"],
        step_instruction: "Based on BDD scenarios, analyze affected modules, produce Delta Spec (ADDED/MODIFIED/REMOVED).",
        treat_failing_as_pass: false,
        runner: Runner::Executor,
    },
    DefaultRule {
        step: Step::Contract,
        display_name: "Contract",
        next_on_pass: Step::Review,
        on_fail_default: None,
        on_fail: &[],
        max_attempts: 2,
        timeout_min: 5,
        requires_human: false,
        claude_reads: &[
            "docs/sdd.md",
            "docs/deltas/US-{story}.md",
            "docs/api/openapi.yaml",
            ".ai/HANDOFF.md",
        ],
        claude_writes: &["docs/api/openapi.yaml"],
        step_instruction: "Based on Delta Spec, update affected endpoints/events in OpenAPI/AsyncAPI contracts.",
        treat_failing_as_pass: false,
        runner: Runner::Executor,
    },
    DefaultRule {
        step: Step::Review,
        display_name: "Review",
        next_on_pass: Step::Scaffold,
        on_fail_default: Some(Step::Bdd),
        on_fail: &[
            (NeedsClarification, Step::Bdd),
            (ConstitutionViolation, Step::SddDelta),
            (ScopeWarning, Step::SddDelta),
        ],
        max_attempts: 3,
        timeout_min: 5,
        requires_human: true,
        claude_reads: &[],
        claude_writes: &[],
        step_instruction: "A person reviews the BDD scenarios, the Delta Spec and the contracts.",
        treat_failing_as_pass: false,
        runner: Runner::Executor,
    },
    DefaultRule {
        step: Step::Scaffold,
        display_name: "Test Scaffolding",
        next_on_pass: Step::Impl,
        on_fail_default: None,
        on_fail: &[],
        max_attempts: 2,
        timeout_min: 5,
        requires_human: false,
        claude_reads: &[
            "docs/bdd/US-{story}.md",
            "docs/nfr.md",
            "docs/api/openapi.yaml",
            ".ai/HANDOFF.md",
        ],
        claude_writes: &["*_test.go", "*.spec.ts"],
        step_instruction: "Based on BDD scenario tags and NFR table, produce corresponding test skeleton. All tests must fail (red).",
        treat_failing_as_pass: true,
        runner: Runner::Executor,
    },
    DefaultRule {
        step: Step::Impl,
        display_name: "Implementation",
        next_on_pass: Step::Verify,
        on_fail_default: Some(Step::Impl),
        on_fail: &[
            (ConstitutionViolation, Step::SddDelta),
            (NeedsClarification, Step::Review),
            (ScopeWarning, Step::Review),
        ],
        max_attempts: 5,
        timeout_min: 10,
        requires_human: false,
        claude_reads: &["docs/sdd.md", "docs/api/openapi.yaml", ".ai/HANDOFF.md"],
        claude_writes: &["*.go", "*.ts"],
        step_instruction: "Read failing tests, write minimal code to make tests pass, then refactor.",
        treat_failing_as_pass: false,
        runner: Runner::Executor,
    },
    DefaultRule {
        step: Step::Verify,
        display_name: "Verify",
        next_on_pass: Step::Commit,
        on_fail_default: Some(Step::Impl),
        on_fail: &[],
        max_attempts: 2,
        timeout_min: 5,
        requires_human: false,
        claude_reads: &[
            "docs/bdd/US-{story}.md",
            "docs/deltas/US-{story}.md",
            "docs/api/openapi.yaml",
            "docs/constitution.md",
            ".ai/HANDOFF.md",
        ],
        claude_writes: &[],
        step_instruction: "Execute triple check: Completeness (all BDD has tests, all Delta implemented), Correctness (tests pass, NFR met), Coherence (SDD merged Delta, contracts consistent, Constitution not violated).",
        treat_failing_as_pass: false,
        runner: Runner::Executor,
    },
    DefaultRule {
        step: Step::Commit,
        display_name: "Commit",
        next_on_pass: Step::UpdateMemory,
        on_fail_default: None,
        on_fail: &[],
        max_attempts: 2,
        timeout_min: 3,
        requires_human: false,
        claude_reads: &["PROJECT_MEMORY.md", ".ai/HANDOFF.md"],
        claude_writes: &[],
        step_instruction: "Stage and commit all code changes with conventional commit message including story ID. Do NOT commit PROJECT_MEMORY.md or .ai/history.md. Record commit hash in HANDOFF.md front-matter as `commit_hash: <hash>`.",
        treat_failing_as_pass: false,
        runner: Runner::Braids,
    },
    DefaultRule {
        step: Step::UpdateMemory,
        display_name: "Update Memory",
        next_on_pass: Step::Done,
        on_fail_default: None,
        on_fail: &[],
        max_attempts: 2,
        timeout_min: 3,
        requires_human: false,
        claude_reads: &["PROJECT_MEMORY.md", ".ai/HANDOFF.md"],
        claude_writes: &["PROJECT_MEMORY.md", ".ai/history.md"],
        step_instruction: "Read the commit hash and the test results given above, update MEMORY's NOW/TESTS/NEXT/ISSUES/SYNC. Append DONE + LOG entry to `.ai/history.md`. Overwrite HANDOFF.md with latest session state.",
        treat_failing_as_pass: false,
        runner: Runner::Executor,
    },
];

/// One default team role.
pub struct DefaultRole {
    pub step: Step,
    pub name: &'static str,
    pub claude_reads: &'static [&'static str],
    pub claude_writes: &'static [&'static str],
}

/// Seed 000's `DEFAULT_TEAM_ROLES`: the `impl` step as a team.
pub const DEFAULT_TEAM_ROLES: &[DefaultRole] = &[
    DefaultRole {
        step: Step::Impl,
        name: "backend",
        claude_reads: &[
            "docs/sdd/sdd.md",
            "docs/api/openapi.yaml",
            "internal/**/*.go",
        ],
        claude_writes: &["*.go"],
    },
    DefaultRole {
        step: Step::Impl,
        name: "frontend",
        claude_reads: &["docs/api/openapi.yaml", "src/components/**"],
        claude_writes: &["*.ts", "*.tsx"],
    },
    DefaultRole {
        step: Step::Impl,
        name: "test",
        claude_reads: &[
            "docs/bdd/US-{story}.md",
            "docs/api/openapi.yaml",
            "docs/nfr.md",
        ],
        claude_writes: &["*_test.go", "*.spec.ts"],
    },
    DefaultRole {
        step: Step::Impl,
        name: "verify",
        claude_reads: &[
            "docs/bdd/US-{story}.md",
            "docs/deltas/US-{story}.md",
            "docs/api/openapi.yaml",
            "docs/constitution.md",
        ],
        claude_writes: &[],
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_chain_every_step_to_done() {
        let r = Rules::defaults();
        assert_eq!(r.steps.len(), 10, "every step but done has a rule");
        assert!(r.get(Step::Done).is_none());
        let mut chain = vec![Step::Bdd];
        while let Some(rule) = r.get(*chain.last().unwrap()) {
            chain.push(rule.next_on_pass);
        }
        assert_eq!(
            chain.iter().map(|s| s.as_str()).collect::<Vec<_>>(),
            [
                "bdd",
                "sdd-delta",
                "contract",
                "review",
                "scaffold",
                "impl",
                "verify",
                "commit",
                "update-memory",
                "done"
            ]
        );
        assert_eq!(r.get(Step::Bootstrap).unwrap().next_on_pass, Step::Bdd);
        // every route goes to a step with a rule
        for rule in r.steps.values() {
            for to in rule
                .on_fail
                .by_reason
                .values()
                .chain(rule.on_fail.default.iter())
            {
                assert!(r.get(*to).is_some(), "{} routes to {to}", rule.step);
            }
        }
    }

    /// Every default step against the numbers the seeds print: seed 002's rules table (v0.11)
    /// for the chain, seed 001's quick reference and its pre-hook's initial STATE.json
    /// (`max_attempts: 1`, `timeout_min: 5`) for `bootstrap`. `review` is a person's step the
    /// seeds give no numbers; braids' 3 and 5 bound how often it is sent back and how long a
    /// dispatch of it may run.
    #[test]
    fn c10_15_every_default_step_holds_the_seeds_numbers() {
        use Step::*;
        // step, next_on_pass, max_attempts, timeout_min, requires_human, treat_failing_as_pass
        let table = [
            (Bootstrap, Bdd, 1, 5, false, false),
            (Bdd, SddDelta, 3, 5, false, false),
            (SddDelta, Contract, 3, 5, false, false),
            (Contract, Review, 2, 5, false, false),
            (Review, Scaffold, 3, 5, true, false),
            (Scaffold, Impl, 2, 5, false, true),
            (Impl, Verify, 5, 10, false, false),
            (Verify, Commit, 2, 5, false, false),
            (Commit, UpdateMemory, 2, 3, false, false),
            (UpdateMemory, Done, 2, 3, false, false),
        ];
        let r = Rules::defaults();
        assert_eq!(r.steps.len(), table.len());
        for (step, next, max, timeout, human, failing_passes) in table {
            let rule = r.get(step).unwrap();
            assert_eq!(
                (
                    rule.next_on_pass,
                    rule.max_attempts,
                    rule.timeout_min,
                    rule.requires_human,
                    rule.treat_failing_as_pass
                ),
                (next, max, timeout, human, failing_passes),
                "{step}"
            );
        }
        // The seed's failure routes.
        let route = |s: Step, why: Option<Reason>| r.get(s).unwrap().on_fail.target(s, why);
        assert_eq!(route(Review, None), Bdd);
        assert_eq!(route(Review, Some(NeedsClarification)), Bdd);
        assert_eq!(route(Review, Some(ConstitutionViolation)), SddDelta);
        assert_eq!(route(Review, Some(ScopeWarning)), SddDelta);
        assert_eq!(route(Impl, Some(ScopeWarning)), Review);
        assert_eq!(route(Verify, None), Impl);
        for s in [Bdd, SddDelta, Contract, Scaffold, Commit, UpdateMemory] {
            assert_eq!(route(s, None), s, "{s} retries itself");
        }
        assert_eq!(r.get(Commit).unwrap().runner, Runner::Braids);
    }

    #[test]
    fn routing_by_reason_then_default_then_retry() {
        let r = Rules::defaults();
        let impl_ = &r.get(Step::Impl).unwrap().on_fail;
        assert_eq!(impl_.target(Step::Impl, None), Step::Impl);
        assert_eq!(
            impl_.target(Step::Impl, Some(ConstitutionViolation)),
            Step::SddDelta
        );
        assert_eq!(
            impl_.target(Step::Impl, Some(NeedsClarification)),
            Step::Review
        );
        assert_eq!(
            impl_.target(Step::Impl, Some(Reason::TestTimeout)),
            Step::Impl
        );
        let bdd = &r.get(Step::Bdd).unwrap().on_fail;
        assert_eq!(bdd.target(Step::Bdd, Some(ScopeWarning)), Step::Bdd);
        assert_eq!(
            resolve("docs/bdd/US-{story}.md", "b-1"),
            "docs/bdd/US-b-1.md"
        );
    }
}
