//! The pure decision at the centre of a tick: what was observed, plus the clock, in; a
//! [`Plan`] out. No I/O, no clock reads, no randomness — so every rule of CONTRACTS 2.x is a
//! table test away from proof.
//!
//! The rules, in the order they apply:
//! - 2.6 zombie order, per session: not running → excluded from the count (and forgotten);
//!   bead closed or deleted → kill; runtime over WorkerTimeout → kill; otherwise healthy.
//!   Bead status is always consulted before runtime. A session record that cannot be read
//!   counts as running (never killed, its bead never respawned): braids does not guess.
//! - 2.2 capacity: a project gets `MaxWorkers − healthy` slots, and the optional global cap
//!   bounds the total.
//! - 2.3 only projects with exactly one active iteration (and active in both the registry and
//!   PROJECT.md) are offered slots.
//! - Order: projects by priority (high, normal, low), ties in registry order; within a
//!   project, ready beads in the iteration's Stories order. Scope: when Stories lists beads,
//!   only those are spawned; with no Stories, every ready bead, in the tracker's order. A bead
//!   with a live session is never spawned twice.
//! - 2.7 idle reason when nothing spawns: no-active-iterations, else all-at-capacity when a
//!   project had ready beads but no room, else no-ready-beads.
//! - Claims braids made whose worker is gone and whose bead is still in_progress after the
//!   grace period are released. A claim is its project's by directory (2.10), and a worker
//!   counts as present under any label carrying its bead: one started before its project's
//!   slug was renamed runs on under the old slug, and is that project's worker when the claim
//!   made with it says so.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use chrono::{DateTime, Utc};

use crate::model::{Bead, BeadId, BeadStatus, SessionLabel};
pub use crate::retry::breaker::Gate;
use crate::workspace::WorkspaceMode;

mod deadlines;
mod eligibility;
mod guards;
mod idle;
mod plan;
mod retries;
mod snapshot;
mod stories;
mod zombie;

pub use eligibility::{budget_hold, claw_eligibility, eligibility_of, Eligibility};
pub use guards::held_key;
pub use plan::{
    DependencyUpdate, KillStorm, OrphanedStep, Plan, ProjectSpawns, Release, Slot, SpawnCandidate,
    SpawnProject, Sweep, Upgrade, STAND_INS,
};
pub use retries::{kill_failure, FailedAttempt, Retries};
pub use snapshot::{ProjectView, Snapshot};
pub use zombie::{classify, SessionVerdict, Zombie, ZombieOwner, ZombieReason};

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

/// The kill-storm guard: killing more than half of the running sessions, and at least three,
/// at once is what a backend that misreports (a restarted tmux server, an unreadable `/proc`)
/// would make braids do, so such a run kills none. Pure.
#[must_use]
pub fn is_kill_storm(running: usize, killing: usize) -> bool {
    killing >= 3 && killing * 2 > running
}

/// Iteration scope: when the active iteration lists Stories, only those beads are worked;
/// with no Stories, every ready bead is in scope (4.3).
pub fn in_scope(stories: &[BeadId], bead: &BeadId) -> bool {
    stories.is_empty() || stories.contains(bead)
}

fn lookup(p: &ProjectView, bead: &BeadId) -> BeadLookup {
    p.beads.get(bead).copied().unwrap_or(BeadLookup::Unknown)
}

/// Ready beads in the order a project offers them: the active iteration's Stories first, in
/// their order (a bead's first place counts), then the rest in the tracker's order.
pub fn spawn_order<'a>(
    stories: &[BeadId],
    ready: impl IntoIterator<Item = &'a Bead>,
) -> Vec<&'a Bead> {
    let mut ready: Vec<(usize, usize, &Bead)> = ready
        .into_iter()
        .enumerate()
        .map(|(i, b)| (usize::MAX, i, b))
        .collect();
    // Each story's first place: looked up in the list itself when both are short (a plan's
    // few candidates), else in a table sorted by id. Called per project twice a run.
    let mut story_at: Vec<(&BeadId, usize)> = Vec::new();
    let linear = ready.len() * stories.len() <= 256;
    if !linear {
        story_at = stories.iter().zip(0..).collect();
        story_at.sort();
        story_at.dedup_by(|later, first| later.0 == first.0);
    }
    for (place, _, b) in &mut ready {
        let found = match linear {
            true => stories.iter().position(|s| *s == b.id),
            false => story_at
                .binary_search_by(|(s, _)| (*s).cmp(&b.id))
                .ok()
                .map(|at| story_at[at].1),
        };
        *place = found.unwrap_or(usize::MAX);
    }
    ready.sort_by_key(|(story, i, _)| (*story, *i));
    ready.into_iter().map(|(_, _, b)| b).collect()
}

/// Decides a run. Pure: same snapshot and clock, same plan.
pub fn decide(snap: &Snapshot, now: DateTime<Utc>) -> Plan {
    let by_slug: BTreeMap<&str, &ProjectView> =
        snap.projects.iter().map(|p| (p.slug.as_str(), p)).collect();

    let by_path: BTreeMap<&Path, &ProjectView> = snap
        .projects
        .iter()
        .map(|p| (p.path.as_path(), p))
        .collect();
    // A worker started before its project's slug was renamed runs on under the old label. The
    // claim made with it names that label and, by directory, the project: it is that project's
    // worker, counted against its MaxWorkers and under its zombie rules.
    let renamed: BTreeMap<(&str, &BeadId), &ProjectView> = snap
        .claims
        .iter()
        .filter(|c| !by_slug.contains_key(c.project.as_str()))
        .filter_map(|c| {
            let p = by_path.get(c.path.as_deref()?)?;
            Some(((c.project.as_str(), &c.bead), *p))
        })
        .collect();
    let owner_of = |l: &SessionLabel| {
        by_slug
            .get(l.slug())
            .or_else(|| renamed.get(&(l.slug(), l.bead())))
            .copied()
    };

    // 2.6, session by session.
    let mut zombies = Vec::new();
    let mut ended = Vec::new();
    let mut unmanaged = Vec::new();
    let mut healthy: BTreeMap<String, usize> =
        snap.projects.iter().map(|p| (p.slug.clone(), 0)).collect();
    // Beads with a running session, healthy or about to be killed: never spawned again this run.
    let mut live: BTreeSet<(&str, &BeadId)> = BTreeSet::new();
    // Beads a worker may hold under a label of no registered project: a slug renamed (or a row
    // lost) while its workers run. Not spawned again, and never released as stranded.
    let mut orphan_live: BTreeSet<&BeadId> = BTreeSet::new();
    let mut errors = Vec::new();
    // An unreadable record counts as its session running (`problems::standing` tells it).
    let unreadable: Vec<Option<SessionLabel>> = snap
        .unreadable
        .iter()
        .map(|p| p.label.as_deref().and_then(|l| SessionLabel::parse(l).ok()))
        .collect();
    for s in &snap.sessions {
        let bead = s.label.bead();
        if s.running && !by_slug.contains_key(s.label.slug()) {
            orphan_live.insert(bead);
        }
        let Some(p) = owner_of(&s.label) else {
            // A session of a project missing from the registry (removed, or its row unreadable
            // for a while): an orphan. It still counts against the global cap, and the zombie
            // rules that need no PROJECT.md still apply: ended → forgotten, too old → killed.
            match classify(
                s,
                BeadLookup::Unknown,
                snap.orphan_timeout_secs,
                (0, None),
                false,
                now,
            ) {
                SessionVerdict::Ended => ended.push(s.clone()),
                SessionVerdict::Kill(reason) => zombies.push(Zombie {
                    session: s.clone(),
                    reason,
                    owner: None,
                }),
                SessionVerdict::Healthy => unmanaged.push(s.clone()),
            }
            continue;
        };
        if s.running {
            live.insert((p.slug.as_str(), bead));
        }
        let stall = (
            p.stall_timeout,
            snap.activity.get(&s.label.to_string()).copied(),
        );
        let finishing = snap.finishing.contains(&s.label.to_string());
        match classify(s, lookup(p, bead), p.worker_timeout, stall, finishing, now) {
            SessionVerdict::Ended => ended.push(s.clone()),
            SessionVerdict::Kill(reason) => zombies.push(Zombie {
                session: s.clone(),
                reason,
                owner: Some(ZombieOwner {
                    slug: p.slug.clone(),
                    path: p.path.clone(),
                    timeout_secs: p.worker_timeout,
                    stall_secs: p.stall_timeout,
                }),
            }),
            SessionVerdict::Healthy => match p.protocol.get(bead) {
                // A protocol step past its own timeout_min is a zombie before its
                // WorkerTimeout: its story records the timeout (seed 002, the poller).
                Some(v) if v.deadline.is_some_and(|d| now > d) => zombies.push(Zombie {
                    session: s.clone(),
                    reason: ZombieReason::StepTimeout,
                    owner: Some(ZombieOwner {
                        slug: p.slug.clone(),
                        path: p.path.clone(),
                        timeout_secs: p.worker_timeout,
                        stall_secs: p.stall_timeout,
                    }),
                }),
                // A team step's session holds a slot per role (2.2).
                story => {
                    *healthy.entry(p.slug.clone()).or_default() += story.map_or(1, |v| v.weight)
                }
            },
        }
    }
    // The kill-storm guard: the zombies are left running and counted as the workers they may
    // well be, so their beads are neither released nor spawned again.
    let running = snap.sessions.iter().filter(|s| s.running).count();
    let kill_storm =
        (is_kill_storm(running, zombies.len()) && !snap.allow_mass_kill).then(|| KillStorm {
            would_kill: zombies.len(),
            running,
            projects: zombies
                .iter()
                .filter_map(|z| owner_of(&z.session.label).map(|p| p.slug.clone()))
                .collect(),
        });
    if kill_storm.is_some() {
        let held = std::mem::take(&mut zombies);
        for s in snap.sessions.iter().filter(|s| {
            held.iter()
                .any(|z| z.session.id == s.id && z.session.label == s.label)
        }) {
            match owner_of(&s.label) {
                Some(p) => {
                    *healthy.entry(p.slug.clone()).or_default() += 1;
                    live.insert((p.slug.as_str(), s.label.bead()));
                }
                None => unmanaged.push(s.clone()),
            }
        }
    }
    for label in &unreadable {
        if let Some(l) = label.as_ref().filter(|l| !by_slug.contains_key(l.slug())) {
            orphan_live.insert(l.bead());
        }
        let held = label
            .as_ref()
            .and_then(|l| Some((owner_of(l)?, l.bead())))
            .filter(|(p, bead)| live.insert((p.slug.as_str(), bead)));
        if let Some((p, _)) = held {
            *healthy.entry(p.slug.clone()).or_default() += 1;
        }
    }

    // A worker stopped for its time or a stall, or whose agent outlived it, with a claim:
    // released as soon as it is killed, not after the claim's grace (act skips it when the
    // kill fails).
    let mut releases = Vec::new();
    for z in &zombies {
        let (Some(owner), true) = (
            owner_of(&z.session.label),
            matches!(
                z.reason,
                ZombieReason::Timeout
                    | ZombieReason::Stalled
                    | ZombieReason::StepTimeout
                    | ZombieReason::WorkerGone
            ),
        ) else {
            continue;
        };
        let claim = snap.claims.iter().find(|c| {
            &c.bead == z.session.label.bead()
                && match &c.path {
                    Some(path) => path == &owner.path,
                    None => c.project == owner.slug,
                }
        });
        let in_progress =
            lookup(owner, z.session.label.bead()) == BeadLookup::Known(BeadStatus::InProgress);
        if let (Some(c), true) = (claim, in_progress) {
            releases.push(Release {
                slug: owner.slug.clone(),
                bead: c.bead.clone(),
                claim: c.clone(),
            });
        }
    }

    // Claims whose worker is gone. A claim is its project's by directory (by slug for one an
    // older braids recorded), so a renamed slug keeps its claims and a row pointing a slug at
    // another project's directory never settles a claim against that project's tracker.
    let held_anywhere: BTreeSet<&BeadId> = live
        .iter()
        .map(|(_, b)| *b)
        .chain(orphan_live.iter().copied())
        .collect();
    let mut settled_claims = Vec::new();
    // The earliest moment a kept claim may be released: the end of its grace.
    let mut grace_ends: Option<DateTime<Utc>> = None;
    let mut upgrades = Vec::new();
    for c in &snap.claims {
        let owner = match &c.path {
            Some(path) => by_path.get(path.as_path()),
            None => by_slug.get(c.project.as_str()),
        };
        // A project missing from the registry (a row deleted or garbled for a while) keeps
        // its claims: forgetting them would strand their beads in_progress for good.
        let Some(p) = owner else {
            continue;
        };
        let status = lookup(p, &c.bead);
        let release = || Release {
            slug: p.slug.clone(),
            bead: c.bead.clone(),
            claim: c.clone(),
        };
        // Its worker started and ended: gone for sure, released now whatever its age.
        let worker_ended = ended.iter().any(|s| {
            s.label.bead() == &c.bead && owner_of(&s.label).is_some_and(|o| o.path == p.path)
        });
        // A live session carrying the bead under any label may be its worker.
        let kept = match status {
            _ if held_anywhere.contains(&c.bead) => true,
            _ if releases.iter().any(|r| r.claim == *c) => true,
            // Its backend could not be asked: the worker may well be running, unseen.
            _ if p.backend_error.is_some() => true,
            // A story waiting for a person keeps its claim, and holds no slot (no session).
            BeadLookup::Known(BeadStatus::InProgress)
                if p.protocol.get(&c.bead).is_some_and(|v| v.waits_for_human) =>
            {
                true
            }
            BeadLookup::Known(BeadStatus::InProgress)
                if worker_ended || now - c.claimed_at >= snap.claim_grace =>
            {
                releases.push(release());
                false
            }
            // A worker not started yet, or not seen yet: the grace covers it.
            BeadLookup::Known(BeadStatus::InProgress) => {
                let end = c.claimed_at + snap.claim_grace;
                grace_ends = Some(grace_ends.map_or(end, |g| g.min(end)));
                true
            }
            BeadLookup::Unknown => true,
            BeadLookup::Known(_) | BeadLookup::Missing => {
                settled_claims.push(release());
                false
            }
        };
        // The tracker knows the bead, so the slug found the right project: remember its
        // directory from now on.
        if kept && c.path.is_none() && matches!(status, BeadLookup::Known(_)) {
            upgrades.push(Upgrade {
                claim: c.clone(),
                path: p.path.clone(),
            });
        }
    }

    // Protocol steps marked running whose worker is gone: failed attempts, recorded at once.
    let orphaned_steps = stories::orphaned_steps(snap, &held_anywhere, now);
    // Stories whose recorded `blocked_by` differs from the tracker's open dependencies.
    let dependency_updates = stories::dependency_updates(snap);

    // The release-storm guard: a backend that briefly reports every worker gone would make
    // every claim look stranded. Such a run releases none of them that it did not already hold
    // the run before, and counts them as the workers they may well be.
    let held = guards::hold_releases(&mut releases, snap.claims.len(), &snap.held_before);
    for r in &held {
        *healthy.entry(r.slug.clone()).or_default() += 1;
        if let Some(p) = by_slug.get(r.slug.as_str()) {
            live.insert((p.slug.as_str(), &r.claim.bead));
        }
    }

    // 2.2 / 2.3 / ordering.
    // Every live braids session counts against the global cap, orphans included.
    let total_healthy: usize = healthy.values().sum::<usize>() + unmanaged.len();
    let global_slots = guards::gated(
        (snap.global_max_workers > 0)
            .then(|| (snap.global_max_workers as usize).saturating_sub(total_healthy)),
        snap.gate,
    );
    // The idle backoff never sleeps past the earliest moment something can change (2.7).
    let mut wake_at = [
        (snap.gate != Gate::Open)
            .then_some(snap.next_probe)
            .flatten(),
        grace_ends,
        deadlines::earliest(snap, now),
        // Released or held back this run: the next scheduled run looks again.
        (!releases.is_empty() || !held.is_empty()).then_some(now),
    ]
    .into_iter()
    .flatten()
    .min();
    let mut order: Vec<(usize, &ProjectView)> = snap.projects.iter().enumerate().collect();
    order.sort_by_key(|(i, p)| (p.priority, *i));

    let mut spawns = Vec::new();
    let mut any_eligible = false;
    let mut any_ready = false;
    let mut starved = false;
    let mut unstartable = false;
    for (_, p) in order {
        let Eligibility::Eligible { iteration } = p.eligibility else {
            continue;
        };
        any_eligible = true;
        if p.tracker_error.is_some() {
            continue;
        }
        if p.preflight_error.is_some() || p.backend_error.is_some() {
            unstartable |= p
                .ready
                .iter()
                .any(|b| b.status == BeadStatus::Open && in_scope(&p.stories, &b.id));
            continue;
        }
        let released: BTreeSet<&BeadId> = releases
            .iter()
            .filter(|r| r.slug == p.slug)
            .map(|r| &r.bead)
            .collect();
        let waiting = snap.waiting.get(&p.path);
        let ready = spawn_order(
            &p.stories,
            p.ready.iter().filter(|b| {
                b.status == BeadStatus::Open
                    && in_scope(&p.stories, &b.id)
                    && !live.contains(&(p.slug.as_str(), &b.id))
                    && !orphan_live.contains(&b.id)
                    && !released.contains(&b.id)
                    && !stories::waits_for_dependencies(p, &b.id)
                    && !stories::waits_for_the_state_file(p, &b.id)
                    && guards::not_waiting(waiting, &b.id, now, &mut wake_at)
            }),
        );
        let slots = if p.held_by_budget.is_some() {
            0
        } else {
            // One `.ai/STATE.json` holds one story: a second worker would only be refused.
            let max = match p.single_state {
                true => p.max_workers.min(1),
                false => p.max_workers,
            };
            (max as usize).saturating_sub(healthy.get(&p.slug).copied().unwrap_or(0))
        };
        // A project at capacity needs one candidate to know that ready work is waiting; one
        // with room needs its slots plus a few stand-ins for claims refused in a race. Building
        // a candidate for every ready bead cost 14 MB over 1,000 projects of 20 beads.
        let wanted = if slots == 0 { 1 } else { slots + STAND_INS };
        let mut candidates: Vec<SpawnCandidate> = Vec::with_capacity(wanted.min(ready.len()));
        let mut shared: Option<std::sync::Arc<SpawnProject>> = None;
        for b in ready {
            if candidates.len() == wanted {
                break;
            }
            if candidates.iter().any(|c| c.bead == b.id) {
                continue;
            }
            let project = match &shared {
                Some(s) => std::sync::Arc::clone(s),
                None => {
                    let made = SpawnProject {
                        slug: p.slug.clone(),
                        iteration,
                        path: p.path.clone(),
                        channel: p.channel.clone(),
                        worker_timeout: p.worker_timeout,
                        placement: p.placement.clone(),
                    };
                    match made.checked(&b.id) {
                        Ok(s) => shared.insert(std::sync::Arc::new(s)).clone(),
                        Err(e) => {
                            errors.push(e);
                            break;
                        }
                    }
                }
            };
            candidates.push(SpawnCandidate {
                bead: b.id.clone(),
                title: b.title.clone(),
                weight: p.protocol.get(&b.id).map_or(1, |v| v.weight),
                project,
            });
        }
        if candidates.is_empty() {
            continue;
        }
        any_ready = true;
        if slots == 0 {
            starved = true;
            continue;
        }
        spawns.push(ProjectSpawns {
            slug: p.slug.clone(),
            slots,
            candidates,
        });
    }
    if global_slots == Some(0) && !spawns.is_empty() {
        starved = true;
    }

    let idle_reason = idle::reason(idle::Found {
        eligible: any_eligible,
        ready: any_ready,
        starved,
        unstartable,
        paused: snap.gate != Gate::Open && global_slots == Some(0),
    });

    // Workspaces no worker can still be using: every bead with a running session (a zombie
    // too, until its kill is confirmed by a later run) or a claim kept this run (neither
    // released nor settled) is live.
    let sweeps = snap
        .projects
        .iter()
        .map(|p| {
            // A worker under a label of no registered project may be this project's, renamed.
            let mut beads: BTreeSet<BeadId> = live
                .iter()
                .filter(|(slug, _)| *slug == p.slug)
                .map(|(_, b)| (*b).clone())
                .chain(orphan_live.iter().map(|b| (*b).clone()))
                .collect();
            // A protocol story's worktree lasts from its first step to its landing.
            beads.extend(
                p.protocol
                    .iter()
                    .filter(|(_, v)| !v.done)
                    .map(|(b, _)| b.clone()),
            );
            beads.extend(
                snap.claims
                    .iter()
                    .filter(|c| c.belongs_to(&p.slug, &p.path))
                    .filter(|c| {
                        !releases
                            .iter()
                            .chain(&settled_claims)
                            .any(|r| r.claim == **c)
                    })
                    .map(|c| c.bead.clone()),
            );
            Sweep {
                slug: p.slug.clone(),
                path: p.path.clone(),
                live: beads.into_iter().collect(),
                shared: p.workspace == WorkspaceMode::Shared,
            }
        })
        .collect();
    let retries = retries::decide(snap, &zombies, &releases, now);
    Plan {
        retries,
        orphaned_steps,
        dependency_updates,
        sweeps,
        zombies,
        ended,
        unmanaged,
        healthy,
        spawns,
        global_slots,
        releases,
        settled_claims,
        upgrades,
        idle_reason,
        errors,
        kill_storm,
        held,
        wake_at,
        probe: snap.gate == Gate::Probe,
    }
}

#[cfg(test)]
mod tests;
