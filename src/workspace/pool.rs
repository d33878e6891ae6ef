//! A project's pool of finished workspaces, so the next bead starts in a checkout that is
//! already there, with its build caches warm.
//!
//! A worktree whose bead ended goes back to the pool (`<project folder>/.pool/<name>`) once
//! it is scrubbed to the project branch's tip: every change, staged or not, every untracked
//! and ignored file but the build caches `keep` names, the stash entries made on its branch
//! and its branch are gone, and `git status` says so. The next bead takes it with one
//! `git worktree move` under the bookkeeping lock and a checkout of the new base, which only
//! rewrites the files that changed. A worktree that cannot be shown clean (a rebase cut short,
//! a gitfile pointing elsewhere, the repository's configuration changed under its agent,
//! submodules git will not move) is removed instead; so is one a crashed worker left, which
//! the sweep handles as before and never pools.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Result;
use serde::{Deserialize, Serialize};

use super::scrub::{disk_usage, drop_stashes, flagged, process_in, set_sparse};
use super::worktree::bookkeeping;
use super::{guard, GitWorktrees, Workspace};
use crate::git::{git, git_ok};

/// The pool's folder under a project's workspaces folder. Not a bead id (it starts with a
/// dot), so the sweep never takes it for a bead's worktree.
pub(super) const POOL: &str = ".pool";

/// What a project's workspaces keep and get, from `[workspace]` in config.toml and the
/// project's PROJECT.md.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pooling {
    /// The most finished workspaces kept for reuse; 0 removes each one when its bead ends.
    pub size: usize,
    /// The ignored build caches a reused workspace keeps.
    pub keep: Keep,
    /// Untracked files of the project copied into each workspace (gitignore syntax), besides
    /// those the project's `.worktreeinclude` names.
    pub copy: Vec<String>,
    /// The argv run in each new workspace before its first agent.
    pub setup: Vec<String>,
    pub setup_timeout: Duration,
    /// Run `setup` in a reused workspace too.
    pub setup_on_reuse: bool,
    /// Only these paths are checked out (gitignore-style patterns); empty for all.
    pub sparse: Vec<String>,
    /// How long a pooled workspace may wait unused before the sweep removes it.
    pub idle_max: Duration,
}

impl Default for Pooling {
    fn default() -> Self {
        Pooling {
            size: 0,
            keep: Keep::default(),
            copy: Vec::new(),
            setup: Vec::new(),
            setup_timeout: Duration::from_secs(10 * 60),
            setup_on_reuse: false,
            sparse: Vec::new(),
            idle_max: Duration::from_secs(24 * 3600),
        }
    }
}

/// Which ignored files a reused workspace keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Keep {
    /// Every ignored path (`keep = "ignored"`).
    Ignored,
    /// These (gitignore syntax).
    Paths(Vec<String>),
}

/// The build directories of the usual toolchains.
pub const KEEP_DEFAULT: &[&str] = &[
    "target/",
    "node_modules/",
    ".venv/",
    "build/",
    "dist/",
    ".gradle/",
];

impl Default for Keep {
    fn default() -> Self {
        Keep::Paths(KEEP_DEFAULT.iter().map(|s| s.to_string()).collect())
    }
}

/// What the pool knows of a member: when it came back, how big it is, and the setup that ran
/// in it (a reused workspace runs a changed setup again).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    pub since: Option<chrono::DateTime<chrono::Utc>>,
    pub bytes: u64,
    pub setup: Option<Vec<String>>,
    /// The sparse checkout it has (empty: everything).
    #[serde(default)]
    pub sparse: Vec<String>,
    /// Its own settings when it came back ([`guard::worktree_own`]): a change while it waited
    /// (a process its last agent left) and it is not reused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub own: Option<String>,
}

/// A pooled workspace, as `status` and `sessions --json` show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Member {
    pub name: String,
    pub path: PathBuf,
    #[serde(flatten)]
    pub record: Record,
}

/// A project's pool as views show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PoolSeen {
    /// The most it keeps, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cap: Option<usize>,
    /// Bytes on disk of all members, as measured when each came back.
    pub bytes: u64,
    pub members: Vec<Member>,
}

impl PoolSeen {
    /// `2 of 4 pooled workspaces, 1.2 GB: w1a2b3c4d (idle 3m), …`
    pub fn line(&self, now: chrono::DateTime<chrono::Utc>) -> String {
        let of = self.cap.map(|c| format!(" of {c}")).unwrap_or_default();
        let members: Vec<String> = self
            .members
            .iter()
            .map(|m| {
                let idle = m
                    .record
                    .since
                    .map(|t| {
                        let s = (now - t).num_seconds().max(0) as u64;
                        format!(" (idle {})", crate::system::templates::elapsed(s))
                    })
                    .unwrap_or_default();
                format!("{}{idle}", super::ready::workspace_id(&m.path))
            })
            .collect();
        format!(
            "{}{of} pooled workspace(s), {}: {}",
            self.members.len(),
            human_bytes(self.bytes),
            members.join(", ")
        )
    }
}

/// `1.2 GB`, `340 MB`, `12 KB`.
pub fn human_bytes(b: u64) -> String {
    const UNITS: &[&str] = &["B", "KB", "MB", "GB", "TB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1000.0 && u + 1 < UNITS.len() {
        v /= 1000.0;
        u += 1;
    }
    match u {
        0 => format!("{b} B"),
        _ => format!("{v:.1} {}", UNITS[u]),
    }
}

fn record_path(pool: &Path, name: &str) -> PathBuf {
    pool.join(format!(".{name}.json"))
}

/// Where braids keeps what it knows of the worktree at `dir` (a bead's, or a pool member):
/// beside it, out of its agent's reach.
pub(super) fn record_of(dir: &Path) -> PathBuf {
    let name = dir.file_name().unwrap_or_default().to_string_lossy();
    record_path(dir.parent().unwrap_or(Path::new(".")), &name)
}

impl Record {
    pub(super) fn read(dir: &Path) -> Record {
        std::fs::read(record_of(dir))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default()
    }

    pub(super) fn write(&self, dir: &Path) -> Result<()> {
        crate::system::atomic::write(&record_of(dir), &serde_json::to_vec_pretty(self)?)
    }
}

/// The pool's members, the most recently returned first (its caches are the warmest).
pub fn members(pool: &Path) -> Vec<Member> {
    let Ok(entries) = std::fs::read_dir(pool) else {
        return Vec::new();
    };
    let mut out: Vec<Member> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| {
            let path = e.path();
            Member {
                name: e.file_name().to_string_lossy().into_owned(),
                record: Record::read(&path),
                path,
            }
        })
        .collect();
    out.sort_by_key(|m| std::cmp::Reverse(m.record.since));
    out
}

/// How a worktree left its bead.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub enum Retired {
    /// Scrubbed and back in the pool.
    Pooled,
    /// Gone; `why` when it could have been pooled and was not.
    Removed { why: Option<String> },
}

/// Paths git's admin folder holds while an operation is cut short: a worktree with one is
/// not shown clean by a status, so it is never pooled.
const IN_PROGRESS: &[&str] = &[
    "rebase-merge",
    "rebase-apply",
    "MERGE_HEAD",
    "CHERRY_PICK_HEAD",
    "REVERT_HEAD",
    "BISECT_LOG",
    "sequencer",
];

impl GitWorktrees {
    /// The project's pool folder.
    pub fn pool_dir(&self, project: &Path) -> PathBuf {
        self.project_dir(project).join(POOL)
    }

    /// The project's pool, `None` when it holds nothing; `cap` as the project's settings say.
    pub fn pool_seen(&self, project: &Path, cap: Option<usize>) -> Option<PoolSeen> {
        let members = members(&self.pool_dir(project));
        (!members.is_empty()).then(|| PoolSeen {
            cap,
            bytes: members.iter().map(|m| m.record.bytes).sum(),
            members,
        })
    }

    /// A pool member moved to `dir` (under the bookkeeping lock: a rename and git's records),
    /// with what the pool knew of it; `None` when the pool is empty. A member git will not
    /// move is removed and the next one tried.
    pub(super) fn take(&self, project: &Path, dir: &Path) -> Result<Option<Record>> {
        let pool = self.pool_dir(project);
        if self.pooling.size == 0 || !pool.is_dir() {
            return Ok(None);
        }
        let _books = bookkeeping(project)?;
        // A worktree a crashed worker left for this bead makes way, as for a new one.
        GitWorktrees::discard_held(project, dir)?;
        for m in members(&pool) {
            let record = m.record.clone();
            let _ = std::fs::remove_file(record_of(&m.path));
            let own = guard::worktree_own(&m.path).ok();
            let untouched = record.own.as_deref().map(str::as_bytes) == own.as_deref();
            let (from, to) = (m.path.to_string_lossy(), dir.to_string_lossy());
            if untouched && guard::foreign_gitfile(project, &m.path)?.is_none() {
                let moved = git(project, &["worktree", "move", &from, &to])?;
                if moved.success() {
                    return Ok(Some(record));
                }
                tracing::warn!(
                    "the pooled workspace {from} could not be moved, so it is removed: {}",
                    moved.stderr.trim()
                );
            } else {
                tracing::warn!(
                    "the pooled workspace {from} changed while it waited, so it is removed"
                );
            }
            GitWorktrees::discard_held(project, &m.path)?;
        }
        Ok(None)
    }

    /// A pooled worktree moved to `dir` and checked out on a fresh `branch` at `at`: only the
    /// files that differ are written. `false` when the pool had none that could be.
    pub(super) fn take_from_pool(
        &self,
        project: &Path,
        dir: &Path,
        branch: &str,
        at: &str,
    ) -> Result<bool> {
        let Some(mut record) = self.take(project, dir)? else {
            return Ok(false);
        };
        let fresh = guard::foreign_gitfile(project, dir)?.is_none()
            && (record.sparse == self.pooling.sparse
                || set_sparse(dir, &self.pooling.sparse).is_ok())
            && git(dir, &["checkout", "--quiet", "--force", "-B", branch, at])?.success();
        record.sparse = self.pooling.sparse.clone();
        // What the agent gets is exactly the base: checked again, since a pooled worktree
        // waited where braids does not watch it.
        let left = match fresh {
            true => git_ok(dir, &["status", "--porcelain=v1", "--untracked-files=all"])?,
            false => String::new(),
        };
        if !fresh || !left.trim().is_empty() {
            tracing::warn!(
                "the pooled workspace {} could not be checked out clean, so it is removed{}",
                dir.display(),
                left.lines()
                    .next()
                    .map(|l| format!(" ({l})"))
                    .unwrap_or_default()
            );
            GitWorktrees::discard(project, dir)?;
            return Ok(false);
        }
        record.write(dir)?;
        Ok(true)
    }

    /// Scrubs the finished worktree `ws` and puts it in the pool, or says why not (the caller
    /// removes it then). Never for a crashed worker's worktree: that is the sweep's.
    pub(super) fn give_back(&self, ws: &Workspace, setup: Option<Vec<String>>) -> Result<Retired> {
        let removed = |why: &str| {
            Ok(Retired::Removed {
                why: Some(why.to_string()),
            })
        };
        let (Some(branch), Some(base)) = (&ws.branch, &ws.base) else {
            return removed("a shared workspace is not pooled");
        };
        if self.pooling.size == 0 {
            return Ok(Retired::Removed { why: None });
        }
        if let Some(held) = guard::before_git(ws)? {
            let why = held.refusal().map(|r| r.why).unwrap_or_default();
            return removed(&why);
        }
        if ws.dir.join(".gitmodules").exists() {
            return removed("a worktree with submodules is not pooled (git does not move one)");
        }
        let admin = guard::admin_of(&ws.dir)?;
        if let Some(left) = IN_PROGRESS.iter().find(|p| admin.join(p).exists()) {
            return removed(&format!("it holds {left}, an operation cut short"));
        }
        if std::fs::read_dir(admin.join("refs")).is_ok_and(|mut d| d.next().is_some()) {
            return removed("it holds refs of its own");
        }
        if let Some(pid) = process_in(&ws.dir) {
            return removed(&format!("process {pid} still works in it"));
        }
        self.scrub(&ws.dir, base)?;
        if let Some(why) = flagged(&ws.dir, !self.pooling.sparse.is_empty())? {
            return removed(&why);
        }
        {
            let _books = bookkeeping(&ws.project)?;
            drop_stashes(&ws.dir, branch)?;
        }
        let left = git_ok(
            &ws.dir,
            &["status", "--porcelain=v1", "--untracked-files=all"],
        )?;
        if !left.trim().is_empty() {
            return removed(&format!(
                "it could not be scrubbed clean: {}",
                left.lines().next().unwrap_or_default()
            ));
        }
        let _ = git(&ws.project, &["branch", "--quiet", "-D", branch]);
        let bytes = disk_usage(&ws.dir);
        let pool = self.pool_dir(&ws.project);
        let _books = bookkeeping(&ws.project)?;
        if members(&pool).len() >= self.pooling.size {
            return removed("the pool is full");
        }
        std::fs::create_dir_all(&pool)?;
        let name = admin.file_name().unwrap_or_default().to_string_lossy();
        let to = pool.join(name.as_ref());
        if std::fs::symlink_metadata(&to).is_ok() {
            return removed(&format!("{} is taken", to.display()));
        }
        let (from, shown) = (ws.dir.to_string_lossy(), to.to_string_lossy());
        git_ok(&ws.project, &["worktree", "move", &from, &shown])?;
        let _ = std::fs::remove_file(guard::baseline_of(&ws.dir));
        crate::git::safe::Pin::forget(&ws.dir);
        let _ = std::fs::remove_file(super::ready::copied_of(&ws.dir));
        let _ = std::fs::remove_file(record_of(&ws.dir));
        Record {
            since: Some(chrono::Utc::now()),
            bytes,
            setup,
            sparse: self.pooling.sparse.clone(),
            own: Some(String::from_utf8_lossy(&guard::worktree_own(&to)?).into_owned()),
        }
        .write(&to)?;
        Ok(Retired::Pooled)
    }

    /// The worktree at `dir` as `base`'s tip, detached: nothing of its last bead but the kept
    /// build caches.
    fn scrub(&self, dir: &Path, base: &str) -> Result<()> {
        git_ok(dir, &["checkout", "--quiet", "--force", "--detach", base])?;
        let mut clean: Vec<String> = ["clean", "-ffdq"].map(String::from).to_vec();
        if let Keep::Paths(keep) = &self.pooling.keep {
            clean.push("-x".into());
            clean.extend(keep.iter().map(|k| format!("--exclude={k}")));
        }
        let args: Vec<&str> = clean.iter().map(String::as_str).collect();
        git_ok(dir, &args)?;
        // A kept cache the agent replaced by a link would have the next build write through it.
        if let Keep::Paths(keep) = &self.pooling.keep {
            for k in keep {
                let p = dir.join(k.trim_matches('/'));
                if std::fs::symlink_metadata(&p).is_ok_and(|m| m.file_type().is_symlink()) {
                    std::fs::remove_file(&p)?;
                }
            }
        }
        Ok(())
    }

    /// Removes the project's pooled workspaces unused for longer than `idle_max`, or all of
    /// them with `all` (the project moved to `Workspace: shared`). Returns how many.
    pub(super) fn prune_pool(&self, project: &Path, all: bool) -> Result<usize> {
        let pool = self.pool_dir(project);
        if !pool.is_dir() {
            return Ok(0);
        }
        let now = chrono::Utc::now();
        let idle =
            chrono::Duration::from_std(self.pooling.idle_max).unwrap_or(chrono::Duration::MAX);
        let _books = bookkeeping(project)?;
        let mut n = 0;
        for m in members(&pool) {
            let stale = m.record.since.is_none_or(|t| now - t > idle);
            if all || stale {
                GitWorktrees::discard_held(project, &m.path)?;
                let _ = std::fs::remove_file(record_of(&m.path));
                n += 1;
            }
        }
        // Gone when empty (`remove_dir` refuses otherwise).
        let _ = std::fs::remove_dir(&pool);
        Ok(n)
    }
}

/// The pools under a braids home's workspaces folder whose project is not among `projects`
/// (unregistered, or its directory gone): each project folder names its project in
/// `.project`.
pub fn orphaned_pools(root: &Path, projects: &[PathBuf]) -> Vec<(PathBuf, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| e.path().join(POOL).is_dir())
        .filter_map(|e| {
            let project = std::fs::read_to_string(e.path().join(PROJECT_FILE)).ok()?;
            let project = PathBuf::from(project.trim());
            (!projects.contains(&project)).then(|| (e.path(), project))
        })
        .collect()
}

/// The file in a project's workspaces folder naming the project it belongs to.
pub(super) const PROJECT_FILE: &str = ".project";

impl GitWorktrees {
    /// Removes the pools of projects no longer among `projects` (see [`orphaned_pools`]):
    /// nothing runs in them, so their members are idle by definition. Returns how many went.
    pub fn sweep_orphans(&self, projects: &[PathBuf]) -> usize {
        let mut n = 0;
        for (folder, project) in orphaned_pools(&self.root, projects) {
            let pool = folder.join(POOL);
            let books = match project.join(".git").exists() {
                true => match bookkeeping(&project) {
                    Ok(b) => Some(b),
                    Err(e) => {
                        tracing::warn!("cannot remove the pool {}: {e:#}", pool.display());
                        continue;
                    }
                },
                false => None,
            };
            let gone = members(&pool);
            if books.is_some() {
                for m in &gone {
                    if let Err(e) = GitWorktrees::discard_held(&project, &m.path) {
                        tracing::warn!(
                            "cannot remove the pooled workspace {}: {e:#}",
                            m.path.display()
                        );
                    }
                }
            }
            match std::fs::remove_dir_all(&pool) {
                Ok(()) => n += gone.len(),
                Err(e) => tracing::warn!("cannot remove {}: {e}", pool.display()),
            }
        }
        n
    }
}

#[cfg(test)]
#[path = "pool_tests.rs"]
mod tests;
