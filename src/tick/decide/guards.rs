//! The guards `decide` applies on top of the contract's rules, each a small pure function:
//! the release-storm guard, the retry backoff filter, and the provider breaker's gate.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};

use super::{Gate, Release};
use crate::model::BeadId;

/// The key a held claim is remembered by between runs: its directory (or slug) and bead.
pub fn held_key(r: &Release) -> String {
    let owner = r
        .claim
        .path
        .as_ref()
        .map_or(r.claim.project.clone(), |p| p.display().to_string());
    format!("{owner}/{}", r.claim.bead)
}

/// Releasing more than half of the claims, and at least three, at once is what a backend that
/// misreports every worker gone would make braids do. Such a run keeps the releases it already
/// held last run (the workers really are gone: a reboot) and holds the rest. Returns the held
/// ones; `releases` keeps those to make.
#[must_use]
pub fn hold_releases(
    releases: &mut Vec<Release>,
    claims: usize,
    held_before: &BTreeSet<String>,
) -> Vec<Release> {
    if !super::is_kill_storm(claims, releases.len()) {
        return Vec::new();
    }
    let (go, held): (Vec<Release>, Vec<Release>) = std::mem::take(releases)
        .into_iter()
        .partition(|r| held_before.contains(&held_key(r)));
    *releases = go;
    held
}

/// Whether a ready bead is past its retry backoff; when it is not, `wake_at` is brought
/// forward to when it will be.
pub fn not_waiting(
    waiting: Option<&BTreeMap<BeadId, DateTime<Utc>>>,
    bead: &BeadId,
    now: DateTime<Utc>,
    wake_at: &mut Option<DateTime<Utc>>,
) -> bool {
    match waiting.and_then(|w| w.get(bead)) {
        Some(&t) if t > now => {
            *wake_at = Some(wake_at.map_or(t, |w| w.min(t)));
            false
        }
        _ => true,
    }
}

/// The global slots the provider breaker leaves: all when closed, one probe, or none.
#[must_use]
pub fn gated(global: Option<usize>, gate: Gate) -> Option<usize> {
    match gate {
        Gate::Open => global,
        Gate::Probe => Some(global.map_or(1, |g| g.min(1))),
        Gate::Shut => Some(0),
    }
}
