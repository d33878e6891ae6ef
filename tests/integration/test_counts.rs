//! Test counts are measured, not claimed (CONTRACTS 10.9): a protocol story's `verify` step run
//! by hand (`braids story dispatch`, a real `braids` worker in the foreground) with a real test
//! command from PROJECT.md's `TestCommand:`. The agent always reports `pass` with the counts
//! in `~/claim`; the test command checks the workspace the agent left and prints libtest's
//! lines, so whether the tests pass depends on what the agent did, not on what it said.

use crate::support::{Install, Sandbox};

/// The agent: fixes the code only when `~/fix` exists, and claims whatever `~/claim` says.
const AGENT: &str = r#"
mkdir -p src .ai
[ -f "$HOME/fix" ] && echo fixed > src/cart.txt
read pass fail < "$HOME/claim"
printf -- '---\nstatus: pass\nreason: null\ntests_pass: %s\ntests_fail: %s\ntests_skip: 0\n---\n\nAll green, trust me.\n' "$pass" "$fail" > .ai/HANDOFF.md
"#;

/// The project's tests, as `cargo test` prints them.
const TESTS: &str = r#"
[ "$1" = --quiet ] || { echo "expected my argument as argv, got: $*"; exit 2; }
echo
echo "running 2 tests"
echo "test cart::totals ... ok"
if grep -q fixed src/cart.txt 2>/dev/null; then
  echo "test cart::coupon ... ok"
  echo
  echo "test result: ok. 2 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s"
  exit 0
fi
echo "test cart::coupon ... FAILED"
echo
echo "test result: FAILED. 1 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s"
exit 101
"#;

fn setup() -> (Sandbox, std::path::PathBuf, String) {
    setup_measured(true)
}

/// A protocol project whose agent claims the counts in `$HOME/claim`; with `measured`, its
/// `TestCommand:` is the scripted runner.
fn setup_measured(measured: bool) -> (Sandbox, std::path::PathBuf, String) {
    let sb = Install::new().build();
    let agent = sb.script("bin/agent", AGENT);
    let tests = sb.script("bin/project-tests", TESTS);
    sb.config(&format!(
        "[worker]\nexecutor = [{:?}, \"{{prompt_file}}\"]\n",
        agent.display().to_string()
    ));
    let mut app = sb
        .new_project("app")
        .br()
        .titled(&["Coupons"])
        .field("Pipeline", "protocol");
    if measured {
        app = app.field("TestCommand", &format!("{} --quiet", tests.display()));
    }
    let app = app.create();
    let root = app.root.clone();
    sb.git(&root, &["add", "-A"]);
    sb.git(
        &root,
        &["commit", "-qm", "protocol project", "--allow-empty"],
    );
    (sb, root, app.beads[0].clone())
}

fn state(root: &std::path::Path, id: &str) -> serde_json::Value {
    let p = root.join(format!(".ai/states/{id}.json"));
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

fn counts(v: &serde_json::Value) -> (u64, u64, u64) {
    let n = |k: &str| v[k].as_u64().unwrap_or(u64::MAX);
    (n("pass"), n("fail"), n("skip"))
}

#[test]
fn c10_9_a_verify_the_agent_passes_fails_when_the_real_tests_fail() {
    let (sb, root, id) = setup();
    std::fs::write(sb.home().join("claim"), "5 0\n").unwrap();
    sb.ok(&["story", "reset", "app", &id, "--step", "verify"]);
    let out = sb.ok(&["story", "dispatch", "app", &id]);
    // The step failed on the run, whatever the agent said, and went where a failing verify
    // goes (impl).
    assert!(out.contains("verify attempt 1: failing"), "{out}");
    assert!(
        out.contains("the agent's report and the tests disagree: the agent said pass, 5 pass, 0 fail, 0 skip; the run: "),
        "{out}"
    );
    let s = state(&root, &id);
    assert_eq!(s["step"], "impl", "{s:#}");
    assert_eq!(counts(&s["tests"]), (1, 1, 0), "the run's counts: {s:#}");
    assert_eq!(
        counts(&s["claimed_tests"]),
        (5, 0, 0),
        "the claim kept: {s:#}"
    );
    let measured_by = s["tests_measured_by"].as_str().unwrap();
    assert!(measured_by.ends_with("project-tests --quiet"), "{s:#}");
    let err = s["last_error"].as_str().unwrap();
    assert!(
        err.contains("cart::coupon") && err.contains("exit 101"),
        "{err}"
    );
    // The whole output is kept where the step line says.
    let kept = out
        .split("output in ")
        .nth(1)
        .and_then(|r| r.lines().next())
        .expect("the step line names the output file");
    let text = std::fs::read_to_string(kept.trim()).unwrap();
    assert!(text.contains("test cart::coupon ... FAILED"), "{text}");
    // story show says where the counts came from.
    let shown = sb.ok(&["story", "show", "app", &id]);
    assert!(
        shown.contains("tests: 1 pass, 1 fail, 0 skip, measured by")
            && shown.contains("(the agent reported 5 pass, 0 fail, 0 skip)"),
        "{shown}"
    );
}

#[test]
fn c10_9_when_the_agent_and_the_tests_agree_verify_passes() {
    let (sb, root, id) = setup();
    std::fs::write(sb.home().join("fix"), "").unwrap();
    std::fs::write(sb.home().join("claim"), "2 0\n").unwrap();
    sb.ok(&["story", "reset", "app", &id, "--step", "verify"]);
    let out = sb.ok(&["story", "dispatch", "app", &id]);
    assert!(out.contains("verify attempt 1: pass"), "{out}");
    assert!(!out.contains("disagree"), "{out}");
    let s = state(&root, &id);
    assert_eq!(s["step"], "commit", "{s:#}");
    assert_eq!(counts(&s["tests"]), (2, 0, 0), "{s:#}");
    assert_eq!(s["failing_tests"], serde_json::json!([]), "{s:#}");
}

#[test]
fn c10_9_without_a_test_command_the_counts_are_the_agents_claim() {
    let (sb, root, id) = setup_measured(false);
    std::fs::write(sb.home().join("claim"), "7 0\n").unwrap();
    sb.ok(&["story", "reset", "app", &id, "--step", "verify"]);
    sb.ok(&["story", "dispatch", "app", &id]);
    let s = state(&root, &id);
    assert_eq!(s["step"], "commit", "{s:#}");
    assert_eq!(counts(&s["tests"]), (7, 0, 0), "{s:#}");
    assert!(s.get("tests_measured_by").is_none(), "{s:#}");
    let shown = sb.ok(&["story", "show", "app", &id]);
    assert!(
        shown.contains("tests: 7 pass, 0 fail, 0 skip (the agent's claim"),
        "{shown}"
    );
}
