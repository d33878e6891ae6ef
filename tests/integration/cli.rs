//! The first commands as a person runs them: `init`, `new`, `iteration`, and `--help`.

use crate::support::{br_path, Sandbox};

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Whether the registry has a row with these cells, however the writer padded them.
fn has_row(s: &Sandbox, cells: &[&str]) -> bool {
    s.read(".openclaw/braids/registry.md").lines().any(|l| {
        let got: Vec<&str> = l
            .trim()
            .trim_matches('|')
            .split('|')
            .map(str::trim)
            .collect();
        got == cells
    })
}

#[test]
fn init_is_idempotent_and_never_overwrites() {
    let s = Sandbox::new();
    let first = s.ok(&["init"]);
    assert!(
        first.contains("created") && first.contains("registry.md"),
        "{first}"
    );
    for f in ["registry.md", "config.toml", "STATUS.md"] {
        assert!(s.braids_dir().join(f).is_file(), "{f}");
    }
    assert!(
        s.projects().is_dir(),
        "BRAIDS_HOME defaults to ~/Projects (4.2)"
    );
    s.config("\n# mine\n");
    let before = s.read(".openclaw/braids/config.toml");
    let again = s.ok(&["init", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&again).unwrap();
    assert_eq!(v["created"], serde_json::json!([]));
    assert_eq!(s.read(".openclaw/braids/config.toml"), before);
}

#[test]
fn c4_2_braids_home_from_the_environment() {
    let s = Sandbox::new();
    let o = s
        .braids()
        .env("BRAIDS_HOME", s.home().join("code"))
        .args(["new", "web", "--tracker", "workplan"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(s.home().join("code/web/.braids/PROJECT.md").is_file());
    assert!(
        s.braids_dir().join("registry.md").is_file(),
        "infrastructure stays in ~/.openclaw/braids"
    );
    assert!(
        has_row(&s, &["web", "active", "normal", "$BRAIDS_HOME/web"]),
        "{}",
        s.read(".openclaw/braids/registry.md")
    );
}

#[test]
fn new_scaffolds_registers_and_commits() {
    let s = Sandbox::new();
    let out = s.ok(&[
        "new",
        "my-app",
        "--priority",
        "high",
        "--max-workers",
        "3",
        "--channel",
        "#my-app",
        "--tracker",
        "workplan",
    ]);
    assert!(out.contains("project my-app"), "{out}");
    let root = s.project("my-app");
    let pm = std::fs::read_to_string(root.join(".braids/PROJECT.md")).unwrap();
    for line in [
        "- **Priority:** high",
        "- **MaxWorkers:** 3",
        "- **Channel:** #my-app",
        "- **Tracker:** workplan",
    ] {
        assert!(pm.contains(line), "{line} missing from\n{pm}");
    }
    assert!(root.join("AGENTS.md").is_file() && root.join(".braids/WORKPLAN.md").is_file());
    assert!(
        has_row(&s, &["my-app", "active", "high", "~/Projects/my-app"]),
        "{}",
        s.read(".openclaw/braids/registry.md")
    );
    assert!(s
        .git(&root, &["log", "--oneline"])
        .contains("Scaffold braids project my-app"));
    assert_eq!(
        s.git(&root, &["status", "--porcelain"]),
        "",
        "nothing left uncommitted"
    );
    // No executor yet: check says so once, at config.toml, and fails (the tick's preflight).
    let o = s.run(&["check"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert_eq!(out.matches("no executor is configured").count(), 1, "{out}");
    // At the line to change: `executor = []` under [worker].
    assert!(
        out.contains("config.toml:") && out.contains(": error [preflight]"),
        "{out}"
    );
    let line: usize = out
        .split("config.toml:")
        .nth(1)
        .and_then(|r| r.split(':').next())
        .and_then(|n| n.parse().ok())
        .expect(&out);
    let text = std::fs::read_to_string(s.braids_dir().join("config.toml")).unwrap();
    assert_eq!(text.lines().nth(line - 1), Some("executor = []"), "{out}");
    s.config("[worker]\nexecutor = [\"sh\", \"-c\", \"exit 0\"]\n");
    assert!(s.ok(&["check"]).contains("no findings"));
}

#[test]
fn new_with_br_initialises_the_tracker() {
    let s = Sandbox::new();
    br_path();
    s.ok(&["new", "beady", "--tracker", "br"]);
    assert!(s.project("beady").join(".beads").is_dir());
    let id = s.br_create("beady", "First");
    assert!(id.starts_with("beady-"), "{id}");
}

#[test]
fn new_rejects_bad_slugs_existing_projects_and_the_workspace() {
    let s = Sandbox::new();
    for bad in ["My-App", "-x", "a_b", "a:b", "a/b", "", "$(touch x)"] {
        let o = s.run(&["new", "--", bad]);
        assert_eq!(o.status.code(), Some(2), "{bad:?} accepted");
        assert!(
            stderr(&o).contains("[a-z0-9][a-z0-9-]*"),
            "{bad:?}: {}",
            stderr(&o)
        );
    }
    s.ok(&["new", "app", "--tracker", "workplan"]);
    let o = s.run(&["new", "app", "--tracker", "workplan"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("already exists"), "{}", stderr(&o));
    let ws = s.home().join(".openclaw/workspace/app2");
    let o = s.run(&["new", "app2", "--path", ws.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("workspace"), "{}", stderr(&o));
    assert!(!ws.exists(), "4.1: nothing created in the workspace");
    let o = s.run(&["new", "app3", "--max-workers", "0"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn c1_3_iteration_lifecycle_and_one_active_at_a_time() {
    let s = Sandbox::new();
    s.ok(&["new", "app", "--tracker", "workplan"]);
    let out = s.ok(&["iteration", "new", "app"]);
    assert!(
        out.contains("iteration 001") && out.contains("001/ITERATION.md"),
        "{out}"
    );
    s.ok(&["iteration", "new", "app"]);
    s.ok(&["iteration", "activate", "app", "1"]);
    let o = s.run(&["iteration", "activate", "app", "2"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("(1.3)"), "{}", stderr(&o));
    s.ok(&["iteration", "complete", "app"]);
    let root = s.project("app");
    assert!(
        std::fs::read_to_string(root.join(".braids/iterations/001/ITERATION.md"))
            .unwrap()
            .contains("- **Status:** complete")
    );
    assert!(s
        .git(&root, &["log", "--oneline", "-1"])
        .contains("Complete iteration 001"));
    // 4.5: a completed iteration cannot be reactivated
    let o = s.run(&["iteration", "activate", "app", "1"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("4.5"), "{}", stderr(&o));
    s.ok(&["iteration", "activate", "app"]);
    assert!(
        std::fs::read_to_string(root.join(".braids/iterations/002/ITERATION.md"))
            .unwrap()
            .contains("- **Status:** active")
    );
    let o = s.run(&["iteration", "activate", "nope"]);
    assert!(stderr(&o).contains("braids new nope"), "{}", stderr(&o));
}

#[test]
fn help_is_complete() {
    let s = Sandbox::new();
    let help = s.ok(&["--help"]);
    insta::assert_snapshot!("help", help);
    for cmd in [
        "init",
        "new",
        "iteration",
        "check",
        "tick",
        "status",
        "sessions",
        "kill",
        "beads",
        "answer",
        "retry",
        "approve",
        "reject",
        "logs",
        "history",
        "cost",
        "serve",
        "story",
        "review",
        "report-error",
        "worker",
        "events",
        "supervise",
        "tools",
        "pause",
        "resume",
        "demo",
    ] {
        let h = s.ok(&[cmd, "--help"]);
        assert!(h.contains("Usage: braids"), "{cmd}");
    }
}
