//! What a test reads back from a [`Sandbox`]: the orchestrator's state and session records,
//! the live sessions, the trackers' beads (br, the native WORKPLAN.md) and git.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use braids::tick::orchestrator_state::OrchestratorState;
use serde_json::Value;

use super::{br_path, Sandbox};

impl Sandbox {
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
        let run = || {
            std::process::Command::new(br_path())
                .args(args)
                .current_dir(self.project(slug))
                .env("HOME", self.home())
                .env("BEADS_DIR", self.project(slug).join(".beads"))
                .output()
                .unwrap()
        };
        // br answers "database is busy" while a worker writes; a reader asks again.
        let mut o = run();
        for _ in 0..50 {
            if o.status.success()
                || !String::from_utf8_lossy(&o.stdout).contains("database is busy")
            {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(200));
            o = run();
        }
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
        self.try_git(dir, args)
            .unwrap_or_else(|e| panic!("git {args:?}: {e}"))
    }

    /// A bare upstream (`<home>/<slug>.git`) the project `slug` pushes to, its branch pushed.
    pub fn bare_upstream(&self, slug: &str) -> std::path::PathBuf {
        let root = self.project(slug);
        let bare = self.home().join(format!("{slug}.git"));
        self.git(
            self.home(),
            &["init", "-q", "--bare", bare.to_str().unwrap()],
        );
        self.git(&root, &["remote", "add", "origin", bare.to_str().unwrap()]);
        self.git(&root, &["push", "-q", "-u", "origin", "HEAD"]);
        bare
    }

    /// [`git`](Sandbox::git), with git's complaint as the error instead of a panic.
    pub fn try_git(&self, dir: &Path, args: &[&str]) -> Result<String, String> {
        let o = std::process::Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("HOME", self.home())
            .env("GIT_CONFIG_GLOBAL", self.home().join(".gitconfig"))
            .output()
            .unwrap();
        if o.status.success() {
            Ok(String::from_utf8_lossy(&o.stdout).into_owned())
        } else {
            Err(String::from_utf8_lossy(&o.stderr).into_owned())
        }
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
    /// Waits until a process works in `bead`'s worktree: its worker got past its own claim
    /// and runs the agent. (The tick claims before it spawns; a person's close before the
    /// worker's claim would only have the worker refuse the bead and end.)
    pub fn wait_agent(&self, bead: &str) {
        let root = self.braids_dir().join("workspaces");
        crate::support::wait_for(
            "the agent running in its worktree",
            std::time::Duration::from_secs(60),
            || {
                crate::support::procs::pids()
                    .any(|pid| {
                        std::fs::read_link(format!("/proc/{pid}/cwd"))
                            .is_ok_and(|cwd| cwd.starts_with(&root) && cwd.ends_with(bead))
                    })
                    .then_some(())
            },
        );
    }

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
