//! [`Sandbox`], the installation every integration test owns, and [`Install`], its builder.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::Duration;

use braids::state::OrchestratorState;
use serde_json::Value;

use super::files::write_script;
use super::procs::proc_starttime;
use super::tick::{run_limited, Run, Tick};

/// A worker that records its spawn message in `$HOME/spawned/<label>.msg` (written aside and
/// renamed, so a reader never sees half of it) and then runs for five minutes, as a busy agent
/// would.
pub const SLEEPER: &str = r#"mkdir -p "$HOME/spawned"
cat > "$HOME/spawned/.$BRAIDS_LABEL.part"
mv "$HOME/spawned/.$BRAIDS_LABEL.part" "$HOME/spawned/$BRAIDS_LABEL.msg"
exec sleep 300"#;

/// A worker that records its spawn message like [`SLEEPER`] and exits at once without touching
/// its bead, as a crashed agent would.
pub const QUITTER: &str = r#"mkdir -p "$HOME/spawned"
cat > "$HOME/spawned/.$BRAIDS_LABEL.part"
mv "$HOME/spawned/.$BRAIDS_LABEL.part" "$HOME/spawned/$BRAIDS_LABEL.msg"
exit 0"#;

/// The shortest tracker timeout or kill grace a test may set without being about it: shorter
/// ones turn an ordinary loaded CI machine into red runs.
const SHORTEST_TIMEOUT_SECS: i64 = 5;

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
        .chain([
            PathBuf::from(home).join(".cargo/bin/br"),
            PathBuf::from("/root/.cargo/bin/br"),
        ])
        .find(|p| p.is_file())
        .expect("`br` (beads_rust) is not installed; .ci/run installs it with `cargo +nightly install beads_rust --no-default-features --locked`")
}

/// `br init --prefix=<prefix>` in `dir` with the real `br`, as a person sets a project up
/// (`BEADS_DIR` cleared, so it is `dir`'s own `.beads/`; HOME the sandbox's when given).
#[track_caller]
pub fn br_init(dir: &Path, prefix: &str, home: Option<&Path>) {
    let mut c = std::process::Command::new(br_path());
    c.args(["init", &format!("--prefix={prefix}"), "--json"])
        .current_dir(dir)
        .env("BEADS_DIR", "");
    if let Some(home) = home {
        c.env("HOME", home);
    }
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "br init failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

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

    // ---- the orchestrator's own files ----

    /// The state file as JSON; `Null` when it is missing or not JSON.
    pub fn state_json(&self) -> Value {
        serde_json::from_str(&self.read(".openclaw/braids/.orchestrator-state.json"))
            .unwrap_or(Value::Null)
    }

    /// The state file, typed; `None` when it is missing or does not load.
    pub fn try_state(&self) -> Option<OrchestratorState> {
        std::fs::read_to_string(self.state_path())
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
    }

    /// The state file, typed; the test fails when it is missing or does not load.
    #[track_caller]
    pub fn state(&self) -> OrchestratorState {
        self.try_state().unwrap_or_else(|| {
            panic!(
                "no loadable state file: {:?}",
                self.read(".openclaw/braids/.orchestrator-state.json")
            )
        })
    }

    /// The session records in `~/.openclaw/braids/sessions`, parsed.
    pub fn session_records(&self) -> Vec<Value> {
        let mut out = Vec::new();
        if let Ok(rd) = std::fs::read_dir(self.sessions_dir()) {
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

    /// The live sessions `braids sessions --json` lists, by label.
    #[track_caller]
    pub fn live(&self) -> BTreeMap<String, Value> {
        let v: Value = serde_json::from_str(&self.ok(&["sessions", "--json"])).unwrap();
        v.as_array()
            .unwrap()
            .iter()
            .map(|s| (s["label"].as_str().unwrap().to_string(), s.clone()))
            .collect()
    }

    /// The labels of the live sessions.
    #[track_caller]
    pub fn live_labels(&self) -> BTreeSet<String> {
        self.live().into_keys().collect()
    }

    /// The pid of the live session `label`.
    #[track_caller]
    pub fn pid_of(&self, label: &str) -> u32 {
        self.live()[label]["pid"].as_u64().unwrap() as u32
    }

    /// SIGKILLs the process group of every recorded session.
    pub fn kill_workers(&self) {
        for r in self.session_records() {
            if let Some(pid) = r["pid"].as_i64() {
                let _ = nix::sys::signal::killpg(
                    nix::unistd::Pid::from_raw(pid as i32),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
    }

    /// What the worker for `label` received on stdin, once a [`SLEEPER`] or [`QUITTER`] wrote
    /// it down.
    pub fn spawn_message(&self, label: &str) -> Option<String> {
        std::fs::read_to_string(self.home().join(format!("spawned/{label}.msg"))).ok()
    }

    // ---- trackers and git ----

    /// `br <args>` in a project, as a person would run it.
    #[track_caller]
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
    #[track_caller]
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
        let v: Value = serde_json::from_str(&out).unwrap();
        v["id"]
            .as_str()
            .or(v[0]["id"].as_str())
            .unwrap()
            .to_string()
    }

    /// A bead as `br show` sees it.
    #[track_caller]
    pub fn br_show(&self, slug: &str, id: &str) -> Value {
        let v: Value = serde_json::from_str(&self.br(slug, &["show", id, "--json"])).unwrap();
        v.as_array().map_or(v.clone(), |a| a[0].clone())
    }

    /// A bead's status as `br show` sees it.
    #[track_caller]
    pub fn br_status(&self, slug: &str, id: &str) -> String {
        self.br_show(slug, id)["status"]
            .as_str()
            .unwrap()
            .to_string()
    }

    /// Ids of the beads br has in `status`.
    #[track_caller]
    pub fn br_with_status(&self, slug: &str, status: &str) -> BTreeSet<String> {
        let v: Value =
            serde_json::from_str(&self.br(slug, &["list", "--json", "--all", "--limit=0"]))
                .unwrap();
        let issues = v.get("issues").unwrap_or(&v);
        issues
            .as_array()
            .unwrap()
            .iter()
            .filter(|i| i["status"] == status)
            .map(|i| i["id"].as_str().unwrap().to_string())
            .collect()
    }

    /// `git <args>` in a directory, asserting success; stdout.
    #[track_caller]
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

    /// The items of a project's native-tracker WORKPLAN.md: id → (status, assignee).
    pub fn workplan(&self, slug: &str) -> BTreeMap<String, (String, Option<String>)> {
        let text = std::fs::read_to_string(self.project(slug).join(".braids/WORKPLAN.md")).unwrap();
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
    pub fn close_by_hand(&self, slug: &str, bead: &str) {
        let p = self.project(slug).join(".braids/WORKPLAN.md");
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

    /// Appends an open native-tracker item.
    pub fn add_item(&self, slug: &str, title: &str, id: &str) {
        let p = self.project(slug).join(".braids/WORKPLAN.md");
        let mut text = std::fs::read_to_string(&p).unwrap();
        if !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&format!("- [ ] {title} <!-- id:{id} -->\n"));
        std::fs::write(p, text).unwrap();
    }
}

impl Drop for Sandbox {
    /// Kills any worker a test left behind, by the process groups the session records name
    /// (`pid`, which leads the worker's group): when `/proc/<pid>/stat` still shows the
    /// record's `starttime`, or, once that leader has exited, when a process of its group
    /// carries the record's `BRAIDS_SESSION` token. A pid the kernel has since given to another
    /// process (or a record a test crafted around somebody else's pid) is never signalled.
    fn drop(&mut self) {
        let Ok(entries) = std::fs::read_dir(self.sessions_dir()) else {
            return;
        };
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

/// Builds an installation: `braids init` in a fresh [`Sandbox`], then the worker and the
/// config.toml settings a test asks for.
#[must_use]
pub struct Install {
    sb: Sandbox,
    worker: Option<String>,
    config: Vec<String>,
    plain_registry: bool,
}

impl Install {
    pub fn new() -> Install {
        Install {
            sb: Sandbox::new(),
            worker: None,
            config: Vec::new(),
            plain_registry: false,
        }
    }

    /// Workers run this `sh` script body (as `[worker] command`), reading the spawn message on
    /// stdin: [`SLEEPER`], [`QUITTER`] or a test's own.
    pub fn worker(mut self, body: &str) -> Install {
        self.worker = Some(body.to_string());
        self
    }

    /// Merges `toml` into config.toml (after `braids init`; whole tables). Timeouts under 5 s
    /// are refused: see [`Sandbox::config`].
    pub fn config(mut self, toml: &str) -> Install {
        self.config.push(toml.to_string());
        self
    }

    /// See [`Sandbox::isolated`].
    pub fn isolated_path(mut self) -> Install {
        self.sb = self.sb.isolated();
        self
    }

    /// Replaces the registry `braids init` wrote with a bare table, for projects registered
    /// row by row ([`NewProject::by_hand`](super::project::NewProject::by_hand)).
    pub fn plain_registry(mut self) -> Install {
        self.plain_registry = true;
        self
    }

    #[track_caller]
    pub fn build(self) -> Sandbox {
        let sb = self.sb;
        sb.ok(&["init"]);
        if let Some(body) = &self.worker {
            let script = sb.script("worker.sh", body);
            sb.config(&format!(
                "[worker]\ncommand = [{:?}]\n",
                script.display().to_string()
            ));
        }
        for toml in &self.config {
            sb.config(toml);
        }
        if self.plain_registry {
            sb.set_registry(&[]);
        }
        sb
    }
}
