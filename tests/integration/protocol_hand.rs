//! The protocol pipeline without braids' executor: Level 1 by hand (`story show` gives the
//! prompt, a person's own agent writes the HANDOFF, `story apply` applies it), the seed's
//! single `.ai/STATE.json`, and stories waiting for their dependencies. Real `br`, real git.

use std::path::{Path, PathBuf};

use crate::support::{Install, Sandbox};

fn handoff(dir: &Path, story: &str, step: &str, status: &str) {
    std::fs::create_dir_all(dir.join(".ai")).unwrap();
    std::fs::write(
        dir.join(".ai/HANDOFF.md"),
        format!(
            "---\nstory: {story}\nstep: {step}\nstatus: {status}\nreason: null\nfiles_changed:\n  - docs/{step}.md\ntests_pass: 3\ntests_fail: 0\n---\n\n# HANDOFF {story} {step}\n\nDone by hand.\n"
        ),
    )
    .unwrap();
}

fn show(sb: &Sandbox, id: &str) -> serde_json::Value {
    serde_json::from_str(&sb.ok(&["story", "show", "app", id, "--json"])).unwrap()
}

/// A protocol project on real `br`, no executor configured.
fn project(sb: &Sandbox, titles: &[&str], extra: &[(&str, &str)]) -> (PathBuf, Vec<String>) {
    let mut p = sb
        .new_project("app")
        .br()
        .titled(titles)
        .field("Pipeline", "protocol");
    for (k, v) in extra {
        p = p.field(k, v);
    }
    let app = p.create();
    (app.root.clone(), app.beads)
}

#[test]
fn c10_11_a_story_walks_by_hand_with_no_executor() {
    let sb = Install::new().build();
    let (root, ids) = project(&sb, &["Checkout flow"], &[("Workspace", "shared")]);
    let id = &ids[0];
    let cfg = std::fs::read_to_string(sb.home().join(".openclaw/braids/config.toml")).unwrap();
    assert!(
        !cfg.lines().any(|l| l.starts_with("executor")
            && l.trim() != "executor = []"
            && l.trim() != "executor = \"\""),
        "no executor configured: {cfg}"
    );
    sb.ok(&["story", "start", "app", id]);
    let s = show(&sb, id);
    assert_eq!(
        (s["next"].as_str(), s["next_step"].as_str()),
        (Some("dispatched"), Some("bdd"))
    );
    let prompt = s["prompt"].as_str().expect("the next step's prompt");
    assert!(
        prompt.contains("bdd") && prompt.contains(id.as_str()),
        "{prompt}"
    );
    assert!(s["caller_instruction"]
        .as_str()
        .unwrap()
        .contains(&format!("braids story apply app {id}")));
    let text = sb.ok(&["story", "show", "app", id]);
    assert!(text.contains("--- prompt ---"), "{text}");

    // bdd, from the workspace's own HANDOFF.
    handoff(&root, id, "bdd", "pass");
    let out = sb.ok(&["story", "apply", "app", id]);
    assert!(
        out.contains("bdd applied from") && out.contains("next: dispatched sdd-delta"),
        "{out}"
    );
    let st = state(&root, id);
    assert_eq!(
        (st["step"].as_str(), st["status"].as_str()),
        (Some("bdd"), Some("pass"))
    );
    assert_eq!(st["tests"]["pass"], 3);
    assert!(std::fs::read_to_string(root.join(".ai/history.md"))
        .unwrap()
        .contains("Done by hand."));

    // A bad report is refused, naming the file and the fix; the state is untouched.
    let before = std::fs::read(root.join(format!(".ai/states/{id}.json"))).unwrap();
    handoff(&root, id, "sdd-delta", "passing");
    let e = sb.run(&["story", "apply", "app", id]);
    let err = String::from_utf8_lossy(&e.stderr);
    assert_ne!(e.status.code(), Some(0));
    assert!(
        err.contains(".ai/HANDOFF.md")
            && err.contains("invalid status `passing`")
            && err.contains("correct it"),
        "{err}"
    );
    handoff(&root, id, "bdd", "pass");
    let err = String::from_utf8_lossy(&sb.run(&["story", "apply", "app", id]).stderr).into_owned();
    assert!(
        err.contains("reports step `bdd` but") && err.contains("is at sdd-delta"),
        "{err}"
    );
    let file = sb.home().join("mine.md");
    std::fs::write(&file, "just prose, no front matter\n").unwrap();
    let err = String::from_utf8_lossy(
        &sb.run(&[
            "story",
            "apply",
            "app",
            id,
            "--handoff",
            file.to_str().unwrap(),
        ])
        .stderr,
    )
    .into_owned();
    assert!(
        err.contains("mine.md: no report in it") && err.contains("status: pass"),
        "{err}"
    );
    assert_eq!(
        std::fs::read(root.join(format!(".ai/states/{id}.json"))).unwrap(),
        before
    );

    // sdd-delta from a file of the person's own choosing; contract from an executor-result.
    std::fs::write(&file, "---\nstep: sdd-delta\nstatus: pass\n---\nok\n").unwrap();
    sb.ok(&[
        "story",
        "apply",
        "app",
        id,
        "--handoff",
        file.to_str().unwrap(),
    ]);
    assert_eq!(state(&root, id)["step"], "sdd-delta");
    // (a stale HANDOFF beside it would lend its `step:`, and be refused: bdd is not contract)
    std::fs::remove_file(root.join(".ai/HANDOFF.md")).unwrap();
    std::fs::write(
        root.join(".ai/executor-result"),
        "status: failing\nreason: null\nsummary: the contract does not compile\n",
    )
    .unwrap();
    let out = sb.ok(&["story", "apply", "app", id]);
    assert!(
        out.contains("executor-result") && out.contains("failing"),
        "{out}"
    );
    assert!(!root.join(".ai/executor-result").exists(), "consumed");
    let st = state(&root, id);
    assert_eq!(
        (st["step"].as_str(), st["status"].as_str()),
        (Some("contract"), Some("failing"))
    );
    assert_eq!(st["last_error"], "the contract does not compile");
    let s = show(&sb, id);
    assert_eq!(
        (s["next_step"].as_str(), s["state"]["attempt"].as_u64()),
        (Some("contract"), Some(1))
    );
    handoff(&root, id, "contract", "pass");
    let out = sb.ok(&["story", "apply", "app", id]);
    assert!(out.contains("next: needs_human review"), "{out}");
    // A review is a person's, not a report's.
    handoff(&root, id, "review", "pass");
    let err = String::from_utf8_lossy(&sb.run(&["story", "apply", "app", id]).stderr).into_owned();
    assert!(
        err.contains("no step to apply a report to (next: needs_human)"),
        "{err}"
    );
    assert_eq!(
        state(&root, id)["attempt"],
        2,
        "contract passed at its second attempt"
    );
}

fn state(root: &Path, id: &str) -> serde_json::Value {
    serde_json::from_str(
        &std::fs::read_to_string(root.join(format!(".ai/states/{id}.json"))).unwrap(),
    )
    .unwrap()
}

/// An agent that passes every step it is given, logging `<story> <step>`.
const PASSING: &str = r##"
P="$1"
story=$(sed -n 's/^  story: //p' "$P" | head -1)
step=$(sed -n 's/^  step: //p' "$P" | head -1)
echo "$story $step" >> "$HOME/agent.log"
mkdir -p .ai
printf -- '---\nstory: %s\nstep: %s\nstatus: pass\nreason: null\n---\n\nok\n' "$story" "$step" > .ai/HANDOFF.md
"##;

fn ran(sb: &Sandbox) -> String {
    std::fs::read_to_string(sb.home().join("agent.log")).unwrap_or_default()
}

#[test]
fn c10_10_a_story_waits_for_its_dependency_without_a_slot_and_resumes_by_itself() {
    let sb = Install::new().build();
    let agent = sb.script("bin/agent", PASSING);
    sb.config(&format!(
        "[worker]\nexecutor = [{:?}, \"{{prompt_file}}\"]\n[sessions]\nclaim_grace_secs = 5\n",
        agent.display().to_string()
    ));
    let (root, ids) = project(&sb, &["Schema", "Checkout"], &[("MaxWorkers", "2")]);
    let (a, b) = (&ids[0], &ids[1]);
    sb.br("app", &["dep", "add", b, a]);
    let settle = || {
        crate::support::wait_for(
            "the workers to end",
            std::time::Duration::from_secs(120),
            || sb.live_labels().is_empty().then_some(()),
        )
    };

    // A runs to its review; B is held with blocked_by [A], spawned never, counted never.
    let first = sb.tick().force().run();
    let spawned: Vec<String> = first.spawns.iter().map(|s| s.bead.to_string()).collect();
    assert_eq!(spawned, std::slice::from_ref(a), "{first:#?}");
    assert_eq!(state(&root, b)["blocked_by"], serde_json::json!([a]));
    assert_eq!(state(&root, b)["step"], "bdd");
    settle();
    for _ in 0..3 {
        let r = sb.tick().force().run();
        assert!(r.spawns.iter().all(|s| s.bead.as_str() != b), "{r:#?}");
        settle();
    }
    assert_eq!(state(&root, a)["step"], "review", "{}", ran(&sb));
    assert!(
        !ran(&sb).contains(&format!("{b} ")),
        "B never ran: {}",
        ran(&sb)
    );
    let s = show(&sb, b);
    assert_eq!(s["next"], "blocked");
    assert!(
        s["caller_instruction"]
            .as_str()
            .unwrap()
            .contains("resumes by itself"),
        "{s:#}"
    );
    let status = sb.ok(&["status"]);
    assert!(
        status.contains(&format!("its dependencies {a} to close")),
        "{status}"
    );

    // A closes (a person approved it and closed its bead): B resumes with nobody's help.
    sb.br("app", &["close", a]);
    let r = sb.tick().force().run();
    assert!(r.spawns.iter().any(|s| s.bead.as_str() == b), "{r:#?}");
    settle();
    let sb_state = state(&root, b);
    assert_eq!(sb_state["blocked_by"], serde_json::json!([]));
    assert_eq!(
        sb_state["step"],
        "review",
        "B walked to its review: {}",
        ran(&sb)
    );
    assert!(ran(&sb).contains(&format!("{b} bdd")));
}

#[test]
fn c10_10_a_dependency_cycle_is_a_check_error_naming_it() {
    let sb = Install::new().build();
    let (root, ids) = project(&sb, &["Schema", "Checkout"], &[]);
    let (a, b) = (&ids[0], &ids[1]);
    sb.br("app", &["dep", "add", b, a]);
    let out = sb.run(&["check"]);
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("cycle"),
        "{out:?}"
    );
    // br refuses to add the closing edge, so it arrives as a tracker import would bring it.
    sb.br("app", &["sync", "--flush-only"]);
    let jsonl = root.join(".beads/issues.jsonl");
    let rows: Vec<serde_json::Value> = std::fs::read_to_string(&jsonl)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .map(|mut r: serde_json::Value| {
            if r["id"] == a.as_str() {
                r["dependencies"] = serde_json::json!([{"issue_id": a, "depends_on_id": b,
                    "type": "blocks", "created_at": "2026-01-01T00:00:00Z", "created_by": "x"}]);
            }
            r
        })
        .collect();
    let text: String = rows.iter().map(|r| format!("{r}\n")).collect();
    std::fs::write(&jsonl, text).unwrap();
    sb.br("app", &["sync", "--import-only", "--force"]);
    let out = sb.run(&["check"]);
    let said =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{said}");
    let (x, y) = if a < b { (a, b) } else { (b, a) };
    assert!(
        said.contains(&format!(
            "the beads {x} → {y} → {x} depend on each other in a cycle"
        )) && said.contains("br dep remove"),
        "{said}"
    );
}

/// Seed 000's sixteen keys, in its order.
const SEED_KEYS: [&str; 16] = [
    "project",
    "story",
    "step",
    "attempt",
    "max_attempts",
    "status",
    "reason",
    "dispatched_at",
    "completed_at",
    "timeout_min",
    "tests",
    "failing_tests",
    "lint_pass",
    "files_changed",
    "blocked_by",
    "human_note",
];

fn keys(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("  \"")?.split('"').next().map(String::from))
        .collect()
}

#[test]
fn c10_12_the_seeds_single_state_json_is_read_written_and_converted() {
    let sb = Install::new().build();
    let (root, ids) = project(
        &sb,
        &["Checkout flow", "Coupons"],
        &[("Workspace", "shared"), ("ProtocolState", "single")],
    );
    let (a, b) = (&ids[0], &ids[1]);
    // A seed-shaped STATE.json written by hand (as the seed's hook would leave it).
    let seed = format!(
        r#"{{
  "project": "app",
  "story": "{a}",
  "step": "bdd",
  "attempt": 1,
  "max_attempts": 3,
  "status": "pass",
  "reason": null,
  "dispatched_at": "2026-02-13T14:30:00Z",
  "completed_at": "2026-02-13T14:31:15Z",
  "timeout_min": 10,
  "tests": null,
  "failing_tests": [],
  "lint_pass": null,
  "files_changed": ["docs/bdd/US-1.md"],
  "blocked_by": [],
  "human_note": "Use UTC"
}}"#
    );
    std::fs::create_dir_all(root.join(".ai")).unwrap();
    std::fs::write(root.join(".ai/STATE.json"), &seed).unwrap();
    let s = show(&sb, a);
    assert_eq!(
        (s["next"].as_str(), s["next_step"].as_str()),
        (Some("dispatched"), Some("sdd-delta")),
        "{s:#}"
    );
    assert!(
        s["prompt"].as_str().unwrap().contains("Use UTC"),
        "the seed's human_note reaches the prompt"
    );

    // Level 1 by hand in the single layout: what braids writes is the seed's file.
    std::fs::write(
        root.join(".ai/executor-result"),
        "status: failing\nreason: null\nsummary: the delta contradicts the SDD\n",
    )
    .unwrap();
    sb.ok(&["story", "apply", "app", a]);
    let text = std::fs::read_to_string(root.join(".ai/STATE.json")).unwrap();
    assert_eq!(keys(&text), SEED_KEYS, "{text}");
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        (
            v["story"].as_str(),
            v["step"].as_str(),
            v["status"].as_str()
        ),
        (Some(a.as_str()), Some("sdd-delta"), Some("failing"))
    );
    assert!(v["dispatched_at"].is_string() && v["attempt"].is_u64() && v["reason"].is_null());
    assert!(!root.join(format!(".ai/states/{a}.json")).exists());
    let extra: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root.join(".ai/STATE.braids.json")).unwrap())
            .unwrap();
    assert_eq!(extra["last_error"], "the delta contradicts the SDD");
    // The seed's own tools read it.
    let jq = std::process::Command::new("jq")
        .args(["-r", ".step", ".ai/STATE.json"])
        .current_dir(&root)
        .output()
        .expect("jq is missing: apt-get install jq (.ci/run does)");
    assert_eq!(String::from_utf8_lossy(&jq.stdout).trim(), "sdd-delta");

    // A second story cannot share the one file: refused with the reason.
    let e = sb.run(&["story", "start", "app", b]);
    let err = String::from_utf8_lossy(&e.stderr);
    assert_ne!(e.status.code(), Some(0));
    assert!(
        err.contains(&format!(".ai/STATE.json holds story {a}")) && err.contains("story convert"),
        "{err}"
    );

    // Converted to per-story, losing nothing; then both stories can run; back is refused.
    let out = sb.ok(&["story", "convert", "app", "--to", "per-story"]);
    assert!(out.contains("single → per-story"), "{out}");
    assert!(!root.join(".ai/STATE.json").exists() && !root.join(".ai/STATE.braids.json").exists());
    let own = state(&root, a);
    assert_eq!(
        (own["step"].as_str(), own["status"].as_str()),
        (Some("sdd-delta"), Some("failing"))
    );
    assert_eq!(own["last_error"], "the delta contradicts the SDD");
    assert_eq!(own["human_note"], v["human_note"]);
    assert_eq!(own["files_changed"], v["files_changed"]);
    let pm = std::fs::read_to_string(root.join(".braids/PROJECT.md")).unwrap();
    assert!(pm.contains("ProtocolState:** per-story"), "{pm}");
    sb.ok(&["story", "start", "app", b]);
    let e = sb.run(&["story", "convert", "app", "--to", "single"]);
    let err = String::from_utf8_lossy(&e.stderr);
    assert!(
        err.contains("are under way and .ai/STATE.json holds one"),
        "{err}"
    );
    // With one story under way it goes back, extras and all.
    let done = root.join(format!(".ai/states/{b}.json"));
    let mut bs = state(&root, b);
    bs["step"] = "done".into();
    std::fs::write(&done, bs.to_string()).unwrap();
    sb.ok(&["story", "convert", "app", "--to", "single"]);
    let back: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root.join(".ai/STATE.json")).unwrap())
            .unwrap();
    assert_eq!(
        (back["story"].as_str(), back["step"].as_str()),
        (Some(a.as_str()), Some("sdd-delta"))
    );
    assert!(
        done.exists(),
        "the done story stays where converting back finds it"
    );
    assert_eq!(
        show(&sb, a)["state"]["last_error"],
        "the delta contradicts the SDD"
    );
    let out = sb.run(&["check"]);
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("10.12"),
        "{out:?}"
    );
}
