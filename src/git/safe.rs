//! What every git braids runs is told through its environment, so nothing a repository's
//! configuration or a workspace's git files say can steer it: settings that name a program
//! are overridden (`GIT_CONFIG_COUNT`/`GIT_CONFIG_KEY_n`/`GIT_CONFIG_VALUE_n` beat every config
//! file; a remote's upload and receive programs, which add up instead, by the command line's
//! options), and in a worktree braids created, git is pinned to the admin folder braids recorded
//! when it made the worktree (`GIT_DIR`, `GIT_COMMON_DIR`, `GIT_WORK_TREE`), never to what the
//! worktree's `.git` file or the admin folder's `commondir` say now.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

/// The settings braids overrides: no hooks, no fsmonitor, no `ext::` transport, and no
/// local-path transport unless the person's own remotes or submodules use one (`local`).
pub fn overrides(local: bool) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = [
        ("core.hooksPath", "/dev/null"),
        ("core.fsmonitor", "false"),
        ("protocol.ext.allow", "never"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    if !local {
        out.push(("protocol.file.allow".into(), "never".into()));
    }
    out
}

/// `args` with git's own program named for the other side of a fetch or push: a remote's
/// `uploadpack`/`receivepack` setting adds to what the environment says rather than giving
/// way to it, and only the command line's option beats it.
pub fn with_stock_programs<'a>(args: &[&'a str]) -> Vec<&'a str> {
    let mut out: Vec<&str> = args.to_vec();
    let flag = match args.first() {
        Some(&"push") => "--receive-pack=git-receive-pack",
        Some(&"fetch" | &"pull" | &"ls-remote") => "--upload-pack=git-upload-pack",
        _ => return out,
    };
    out.insert(1, flag);
    out
}

/// Whether a remote URL is a path on this machine (git's rule: no `scheme://`, and no `:`
/// before the first `/`, which would make it `host:path`).
pub fn is_local_url(url: &str) -> bool {
    if let Some((scheme, _)) = url.split_once("://") {
        return scheme.eq_ignore_ascii_case("file");
    }
    match (url.find(':'), url.find('/')) {
        (None, _) => true,
        (Some(c), Some(s)) => s < c,
        (Some(_), None) => false,
    }
}

/// The environment for a git braids runs in `dir`: the [`Pin`] of a worktree braids made, and
/// the [`overrides`] for the repository git will use there.
pub fn env_for(dir: &Path) -> Vec<(String, String)> {
    let mut env = Vec::new();
    let pin = Pin::read(dir);
    let common = match &pin {
        Some(p) => {
            env.push(("GIT_DIR".into(), p.admin.to_string_lossy().into_owned()));
            env.push((
                "GIT_COMMON_DIR".into(),
                p.common.to_string_lossy().into_owned(),
            ));
            env.push(("GIT_WORK_TREE".into(), dir.to_string_lossy().into_owned()));
            Some(p.common.clone())
        }
        None => git2::Repository::open(dir)
            .ok()
            .map(|r| r.commondir().to_path_buf()),
    };
    // Outside any repository (a clone braids makes) there is no remote of the person's to
    // judge by, and git's own default stands.
    let local = common.as_deref().is_none_or(local_remote);
    let pairs = overrides(local);
    // Counted on top of any a caller's environment already carries.
    let base: usize = std::env::var("GIT_CONFIG_COUNT")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    for (i, (k, v)) in pairs.iter().enumerate() {
        env.push((format!("GIT_CONFIG_KEY_{}", base + i), k.clone()));
        env.push((format!("GIT_CONFIG_VALUE_{}", base + i), v.clone()));
    }
    env.push(("GIT_CONFIG_COUNT".into(), (base + pairs.len()).to_string()));
    env
}

/// Whether a remote or submodule of the repository whose shared folder is `common` is a path
/// on this machine.
fn local_remote(common: &Path) -> bool {
    let Ok(config) = git2::Config::open(&common.join("config")) else {
        return false;
    };
    let Ok(mut entries) = config.entries(Some(r"^(remote|submodule)\..*\.url$")) else {
        return false;
    };
    let mut local = false;
    while let Some(Ok(e)) = entries.next() {
        local |= is_local_url(e.value().unwrap_or_default());
    }
    local
}

/// What git wrote for a worktree braids made, recorded beside it when braids made it (out of
/// the agent's reach when it is sandboxed): the admin folder, the repository's shared folder,
/// and the contents of the admin files that say where the worktree's git lives and what it
/// has checked out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pin {
    pub admin: PathBuf,
    pub common: PathBuf,
    /// `refs/heads/braids/<bead>`: what `HEAD` must say.
    pub branch: String,
    pub commondir: String,
    pub gitdir: String,
}

impl Pin {
    /// Where the pin of the worktree at `dir` is kept.
    pub fn path_of(dir: &Path) -> PathBuf {
        let name = dir.file_name().unwrap_or_default().to_string_lossy();
        dir.with_file_name(format!(".{name}.git-admin"))
    }

    /// The pin of the worktree at `dir`; `None` when braids recorded none, or `dir` holds a
    /// repository of its own (a project is never pinned).
    pub fn read(dir: &Path) -> Option<Pin> {
        if std::fs::symlink_metadata(dir.join(".git")).is_ok_and(|m| m.is_dir()) {
            return None;
        }
        let bytes = std::fs::read(Self::path_of(dir)).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// Records the worktree at `dir`, just made by braids on `branch` in the repository whose
    /// shared folder is `common`.
    pub fn record(dir: &Path, common: &Path, branch: &str) -> Result<Pin> {
        let gitfile = std::fs::read_to_string(dir.join(".git"))
            .with_context(|| format!("cannot read {}", dir.join(".git").display()))?;
        let admin = gitfile
            .trim()
            .strip_prefix("gitdir:")
            .map(|s| PathBuf::from(s.trim()))
            .with_context(|| format!("{} names no repository", dir.join(".git").display()))?;
        let read = |f: &str| std::fs::read_to_string(admin.join(f)).unwrap_or_default();
        let pin = Pin {
            common: common.to_path_buf(),
            branch: format!("refs/heads/{branch}"),
            commondir: read("commondir"),
            gitdir: read("gitdir"),
            admin,
        };
        crate::system::atomic::write(&Self::path_of(dir), &serde_json::to_vec(&pin)?)?;
        Ok(pin)
    }

    /// The worktree at `dir` now on `branch`, which braids moved it to (its work kept).
    pub fn rebranch(dir: &Path, branch: &str) -> Result<()> {
        let Some(mut pin) = Self::read(dir) else {
            return Ok(());
        };
        pin.branch = format!("refs/heads/{branch}");
        crate::system::atomic::write(&Self::path_of(dir), &serde_json::to_vec(&pin)?)
    }

    /// Forgets the pin of the worktree at `dir` (removed, or moved into a pool).
    pub fn forget(dir: &Path) {
        let _ = std::fs::remove_file(Self::path_of(dir));
    }

    /// What braids wrote in each admin file, by name: what [`Pin::drift`] compares with.
    pub fn expected(&self) -> [(&'static str, String); 3] {
        [
            ("HEAD", format!("ref: {}", self.branch)),
            ("commondir", self.commondir.trim().to_string()),
            ("gitdir", self.gitdir.trim().to_string()),
        ]
    }

    /// The admin files that differ from what braids recorded, as (file, recorded, now).
    pub fn drift(&self) -> Vec<(String, String, String)> {
        self.expected()
            .into_iter()
            .filter_map(|(f, want)| {
                let path = self.admin.join(f);
                // A rebase cut short detaches HEAD and names the branch it works on.
                if f == "HEAD" && self.rebasing() {
                    return None;
                }
                let now = match std::fs::symlink_metadata(&path) {
                    Ok(m) if m.is_file() => std::fs::read_to_string(&path)
                        .map(|s| s.trim().to_string())
                        .unwrap_or_else(|_| "(unreadable)".into()),
                    Ok(_) => "(not a file)".into(),
                    Err(_) => "(missing)".into(),
                };
                (now != want).then(|| (f.to_string(), want, now))
            })
            .collect()
    }

    /// Whether a rebase of the pinned branch is in progress with HEAD detached, as git leaves
    /// it (`rebase-merge/head-name` or `rebase-apply/head-name` naming the branch).
    fn rebasing(&self) -> bool {
        let head = std::fs::read_to_string(self.admin.join("HEAD")).unwrap_or_default();
        let detached =
            head.trim().len() >= 40 && head.trim().bytes().all(|b| b.is_ascii_hexdigit());
        detached
            && ["rebase-merge", "rebase-apply"].iter().any(|d| {
                std::fs::read_to_string(self.admin.join(d).join("head-name"))
                    .is_ok_and(|n| n.trim() == self.branch)
            })
    }

    /// Writes the admin files back as braids recorded them; an error when the admin folder is
    /// not a plain folder any more (a link would send the writes elsewhere).
    pub fn restore(&self) -> Result<()> {
        let meta = std::fs::symlink_metadata(&self.admin)?;
        anyhow::ensure!(
            meta.is_dir(),
            "{} is not the folder git made",
            self.admin.display()
        );
        for (f, want) in self.expected() {
            crate::system::atomic::write(&self.admin.join(f), format!("{want}\n").as_bytes())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_setting_that_names_a_program_is_overridden() {
        let set = overrides(false);
        let get = |k: &str| set.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("core.hooksPath"), Some("/dev/null"));
        assert_eq!(get("core.fsmonitor"), Some("false"));
        assert_eq!(get("protocol.ext.allow"), Some("never"));
        assert_eq!(get("protocol.file.allow"), Some("never"));
        assert!(overrides(true)
            .iter()
            .all(|(k, _)| k != "protocol.file.allow"));
        assert_eq!(
            with_stock_programs(&["push", "--quiet", "origin"]),
            [
                "push",
                "--receive-pack=git-receive-pack",
                "--quiet",
                "origin"
            ]
        );
        assert_eq!(
            with_stock_programs(&["fetch", "origin"])[1],
            "--upload-pack=git-upload-pack"
        );
        assert_eq!(with_stock_programs(&["status"]), ["status"]);
    }

    #[test]
    fn local_remotes_are_told_from_network_ones() {
        for url in [
            "/srv/up.git",
            "../up.git",
            "up.git",
            "file:///srv/up.git",
            "./a:b",
        ] {
            assert!(is_local_url(url), "{url}");
        }
        for url in [
            "git@github.com:o/r.git",
            "https://github.com/o/r",
            "ssh://host/r",
            "ext::sh -c evil",
            "host:r",
        ] {
            assert!(!is_local_url(url), "{url}");
        }
    }

    #[test]
    fn the_environment_counts_every_override() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = git2::Repository::init(tmp.path()).unwrap();
        repo.remote("origin", "/srv/up.git").unwrap();
        let env = env_for(tmp.path());
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        let n: usize = get("GIT_CONFIG_COUNT").unwrap().parse().unwrap();
        let keys: Vec<String> = (0..n)
            .filter_map(|i| get(&format!("GIT_CONFIG_KEY_{i}")))
            .collect();
        assert_eq!(keys.len(), n);
        assert!(keys.contains(&"protocol.ext.allow".to_string()));
        assert!(
            !keys.contains(&"protocol.file.allow".to_string()),
            "a local remote"
        );
        assert!(get("GIT_DIR").is_none(), "a project is never pinned");
    }
}
