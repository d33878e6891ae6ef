//! Installations for the contract suites (faults, hostile input, corpus): projects written
//! file by file on the native tracker, a stub worker that records its spawn message and then
//! sleeps, and helpers to run `braids` with a time limit and to read what it left behind.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::Sandbox;

/// A PATH without cargo's bin directory, so `br` is whatever a test puts in the sandbox bin.
pub fn sys_path(s: &Sandbox) -> String {
    format!(
        "{}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        s.bin().display()
    )
}

/// `braids init`, a stub worker, and settings for fast faults.
pub fn install(s: &Sandbox, config: &str) {
    s.ok(&["init"]);
    let worker = s.script(
        "bin/stub-worker",
        r#"mkdir -p "$HOME/spawned"
cat > "$HOME/spawned/$BRAIDS_LABEL.msg"
exec sleep 300"#,
    );
    s.config(&format!(
        "[worker]\ncommand = [\"{}\"]\n[tracker]\ntimeout_secs = 1\n[sessions]\nkill_grace_secs = 1\n",
        worker.display()
    ));
    if !config.is_empty() {
        s.config(config);
    }
    set_registry(s, &[]);
}

/// Rewrites the registry with these rows: (slug, status, path cell).
pub fn set_registry(s: &Sandbox, rows: &[(&str, &str, &str)]) {
    let mut t =
        String::from("# registry\n\n| Slug | Status | Priority | Path |\n|---|---|---|---|\n");
    for (slug, status, path) in rows {
        t.push_str(&format!("| {slug} | {status} | normal | {path} |\n"));
    }
    std::fs::write(s.braids_dir().join("registry.md"), t).unwrap();
}

/// Adds a registry row.
pub fn register(s: &Sandbox, slug: &str, path: &str) {
    let p = s.braids_dir().join("registry.md");
    let mut t = std::fs::read_to_string(&p).unwrap();
    t.push_str(&format!("| {slug} | active | normal | {path} |\n"));
    std::fs::write(p, t).unwrap();
}

/// A project on the native tracker with `beads` open items, iteration 1 active over them, and
/// `MaxWorkers`; `extra` is appended to PROJECT.md's fields. Registered as `~/Projects/<slug>`.
pub fn project(s: &Sandbox, slug: &str, max_workers: u32, beads: &[&str], extra: &str) -> PathBuf {
    let root = s.project(slug);
    std::fs::create_dir_all(root.join(".braids")).unwrap();
    std::fs::write(
        root.join(".braids/PROJECT.md"),
        format!(
            "# {slug}\n\n- **Status:** active\n- **Priority:** normal\n- **Autonomy:** full\n- **MaxWorkers:** {max_workers}\n- **WorkerTimeout:** 3600\n{extra}"
        ),
    )
    .unwrap();
    let mut wp = String::from("# Workplan\n\n## Backlog\n\n");
    for b in beads {
        wp.push_str(&format!("- [ ] Work on {b} <!-- id:{b} -->\n"));
    }
    std::fs::write(root.join(".braids/WORKPLAN.md"), wp).unwrap();
    let stories: Vec<(&str, &str)> = beads.iter().map(|b| (*b, "story")).collect();
    s.iteration(slug, 1, "active", &stories);
    register(s, slug, &format!("~/Projects/{slug}"));
    root
}

/// The status of each native-tracker item: id → (status, assignee).
pub fn workplan(s: &Sandbox, slug: &str) -> BTreeMap<String, (String, Option<String>)> {
    let text = std::fs::read_to_string(s.project(slug).join(".braids/WORKPLAN.md")).unwrap();
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let t = line.trim_start();
        let Some(rest) = t.strip_prefix("- [") else {
            continue;
        };
        let checked = rest.starts_with('x') || rest.starts_with('X');
        let Some(meta) = line.split("<!--").nth(1) else {
            continue;
        };
        let meta = meta.trim_end().trim_end_matches("-->");
        let mut id = None;
        let mut status = None;
        let mut assignee = None;
        for part in meta.split(',') {
            let (k, v) = part.split_once(':').unwrap_or((part, ""));
            match k.trim() {
                "id" => id = Some(v.trim().to_string()),
                "status" => status = Some(v.trim().to_string()),
                "assignee" => assignee = Some(v.trim().to_string()),
                _ => {}
            }
        }
        let status = if checked {
            "closed".to_string()
        } else {
            status.unwrap_or_else(|| "open".into())
        };
        if let Some(id) = id {
            out.insert(id, (status, assignee));
        }
    }
    out
}

/// Marks a native-tracker item closed by hand (`[x]`).
pub fn close_by_hand(s: &Sandbox, slug: &str, bead: &str) {
    let p = s.project(slug).join(".braids/WORKPLAN.md");
    let text = std::fs::read_to_string(&p).unwrap();
    let out: String = text
        .lines()
        .map(|l| {
            if l.contains(&format!("id:{bead}")) {
                l.replacen("- [ ]", "- [x]", 1) + "\n"
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    std::fs::write(p, out).unwrap();
}

/// `braids <args>` with the sandbox's environment but `PATH` = [`sys_path`].
pub fn braids(s: &Sandbox, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_braids"));
    c.args(args)
        .env("HOME", s.home())
        .env_remove("BRAIDS_HOME")
        .env("PATH", sys_path(s))
        .env("BRAIDS_LOG", "warn")
        .env("GIT_CONFIG_GLOBAL", s.home().join(".gitconfig"))
        .current_dir(s.home())
        .stdin(Stdio::null());
    c
}

/// What a limited run did.
pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
    pub timed_out: bool,
}

impl Run {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}\nstderr: {}", self.stdout, self.stderr))
    }
}

/// Runs a command, SIGKILLing it (and failing nothing) after `limit`.
pub fn run_limited(mut cmd: Command, limit: Duration) -> Run {
    use std::io::Read;
    let start = Instant::now();
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let o = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = out.read_to_end(&mut b);
        b
    });
    let e = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = err.read_to_end(&mut b);
        b
    });
    let mut timed_out = false;
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if start.elapsed() > limit {
            timed_out = true;
            let _ = child.kill();
            break child.wait().unwrap();
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let elapsed = start.elapsed();
    Run {
        code: status.code(),
        stdout: String::from_utf8_lossy(&o.join().unwrap()).into_owned(),
        stderr: String::from_utf8_lossy(&e.join().unwrap()).into_owned(),
        elapsed,
        timed_out,
    }
}

/// `braids tick --json --force` (backoff ignored), limited to `secs`.
pub fn tick(s: &Sandbox, secs: u64) -> Run {
    run_limited(
        braids(s, &["tick", "--json", "--force"]),
        Duration::from_secs(secs),
    )
}

/// The labels a tick report spawned.
pub fn spawned(v: &serde_json::Value) -> Vec<String> {
    v["spawns"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|s| s["label"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// The session records in `~/.openclaw/braids/sessions`, parsed.
pub fn session_records(s: &Sandbox) -> Vec<serde_json::Value> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(s.braids_dir().join("sessions")) {
        for e in rd.flatten() {
            let p = e.path();
            if p.extension().is_some_and(|x| x == "json")
                && !p.file_name().unwrap().to_string_lossy().starts_with('.')
            {
                if let Ok(v) =
                    serde_json::from_str(&std::fs::read_to_string(&p).unwrap_or_default())
                {
                    out.push(v);
                }
            }
        }
    }
    out
}

/// Whether `pid` is a live (not zombie) process.
pub fn alive(pid: i64) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(t) => {
            let state = t
                .rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .chars()
                .next();
            !matches!(state, Some('Z') | Some('X') | None)
        }
        Err(_) => false,
    }
}

/// The state file, parsed, if it exists and is JSON.
pub fn state(s: &Sandbox) -> Option<serde_json::Value> {
    let p = s.braids_dir().join(".orchestrator-state.json");
    std::fs::read_to_string(p)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
}

/// STATUS.md is one whole dashboard: the title once, one `Updated:` line, a section per slug.
pub fn status_md_whole(text: &str, slugs: &[&str]) -> Result<(), String> {
    if !text.starts_with("# braids status\n") {
        return Err(format!("does not start with the title: {:?}", first(text)));
    }
    if text.matches("# braids status").count() != 1 || text.matches("\nUpdated: ").count() > 1 {
        return Err("two dashboards in one file".into());
    }
    if !text.contains("\nUpdated: ") {
        return Err("no `Updated:` line: not a dashboard a run wrote".into());
    }
    if !text.ends_with('\n') || text.contains('\0') {
        return Err("cut short or binary".into());
    }
    for slug in slugs {
        if !text.contains(&format!("\n## {slug} — ")) {
            return Err(format!("no section for {slug}"));
        }
    }
    Ok(())
}

fn first(t: &str) -> String {
    t.chars().take(60).collect()
}

/// Nothing braids owns is corrupt: the state is JSON with the contract fields, STATUS.md is
/// whole, the registry is as the test wrote it, and each native tracker file still has its
/// items. `slugs` are the projects STATUS.md must show.
pub fn assert_intact(s: &Sandbox, registry: &str, slugs: &[&str], items: &[(&str, usize)]) {
    let st = state(s).expect("1.6 violated: the state file is missing or not JSON");
    for k in ["idleSince", "idleReason", "lastRunAt"] {
        assert!(
            st.get(k).is_some(),
            "1.6 violated: the state lacks {k}: {st}"
        );
    }
    let status = std::fs::read_to_string(s.braids_dir().join("STATUS.md")).unwrap_or_default();
    if let Err(e) = status_md_whole(&status, slugs) {
        panic!("1.5 violated: STATUS.md is not whole ({e}):\n{status}");
    }
    assert_eq!(
        std::fs::read_to_string(s.braids_dir().join("registry.md")).unwrap(),
        registry,
        "1.1: the tick changed the registry"
    );
    for (slug, n) in items {
        assert_eq!(
            workplan(s, slug).len(),
            *n,
            "4.6: {slug}'s WORKPLAN.md lost items:\n{}",
            std::fs::read_to_string(s.project(slug).join(".braids/WORKPLAN.md")).unwrap()
        );
    }
    let leftovers: Vec<String> = std::fs::read_dir(s.braids_dir())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".braids-tmp-"))
        .collect();
    assert!(
        leftovers.is_empty(),
        "temp files left behind: {leftovers:?}"
    );
}

/// The registry text as the test left it.
pub fn registry_text(s: &Sandbox) -> String {
    std::fs::read_to_string(s.braids_dir().join("registry.md")).unwrap()
}

/// Every in_progress native-tracker item is held: by a session record, or by a claim the
/// state remembers (so a later run releases it). Otherwise it is stranded for good.
pub fn assert_no_stranded_beads(s: &Sandbox, slugs: &[&str]) {
    let records = session_records(s);
    let claims = state(s)
        .and_then(|v| v["claims"].as_array().cloned())
        .unwrap_or_default();
    for slug in slugs {
        for (id, (status, _)) in workplan(s, slug) {
            if status != "in_progress" {
                continue;
            }
            let label = format!("project:{slug}:{id}");
            let held = records.iter().any(|r| r["label"] == label.as_str());
            let remembered = claims
                .iter()
                .any(|c| c["project"] == *slug && c["bead"] == id.as_str());
            assert!(
                held || remembered,
                "2.1 violated: {label} is in_progress with no worker and no remembered claim, \
                 so no run will ever release it"
            );
        }
    }
}

pub fn path_str(p: &Path) -> String {
    p.display().to_string()
}

/// SIGKILLs the process group of every recorded session.
pub fn kill_workers(s: &Sandbox) {
    for r in session_records(s) {
        if let Some(pid) = r["pid"].as_i64() {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}
