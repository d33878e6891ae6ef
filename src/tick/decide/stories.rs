//! What the tick decides about protocol stories beyond their sessions: a step marked running
//! whose worker is gone is a failed attempt of its story (CONTRACTS 10.5); a story waits for
//! its open dependencies with no slot, its `blocked_by` set and cleared from the tracker
//! (CONTRACTS 10.10).

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};

use super::{DependencyUpdate, OrphanedStep, ProjectView, Snapshot};
use crate::model::BeadId;

/// Steps marked running with no session carrying their bead, after the grace a new worker
/// needs to show up as a session. Pure.
#[must_use]
pub fn orphaned_steps(
    snap: &Snapshot,
    held: &BTreeSet<&BeadId>,
    now: DateTime<Utc>,
) -> Vec<OrphanedStep> {
    snap.projects
        .iter()
        .flat_map(|p| {
            p.protocol.iter().filter_map(move |(bead, v)| {
                let since = v.running_since?;
                (now - since >= snap.claim_grace && !held.contains(bead)).then(|| OrphanedStep {
                    slug: p.slug.clone(),
                    path: p.path.clone(),
                    bead: bead.clone(),
                    step: v.step,
                })
            })
        })
        .collect()
}

/// Whether the tracker says the story of `bead` waits for open dependencies: it is not
/// spawned and holds no slot. Pure.
#[must_use]
pub fn waits_for_dependencies(p: &ProjectView, bead: &BeadId) -> bool {
    p.dependencies.get(bead).is_some_and(|w| !w.open.is_empty())
}

/// Whether the story of `bead` waits for the project's single `.ai/STATE.json`, which another
/// story not yet done holds (`ProtocolState: single`): it is not spawned and holds no slot,
/// rather than started to be refused. Such a project also runs one worker at most. Pure.
#[must_use]
pub fn waits_for_the_state_file(p: &ProjectView, bead: &BeadId) -> bool {
    p.single_state && p.protocol.iter().any(|(b, v)| b != bead && !v.done)
}

/// The stories whose recorded `blocked_by` is not what the tracker says this run: set for a
/// story that now waits (one not started gets its state), cleared for one whose dependencies
/// closed. Pure.
#[must_use]
pub fn dependency_updates(snap: &Snapshot) -> Vec<DependencyUpdate> {
    snap.projects
        .iter()
        .flat_map(|p| {
            p.dependencies.iter().filter_map(move |(bead, w)| {
                let open = &w.open;
                let recorded = p.protocol.get(bead);
                let differs = match recorded {
                    Some(v) => !v.done && v.blocked_by != *open,
                    None => !open.is_empty(),
                };
                differs.then(|| DependencyUpdate {
                    slug: p.slug.clone(),
                    path: p.path.clone(),
                    bead: bead.clone(),
                    open: open.clone(),
                    first: w.first,
                })
            })
        })
        .collect()
}
