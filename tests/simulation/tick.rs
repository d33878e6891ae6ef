//! The tick as the model runs it: observe (a model of the I/O; `eligibility_of` and observe's
//! `bead_lookups` real) → decide (real) → act (`Plan::walk` real; claims, spawns and kills on the
//! model) → persist (`after_run` and `settle_claims` real), with the oracle checking the plan and
//! the state after each step.

use std::collections::{BTreeMap, BTreeSet};

use braids::format::registry::RegistryEntry;
use braids::model::{BeadId, BeadStatus};
use braids::session::Session;
use braids::tick::decide::{
    decide, eligibility_of, BeadLookup, Eligibility, Plan, ProjectView, Slot, Snapshot,
    ZombieReason,
};
use braids::tick::observe::lookups::bead_lookups;
use braids::tick::orchestrator_state::{Claim, IdleReason, OrchestratorState, RunKind};
use chrono::Duration;

use crate::oracle::{backoff, due_slack, over};
use crate::world::{Behaviour, SessM, World, ACTOR};
use crate::Fail;

// ---------------------------------------------------------------------------------------------
// Deliberate breakage, to prove the oracle can fail.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mutation {
    None,
    /// decide gives every project one slot more than it has (2.2).
    ExtraSlot,
    /// decide checks runtime before bead status (2.6).
    RuntimeBeforeBead,
    /// observe reports the first of several active iterations as the active one (2.3).
    FirstOfSeveralActive,
    /// observe hides live sessions from decide (2.2 / no double spawn).
    HideLiveSessions,
    /// a worker rewrites a complete iteration's ITERATION.md (4.5).
    TouchCompleteIteration,
    /// decide releases claims whatever their bead's status (4.6).
    ReleaseAnyClaim,
    /// the state forgets `idleSince` on every idle run (2.7).
    ResetIdleSince,
    /// claims are remembered by slug alone, as before 2.10.
    ClaimsBySlug,
    /// a claim is released when no worker runs under its project's own label (2.10).
    OwnLabelOnly,
}

impl World {
    // ---- the tick: observe (model) → decide (real) → act (model) → persist (real) ----

    /// 2.3 as the tick decides it: the real `eligibility_of` over what the readers made of the
    /// registry row, PROJECT.md and the ITERATION.md files.
    pub fn eligibility(&self, e: &RegistryEntry, p: usize) -> Eligibility {
        let proj = &self.projects[p];
        match eligibility_of(e, &proj.cfg, &proj.read) {
            Eligibility::SeveralActive(many) if self.mutation == Mutation::FirstOfSeveralActive => {
                Eligibility::Eligible { iteration: many[0] }
            }
            verdict => verdict,
        }
    }

    pub fn observe(&self) -> Snapshot {
        // The sessions the backend can read; observe's rule picks the beads to look up from
        // them, whatever the HideLiveSessions breakage then keeps from decide.
        let readable: Vec<Session> = self
            .sessions
            .iter()
            .filter(|s| !s.unreadable)
            .map(|s| Session {
                label: s.label.clone(),
                id: s.id.clone(),
                backend: braids::session::BackendKind::Process,
                pid: Some(1000 + s.id.len() as u32),
                started_at: s.started,
                running: s.running,
                worker_gone: false,
                queued: false,
                ended: None,
                log: None,
            })
            .collect();
        let mut views = Vec::new();
        for e in &self.registry {
            let v = ProjectView::builder(e.slug.clone(), e.path.clone())
                .priority(e.priority.unwrap_or_default())
                .eligibility(Eligibility::Broken("no such directory".into()));
            let Some(p) = self.project_at(&e.path) else {
                views.push(v.build());
                continue;
            };
            let proj = &self.projects[p];
            let eligibility = self.eligibility(e, p);
            let stories = match eligibility {
                Eligibility::Eligible { iteration } => proj
                    .iters
                    .iter()
                    .find(|i| i.number == iteration.number())
                    .map(|i| i.stories.clone())
                    .unwrap_or_default(),
                _ => Vec::new(),
            };
            let eligible = matches!(eligibility, Eligibility::Eligible { .. });
            let mut v = v
                .priority(proj.cfg.priority)
                .max_workers(proj.cfg.max_workers)
                .worker_timeout(proj.cfg.worker_timeout)
                .channel(proj.cfg.channel.clone())
                .eligibility(eligibility)
                .stories(stories);
            let wanted = bead_lookups(&e.slug, &e.path, &readable, &self.state.claims).beads;
            if proj.tracker_down {
                v = v
                    .beads(wanted.into_iter().map(|b| (b.clone(), BeadLookup::Unknown)))
                    .tracker_error("`br list --json` timed out after 1s");
            } else {
                v = v.beads(wanted.into_iter().map(|b| {
                    let l = self
                        .bead(p, b)
                        .map_or(BeadLookup::Missing, |x| BeadLookup::Known(x.status));
                    (b.clone(), l)
                }));
                if eligible {
                    v = v.ready(self.ready(p));
                }
            }
            views.push(v.build());
        }
        let hide = self.mutation == Mutation::HideLiveSessions;
        Snapshot {
            projects: views,
            sessions: readable
                .iter()
                .filter(|s| !hide || !s.running)
                .cloned()
                .collect(),
            unreadable: self
                .sessions
                .iter()
                .filter(|s| s.unreadable)
                .map(|s| braids::session::SessionProblem {
                    label: Some(s.label.to_string()),
                    location: format!("sessions/{}", s.id),
                    detail: "corrupt record".into(),
                })
                .collect(),
            claims: self.state.claims.clone(),
            global_max_workers: self.global_max,
            orphan_timeout_secs: braids::format::project::DEFAULT_WORKER_TIMEOUT,
            claim_grace: self.claim_grace,
            allow_mass_kill: false,
            waiting: BTreeMap::new(),
            activity: BTreeMap::new(),
            finishing: Default::default(),
            gate: braids::tick::decide::Gate::Open,
            next_probe: None,
            held_before: self.state.held_claims.clone(),
            story_claims: Default::default(),
        }
    }

    pub fn decide(&self, snap: &Snapshot) -> Plan {
        let mut plan = decide(snap, self.now);
        match self.mutation {
            Mutation::ExtraSlot => {
                for p in &mut plan.spawns {
                    p.slots += 1;
                }
                plan.global_slots = plan.global_slots.map(|g| g + 1);
            }
            Mutation::RuntimeBeforeBead => {
                for z in &mut plan.zombies {
                    let Some(p) = snap
                        .projects
                        .iter()
                        .find(|p| p.slug == z.session.label.slug())
                    else {
                        continue; // an orphan: killed for its runtime already
                    };
                    if over(self.now, z.session.started_at, p.worker_timeout) {
                        z.reason = ZombieReason::Timeout;
                    }
                }
            }
            Mutation::ReleaseAnyClaim => {
                for c in &snap.claims {
                    let owner = snap
                        .projects
                        .iter()
                        .find(|p| c.belongs_to(&p.slug, &p.path));
                    let r = braids::tick::decide::Release {
                        slug: owner.map_or(c.project.clone(), |p| p.slug.clone()),
                        bead: c.bead.clone(),
                        claim: c.clone(),
                    };
                    if !plan.releases.contains(&r) {
                        plan.releases.push(r);
                    }
                }
            }
            Mutation::OwnLabelOnly => {
                let grace = snap.claim_grace;
                for c in &snap.claims {
                    let Some(p) = snap
                        .projects
                        .iter()
                        .find(|p| c.belongs_to(&p.slug, &p.path))
                    else {
                        continue;
                    };
                    let own_label = format!("project:{}:{}", p.slug, c.bead);
                    let own = snap.sessions.iter().any(|s| {
                        s.running && s.label.slug() == p.slug && s.label.bead() == &c.bead
                    }) || snap
                        .unreadable
                        .iter()
                        .any(|u| u.label.as_deref() == Some(own_label.as_str()));
                    let r = braids::tick::decide::Release {
                        slug: p.slug.clone(),
                        bead: c.bead.clone(),
                        claim: c.clone(),
                    };
                    if !own
                        && p.beads.get(&c.bead) == Some(&BeadLookup::Known(BeadStatus::InProgress))
                        && self.now - c.claimed_at >= grace
                        && !plan.releases.contains(&r)
                    {
                        plan.releases.push(r);
                    }
                }
            }
            _ => {}
        }
        plan
    }

    pub fn tick(&mut self, force: bool) -> Result<(), Fail> {
        let now = self.now;
        // tracker weather for this tick
        for i in 0..self.projects.len() {
            let down = self.rng.pct(6);
            let stale = if self.rng.pct(8) {
                // a bead another actor took, or that was just closed, still listed as ready
                let cands: Vec<BeadId> = self.projects[i]
                    .beads
                    .iter()
                    .filter(|b| {
                        !b.deleted
                            && (b.status == BeadStatus::Closed
                                || (b.status == BeadStatus::InProgress
                                    && b.assignee.as_deref() != Some(ACTOR)))
                    })
                    .map(|b| b.id.clone())
                    .collect();
                (!cands.is_empty()).then(|| self.rng.pick(&cands).clone())
            } else {
                None
            };
            self.projects[i].tracker_down = down;
            self.projects[i].stale_ready = stale;
        }

        // load: idle backoff (2.7)
        let before = self.state.clone();
        let idle_window = match (before.idle_since, before.idle_reason, before.last_run_at) {
            (Some(_), Some(r), Some(last)) => Some((r, last)),
            _ => None,
        };
        match before.run_kind(now, force) {
            RunKind::Skipped {
                reason,
                next_full_run,
            } => {
                let Some((r, last)) = idle_window else {
                    return Err((
                        "2.7",
                        format!("skipped a run although the state is not idle: {before:?}"),
                    ));
                };
                ensure!(!force, "2.7", "a forced run was skipped");
                ensure!(
                    r == reason && next_full_run == last + backoff(reason),
                    "2.7",
                    "skip says {reason} until {next_full_run}, state says {r} since {last}"
                );
                ensure!(
                    last <= now && now + due_slack() < next_full_run,
                    "2.7",
                    "skipped at {now}, outside the backoff window {last}..{next_full_run} (less its slack)"
                );
                self.stats.skipped += 1;
                self.log(format!("tick skipped (idle: {reason})"));
                return Ok(());
            }
            RunKind::Full => {
                if let (false, Some((r, last))) = (force, idle_window) {
                    ensure!(
                        !(last <= now && now + due_slack() < last + backoff(r)),
                        "2.7",
                        "a full run at {now} inside the {r} backoff window after {last}"
                    );
                }
            }
        }
        self.stats.ticks += 1;

        // observe, decide
        let snap = self.observe();
        let plan = self.decide(&snap);
        let expected = self.check_plan(&snap, &plan)?;

        // between decide and act, another actor may claim a ready bead
        if self.rng.pct(10) {
            if let Some(c) = plan.intended().first() {
                let at = self.registry.iter().find(|e| e.slug == c.slug);
                if let Some(p) = at.and_then(|e| self.project_at(&e.path)) {
                    let b = c.bead.clone();
                    if self.transition(p, &b, BeadStatus::InProgress, Some("alice")) {
                        self.log(format!("{}: alice claims {b} first", c.slug));
                    }
                }
            }
        }

        let spawned = self.act(&snap, &plan)?;
        if plan.global_slots.is_some_and(|g| {
            g < plan
                .spawns
                .iter()
                .map(|p| p.slots.min(p.candidates.len()))
                .sum()
        }) {
            self.stats.global_capped += 1;
        }

        // 2.2 after acting: a project that got workers is within MaxWorkers, and the global cap
        let mut per: BTreeMap<&str, usize> = BTreeMap::new();
        for (slug, _) in &spawned {
            *per.entry(slug.as_str()).or_default() += 1;
        }
        for (slug, n) in &per {
            let view = snap.projects.iter().find(|p| p.slug == *slug).unwrap();
            let healthy = expected.healthy.get(*slug).copied().unwrap_or(0);
            ensure!(
                healthy + n <= view.max_workers as usize,
                "2.2",
                "{slug} had {healthy} healthy workers, got {n} more, MaxWorkers {}",
                view.max_workers
            );
        }
        if self.global_max > 0 && !spawned.is_empty() {
            let total: usize =
                expected.healthy.values().sum::<usize>() + expected.orphans + spawned.len();
            ensure!(
                total <= self.global_max as usize,
                "2.2",
                "{total} healthy workers across projects after spawning, global cap {}",
                self.global_max
            );
        }

        // persist (2.7)
        let did_spawn = !spawned.is_empty();
        let mut next = before.after_run(now, did_spawn, plan.idle_reason);
        next.held_claims = plan
            .held
            .iter()
            .map(braids::tick::decide::held_key)
            .collect();
        if self.mutation == Mutation::ResetIdleSince && !did_spawn {
            next.idle_since = Some(now);
        }
        ensure!(next.last_run_at == Some(now), "2.7", "lastRunAt is not now");
        if did_spawn {
            ensure!(
                next.idle_since.is_none() && next.idle_reason.is_none(),
                "2.7",
                "a run that spawned left idle state {:?}/{:?}",
                next.idle_since,
                next.idle_reason
            );
        } else {
            let want_since = before.idle_since.unwrap_or(now);
            ensure!(
                next.idle_since == Some(want_since),
                "2.7",
                "idleSince {:?} after an idle run (was {:?}): it is set on the transition and kept",
                next.idle_since,
                before.idle_since
            );
            ensure!(
                next.idle_reason == Some(plan.idle_reason),
                "2.7",
                "idleReason {:?}, the run said {}",
                next.idle_reason,
                plan.idle_reason
            );
            if plan.intended().is_empty() {
                self.stats.idle_checked[match expected.idle_reason {
                    IdleReason::NoActiveIterations => 0,
                    IdleReason::NoReadyBeads => 1,
                    IdleReason::AllAtCapacity => 2,
                    // The simulated world has no breaker and no preflight to fail.
                    IdleReason::SpawningPaused | IdleReason::NoWorkerCanStart => {
                        unreachable!("the oracle never expects {}", expected.idle_reason)
                    }
                }] += 1;
                ensure!(
                    plan.idle_reason == expected.idle_reason,
                    "2.7",
                    "idle reason {} but the world says {}",
                    plan.idle_reason,
                    expected.idle_reason
                );
            }
        }
        let new_claims: Vec<Claim> = spawned
            .iter()
            .map(|(slug, bead)| Claim {
                project: slug.clone(),
                path: snap
                    .projects
                    .iter()
                    .find(|p| &p.slug == slug)
                    .map(|p| p.path.clone()),
                bead: bead.clone(),
                claimed_at: now,
            })
            .collect();
        next.settle_claims(plan.settled(), plan.upgraded(), &new_claims);
        if self.mutation == Mutation::ClaimsBySlug {
            for c in &mut next.claims {
                c.path = None;
            }
        }
        // one claim per bead of a project (by directory; by slug for a claim without one)
        let uniq: BTreeSet<(Option<&std::path::Path>, &str, &BeadId)> = next
            .claims
            .iter()
            .map(|c| match &c.path {
                Some(p) => (Some(p.as_path()), "", &c.bead),
                None => (None, c.project.as_str(), &c.bead),
            })
            .collect();
        ensure!(
            uniq.len() == next.claims.len(),
            "2.2",
            "the state records one bead's claim twice: {:?}",
            next.claims
        );
        // 1.6: the state survives its own file format
        let back: OrchestratorState = serde_json::from_str(&next.to_json())
            .map_err(|e| ("1.6", format!("state does not read back: {e}")))?;
        ensure!(back == next, "1.6", "state changed through JSON: {back:?}");
        self.log(format!(
            "tick: spawned {:?}, idle {:?}",
            spawned
                .iter()
                .map(|(s, b)| format!("{s}:{b}"))
                .collect::<Vec<_>>(),
            next.idle_reason
        ));
        self.state = next;
        Ok(())
    }

    pub fn act(&mut self, snap: &Snapshot, plan: &Plan) -> Result<Vec<(String, BeadId)>, Fail> {
        // kill zombies, forget ended sessions
        for z in &plan.zombies {
            if self.rng.pct(3) {
                self.log(format!("kill of {} fails", z.session.label));
                continue;
            }
            self.sessions.retain(|s| s.id != z.session.id);
            self.stats.kills += 1;
            self.log(format!("killed {} ({:?})", z.session.label, z.reason));
        }
        for e in &plan.ended {
            self.sessions.retain(|s| s.id != e.id || s.running);
        }
        // release stranded claims
        for r in &plan.releases {
            let Some(p) = self
                .registry
                .iter()
                .find(|e| e.slug == r.slug)
                .and_then(|e| self.project_at(&e.path))
            else {
                continue;
            };
            if self.projects[p].tracker_down {
                continue;
            }
            if self.transition(p, &r.bead, BeadStatus::Open, None) {
                self.stats.releases += 1;
                self.log(format!("{}: released {}", r.slug, r.bead));
            }
        }
        // claim, then spawn: the real walk over the plan's slots (per-project MaxWorkers and
        // the global cap), each offer answered by the model tracker and backend
        let mut spawned = Vec::new();
        let mut failed: Option<Fail> = None;
        plan.walk(|c| {
            let Some(p) = snap
                .projects
                .iter()
                .find(|v| v.slug == c.slug)
                .and_then(|v| self.project_at(&v.path))
            else {
                return Slot::NextProject;
            };
            match self.claim(p, &c.bead) {
                Ok(true) => {}
                Ok(false) => {
                    self.stats.refused_claims += 1;
                    return Slot::Passed;
                }
                Err(()) => return Slot::NextProject,
            }
            // no bead spawned twice: nothing may run for it already, under any slug the
            // project had (a worker started before a rename keeps its old label)
            let aliases = &self.projects[p].aliases;
            if let Some(twin) = self.sessions.iter().find(|s| {
                s.running
                    && s.label.bead() == &c.bead
                    && (s.label.slug() == c.slug || aliases.contains(s.label.slug()))
            }) {
                failed = Some((
                    "2.2",
                    format!(
                        "{} spawned while {} still runs for it (a bead with two live workers)",
                        c.label(),
                        twin.label
                    ),
                ));
                return Slot::Stop;
            }
            if self.rng.pct(3) {
                // the spawn fails: the claim is undone
                self.transition(p, &c.bead, BeadStatus::Open, None);
                self.log(format!("spawn of {} fails; claim undone", c.label()));
                return Slot::NextProject;
            }
            let behaviour = *self.rng.pick(&[
                Behaviour::Finish,
                Behaviour::Finish,
                Behaviour::Finish,
                Behaviour::Finish,
                Behaviour::Block,
                Behaviour::Crash,
                Behaviour::Hang,
            ]);
            let work = Duration::minutes(self.rng.range(1, 120));
            let linger = self
                .rng
                .pct(20)
                .then(|| Duration::minutes(self.rng.range(1, 30)));
            let sid = format!("{}:{}", 40000 + self.next_session, self.next_session * 7);
            self.next_session += 1;
            self.sessions.push(SessM {
                label: c.label(),
                id: sid,
                started: self.now,
                running: true,
                behaviour,
                done_at: self.now + work,
                linger,
                unreadable: false,
            });
            self.projects[p].aliases.insert(c.slug.clone());
            spawned.push((c.slug.clone(), c.bead.clone()));
            self.stats.spawns += 1;
            Slot::Taken
        });
        if let Some(f) = failed {
            return Err(f);
        }
        if self.mutation == Mutation::TouchCompleteIteration {
            for p in &mut self.projects {
                if let Some(it) = p.iters.iter_mut().find(|i| i.frozen.is_some()) {
                    it.text.push_str("\n<!-- touched -->\n");
                }
            }
        }
        Ok(spawned)
    }
}
