//! Where things live (CONTRACTS 4.1, 4.2).
//!
//! `~` is the user's home directory, never an agent workspace; braids' own files (registry,
//! state, STATUS.md, config, lock, logs) live in `~/.openclaw/braids/`; projects default to
//! `BRAIDS_HOME`, which is `~/Projects` unless set. The environment is read once, into a
//! [`Paths`] value that is passed down, so nothing else consults `HOME` or `BRAIDS_HOME`.

use std::path::{Component, Path, PathBuf};

use anyhow::{bail, Result};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paths {
    pub home: PathBuf,
    /// `~/.openclaw/braids`: agent infrastructure (4.2).
    pub braids_dir: PathBuf,
    /// Where new projects go: `$BRAIDS_HOME`, default `~/Projects` (4.2).
    pub braids_home: PathBuf,
    /// `~/.openclaw/workspace`: the agent workspace, where project files never go (4.1).
    pub workspace: PathBuf,
}

impl Paths {
    /// Makes braids' folder the person's alone: the folder 0700 and the files directly in it
    /// (config with its webhook secrets, state, ledgers, STATUS.md) 0600, tightening an
    /// existing installation. Returns what it tightened, for the caller to say once.
    pub fn make_private(&self) -> std::io::Result<Vec<PathBuf>> {
        use std::os::unix::fs::PermissionsExt;
        std::fs::create_dir_all(&self.braids_dir)?;
        let mut tightened = Vec::new();
        let mut tighten = |p: &Path, want: u32| -> std::io::Result<()> {
            let meta = std::fs::symlink_metadata(p)?;
            if meta.file_type().is_symlink() || meta.permissions().mode() & 0o077 == 0 {
                return Ok(());
            }
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(want))?;
            tightened.push(p.to_path_buf());
            Ok(())
        };
        tighten(&self.braids_dir, 0o700)?;
        for entry in std::fs::read_dir(&self.braids_dir)?.flatten() {
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let want = if kind.is_dir() { 0o700 } else { 0o600 };
            if kind.is_dir() || kind.is_file() {
                let _ = tighten(&entry.path(), want);
            }
        }
        Ok(tightened)
    }

    /// Resolves from `HOME` (or the password database) and `BRAIDS_HOME`, once per process.
    pub fn from_env() -> Result<Paths> {
        let home = match std::env::var_os("HOME").filter(|h| !h.is_empty()) {
            Some(h) => PathBuf::from(h),
            None => match nix::unistd::User::from_uid(nix::unistd::getuid()) {
                Ok(Some(u)) => u.dir,
                _ => bail!("cannot find the home directory: HOME is unset and the user has no passwd entry; set HOME"),
            },
        };
        if !home.is_absolute() {
            bail!(
                "HOME `{}` is not an absolute path; set HOME to your home directory",
                home.display()
            );
        }
        let braids_home = std::env::var("BRAIDS_HOME")
            .ok()
            .filter(|v| !v.trim().is_empty());
        Ok(Paths::new(home, braids_home.as_deref()))
    }

    /// Builds the layout for a given home; `braids_home` is expanded like a registry path.
    pub fn new(home: PathBuf, braids_home: Option<&str>) -> Paths {
        let braids_dir = home.join(".openclaw/braids");
        let workspace = home.join(".openclaw/workspace");
        let default_home = home.join("Projects");
        let mut p = Paths {
            home,
            braids_dir,
            braids_home: default_home,
            workspace,
        };
        if let Some(raw) = braids_home {
            p.braids_home = p.expand(raw);
        }
        p
    }

    pub fn registry(&self) -> PathBuf {
        self.braids_dir.join("registry.md")
    }
    pub fn state(&self) -> PathBuf {
        self.braids_dir.join(".orchestrator-state.json")
    }
    pub fn status(&self) -> PathBuf {
        self.braids_dir.join("STATUS.md")
    }
    pub fn config(&self) -> PathBuf {
        self.braids_dir.join("config.toml")
    }
    pub fn lock(&self) -> PathBuf {
        self.braids_dir.join(".tick.lock")
    }
    pub fn logs_dir(&self) -> PathBuf {
        self.braids_dir.join("logs")
    }
    /// Where the workers' output of one project goes: `<bead>-<start>.log` per session start.
    pub fn session_logs(&self, slug: &str) -> PathBuf {
        self.logs_dir().join("sessions").join(slug)
    }
    /// Where the agents' git worktrees live: outside every project and outside the agent
    /// workspace (4.1).
    pub fn workspaces_dir(&self) -> PathBuf {
        self.braids_dir.join("workspaces")
    }

    /// Where a worker keeps a bead's prompt and marks: outside the project, never committed.
    pub fn work_dir(&self, slug: &str, bead: &crate::model::BeadId) -> PathBuf {
        self.braids_dir.join("work").join(slug).join(bead.as_str())
    }

    /// Touched by a worker whenever its agent prints something or changes a file in its
    /// workspace: the tick's stall detection reads its mtime.
    pub fn activity(&self, slug: &str, bead: &crate::model::BeadId) -> PathBuf {
        self.work_dir(slug, bead).join("activity")
    }

    /// Present while the bead's worker is in its fixed steps (after the agent: close, commit,
    /// push): the tick then never stops it for its bead being closed.
    pub fn finishing(&self, slug: &str, bead: &crate::model::BeadId) -> PathBuf {
        self.work_dir(slug, bead).join("finishing")
    }

    /// The landing the worker would have made of work it kept for a person: what `braids
    /// approve` lands.
    pub fn held_landing(&self, slug: &str, bead: &crate::model::BeadId) -> PathBuf {
        self.work_dir(slug, bead).join("held.json")
    }

    /// The landing a worker is about to make, written just before it closes the bead and
    /// removed once the work landed: a worker killed in between leaves it for the tick.
    pub fn landing_plan(&self, slug: &str, bead: &crate::model::BeadId) -> PathBuf {
        self.work_dir(slug, bead).join("landing.json")
    }

    /// The pull request a bead's work was opened as, while the bead is in review (the
    /// record `review_records.rs` keeps).
    pub fn review(&self, slug: &str, bead: &crate::model::BeadId) -> PathBuf {
        self.work_dir(slug, bead).join("review.json")
    }

    /// What the forge last answered for a bead's pull request (its conditional cache): the
    /// tick's next look asks only what changed since.
    pub fn review_cache(&self, slug: &str, bead: &crate::model::BeadId) -> PathBuf {
        self.work_dir(slug, bead).join("review-cache.json")
    }

    /// Marks that an ask-first plan was posted for a bead: on a later run its presence means a
    /// person unblocked the bead, which is the approval (3.11). `braids reject` removes it.
    pub fn approval_marker(&self, slug: &str, bead: &crate::model::BeadId) -> PathBuf {
        self.work_dir(slug, bead).join("asked")
    }

    pub fn sessions_dir(&self) -> PathBuf {
        self.braids_dir.join("sessions")
    }
    pub fn workspace_agents(&self) -> PathBuf {
        self.workspace.join("AGENTS.md")
    }

    /// Expands `~`, `~/…`, `$HOME`, `$BRAIDS_HOME` and `${…}` forms; a relative result is taken
    /// relative to BRAIDS_HOME. Other `$VARS` are left as written: a registry is not a shell.
    pub fn expand(&self, raw: &str) -> PathBuf {
        let raw = raw.trim();
        let home = self.home.to_string_lossy();
        let bh = self.braids_home.to_string_lossy();
        let mut s = if raw == "~" {
            home.to_string()
        } else if let Some(rest) = raw.strip_prefix("~/") {
            format!("{home}/{rest}")
        } else {
            raw.to_string()
        };
        for (var, val) in [
            ("${BRAIDS_HOME}", &*bh),
            ("$BRAIDS_HOME", &*bh),
            ("${HOME}", &*home),
            ("$HOME", &*home),
        ] {
            s = s.replace(var, val);
        }
        let p = PathBuf::from(s);
        if p.is_absolute() {
            normalize(&p)
        } else {
            normalize(&self.braids_home.join(p))
        }
    }

    /// Whether `p` is inside the agent workspace, where project files must never go (4.1).
    pub fn in_workspace(&self, p: &Path) -> bool {
        normalize(p).starts_with(normalize(&self.workspace))
    }
}

/// Removes `.` and resolves `..` lexically, so `~/.openclaw/braids/../workspace/x` is caught.
pub fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths() -> Paths {
        Paths::new("/home/u".into(), None)
    }

    #[test]
    fn c4_2_layout_and_default_braids_home() {
        let p = paths();
        assert_eq!(p.braids_home, PathBuf::from("/home/u/Projects"));
        assert_eq!(
            p.registry(),
            PathBuf::from("/home/u/.openclaw/braids/registry.md")
        );
        assert_eq!(
            p.state(),
            PathBuf::from("/home/u/.openclaw/braids/.orchestrator-state.json")
        );
        assert_eq!(
            p.status(),
            PathBuf::from("/home/u/.openclaw/braids/STATUS.md")
        );
        assert!(!p.registry().starts_with(&p.braids_home));
        let custom = Paths::new("/home/u".into(), Some("~/code"));
        assert_eq!(custom.braids_home, PathBuf::from("/home/u/code"));
    }

    #[test]
    fn c4_1_tilde_is_home() {
        let p = paths();
        assert_eq!(p.expand("~"), PathBuf::from("/home/u"));
        assert_eq!(
            p.expand("~/Projects/a"),
            PathBuf::from("/home/u/Projects/a")
        );
        assert_eq!(
            p.expand("$BRAIDS_HOME/a"),
            PathBuf::from("/home/u/Projects/a")
        );
        assert_eq!(
            p.expand("${BRAIDS_HOME}/a"),
            PathBuf::from("/home/u/Projects/a")
        );
        assert_eq!(p.expand("$HOME/x"), PathBuf::from("/home/u/x"));
        assert_eq!(p.expand("app"), PathBuf::from("/home/u/Projects/app"));
        assert_eq!(p.expand("/srv/app/"), PathBuf::from("/srv/app"));
        assert_eq!(
            p.expand("$(rm -rf /)"),
            PathBuf::from("/home/u/Projects/$(rm -rf /)")
        );
    }

    #[test]
    fn c4_1_workspace_detection() {
        let p = paths();
        assert!(p.in_workspace(Path::new("/home/u/.openclaw/workspace/app")));
        assert!(p.in_workspace(Path::new("/home/u/.openclaw/braids/../workspace/app")));
        assert!(!p.in_workspace(Path::new("/home/u/Projects/app")));
        assert!(!p.in_workspace(Path::new("/home/u/.openclaw/workspace2")));
    }
}

#[cfg(test)]
mod private_tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn braids_folder_is_made_private_once() {
        let tmp = tempfile::tempdir().unwrap();
        let p = Paths::new(tmp.path().to_path_buf(), None);
        std::fs::create_dir_all(p.braids_dir.join("logs")).unwrap();
        std::fs::write(p.config(), "[notify]\nwebhook = \"https://secret\"\n").unwrap();
        for (f, m) in [(&p.braids_dir, 0o755), (&p.config(), 0o644)] {
            std::fs::set_permissions(f, std::fs::Permissions::from_mode(m)).unwrap();
        }
        let once = p.make_private().unwrap();
        assert_eq!(once.len(), 3, "{once:?}");
        assert_eq!(mode(&p.braids_dir), 0o700);
        assert_eq!(mode(&p.braids_dir.join("logs")), 0o700);
        assert_eq!(mode(&p.config()), 0o600);
        assert!(p.make_private().unwrap().is_empty(), "said once");
    }
}
