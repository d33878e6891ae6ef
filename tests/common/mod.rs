//! A sandboxed installation for integration tests: a throwaway HOME, the real `braids` binary,
//! a real `br` when a test asks for one, real git, and helpers to build projects fluently.
//!
//! Each test owns its sandbox, so tests run in parallel without sharing any state.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Output;

use assert_cmd::Command;

pub struct Sandbox {
    pub dir: tempfile::TempDir,
}

/// Where `br` is: PATH, or cargo's bin directory. Tests that need it fail loudly without it.
pub fn br_path() -> PathBuf {
    let home = std::env::var("HOME").unwrap_or_default();
    let candidates = std::env::var_os("PATH")
        .map(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join("br"))
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    candidates
        .into_iter()
        .chain([PathBuf::from(home).join(".cargo/bin/br")])
        .find(|p| p.is_file())
        .expect("`br` (beads_rust) is not installed; .ci/run installs it with `cargo +nightly install beads_rust --no-default-features --locked`")
}

impl Sandbox {
    pub fn new() -> Sandbox {
        let dir = tempfile::Builder::new()
            .prefix("braids-test-")
            .tempdir()
            .unwrap();
        let s = Sandbox { dir };
        std::fs::create_dir_all(s.bin()).unwrap();
        std::fs::write(s.home().join(".gitconfig"), "[user]\n\tname = braids test\n\temail = test@braids.invalid\n[init]\n\tdefaultBranch = main\n").unwrap();
        s
    }

    pub fn home(&self) -> &Path {
        self.dir.path()
    }
    pub fn braids_dir(&self) -> PathBuf {
        self.home().join(".openclaw/braids")
    }
    pub fn projects(&self) -> PathBuf {
        self.home().join("Projects")
    }
    pub fn project(&self, slug: &str) -> PathBuf {
        self.projects().join(slug)
    }
    /// A directory first on the PATH of every command: stub executables go here.
    pub fn bin(&self) -> PathBuf {
        self.home().join("bin")
    }

    /// PATH for commands: the stub dir, the directory of `br` (if any), then the system's.
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

    /// `braids <args>` in this sandbox.
    pub fn braids(&self) -> Command {
        let mut c = Command::cargo_bin("braids").unwrap();
        c.env("HOME", self.home())
            .env_remove("BRAIDS_HOME")
            .env("PATH", self.path_var())
            .env("BRAIDS_LOG", "warn")
            .env("GIT_CONFIG_GLOBAL", self.home().join(".gitconfig"))
            .current_dir(self.home());
        c
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.braids().args(args).output().unwrap()
    }

    /// Runs and asserts success, returning stdout.
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

    pub fn write(&self, rel: impl AsRef<Path>, text: &str) -> PathBuf {
        let p = self.home().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
        p
    }

    pub fn read(&self, rel: impl AsRef<Path>) -> String {
        std::fs::read_to_string(self.home().join(rel)).unwrap_or_default()
    }

    /// Writes an executable script into the stub bin dir (or anywhere under the sandbox).
    pub fn script(&self, rel: impl AsRef<Path>, body: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let p = self.write(rel, &format!("#!/bin/sh\n{body}\n"));
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    /// `br <args>` in a project, as a person would run it.
    pub fn br(&self, slug: &str, args: &[&str]) -> String {
        let o = std::process::Command::new(br_path())
            .args(args)
            .current_dir(self.project(slug))
            .env("HOME", self.home())
            .env("BEADS_DIR", self.project(slug).join(".beads"))
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

    /// Creates a bead with br and returns its id.
    pub fn br_create(&self, slug: &str, title: &str) -> String {
        let out = self.br(
            slug,
            &[
                "create",
                &format!("--title={title}"),
                "--json",
                "--actor=test",
            ],
        );
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        v["id"]
            .as_str()
            .or(v[0]["id"].as_str())
            .unwrap()
            .to_string()
    }

    /// `git <args>` in a directory.
    pub fn git(&self, dir: &Path, args: &[&str]) -> String {
        let o = std::process::Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("HOME", self.home())
            .env("GIT_CONFIG_GLOBAL", self.home().join(".gitconfig"))
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// Sets `key: value` in a project's PROJECT.md (replacing the bold-bullet line).
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

    /// Merges `toml` into config.toml, table by table (later keys win).
    pub fn config(&self, toml: &str) {
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
        merge(&mut table, toml.parse().expect("test config is TOML"));
        std::fs::create_dir_all(self.braids_dir()).unwrap();
        std::fs::write(p, toml::to_string(&table).unwrap()).unwrap();
    }

    pub fn state(&self) -> serde_json::Value {
        serde_json::from_str(&self.read(".openclaw/braids/.orchestrator-state.json"))
            .unwrap_or(serde_json::Value::Null)
    }

    /// `braids tick --json [extra]`, parsed.
    pub fn tick(&self, extra: &[&str]) -> serde_json::Value {
        let mut args = vec!["tick", "--json"];
        args.extend_from_slice(extra);
        serde_json::from_str(&self.ok(&args)).unwrap()
    }
}

impl Drop for Sandbox {
    /// Kills any worker a test left behind, by the process groups the session records name
    /// (`pid`, which leads the worker's group): when `/proc/<pid>/stat` still shows the
    /// record's `starttime`, or, once that leader has exited, when a process of its group
    /// carries the record's `BRAIDS_SESSION` token. A pid the kernel has since given to another
    /// process (or a record a test crafted around somebody else's pid) is never signalled.
    fn drop(&mut self) {
        let dir = self.braids_dir().join("sessions");
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let Ok(text) = std::fs::read_to_string(e.path()) else {
                continue;
            };
            let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) else {
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
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return false;
    };
    dir.flatten().any(|e| {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            return false;
        };
        let in_group = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|t| {
                let rest = t[t.rfind(')')? + 1..].to_string();
                rest.split_whitespace().nth(2)?.parse::<u32>().ok()
            })
            == Some(pgid);
        in_group
            && std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|b| *b == 0).any(|v| v == marker.as_bytes()))
    })
}

/// Field 22 of `/proc/<pid>/stat` (clock ticks after boot at which the process started), the
/// identity the process backend records next to a pid; `None` when there is no such process.
pub fn proc_starttime(pid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &text[text.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}
