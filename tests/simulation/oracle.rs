//! The oracle: the contracts as checks on each plan and on the world between steps, written
//! from CONTRACTS.md rather than from `decide`.

use std::collections::{BTreeMap, BTreeSet};

use braids::model::{
    BeadId, BeadStatus, IterationStatus, Priority, ProjectStatus, SessionLabel, SpawnMessage,
};
use braids::tick::decide::{BeadLookup, Eligibility, Plan, ProjectView, Snapshot, ZombieReason};
use braids::tick::orchestrator_state::{Claim, IdleReason};
use chrono::{DateTime, Duration, Utc};

use crate::world::{SessM, World, ACTOR};
use crate::Fail;

impl World {
    /// 1.1 differential oracle: every intact, first row reads as written.
    pub fn check_registry_reading(&self) -> Result<(), Fail> {
        if self.registry_exact {
            for e in &self.registry {
                let Some(p) = self.project_at(&e.path) else {
                    return Err((
                        "1.1",
                        format!("registry row {} reads path {}", e.slug, e.path.display()),
                    ));
                };
                let p = &self.projects[p];
                ensure!(
                    e.slug == p.slug,
                    "1.1",
                    "row for {} read as slug {}",
                    p.slug,
                    e.slug
                );
                let want = ProjectStatus::parse(p.reg_status).ok();
                ensure!(
                    e.status == want,
                    "1.1",
                    "{}: status `{}` read as {:?}",
                    p.slug,
                    p.reg_status,
                    e.status
                );
                let want = Priority::parse(p.reg_priority).ok();
                ensure!(
                    e.priority == want,
                    "1.1",
                    "{}: priority `{}` read as {:?}",
                    p.slug,
                    p.reg_priority,
                    e.priority
                );
            }
            let slugs: BTreeSet<&str> = self.registry.iter().map(|e| e.slug.as_str()).collect();
            ensure!(
                slugs.len() == self.registry.len(),
                "1.1",
                "a slug was read twice"
            );
        }
        Ok(())
    }

    /// The oracle for one plan, written from the contracts rather than from `decide`.
    pub fn check_plan(&self, snap: &Snapshot, plan: &Plan) -> Result<Expected, Fail> {
        let now = self.now;
        let by_slug: BTreeMap<&str, &ProjectView> =
            snap.projects.iter().map(|p| (p.slug.as_str(), p)).collect();
        let truth_sessions: Vec<&SessM> = self.sessions.iter().collect();

        // 2.6, session by session, in the contract's order
        let mut want_kill: BTreeMap<&str, ZombieReason> = BTreeMap::new();
        let mut want_ended: BTreeSet<&str> = BTreeSet::new();
        let mut healthy: BTreeMap<String, usize> =
            snap.projects.iter().map(|p| (p.slug.clone(), 0)).collect();
        // Running sessions of projects missing from the registry, left alone: they still count
        // against the global cap.
        let mut orphans = 0;
        // 2.10: a session labelled for a slug no registered project has, for which a claim
        // under that label is remembered, is the worker of the project at the claim's directory
        let owner = |s: &SessM| -> Option<&ProjectView> {
            by_slug.get(s.label.slug()).copied().or_else(|| {
                let c = snap.claims.iter().find(|c| {
                    c.project == s.label.slug() && c.bead == *s.label.bead() && c.path.is_some()
                })?;
                snap.projects
                    .iter()
                    .find(|p| Some(&p.path) == c.path.as_ref())
            })
        };
        for s in &truth_sessions {
            if s.unreadable {
                if let Some(p) = owner(s) {
                    *healthy.get_mut(&p.slug).unwrap() += 1;
                }
                continue;
            }
            let Some(p) = owner(s) else {
                // An orphan: its PROJECT.md is not read, so the rules that need none apply,
                // with the default WorkerTimeout (1.2): ended → forgotten, too old → killed.
                if !s.running {
                    want_ended.insert(&s.id);
                } else if over(now, s.started, DEFAULT_WORKER_TIMEOUT_SECS) {
                    want_kill.insert(&s.id, ZombieReason::Timeout);
                } else {
                    ensure!(
                        plan.unmanaged.iter().any(|u| u.id == s.id),
                        "2.6",
                        "{} of an unregistered project is not reported as unmanaged",
                        s.label
                    );
                    orphans += 1;
                }
                continue;
            };
            if !s.running {
                want_ended.insert(&s.id);
                continue;
            }
            let bead = p
                .beads
                .get(s.label.bead())
                .copied()
                .unwrap_or(BeadLookup::Unknown);
            if matches!(
                bead,
                BeadLookup::Known(BeadStatus::Closed) | BeadLookup::Missing
            ) {
                want_kill.insert(&s.id, ZombieReason::BeadClosed);
            } else if over(now, s.started, p.worker_timeout) {
                want_kill.insert(&s.id, ZombieReason::Timeout);
            } else {
                *healthy.get_mut(&p.slug).unwrap() += 1;
            }
        }
        // The kill-storm guard: more than half of the running sessions, and at least three,
        // are not killed at once; they count as the workers they may be.
        let running = snap.sessions.iter().filter(|s| s.running).count();
        let storm = want_kill.len() >= 3 && want_kill.len() * 2 > running && !snap.allow_mass_kill;
        ensure!(
            storm == plan.kill_storm.is_some(),
            "2.6",
            "{} of {running} running sessions are zombies; the plan's kill-storm guard says {:?}",
            want_kill.len(),
            plan.kill_storm
        );
        if storm {
            for sid in std::mem::take(&mut want_kill).into_keys() {
                let s = truth_sessions.iter().find(|s| s.id == sid).unwrap();
                match owner(s) {
                    Some(p) => *healthy.get_mut(&p.slug).unwrap() += 1,
                    None => orphans += 1,
                }
            }
        }
        let got_kill: BTreeMap<&str, ZombieReason> = plan
            .zombies
            .iter()
            .map(|z| (z.session.id.as_str(), z.reason))
            .collect();
        for (sid, want) in &want_kill {
            let s = truth_sessions.iter().find(|s| s.id == *sid).unwrap();
            ensure!(
                got_kill.get(sid) == Some(want),
                "2.6",
                "{} (started {}, bead {:?}) should be killed for {want:?}, plan says {:?}",
                s.label,
                s.started,
                by_slug
                    .get(s.label.slug())
                    .and_then(|p| p.beads.get(s.label.bead())),
                got_kill.get(sid)
            );
        }
        for (sid, got) in &got_kill {
            ensure!(
                want_kill.contains_key(sid),
                "2.6",
                "session {sid} killed ({got:?}) although it is healthy, ended or unmanaged"
            );
        }
        let got_ended: BTreeSet<&str> = plan.ended.iter().map(|s| s.id.as_str()).collect();
        ensure!(
            got_ended == want_ended,
            "2.6",
            "ended sessions {got_ended:?}, expected {want_ended:?} (not running → excluded)"
        );

        // 2.12 release storm: claims held instead of released count as the workers they may
        // be; a run holds only when it would release more than half of the claims (and at
        // least three) at once, and never a claim it held the run before.
        let would_release = plan.releases.len() + plan.held.len();
        ensure!(
            plan.held.is_empty() || (would_release >= 3 && would_release * 2 > snap.claims.len()),
            "2.12",
            "{} claims held although releasing {would_release} of {} is no storm",
            plan.held.len(),
            snap.claims.len()
        );
        for r in &plan.held {
            let key = braids::tick::decide::held_key(r);
            ensure!(
                !snap.held_before.contains(&key) && snap.claims.contains(&r.claim),
                "2.12",
                "{key} held twice in a row, or not a claim"
            );
            *healthy.entry(r.slug.clone()).or_default() += 1;
        }

        // 2.2 capacity
        for (slug, n) in &healthy {
            ensure!(
                plan.healthy.get(slug).copied().unwrap_or(0) == *n,
                "2.2",
                "{slug}: plan counts {} healthy workers, the world has {n}",
                plan.healthy.get(slug).copied().unwrap_or(0)
            );
        }
        // every live session counts against the global cap, orphans included (2.2)
        let total_healthy: usize = healthy.values().sum::<usize>() + orphans;
        let intended = plan.intended();
        let mut per: BTreeMap<&str, usize> = BTreeMap::new();
        for c in &intended {
            *per.entry(c.slug.as_str()).or_default() += 1;
        }
        for (slug, n) in &per {
            let p = by_slug[slug];
            ensure!(
                healthy[*slug] + n <= p.max_workers as usize,
                "2.2",
                "{slug}: {} healthy + {n} planned > MaxWorkers {}",
                healthy[*slug],
                p.max_workers
            );
        }
        if self.global_max > 0 {
            ensure!(
                intended.is_empty() || total_healthy + intended.len() <= self.global_max as usize,
                "2.2",
                "{total_healthy} healthy + {} planned > global cap {}",
                intended.len(),
                self.global_max
            );
        }
        for ps in &plan.spawns {
            let p = by_slug[ps.slug.as_str()];
            ensure!(
                ps.slots + healthy[&ps.slug] <= p.max_workers as usize,
                "2.2",
                "{}: {} slots offered with {} healthy, MaxWorkers {}",
                ps.slug,
                ps.slots,
                healthy[&ps.slug],
                p.max_workers
            );
        }

        // live beads: running sessions, and unreadable records that may be running
        let live: BTreeSet<(&str, &BeadId)> = truth_sessions
            .iter()
            .filter(|s| s.running || s.unreadable)
            .map(|s| (s.label.slug(), s.label.bead()))
            .collect();
        // beads a worker may hold under a slug no registered project has (renamed since)
        let orphan_held: BTreeSet<&BeadId> = truth_sessions
            .iter()
            .filter(|s| (s.running || s.unreadable) && !by_slug.contains_key(s.label.slug()))
            .map(|s| s.label.bead())
            .collect();
        let mut seen = BTreeSet::new();
        for c in &intended {
            let p = by_slug[c.slug.as_str()];
            // no bead spawned twice
            ensure!(
                seen.insert((c.slug.as_str(), &c.bead)),
                "2.2",
                "{} planned twice in one run",
                c.label()
            );
            ensure!(
                !live.contains(&(c.slug.as_str(), &c.bead)) && !orphan_held.contains(&c.bead),
                "2.2",
                "{} planned while a worker for it may still run (a bead spawned twice)",
                c.label()
            );
            // 2.3: active in the registry and PROJECT.md, exactly one active iteration
            let e = self.registry.iter().find(|e| e.slug == c.slug).unwrap();
            let wp = self.project_at(&e.path).unwrap();
            let actives: Vec<u32> = self.projects[wp]
                .iters
                .iter()
                .filter(|i| i.status == Some(IterationStatus::Active))
                .map(|i| i.number)
                .collect();
            ensure!(
                e.status == Some(ProjectStatus::Active)
                    && self.projects[wp].cfg.status == Some(ProjectStatus::Active),
                "2.3",
                "{} planned for a project that is {:?} in the registry and {:?} in PROJECT.md",
                c.label(),
                e.status,
                self.projects[wp].cfg.status
            );
            ensure!(
                actives == [c.iteration.number()],
                "2.3",
                "{} planned in iteration {} while the active iterations are {actives:?}",
                c.label(),
                c.iteration
            );
            // 4.3 / 4.6: only what the tracker offers as ready and open
            ensure!(
                p.ready
                    .iter()
                    .any(|b| b.id == c.bead && b.status == BeadStatus::Open),
                "4.6",
                "{} planned but the tracker did not list it as open and ready",
                c.label()
            );
            // iteration scope: when Stories lists beads, only those are worked
            ensure!(
                p.stories.is_empty() || p.stories.contains(&c.bead),
                "4.3",
                "{} planned but the iteration's Stories do not list it",
                c.label()
            );
            ensure!(
                p.tracker_error.is_none(),
                "2.2",
                "{} planned although the tracker failed",
                c.label()
            );
            // 2.5: the label
            let want = format!("project:{}:{}", c.slug, c.bead);
            ensure!(
                c.label().to_string() == want,
                "2.5",
                "label {} for {want}",
                c.label()
            );
            ensure!(
                SessionLabel::parse(&want).ok().as_ref() == Some(&c.label()),
                "2.5",
                "label {want} does not read back"
            );
            ensure!(
                want.starts_with(&format!("{}:", SessionLabel::project_prefix(&c.slug))),
                "2.5",
                "label {want} lacks the project:<slug>: prefix"
            );
            // 2.4: four fields, one per line, in order, nothing else
            let text = c.message().to_string();
            let lines: Vec<&str> = text.lines().collect();
            ensure!(
                lines.len() == 4 && text.ends_with('\n') && !text.contains('\r'),
                "2.4",
                "spawn message for {} has {} lines: {text:?}",
                c.label(),
                lines.len()
            );
            let want_lines = [
                format!("Project: {}", p.path.display()),
                format!("Bead: {}", c.bead),
                format!("Iteration: {}", c.iteration),
                format!("Channel: {}", p.channel.clone().unwrap_or_default().trim()),
            ];
            for (got, want) in lines.iter().zip(&want_lines) {
                ensure!(
                    *got == want.as_str(),
                    "2.4",
                    "spawn message line `{got}`, expected `{want}`"
                );
            }
            ensure!(
                SpawnMessage::parse(&text).ok().as_ref() == Some(&c.message()),
                "2.4",
                "spawn message does not read back: {text:?}"
            );
        }

        // A worker the plan stops for its time or a stall is gone once killed: its claim may
        // be released in the same run (2.6, 4.6).
        let stopped: BTreeSet<&str> = plan
            .zombies
            .iter()
            .filter(|z| {
                matches!(
                    z.reason,
                    ZombieReason::Timeout | ZombieReason::Stalled | ZombieReason::StepTimeout
                )
            })
            .map(|z| z.session.id.as_str())
            .collect();
        let live_after: BTreeSet<(&str, &BeadId)> = truth_sessions
            .iter()
            .filter(|s| (s.running || s.unreadable) && !stopped.contains(s.id.as_str()))
            .map(|s| (s.label.slug(), s.label.bead()))
            .collect();
        // releases: only in_progress beads whose worker is gone: ended or stopped now, or never
        // seen within the claim's grace (4.6)
        for r in &plan.releases {
            let p = by_slug.get(r.slug.as_str());
            let l = p.and_then(|p| p.beads.get(&r.bead)).copied();
            ensure!(
                l == Some(BeadLookup::Known(BeadStatus::InProgress)),
                "4.6",
                "plan releases {}:{} whose bead is {l:?}; only in_progress goes back to open",
                r.slug,
                r.bead
            );
            // 2.10: a live session carrying the bead under any label may be its worker
            ensure!(
                !live_after.iter().any(|(_, b)| *b == &r.bead),
                "2.10",
                "plan releases {}:{} while a worker for it may still run",
                r.slug,
                r.bead
            );
            let gone = truth_sessions.iter().any(|s| {
                s.label.bead() == &r.bead
                    && (stopped.contains(s.id.as_str()) || (!s.running && !s.unreadable))
            });
            let claim = snap.claims.iter().find(|c| **c == r.claim);
            ensure!(
                claim.is_some_and(|c| gone || now - c.claimed_at >= snap.claim_grace),
                "2.2",
                "plan releases {}:{} inside the claim grace, its worker not seen gone",
                r.slug,
                r.bead
            );
            // 2.10: a claim goes back through the project at its directory
            let owner = p.map(|p| &p.path);
            ensure!(
                r.claim.bead == r.bead
                    && owner.is_some_and(|path| match &r.claim.path {
                        Some(at) => at == path,
                        None => r.claim.project == r.slug,
                    }),
                "2.10",
                "plan releases {:?} through {} at {owner:?}",
                r.claim,
                r.slug
            );
        }
        // 2.10: a claim is forgotten only by the project at its directory
        for r in &plan.settled_claims {
            let at = by_slug.get(r.slug.as_str()).map(|p| &p.path);
            ensure!(
                snap.claims.contains(&r.claim)
                    && at.is_some_and(|path| match &r.claim.path {
                        Some(claimed) => claimed == path,
                        None => r.claim.project == r.slug,
                    }),
                "2.10",
                "plan forgets {:?} as settled by {} at {at:?}",
                r.claim,
                r.slug
            );
        }

        // 2.10: and every such claim is released, whatever slug its directory has now: a claim
        // that no run can match strands its bead as surely as one forgotten
        for (wp, proj) in self.projects.iter().enumerate() {
            let Some(view) = snap.projects.iter().find(|v| v.path == proj.path) else {
                continue;
            };
            if proj.tracker_down {
                continue;
            }
            let mine = |c: &&Claim| match &c.path {
                Some(at) => *at == proj.path,
                None => proj.aliases.contains(&c.project),
            };
            for c in snap.claims.iter().filter(mine) {
                let stranded = self.bead(wp, &c.bead).is_some_and(|b| {
                    b.status == BeadStatus::InProgress && b.assignee.as_deref() == Some(ACTOR)
                }) && !live.iter().any(|(_, b)| *b == &c.bead)
                    && now - c.claimed_at >= snap.claim_grace;
                ensure!(
                    !stranded || plan.releases.iter().chain(&plan.held).any(|r| r.claim == *c),
                    "2.10",
                    "{}:{} (claimed as {}) has no worker and is past the grace, but is not released through {}",
                    proj.slug,
                    c.bead,
                    c.project,
                    view.slug
                );
            }
        }

        // 2.7: the idle reason when nothing can be spawned
        let released: BTreeSet<(&str, &BeadId)> = plan
            .releases
            .iter()
            .map(|r| (r.slug.as_str(), &r.bead))
            .collect();
        let global_free = if self.global_max == 0 {
            usize::MAX
        } else {
            (self.global_max as usize).saturating_sub(total_healthy)
        };
        let mut any_eligible = false;
        let mut starved = false;
        for p in &snap.projects {
            if !matches!(p.eligibility, Eligibility::Eligible { .. }) {
                continue;
            }
            any_eligible = true;
            if p.tracker_error.is_some() {
                continue;
            }
            let spawnable = p.ready.iter().any(|b| {
                b.status == BeadStatus::Open
                    && (p.stories.is_empty() || p.stories.contains(&b.id))
                    && !live.contains(&(p.slug.as_str(), &b.id))
                    && !orphan_held.contains(&b.id)
                    && !released.contains(&(p.slug.as_str(), &b.id))
            }) && !p
                .channel
                .as_deref()
                .is_some_and(|c| c.chars().any(char::is_control));
            let free = (p.max_workers as usize).saturating_sub(healthy[&p.slug]);
            if spawnable && (free == 0 || global_free == 0) {
                starved = true;
            }
        }
        let idle_reason = if !any_eligible {
            IdleReason::NoActiveIterations
        } else if starved {
            IdleReason::AllAtCapacity
        } else {
            IdleReason::NoReadyBeads
        };
        Ok(Expected {
            healthy,
            orphans,
            idle_reason,
        })
    }

    /// Invariants that hold between any two steps.
    pub fn check_world(&self) -> Result<(), Fail> {
        for p in &self.projects {
            for it in &p.iters {
                if let Some(frozen) = &it.frozen {
                    ensure!(
                        &it.text == frozen,
                        "4.5",
                        "iteration {} of {} changed after it was completed",
                        it.number,
                        p.slug
                    );
                }
            }
            for b in &p.beads {
                ensure!(
                    b.status != BeadStatus::InProgress || b.assignee.is_some(),
                    "4.6",
                    "{} is in_progress with nobody holding it",
                    b.id
                );
                // a bead braids claimed is never stranded: a worker may hold it, or braids
                // remembers the claim so it can release it once the worker is gone
                if !b.deleted
                    && b.status == BeadStatus::InProgress
                    && b.assignee.as_deref() == Some(ACTOR)
                {
                    let held = self.sessions.iter().any(|s| {
                        (s.running || s.unreadable)
                            && p.aliases.contains(s.label.slug())
                            && s.label.bead() == &b.id
                    });
                    // by the project's directory (by one of its slugs for an old claim)
                    let remembered = self.state.claims.iter().any(|c| {
                        c.bead == b.id
                            && match &c.path {
                                Some(at) => *at == p.path,
                                None => p.aliases.contains(&c.project),
                            }
                    });
                    ensure!(
                        held || remembered,
                        "4.6",
                        "{}:{} is in_progress for braids with no worker and no remembered claim: stranded for good",
                        p.slug,
                        b.id
                    );
                }
            }
        }
        Ok(())
    }
}

/// WorkerTimeout when PROJECT.md does not say (1.2), as it applies to a session whose project is
/// missing from the registry.
pub const DEFAULT_WORKER_TIMEOUT_SECS: u64 = 3600;

/// What the oracle derived from the world for one tick.
pub struct Expected {
    pub healthy: BTreeMap<String, usize>,
    /// Running sessions of projects missing from the registry, left alone.
    pub orphans: usize,
    pub idle_reason: IdleReason,
}

pub fn backoff(r: IdleReason) -> Duration {
    // the contract's numbers, not the code's
    match r {
        IdleReason::NoActiveIterations => Duration::minutes(30),
        IdleReason::NoReadyBeads => Duration::minutes(15),
        IdleReason::AllAtCapacity => Duration::minutes(10),
        IdleReason::SpawningPaused => Duration::minutes(10),
        IdleReason::NoWorkerCanStart => Duration::minutes(15),
    }
}

/// A run due within this is due now (2.7).
pub fn due_slack() -> Duration {
    Duration::seconds(5)
}

/// Runtime strictly over the timeout (2.6 rule 3), computed without chrono's limits.
pub fn over(now: DateTime<Utc>, started: DateTime<Utc>, timeout_secs: u64) -> bool {
    let age_ms = (now - started).num_milliseconds() as i128;
    age_ms > timeout_secs as i128 * 1000
}
