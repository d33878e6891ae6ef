//! The pure decision at the centre of a tick: what was observed, plus the clock, in; a
//! [`Plan`] out. No I/O, no clock reads, no randomness — so every rule of CONTRACTS 2.x is a
//! table test away from proof.
//!
//! `decide` is a composition of named rules, each a pure function in its own file with its
//! own table test. They apply in this order:
//! 1. `owners`: which project a session or claim belongs to. A claim is its project's by
//!    directory (2.10), and a worker started before its project's slug was renamed runs on
//!    under the old label, that project's worker when the claim made with it says so.
//! 2. `zombies::find_zombies` (2.6), per session: not running → excluded from the count (and
//!    forgotten); bead closed or deleted → kill; runtime over WorkerTimeout → kill; quiet past
//!    StallTimeout → kill; a protocol step past its `timeout_min` → kill; otherwise healthy.
//!    Bead status is always consulted before runtime.
//! 3. `storms::hold_kills` (2.12): a mass loss of the running sessions kills none.
//! 4. `unreadable::hold_unreadable`: a session record that cannot be read counts as running
//!    (never killed, its bead never respawned): braids does not guess.
//! 5. `releases::of_stopped`, `releases::of_claims`: a stopped worker's claim is released at
//!    once; a claim whose worker is gone and whose bead is still in_progress after the grace
//!    period is released; one whose bead left in_progress is forgotten.
//! 6. `stories` (10.5, 10.10): protocol steps whose worker is gone, `blocked_by` updates.
//! 7. `storms::hold_releases` (2.12): a mass loss of the claims releases only those held last
//!    run.
//! 8. `slots` (2.2, 2.3) over `scope` (4.3, 6.1, 2.13): only projects with exactly one active
//!    iteration are offered `MaxWorkers − healthy` slots, within the global cap and the
//!    provider breaker; projects by priority (high, normal, low), ties in registry order;
//!    within a project, ready beads in the iteration's Stories order (with no Stories, every
//!    ready bead in the tracker's order). A bead with a live session is never spawned twice.
//! 9. `deadlines::wake_at` (2.7): the idle backoff never sleeps past the next deadline.
//! 10. `idle::reason` (2.7) when nothing spawns: no-active-iterations, else all-at-capacity
//!     when a project had ready beads but no room, else no-ready-beads.
//! 11. `sweeps`: the workspaces no worker can still be using.
//! 12. `retries::decide` (2.13): which ends of workers this run are failed attempts of their
//!     beads (a stop for time or a stall, a claim whose worker vanished).

use chrono::{DateTime, Utc};

use crate::model::BeadStatus;
pub use crate::retry::breaker::Gate;

mod deadlines;
mod eligibility;
mod idle;
mod owners;
mod plan;
mod releases;
mod retries;
mod scope;
mod slots;
mod snapshot;
mod stories;
mod storms;
mod sweeps;
mod unreadable;
mod view_builder;
mod workers;
mod zombies;

pub use eligibility::{budget_hold, claw_eligibility, eligibility_of, Eligibility};
pub use plan::{
    DependencyUpdate, KillStorm, OrphanedStep, Plan, ProjectSpawns, Release, Slot, SpawnCandidate,
    SpawnProject, Sweep, Upgrade, STAND_INS,
};
pub use retries::{kill_failure, FailedAttempt, Retries};
pub use scope::{in_scope, spawn_order};
pub use snapshot::{ProjectView, Snapshot};
pub use storms::{held_key, is_mass_loss};
pub use view_builder::ProjectViewBuilder;
use workers::Workers;
pub use zombies::{classify, SessionVerdict, Zombie, ZombieOwner, ZombieReason};

/// What a tracker said about one bead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BeadLookup {
    Known(BeadStatus),
    /// The tracker answered and the bead does not exist: treated as closed (a deleted bead
    /// needs no worker).
    Missing,
    /// The tracker could not be asked.
    Unknown,
}

/// Decides a run. Pure: same snapshot and clock, same plan.
pub fn decide(snap: &Snapshot, now: DateTime<Utc>) -> Plan {
    let owners = owners::Owners::of(snap);
    let workers = zombies::find_zombies(snap, &owners, now);
    let (workers, kill_storm) = storms::hold_kills(snap, &owners, workers);
    let unreadable = unreadable::labels(snap);
    let workers = unreadable::hold_unreadable(&unreadable, &owners, workers);
    let stopped = releases::of_stopped(snap, &owners, &workers.zombies);
    let claims = releases::of_claims(snap, &owners, &workers, stopped, now);
    let orphaned_steps = stories::orphaned_steps(snap, &workers.held_anywhere(), now);
    let dependency_updates = stories::dependency_updates(snap);
    let (releases, held, workers) = storms::hold_releases(snap, &owners, claims.releases, workers);
    let global_slots = slots::global_slots(snap, &workers);
    let found = slots::spawns(snap, &workers, &releases, global_slots, now);
    // An open pull request is looked at by every scheduled run: a red check or a merge is
    // acted on within one interval, however long the idle backoff.
    let watching = snap.projects.iter().any(|p| !p.reviews.is_empty());
    let looks_again = !releases.is_empty() || !held.is_empty() || watching;
    let wake_at = deadlines::wake_at(snap, claims.grace_ends, found.backoff, looks_again, now);
    let sweeps = sweeps::sweeps(snap, &workers, &releases, &claims.settled);
    let retries = retries::decide(snap, &workers.zombies, &releases, now);
    Plan {
        retries,
        orphaned_steps,
        dependency_updates,
        sweeps,
        zombies: workers.zombies,
        ended: workers.ended,
        unmanaged: workers.unmanaged,
        healthy: workers.healthy,
        spawns: found.spawns,
        global_slots,
        releases,
        settled_claims: claims.settled,
        upgrades: claims.upgrades,
        idle_reason: idle::reason(found.found),
        errors: found.errors,
        kill_storm,
        held,
        wake_at,
        probe: snap.gate == Gate::Probe,
    }
}

#[cfg(test)]
mod test_support;
#[cfg(test)]
mod tests;
