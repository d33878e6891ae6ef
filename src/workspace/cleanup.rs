//! What a dead worker left: its unlanded work kept on a branch, then its worktree removed,
//! whether or not git still knows it.

use std::path::Path;

use anyhow::{bail, Context, Result};

use super::worktree::{bookkeeping, branch_for, commit_staged, stage};
use super::{guard, GitWorktrees, Swept};
use crate::git::{git, git_ok, RepoLock};
use crate::model::BeadId;

impl GitWorktrees {
    /// Forgets a worktree at `dir` (a crashed worker's), whether or not git still knows it.
    pub(super) fn discard(project: &Path, dir: &Path) -> Result<()> {
        let _books = bookkeeping(project)?;
        Self::discard_held(project, dir)
    }

    /// [`GitWorktrees::discard`], for a caller holding the [`bookkeeping`] lock.
    pub(super) fn discard_held(project: &Path, dir: &Path) -> Result<()> {
        if dir.exists() {
            let shown = dir.to_string_lossy();
            let _ = git(
                project,
                &["worktree", "remove", "--force", "--force", &shown],
            );
            if dir.exists() {
                std::fs::remove_dir_all(dir)
                    .with_context(|| format!("cannot remove the workspace {}", dir.display()))?;
            }
        }
        for sidecar in [
            guard::baseline_of(dir),
            crate::git::safe::Pin::path_of(dir),
            super::pool::record_of(dir),
            super::ready::copied_of(dir),
        ] {
            let _ = std::fs::remove_file(sidecar);
        }
        git_ok(project, &["worktree", "prune"])?;
        Ok(())
    }

    /// The work a crashed or killed worker left in its worktree, committed and moved to a
    /// `braids/kept/…` branch for a person; `None` when the worktree holds nothing that no
    /// other branch has (its work landed, or it never changed a file). A worker can die after
    /// closing its bead and before landing it: this is where that work survives.
    fn keep_left_over(project: &Path, dir: &Path, bead: &BeadId) -> Result<Option<String>> {
        if !dir.join(".git").exists() {
            return Ok(None);
        }
        guard::before_keep(project, dir, bead)?;
        if guard::fingerprint(project, dir)? != guard::baseline(project, dir)? {
            bail!(
                "the repository's git configuration changed since the agent was given {}; braids runs no git there",
                dir.display()
            );
        }
        // Only what the worker committed counts: it commits the agent's work just before it
        // closes the bead (`prepare_landing`). Uncommitted changes alone are a bead that was
        // never closed, which is done again; files a landing left out are not work.
        let own = format!("--exclude={}", branch_for(bead));
        let unique = git_ok(
            dir,
            &["rev-list", "--count", "HEAD", "--not", &own, "--branches"],
        )?;
        if unique.trim() == "0" {
            return Ok(None);
        }
        // Best effort: whatever else is there goes along (a commit can fail mid-rebase).
        if stage(dir, &[], &[]).is_ok() {
            let _ = commit_staged(
                dir,
                &format!("wip {bead} (left by a worker that did not finish)"),
            );
        }
        let kept = format!(
            "braids/kept/{bead}-{}",
            chrono::Utc::now().format("%Y%m%dT%H%M%SZ")
        );
        // At HEAD, not a rename: HEAD may be detached (a rebase cut short).
        git_ok(dir, &["branch", "--quiet", &kept, "HEAD"])?;
        Ok(Some(kept))
    }

    /// [`Workspaces::sweep`]: the worktrees whose bead is not in `live` are a dead worker's;
    /// their unlanded work is kept on a branch, then they are removed (never pooled).
    pub(super) fn sweep_dead(&self, project: &Path, live: &[BeadId]) -> Result<Vec<Swept>> {
        let dir = self.project_dir(project);
        let mut removed = Vec::new();
        // No folder, no worktrees: one `stat`, and git is not run.
        if !dir.is_dir() {
            return Ok(removed);
        }
        // A worker busy with the repository sweeps its own; the next run sweeps the rest.
        let Some(_lock) = RepoLock::try_acquire(project)? else {
            return Ok(removed);
        };
        if let Ok(entries) = std::fs::read_dir(&dir) {
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                let Ok(bead) = BeadId::new(&name) else {
                    continue;
                };
                if live.contains(&bead) {
                    continue;
                }
                // Work that cannot be kept is not thrown away: the worktree stays, the log says
                // why, and the other worktrees are swept.
                let kept = match Self::keep_left_over(project, &e.path(), &bead) {
                    Ok(kept) => kept,
                    Err(err) => {
                        tracing::warn!(bead = %bead, "cannot keep the work left in {}, so it stays: {err:#}", e.path().display());
                        continue;
                    }
                };
                Self::discard(project, &e.path())?;
                let _ = git(project, &["branch", "--quiet", "-D", &branch_for(&bead)]);
                removed.push(Swept { bead, kept });
            }
        }
        if !removed.is_empty() && project.join(".git").exists() {
            let _books = bookkeeping(project)?;
            git_ok(project, &["worktree", "prune"])?;
        }
        Ok(removed)
    }
}
