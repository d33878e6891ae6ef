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

#[cfg(test)]
mod tests {
    use chrono::Duration;

    use super::super::test_support::*;
    use super::*;
    use crate::protocol::{Status, Step};

    #[test]
    fn orphaned_steps_table() {
        // (step running for s, a live session carries its bead) → a failed attempt now
        let rows = [
            (300, false, true),
            (300, true, false),
            (60, false, false), // inside the grace a new worker needs to show up
        ];
        for (secs, held, orphaned) in rows {
            let mut v = story(Step::Impl, Status::Running, 1);
            v.running_since = Some(now() - Duration::seconds(secs));
            let s = snap(vec![project("a").story(id("a-1"), v)], vec![]);
            let bead = id("a-1");
            let live: BTreeSet<&BeadId> = held.then_some(&bead).into_iter().collect();
            let got = orphaned_steps(&s, &live, now());
            assert_eq!(got.len(), usize::from(orphaned), "{secs}s, held={held}");
        }
    }

    #[test]
    fn waits_for_the_state_file_table() {
        let done = {
            let mut v = story(Step::Done, Status::Pass, 1);
            v.done = true;
            v
        };
        let under_way = story(Step::Review, Status::NeedsHuman, 1);
        // (single state file, another story's state) → a-2 waits
        let rows = [
            (true, Some(under_way.clone()), true),
            (true, Some(done), false),
            (true, None, false),
            (false, Some(under_way), false),
        ];
        for (single, other, waits) in rows {
            let mut p = project("a").single_state(single);
            if let Some(v) = other.clone() {
                p = p.story(id("a-1"), v);
            }
            let got = waits_for_the_state_file(&p.build(), &id("a-2"));
            assert_eq!(got, waits, "single={single} {other:?}");
        }
    }
}
