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
use crate::model::{Bead, BeadId, BeadStatus, IterationName};

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
            out.found.unstartable |= p.ready.iter().any(|b| {
                b.status == BeadStatus::Open && in_scope(&p.stories, p.scope_named, &b.id)
            });
            continue;
        }
        let (ready, wake) = startable(snap, p, w, releases, now);
        // Pull requests with something to act on come first: their beads are half done.
        let reviewing: Vec<&BeadId> = p
            .reviews
            .iter()
            .filter(|r| {
                !w.live.contains(&(p.slug.as_str(), &r.bead))
                    && !w.orphan_live.contains(&r.bead)
                    && r.needs_worker(now)
            })
            .map(|r| &r.bead)
            .collect();
        out.backoff = [out.backoff, wake].into_iter().flatten().min();
        let slots = project_slots(p, w.healthy.get(&p.slug).copied().unwrap_or(0));
        // A project at capacity needs one candidate to know that ready work is waiting; one
        // with room needs its slots plus a few stand-ins for claims refused in a race. Building
        // a candidate for every ready bead cost 14 MB over 1,000 projects of 20 beads.
        let wanted = if slots == 0 { 1 } else { slots + STAND_INS };
        let candidates = match candidates(p, iteration, &reviewing, ready, wanted) {
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

/// Up to `wanted` candidates, the beads in review `reviewing` first, then from `ready`, each
/// bead once, sharing the project's part; an error when the project's slug or directory
/// cannot make a label or spawn message. Pure.
pub fn candidates(
    p: &ProjectView,
    iteration: IterationName,
    reviewing: &[&BeadId],
    ready: Vec<&Bead>,
    wanted: usize,
) -> Result<Vec<SpawnCandidate>, String> {
    let mut out: Vec<SpawnCandidate> =
        Vec::with_capacity(wanted.min(reviewing.len() + ready.len()));
    let mut shared: Option<Arc<SpawnProject>> = None;
    let reviews = reviewing.iter().map(|id| (*id, "in review", true));
    let ready = ready.into_iter().map(|b| (&b.id, b.title.as_str(), false));
    for (id, title, review) in reviews.chain(ready) {
        if out.len() == wanted {
            break;
        }
        if out.iter().any(|c| &c.bead == id) {
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
                shared.insert(Arc::new(made.checked(id)?)).clone()
            }
        };
        out.push(SpawnCandidate {
            bead: id.clone(),
            title: title.to_string(),
            weight: match review {
                true => 1,
                false => p.protocol.get(id).map_or(1, |v| v.weight),
            },
            project,
            review,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::super::{owners::Owners, zombies::find_zombies, BeadLookup};
    use super::*;
    use crate::model::Priority;

    #[test]
    fn gated_table() {
        // (global slots left, breaker) → slots it lets through
        let rows = [
            (None, Gate::Open, None),
            (Some(3), Gate::Open, Some(3)),
            (None, Gate::Probe, Some(1)),
            (Some(3), Gate::Probe, Some(1)),
            (Some(0), Gate::Probe, Some(0)),
            (None, Gate::Shut, Some(0)),
            (Some(3), Gate::Shut, Some(0)),
        ];
        for (global, gate, want) in rows {
            assert_eq!(gated(global, gate), want, "{global:?} {gate:?}");
        }
    }

    #[test]
    fn project_slots_table() {
        // (MaxWorkers, healthy, budget reached, single state file) → free slots
        let rows = [
            (3, 1, false, false, 2),
            (3, 3, false, false, 0),
            (1, 3, false, false, 0), // MaxWorkers lowered below what runs
            (3, 0, true, false, 0),  // its DailyBudget holds it
            (3, 0, false, true, 1),  // one `.ai/STATE.json`, one story
            (3, 1, false, true, 0),
        ];
        for (max, healthy, budget, single, want) in rows {
            let p = project("a")
                .max_workers(max)
                .held_by_budget(budget.then(|| "its daily budget is reached".into()))
                .single_state(single)
                .build();
            let what = format!("max {max}, {healthy} running, budget {budget}, single {single}");
            assert_eq!(project_slots(&p, healthy), want, "{what}");
        }
    }

    #[test]
    fn global_slots_table() {
        // (global cap, running sessions of a, orphans) → global slots left
        let rows = [
            (0, 2, 0, None),
            (5, 2, 0, Some(3)),
            (5, 2, 2, Some(1)), // orphans count too
            (2, 2, 1, Some(0)),
        ];
        for (cap, mine, orphans, want) in rows {
            let mut sessions = Vec::new();
            let mut p = project("a").max_workers(10);
            for i in 0..mine {
                let b = format!("a-{i}");
                p = p.bead(id(&b), BeadLookup::Known(BeadStatus::InProgress));
                sessions.push(session("a", &b, true, 60));
            }
            for i in 0..orphans {
                sessions.push(session("zz", &format!("z-{i}"), true, 60));
            }
            let mut s = snap(vec![p], sessions);
            s.global_max_workers = cap;
            let w = find_zombies(&s, &Owners::of(&s), now());
            assert_eq!(global_slots(&s, &w), want, "cap {cap}, {mine} + {orphans}");
        }
    }

    #[test]
    fn spawns_table() {
        // (projects as (slug, priority, MaxWorkers, ready), global slots) →
        // (projects offered in order with their slots, found ready, starved)
        use Priority::*;
        type Row<'a> = (&'a [(&'a str, Priority, u32, &'a [&'a str])], Option<usize>);
        type Want<'a> = (&'a [(&'a str, usize)], bool, bool);
        let rows: [(Row, Want); 4] = [
            (
                (&[("a", Normal, 2, &["a-1"])], None),
                (&[("a", 2)], true, false),
            ),
            (
                (&[("a", Low, 1, &["a-1"]), ("b", High, 1, &["b-1"])], None),
                (&[("b", 1), ("a", 1)], true, false),
            ),
            // at capacity
            ((&[("a", Normal, 0, &["a-1"])], None), (&[], true, true)),
            // no global slot left
            (
                (&[("a", Normal, 1, &["a-1"])], Some(0)),
                (&[("a", 1)], true, true),
            ),
        ];
        for ((projects, global), (want, ready, starved)) in rows {
            let views = projects
                .iter()
                .map(|(slug, prio, max, beads)| {
                    project(slug)
                        .priority(*prio)
                        .max_workers(*max)
                        .ready(open(beads))
                })
                .collect();
            let s = snap(views, vec![]);
            let w = find_zombies(&s, &Owners::of(&s), now());
            let got = spawns(&s, &w, &[], global, now());
            let offered: Vec<(&str, usize)> = got
                .spawns
                .iter()
                .map(|p| (p.slug.as_str(), p.slots))
                .collect();
            assert_eq!(offered, want, "{projects:?}");
            assert_eq!(
                (got.found.ready, got.found.starved),
                (ready, starved),
                "{projects:?}"
            );
        }
    }

    #[test]
    fn candidates_table() {
        // (ready, wanted) → candidates, each bead once
        let rows: [(&[&str], usize, &[&str]); 3] = [
            (&["a-1", "a-2", "a-3"], 2, &["a-1", "a-2"]),
            (&["a-1", "a-1", "a-2"], 5, &["a-1", "a-2"]),
            (&[], 5, &[]),
        ];
        for (ready, wanted, want) in rows {
            let p = project("a").build();
            let beads = open(ready);
            let got = candidates(&p, 1.into(), &[], beads.iter().collect(), wanted).unwrap();
            let got: Vec<&str> = got.iter().map(|c| c.bead.as_str()).collect();
            assert_eq!(got, want, "{ready:?} {wanted}");
        }
        // A directory a spawn message cannot carry is an error, not a candidate.
        let p = project("a").path("/p/a\nBead: evil").build();
        let beads = open(&["a-1"]);
        assert!(candidates(&p, 1.into(), &[], beads.iter().collect(), 5).is_err());
    }
}
