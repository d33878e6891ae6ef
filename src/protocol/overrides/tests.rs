use super::*;

fn problems(text: &str) -> Vec<(usize, String)> {
    parse(text)
        .unwrap_err()
        .into_iter()
        .map(|p| (p.line, p.sentence()))
        .collect()
}

#[test]
fn empty_files_mean_the_defaults() {
    for text in ["", "steps: {}", "steps:\n", "# nothing\n"] {
        assert_eq!(parse(text).unwrap(), Rules::defaults(), "{text:?}");
    }
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(load(dir.path()).unwrap(), Rules::defaults(), "no file");
}

#[test]
fn fields_replace_lists_replace_routes_merge() {
    let text = "\
steps:
  impl:
    max_attempts: 3
    timeout_min: 20
    claude_reads: [docs/sdd.md]
    post_check: [cargo, clippy, --, -D, warnings]
    on_fail:
      nfr_missing: sdd-delta
  verify:
    post_check: {shell: \"go vet ./... && golangci-lint run\"}
    next_on_fail: scaffold
  commit:
    runner: executor
  scaffold:
    post_check: null
    treat_failing_as_pass: false
";
    let r = parse(text).unwrap();
    let d = Rules::defaults();
    let i = r.get(Step::Impl).unwrap();
    assert_eq!((i.max_attempts, i.timeout_min), (3, 20));
    assert_eq!(i.claude_reads, ["docs/sdd.md"], "a list replaces");
    assert_eq!(
        i.claude_writes,
        d.get(Step::Impl).unwrap().claude_writes,
        "the rest stays"
    );
    assert_eq!(
        i.post_check,
        Some(PostCheck::Argv(
            ["cargo", "clippy", "--", "-D", "warnings"]
                .map(String::from)
                .to_vec()
        ))
    );
    // on_fail merges per key over the defaults
    assert_eq!(
        i.on_fail.target(Step::Impl, Some(Reason::NfrMissing)),
        Step::SddDelta
    );
    assert_eq!(
        i.on_fail
            .target(Step::Impl, Some(Reason::ConstitutionViolation)),
        Step::SddDelta
    );
    assert_eq!(
        i.on_fail.target(Step::Impl, Some(Reason::ScopeWarning)),
        Step::Review
    );
    let v = r.get(Step::Verify).unwrap();
    assert_eq!(
        v.post_check,
        Some(PostCheck::Shell("go vet ./... && golangci-lint run".into()))
    );
    assert_eq!(
        v.on_fail.default,
        Some(Step::Scaffold),
        "next_on_fail is the default route"
    );
    assert_eq!(r.get(Step::Commit).unwrap().runner, Runner::Executor);
    let s = r.get(Step::Scaffold).unwrap();
    assert_eq!(
        (s.post_check.clone(), s.treat_failing_as_pass),
        (None, false)
    );
    assert_eq!(
        r.get(Step::Bdd),
        d.get(Step::Bdd),
        "untouched steps are the defaults"
    );
}

#[test]
fn team_roles_replace_in_the_order_written() {
    let text = "\
steps:
  impl:
    team_roles:
      test: {claude_reads: [\"docs/bdd/US-{story}.md\"], claude_writes: [\"tests/*\"]}
      backend:
        claude_reads: [docs/sdd.md]
        claude_writes: [\"src/*.rs\"]
      api: {}
";
    let r = parse(text).unwrap();
    let roles: Vec<&str> = r
        .get(Step::Impl)
        .unwrap()
        .team_roles
        .iter()
        .map(|r| r.name.as_str())
        .collect();
    assert_eq!(roles, ["test", "backend", "api"]);
    assert_eq!(
        r.get(Step::Impl).unwrap().team_roles[1].claude_writes,
        ["src/*.rs"]
    );
}

#[test]
fn every_mistake_names_its_line_and_the_fix() {
    let cases: &[(&str, usize, &str)] = &[
        (
            "steps:\n  implement:\n    max_attempts: 2\n",
            2,
            "unknown step `implement`; use one of bootstrap, bdd",
        ),
        (
            "steps:\n  impl:\n    retries: 2\n",
            3,
            "unknown field `retries` in step `impl`",
        ),
        (
            "steps:\n  impl:\n    on_fail:\n      flaky: impl\n",
            4,
            "unknown reason `flaky`",
        ),
        (
            "steps:\n  impl:\n    on_fail:\n      default: coding\n",
            4,
            "routes to `coding`, which is not a step",
        ),
        (
            "steps:\n  impl:\n    next_on_pass: deploy\n",
            3,
            "routes to `deploy`",
        ),
        (
            "steps:\n  verify:\n    next_on_fail: done\n",
            3,
            "which a failure cannot reach",
        ),
        (
            "steps:\n  impl:\n    max_attempts: 0\n",
            3,
            "not a whole number from 1",
        ),
        (
            "steps:\n  impl:\n    max_attempts: many\n",
            3,
            "not a whole number",
        ),
        (
            "steps:\n  impl:\n    requires_human: maybe\n",
            3,
            "not true or false",
        ),
        (
            "steps:\n\n  impl:\n    post_check: \"go vet ./...\"\n",
            4,
            "is a plain string",
        ),
        (
            "steps:\n  impl:\n    post_check: []\n",
            3,
            "is an empty command",
        ),
        (
            "steps:\n  impl:\n    post_check: {sh: x}\n",
            3,
            "other than {shell",
        ),
        (
            "steps:\n  verify:\n    test_command: \"cargo test\"\n",
            3,
            "`test_command` of `verify` is a plain string",
        ),
        (
            "steps:\n  verify:\n    test_command: [go, test, '|', tee]\n",
            3,
            "which only a shell understands",
        ),
        (
            "steps:\n  verify:\n    test_command: {argv: [pytest], shell: pytest}\n",
            3,
            "exactly one of argv or shell",
        ),
        (
            "steps:\n  verify:\n    test_command: {argv: [pytest], junit: x.xml}\n",
            3,
            "unknown key `junit`",
        ),
        (
            "steps:\n  impl:\n    runner: robot\n",
            3,
            "write braids or executor",
        ),
        (
            "steps:\n  impl:\n    team_roles:\n      be: {claude_reads: [a], model: x}\n",
            4,
            "unknown field `model`",
        ),
        (
            "steps:\n  review:\n    team_roles:\n      a: {}\n",
            3,
            "needs a person",
        ),
        ("rules:\n  impl: {}\n", 1, "unknown top-level key `rules`"),
        ("steps: [impl]\n", 1, "`steps` is not a mapping"),
        ("steps:\n  impl: 3\n", 2, "step `impl` is not a mapping"),
        (
            "steps:\n  impl:\n    max_attempts: [1\n",
            3,
            "is not valid YAML",
        ),
    ];
    for (text, line, says) in cases {
        let got = problems(text);
        assert_eq!(got[0].0, *line, "{text:?}: {got:?}");
        assert!(got[0].1.contains(says), "{text:?}: {got:?}");
        assert!(got[0].1.starts_with(&format!("{FILE}:{line}: ")), "{got:?}");
    }
    // several at once, in line order
    let got = problems("steps:\n  impl:\n    retries: 1\n  bdd:\n    max_attempts: 0\n");
    assert_eq!(got.iter().map(|g| g.0).collect::<Vec<_>>(), [3, 5]);
}

#[test]
fn load_reads_the_project_root_and_reports_the_first_problem() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".ai")).unwrap();
    std::fs::write(
        dir.path().join(FILE),
        "steps:\n  impl:\n    max_attempts: 4\n",
    )
    .unwrap();
    assert_eq!(
        load(dir.path())
            .unwrap()
            .get(Step::Impl)
            .unwrap()
            .max_attempts,
        4
    );
    std::fs::write(dir.path().join(FILE), "steps:\n  nope: {}\n").unwrap();
    let p = load(dir.path()).unwrap_err();
    assert_eq!(p.line, 2);
}

#[test]
fn a_test_command_is_argv_or_shell_with_an_optional_report() {
    use crate::format::project::test_command::TestCommand;
    let rules = parse(
        "steps:\n  impl:\n    test_command: [cargo, test, --no-fail-fast]\n  verify:\n    test_command: {argv: [pytest, --junitxml=.ai/junit.xml], report: .ai/junit.xml}\n  scaffold:\n    test_command: {shell: \"go test -json ./... 2>&1\"}\n",
    )
    .unwrap();
    let tc = |s: Step| rules.get(s).unwrap().test_command.clone();
    assert_eq!(
        tc(Step::Impl),
        Some(TestCommand::argv(
            vec!["cargo".into(), "test".into(), "--no-fail-fast".into()],
            None
        ))
    );
    let v = tc(Step::Verify).unwrap();
    assert_eq!(v.argv, ["pytest", "--junitxml=.ai/junit.xml"]);
    assert_eq!(v.report.as_deref(), Some(".ai/junit.xml"));
    assert_eq!(
        tc(Step::Scaffold).unwrap().argv,
        ["sh", "-c", "go test -json ./... 2>&1"]
    );
    assert_eq!(tc(Step::Bdd), None);
}
