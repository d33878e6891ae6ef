//! Workspaces as git worktrees, driven through the `git` program from argv (never a shell).
//!
//! git2 could add a worktree, but rebasing, `merge --ff-only`'s refusal to overwrite local
//! changes, and worktree pruning are exactly the behaviour people know from `git`, hooks and
//! config included; reimplementing them would be a second, subtly different git.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};

use super::{guard, Landing, Prepared, Swept, Workspace, Workspaces};
use crate::git::{git, git_ok, RepoLock, GIT_TIMEOUT};
use crate::model::BeadId;
use crate::system::proc::Invocation;

/// Worktrees under one directory (`<braids dir>/workspaces`), one folder per project.
#[derive(Debug, Clone)]
pub struct GitWorktrees {
    pub root: PathBuf,
    /// The agents' sandbox, which the repository's commit hooks run in too (see
    /// [`super::hooks::commit`]).
    pub sandbox: crate::system::sandbox::Settings,
    /// The project's pool and what its workspaces get (see [`super::pool`]); the default
    /// pools nothing.
    pub pooling: super::pool::Pooling,
}

fn lines(s: &str) -> Vec<String> {
    s.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect()
}

#[path = "held.rs"]
mod held;
#[path = "staging.rs"]
mod staging;
pub use held::{all_kept, held_diff, kept_branches, HeldDiff};
use staging::tracker_paths;
pub(super) use staging::{commit_staged, stage};

pub fn branch_for(bead: &BeadId) -> String {
    format!("braids/{bead}")
}

impl GitWorktrees {
    /// The bead's worktree as an earlier worker left it, when it is still there on the bead's
    /// branch: a protocol story walks its steps over several sessions in one workspace.
    /// `None` when there is none to reuse (the caller creates one).
    pub fn reuse(&self, project: &Path, bead: &BeadId) -> Result<Option<Workspace>> {
        let dir = self.dir_for(project, bead);
        let branch = branch_for(bead);
        if !dir.join(".git").exists() {
            return Ok(None);
        }
        let head = git(&dir, &["symbolic-ref", "--quiet", "--short", "HEAD"])?;
        if !head.success() || head.stdout.trim() != branch {
            return Ok(None);
        }
        Ok(Some(Workspace {
            onto: None,
            project: project.to_path_buf(),
            git_config: Some(guard::baseline(project, &dir)?),
            dir,
            branch: Some(branch),
            base: Some(super::base_branch(project)?),
            approved: false,
        }))
    }

    /// The folder of one project's worktrees: its directory name plus a hash of its path, so
    /// two projects called `app` never share one and a renamed slug changes nothing.
    pub fn project_dir(&self, project: &Path) -> PathBuf {
        let name = project
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "project".into());
        let h = super::fnv1a(project.as_os_str().as_encoded_bytes());
        self.root.join(format!("{name}-{h:08x}"))
    }

    fn dir_for(&self, project: &Path, bead: &BeadId) -> PathBuf {
        self.project_dir(project).join(bead.as_str())
    }

    /// A fresh worktree for `bead` at `at` (the project branch's tip when `None`), replacing
    /// any a crashed worker left; `approved` as in [`Workspace`]. Not under the repository lock
    /// (a worker starts while another lands), but under the worktree bookkeeping lock: see
    /// [`bookkeeping`].
    fn cut(
        &self,
        project: &Path,
        bead: &BeadId,
        at: Option<&str>,
        approved: bool,
    ) -> Result<Workspace> {
        // A pooled tree is reset to the base: work to go on from (approved, or a pull
        // request's head) gets a tree of its own.
        let own_tree = approved || at.is_some();
        let base = super::base_branch(project)?;
        let dir = self.dir_for(project, bead);
        let branch = branch_for(bead);
        let at = at.unwrap_or(&base);
        if let Some(parent) = dir.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
            crate::system::atomic::write(
                &parent.join(super::pool::PROJECT_FILE),
                project.as_os_str().as_encoded_bytes(),
            )?;
        }
        if own_tree || !self.take_from_pool(project, &dir, &branch, at)? {
            self.check_out(project, &dir, &branch, at)?;
        }
        // Where its git lives and what it has checked out, as git wrote it: what braids' own
        // git is pinned to from now on, and what the agent must not change.
        let common = crate::git::open(project)?.commondir().to_path_buf();
        crate::git::safe::Pin::record(&dir, &common, &branch)?;
        // What the agent is given, its worktree's own settings (a sparse checkout's) included.
        let config = guard::fingerprint(project, &dir)?;
        crate::system::atomic::write(&guard::baseline_of(&dir), &config)?;
        Ok(Workspace {
            onto: None,
            project: project.to_path_buf(),
            dir,
            branch: Some(branch),
            base: Some(base),
            git_config: Some(config),
            approved,
        })
    }

    /// A new worktree at `dir` on `branch` at `at`: only git's records under the lock; the
    /// checkout, the slow part on a big repository, runs beside other workers' (see
    /// [`bookkeeping`]).
    fn check_out(&self, project: &Path, dir: &Path, branch: &str, at: &str) -> Result<()> {
        let shown = dir.to_string_lossy();
        {
            let _books = bookkeeping(project)?;
            Self::discard_held(project, dir)?;
            git_ok(
                project,
                &[
                    "worktree",
                    "add",
                    "--quiet",
                    "--no-checkout",
                    "-B",
                    branch,
                    &shown,
                    at,
                ],
            )?;
        }
        super::scrub::set_sparse(dir, &self.pooling.sparse)?;
        git_ok(dir, &["reset", "--quiet", "--hard"])?;
        // Submodules at the commits the branch records, as a fresh clone would have them
        // (`git worktree add` leaves them empty): the agent builds and tests against them.
        if dir.join(".gitmodules").exists() {
            let out = git(
                dir,
                &["submodule", "update", "--init", "--recursive", "--quiet"],
            )?;
            if !out.success() {
                bail!(
                    "the submodules of {} could not be checked out: {}",
                    dir.display(),
                    out.stderr.trim()
                );
            }
        }
        Ok(())
    }

    /// Which of `paths` the project's work tree has uncommitted changes or untracked files
    /// at. Only those are looked at (a status of the whole tree costs seconds on a big
    /// repository), unless there are so many that the whole tree is cheaper to ask.
    fn dirty_paths(project: &Path, paths: &[&String]) -> Result<Vec<String>> {
        let mut args: Vec<String> = ["status", "--porcelain=v1", "-z", "--untracked-files=all"]
            .map(String::from)
            .to_vec();
        if paths.len() <= 1000 {
            args.push("--".into());
            args.extend(paths.iter().map(|p| format!(":(literal,top){p}")));
        }
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = git_ok(project, &refs)?;
        let mut paths = Vec::new();
        let mut it = out.split('\0').filter(|e| !e.is_empty());
        while let Some(entry) = it.next() {
            if entry.len() < 4 {
                continue;
            }
            let (code, path) = entry.split_at(3);
            paths.push(path.to_string());
            // a rename or copy is followed by its source path
            if code.starts_with('R') || code.starts_with('C') {
                if let Some(src) = it.next() {
                    paths.push(src.to_string());
                }
            }
        }
        Ok(paths)
    }
}

/// Holds git's worktree bookkeeping (`worktree add`, `remove`, `prune`) for one repository, one
/// worker at a time. `git worktree add` makes the new worktree's admin folder before it marks it
/// locked, and a `git worktree prune` in that window (another worker's start or removal, the
/// tick's sweep) deletes the folder under it: "could not open .git/worktrees/<bead>/gitdir", a
/// bead blocked, seen with three workers starting at once. Apart from the repository lock, and
/// held only for those commands, so a worker still starts while another lands; taken after the
/// repository lock where both are held, never before it.
pub(super) fn bookkeeping(project: &Path) -> Result<crate::system::lock::TickLock> {
    let path = crate::git::lock_path(project)?.with_file_name("braids-worktrees.lock");
    let wait = Duration::from_secs(120);
    crate::system::lock::TickLock::acquire(&path, wait)
        .with_context(|| format!("cannot lock {}", path.display()))?
        .ok_or_else(|| {
            crate::system::lock::Busy {
                path: path.clone(),
                waited: wait,
            }
            .into()
        })
}

impl GitWorktrees {
    /// The landing's one commit on the bead's branch, checked as it will land: its id and the
    /// tracker's files it carries (as read from the project). `None` when there was nothing to
    /// commit.
    #[allow(clippy::type_complexity)]
    fn commit_landing(
        &self,
        ws: &Workspace,
        landing: &Landing,
    ) -> Result<Option<(String, Vec<(PathBuf, Vec<u8>)>)>> {
        let (Some(branch), Some(base)) = (&ws.branch, ws.start()) else {
            bail!("a shared workspace lands through the project's own commit");
        };
        // The bead was closed since `prepare_landing` looked: still the bead's branch?
        if let Some(held) = guard::admin_drift(&ws.project, &ws.dir)? {
            let why = held
                .refusal()
                .map(|r| r.paths.join(", "))
                .unwrap_or_default();
            bail!("the worktree's git admin files changed: {why}");
        }
        // The tracker's state as the project has it now (the bead just closed), read once and
        // written both into the commit and into the project's index, so the fast-forward finds
        // the project's copy already matching and leaves any newer write in place.
        let mut tracked = Vec::new();
        for rel in &landing.tracker_files {
            for file in tracker_paths(&ws.project, rel)? {
                let from = ws.project.join(&file);
                let bytes = crate::system::beneath::read(&ws.project, &from)
                    .with_context(|| format!("cannot read {}", from.display()))?;
                crate::system::beneath::write(&ws.dir, &file, &bytes)?;
                tracked.push((file, bytes));
            }
        }
        // The index as the branch has it (everything `prepare_landing` committed and checked,
        // and nothing written since), then what must not land put back as the base has it,
        // then what must: no pass over the whole tree.
        git_ok(&ws.dir, &["reset", "--quiet", "--soft", base])?;
        let copied = super::ready::copied(&ws.dir);
        let mut unstage: Vec<String> = ["reset", "--quiet", base, "--"].map(String::from).to_vec();
        unstage.extend(
            landing
                .exclude
                .iter()
                .chain(&copied)
                .map(|p| match p == Path::new(".") {
                    true => ":(top)".to_string(),
                    false => format!(":(top,literal){}", p.to_string_lossy()),
                }),
        );
        if unstage.len() > 4 {
            let args: Vec<&str> = unstage.iter().map(String::as_str).collect();
            git_ok(&ws.dir, &args)?;
        }
        let mut include: Vec<PathBuf> = landing
            .include
            .iter()
            .filter(|p| !copied.contains(p))
            .cloned()
            .collect();
        include.extend(tracked.iter().map(|(f, _)| f.clone()));
        stage(&ws.dir, &[PathBuf::from(".")], &include)?;
        let hooks = super::hooks::active(&ws.project).filter(|_| landing.hooks);
        let committed = match hooks {
            // They passed on this work in `prepare_landing`; a refusal now (a hook that looks at
            // the tracker's files, say) must not leave a closed bead unlanded.
            Some(hooks) => match super::hooks::commit(ws, &hooks, &landing.message, &self.sandbox)?
            {
                Ok(c) => c,
                Err(said) => {
                    tracing::warn!(dir = %ws.dir.display(), "a commit hook refused the landing it had passed, so it lands without hooks: {said}");
                    commit_staged(&ws.dir, &landing.message)?
                }
            },
            None => commit_staged(&ws.dir, &landing.message)?,
        };
        if !committed {
            return Ok(None);
        }
        // Checked again from the commit's tree: files added by name (even ignored ones) were
        // not in the tree `prepare_landing` read.
        let ours: Vec<PathBuf> = tracked.iter().map(|(f, _)| f.clone()).collect();
        if let Some(why) = guard::landed(ws, base, landing, &ours)? {
            bail!("{why}; the work is kept on branch {branch}");
        }
        let commit = git_ok(&ws.dir, &["rev-parse", "HEAD"])?.trim().to_string();
        Ok(Some((commit, tracked)))
    }
}

impl Workspaces for GitWorktrees {
    fn resume(&self, project: &Path, bead: &BeadId) -> Result<Option<Workspace>> {
        self.reuse(project, bead)
    }

    fn create(&self, project: &Path, bead: &BeadId) -> Result<Workspace> {
        self.cut(project, bead, None, false)
    }

    fn create_at(&self, project: &Path, bead: &BeadId, commit: &str) -> Result<Workspace> {
        let ws = self.cut(project, bead, Some(commit), false)?;
        Ok(Workspace {
            onto: Some(commit.to_string()),
            ..ws
        })
    }

    fn prepare_landing(
        &self,
        ws: &Workspace,
        bead: &BeadId,
        exclude: &[PathBuf],
        hooks: Option<&str>,
    ) -> Result<Prepared> {
        let (Some(_), Some(base)) = (&ws.branch, ws.start()) else {
            return Ok(Prepared::Ready { paths: vec![] });
        };
        // Before any git runs in the worktree: it must still be the project's, under the
        // configuration the person gave the repository.
        if let Some(held) = guard::before_git(ws)? {
            return Ok(held);
        }
        // Whatever the agent left, committed on its own branch first: all of it, so the rebase
        // finds a clean tree (what does not land is left out later, by `land`).
        stage(&ws.dir, &[], &[])?;
        commit_staged(&ws.dir, &format!("wip {bead}"))?;
        let rebase = git(&ws.dir, &["rebase", "--quiet", base])?;
        if !rebase.success() {
            let conflicted = lines(&git_ok(
                &ws.dir,
                &["diff", "--name-only", "--diff-filter=U"],
            )?);
            let _ = git(&ws.dir, &["rebase", "--abort"]);
            return Ok(Prepared::Conflict {
                paths: if conflicted.is_empty() {
                    vec![rebase.stderr.trim().to_string()]
                } else {
                    conflicted
                },
            });
        }
        // A rename is its two paths: a control file moved away is a control change.
        // Files copied in from the project never land (`land` leaves them out), whatever the
        // agent did to them: not work, and not in the person's way.
        // Read from the commits' trees with raw names: never from the index or the files.
        let copied = super::ready::copied(&ws.dir);
        let changed = || -> Result<Vec<crate::git::tree::Change>> {
            let range = format!("{base}..HEAD");
            Ok(crate::git::tree::changes(&ws.dir, &range)?
                .into_iter()
                .filter(|c| !copied.iter().any(|p| p == Path::new(&c.path)))
                .collect())
        };
        let names = |c: &[crate::git::tree::Change]| c.iter().map(|c| c.path.clone()).collect();
        let changes = changed()?;
        if let Some(held) = guard::content(ws, &changes, exclude)? {
            return Ok(held);
        }
        let paths: Vec<String> = names(&changes);
        let landing = |p: &String| !exclude.iter().any(|x| Path::new(p).starts_with(x));
        // A person on another branch has their files out of the landing's way.
        if ws.onto.is_none() && crate::git::checked_out(&ws.project).as_deref() == Some(base) {
            let landed: Vec<&String> = paths.iter().filter(|p| landing(p)).collect();
            let dirty = Self::dirty_paths(&ws.project, &landed)?;
            let in_the_way: Vec<String> = landed
                .into_iter()
                .filter(|p| dirty.contains(p))
                .cloned()
                .collect();
            if !in_the_way.is_empty() {
                return Ok(Prepared::InTheWay { paths: in_the_way });
            }
        }
        // Without a hook to run, what was checked is what lands.
        let Some(hooks) = hooks.zip(super::hooks::active(&ws.project)) else {
            return Ok(Prepared::Ready { paths });
        };
        if let Some(hook_output) =
            super::hooks::trial(ws, bead, base, exclude, (hooks.0, &hooks.1), &self.sandbox)?
        {
            return Ok(Prepared::Refused { hook_output });
        }
        // What the hooks changed is checked as the agent's work is.
        let changes = changed()?;
        Ok(
            guard::content(ws, &changes, exclude)?.unwrap_or(Prepared::Ready {
                paths: names(&changes),
            }),
        )
    }

    fn land(&self, ws: &Workspace, landing: &Landing) -> Result<Option<String>> {
        let (Some(branch), Some(base)) = (&ws.branch, &ws.base) else {
            bail!("a shared workspace lands through the project's own commit");
        };
        let Some((commit, tracked)) = self.commit_landing(ws, landing)? else {
            return Ok(None);
        };
        let on_base = crate::git::checked_out(&ws.project).as_deref() == Some(base);
        // The person's index is the base branch's only when they have it checked out.
        for (rel, bytes) in tracked.iter().filter(|_| on_base) {
            let blob = Invocation::new(["git", "hash-object", "-w", "--stdin"])
                .cwd(&ws.project)
                .stdin(bytes.clone())
                .timeout(GIT_TIMEOUT)
                .run()
                .map_err(|e| anyhow!("{e}"))?;
            let sha = blob.stdout.trim();
            let rel = rel.to_string_lossy();
            git_ok(
                &ws.project,
                &[
                    "update-index",
                    "--add",
                    "--cacheinfo",
                    &format!("100644,{sha},{rel}"),
                ],
            )?;
        }
        if on_base {
            let ff = git(&ws.project, &["merge", "--quiet", "--ff-only", branch])?;
            if !ff.success() {
                bail!(
                    "the project's work tree could not be moved to {commit}: {}; the work is kept on branch {branch}",
                    ff.stderr.trim()
                );
            }
        } else {
            // The person works on another branch (or none): the base branch moves without touching
            // their tree.
            let old = git_ok(&ws.project, &["rev-parse", base])?;
            git_ok(
                &ws.project,
                &[
                    "update-ref",
                    &format!("refs/heads/{base}"),
                    &commit,
                    old.trim(),
                ],
            )?;
        }
        Ok(Some(commit))
    }

    fn propose(&self, ws: &Workspace, landing: &Landing) -> Result<Option<String>> {
        Ok(self.commit_landing(ws, landing)?.map(|(commit, _)| commit))
    }

    fn keep(&self, ws: &Workspace, bead: &BeadId) -> Result<Option<String>> {
        let (Some(_), Some(base)) = (&ws.branch, &ws.base) else {
            return Ok(None);
        };
        let _lock = RepoLock::acquire(&ws.project)?;
        guard::before_keep(&ws.project, &ws.dir, bead)?;
        stage(&ws.dir, &[], &[])?;
        commit_staged(&ws.dir, &format!("wip {bead} (kept for a person)"))?;
        let ahead = git_ok(&ws.dir, &["rev-list", "--count", &format!("{base}..HEAD")])?;
        if ahead.trim() == "0" {
            return Ok(None);
        }
        let kept = format!(
            "braids/kept/{bead}-{}",
            chrono::Utc::now().format("%Y%m%dT%H%M%SZ")
        );
        git_ok(&ws.dir, &["branch", "--quiet", "--move", &kept])?;
        crate::git::safe::Pin::rebranch(&ws.dir, &kept)?;
        Ok(Some(kept))
    }

    fn make_ready(&self, ws: &Workspace) -> Result<super::Readiness> {
        if ws.is_shared() {
            return Ok(super::Readiness::default());
        }
        GitWorktrees::make_ready(self, ws)
    }

    fn retire(&self, ws: &Workspace) -> Result<super::Retired> {
        let setup = super::pool::Record::read(&ws.dir).setup;
        // Not under the repository lock: a scrub on a big repository takes a while, and other
        // workers land meanwhile (the move into the pool takes the bookkeeping lock).
        match self.give_back(ws, setup) {
            Ok(super::Retired::Pooled) => Ok(super::Retired::Pooled),
            Ok(super::Retired::Removed { why }) => {
                self.remove(ws)?;
                Ok(super::Retired::Removed { why })
            }
            Err(e) => {
                self.remove(ws)?;
                Ok(super::Retired::Removed {
                    why: Some(format!("{e:#}")),
                })
            }
        }
    }

    fn prune_pool(&self, project: &Path, all: bool) -> Result<usize> {
        GitWorktrees::prune_pool(self, project, all)
    }

    fn sweep_orphans(&self, projects: &[PathBuf]) -> usize {
        GitWorktrees::sweep_orphans(self, projects)
    }

    fn remove(&self, ws: &Workspace) -> Result<()> {
        let Some(branch) = &ws.branch else {
            return Ok(());
        };
        let _lock = RepoLock::acquire(&ws.project)?;
        Self::discard(&ws.project, &ws.dir)?;
        // Gone already when it was kept under another name.
        let _ = git(&ws.project, &["branch", "--quiet", "-D", branch]);
        Ok(())
    }

    fn sweep(&self, project: &Path, live: &[BeadId]) -> Result<Vec<Swept>> {
        self.sweep_dead(project, live)
    }
}

#[cfg(test)]
#[path = "worktree_tests.rs"]
mod tests;
