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
