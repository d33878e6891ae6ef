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
            // In review: braids' for as long as its pull request is open, held by no worker;
            // the claim's work is done.
            BeadLookup::Known(BeadStatus::InProgress)
                if p.reviews.iter().any(|r| r.bead == c.bead) =>
            {
                out.settled.push(release());
                false
            }
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

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::*;

    #[test]
    fn of_stopped_table() {
        use BeadLookup::Known;
        use BeadStatus::*;
        // (why it was stopped, its bead, a claim on it) → released at once
        let rows = [
            (ZombieReason::Timeout, Known(InProgress), true, true),
            (ZombieReason::Stalled, Known(InProgress), true, true),
            (ZombieReason::StepTimeout, Known(InProgress), true, true),
            (ZombieReason::WorkerGone, Known(InProgress), true, true),
            (ZombieReason::BeadClosed, Known(InProgress), true, false), // closed by hand
            (ZombieReason::Timeout, Known(Closed), true, false),
            (ZombieReason::Timeout, Known(InProgress), false, false), // nothing claimed
        ];
        for (reason, status, claimed, released) in rows {
            let mut s = snap(vec![project("a").bead(id("a-1"), status)], vec![]);
            if claimed {
                s.claims = vec![claim("a", "a-1", 1)];
            }
            let z = Zombie {
                session: session("a", "a-1", true, 60),
                reason,
                owner: None,
            };
            let got = of_stopped(&s, &Owners::of(&s), &[z]);
            let want: Vec<Release> = match released {
                true => vec![release("a", &claim("a", "a-1", 1))],
                false => vec![],
            };
            assert_eq!(got, want, "{reason} {status:?} claimed={claimed}");
        }
    }

    #[derive(Debug, PartialEq)]
    enum Fate {
        Released,
        Settled,
        Kept,
        /// Kept until its grace ends, this many seconds from now.
        Grace(i64),
    }

    #[test]
    fn of_claims_table() {
        use crate::protocol::{Status, Step};
        use BeadLookup::Known;
        use BeadStatus::*;
        let review = story(Step::Review, Status::NeedsHuman, 1);
        // (claim's age in minutes, its bead, its worker: running / ended / none, waits for a
        // person, backend error) → fate; the grace is 120 s
        let rows = [
            (5, Known(InProgress), None, false, false, Fate::Released),
            (1, Known(InProgress), None, false, false, Fate::Grace(60)),
            (
                1,
                Known(InProgress),
                Some(false),
                false,
                false,
                Fate::Released,
            ), // it ended
            (5, Known(InProgress), Some(true), false, false, Fate::Kept), // it runs
            (5, Known(InProgress), None, true, false, Fate::Kept),        // a review
            (5, Known(InProgress), None, false, true, Fate::Kept),        // its workers unseen
            (5, Known(Closed), None, false, false, Fate::Settled),
            (5, Known(Open), None, false, false, Fate::Settled),
            (5, BeadLookup::Missing, None, false, false, Fate::Settled),
            (5, BeadLookup::Unknown, None, false, false, Fate::Kept), // the tracker failed
        ];
        for (mins, status, worker, waits, unseen, want) in rows {
            let mut p = project("a").bead(id("a-1"), status);
            if waits {
                p = p.story(id("a-1"), review.clone());
            }
            if unseen {
                p = p.backend_error(Some("slurmctld is down".into()));
            }
            let sessions = worker.map(|running| session("a", "a-1", running, 30));
            let mut s = snap(vec![p], sessions.into_iter().collect());
            let c = claim("a", "a-1", mins);
            s.claims = vec![c.clone()];
            let owners = Owners::of(&s);
            let w = super::super::zombies::find_zombies(&s, &owners, now());
            let f = of_claims(&s, &owners, &w, vec![], now());
            let got = match (&f.releases[..], &f.settled[..], f.grace_ends) {
                ([r], [], None) if *r == release("a", &c) => Fate::Released,
                ([], [r], None) if *r == release("a", &c) => Fate::Settled,
                ([], [], Some(t)) => Fate::Grace((t - now()).num_seconds()),
                ([], [], None) => Fate::Kept,
                other => panic!("{other:?}"),
            };
            assert_eq!(got, want, "{mins} min, {status:?}, worker {worker:?}");
        }
    }

    #[test]
    fn an_old_claim_found_by_slug_learns_its_directory() {
        use BeadLookup::Known;
        // (the tracker's answer) → upgraded
        for (status, upgraded) in [
            (Known(BeadStatus::InProgress), true),
            (BeadLookup::Unknown, false), // the slug may have found the wrong project
            (Known(BeadStatus::Closed), false), // settled, nothing to remember
        ] {
            let mut s = snap(vec![project("a").bead(id("a-1"), status)], vec![]);
            let mut c = claim("a", "a-1", 1);
            c.path = None;
            s.claims = vec![c];
            let owners = Owners::of(&s);
            let w = super::super::zombies::find_zombies(&s, &owners, now());
            let f = of_claims(&s, &owners, &w, vec![], now());
            assert_eq!(f.upgrades.len(), usize::from(upgraded), "{status:?}");
        }
    }
}
