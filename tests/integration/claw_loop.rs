//! The claw loop as a pipeline mode (seed 003): a three-phase `.claw/WORKPLAN.md` walked by
//! real ticks and real `braids worker` processes with a scripted coder, through a validation
//! failure, PAUSED, resume with a note, the coder failing until `loop_stuck`, and
//! `loop_complete`; the context packet the coder read is a snapshot.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::support::{wait_for, Install, Sandbox};

const WORKPLAN: &str = "# WORKPLAN

## Phase 1: Foundation

- [ ] Set up the store <!-- id:wp-store -->

## Phase 2: Features

- [ ] Add window snapping <!-- id:wp-snap, slice:windows, touches:windowStore -->
- [ ] Build the taskbar <!-- id:wp-bar, slice:taskbar -->

## Phase 3: Polish

- [ ] Write the docs <!-- id:wp-docs -->
";

/// The coder: keeps each packet it is given, fails while `$HOME/coder-fails` exists, else
/// writes a file for its task and a passing report.
const CODER: &str = r#"n=$(ls "$HOME/packets" 2>/dev/null | wc -l)
mkdir -p "$HOME/packets"
cp "$1" "$HOME/packets/$(printf %02d $n)-$BRAIDS_BEAD.md"
if [ -e "$HOME/coder-fails" ]; then echo "coder: the model is confused" >&2; exit 1; fi
echo "work for $BRAIDS_BEAD" > "work-$BRAIDS_BEAD.txt"
printf 'status: pass\nsummary: did it\n' > "$2"
"#;

fn project(sb: &Sandbox) -> PathBuf {
    let app = sb.new_project("app").beads(0).no_iteration().create();
    sb.set_field("app", "Pipeline", "claw");
    let root = app.root;
    let files: &[(&str, &str)] = &[
        (".claw/WORKPLAN.md", WORKPLAN),
        (
            ".claw/config.yaml",
            "validation:\n  - [sh, -c, '! test -e \"$HOME/validation-fails\"', check]\nretries: 1\nstuck_after: 2\ntimeout: 1m\n",
        ),
        ("src/slices/windows/slice.md", "# windows\n\nWindows, dragging and snapping.\n"),
        ("src/slices/windows/Window.tsx", "import { windowStore } from '../../store/windowStore';\n"),
        ("src/slices/windows/hooks/useSnap.ts", "export const useSnap = 1;\n"),
        ("src/store/windowStore.ts", "/**\n * Window store: owns z-order and positions.\n */\nexport const windowStore = {};\n"),
        (".claw/specs/snapping.md", "# Snapping\n\nWindows snap to screen edges within 8 px.\n"),
        (".claw/specs/unrelated.md", "# Sound\n\nNothing about that.\n"),
    ];
    for (rel, text) in files {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    sb.git(&root, &["add", "-A"]);
    sb.git(&root, &["commit", "-qm", "plan"]);
    root
}

/// One tick, then until its worker is done.
pub(crate) fn turn(sb: &Sandbox) -> usize {
    let r = sb.tick().force().run();
    wait_for("the worker to end", Duration::from_secs(120), || {
        sb.live_labels().is_empty().then_some(())
    });
    r.spawns.len()
}

fn kinds(root: &Path) -> Vec<String> {
    let j = braids::events::Journal::of_project(root);
    j.entries()
        .iter()
        .map(|e| {
            let ev = e.read().unwrap();
            format!(
                "{}{}",
                ev.kind,
                ev.bead.map(|b| format!(":{b}")).unwrap_or_default()
            )
        })
        .collect()
}

fn checked(root: &Path) -> Vec<String> {
    std::fs::read_to_string(root.join(".claw/WORKPLAN.md"))
        .unwrap()
        .lines()
        .filter(|l| l.starts_with("- [x]"))
        .map(|l| {
            l.split("id:")
                .nth(1)
                .unwrap()
                .split([',', ' '])
                .next()
                .unwrap()
                .to_string()
        })
        .collect()
}

fn status(root: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(root.join(".claw/status.json")).unwrap()).unwrap()
}

#[test]
fn c8_8_a_three_phase_workplan_through_pause_resume_stuck_and_complete() {
    let sb = Install::new().build();
    let coder = sb.script("bin/coder", CODER);
    sb.config(&format!(
        "[worker]\nexecutor = [{:?}, \"{{prompt_file}}\", \"{{result_file}}\"]\n",
        coder.display().to_string()
    ));
    let root = project(&sb);

    // A person's work in progress, uncommitted and untracked, is never part of a task.
    std::fs::write(root.join("notes.txt"), "mine\n").unwrap();
    std::fs::write(root.join("AGENTS.md"), "edited by a person\n").unwrap();
    std::fs::write(root.join("staged.txt"), "staged by a person\n").unwrap();
    sb.git(&root, &["add", "staged.txt"]);

    // Phase 1's task: coded, validated, checked off, committed.
    assert_eq!(turn(&sb), 1);
    assert_eq!(checked(&root), ["wp-store"]);
    let log = sb.git(&root, &["log", "-1", "--name-only", "--format=%s"]);
    assert!(log.starts_with("Set up the store (wp-store)"), "{log}");
    assert!(
        log.contains("work-wp-store.txt") && log.contains(".claw/WORKPLAN.md"),
        "{log}"
    );
    assert!(
        !log.contains(".claw/events") && !log.contains("status.json"),
        "{log}"
    );
    assert!(
        !log.contains("notes.txt") && !log.contains("AGENTS.md") && !log.contains("staged.txt"),
        "{log}"
    );
    let dirty = sb.git(&root, &["status", "--porcelain"]);
    assert!(
        dirty.contains("?? notes.txt")
            && dirty.contains(" M AGENTS.md")
            && dirty.contains("A  staged.txt"),
        "a person's work stays as it was: {dirty}"
    );
    std::fs::remove_file(root.join("notes.txt")).unwrap();
    sb.git(&root, &["checkout", "AGENTS.md"]);
    sb.git(&root, &["rm", "-q", "--cached", "staged.txt"]);
    std::fs::remove_file(root.join("staged.txt")).unwrap();

    // The next task's checks fail twice (one retry): the loop pauses.
    std::fs::write(sb.home().join("validation-fails"), "").unwrap();
    assert_eq!(turn(&sb), 1);
    assert_eq!(checked(&root), ["wp-store"]);
    let ks = kinds(&root);
    assert_eq!(
        ks.iter()
            .filter(|k| *k == "validation_failed:wp-snap")
            .count(),
        2,
        "{ks:?}"
    );
    assert!(ks.last().unwrap().starts_with("loop_paused"), "{ks:?}");
    let issues = sb.read(root.join(".claw/ISSUES.md"));
    assert!(
        issues.contains("Add window snapping") && issues.contains("check"),
        "{issues}"
    );
    let packets = std::fs::read_dir(sb.home().join("packets"))
        .unwrap()
        .count();
    assert_eq!(packets, 3, "the retry's coder got a packet too");
    let retry = sb.read(sb.home().join("packets/02-wp-snap.md"));
    assert!(retry.contains("## Previous Attempt"), "{retry}");
    // Paused: the tick starts nothing, and status.json says so.
    assert_eq!(turn(&sb), 0);
    assert_eq!(status(&root)["state"], "PAUSED");

    // A person fixes it and resumes with a note: the next packet shows it once.
    std::fs::remove_file(sb.home().join("validation-fails")).unwrap();
    let out = sb.ok(&[
        "resume",
        "app",
        "--note",
        "Use the edge list, not the grid.",
    ]);
    assert!(out.contains("it was paused: validation failed"), "{out}");
    assert_eq!(turn(&sb), 1);
    assert_eq!(checked(&root), ["wp-store", "wp-snap"]);
    let packet = sb.read(sb.home().join("packets/03-wp-snap.md"));
    assert!(packet.contains("Use the edge list"), "{packet}");
    insta::assert_snapshot!("claw_context_packet", packet);

    // The coder fails twice in a row (stuck_after: 2): loop_stuck, paused.
    std::fs::write(sb.home().join("coder-fails"), "").unwrap();
    assert_eq!(turn(&sb), 1);
    assert_eq!(turn(&sb), 1);
    let ks = kinds(&root);
    assert!(ks.iter().any(|k| k == "loop_stuck:wp-bar"), "{ks:?}");
    assert_eq!(turn(&sb), 0, "stuck is paused");
    let next = sb.read(sb.home().join(format!(
        "packets/{:02}-wp-bar.md",
        std::fs::read_dir(sb.home().join("packets")).unwrap().count() - 1
    )));
    assert!(
        !next.contains("Use the edge list"),
        "a note reaches one packet: {next}"
    );

    // Resumed, the loop finishes: loop_complete, COMPLETE.
    std::fs::remove_file(sb.home().join("coder-fails")).unwrap();
    sb.ok(&["resume", "app"]);
    assert_eq!(turn(&sb), 1);
    assert_eq!(turn(&sb), 1);
    assert_eq!(checked(&root), ["wp-store", "wp-snap", "wp-bar", "wp-docs"]);
    assert_eq!(turn(&sb), 0);
    let ks = kinds(&root);
    assert_eq!(
        ks.last().map(String::as_str),
        Some("loop_complete"),
        "{ks:?}"
    );
    let s = status(&root);
    assert_eq!(s["state"], "COMPLETE", "{s:#}");
    assert_eq!(s["phase"], "Phase 3: Polish", "{s:#}");
    assert_eq!(s["phase_progress"]["done"], 1, "{s:#}");
    // One commit per task, and a clean work tree.
    let subjects = sb.git(&root, &["log", "--format=%s"]);
    for t in [
        "Set up the store",
        "Add window snapping",
        "Build the taskbar",
        "Write the docs",
    ] {
        assert_eq!(
            subjects.lines().filter(|l| l.starts_with(t)).count(),
            1,
            "{subjects}"
        );
    }
    let dirty = sb.git(&root, &["status", "--porcelain", "--untracked-files=all"]);
    assert_eq!(dirty.trim(), "", "{dirty}");
}

#[test]
fn c8_8_check_names_a_bad_claw_config_by_file_and_line() {
    let sb = Install::new().build();
    let root = project(&sb);
    std::fs::write(root.join(".claw/config.yaml"), "retries: 2\nretry: 3\n").unwrap();
    let out = sb.run(&["check"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        text.contains("config.yaml:2") && text.contains("unknown field `retry`"),
        "{text}"
    );
    std::fs::remove_file(root.join(".claw/WORKPLAN.md")).unwrap();
    let out = sb.run(&["check"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(text.contains("has no .claw/WORKPLAN.md"), "{text}");
}
