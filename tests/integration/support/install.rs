//! [`Install`], the builder of an installation, the workers it runs, and the real `br`.

use std::path::{Path, PathBuf};

use super::Sandbox;

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

/// Builds an installation: `braids init` in a fresh [`Sandbox`], then the worker and the
/// config.toml settings a test asks for.
#[must_use]
pub struct Install {
    sb: Sandbox,
    worker: Option<String>,
    agent: Option<String>,
    config: Vec<String>,
    plain_registry: bool,
    sandboxed: bool,
}

impl Install {
    pub fn new() -> Install {
        Install {
            sb: Sandbox::new(),
            worker: None,
            agent: None,
            config: Vec::new(),
            plain_registry: false,
            sandboxed: false,
        }
    }

    /// Workers run this `sh` script body (as `[worker] command`), reading the spawn message on
    /// stdin: [`SLEEPER`], [`QUITTER`] or a test's own.
    pub fn worker(mut self, body: &str) -> Install {
        self.worker = Some(body.to_string());
        self
    }

    /// Real `braids worker`s run this `sh` body as their agent (`bin/agent`, the executor),
    /// with the deliverable's path as `$1`.
    pub fn agent(mut self, body: &str) -> Install {
        self.agent = Some(body.to_string());
        self
    }

    /// Merges `toml` into config.toml (after `braids init`; whole tables). Timeouts under 5 s
    /// are refused: see [`Sandbox::config`].
    pub fn config(mut self, toml: &str) -> Install {
        self.config.push(toml.to_string());
        self
    }

    /// Keeps the agents' sandbox at braids' default (`"auto"`). Without it the scripted agents
    /// of a test run unconfined: they are the test's own scripts, and most record what they
    /// saw (calls, prompts, markers) in files beside the installation, outside any workspace.
    /// The tests about the sandbox, and those of the real agent CLIs, ask for it.
    pub fn sandboxed(mut self) -> Install {
        self.sandboxed = true;
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
        // A released bead is retried at once: tests about the retry backoff set their own.
        sb.config("[worker]\nretry_backoff = \"0s\"\n");
        if !self.sandboxed {
            sb.config("[worker]\nsandbox = \"off\"\n");
        }
        if let Some(body) = &self.worker {
            let script = sb.script("worker.sh", body);
            sb.config(&format!(
                "[worker]\ncommand = [{:?}]\n",
                script.display().to_string()
            ));
        }
        if let Some(body) = &self.agent {
            let agent = sb.script("bin/agent", body);
            sb.config(&format!(
                "[worker]\nexecutor = [{:?}, \"{{deliverable}}\"]\n",
                agent.display().to_string()
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
