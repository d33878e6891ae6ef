//! An optional sandbox for the agent (`[worker] sandbox`): the agent may write only its
//! workspace, the bead's share of the project's repository and tracker, temp folders, the
//! folders its CLI keeps its own state in, and what `sandbox_write` adds. It cannot write
//! braids' folder, other projects, or the rest of the person's home. Reading is not limited.
//!
//! Two ways, both wrapping the agent's argv: Landlock, through the `landlock` crate, applied by
//! braids itself in a small re-exec (`braids sandbox-exec --write … -- <agent>`) so nothing runs
//! between fork and exec but the exec; and bubblewrap (`bwrap`), a read-only view of the whole
//! file system with the writable folders bound over it. A kernel without Landlock is an error
//! that names the setting, never a silent run without the sandbox.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

/// `[worker] sandbox`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    #[default]
    Off,
    Landlock,
    Bwrap,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Off => "off",
            Kind::Landlock => "landlock",
            Kind::Bwrap => "bwrap",
        }
    }
}

/// The sandbox settings a worker's executor carries.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settings {
    pub kind: Kind,
    /// The person's home, where a CLI's state folders and `~/…` entries are.
    pub home: PathBuf,
    /// Folders under the home the agent's CLI keeps its state and caches in.
    pub state: Vec<String>,
    /// `sandbox_write`: more writable paths (`~/…` or absolute).
    pub extra: Vec<String>,
    /// The bubblewrap program.
    pub bwrap: String,
}

/// Folders every agent may write under the home: package caches its commands use.
const CACHES: &[&str] = &[".cache", ".npm", ".cargo/registry", ".cargo/git"];

impl Settings {
    /// The paths the agent working in `workspace` on `project` may write: the workspace; the
    /// project's tracker database and the parts of its repository a worktree's commits write
    /// (objects, refs, logs, the worktree's own admin folder; never its config or hooks); its
    /// own temp folder `tmp` (not all of `/tmp`, where other people's files are); `/dev`; the
    /// CLI's state; the extras.
    pub fn writable(&self, workspace: &Path, project: &Path, tmp: &Path) -> Vec<PathBuf> {
        let mut out = vec![workspace.to_path_buf(), project.join(".beads")];
        let git = project.join(".git");
        if git.is_dir() && workspace != project {
            // A worktree's commits write objects, its branch `braids/<bead>` and that branch's
            // log, and its own admin folder; never another branch, the config or the hooks.
            out.push(git.join("objects"));
            // Git LFS keeps the content of the files it tracks beside the objects.
            out.push(git.join("lfs"));
            for d in ["refs/heads/braids", "logs/refs/heads/braids"] {
                let _ = std::fs::create_dir_all(git.join(d));
                out.push(git.join(d));
            }
            if let Some(admin) = worktree_admin(&git, workspace) {
                out.push(admin);
            }
        } else if workspace == project {
            out.push(git);
        }
        let _ = std::fs::create_dir_all(tmp);
        out.extend([tmp.to_path_buf(), "/dev".into()]);
        for dir in self
            .state
            .iter()
            .map(String::as_str)
            .chain(CACHES.iter().copied())
        {
            let p = self.home.join(dir);
            // A CLI's first run makes its folder: made here, so the sandbox can name it.
            let _ = std::fs::create_dir_all(&p);
            out.push(p);
        }
        for e in &self.extra {
            out.push(match e.strip_prefix("~/") {
                Some(rest) => self.home.join(rest),
                None => PathBuf::from(e),
            });
        }
        out.retain(|p| p.exists());
        out.sort();
        out.dedup();
        out
    }

    /// `cmd` run inside the sandbox: a new command with its program, arguments and
    /// environment changes, and `TMPDIR` set to `tmp` (the caller sets the working directory
    /// and the rest).
    pub fn wrap(&self, cmd: &Command, writable: &[PathBuf], tmp: &Path) -> Result<Command> {
        let mut inner: Vec<OsString> = vec![cmd.get_program().to_os_string()];
        inner.extend(cmd.get_args().map(|a| a.to_os_string()));
        let mut out = match self.kind {
            Kind::Off => bail!("no sandbox to wrap in"),
            Kind::Landlock => {
                let me = std::env::current_exe()
                    .context("cannot find braids' own program for the sandbox")?;
                let mut c = Command::new(me);
                c.arg("sandbox-exec");
                for p in writable {
                    c.arg("--write").arg(p);
                }
                c.arg("--").args(&inner);
                c
            }
            Kind::Bwrap => {
                let mut c = Command::new(&self.bwrap);
                c.args([
                    "--die-with-parent",
                    "--ro-bind",
                    "/",
                    "/",
                    "--dev-bind",
                    "/dev",
                    "/dev",
                ])
                .args(["--proc", "/proc"]);
                for p in writable.iter().filter(|p| p.as_path() != Path::new("/dev")) {
                    c.arg("--bind").arg(p).arg(p);
                }
                c.arg("--").args(&inner);
                c
            }
        };
        for (k, v) in cmd.get_envs() {
            match v {
                Some(v) => out.env(k, v),
                None => out.env_remove(k),
            };
        }
        out.env("TMPDIR", tmp);
        Ok(out)
    }
}

/// The admin folder git keeps for the worktree at `workspace`, when its `.git` file names one
/// under the repository's own `worktrees/`: the agent can rewrite that file, so a path
/// elsewhere is never made writable.
fn worktree_admin(git: &Path, workspace: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(workspace.join(".git")).ok()?;
    let admin = PathBuf::from(text.trim().strip_prefix("gitdir:")?.trim())
        .canonicalize()
        .ok()?;
    let worktrees = git.join("worktrees").canonicalize().ok()?;
    (admin.parent() == Some(worktrees.as_path())).then_some(admin)
}

/// Why `kind` cannot work on this machine (with `bwrap` as the bubblewrap program), if it
/// cannot: for `braids check` and the worker.
pub fn unavailable(kind: Kind, bwrap: &str) -> Option<String> {
    match kind {
        Kind::Off => None,
        Kind::Landlock => {
            let abi = landlock_abi();
            (abi < 1).then(|| {
                "[worker] sandbox = \"landlock\": this kernel has no Landlock (it must be built \
                 with CONFIG_SECURITY_LANDLOCK and have landlock in its lsm= list); use \
                 sandbox = \"bwrap\" or \"off\" in config.toml"
                    .to_string()
            })
        }
        Kind::Bwrap => {
            let ok = Command::new(bwrap)
                .args(["--ro-bind", "/", "/", "--dev", "/dev", "--", "true"])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            (!ok).then(|| {
                format!(
                    "[worker] sandbox = \"bwrap\": bubblewrap (`{bwrap}`) cannot run here \
                     (install the Debian package bubblewrap, set [worker] bwrap to its path, or \
                     allow unprivileged user namespaces); use sandbox = \"landlock\" or \"off\" \
                     in config.toml"
                )
            })
        }
    }
}

/// The kernel's Landlock ABI version; 0 or less when there is none.
fn landlock_abi() -> i64 {
    // landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)
    // SAFETY: the version query reads and writes no memory.
    unsafe { nix::libc::syscall(nix::libc::SYS_landlock_create_ruleset, 0usize, 0usize, 1u32) }
}

/// Limits this process (and what it executes) to writing beneath `writable`, fully or not at
/// all: a kernel that would enforce it only in part is an error.
pub fn enter_landlock(writable: &[PathBuf]) -> Result<()> {
    use landlock::{
        path_beneath_rules, AccessFs, CompatLevel, Compatible, Ruleset, RulesetAttr,
        RulesetCreatedAttr, RulesetStatus, ABI,
    };
    if let Some(why) = unavailable(Kind::Landlock, "") {
        bail!(why);
    }
    // Before ABI 3 a file's truncation is not covered: too little to call a sandbox.
    let abi = match landlock_abi() {
        ..=2 => bail!(
            "this kernel's Landlock (ABI {}) cannot stop a file being truncated; use [worker] sandbox = \"bwrap\" or \"off\" in config.toml",
            landlock_abi()
        ),
        3 => ABI::V3,
        4 => ABI::V4,
        _ => ABI::V5,
    };
    let status = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_write(abi))?
        .create()?
        .add_rules(path_beneath_rules(writable, AccessFs::from_write(abi)))?
        .restrict_self()
        .context("cannot enter the Landlock sandbox")?;
    if status.ruleset != RulesetStatus::FullyEnforced {
        bail!(
            "the kernel did not enforce the Landlock sandbox; use [worker] sandbox = \"bwrap\" or \"off\" in config.toml"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_planted_gitdir_never_widens_what_the_agent_may_write() {
        let tmp = tempfile::tempdir().unwrap();
        let project = tmp.path().join("app");
        let admin = project.join(".git/worktrees/app-1");
        std::fs::create_dir_all(&admin).unwrap();
        std::fs::create_dir_all(project.join(".git/objects")).unwrap();
        let ws = tmp.path().join("ws/app-1");
        std::fs::create_dir_all(&ws).unwrap();
        let settings = Settings {
            kind: Kind::Landlock,
            home: tmp.path().join("home"),
            ..Settings::default()
        };
        let tmpdir = tmp.path().join("tmp");
        std::fs::write(ws.join(".git"), format!("gitdir: {}\n", admin.display())).unwrap();
        let w = settings.writable(&ws, &project, &tmpdir);
        assert!(w.contains(&admin.canonicalize().unwrap()), "{w:?}");
        assert!(w.contains(&project.join(".git/refs/heads/braids")), "{w:?}");
        assert!(!w.contains(&project.join(".git")), "{w:?}");
        for planted in ["/", "/root", tmp.path().to_str().unwrap()] {
            std::fs::write(ws.join(".git"), format!("gitdir: {planted}\n")).unwrap();
            let w = settings.writable(&ws, &project, &tmpdir);
            assert!(
                !w.iter().any(|p| p == Path::new(planted)),
                "{planted}: {w:?}"
            );
        }
    }
}
