//! Capacity (2.2, 2.3): which projects are offered slots, how many, and the candidates that
//! fill them, projects by priority (high, normal, low) with ties in registry order. Every live
//! braids session counts against the optional global cap, orphans included, and the provider
//! breaker gates what is left (2.14).

use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::idle::Found;
use super::scope::{in_scope, startable};
use super::{
    Eligibility, Gate, ProjectSpawns, ProjectView, Release, Snapshot, SpawnCandidate, SpawnProject,
    Workers, STAND_INS,
};
use crate::model::{Bead, BeadStatus, IterationName};

/// The global slots left: `None` without a global cap, then as the breaker lets through.
#[must_use]
pub fn global_slots(snap: &Snapshot, w: &Workers<'_>) -> Option<usize> {
    let cap = snap.global_max_workers as usize;
    gated((cap > 0).then(|| cap.saturating_sub(w.total())), snap.gate)
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

/// A project's free slots: none while its budget holds it, else `MaxWorkers − healthy`; one
/// `.ai/STATE.json` holds one story, so a second worker would only be refused.
#[must_use]
pub fn project_slots(p: &ProjectView, healthy: usize) -> usize {
    if p.held_by_budget.is_some() {
        return 0;
    }
    let max = match p.single_state {
        true => p.max_workers.min(1),
        false => p.max_workers,
    };
    (max as usize).saturating_sub(healthy)
}

/// The spawns of a run and what looking for them found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[must_use]
pub struct Spawns {
    /// In scheduling order.
    pub spawns: Vec<ProjectSpawns>,
    /// Projects whose candidates cannot be made (a path a spawn message cannot carry).
    pub errors: Vec<String>,
    /// What the idle reason is chosen from.
    pub found: Found,
    /// The earliest end of a retry backoff a ready bead waits out.
    pub backoff: Option<DateTime<Utc>>,
}

/// Every eligible project's share of this run, in scheduling order. Pure.
pub fn spawns(
    snap: &Snapshot,
    w: &Workers<'_>,
    releases: &[Release],
    global: Option<usize>,
    now: DateTime<Utc>,
) -> Spawns {
    let mut out = Spawns::default();
    let mut order: Vec<(usize, &ProjectView)> = snap.projects.iter().enumerate().collect();
    order.sort_by_key(|(i, p)| (p.priority, *i));
    for (_, p) in order {
        let Eligibility::Eligible { iteration } = p.eligibility else {
            continue;
        };
        out.found.eligible = true;
        if p.tracker_error.is_some() {
            continue;
        }
        if p.preflight_error.is_some() || p.backend_error.is_some() {
            out.found.unstartable |= p
                .ready
                .iter()
                .any(|b| b.status == BeadStatus::Open && in_scope(&p.stories, &b.id));
            continue;
        }
        let (ready, wake) = startable(snap, p, w, releases, now);
        out.backoff = [out.backoff, wake].into_iter().flatten().min();
        let slots = project_slots(p, w.healthy.get(&p.slug).copied().unwrap_or(0));
        // A project at capacity needs one candidate to know that ready work is waiting; one
        // with room needs its slots plus a few stand-ins for claims refused in a race. Building
        // a candidate for every ready bead cost 14 MB over 1,000 projects of 20 beads.
        let wanted = if slots == 0 { 1 } else { slots + STAND_INS };
        let candidates = match candidates(p, iteration, ready, wanted) {
            Ok(c) if !c.is_empty() => c,
            Ok(_) => continue,
            Err(e) => {
                out.errors.push(e);
                continue;
            }
        };
        out.found.ready = true;
        if slots == 0 {
            out.found.starved = true;
            continue;
        }
        out.spawns.push(ProjectSpawns {
            slug: p.slug.clone(),
            slots,
            candidates,
        });
    }
    if global == Some(0) && !out.spawns.is_empty() {
        out.found.starved = true;
    }
    out.found.paused = snap.gate != Gate::Open && global == Some(0);
    out
}

/// Up to `wanted` candidates from `ready`, each bead once, sharing the project's part; an
/// error when the project's slug or directory cannot make a label or spawn message. Pure.
pub fn candidates(
    p: &ProjectView,
    iteration: IterationName,
    ready: Vec<&Bead>,
    wanted: usize,
) -> Result<Vec<SpawnCandidate>, String> {
    let mut out: Vec<SpawnCandidate> = Vec::with_capacity(wanted.min(ready.len()));
    let mut shared: Option<Arc<SpawnProject>> = None;
    for b in ready {
        if out.len() == wanted {
            break;
        }
        if out.iter().any(|c| c.bead == b.id) {
            continue;
        }
        let project = match &shared {
            Some(s) => Arc::clone(s),
            None => {
                let made = SpawnProject {
                    slug: p.slug.clone(),
                    iteration,
                    path: p.path.clone(),
                    channel: p.channel.clone(),
                    worker_timeout: p.worker_timeout,
                    placement: p.placement.clone(),
                };
                shared.insert(Arc::new(made.checked(&b.id)?)).clone()
            }
        };
        out.push(SpawnCandidate {
            bead: b.id.clone(),
            title: b.title.clone(),
            weight: p.protocol.get(&b.id).map_or(1, |v| v.weight),
            project,
        });
    }
    Ok(out)
}
