//! `braids check` on real installations: a clean one reports nothing; one seeded with a
//! violation of each statically checkable contract reports each at its file, line and section.

use crate::support::{Install, Sandbox};

/// A clean installation: two projects, a completed and committed iteration with a proper
/// deliverable, an active one.
fn clean() -> Sandbox {
    let s = Install::new()
        .sandboxed()
        .config("[worker]\nexecutor = [\"sh\", \"-c\", \"exit 0\"]\n")
        .build();
    s.new_project("app").max_workers(2).no_iteration().create();
    s.new_project("lib").priority("low").no_iteration().create();
    let it1 = s.iteration("app", 1, "active", &[("wp-a1b", "First story")]);
    std::fs::write(
        it1.join("a1b-first-story.md"),
        "# First story\n\n## Summary\n\nDone.\n",
    )
    .unwrap();
    s.git(&s.project("app"), &["add", "-A"]);
    s.git(&s.project("app"), &["commit", "-qm", "Iteration 1 work"]);
    s.ok(&["iteration", "complete", "app", "1"]);
    s.iteration("app", 2, "active", &[("wp-c3d", "Second story")]);
    // every story of an iteration not complete is a bead the tracker knows (1.3)
    let wp = s.project("app").join(".braids/WORKPLAN.md");
    let plan = std::fs::read_to_string(&wp).unwrap();
    std::fs::write(&wp, plan + "- [ ] Second story <!-- id:wp-c3d -->\n").unwrap();
    s
}

fn check(s: &Sandbox) -> (i32, serde_json::Value) {
    let o = s.run(&["check", "--json"]);
    let v = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stdout)));
    (o.status.code().unwrap(), v)
}

fn has(
    v: &serde_json::Value,
    section: &str,
    file_end: &str,
    line: Option<u64>,
    words: &str,
) -> bool {
    v["findings"].as_array().unwrap().iter().any(|f| {
        f["section"] == section
            && f["path"].as_str().unwrap().ends_with(file_end)
            && (line.is_none() || f["line"].as_u64() == line)
            && f["message"].as_str().unwrap().contains(words)
            && !f["fix"].as_str().unwrap().is_empty()
    })
}

#[test]
fn c1_clean_installation_has_no_findings() {
    let s = clean();
    let (code, v) = check(&s);
    assert_eq!(v["findings"], serde_json::json!([]), "{v:#}");
    assert_eq!(code, 0);
    assert!(s.ok(&["check"]).contains("ok: no findings"));
}

#[test]
fn no_installation_is_unusable_input() {
    let s = Sandbox::new();
    let o = s.run(&["check"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("braids init"));
}

#[test]
fn c1_c4_seeded_violations_are_each_reported_with_file_line_and_section() {
    let s = clean();
    let reg = s.braids_dir().join("registry.md");
    let mut text = std::fs::read_to_string(&reg).unwrap();
    // 1.1 duplicate slug (line 12), 1.1 invalid status (line 13), 1.1 missing directory (line 14),
    // 4.1 a project inside the agent workspace (line 15)
    std::fs::create_dir_all(s.home().join(".openclaw/workspace/ws/.braids")).unwrap();
    std::fs::write(
        s.home().join(".openclaw/workspace/ws/.braids/PROJECT.md"),
        "# ws\nStatus: active\nPriority: low\nAutonomy: full\n",
    )
    .unwrap();
    text.push_str("| app | paused | low | ~/Projects/app |\n");
    text.push_str("| done | complete | low | ~/Projects/lib |\n");
    text.push_str("| ghost | active | low | ~/Projects/ghost |\n");
    text.push_str("| ws | active | low | ~/.openclaw/workspace/ws |\n");
    std::fs::write(&reg, &text).unwrap();
    let reg_lines: Vec<&str> = text.lines().collect();
    let line_of = |needle: &str| {
        reg_lines
            .iter()
            .position(|l| l.contains(needle))
            .map(|i| i as u64 + 1)
    };

    // 1.2 invalid MaxWorkers, missing required Autonomy, invalid Priority
    let pm = s.project("lib").join(".braids/PROJECT.md");
    let p = std::fs::read_to_string(&pm).unwrap();
    let p = p
        .replace("- **MaxWorkers:** 1", "- **MaxWorkers:** 0")
        .replace("- **Autonomy:** full\n", "")
        .replace("- **Priority:** low", "- **Priority:** urgent");
    std::fs::write(&pm, &p).unwrap();
    let pline = |needle: &str| {
        p.lines()
            .position(|l| l.contains(needle))
            .map(|i| i as u64 + 1)
    };

    // 1.3 two active iterations
    s.iteration("lib", 1, "active", &[("wp-e5f", "One")]);
    s.iteration("lib", 2, "active", &[("wp-g7h", "Two")]);
    // 1.4 a deliverable with no Summary, and a deliverable not named <suffix>-<kebab>.md
    let it2 = s.project("app").join(".braids/iterations/002");
    std::fs::write(
        it2.join("c3d-second-story.md"),
        "# Second\n\nNo summary here.\n",
    )
    .unwrap();
    std::fs::write(it2.join("Second Story Notes.md"), "## Summary\n\nx\n").unwrap();
    // 4.5 a completed iteration edited after the commit that completed it
    std::fs::write(
        s.project("app")
            .join(".braids/iterations/001/a1b-first-story.md"),
        "# First story\n\n## Summary\n\nRewritten later.\n",
    )
    .unwrap();
    // 1.6 a corrupt state file
    std::fs::write(
        s.braids_dir().join(".orchestrator-state.json"),
        "{\"idleSince\": 12",
    )
    .unwrap();

    let (code, v) = check(&s);
    assert_eq!(code, 1, "{v:#}");
    let cases: Vec<(&str, &str, Option<u64>, &str)> = vec![
        ("1.1", "registry.md", line_of("| app | paused"), "app"),
        ("1.1", "registry.md", line_of("| done |"), "complete"),
        ("1.1", "registry.md", line_of("| ghost |"), "ghost"),
        ("4.1", "registry.md", line_of("| ws |"), "workspace"),
        (
            "1.2",
            "lib/.braids/PROJECT.md",
            pline("MaxWorkers"),
            "MaxWorkers",
        ),
        ("1.2", "lib/.braids/PROJECT.md", None, "Autonomy"),
        ("1.2", "lib/.braids/PROJECT.md", pline("Priority"), "urgent"),
        ("1.3", "ITERATION.md", None, "active iterations"),
        ("1.4", "c3d-second-story.md", None, "Summary"),
        ("1.4", "Second Story Notes.md", None, ""),
        ("4.5", "001/a1b-first-story.md", None, "complete"),
        ("1.6", ".orchestrator-state.json", None, "not valid"),
    ];
    let mut missing = vec![];
    for (section, file, line, words) in &cases {
        if !has(&v, section, file, *line, words) {
            missing.push(format!("{section} {file}:{line:?} {words:?}"));
        }
    }
    assert!(
        missing.is_empty(),
        "not reported: {missing:#?}\nfindings: {:#}",
        v["findings"]
    );

    // the human form names file:line, section and a fix on one line each
    let o = s.run(&["check"]);
    let text = String::from_utf8_lossy(&o.stdout);
    let dup = text
        .lines()
        .find(|l| {
            l.contains("[1.1]")
                && l.contains(&format!(
                    "registry.md:{}",
                    line_of("| app | paused").unwrap()
                ))
        })
        .expect(&text);
    assert!(dup.contains("(fix: "), "{dup}");
}

#[test]
fn c4_5_uncommitted_completion_is_a_warning_not_silence() {
    let s = clean();
    let it = s.iteration("app", 3, "complete", &[]);
    let (_, v) = check(&s);
    assert!(
        v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["section"] == "4.5"
                && f["path"]
                    .as_str()
                    .unwrap()
                    .starts_with(it.to_str().unwrap())),
        "{v:#}"
    );
}

#[test]
fn preflight_findings_name_the_file_and_line_and_strict_fails_on_warnings() {
    let s = clean();
    // A misspelled executor in PROJECT.md, and a quote left open in another's.
    s.set_field("app", "Executor", "claud -p");
    s.set_field("lib", "Executor", "\"claude -p");
    let (code, v) = check(&s);
    assert_eq!(code, 1, "{v:#}");
    let found: Vec<(String, Option<u64>, String)> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["section"] == "preflight")
        .map(|f| {
            (
                f["path"].as_str().unwrap().to_string(),
                f["line"].as_u64(),
                f["message"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(found.len(), 2, "{v:#}");
    assert!(
        found
            .iter()
            .all(|(p, l, _)| p.ends_with("PROJECT.md") && l.is_some()),
        "{found:?}"
    );
    assert!(
        found
            .iter()
            .any(|(_, _, m)| m.contains("`claud` is not a program on PATH")),
        "{found:?}"
    );
    assert!(
        found
            .iter()
            .any(|(_, _, m)| m.contains("nor a command line")),
        "{found:?}"
    );

    // --strict: a warning alone fails.
    let s = clean();
    s.config("[tick]\nmax_wrokers = 3\n");
    assert_eq!(s.run(&["check"]).status.code(), Some(0));
    assert_eq!(s.run(&["check", "--strict"]).status.code(), Some(1));
}

#[test]
fn c4_4_a_remote_without_an_upstream_is_named_with_the_command_that_fixes_it() {
    let s = clean();
    let app = s.project("app");
    let bare = s.home().join("remote.git");
    s.git(s.home(), &["init", "-q", "--bare", bare.to_str().unwrap()]);
    s.git(&app, &["remote", "add", "origin", bare.to_str().unwrap()]);
    let out = s.run(&["check"]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        text.contains("has no upstream, so workers commit and never push")
            && text.contains("push -u origin"),
        "{text}"
    );
    let branch = s.git(&app, &["rev-parse", "--abbrev-ref", "HEAD"]);
    s.git(&app, &["push", "-q", "-u", "origin", branch.trim()]);
    let text = s.ok(&["check"]);
    assert!(!text.contains("no upstream"), "{text}");
}

#[test]
fn c6_7_an_entry_reaching_outside_the_workspace_is_a_check_error_naming_its_line() {
    let s = Install::new()
        .sandboxed()
        .config("[worker]\nexecutor = [\"sh\", \"-c\", \"exit 0\"]\n\n[workspace]\nkeep = [\"target/\"]\ncopy = [\n  \".env\",\n  \"../secrets/.env\",\n]\n")
        .build();
    s.new_project("app")
        .no_iteration()
        .field("Sparse", "src/app/, /etc/")
        .field("Keep", "~/.cache")
        .create();
    let (code, v) = check(&s);
    assert_eq!(code, 1, "{v:#}");
    let config = std::fs::read_to_string(s.braids_dir().join("config.toml")).unwrap();
    let at = config
        .lines()
        .position(|l| l.contains("\"../secrets/.env\""))
        .map(|i| i as u64 + 1);
    assert!(
        has(
            &v,
            "workspace",
            "config.toml",
            at,
            "the copy entry `../secrets/.env` reaches outside the workspace"
        ),
        "{v:#}"
    );
    let md = std::fs::read_to_string(s.project("app").join(".braids/PROJECT.md")).unwrap();
    let line = |field: &str| {
        md.lines()
            .position(|l| l.contains(field))
            .map(|i| i as u64 + 1)
    };
    assert!(
        has(
            &v,
            "workspace",
            "PROJECT.md",
            line("Sparse"),
            "the Sparse entry `/etc/`"
        ),
        "{v:#}"
    );
    assert!(
        has(
            &v,
            "workspace",
            "PROJECT.md",
            line("Keep"),
            "the Keep entry `~/.cache`"
        ),
        "{v:#}"
    );
    let findings = v["findings"].as_array().unwrap();
    assert_eq!(
        findings
            .iter()
            .filter(|f| f["section"] == "workspace")
            .count(),
        3,
        "`.env`, `target/` and `src/app/` are fine: {v:#}"
    );
}
