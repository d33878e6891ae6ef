//! Replies people write on the forge issues that are a project's beads (`Tracker: github` or
//! `gitlab`), acted on as the commands they stand for: a reply to the agent's question is
//! `braids answer`, `/approve [note]` and `/reject <reason>` from someone with write access
//! are `braids approve` and `braids reject` of a plan or of held work. Run after each tick,
//! once its lock is released (the commands take it), by `braids tick` and the daemon alike.

use anyhow::Result;
use chrono::{DateTime, Utc};

use crate::config::installation::Installation;
use crate::events::waiting::{self, WaitKind};
use crate::model::BeadStatus;
use crate::tracker::said::Said;
use crate::tracker::TrackerKind;

use super::{answer, beads};

/// A tick, then the replies on issues (outside its lock): what `braids tick` runs.
pub fn tick(
    inst: &Installation,
    opts: crate::tick::TickOptions,
    now: DateTime<Utc>,
) -> Result<crate::tick::TickReport> {
    let dry = opts.dry_run;
    crate::forge::tracker::next_run();
    let report = crate::tick::run(inst, opts, now)?;
    if !dry {
        for line in take(inst, Utc::now()) {
            tracing::info!("{line}");
        }
    }
    Ok(report)
}

/// One scheduled run of the daemon: [`tick`] with the default options.
pub fn scheduled_run(paths: &crate::system::paths::Paths) -> Result<crate::tick::TickReport> {
    let inst = crate::config::installation::open(paths)?;
    tick(&inst, crate::tick::TickOptions::default(), Utc::now())
}

/// What was heard and done, one line each, for the run's log.
pub fn take(inst: &Installation, now: DateTime<Utc>) -> Vec<String> {
    let registry = crate::format::registry::read_registry(&inst.paths).value;
    let mut out = Vec::new();
    for entry in registry.entries {
        let config = crate::format::project::read_project(&entry.path).value;
        let kind =
            crate::tick::observe::tracker_kind(&config, inst.config.tracker.kind, &entry.path);
        if !matches!(kind, TrackerKind::Github | TrackerKind::Gitlab) {
            continue;
        }
        let slug = entry.slug.clone();
        if let Err(e) = project(inst, entry, now, &mut out) {
            out.push(format!("{slug}: cannot read replies on its issues: {e:#}"));
        }
    }
    out
}

fn project(
    inst: &Installation,
    entry: crate::format::registry::RegistryEntry,
    now: DateTime<Utc>,
    out: &mut Vec<String>,
) -> Result<()> {
    let slug = entry.slug.clone();
    let opened = beads::Opened::open(inst, entry, true)?;
    if opened.paused() {
        return Ok(());
    }
    let blocked: Vec<_> = opened
        .tracker
        .list()?
        .into_iter()
        .filter(|b| b.status == BeadStatus::Blocked)
        .collect();
    let ids = blocked.iter().map(|b| b.id.as_str()).collect();
    let waits = waiting::waiting(&opened.journal(), &ids);
    for bead in &blocked {
        let Some(wait) = waits.get(bead.id.as_str()) else {
            continue;
        };
        if !(wait.kind.answerable() || wait.kind == WaitKind::Held) {
            continue;
        }
        let target = format!("{slug}:{}", bead.id);
        let mut acted = false;
        for said in opened.tracker.said_since_asked(&bead.id)? {
            let done = match (wait.kind, said) {
                (_, Said::NotAllowed { author }) => opened
                    .tracker
                    .tell(
                        &bead.id,
                        &format!("@{author} only people with write access to the repository can `/approve` or `/reject` here; your reply was not acted on."),
                    )
                    .map(|()| format!("{target}: {author} may not approve or reject; told so"))
                    .map_err(Into::into),
                // The first reply that stands for what the bead waits for is acted on.
                _ if acted => continue,
                (WaitKind::Question, Said::Answer { author, text }) => {
                    acted = true;
                    answer::answer_from_forge(inst, &target, &text, &author, now)
                        .map(|_| format!("{target}: answered by {author} on the issue"))
                }
                (WaitKind::Approval | WaitKind::Held, Said::Approve { author, note }) => {
                    acted = true;
                    answer::approve_as(inst, &target, note.as_deref(), Some(&author), now)
                        .map(|_| format!("{target}: approved by {author} on the issue"))
                }
                (WaitKind::Approval | WaitKind::Held, Said::Reject { author, reason }) => {
                    acted = true;
                    answer::reject(inst, &target, &format!("{reason} ({author}, on the issue)"))
                        .map(|_| format!("{target}: rejected by {author} on the issue"))
                }
                // A ruling where a question waits, or words where a ruling does: discussion.
                _ => continue,
            };
            out.push(done.unwrap_or_else(|e| format!("{target}: {e:#}")));
        }
    }
    Ok(())
}
