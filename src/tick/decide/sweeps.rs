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
            let ended = |c: &crate::tick::orchestrator_state::Claim| {
                releases.iter().chain(settled).any(|r| r.claim == *c)
            };
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

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::super::{owners::Owners, zombies::find_zombies, BeadLookup};
    use super::*;
    use crate::model::BeadStatus;
    use crate::protocol::{Status, Step};

    #[test]
    fn sweeps_table() {
        // (what a-1 has) → its worktree is live
        let rows = [
            ("nothing", false),
            ("a running session", true),
            ("a running session under another slug", true),
            ("an ended session", false),
            ("a kept claim", true),
            ("a released claim", false),
            ("a settled claim", false),
            ("a story under way", true),
            ("a story done", false),
        ];
        for (what, live) in rows {
            let mut p = project("a").bead(id("a-1"), BeadLookup::Known(BeadStatus::InProgress));
            let mut sessions = vec![];
            let mut claims = vec![];
            let (mut released, mut settled) = (vec![], vec![]);
            let c = claim("a", "a-1", 1);
            match what {
                "a running session" => sessions.push(session("a", "a-1", true, 60)),
                "a running session under another slug" => {
                    sessions.push(session("zz", "a-1", true, 60));
                }
                "an ended session" => sessions.push(session("a", "a-1", false, 60)),
                "a kept claim" => claims.push(c),
                "a released claim" => {
                    released.push(release("a", &c));
                    claims.push(c);
                }
                "a settled claim" => {
                    settled.push(release("a", &c));
                    claims.push(c);
                }
                "a story under way" => {
                    p = p.story(id("a-1"), story(Step::Impl, Status::Pending, 1))
                }
                "a story done" => p = p.story(id("a-1"), story(Step::Done, Status::Pass, 1)),
                _ => {}
            }
            let mut s = snap(vec![p, project("b")], sessions);
            s.claims = claims;
            let w = find_zombies(&s, &Owners::of(&s), now());
            let got = sweeps(&s, &w, &released, &settled);
            assert_eq!(got.len(), 2, "one per project");
            assert_eq!(got[0].live.contains(&id("a-1")), live, "{what}");
            let b_live = what == "a running session under another slug";
            assert_eq!(got[1].live.contains(&id("a-1")), b_live, "{what}: b");
        }
    }
}
