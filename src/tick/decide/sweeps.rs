//! Workspaces no worker can still be using. Every bead with a running session (a zombie too,
//! until its kill is confirmed by a later run), a protocol story not yet landed, or a claim
//! kept this run (neither released nor settled) is live; every other worktree of the project
//! is removed.

use std::collections::BTreeSet;

use super::{Release, Snapshot, Sweep, Workers};
use crate::model::BeadId;
use crate::workspace::WorkspaceMode;

/// One sweep per registered project. Pure.
#[must_use]
pub fn sweeps(
    snap: &Snapshot,
    w: &Workers<'_>,
    releases: &[Release],
    settled: &[Release],
) -> Vec<Sweep> {
    snap.projects
        .iter()
        .map(|p| {
            // A worker under a label of no registered project may be this project's, renamed.
            let mut beads: BTreeSet<BeadId> = (w.live.iter())
                .filter(|(slug, _)| *slug == p.slug)
                .map(|(_, b)| (*b).clone())
                .chain(w.orphan_live.iter().map(|b| (*b).clone()))
                .collect();
            // A protocol story's worktree lasts from its first step to its landing.
            beads.extend(
                (p.protocol.iter())
                    .filter(|(_, v)| !v.done)
                    .map(|(b, _)| b.clone()),
            );
            let ended =
                |c: &crate::state::Claim| releases.iter().chain(settled).any(|r| r.claim == *c);
            beads.extend(
                (snap.claims.iter())
                    .filter(|c| c.belongs_to(&p.slug, &p.path) && !ended(c))
                    .map(|c| c.bead.clone()),
            );
            Sweep {
                slug: p.slug.clone(),
                path: p.path.clone(),
                live: beads.into_iter().collect(),
                shared: p.workspace == WorkspaceMode::Shared,
            }
        })
        .collect()
}
