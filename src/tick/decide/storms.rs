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
