//! Listing worker sessions (`braids sessions`) and ending one by hand (`braids kill`, the same
//! kill a tick uses for a zombie).

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};

use anyhow::{anyhow, bail, Result};
use serde::Serialize;

use crate::config::installation::Installation;
use crate::events::{Draft, Kind};
use crate::model::{BeadId, BeadStatus, SessionLabel};
use crate::session::{KillOutcome, Session};

/// A session as `braids sessions` shows it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Listed {
    #[serde(flatten)]
    pub session: Session,
    /// Its project is not in the registry (removed, renamed, or its row unreadable): the
    /// session still counts against `[tick] max_workers` and ends by `orphan_timeout_secs` or
    /// `braids kill` (CONTRACTS 2.2).
    pub orphan: bool,
    pub elapsed_seconds: u64,
    /// The bead's title, when its tracker could be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Where the worker is: `CODING`, `VALIDATION`, `COMMIT` (the project's status.json).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
    /// Seconds since the agent last printed something or changed a file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_output_seconds: Option<u64>,
    /// The bead's worktree and its stable id (`BRAIDS_WORKSPACE_ID`), while it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workspace: Option<WorkspaceSeen>,
    /// Its project's pool of finished workspaces, when it holds any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pool: Option<crate::workspace::pool::PoolSeen>,
}

/// A session's worktree.
#[derive(Debug, Clone, serde::Serialize)]
pub struct WorkspaceSeen {
    pub path: std::path::PathBuf,
    pub id: String,
}

/// Every session the backend knows, each marked orphan or not against the registry as it
/// reads now (an unreadable registry marks none: nothing says they are orphans), with its
/// bead's title, step and last output. A backend that cannot be asked (slurmctld down) is
/// warned about and the others' sessions are still shown: this list only looks.
pub fn list(inst: &Installation, now: DateTime<Utc>) -> Result<Vec<Listed>> {
    let survey = inst.backend.survey()?;
    for f in &survey.failed {
        tracing::warn!(
            "the {} backend cannot be asked, so its sessions are not listed: {}",
            f.backend,
            f.detail
        );
    }
    Ok(detail(inst, survey.sessions, now))
}

/// [`list`] for sessions already surveyed.
pub fn detail(inst: &Installation, sessions: Vec<Session>, now: DateTime<Utc>) -> Vec<Listed> {
    let registry = crate::format::registry::read_registry(&inst.paths).value;
    let readable = crate::format::layout::registry_file(&inst.paths).is_file();
    let mut titles: BTreeMap<String, BTreeMap<BeadId, String>> = BTreeMap::new();
    let mut steps: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for s in sessions.iter().filter(|s| s.running) {
        let slug = s.label.slug();
        let Some(entry) = registry.get(slug) else {
            continue;
        };
        if !titles.contains_key(slug) {
            let listed = super::beads::Opened::open(inst, entry.clone(), false)
                .ok()
                .and_then(|o| o.tracker.list().ok())
                .unwrap_or_default();
            titles.insert(
                slug.to_string(),
                listed.into_iter().map(|b| (b.id, b.title)).collect(),
            );
            let status = crate::events::status::load(
                &crate::events::Journal::of_project(&entry.path).status_path(),
                now,
            );
            steps.insert(
                slug.to_string(),
                status
                    .tasks
                    .into_iter()
                    .map(|t| {
                        (
                            t.bead,
                            serde_json::to_value(t.state)
                                .ok()
                                .and_then(|v| v.as_str().map(str::to_string))
                                .unwrap_or_default(),
                        )
                    })
                    .collect(),
            );
        }
    }
    let wss = inst.config.workspaces(&inst.paths, None);
    sessions
        .into_iter()
        .map(|session| {
            let (slug, bead) = (session.label.slug(), session.label.bead());
            let project = registry.get(slug).map(|e| e.path.clone());
            let workspace = project
                .as_ref()
                .map(|p| wss.project_dir(p).join(bead.as_str()))
                .filter(|d| d.join(".git").exists())
                .map(|d| WorkspaceSeen {
                    id: crate::workspace::workspace_id(&d),
                    path: d,
                });
            let pool = project.and_then(|p| {
                let max = crate::format::project::read_project(&p).value.max_workers;
                wss.pool_seen(&p, Some(inst.config.workspace.pool_size(max)))
            });
            let last_output_seconds = std::fs::metadata(inst.paths.activity(slug, bead))
                .and_then(|m| m.modified())
                .ok()
                .map(|t| {
                    u64::try_from((now - DateTime::<Utc>::from(t)).num_seconds()).unwrap_or(0)
                });
            Listed {
                orphan: readable && registry.get(slug).is_none(),
                elapsed_seconds: u64::try_from((now - session.started_at).num_seconds())
                    .unwrap_or(0),
                title: titles.get(slug).and_then(|t| t.get(bead)).cloned(),
                step: steps.get(slug).and_then(|t| t.get(bead.as_str())).cloned(),
                last_output_seconds: last_output_seconds.filter(|_| session.running),
                workspace,
                pool,
                session,
            }
        })
        .collect()
}

/// What becomes of the bead after `braids kill`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AfterKill {
    /// Open again, eligible at once: the run was stopped, not failed.
    Requeue,
    /// Blocked with this reason, for a person.
    Block(String),
}

/// What a kill did.
#[derive(Debug, Serialize)]
pub struct Killed {
    pub session: String,
    pub outcome: KillOutcome,
    /// `requeued`, `blocked`, or `closed` when the worker finished its bead before it went (a
    /// worker never stops between the close and the commit).
    pub then: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Kills the live session of `target` (a label, or a bead id as `braids beads` shows it):
/// SIGTERM, the grace period, SIGKILL, as a tick kills a zombie. Then the bead is requeued or
/// blocked as asked; a session whose project is gone from the registry is only killed.
pub fn kill(inst: &Installation, target: &str, after: AfterKill) -> Result<Killed> {
    if let AfterKill::Block(reason) = &after {
        if reason.trim().is_empty() {
            bail!("--block needs a reason, for the person who picks the bead up");
        }
    }
    let _held = super::beads::hold_ticks(&inst.paths)?;
    let sessions = inst.backend.list()?;
    let live = |label: &SessionLabel| sessions.iter().find(|s| &s.label == label && s.running);
    let (session, project) = match SessionLabel::parse(target) {
        Ok(label) => {
            let Some(s) = live(&label) else {
                bail!("no live session is labelled {target}; `braids sessions` lists them");
            };
            let entry = crate::format::registry::read_registry(&inst.paths)
                .value
                .get(label.slug())
                .cloned();
            let project = entry
                .map(|e| super::beads::Opened::open(inst, e, true))
                .transpose()?;
            (s, project)
        }
        Err(_) => {
            let found = super::beads::locate(inst, target, true)?;
            let label = SessionLabel::new(&found.project.entry.slug, found.bead.id.clone())?;
            let Some(s) = live(&label) else {
                bail!(
                    "{} has no live worker (it is {}); `braids sessions` lists the live ones",
                    found.bead.id,
                    found.bead.status
                );
            };
            (s, Some(found.project))
        }
    };
    let grace = Duration::from_secs(inst.config.sessions.kill_grace_secs);
    let outcome = inst.backend.kill(session, grace)?;
    let why = match &after {
        AfterKill::Block(reason) => format!("by a person (`braids kill --block`): {reason}"),
        AfterKill::Requeue => "by a person (`braids kill`); the bead is requeued".into(),
    };
    if outcome != KillOutcome::AlreadyGone {
        let logs = inst.paths.session_logs(session.label.slug());
        crate::session::log_stop(&logs, session, &why, chrono::Utc::now());
    }
    inst.backend.forget(session)?;
    let bead = session.label.bead();
    let mut killed = Killed {
        session: session.label.to_string(),
        outcome,
        then: "requeued",
        reason: None,
    };
    let Some(p) = project else {
        killed.then = "killed only: its project is not in the registry";
        return Ok(killed);
    };
    let now_status = p.tracker.show(bead).ok().flatten().map(|b| b.status);
    let slug = p.entry.slug.as_str();
    match (now_status, &after) {
        (Some(BeadStatus::Closed), _) => killed.then = "closed",
        (_, AfterKill::Requeue) => {
            p.tracker
                .reopen(bead, "braids: its worker was killed by a person; requeued")
                .map_err(|e| anyhow!("{slug}: killed, but {bead} could not be reopened: {e}"))?;
            crate::retry::store::Store::in_dir(&inst.paths.braids_dir)
                .update(|a| a.forget(&p.entry.path, bead))?;
        }
        (_, AfterKill::Block(reason)) => {
            p.tracker
                .block(bead, &format!("killed by a person: {reason}"))
                .map_err(|e| anyhow!("{slug}: killed, but {bead} could not be blocked: {e}"))?;
            killed.then = "blocked";
            killed.reason = Some(reason.clone());
        }
    }
    let mut told = vec![Draft::new(Kind::Killed)
        .bead(bead)
        .with("session", &killed.session)
        .with("then", killed.then)
        .with("reason", &killed.reason)];
    if killed.then != "closed" {
        crate::lifecycle::record_tracker(
            &p.entry.path,
            &format!("braids: {bead} {} by a person", killed.then),
        );
    }
    if let (AfterKill::Block(reason), "blocked") = (&after, killed.then) {
        told.push(
            Draft::new(Kind::BeadBlocked)
                .bead(bead)
                .with("reason", reason)
                .with("by", "braids kill --block"),
        );
    }
    crate::events::emit(&p.entry.path, slug, told);
    Ok(killed)
}
