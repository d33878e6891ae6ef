//! The native br read path and answer reuse in real ticks: the real `braids` binary over a
//! project built with the real `br`.
//!
//! - 5.1: a project whose JSONL is stale (the database moved on), missing or garbage is read
//!   through `br`, and the tick's result is exactly what reading through br alone
//!   (`BRAIDS_BR_READS=br`) gives; `-v` says which path each read took.
//! - 5.2: a full run records the project's fingerprint; the next run over unchanged files
//!   reuses its answers, and a change made with br is seen by the run after it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime};

use serde_json::Value;

fn br_program() -> PathBuf {
    std::env::var_os("PATH")
        .and_then(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join("br"))
                .find(|p| p.is_file())
        })
        .or_else(|| Some(PathBuf::from("/root/.cargo/bin/br")).filter(|p| p.is_file()))
        .expect("the real `br` (beads_rust) is not installed")
}

/// A throwaway HOME with one registered br project, `web` (MaxWorkers 1).
struct World {
    dir: tempfile::TempDir,
    br: PathBuf,
}

impl World {
    /// `beads` are (title, priority), created in order; returns the world and their ids.
    fn new(beads: &[(&str, u8)]) -> (World, Vec<String>) {
        let dir = tempfile::Builder::new()
            .prefix("braids-brnative-")
            .tempdir()
            .unwrap();
        let w = World {
            dir,
            br: br_program(),
        };
        let braids = w.home().join(".openclaw/braids");
        std::fs::create_dir_all(&braids).unwrap();
        std::fs::write(
            braids.join("config.toml"),
            "[worker]\ncommand = [\"/bin/false\"]\n\n[tracker]\ntimeout_secs = 60\n",
        )
        .unwrap();
        std::fs::write(
            braids.join("registry.md"),
            "| Slug | Status | Priority | Path |\n|---|---|---|---|\n| web | active | high | ~/Projects/web |\n",
        )
        .unwrap();
        let root = w.root();
        std::fs::create_dir_all(root.join(".braids/iterations/001")).unwrap();
        std::fs::write(
            root.join(".braids/PROJECT.md"),
            "# web\n\n- **Status:** active\n- **Priority:** high\n- **Autonomy:** full\n- **MaxWorkers:** 1\n- **Tracker:** br\n",
        )
        .unwrap();
        let out = w.br_with(&["init", "--prefix=w", "--json"], true);
        assert!(out.status.success(), "br init: {out:?}");
        let ids: Vec<String> = beads
            .iter()
            .map(|(title, p)| {
                let out = w.br(&[
                    "create",
                    &format!("--title={title}"),
                    &format!("--priority={p}"),
                    "--json",
                ]);
                let v: Value = serde_json::from_slice(&out.stdout).unwrap();
                v["id"]
                    .as_str()
                    .or(v[0]["id"].as_str())
                    .unwrap()
                    .to_string()
            })
            .collect();
        let mut it = String::from("# Iteration 1\n\n- **Status:** active\n\n## Stories\n\n");
        for id in &ids {
            it.push_str(&format!("- {id}: story\n"));
        }
        std::fs::write(root.join(".braids/iterations/001/ITERATION.md"), it).unwrap();
        (w, ids)
    }

    fn home(&self) -> &Path {
        self.dir.path()
    }

    fn root(&self) -> PathBuf {
        self.home().join("Projects/web")
    }

    fn beads(&self) -> PathBuf {
        self.root().join(".beads")
    }

    fn br(&self, args: &[&str]) -> std::process::Output {
        self.br_with(args, false)
    }

    fn br_with(&self, args: &[&str], init: bool) -> std::process::Output {
        let beads = if init { PathBuf::new() } else { self.beads() };
        Command::new(&self.br)
            .args(args)
            .current_dir(self.root())
            .env("HOME", self.home())
            .env("BEADS_DIR", beads)
            .env("NO_COLOR", "1")
            .output()
            .unwrap()
    }

    /// `braids -v tick <args> --json`: the report, and the log.
    fn tick(&self, args: &[&str], br_only: bool) -> (Value, String) {
        let br_dir = self.br.parent().unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_braids"));
        cmd.arg("-v")
            .arg("tick")
            .args(args)
            .arg("--json")
            .env_clear()
            .env("HOME", self.home())
            .env("PATH", format!("{}:/usr/bin:/bin", br_dir.display()))
            .current_dir(self.home());
        if br_only {
            cmd.env("BRAIDS_BR_READS", "br");
        }
        let out = cmd.output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "tick failed: {stderr}");
        (serde_json::from_slice(&out.stdout).unwrap(), stderr)
    }

    /// Every file and directory of the project, last written an hour ago: older than the
    /// window in which a fingerprint is not trusted.
    fn backdate(&self) {
        fn walk(p: &Path, when: SystemTime) {
            if p.is_dir() {
                for e in std::fs::read_dir(p).unwrap().flatten() {
                    walk(&e.path(), when);
                }
            }
            if let Ok(f) = std::fs::File::open(p) {
                let _ = f.set_modified(when);
            }
        }
        walk(&self.root(), SystemTime::now() - Duration::from_secs(3600));
    }

    fn mtime(&self, name: &str) -> SystemTime {
        std::fs::metadata(self.beads().join(name))
            .unwrap()
            .modified()
            .unwrap()
    }

    fn set_mtime(&self, name: &str, when: SystemTime) {
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(self.beads().join(name))
            .unwrap();
        f.set_modified(when).unwrap();
    }
}

/// What a run decided, without what differs between two identical runs.
fn decided(v: &Value) -> Value {
    serde_json::json!({
        "action": v["action"],
        "idle_reason": v["idle_reason"],
        "spawns": v["spawns"],
        "errors": v["errors"],
    })
}

fn spawned_beads(v: &Value) -> Vec<String> {
    v["spawns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["bead"].as_str().unwrap().to_string())
        .collect()
}

/// The `-v` line saying how the project's tracker was read.
fn reads(log: &str) -> String {
    log.lines()
        .find(|l| l.contains("tracker read"))
        .and_then(|l| l.split("reads=").nth(1))
        .unwrap_or("(no tracker read logged)")
        .to_string()
}

#[test]
fn c5_1_fault_a_stale_missing_or_garbage_jsonl_is_read_through_br_with_the_same_result() {
    let (w, ids) = World::new(&[("first", 2), ("second", 2), ("third", 3)]);
    let same_as_br = |why: &str, expect_reads: &str| -> Value {
        let (native, log) = w.tick(&["--dry-run", "--force"], false);
        let (through_br, br_log) = w.tick(&["--dry-run", "--force"], true);
        assert_eq!(
            decided(&native),
            decided(&through_br),
            "5.1 violated ({why}): the tick decided differently than through br alone"
        );
        assert!(
            reads(&log).contains(expect_reads),
            "{why}: the read path was {:?}, expected {expect_reads:?}",
            reads(&log)
        );
        assert!(
            reads(&br_log).contains("br (BRAIDS_BR_READS=br)"),
            "{br_log}"
        );
        native
    };

    // In step: read natively, and the oldest of the most urgent beads is spawned.
    let v = same_as_br("in step", "native (issues.jsonl)");
    assert_eq!(spawned_beads(&v), [ids[0].clone()]);

    // Stale: a change br has not exported (and no trace of it but the database's mtime).
    let out = w.br(&["--no-auto-flush", "close", &ids[0], "--json"]);
    assert!(out.status.success(), "{out:?}");
    // Only the database's mtime tells: br's own freshness check (the JSONL is as br last
    // exported it) must not import the file back over the change.
    let _ = std::fs::remove_file(w.beads().join("last-touched"));
    let later = w.mtime("issues.jsonl") + Duration::from_secs(30);
    w.set_mtime("beads.db", later);
    w.set_mtime("beads.db-wal", later);
    let v = same_as_br(
        "stale",
        "br (the database changed after the JSONL was written)",
    );
    assert_eq!(
        spawned_beads(&v),
        [ids[1].clone()],
        "the database's answer (the first story closed), not the file's"
    );

    // Missing.
    let jsonl = w.beads().join("issues.jsonl");
    let kept = std::fs::read(&jsonl).unwrap();
    std::fs::remove_file(&jsonl).unwrap();
    let v = same_as_br("missing", "br (no issues.jsonl)");
    assert_eq!(spawned_beads(&v), [ids[1].clone()]);

    // Garbage, as new as the database (only the parse fails; br answers from its database)
    // and newer than it (br tries to import it and refuses): br's answer either way.
    for (why, offset, path) in [
        ("garbage in step", 0, "br (issues.jsonl: line 1"),
        (
            "garbage, newer",
            30,
            "br (the JSONL changed after br last read it",
        ),
    ] {
        std::fs::write(&jsonl, "{\"id\": \"w-1\", garbage\n").unwrap();
        let db = w.mtime("beads.db").max(w.mtime("beads.db-wal"));
        w.set_mtime("issues.jsonl", db + Duration::from_secs(offset));
        same_as_br(why, path);
    }
    std::fs::write(&jsonl, kept).unwrap();
}

#[test]
fn c5_2_an_unchanged_project_reuses_the_last_runs_answers_and_a_changed_one_is_read_again() {
    // Nothing can start: the first bead is held by someone, the second waits for it.
    let (w, ids) = World::new(&[("held", 1), ("waits", 2)]);
    let out = w.br(&["update", &ids[0], "--claim", "--actor=someone", "--json"]);
    assert!(out.status.success(), "{out:?}");
    let out = w.br(&["dep", "add", &ids[1], &ids[0], "--json"]);
    assert!(out.status.success(), "{out:?}");
    w.backdate();

    // A full run (nothing to spawn, so it changes nothing) records the fingerprint.
    let (first, log) = w.tick(&["--force"], false);
    assert_eq!(first["idle_reason"], "no-ready-beads", "{first:#}");
    assert!(reads(&log).contains("native"), "{log}");
    let state: Value = serde_json::from_slice(
        &std::fs::read(w.home().join(".openclaw/braids/.orchestrator-state.json")).unwrap(),
    )
    .unwrap();
    assert!(
        state["observeCache"].is_string(),
        "5.2 violated: no cache recorded: {state:#}"
    );
    assert!(
        w.home()
            .join(".openclaw/braids/observe-cache.bin")
            .is_file(),
        "5.2 violated: no cache written"
    );

    // Unchanged: the answers are reused, and the run decides the same.
    let (again, log) = w.tick(&["--dry-run", "--force"], false);
    assert!(
        reads(&log).contains("unchanged since the last full run"),
        "5.2 violated: an unchanged project was read again: {}",
        reads(&log)
    );
    assert_eq!(decided(&again), decided(&first));

    // Changed through br: read again, and the freed bead is seen.
    let out = w.br(&["close", &ids[0], "--json"]);
    assert!(out.status.success(), "{out:?}");
    let (after, log) = w.tick(&["--dry-run", "--force"], false);
    assert!(
        reads(&log).contains("native (issues.jsonl)"),
        "{}",
        reads(&log)
    );
    assert_eq!(
        spawned_beads(&after),
        [ids[1].clone()],
        "5.2 violated: a change was not seen: {after:#}"
    );
}
