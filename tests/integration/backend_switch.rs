//! Switching `[sessions] backend` under live workers (CONTRACTS 2.9): the real binary, real
//! tmux, real processes, a real `br`. A worker started under one backend must stay listed by
//! `braids sessions`, counted against MaxWorkers (so its bead never gets a second agent, even
//! after the claim grace period), killable by `braids kill`, and killed by the zombie rules,
//! after config.toml names the other backend. And an installation that never used tmux must
//! not start a tmux process to learn that.
//!
//! Self-contained: each test owns a throwaway HOME and its own tmux server (`TMUX_TMPDIR` in
//! the sandbox, so braids' default socket `-L braids` is private to the test). Workers are a
//! shell script that sleeps, as a busy agent would. Waits poll with deadlines; the only fixed
//! sleeps are the ones the contract is about (the claim grace period, WorkerTimeout).

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde_json::Value;

// ---------------------------------------------------------------------------------------------
// A sandboxed installation

/// A worker that runs for five minutes.
const SLEEPER: &str = "exec sleep 300";

/// The claim grace period the tests use: short, since the tests are about what happens after it.
const CLAIM_GRACE_SECS: u64 = 1;

struct Sandbox {
    dir: tempfile::TempDir,
}

/// `which <program>`, from this process's PATH and cargo's bin directory.
fn find_program(name: &str) -> PathBuf {
    let home = std::env::var("HOME").unwrap_or_default();
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .chain([PathBuf::from(home).join(".cargo/bin")])
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("`{name}` is not installed; .ci/run installs it"))
}

impl Sandbox {
    fn new(backend: &str) -> Sandbox {
        let dir = tempfile::Builder::new()
            .prefix("braids-switch-")
            .tempdir()
            .unwrap();
        let sb = Sandbox { dir };
        std::fs::create_dir_all(sb.bin()).unwrap();
        std::fs::create_dir_all(sb.tmux_tmpdir()).unwrap();
        sb.write(
            ".gitconfig",
            "[user]\n\tname = braids test\n\temail = test@braids.invalid\n[init]\n\tdefaultBranch = main\n",
        );
        let worker = sb.script("worker.sh", SLEEPER);
        sb.write(
            ".openclaw/braids/config.toml",
            &format!(
                "[worker]\ncommand = [{:?}]\n\n[sessions]\nclaim_grace_secs = {CLAIM_GRACE_SECS}\nkill_grace_secs = 5\n",
                worker.display().to_string()
            ),
        );
        sb.set_backend(backend);
        sb.ok(&["init"]);
        sb
    }

    fn home(&self) -> &Path {
        self.dir.path()
    }

    fn braids_dir(&self) -> PathBuf {
        self.home().join(".openclaw/braids")
    }

    /// First on every command's PATH.
    fn bin(&self) -> PathBuf {
        self.home().join("bin")
    }

    /// The sandbox's tmux socket directory, so `tmux -L braids` is this test's own server.
    fn tmux_tmpdir(&self) -> PathBuf {
        self.home().join("tmux")
    }

    /// braids' tmux server socket, where tmux puts it for `-L braids`.
    fn tmux_socket(&self) -> PathBuf {
        std::fs::canonicalize(self.tmux_tmpdir())
            .unwrap()
            .join(format!("tmux-{}", nix::unistd::getuid()))
            .join("braids")
    }

    fn path_var(&self) -> String {
        let mut dirs = vec![self.bin()];
        if let Some(p) = std::env::var_os("PATH") {
            dirs.extend(std::env::split_paths(&p));
        }
        dirs.push(find_program("br").parent().unwrap().to_path_buf());
        std::env::join_paths(dirs)
            .unwrap()
            .to_string_lossy()
            .into_owned()
    }

    fn write(&self, rel: &str, text: &str) -> PathBuf {
        let p = self.home().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
        p
    }

    fn script(&self, rel: &str, body: &str) -> PathBuf {
        let p = self.write(rel, &format!("#!/bin/sh\n{body}\n"));
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    /// Rewrites `backend = …` in config.toml, leaving everything else as it is.
    fn set_backend(&self, backend: &str) {
        let p = self.braids_dir().join("config.toml");
        let text = std::fs::read_to_string(&p).unwrap();
        let mut table: toml::Table = text.parse().unwrap();
        table["sessions"]
            .as_table_mut()
            .unwrap()
            .insert("backend".into(), backend.into());
        std::fs::write(p, toml::to_string(&table).unwrap()).unwrap();
    }

    fn run(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_braids"))
            .args(args)
            .env("HOME", self.home())
            .env_remove("BRAIDS_HOME")
            .env_remove("TMUX")
            .env("TMUX_TMPDIR", self.tmux_tmpdir())
            .env("PATH", self.path_var())
            .env("BRAIDS_LOG", "warn")
            .env("GIT_CONFIG_GLOBAL", self.home().join(".gitconfig"))
            .current_dir(self.home())
            .output()
            .unwrap()
    }

    fn ok(&self, args: &[&str]) -> String {
        let o = self.run(args);
        assert!(
            o.status.success(),
            "braids {args:?} failed ({:?}):\nstdout: {}\nstderr: {}",
            o.status.code(),
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// `braids tick --json --force` (a run that spawns nothing would otherwise back off).
    fn tick(&self) -> Value {
        let r: Value = serde_json::from_str(&self.ok(&["tick", "--json", "--force"])).unwrap();
        assert_eq!(r["run"], "full", "{r:#}");
        assert!(
            r["errors"].as_array().unwrap().is_empty(),
            "unexpected errors: {r:#}"
        );
        r
    }

    fn br(&self, args: &[&str]) -> String {
        let project = self.home().join("Projects/app");
        let o = Command::new(find_program("br"))
            .args(args)
            .current_dir(&project)
            .env("HOME", self.home())
            .env("BEADS_DIR", project.join(".beads"))
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "br {args:?}: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    fn br_status(&self, id: &str) -> String {
        let v: Value = serde_json::from_str(&self.br(&["show", id, "--json"])).unwrap();
        let v = v.as_array().map_or(v.clone(), |a| a[0].clone());
        v["status"].as_str().unwrap().to_string()
    }

    /// Project `app` on br with `max` workers and `beads` beads, all in its active iteration.
    fn project(&self, max: u32, beads: usize) -> Vec<String> {
        self.ok(&[
            "new",
            "app",
            "--tracker",
            "br",
            "--max-workers",
            &max.to_string(),
        ]);
        let ids: Vec<String> = (1..=beads)
            .map(|i| {
                let out = self.br(&[
                    "create",
                    &format!("--title=bead {i}"),
                    "--json",
                    "--actor=test",
                ]);
                let v: Value = serde_json::from_str(&out).unwrap();
                v["id"].as_str().or(v[0]["id"].as_str()).unwrap().into()
            })
            .collect();
        let stories: String = ids.iter().map(|id| format!("- {id}: a story\n")).collect();
        self.write(
            "Projects/app/.braids/iterations/001/ITERATION.md",
            &format!("# Iteration 1\n\n- **Status:** active\n\n## Stories\n\n{stories}"),
        );
        ids
    }

    /// Sets `WorkerTimeout` in PROJECT.md.
    fn worker_timeout(&self, secs: u64) {
        let p = self.home().join("Projects/app/.braids/PROJECT.md");
        let text = std::fs::read_to_string(&p).unwrap();
        let mut lines: Vec<String> = text
            .lines()
            .filter(|l| !l.starts_with("- **WorkerTimeout:**"))
            .map(String::from)
            .collect();
        let at = lines
            .iter()
            .position(|l| l.starts_with("- **Status:**"))
            .unwrap();
        lines.insert(at + 1, format!("- **WorkerTimeout:** {secs}"));
        std::fs::write(&p, lines.join("\n") + "\n").unwrap();
    }

    /// The live sessions `braids sessions --json` lists, by label.
    fn live(&self) -> BTreeMap<String, Value> {
        let v: Value = serde_json::from_str(&self.ok(&["sessions", "--json"])).unwrap();
        let mut out = BTreeMap::new();
        for s in v.as_array().unwrap() {
            let label = s["label"].as_str().unwrap().to_string();
            assert!(
                out.insert(label.clone(), s.clone()).is_none(),
                "two live sessions labelled {label}: {v:#}"
            );
        }
        out
    }
}

impl Drop for Sandbox {
    /// Leaves no worker behind, pass or fail: the sandbox's tmux server goes (its panes are
    /// hung up), and so does every process-backend worker whose recorded pid still has the
    /// recorded start time.
    fn drop(&mut self) {
        if self.tmux_socket().exists() {
            let _ = Command::new("tmux")
                .arg("-S")
                .arg(self.tmux_socket())
                .arg("kill-server")
                .output();
        }
        let Ok(entries) = std::fs::read_dir(self.braids_dir().join("sessions")) else {
            return;
        };
        for e in entries.flatten() {
            let Ok(v) =
                serde_json::from_slice::<Value>(&std::fs::read(e.path()).unwrap_or_default())
            else {
                continue;
            };
            let (Some(pid), Some(start)) = (v["pid"].as_u64(), v["starttime"].as_u64()) else {
                continue;
            };
            if pid > 1 && pid <= i32::MAX as u64 && stat(pid as u32).map(|s| s.2) == Some(start) {
                let _ = nix::sys::signal::killpg(
                    nix::unistd::Pid::from_raw(pid as i32),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Reading reports and processes

fn label(bead: &str) -> String {
    format!("project:app:{bead}")
}

fn spawned(r: &Value) -> Vec<String> {
    r["spawns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["bead"].as_str().unwrap().to_string())
        .collect()
}

/// (bead, reason, outcome) of each zombie a report killed.
fn zombies(r: &Value) -> Vec<(String, String, String)> {
    let mut z: Vec<_> = r["zombies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|z| {
            (
                z["bead"].as_str().unwrap().to_string(),
                z["reason"].as_str().unwrap().to_string(),
                z["outcome"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    z.sort();
    z
}

/// (state, pgrp, starttime) from `/proc/<pid>/stat`.
fn stat(pid: u32) -> Option<(char, u32, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let f: Vec<&str> = text[text.rfind(')')? + 1..].split_whitespace().collect();
    Some((
        f[0].chars().next()?,
        f[2].parse().ok()?,
        f[19].parse().ok()?,
    ))
}

/// Whether any process of group `pgid` still runs (a zombie runs nothing).
fn group_alive(pgid: u32) -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
        e.file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
            .and_then(stat)
            .is_some_and(|(state, pgrp, _)| pgrp == pgid && !matches!(state, 'Z' | 'X'))
    })
}

fn wait_until(what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !ok() {
        assert!(Instant::now() < deadline, "gave up waiting for {what}");
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// Sleeps until the wall clock has passed `t`.
fn sleep_until(t: DateTime<Utc>) {
    let left = (t - Utc::now()).to_std().unwrap_or_default();
    std::thread::sleep(left + Duration::from_millis(50));
}

fn started_at(s: &Value) -> DateTime<Utc> {
    s["started_at"].as_str().unwrap().parse().unwrap()
}

// ---------------------------------------------------------------------------------------------
// The switch

/// Three workers start under `from`; config.toml is switched to `to`. Past the claim grace
/// period, several ticks later, they are still listed under `from`, still fill MaxWorkers (no
/// bead gets a second agent, no claim is released), and each way of ending a session still
/// reaches them: `braids kill`, a closed bead, WorkerTimeout. The freed slots go to workers of
/// `to`.
fn switch(from: &str, to: &str) {
    let sb = Sandbox::new(from);
    let ids = sb.project(3, 4);
    let r = sb.tick();
    assert_eq!(spawned(&r), ids[..3], "{r:#}");
    let before = sb.live();
    assert_eq!(before.len(), 3, "{before:#?}");
    for s in before.values() {
        assert_eq!(s["backend"], from, "{s:#}");
    }
    let pid = |bead: &str| before[&label(bead)]["pid"].as_u64().unwrap() as u32;
    if from == "tmux" {
        assert!(sb.tmux_socket().exists(), "braids' tmux server socket");
    }

    sb.set_backend(to);
    std::thread::sleep(Duration::from_millis(CLAIM_GRACE_SECS * 1000 + 200));
    for n in 1..=3 {
        let r = sb.tick();
        assert!(
            spawned(&r).is_empty(),
            "2.9 violated: tick {n} after the switch spawned next to live {from} workers: {r:#}"
        );
        assert!(
            r["released"].as_array().unwrap().is_empty(),
            "2.9 violated: tick {n} released the claim of a live {from} worker: {r:#}"
        );
        assert!(zombies(&r).is_empty(), "tick {n}: {r:#}");
        assert_eq!(
            r["idle_reason"], "all-at-capacity",
            "2.9 violated: tick {n} did not count the {from} workers: {r:#}"
        );
    }
    let after = sb.live();
    assert_eq!(
        after.keys().collect::<Vec<_>>(),
        before.keys().collect::<Vec<_>>(),
        "2.9 violated: {from} workers are no longer listed by `braids sessions` under {to}"
    );
    for (l, s) in &after {
        assert_eq!(s["backend"], from, "{l}");
        assert_eq!(s["id"], before[l]["id"], "{l}: the very same session");
    }
    for id in &ids[..3] {
        assert_eq!(
            sb.br_status(id),
            "in_progress",
            "2.9 violated: {id} lost its claim"
        );
        assert!(group_alive(pid(id)), "{id}'s worker runs");
    }
    let text = sb.ok(&["sessions"]);
    assert!(
        text.lines()
            .filter(|l| l.contains(&format!("  {from}  ")))
            .count()
            == 3,
        "{text}"
    );

    // `braids kill` reaches the first.
    // Blocked, so the freed slot below goes to the ready bead.
    let out = sb.ok(&["kill", &label(&ids[0]), "--block", "switching backends"]);
    assert!(
        out.starts_with(&format!("{}: terminated;", label(&ids[0]))),
        "2.9 violated: `braids kill` under {to} of a {from} worker: {out}"
    );
    wait_until("the killed worker's group to go", || {
        !group_alive(pid(&ids[0]))
    });
    assert!(!sb.live().contains_key(&label(&ids[0])));

    // The second's bead is closed and the third runs past WorkerTimeout: both are zombies.
    sb.br(&["close", &ids[1], "--reason=done by a person", "--json"]);
    sb.worker_timeout(2);
    sleep_until(started_at(&before[&label(&ids[2])]) + chrono::Duration::seconds(3));
    let r = sb.tick();
    let mut want = vec![
        (
            ids[1].clone(),
            "bead-closed".to_string(),
            "terminated".to_string(),
        ),
        (
            ids[2].clone(),
            "timeout".to_string(),
            "terminated".to_string(),
        ),
    ];
    want.sort();
    assert_eq!(
        zombies(&r),
        want,
        "2.9 violated: the zombie rules under {to} did not reach the {from} workers: {r:#}"
    );
    assert!(!group_alive(pid(&ids[1])) && !group_alive(pid(&ids[2])));
    assert_eq!(
        sb.br_status(&ids[2]),
        "open",
        "a timed-out bead's claim is released once its worker is stopped"
    );
    assert!(
        !spawned(&r).contains(&ids[2]),
        "nor handed on in the same run: {r:#}"
    );
    // The freed slots go to the ready bead, under the backend configured now.
    assert_eq!(spawned(&r), ids[3..4], "{r:#}");
    let now = sb.live();
    assert_eq!(
        now.keys().collect::<Vec<_>>(),
        [&label(&ids[3])],
        "{now:#?}"
    );
    assert_eq!(now[&label(&ids[3])]["backend"], to);
}

#[test]
fn c2_9_a_live_tmux_worker_survives_a_switch_to_the_process_backend() {
    switch("tmux", "process");
}

#[test]
fn c2_9_a_live_process_worker_survives_a_switch_to_the_tmux_backend() {
    switch("process", "tmux");
}

/// Whether a server listens on `socket` (tmux leaves the file behind when its server exits).
fn listening(socket: &Path) -> bool {
    std::os::unix::net::UnixStream::connect(socket).is_ok()
}

/// The process backend's tick costs what it did before tmux sessions were merged in: with no
/// tmux server for braids, no tmux process is started, by ticks, `sessions` or `kill`, neither
/// on a machine that never ran one nor once braids' server has exited (its socket file stays).
/// A tmux that logs every call is first on PATH; configured for tmux, the same installation
/// calls it.
#[test]
fn c2_9_with_no_tmux_server_the_process_backend_starts_no_tmux() {
    let sb = Sandbox::new("process");
    let calls = sb.home().join("tmux-calls");
    let real = find_program("tmux");
    sb.script(
        "bin/tmux",
        &format!(
            "echo \"$*\" >> '{}'\nexec '{}' \"$@\"",
            calls.display(),
            real.display()
        ),
    );
    let called = || std::fs::read_to_string(&calls).unwrap_or_default();
    let ids = sb.project(1, 2);
    let r = sb.tick();
    assert_eq!(spawned(&r), ids[..1]);
    sb.tick();
    assert_eq!(sb.live().len(), 1);
    sb.ok(&["sessions"]);
    // Blocked, so the next run takes the other bead.
    sb.ok(&["kill", &label(&ids[0]), "--block", "switching backends"]);
    assert!(sb.live().is_empty());
    assert_eq!(
        called(),
        "",
        "2.9 violated: the process backend started tmux"
    );

    // Configured for tmux, the stand-in is called: it is on the PATH braids uses. A worker
    // there, then killed, leaves braids' server gone and its socket file behind.
    sb.set_backend("tmux");
    let r = sb.tick();
    assert_eq!(spawned(&r), ids[1..2], "{r:#}");
    assert!(called().contains("new-session"), "{}", called());
    sb.ok(&["kill", &label(&ids[1])]);
    wait_until("braids' tmux server to exit", || {
        !listening(&sb.tmux_socket())
    });
    assert!(sb.tmux_socket().exists(), "tmux keeps its socket file");

    // Back on the process backend, a socket without a server costs no tmux process either.
    sb.set_backend("process");
    std::fs::remove_file(&calls).unwrap();
    sb.tick();
    sb.ok(&["sessions"]);
    assert_eq!(
        called(),
        "",
        "2.9 violated: the process backend started tmux for a socket with no server"
    );
}
