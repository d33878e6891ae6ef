//! A bead's work held for a person: its worker kept it on a `braids/kept/<bead>-…` branch (it
//! changed braids' control files, or could not land) and recorded the branch and its commit in
//! the bead's blocked event. `braids diff` shows that commit's change, `braids approve` lands
//! exactly that commit as the worker would have (closed, committed, pushed), `braids reject`
//! drops it and leaves the bead blocked. A branch that moved since is refused: an agent may
//! write branches, never what a person approves.

use std::path::PathBuf;

use anyhow::{anyhow, bail, Result};
use serde::Serialize;

use crate::config::installation::Installation;
use crate::events::waiting::{self, Kept, WaitKind};
use crate::events::{Draft, Kind};
use crate::model::BeadStatus;
use crate::workspace::{GitWorktrees, HeldDiff, Landing, Workspace, Workspaces};

use super::beads::{self, Located, Opened};

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

/// The work braids kept for the bead `found`, as its blocked event recorded it, checked to be
/// still where braids left it.
fn held(found: &Located) -> Result<Kept> {
    let (p, bead) = (&found.project, &found.bead);
    let root = &p.entry.path;
    let waits = waiting::waiting(&p.journal(), &[bead.id.as_str()].into_iter().collect());
    let kept = waits
        .get(bead.id.as_str())
        .filter(|w| bead.status == BeadStatus::Blocked && w.kind == WaitKind::Held)
        .and_then(|w| w.kept.clone())
        .ok_or_else(|| {
            anyhow!(
                "{} waits for no review and holds no work for a person (it is {}, and its last event kept nothing); `braids beads {}` shows what each bead waits for",
                bead.id,
                bead.status,
                p.entry.slug
            )
        })?;
    let at = crate::git::git(root, &["rev-parse", "--verify", "--quiet", &kept.branch])?;
    if !at.success() {
        bail!(
            "{}'s held work is gone: branch {} no longer exists in {}",
            bead.id,
            kept.branch,
            root.display()
        );
    }
    if at.stdout.trim() != kept.commit {
        bail!(
            "branch {} moved since braids kept {}'s work there (it was {}, it is {}); braids \
             approves only what it kept: look at it with git and merge it by hand",
            kept.branch,
            bead.id,
            kept.commit,
            at.stdout.trim()
        );
    }
    Ok(kept)
}

/// What the held work of `target` would change.
pub fn diff(inst: &Installation, target: &str) -> Result<HeldDiff> {
    let found = beads::locate(inst, target, false)?;
    let kept = held(&found)?;
    crate::workspace::held_diff(&found.project.entry.path, &kept.branch, &kept.commit)
}

/// The worker's landing for the held work, recorded beside it; the defaults when there is
/// none.
fn planned(inst: &Installation, p: &Opened, bead: &crate::model::Bead) -> Landing {
    let file = inst.paths.held_landing(&p.entry.slug, &bead.id);
    let recorded: Option<Landing> = std::fs::read(file)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok());
    let mut landing = recorded.unwrap_or_else(|| Landing {
        message: String::new(),
        exclude: crate::workspace::agent_excludes(),
        include: Vec::new(),
        tracker_files: Vec::new(),
        hooks: true,
    });
    landing.message = format!("{} ({})", bead.title, bead.id);
    landing.hooks = crate::workspace::hooks::enabled(&p.config);
    landing.tracker_files = crate::lifecycle::TRACKER_FILES
        .iter()
        .map(PathBuf::from)
        .collect();
    landing
}

/// Lands the held work of `found` (see the module docs); the caller holds the tick lock.
pub fn approve(inst: &Installation, found: &Located) -> Result<Landed> {
    let (p, bead) = (&found.project, &found.bead);
    let (root, slug) = (&p.entry.path, p.entry.slug.as_str());
    p.refuse_if_paused(&bead.id)?;
    let wss = inst.config.workspaces(&inst.paths, None);
    let lock = crate::git::RepoLock::acquire(root)?;
    // Under the lock: what was shown is what lands.
    let kept = held(found)?;
    let ws = wss.approved(root, &bead.id, &kept.commit)?;
    let landing = planned(inst, p, bead);
    let plan = inst.paths.landing_plan(slug, &bead.id);
    let landed = land(p, &wss, &ws, bead, &kept, &landing, &plan);
    let _ = std::fs::remove_file(&plan);
    // Removing the worktree takes the repository lock itself.
    drop(lock);
    let _ = wss.remove(&ws);
    let (commit, pushed) = landed?;
    let _ = std::fs::remove_file(inst.paths.held_landing(slug, &bead.id));
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
        branch: kept.branch,
        commit,
        pushed,
    })
}

/// Under the repository lock: replays the approved worktree `ws` onto the project's branch,
/// records the landing (so a crash after the close still lands it), closes the bead, lands,
/// deletes the kept branch and pushes.
fn land(
    p: &Opened,
    wss: &GitWorktrees,
    ws: &Workspace,
    bead: &crate::model::Bead,
    kept: &Kept,
    landing: &Landing,
    plan: &std::path::Path,
) -> Result<(Option<String>, Option<bool>)> {
    let (root, slug) = (&p.entry.path, p.entry.slug.as_str());
    let (id, branch) = (&bead.id, kept.branch.as_str());
    let hooks = landing.hooks.then_some(landing.message.as_str());
    let prepared = match wss.prepare_landing(ws, id, &landing.exclude, hooks) {
        Ok(p) => p
            .refusal()
            .map(|r| format!("{} ({})", r.why, r.paths.join(", "))),
        Err(e) => Some(format!("{e:#}")),
    };
    if let Some(why) = prepared {
        bail!("{id}'s held work cannot land: {why}; it stays on branch {branch} for you to merge by hand");
    }
    let mut landing = landing.clone();
    // The subject names the bead as every landing does; the body says who let it in.
    landing.message = format!(
        "{}\n\nHeld for a person (commit {} on {branch}) and approved.",
        landing.message, kept.commit
    );
    for d in deliverables(ws, id) {
        if !landing.include.contains(&d) {
            landing.include.push(d);
        }
    }
    let base = crate::workspace::base_branch(root)?;
    let upstream = crate::git::has_upstream(root, &base);
    if upstream {
        crate::git::expect_push(root)?;
    }
    crate::system::atomic::write(plan, &serde_json::to_vec(&landing)?)?;
    p.tracker
        .close(id, "braids: its held work was approved by a person")
        .map_err(|e| anyhow!("{slug}: {id} could not be closed: {e}"))?;
    // Blocked again with the branch kept, and told as any block is.
    let block_again = |why: &str| {
        let _ = p.tracker.block(id, why);
        crate::events::emit(
            root,
            slug,
            vec![Draft::new(Kind::BeadBlocked)
                .bead(id)
                .with("reason", why)
                .with("kept", branch)],
        );
    };
    let commit = match wss.land(ws, &landing) {
        Ok(c) => c,
        Err(e) => {
            // Closed but not landed is not done (3.6).
            let why = format!("its approved work could not land: {e:#}");
            block_again(&why);
            bail!("{id}: {why}; it stays on branch {branch}");
        }
    };
    let _ = std::fs::remove_file(plan);
    // Only the commit that was approved: a branch moved meanwhile is left alone.
    let _ = crate::git::git(
        root,
        &[
            "update-ref",
            "-d",
            &format!("refs/heads/{branch}"),
            &kept.commit,
        ],
    );
    if !upstream {
        return Ok((commit, None));
    }
    let pushed = crate::git::push_recorded(root, &base, std::time::Duration::from_secs(120));
    if let Ok(k) = &pushed {
        if let Some(k) = k
            .kept
            .iter()
            .find(|k| crate::git::bead_of(&k.subject) == Some(id.as_str()))
        {
            let why = format!("its approved work conflicts with the upstream: {k}");
            block_again(&why);
            bail!("{id}: {why}");
        }
    }
    Ok((commit, Some(pushed.is_ok())))
}

/// The bead's deliverables in the worktree, project-relative: they land with it, as the
/// worker lands them.
fn deliverables(ws: &Workspace, bead: &crate::model::BeadId) -> Vec<PathBuf> {
    let its = ws.dir.join(".braids/iterations");
    let Ok(dirs) = std::fs::read_dir(&its) else {
        return Vec::new();
    };
    dirs.flatten()
        .flat_map(|d| crate::format::deliverable::find(&d.path(), bead))
        .filter_map(|p| p.strip_prefix(&ws.dir).ok().map(PathBuf::from))
        .collect()
}

/// Drops the held work of `found`: its branch is deleted and the bead stays blocked with
/// `reason`; the caller holds the tick lock.
pub fn reject(inst: &Installation, found: &Located, reason: &str) -> Result<String> {
    let (p, bead) = (&found.project, &found.bead);
    let root = &p.entry.path;
    let _lock = crate::git::RepoLock::acquire(root)?;
    let kept = held(found)?;
    crate::git::git_ok(
        root,
        &[
            "update-ref",
            "-d",
            &format!("refs/heads/{}", kept.branch),
            &kept.commit,
        ],
    )?;
    let _ = std::fs::remove_file(inst.paths.held_landing(&p.entry.slug, &bead.id));
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
            .with("dropped", &kept.branch)],
    );
    Ok(why)
}
