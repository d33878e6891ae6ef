//! A bead's work held for a person (`braids/kept/<bead>-…`: it changed braids' control files,
//! added a link out of the repository, or could not land): `braids diff` shows it, `braids
//! approve` lands it as the worker would have (closed, committed, pushed), `braids reject`
//! drops it and leaves the bead blocked.

use anyhow::{anyhow, bail, Result};
use serde::Serialize;

use crate::events::{Draft, Kind};
use crate::installation::Installation;
use crate::model::BeadStatus;
use crate::workspace::{GitWorktrees, HeldDiff, Landing, Workspaces};

use super::beads::{self, Located};

/// What approving held work did.
#[derive(Debug, Serialize)]
pub struct Landed {
    pub project: String,
    pub bead: String,
    /// The kept branch it came from (now deleted).
    pub branch: String,
    /// The commit on the project's branch; `None` when the work changed nothing any more.
    pub commit: Option<String>,
    /// Whether the push went through; `None` without an upstream.
    pub pushed: Option<bool>,
}

/// The newest kept branch of the bead `found`, which must be blocked.
fn held_branch(found: &Located) -> Result<String> {
    let (p, bead) = (&found.project, &found.bead);
    if bead.status != BeadStatus::Blocked {
        bail!(
            "{} is {}; only a blocked bead has work held for a person",
            bead.id,
            bead.status
        );
    }
    crate::workspace::kept_branches(&p.entry.path, &bead.id)?
        .pop()
        .ok_or_else(|| {
            anyhow!(
                "{} has no held work: no braids/kept/{}-… branch in {}",
                bead.id,
                bead.id,
                p.entry.path.display()
            )
        })
}

/// Whether `found` is a blocked bead with work held on a kept branch.
pub fn is_held(found: &Located) -> bool {
    held_branch(found).is_ok()
}

/// What the held work of `target` would change.
pub fn diff(inst: &Installation, target: &str) -> Result<HeldDiff> {
    let found = beads::locate(inst, target, false)?;
    let branch = held_branch(&found)?;
    crate::workspace::held_diff(&found.project.entry.path, &branch)
}

/// What the newest held work of `bead` in the project at `root` would change; `None` when
/// none is held.
pub fn diff_in(root: &std::path::Path, bead: &crate::model::BeadId) -> Result<Option<HeldDiff>> {
    match crate::workspace::kept_branches(root, bead)?.pop() {
        Some(branch) => crate::workspace::held_diff(root, &branch).map(Some),
        None => Ok(None),
    }
}

/// Lands the held work of `found` (see the module docs); the caller holds the tick lock.
pub fn approve(inst: &Installation, found: &Located) -> Result<Landed> {
    let (p, bead) = (&found.project, &found.bead);
    let (root, slug) = (&p.entry.path, p.entry.slug.as_str());
    let branch = held_branch(found)?;
    p.refuse_if_paused(&bead.id)?;
    let wss = GitWorktrees {
        root: inst.paths.workspaces_dir(),
    };
    let lock = crate::git::RepoLock::acquire(root)?;
    let ws = wss.approved(root, &bead.id, &branch)?;
    let landed = land(p, &wss, &ws, bead, &branch);
    // Removing the worktree takes the repository lock itself.
    drop(lock);
    let _ = wss.remove(&ws);
    let (commit, pushed) = landed?;
    crate::events::emit(
        root,
        slug,
        vec![Draft::new(Kind::TaskComplete)
            .bead(&bead.id)
            .with("approved_by", "person")
            .with("commit", &commit)
            .with("pushed", pushed)],
    );
    Ok(Landed {
        project: slug.to_string(),
        bead: bead.id.to_string(),
        branch,
        commit,
        pushed,
    })
}

/// Under the repository lock: replays the approved worktree `ws` onto the project's branch,
/// closes the bead, lands, deletes the kept `branch` and pushes.
fn land(
    p: &beads::Opened,
    wss: &GitWorktrees,
    ws: &crate::workspace::Workspace,
    bead: &crate::model::Bead,
    branch: &str,
) -> Result<(Option<String>, Option<bool>)> {
    let (root, slug) = (&p.entry.path, p.entry.slug.as_str());
    let (title, bead) = (&bead.title, &bead.id);
    let prepared = match wss.prepare_landing(ws, bead, &[]) {
        Ok(p) => p
            .refusal()
            .map(|r| format!("{} ({})", r.why, r.paths.join(", "))),
        Err(e) => Some(format!("{e:#}")),
    };
    if let Some(why) = prepared {
        bail!("{bead}'s held work cannot land: {why}; it stays on branch {branch} for you to merge by hand");
    }
    let upstream = crate::git::has_upstream(root);
    if upstream {
        crate::git::expect_push(root)?;
    }
    p.tracker
        .close(bead, "braids: its held work was approved by a person")
        .map_err(|e| anyhow!("{slug}: {bead} could not be closed: {e}"))?;
    let landing = Landing {
        message: format!("{title} ({bead}, approved by a person)"),
        exclude: Vec::new(),
        include: Vec::new(),
        tracker_files: crate::lifecycle::TRACKER_FILES
            .iter()
            .map(Into::into)
            .collect(),
    };
    let commit = match wss.land(ws, &landing) {
        Ok(c) => c,
        Err(e) => {
            // Closed but not landed is not done (3.6): blocked again, the branch kept.
            let why = format!("its approved work could not land: {e:#}");
            let _ = p.tracker.block(bead, &why);
            bail!("{bead}: {why}; it stays on branch {branch}");
        }
    };
    crate::git::git_ok(root, &["branch", "--quiet", "-D", branch])?;
    let pushed = upstream
        .then(|| crate::git::push_recorded(root, std::time::Duration::from_secs(120)).is_ok());
    Ok((commit, pushed))
}

/// Drops the held work of `found`: its branch is deleted and the bead stays blocked with
/// `reason`; the caller holds the tick lock.
pub fn reject(found: &Located, reason: &str) -> Result<String> {
    let (p, bead) = (&found.project, &found.bead);
    let root = &p.entry.path;
    let branch = held_branch(found)?;
    let _lock = crate::git::RepoLock::acquire(root)?;
    for b in crate::workspace::kept_branches(root, &bead.id)? {
        crate::git::git_ok(root, &["branch", "--quiet", "-D", &b])?;
    }
    let why = format!("held work rejected: {reason}");
    p.tracker
        .block(&bead.id, &why)
        .map_err(|e| anyhow!("{}: {} could not be blocked: {e}", p.entry.slug, bead.id))?;
    crate::events::emit(
        root,
        &p.entry.slug,
        vec![Draft::new(Kind::BeadBlocked)
            .bead(&bead.id)
            .with("reason", &why)
            .with("dropped", &branch)],
    );
    Ok(why)
}
