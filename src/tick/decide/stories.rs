//! What the tick decides about protocol stories beyond their sessions (CONTRACTS 10.5): a
//! step marked running whose worker is gone is a failed attempt of its story.

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};

use super::{OrphanedStep, Snapshot};
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
