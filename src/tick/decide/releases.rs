//! What becomes of each claim braids made (2.5, 2.10, 4.6): released when its worker is gone
//! and its bead still in_progress, forgotten when its bead left in_progress, kept otherwise.
//! A claim is its project's by directory (by slug for one an older braids recorded), so a
//! renamed slug keeps its claims and a row pointing a slug at another project's directory
//! never settles a claim against that project's tracker.

use chrono::{DateTime, Utc};

use super::owners::{lookup, Owners};
use super::{BeadLookup, Release, Snapshot, Upgrade, Workers, Zombie, ZombieReason};
use crate::model::BeadStatus;

/// Every claim's fate this run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[must_use]
pub struct ClaimFates {
    /// Stranded: handed back to the tracker.
    pub releases: Vec<Release>,
    /// Their bead left in_progress or no longer exists: forgotten.
    pub settled: Vec<Release>,
    /// Old claims matched by slug, from now on remembered with their directory.
    pub upgrades: Vec<Upgrade>,
    /// The earliest moment a kept claim may be released: the end of its grace.
    pub grace_ends: Option<DateTime<Utc>>,
}

/// A worker stopped for its time or a stall, or whose agent outlived it, with a claim on a
/// bead still in_progress: released as soon as it is killed, not after the claim's grace (act
/// skips it when the kill fails). Pure.
#[must_use]
pub fn of_stopped(snap: &Snapshot, owners: &Owners<'_>, zombies: &[Zombie]) -> Vec<Release> {
    let stopped = |z: &&Zombie| {
        matches!(
            z.reason,
            ZombieReason::Timeout
                | ZombieReason::Stalled
                | ZombieReason::StepTimeout
                | ZombieReason::WorkerGone
        )
    };
    zombies
        .iter()
        .filter(stopped)
        .filter_map(|z| {
            let owner = owners.of_label(&z.session.label)?;
            let bead = z.session.label.bead();
            let claim = snap
                .claims
                .iter()
                .find(|c| &c.bead == bead && c.belongs_to(&owner.slug, &owner.path))?;
            let in_progress = lookup(owner, bead) == BeadLookup::Known(BeadStatus::InProgress);
            in_progress.then(|| Release {
                slug: owner.slug.clone(),
                bead: claim.bead.clone(),
                claim: claim.clone(),
            })
        })
        .collect()
}

/// Every claim, after the workers are known and `stopped` (from [`of_stopped`]) released. A
/// claim whose project the registry lost for a while is kept: forgetting it would strand its
/// bead in_progress for good. Pure.
pub fn of_claims(
    snap: &Snapshot,
    owners: &Owners<'_>,
    w: &Workers<'_>,
    stopped: Vec<Release>,
    now: DateTime<Utc>,
) -> ClaimFates {
    let held_anywhere = w.held_anywhere();
    let mut out = ClaimFates {
        releases: stopped,
        ..ClaimFates::default()
    };
    for c in &snap.claims {
        let Some(p) = owners.of_claim(c) else {
            continue;
        };
        let status = lookup(p, &c.bead);
        let release = || Release {
            slug: p.slug.clone(),
            bead: c.bead.clone(),
            claim: c.clone(),
        };
        // Its worker started and ended: gone for sure, released now whatever its age.
        let worker_ended = w.ended.iter().any(|s| {
            s.label.bead() == &c.bead && owners.of_label(&s.label).is_some_and(|o| o.path == p.path)
        });
        let kept = match status {
            // A live session carrying the bead under any label may be its worker.
            _ if held_anywhere.contains(&c.bead) => true,
            _ if out.releases.iter().any(|r| r.claim == *c) => true,
            // Its backend could not be asked: the worker may well be running, unseen.
            _ if p.backend_error.is_some() => true,
            // A story waiting for a person keeps its claim, and holds no slot (no session).
            BeadLookup::Known(BeadStatus::InProgress)
                if p.protocol.get(&c.bead).is_some_and(|v| v.waits_for_human) =>
            {
                true
            }
            BeadLookup::Known(BeadStatus::InProgress)
                if worker_ended || now - c.claimed_at >= snap.claim_grace =>
            {
                out.releases.push(release());
                false
            }
            // A worker not started yet, or not seen yet: the grace covers it.
            BeadLookup::Known(BeadStatus::InProgress) => {
                let end = c.claimed_at + snap.claim_grace;
                out.grace_ends = Some(out.grace_ends.map_or(end, |g| g.min(end)));
                true
            }
            BeadLookup::Unknown => true,
            BeadLookup::Known(_) | BeadLookup::Missing => {
                out.settled.push(release());
                false
            }
        };
        // The tracker knows the bead, so the slug found the right project: remember its
        // directory from now on.
        if kept && c.path.is_none() && matches!(status, BeadLookup::Known(_)) {
            out.upgrades.push(Upgrade {
                claim: c.clone(),
                path: p.path.clone(),
            });
        }
    }
    out
}
