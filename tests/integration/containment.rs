//! An agent cannot turn braids against its person: the findings of a security review, each
//! replayed with real ticks, real `braids worker` processes, the native tracker and real git.
//! The first bead's agent is hostile; the beads after it are ordinary.

use std::time::Duration;

use crate::support::{wait_for, Install, Sandbox};

/// Writes its deliverable (`$1`) and a passing report, after `hostile` when it works on the
/// first bead.
fn agent(hostile: &str) -> String {
    format!(
        r#"if [ "$BRAIDS_BEAD" = app-w1 ]; then
{hostile}
fi
mkdir -p "$(dirname "$1")"
printf '# %s\n\n## Summary\n\nDid %s.\n' "$BRAIDS_BEAD" "$BRAIDS_BEAD" > "$1"
echo "$BRAIDS_BEAD" > "work-$BRAIDS_BEAD.txt"
printf 'status: pass\nsummary: did it\n' >> "$BRAIDS_RESULT_FILE"
"#
    )
}

fn install(hostile: &str) -> Sandbox {
    let sb = Install::new()
        .config("[sessions]\nkill_grace_secs = 5\n")
        .build();
    let agent = sb.script("bin/agent", &agent(hostile));
    sb.config(&format!(
        "[worker]\nexecutor = [{:?}, \"{{deliverable}}\"]\n",
        agent.display().to_string()
    ));
    sb.new_project("app").beads(2).create();
    sb
}

/// Runs ticks until neither bead is open or in progress; returns their statuses and reasons.
fn settle(sb: &Sandbox) -> Vec<(String, String)> {
    wait_for("both beads settled", Duration::from_secs(180), || {
        let _ = sb.tick().force().output();
        let wp = sb.workplan("app");
        let done = wp.values().all(|(st, _)| st == "closed" || st == "blocked");
        let live = sb.live_labels().is_empty();
        (done && live).then_some(())
    });
    let text = std::fs::read_to_string(sb.project("app").join(".braids/WORKPLAN.md")).unwrap();
    sb.workplan("app")
        .into_iter()
        .map(|(id, (st, _))| {
            let line = text
                .lines()
                .find(|l| l.contains(&format!("id:{id}")))
                .unwrap();
            (st, line.to_string())
        })
        .collect()
}

#[test]
fn an_executor_line_an_agent_adds_to_project_md_never_lands_and_never_runs() {
    let sb = install(
        r#"printf -- '- **Executor:** %s/tools/evil.sh\n' "$PWD" >> .braids/PROJECT.md
mkdir -p tools; printf '#!/bin/sh\ntouch "$HOME/pwned"\n' > tools/evil.sh; chmod +x tools/evil.sh"#,
    );
    let beads = settle(&sb);
    assert_eq!(beads[0].0, "blocked", "{beads:?}");
    assert!(beads[0].1.contains("control files"), "{beads:?}");
    assert!(beads[0].1.contains(".braids/PROJECT.md"), "{beads:?}");
    assert_eq!(
        beads[1].0, "closed",
        "the next bead is done as usual: {beads:?}"
    );
    let project_md = sb.read("Projects/app/.braids/PROJECT.md");
    assert!(!project_md.contains("evil"), "{project_md}");
    assert!(
        !sb.home().join("pwned").exists(),
        "the agent's executor ran"
    );
    let kept = sb.git(&sb.project("app"), &["branch", "--list", "braids/kept/*"]);
    assert!(
        kept.contains("app-w1"),
        "the work is kept for a person: {kept}"
    );
    assert!(beads[0].1.contains("braids approve app-w1"), "{beads:?}");

    // The person sees the change, with the control file named, and rejects it.
    let diff = sb.ok(&["diff", "app-w1"]);
    assert!(diff.contains("control files: .braids/PROJECT.md"), "{diff}");
    assert!(diff.contains("+- **Executor:**"), "{diff}");
    assert!(diff.contains("tools/evil.sh"), "{diff}");
    let out = sb.ok(&["reject", "app-w1", "--reason", "not this executor"]);
    assert!(out.contains("stays blocked"), "{out}");
    let kept = sb.git(&sb.project("app"), &["branch", "--list", "braids/kept/*"]);
    assert!(kept.trim().is_empty(), "the rejected work is gone: {kept}");
    assert!(!sb.read("Projects/app/.braids/PROJECT.md").contains("evil"));
    let wp = sb.workplan("app");
    assert_eq!(wp["app-w1"].0, "blocked", "{wp:?}");
    let _ = sb.tick().force().output();
    assert!(!sb.home().join("pwned").exists());
    let err = sb.run(&["approve", "app-w1"]);
    assert!(!err.status.success(), "nothing is left to approve");
    assert!(
        String::from_utf8_lossy(&err.stderr).contains("holds no work"),
        "{err:?}"
    );
}

#[test]
fn held_work_a_person_approves_lands_closed_and_pushed() {
    let sb = install(r#"printf '\nAlways run the linter.\n' >> AGENTS.md"#);
    let bare = sb.bare_upstream("app");
    let beads = settle(&sb);
    assert_eq!(beads[0].0, "blocked", "{beads:?}");
    assert!(beads[0].1.contains("AGENTS.md"), "{beads:?}");
    let root = sb.project("app");
    let page = std::fs::read_to_string(sb.braids_dir().join("STATUS.md")).unwrap();
    assert!(page.contains("Work held for you to approve"), "{page}");

    // The dashboard shows the held change with its buttons.
    let s = sb.serve();
    let cookie = s.browser_cookie();
    let page = s.with_cookie("GET", "/beads/app-w1", &cookie, &[], None);
    assert_eq!(page.status, 200, "{page:?}");
    assert!(page.body.contains("Held work: commit"), "{}", page.body);
    assert!(
        page.body.contains("+Always run the linter."),
        "{}",
        page.body
    );
    assert!(
        page.body.contains("/api/v1/beads/app:app-w1/approve"),
        "{}",
        page.body
    );
    assert!(s.get("/").body.contains("Work held for you"));
    drop(s);
    // A kept branch moved after braids kept it (an agent may write branches) is refused.
    let kept = sb.git(
        &root,
        &[
            "branch",
            "--list",
            "--format=%(refname:short)",
            "braids/kept/*",
        ],
    );
    let kept = kept.trim().to_string();
    let tip = sb.git(&root, &["rev-parse", &kept]).trim().to_string();
    sb.git(&root, &["branch", "-f", &kept, "HEAD"]);
    let moved = sb.run(&["approve", "app-w1"]);
    assert!(!moved.status.success());
    assert!(
        String::from_utf8_lossy(&moved.stderr).contains("moved since"),
        "{moved:?}"
    );
    sb.git(&root, &["branch", "-f", &kept, &tip]);
    let before = sb.git(&root, &["status", "--porcelain"]);
    let diff = sb.ok(&["diff", "app-w1"]);
    assert!(diff.contains("+Always run the linter."), "{diff}");
    let out = sb.ok(&["approve", "app-w1"]);
    assert!(out.contains("landed as") && out.contains("pushed"), "{out}");
    assert_eq!(sb.workplan("app")["app-w1"].0, "closed");
    assert!(sb
        .read("Projects/app/AGENTS.md")
        .contains("Always run the linter."));
    let log = sb.git(&root, &["log", "--format=%s%n%b", "-1"]);
    assert!(log.starts_with("app item 1 (app-w1)"), "{log}");
    assert!(log.contains("approved"), "{log}");
    let upstream = sb.git(&bare, &["log", "--format=%s", "-1"]);
    assert!(upstream.contains("(app-w1)"), "{upstream}");
    let kept = sb.git(&root, &["branch", "--list", "braids/kept/*"]);
    assert!(kept.trim().is_empty(), "{kept}");
    // The work landed once, and the project's tree is as the person left it.
    let after = sb.git(&root, &["status", "--porcelain"]);
    assert_eq!(after, before);
    let wp_text = sb.git(&bare, &["show", "HEAD:.braids/WORKPLAN.md"]);
    assert!(
        wp_text
            .lines()
            .any(|l| l.contains("id:app-w1") && l.contains("[x]")),
        "the upstream has the bead closed: {wp_text}"
    );
}

#[test]
fn a_report_listing_an_iteration_file_as_dot_slash_does_not_land_it() {
    let sb = install(
        r#"f=.braids/iterations/001/ITERATION.md
mkdir -p "$(dirname "$f")"
echo "- app-w3: smuggled" >> "$f"
printf 'files_changed:\n  - ./%s\n' "$f" > "$BRAIDS_RESULT_FILE""#,
    );
    let beads = settle(&sb);
    let after = sb.git(&sb.project("app"), &["log", "-p"]);
    assert!(!after.contains("smuggled"), "{after}");
    assert!(beads.iter().all(|(st, _)| st == "closed"), "{beads:?}");
}

#[test]
fn a_planted_link_to_a_secret_never_reaches_a_commit() {
    let sb = install(
        r#"mkdir -p .beads; ln -s "$HOME/secret.txt" .beads/leak.txt; ln -s "$HOME/secret.txt" leak.txt"#,
    );
    sb.write("secret.txt", "THE-PERSONS-SECRET\n");
    let beads = settle(&sb);
    assert_eq!(beads[0].0, "blocked", "{beads:?}");
    assert!(beads[0].1.contains(".beads/leak.txt"), "{beads:?}");
    let history = sb.git(&sb.project("app"), &["log", "-p", "--all"]);
    assert!(
        !history.contains("THE-PERSONS-SECRET"),
        "the secret was committed"
    );
}

#[test]
fn a_repointed_git_file_runs_nothing_and_the_bead_is_not_completed() {
    let sb = install(
        r#"git init -q "$HOME/fake"
printf '#!/bin/sh\ntouch "$HOME/pwned"\n' > "$HOME/evil.sh"; chmod +x "$HOME/evil.sh"
git -C "$HOME/fake" config core.fsmonitor "$HOME/evil.sh"
git -C "$HOME/fake" config core.hooksPath "$HOME"
printf 'gitdir: %s/fake/.git\n' "$HOME" > .git"#,
    );
    let beads = settle(&sb);
    assert_eq!(beads[0].0, "blocked", "{beads:?}");
    assert!(
        beads[0].1.contains("not at the project's repository"),
        "{beads:?}"
    );
    assert!(
        !sb.home().join("pwned").exists(),
        "the agent's script ran inside braids"
    );
    assert_eq!(beads[1].0, "closed", "{beads:?}");
}
