//! The claw loop's events carry what seed 003 shows (CONTRACTS 8.9): real ticks and real
//! `braids worker` processes, a scripted coder that ends with a CLAW_STATUS block on stdout
//! (no result file), and a validation command that is a test runner printing `go test -json`
//! events. `task_complete` carries `files_changed` (what the commit took) and `tests_passed`
//! with the counts; `validation_pass` is written; a coder's `status: failed` stops the task
//! before its checks could check it off, and `status: needs_human` asks a person.

use std::path::{Path, PathBuf};

use crate::claw_loop::turn;
use crate::support::{Install, Sandbox};

const WORKPLAN: &str = "# WORKPLAN

## Phase 1: Features

- [ ] Add snapping <!-- id:wp-snap -->
- [ ] Add the taskbar <!-- id:wp-bar -->
";

/// The coder: writes its task's file and reports; `~/gives-up` and `~/asks` change its report.
const CODER: &str = r#"mkdir -p src
echo "code for $BRAIDS_BEAD" > "src/$BRAIDS_BEAD.ts"
echo "I worked on $BRAIDS_BEAD."
if [ -e "$HOME/asks" ]; then
  printf '```CLAW_STATUS\nstatus: needs_human\nquestion: Snap to the grid or to edges?\n```\n'
  exit 0
fi
if [ -e "$HOME/gives-up" ]; then
  printf 'CLAW_STATUS\nstatus: failed\nsummary: the window API is missing\nEND_CLAW_STATUS\n'
  exit 0
fi
printf 'CLAW_STATUS\nstatus: done\nsummary: Added %s\nfiles_changed:\n  - src/%s.ts\ntests_passed: true\nEND_CLAW_STATUS\n' "$BRAIDS_BEAD" "$BRAIDS_BEAD"
"#;

/// The project's tests, as `go test -json` prints them: two pass, one is skipped.
const TESTS: &str = r#"for t in TestSnap TestEdges; do
  printf '{"Action":"run","Package":"example.com/app","Test":"%s"}\n' "$t"
  printf '{"Action":"pass","Package":"example.com/app","Test":"%s","Elapsed":0}\n' "$t"
done
printf '{"Action":"skip","Package":"example.com/app","Test":"TestLater","Elapsed":0}\n'
printf '{"Action":"pass","Package":"example.com/app","Elapsed":0.01}\n'
"#;

fn setup(sb: &Sandbox) -> PathBuf {
    let coder = sb.script("bin/coder", CODER);
    let tests = sb.script("bin/project-tests", TESTS);
    sb.config(&format!(
        "[worker]\nexecutor = [{:?}, \"{{prompt_file}}\"]\n",
        coder.display().to_string()
    ));
    let app = sb.new_project("app").beads(0).no_iteration().create();
    sb.set_field("app", "Pipeline", "claw");
    let root = app.root;
    std::fs::create_dir_all(root.join(".claw")).unwrap();
    std::fs::write(root.join(".claw/WORKPLAN.md"), WORKPLAN).unwrap();
    std::fs::write(
        root.join(".claw/config.yaml"),
        format!(
            "validation:\n  - [{:?}]\n  - [\"true\"]\nretries: 0\nstuck_after: 5\ntimeout: 1m\n",
            tests.display().to_string()
        ),
    )
    .unwrap();
    sb.git(&root, &["add", "-A"]);
    sb.git(&root, &["commit", "-qm", "plan"]);
    root
}

/// Every event file of the project, parsed as the seed's supervisor reads it (`cat *.event`).
fn events(root: &Path) -> Vec<serde_json::Value> {
    let dir = root.join(".claw/events");
    let mut names: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "event"))
        .collect();
    names.sort();
    names
        .iter()
        .map(|p| serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap())
        .collect()
}

fn of<'a>(all: &'a [serde_json::Value], kind: &str, bead: &str) -> Vec<&'a serde_json::Value> {
    all.iter()
        .filter(|e| e["type"] == kind && e["bead"] == bead)
        .collect()
}

#[test]
fn c8_9_task_complete_and_validation_pass_carry_the_seeds_fields() {
    let sb = Install::new().build();
    let root = setup(&sb);
    assert_eq!(turn(&sb), 1);
    let all = events(&root);
    let pass = of(&all, "validation_pass", "wp-snap");
    assert_eq!(pass.len(), 1, "{all:#?}");
    assert_eq!(pass[0]["tests_passed"], true);
    assert_eq!(
        pass[0]["tests"],
        serde_json::json!({"pass": 2, "fail": 0, "skip": 1})
    );
    let done = of(&all, "task_complete", "wp-snap");
    assert_eq!(done.len(), 1, "{all:#?}");
    let d = done[0];
    assert_eq!(d["task"], "Add snapping");
    assert_eq!(
        d["files_changed"],
        serde_json::json!(["src/wp-snap.ts"]),
        "{d:#}"
    );
    assert_eq!(d["tests_passed"], true);
    assert_eq!(
        d["tests"],
        serde_json::json!({"pass": 2, "fail": 0, "skip": 1})
    );
    assert_eq!(
        d["summary"], "Added wp-snap",
        "the coder's CLAW_STATUS: {d:#}"
    );
    assert!(
        d["duration_seconds"].is_u64() && d["commit"].is_string(),
        "{d:#}"
    );
    assert!(d.get("reported_files_changed").is_none(), "{d:#}");
    // validation_pass comes before task_complete, after task_started.
    let order: Vec<&str> = all
        .iter()
        .filter(|e| e["bead"] == "wp-snap")
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    let at = |k: &str| order.iter().position(|o| *o == k).unwrap();
    assert!(
        at("task_started") < at("validation_pass") && at("validation_pass") < at("task_complete"),
        "{order:?}"
    );
    // status.json's recent events show it, as the seed's example does.
    let status: serde_json::Value =
        serde_json::from_slice(&std::fs::read(root.join(".claw/status.json")).unwrap()).unwrap();
    let recent = status["recent_events"].to_string();
    assert!(
        recent.contains("validation_pass") && recent.contains("task_complete"),
        "{status:#}"
    );
}

#[test]
fn c8_9_the_coders_claw_status_is_its_report() {
    let sb = Install::new().build();
    let root = setup(&sb);
    // It says it failed: its half-done work is not validated into a check-off.
    std::fs::write(sb.home().join("gives-up"), "").unwrap();
    assert_eq!(turn(&sb), 1);
    let plan = std::fs::read_to_string(root.join(".claw/WORKPLAN.md")).unwrap();
    assert!(plan.contains("- [ ] Add snapping"), "{plan}");
    let all = events(&root);
    assert!(
        of(&all, "validation_pass", "wp-snap").is_empty(),
        "{all:#?}"
    );
    let err = of(&all, "error", "wp-snap");
    assert_eq!(err.len(), 1, "{all:#?}");
    assert_eq!(
        err[0]["message"],
        "the coder reported it failed: the window API is missing"
    );
    // It asks: a person is asked, the loop waits.
    std::fs::remove_file(sb.home().join("gives-up")).unwrap();
    std::fs::write(sb.home().join("asks"), "").unwrap();
    assert_eq!(turn(&sb), 1);
    let all = events(&root);
    let q = of(&all, "question", "wp-snap");
    assert_eq!(q.len(), 1, "{all:#?}");
    assert_eq!(q[0]["message"], "Snap to the grid or to edges?");
    assert!(!of(&all, "loop_paused", "wp-snap").is_empty(), "{all:#?}");
    assert_eq!(turn(&sb), 0, "paused for the person");
}
