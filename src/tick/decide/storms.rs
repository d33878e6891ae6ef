//! The storm guards: a backend that misreports (a restarted tmux server, an unreadable
//! `/proc`, every worker briefly gone) would make one run kill or release most of what runs.
//! Losing more than half, and at least three, at once is that signature ([`is_mass_loss`]);
//! such a run kills none and holds the releases it did not already hold last run, and counts
//! them as the workers they may well be.

use std::collections::BTreeSet;

use super::owners::Owners;
use super::{KillStorm, Release, Snapshot, Workers};

/// Whether losing `losing` of `running` at once (sessions killed, claims released) is more
/// than half of them and at least three: what a misreporting backend would make braids do.
#[must_use]
pub fn is_mass_loss(running: usize, losing: usize) -> bool {
    losing >= 3 && losing * 2 > running
}

/// The kill-storm guard (2.12): when this run's zombies are a mass loss of the running
/// sessions and `--allow-mass-kill` was not given, none is killed; each is counted as the
/// worker it may well be, so its bead is neither released nor spawned again.
#[must_use]
pub fn hold_kills<'a>(
    snap: &'a Snapshot,
    owners: &Owners<'a>,
    mut w: Workers<'a>,
) -> (Workers<'a>, Option<KillStorm>) {
    let running = snap.sessions.iter().filter(|s| s.running).count();
    if !is_mass_loss(running, w.zombies.len()) || snap.allow_mass_kill {
        return (w, None);
    }
    let storm = KillStorm {
        would_kill: w.zombies.len(),
        running,
        projects: (w.zombies.iter())
            .filter_map(|z| owners.of_label(&z.session.label).map(|p| p.slug.clone()))
            .collect(),
    };
    let spared = std::mem::take(&mut w.zombies);
    let sessions = snap
        .sessions
        .iter()
        .filter(|s| (spared.iter()).any(|z| z.session.id == s.id && z.session.label == s.label));
    for s in sessions {
        match owners.of_label(&s.label) {
            Some(p) => w.hold(&p.slug, s.label.bead()),
            None => w.unmanaged.push(s.clone()),
        }
    }
    (w, Some(storm))
}

/// The release-storm guard (2.12): when this run's releases are a mass loss of the claims, the
/// ones already held last run go (the workers really are gone: a reboot) and the rest are
/// held and counted as workers. Returns the releases to make, the held ones, and the workers.
#[must_use]
pub fn hold_releases<'a>(
    snap: &'a Snapshot,
    owners: &Owners<'a>,
    releases: Vec<Release>,
    mut w: Workers<'a>,
) -> (Vec<Release>, Vec<Release>, Workers<'a>) {
    let (go, held) = partition_held(releases, snap.claims.len(), &snap.held_before);
    for r in &held {
        // The claim as the snapshot holds it, which outlives this run's values.
        let claim = snap.claims.iter().find(|c| **c == r.claim);
        match (owners.by_slug(&r.slug), claim) {
            (Some(p), Some(c)) => w.hold(&p.slug, &c.bead),
            _ => *w.healthy.entry(r.slug.clone()).or_default() += 1,
        }
    }
    (go, held, w)
}

/// The releases to make and the ones to hold, out of `releases` of `claims` claims. Pure.
#[must_use]
pub fn partition_held(
    releases: Vec<Release>,
    claims: usize,
    held_before: &BTreeSet<String>,
) -> (Vec<Release>, Vec<Release>) {
    if !is_mass_loss(claims, releases.len()) {
        return (releases, Vec::new());
    }
    releases
        .into_iter()
        .partition(|r| held_before.contains(&held_key(r)))
}

/// The key a held claim is remembered by between runs: its directory (or slug) and bead.
pub fn held_key(r: &Release) -> String {
    let owner = r
        .claim
        .path
        .as_ref()
        .map_or(r.claim.project.clone(), |p| p.display().to_string());
    format!("{owner}/{}", r.claim.bead)
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::super::BeadLookup;
    use super::*;
    use crate::model::BeadStatus;

    #[test]
    fn kill_storm_table() {
        // (running, would kill, storm)
        for (running, killing, storm) in [
            (0, 0, false),
            (2, 2, false), // fewer than three
            (3, 3, true),  // all of them
            (5, 3, true),  // more than half
            (6, 3, false), // exactly half
            (7, 3, false),
            (10, 6, true),
        ] {
            assert_eq!(
                is_mass_loss(running, killing),
                storm,
                "{killing} of {running}"
            );
        }
    }

    #[test]
    fn hold_kills_table() {
        // (running sessions, of them on a closed bead, --allow-mass-kill) →
        // (killed, storm told, slots held by a)
        let rows = [
            (5, 2, false, 2, false, 3),
            (5, 3, false, 0, true, 5), // the spared count as the workers they may be
            (5, 3, true, 3, false, 2),
            (6, 3, false, 3, false, 3), // exactly half: no storm
        ];
        for (running, closed, allow, killed, told, healthy) in rows {
            let mut p = project("a").max_workers(10);
            let mut sessions = Vec::new();
            for i in 0..running {
                let (b, status) = match i < closed {
                    true => (format!("a-{i}"), BeadStatus::Closed),
                    false => (format!("a-{i}"), BeadStatus::InProgress),
                };
                p = p.bead(id(&b), BeadLookup::Known(status));
                sessions.push(session("a", &b, true, 60));
            }
            let mut s = snap(vec![p], sessions);
            s.allow_mass_kill = allow;
            let owners = Owners::of(&s);
            let found = super::super::zombies::find_zombies(&s, &owners, now());
            let (w, storm) = hold_kills(&s, &owners, found);
            let what = format!("{closed} closed of {running}, allow={allow}");
            assert_eq!(w.zombies.len(), killed, "{what}");
            assert_eq!(storm.is_some(), told, "{what}");
            assert_eq!(w.healthy["a"], healthy, "{what}");
            assert_eq!(w.live.len(), running, "{what}: every bead stays live");
        }
    }

    #[test]
    fn partition_held_table() {
        let r = |b: &str| release("a", &claim("a", b, 10));
        let four = || vec![r("a-1"), r("a-2"), r("a-3"), r("a-4")];
        let key = |b: &str| held_key(&r(b));
        // (claims, releases, held last run) → (released, held)
        type Row = (usize, Vec<Release>, Vec<String>, usize, usize);
        let rows: [Row; 5] = [
            (8, four(), vec![], 4, 0), // half of the claims: no storm
            (7, four(), vec![], 0, 4), // more than half: all held
            (7, four(), vec![key("a-1"), key("a-3")], 2, 2), // held last run: released now
            (3, vec![r("a-1"), r("a-2")], vec![], 2, 0), // fewer than three
            (0, vec![], vec![], 0, 0),
        ];
        for (claims, releases, before, go, held) in rows {
            let before = before.into_iter().collect();
            let (g, h) = partition_held(releases, claims, &before);
            assert_eq!(
                (g.len(), h.len()),
                (go, held),
                "{claims} claims, {before:?}"
            );
        }
        assert_eq!(key("a-1"), "/p/a/a-1");
    }
}
