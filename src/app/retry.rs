//! `braids retry <bead>`: a person says "try this one again now". Its failure count and backoff
//! are forgotten and, when blocked (or left claimed by a worker that is gone), it is open again;
//! the next run spawns it.

use anyhow::{anyhow, bail, Result};
use serde::Serialize;

use crate::config::installation::Installation;
use crate::events::{Draft, Kind};
use crate::model::BeadStatus;

use super::beads;
use crate::events::waiting::{self, WaitKind};

/// What a retry did.
#[derive(Debug, Serialize)]
pub struct Retried {
    pub project: String,
    pub bead: String,
    /// The status it had.
    pub from: BeadStatus,
    /// Failed attempts forgotten.
    pub forgotten_failures: usize,
}

pub fn retry(inst: &Installation, target: &str) -> Result<Retried> {
    let held = beads::hold_ticks(&inst.paths)?;
    let found = beads::locate(inst, target, true)?;
    let (p, bead) = (&found.project, &found.bead);
    let slug = p.entry.slug.as_str();
    match bead.status {
        BeadStatus::Closed => bail!("{} is closed; there is nothing to retry", bead.id),
        BeadStatus::Deferred => bail!(
            "{} is deferred in the tracker, a person's decision; undefer it there first",
            bead.id
        ),
        _ => {}
    }
    let sessions = inst.backend.list()?;
    if let Some(s) = beads::live_session(&sessions, slug, &bead.id) {
        bail!(
            "{} is running now in {}; `braids kill {} --requeue` ends that run first",
            bead.id,
            s.label,
            bead.id
        );
    }
    let waits = waiting::waiting(&p.journal(), &[bead.id.as_str()].into_iter().collect());
    if waits
        .get(bead.id.as_str())
        .is_some_and(|w| w.kind == WaitKind::Approval)
    {
        bail!(
            "{} waits for a review of its plan: approve it (`braids approve {}`) or reject it (`braids reject {} --reason …`); a retry would approve it unread",
            bead.id,
            bead.id,
            bead.id
        );
    }
    p.refuse_if_paused(&bead.id)?;
    let store = crate::retry::store::Store::in_dir(&inst.paths.braids_dir);
    let forgotten = store.update(|a| {
        let n = a
            .record(&p.entry.path, &bead.id)
            .map_or(0, |r| r.since_success());
        a.forget(&p.entry.path, &bead.id);
        n
    })?;
    // A retry starts the bead afresh: a pull request it had is no longer its (the next
    // attempt opens one again, on the same branch).
    crate::review_records::remove(&inst.paths, slug, &bead.id);
    if matches!(bead.status, BeadStatus::Blocked | BeadStatus::InProgress) {
        p.tracker
            .reopen(&bead.id, "braids: retried by a person")
            .map_err(|e| anyhow!("{slug}: {} could not be reopened: {e}", bead.id))?;
        crate::lifecycle::record_tracker(
            &p.entry.path,
            &format!("braids: {} retried by a person", bead.id),
        );
    }
    crate::events::emit(
        &p.entry.path,
        slug,
        vec![Draft::new(Kind::Retried)
            .bead(&bead.id)
            .with("from", bead.status.as_str())
            .with("forgotten_failures", forgotten)],
    );
    drop(held);
    crate::tick::orchestrator_state::wake(&inst.paths, crate::tick::orchestrator_state::WAKE_WAIT);
    Ok(Retried {
        project: slug.to_string(),
        bead: bead.id.to_string(),
        from: bead.status,
        forgotten_failures: forgotten,
    })
}
