//! The optional agent sandbox (`[worker] sandbox`), with Landlock and with bubblewrap: real
//! ticks, real `braids worker` processes, real git; the agent is an `sh` script that tries to
//! write where it may and where it may not, and records what happened in its workspace.

use std::time::Duration;

use crate::support::{wait_for, Install, Sandbox};

/// Tries each write and records `ok` or `denied` per place, then does its bead's work.
const AGENT: &str = r#"try() { if ( : > "$2" ) 2>/dev/null; then echo "$1 ok"; else echo "$1 denied"; fi; }
{
  try workspace "$PWD/inside.txt"
  try cache "$HOME/.cache/agent-cache.txt"
  try tmp "${TMPDIR:-/nowhere}/agent-tmp.txt"
  try braids "$HOME/.openclaw/braids/owned.txt"
  try other-project "$HOME/Projects/other/owned.txt"
  try ssh "$HOME/.ssh/owned.txt"
  try home "$HOME/owned.txt"
} > sandbox-results.txt
mkdir -p "$(dirname "$1")"
printf '# %s\n\n## Summary\n\nDid %s.\n' "$BRAIDS_BEAD" "$BRAIDS_BEAD" > "$1"
printf 'status: pass\nsummary: did it\n' > "$BRAIDS_RESULT_FILE"
"#;

fn run(kind: &str, bwrap: &str) -> String {
    let sb: Sandbox = Install::new()
        .config("[sessions]\nkill_grace_secs = 5\n")
        .build();
    let agent = sb.script("bin/agent", AGENT);
    sb.config(&format!(
        "[worker]\nexecutor = [{:?}, \"{{deliverable}}\"]\nsandbox = \"{kind}\"\nbwrap = {bwrap:?}\n",
        agent.display().to_string()
    ));
    std::fs::create_dir_all(sb.home().join(".ssh")).unwrap();
    let app = sb.new_project("app").beads(1).create();
    sb.new_project("other").create();
    let bead = &app.beads[0];
    sb.tick().force().run();
    // Closed, then landed: the worker is done when its session is.
    wait_for("the bead done", Duration::from_secs(120), || {
        (sb.workplan("app")[bead].0 == "closed" && sb.live_labels().is_empty()).then_some(())
    });
    for leaked in [
        ".openclaw/braids/owned.txt",
        "Projects/other/owned.txt",
        ".ssh/owned.txt",
        "owned.txt",
    ] {
        assert!(
            !sb.home().join(leaked).exists(),
            "{kind}: the agent wrote ~/{leaked}"
        );
    }
    sb.read("Projects/app/sandbox-results.txt")
}

fn assert_contained(kind: &str, bwrap: &str) {
    let results = run(kind, bwrap);
    for line in [
        "workspace ok",
        "cache ok",
        "tmp ok",
        "braids denied",
        "other-project denied",
        "ssh denied",
        "home denied",
    ] {
        assert!(results.contains(line), "{kind}: {results}");
    }
}

#[test]
fn c11_6_a_landlocked_agent_writes_its_workspace_and_nothing_of_braids_or_the_home() {
    assert_contained("landlock", "bwrap");
}

#[test]
fn c11_6_a_bubblewrapped_agent_writes_its_workspace_and_nothing_of_braids_or_the_home() {
    let Some(bwrap) = crate::support::bwrap() else {
        eprintln!("skipping: bwrap is not installed");
        return;
    };
    assert_contained("bwrap", &bwrap);
}
