//! [`Sandbox`], the throwaway HOME every integration test owns: its places, its PATH, running
//! `braids` in it, and writing its files and config.

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::Duration;

use serde_json::Value;

use super::files::write_script;
use super::procs::proc_starttime;
use super::tick::{run_limited, Run, Tick};

/// The shortest tracker timeout or kill grace a test may set without being about it: shorter
/// ones turn an ordinary loaded CI machine into red runs.
const SHORTEST_TIMEOUT_SECS: i64 = 5;

/// A throwaway HOME: a git identity, a `bin/` first on every command's PATH for stubs, and
/// (once [`Install`] or a test ran `braids init`) `~/.openclaw/braids`. Each test owns its
/// sandbox, so tests run in parallel without sharing any state.
pub struct Sandbox {
    dir: tempfile::TempDir,
    /// See [`Sandbox::isolated`].
    isolated: bool,
}

impl Sandbox {
    /// A bare HOME: nothing of braids yet (see [`Install`] for an installation).
    pub fn new() -> Sandbox {
        let dir = tempfile::Builder::new()
            .prefix("braids-test-")
            .tempdir()
            .unwrap();
        let s = Sandbox {
            dir,
            isolated: false,
        };
        std::fs::create_dir_all(s.bin()).unwrap();
        std::fs::write(
            s.home().join(".gitconfig"),
            "[user]\n\tname = braids test\n\temail = test@braids.invalid\n[init]\n\tdefaultBranch = main\n",
        )
        .unwrap();
        s
    }

    // ---- places ----

    pub fn home(&self) -> &Path {
        self.dir.path()
    }
    pub fn braids_dir(&self) -> PathBuf {
        self.home().join(".openclaw/braids")
    }
    pub fn projects(&self) -> PathBuf {
        self.home().join("Projects")
    }
    /// `~/Projects/<slug>`.
    pub fn project(&self, slug: &str) -> PathBuf {
        self.projects().join(slug)
    }
    /// A directory first on the PATH of every command: stub executables go here.
    pub fn bin(&self) -> PathBuf {
        self.home().join("bin")
    }
    pub fn state_path(&self) -> PathBuf {
        self.braids_dir().join(".orchestrator-state.json")
    }
    pub fn status_path(&self) -> PathBuf {
        self.braids_dir().join("STATUS.md")
    }
    pub fn registry_path(&self) -> PathBuf {
        self.braids_dir().join("registry.md")
    }
    pub fn sessions_dir(&self) -> PathBuf {
        self.braids_dir().join("sessions")
    }

    /// The commands under test ([`command`](Sandbox::command), [`tick`](Sandbox::tick),
    /// [`run_limited`](Sandbox::run_limited)) see only the sandbox bin and the system's
    /// directories on PATH: a `br` is whatever the test puts in bin (and none once a stub
    /// deletes itself). Setup commands ([`ok`](Sandbox::ok), [`braids`](Sandbox::braids)) keep
    /// the full [`path_var`](Sandbox::path_var), as a person's shell has it.
    #[must_use]
    pub fn isolated(mut self) -> Sandbox {
        self.isolated = true;
        self
    }

    /// PATH as a person's shell has it: the stub dir, cargo's bin directory (where `br` is),
    /// then the caller's PATH.
    pub fn path_var(&self) -> String {
        let mut dirs = vec![self.bin()];
        let home = std::env::var("HOME").unwrap_or_default();
        dirs.push(PathBuf::from(home).join(".cargo/bin"));
        if let Some(p) = std::env::var_os("PATH") {
            dirs.extend(std::env::split_paths(&p));
        }
        std::env::join_paths(dirs)
            .unwrap()
            .to_string_lossy()
            .into_owned()
    }

    /// PATH for the commands under test: [`path_var`](Sandbox::path_var), or the sandbox bin and
    /// the system's directories when [`isolated`](Sandbox::isolated).
    fn command_path(&self) -> String {
        if self.isolated {
            format!(
                "{}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                self.bin().display()
            )
        } else {
            self.path_var()
        }
    }

    // ---- running braids ----

    /// `braids` in this sandbox (assert_cmd, for stdin and output assertions).
    pub fn braids(&self) -> assert_cmd::Command {
        let mut c = assert_cmd::Command::cargo_bin("braids").unwrap();
        c.env("HOME", self.home())
            .env_remove("BRAIDS_HOME")
            .env("PATH", self.path_var())
            .env("BRAIDS_LOG", "warn")
            .env("GIT_CONFIG_GLOBAL", self.home().join(".gitconfig"))
            .current_dir(self.home());
        c
    }

    /// `braids <args>` in this sandbox as a plain std command (stdin null), to spawn, limit or
    /// run several at once.
    pub fn command(&self, args: &[&str]) -> std::process::Command {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_braids"));
        c.args(args)
            .env("HOME", self.home())
            .env_remove("BRAIDS_HOME")
            .env("PATH", self.command_path())
            .env("BRAIDS_LOG", "warn")
            .env("GIT_CONFIG_GLOBAL", self.home().join(".gitconfig"))
            .current_dir(self.home())
            .stdin(Stdio::null());
        c
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.braids().args(args).output().unwrap()
    }

    /// Runs `braids <args>` and asserts success, returning stdout.
    #[track_caller]
    pub fn ok(&self, args: &[&str]) -> String {
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

    /// `braids <args>`, SIGKILLed (and failing nothing) after `limit`.
    pub fn run_limited(&self, args: &[&str], limit: Duration) -> Run {
        run_limited(self.command(args), limit)
    }

    /// `braids tick --json`, to be refined and run: see [`Tick`].
    pub fn tick(&self) -> Tick<'_> {
        Tick::new(self)
    }

    /// Starts `n` `braids tick --json` at once and returns their reports (each must succeed).
    #[track_caller]
    pub fn concurrent_ticks(&self, n: usize) -> Vec<braids::tick::TickReport> {
        let children: Vec<_> = (0..n)
            .map(|_| {
                self.command(&["tick", "--json"])
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        children
            .into_iter()
            .map(|c| {
                let o = c.wait_with_output().unwrap();
                assert!(
                    o.status.success(),
                    "a concurrent tick failed: {}",
                    String::from_utf8_lossy(&o.stderr)
                );
                serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
                    panic!(
                        "not a tick report ({e}): {}",
                        String::from_utf8_lossy(&o.stdout)
                    )
                })
            })
            .collect()
    }

    // ---- files ----

    pub fn write(&self, rel: impl AsRef<Path>, text: &str) -> PathBuf {
        let p = self.home().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
        p
    }

    /// A file under HOME, or "" when it cannot be read.
    pub fn read(&self, rel: impl AsRef<Path>) -> String {
        std::fs::read_to_string(self.home().join(rel)).unwrap_or_default()
    }

    /// Writes an executable `sh` script (into the stub bin dir, or anywhere under HOME).
    pub fn script(&self, rel: impl AsRef<Path>, body: &str) -> PathBuf {
        let p = self.home().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        write_script(&p, body);
        p
    }

    /// Merges `toml` into config.toml, table by table (later keys win). Tracker timeouts, kill
    /// graces and notification timeouts under 5 s are refused: on a loaded CI machine they
    /// fire on ordinary slowness. A test about that very timeout uses one of at least 5 s
    /// against a hang an order of magnitude longer, and asserts that order of magnitude.
    #[track_caller]
    pub fn config(&self, toml: &str) {
        let table: toml::Table = toml.parse().expect("test config is TOML");
        for (section, key) in [
            ("tracker", "timeout_secs"),
            ("sessions", "kill_grace_secs"),
            ("notify", "timeout_secs"),
        ] {
            let secs = table
                .get(section)
                .and_then(|t| t.get(key))
                .and_then(toml::Value::as_integer);
            if let Some(secs) = secs {
                assert!(
                    secs >= SHORTEST_TIMEOUT_SECS,
                    "[{section}] {key} = {secs}: a timeout under {SHORTEST_TIMEOUT_SECS} s turns \
                     ordinary load into red CI"
                );
            }
        }
        self.merge_config(table);
    }

    fn merge_config(&self, from: toml::Table) {
        fn merge(into: &mut toml::Table, from: toml::Table) {
            for (k, v) in from {
                match (into.get_mut(&k), v) {
                    (Some(toml::Value::Table(a)), toml::Value::Table(b)) => merge(a, b),
                    (_, v) => {
                        into.insert(k, v);
                    }
                }
            }
        }
        let p = self.braids_dir().join("config.toml");
        let mut table: toml::Table = std::fs::read_to_string(&p)
            .unwrap_or_default()
            .parse()
            .unwrap();
        merge(&mut table, from);
        std::fs::create_dir_all(self.braids_dir()).unwrap();
        std::fs::write(p, toml::to_string(&table).unwrap()).unwrap();
    }

    /// Sets `key: value` in a project's PROJECT.md (replacing the bold-bullet line, or adding
    /// one after `Status`).
    pub fn set_field(&self, slug: &str, key: &str, value: &str) {
        let p = self.project(slug).join(".braids/PROJECT.md");
        let text = std::fs::read_to_string(&p).unwrap();
        let prefix = format!("- **{key}:**");
        let mut found = false;
        let mut out: Vec<String> = text
            .lines()
            .map(|l| {
                if l.starts_with(&prefix) {
                    found = true;
                    format!("{prefix} {value}")
                } else {
                    l.to_string()
                }
            })
            .collect();
        if !found {
            let at = out
                .iter()
                .position(|l| l.starts_with("- **Status:**"))
                .unwrap()
                + 1;
            out.insert(at, format!("{prefix} {value}"));
        }
        std::fs::write(&p, out.join("\n") + "\n").unwrap();
    }

    /// Writes iteration `n` of a project with the given status and stories.
    pub fn iteration(&self, slug: &str, n: u32, status: &str, stories: &[(&str, &str)]) -> PathBuf {
        let list: String = stories
            .iter()
            .map(|(id, t)| format!("- {id}: {t}\n"))
            .collect();
        let dir = self
            .project(slug)
            .join(format!(".braids/iterations/{n:03}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("ITERATION.md"),
            format!("# Iteration {n}\n\n- **Status:** {status}\n\n## Stories\n\n{list}"),
        )
        .unwrap();
        dir
    }

    /// Rewrites the registry with these rows: (slug, status, path cell).
    pub fn set_registry(&self, rows: &[(&str, &str, &str)]) {
        let mut t =
            String::from("# registry\n\n| Slug | Status | Priority | Path |\n|---|---|---|---|\n");
        for (slug, status, path) in rows {
            t.push_str(&format!("| {slug} | {status} | normal | {path} |\n"));
        }
        std::fs::write(self.registry_path(), t).unwrap();
    }

    /// Adds an active registry row.
    pub fn register(&self, slug: &str, path: &str) {
        let p = self.registry_path();
        let mut t = std::fs::read_to_string(&p).unwrap();
        t.push_str(&format!("| {slug} | active | normal | {path} |\n"));
        std::fs::write(p, t).unwrap();
    }

    /// The registry text as it is now.
    pub fn registry_text(&self) -> String {
        std::fs::read_to_string(self.registry_path()).unwrap()
    }
}

impl Drop for Sandbox {
    /// Kills any worker a test left behind, by the process groups the session records name
    /// (`pid`, which leads the worker's group): when `/proc/<pid>/stat` still shows the
    /// record's `starttime`, or, once that leader has exited, when a process of its group
    /// carries the record's `BRAIDS_SESSION` token. A pid the kernel has since given to another
    /// process (or a record a test crafted around somebody else's pid) is never signalled.
    fn drop(&mut self) {
        // The OpenClaw backend's local workers keep their records in a folder of their own.
        let dirs = [self.sessions_dir(), self.sessions_dir().join("openclaw")];
        let entries = dirs
            .iter()
            .filter_map(|d| std::fs::read_dir(d).ok())
            .flatten();
        for e in entries.flatten() {
            let Ok(text) = std::fs::read_to_string(e.path()) else {
                continue;
            };
            let Ok(v) = serde_json::from_str::<Value>(&text) else {
                continue;
            };
            let (Some(pid), Some(start)) = (v["pid"].as_u64(), v["starttime"].as_u64()) else {
                continue;
            };
            if pid <= 1 || pid > i32::MAX as u64 {
                continue;
            }
            let ours = match proc_starttime(pid as u32) {
                Some(s) => s == start,
                None => v["token"]
                    .as_str()
                    .is_some_and(|t| group_has_marked_member(pid as u32, t)),
            };
            if ours {
                let _ = nix::sys::signal::killpg(
                    nix::unistd::Pid::from_raw(pid as i32),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
    }
}

/// Whether a process of group `pgid` has `BRAIDS_SESSION=<token>` in its environment.
fn group_has_marked_member(pgid: u32, token: &str) -> bool {
    let marker = format!("BRAIDS_SESSION={token}");
    super::procs::pids().any(|pid| {
        super::procs::stat(pid).is_some_and(|s| s.pgrp == pgid as i32)
            && std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|b| *b == 0).any(|v| v == marker.as_bytes()))
    })
}
