//! Acting for real: the session backend, the trackers, the workspaces, the story files and
//! the retry store.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::{Effects, Outcome, Spawned};
use crate::events::Kind;
use crate::model::BeadId;
use crate::retry::AfterFailure;
use crate::session::{KillOutcome, Session, SessionBackend, SpawnSpec};
use crate::system::paths::Paths;
use crate::tick::attempts::{Failed, RetryEdge};
use crate::tick::decide::{
    DependencyUpdate, FailedAttempt, OrphanedStep, Plan, Release, Slot, SpawnCandidate, Zombie,
    ZombieReason,
};
use crate::tick::orchestrator_state::{Claim, OrchestratorState};
use crate::tick::Installation;
use crate::tracker::{ClaimOutcome, Tracker};

/// The I/O edges a live run drives.
pub struct Live<'a> {
    pub(super) backend: &'a dyn SessionBackend,
    pub(super) trackers: &'a BTreeMap<String, Arc<dyn Tracker>>,
    pub(super) paths: &'a Paths,
    pub(super) worker_argv: &'a [String],
    pub(super) actor: &'a str,
    pub(super) kill_grace: Duration,
    pub(super) workspaces: &'a dyn crate::workspace::Workspaces,
    /// Where failed attempts and the breaker's probe are recorded.
    pub(super) retry: &'a RetryEdge,
    ahead: RefCell<WriteAhead>,
}

impl<'a> Live<'a> {
    /// The installation's edges, with this run's trackers. `state` is the run's state as
    /// loaded: every claim is written into it before it is made.
    pub fn new(
        inst: &'a Installation,
        trackers: &'a BTreeMap<String, Arc<dyn Tracker>>,
        worker_argv: &'a [String],
        workspaces: &'a dyn crate::workspace::Workspaces,
        retry: &'a RetryEdge,
        state: &OrchestratorState,
    ) -> Live<'a> {
        Live {
            backend: inst.backend.as_ref(),
            trackers,
            paths: &inst.paths,
            worker_argv,
            actor: &inst.config.tracker.actor,
            kill_grace: Duration::from_secs(inst.config.sessions.kill_grace_secs),
            workspaces,
            retry,
            ahead: RefCell::new(WriteAhead {
                state: state.clone(),
                file: inst.paths.state(),
            }),
        }
    }

    fn record(&self, a: &FailedAttempt) -> Option<AfterFailure> {
        self.retry.record(a, &self.paths.braids_dir)
    }
}

impl Effects for Live<'_> {
    fn stop(
        &mut self,
        z: &Zombie,
        attempt: Option<&FailedAttempt>,
        now: DateTime<Utc>,
        out: &mut Outcome,
    ) -> Result<Option<KillOutcome>, String> {
        let outcome = self
            .backend
            .kill(&z.session, self.kill_grace)
            .map_err(|e| format!("cannot kill {}: {e}", z.session.label))?;
        if let Err(e) = self.backend.forget(&z.session) {
            out.errors.push(format!(
                "{}: killed but cannot forget: {e}",
                z.session.label
            ));
        }
        // Told in its log when the tick stopped it (not when it was gone already).
        let stopped = matches!(outcome, KillOutcome::Terminated | KillOutcome::Killed);
        if stopped
            && !matches!(
                z.reason,
                ZombieReason::SessionEnded | ZombieReason::WorkerGone
            )
        {
            let logs = self.paths.session_logs(z.session.label.slug());
            crate::session::log_stop(&logs, &z.session, &format!("by the tick: {}", z.why()), now);
        }
        match attempt.and_then(|a| Some((a, self.record(a)?))) {
            Some((a, AfterFailure::Block { reason, .. })) => {
                block(self, &a.slug, &a.bead, &reason, out)
            }
            Some((
                a,
                AfterFailure::Retry {
                    not_before,
                    failures,
                },
            )) => out.failed.push(Failed {
                project: a.slug.clone(),
                bead: a.bead.clone(),
                cause: a.failure.why.clone(),
                failures,
                retry_at: not_before,
            }),
            None => {}
        }
        if let (ZombieReason::StepTimeout, Some(owner)) = (z.reason, &z.owner) {
            let bead = z.session.label.bead();
            let recorded = crate::protocol::story_state::update(&owner.path, bead, |cur| {
                let next = cur.and_then(|s| crate::protocol::tick::timed_out(s, now));
                let why = next.as_ref().and_then(|s| s.last_error.clone());
                (next, why)
            });
            match recorded {
                Ok(Some(why)) => out
                    .step_timeouts
                    .push((owner.slug.clone(), bead.clone(), why)),
                Ok(None) => {}
                Err(e) => out.errors.push(format!("{}: {bead}: {e:#}", owner.slug)),
            }
        }
        Ok(Some(outcome))
    }

    fn forget_ended(&mut self, s: &Session, out: &mut Outcome) {
        // Told once: the session is forgotten, so the next run does not see it.
        if let Some(why) = &s.ended {
            out.errors.push(format!("{}: {why}", s.label));
            out.backend_ended.push((
                s.label.slug().to_string(),
                s.label.bead().clone(),
                why.clone(),
            ));
        }
        if let Err(e) = self.backend.forget(s) {
            out.errors
                .push(format!("cannot forget ended session {}: {e}", s.label));
        }
    }

    fn mark_orphaned(&mut self, o: &OrphanedStep, now: DateTime<Utc>, out: &mut Outcome) {
        let marked = crate::protocol::story_state::update(&o.path, &o.bead, |cur| {
            (
                cur.and_then(|s| crate::protocol::tick::orphaned(s, now)),
                (),
            )
        });
        match marked {
            Ok(()) => {
                tracing::warn!(project = %o.slug, bead = %o.bead, step = %o.step, "protocol step lost its worker; recorded as failing")
            }
            Err(e) => out.errors.push(format!("{}: {}: {e:#}", o.slug, o.bead)),
        }
    }

    fn set_blocked_by(&mut self, u: &DependencyUpdate, out: &mut Outcome) {
        let fresh = || crate::protocol::StoryState::new(&u.slug, &u.bead, u.first);
        if let Err(e) =
            crate::protocol::story_state::set_blocked_by(&u.path, &u.bead, fresh, &u.open)
        {
            out.errors.push(format!("{}: {}: {e:#}", u.slug, u.bead));
        }
    }

    fn release(&mut self, r: &Release, attempt: Option<&FailedAttempt>, out: &mut Outcome) -> bool {
        let Some(t) = self.trackers.get(&r.slug) else {
            return false;
        };
        if let Some(AfterFailure::Block { reason, .. }) = attempt.and_then(|a| self.record(a)) {
            block(self, &r.slug, &r.bead, &reason, out);
            return false;
        }
        if let Err(e) = t.reopen(
            &r.bead,
            "braids: the worker holding this claim is gone; released back to open",
        ) {
            out.errors
                .push(format!("{}: cannot release {}: {e}", r.slug, r.bead));
            return false;
        }
        true
    }

    fn sweep(&mut self, plan: &Plan, out: &mut Outcome) {
        sweep_workspaces(plan, self, out);
    }

    fn spawn(&mut self, plan: &Plan, now: DateTime<Utc>, out: &mut Outcome) {
        plan.walk(|c| {
            let Some(tracker) = self.trackers.get(&c.slug) else {
                return Slot::NextProject;
            };
            claim_and_spawn(c, tracker.as_ref(), self, now, out)
        });
        self.retry.probing(plan, out.spawned.len(), now);
    }
}

/// A claim about to be made, or one that was refused, recorded before the tracker is
/// touched.
#[derive(Debug, Clone, Copy)]
enum Ahead<'a> {
    Claiming(&'a Claim),
    Refused(&'a Claim),
}

/// Every claim is recorded before it is made: a run killed between a claim and its end must
/// not leave a bead in_progress that no later run knows to release (2.1). When the record
/// cannot be written, nothing more is claimed this run.
struct WriteAhead {
    state: OrchestratorState,
    file: std::path::PathBuf,
}

impl WriteAhead {
    fn record(&mut self, a: Ahead<'_>) -> anyhow::Result<()> {
        match a {
            Ahead::Claiming(c) => self.state.claims.push(c.clone()),
            Ahead::Refused(c) => self.state.claims.retain(|x| x != c),
        }
        crate::system::atomic::write(&self.file, self.state.to_json().as_bytes())
    }
}

/// Where a worker's output goes: one file per session start.
fn log_path(paths: &Paths, c: &SpawnCandidate, now: DateTime<Utc>) -> std::path::PathBuf {
    paths
        .session_logs(&c.slug)
        .join(format!("{}-{}.log", c.bead, now.format("%Y%m%dT%H%M%SZ")))
}

/// Blocks a bead whose breaker tripped on a failure the tick saw; the caller's notices tell.
fn block(fx: &Live<'_>, slug: &str, bead: &BeadId, reason: &str, out: &mut Outcome) {
    let Some(t) = fx.trackers.get(slug) else {
        return;
    };
    match t.block(bead, reason) {
        Ok(()) => {
            tracing::warn!(project = %slug, %bead, "bead blocked: {reason}");
            out.blocked
                .push((slug.to_string(), bead.clone(), reason.to_string()));
        }
        Err(e) => out.errors.push(format!("{slug}: cannot block {bead}: {e}")),
    }
}

/// Removes the worktrees no worker can be using (a crashed or killed worker's). A project
/// with no workspace folder costs one `stat`.
fn sweep_workspaces(plan: &Plan, fx: &Live<'_>, out: &mut Outcome) {
    for s in &plan.sweeps {
        // Pooled workspaces idle too long go; all of them once the project works in its own
        // tree.
        match fx.workspaces.prune_pool(&s.path, s.shared) {
            Ok(0) => {}
            Ok(n) => tracing::info!(project = %s.slug, removed = n, "pooled workspaces removed"),
            Err(e) => out.errors.push(format!(
                "{}: cannot prune the workspace pool: {e:#}",
                s.slug
            )),
        }
        if s.shared {
            continue;
        }
        let mut live = s.live.clone();
        live.extend(super::landings::finish(s, fx, out));
        match fx.workspaces.sweep(&s.path, &live) {
            Ok(removed) if !removed.is_empty() => {
                tracing::info!(project = %s.slug, removed = removed.len(), "left-over workspaces removed");
                // The bead is closed and its work never landed: a person decides, told by a
                // blocker notification, this run's STATUS.md and the log.
                for (bead, branch) in removed
                    .iter()
                    .filter_map(|r| Some((&r.bead, r.kept.as_ref()?)))
                {
                    out.errors.push(format!(
                        "{}: the worker of {bead} ended before its work landed; the work is kept on branch {branch} for a person to merge or drop",
                        s.slug
                    ));
                    out.kept
                        .push((s.slug.clone(), bead.clone(), branch.clone()));
                }
            }
            Ok(_) => {}
            Err(e) => out
                .errors
                .push(format!("{}: cannot clean up workspaces: {e:#}", s.slug)),
        }
    }
    let known: Vec<std::path::PathBuf> = plan.sweeps.iter().map(|s| s.path.clone()).collect();
    let n = fx.workspaces.sweep_orphans(&known);
    if n > 0 {
        tracing::info!(
            removed = n,
            "pooled workspaces of unregistered projects removed"
        );
    }
}

/// Claims one candidate (recorded first, write-ahead) and starts its worker; a spawn that
/// fails undoes the claim. Says how the walk goes on.
fn claim_and_spawn(
    c: &SpawnCandidate,
    tracker: &dyn Tracker,
    fx: &Live<'_>,
    now: DateTime<Utc>,
    out: &mut Outcome,
) -> Slot {
    if c.review {
        return spawn_worker(c, None, fx, now, out);
    }
    let pending = Claim {
        project: c.slug.clone(),
        path: Some(c.path.clone()),
        bead: c.bead.clone(),
        claimed_at: now,
    };
    if let Err(e) = fx.ahead.borrow_mut().record(Ahead::Claiming(&pending)) {
        out.errors.push(format!(
            "{}: not claiming {}: the claim cannot be recorded first ({e:#})",
            c.slug, c.bead
        ));
        return Slot::Stop;
    }
    crate::crash_point!("tick::after_claim_recorded");
    match tracker.claim(&c.bead, fx.actor) {
        Ok(ClaimOutcome::Claimed) => crate::crash_point!("tick::after_claim"),
        Ok(ClaimOutcome::Refused { status, holder }) => {
            tracing::debug!(project = %c.slug, bead = %c.bead, %status, holder = holder.as_deref().unwrap_or("-"), "claim refused; trying the next bead");
            // not ours: a later run must never release it
            let _ = fx.ahead.borrow_mut().record(Ahead::Refused(&pending));
            return Slot::Passed;
        }
        Err(e) => {
            out.errors
                .push(format!("{}: cannot claim {}: {e}", c.slug, c.bead));
            return Slot::NextProject;
        }
    }
    spawn_worker(c, Some((pending, tracker)), fx, now, out)
}

/// Starts the worker of a candidate: claimed by this run (`claimed`: the claim, undone when the
/// worker cannot start), or a bead in review, which is braids' already.
fn spawn_worker(
    c: &SpawnCandidate,
    claimed: Option<(Claim, &dyn Tracker)>,
    fx: &Live<'_>,
    now: DateTime<Utc>,
    out: &mut Outcome,
) -> Slot {
    // Held across the spawn, so the worker's first event comes after these.
    let journal = crate::events::Journal::of_project(&c.path);
    let held = journal
        .hold()
        .map_err(|e| tracing::warn!(project = %c.slug, "cannot write events: {e:#}"))
        .ok();
    let tell = |d: crate::events::Draft| {
        if let Some(h) = &held {
            if let Err(e) = h.append(&c.slug, vec![d.bead(&c.bead)], Utc::now()) {
                tracing::warn!(project = %c.slug, "cannot write events: {e:#}");
            }
        }
    };
    if claimed.is_some() {
        tell(
            crate::events::Draft::new(Kind::BeadClaimed).with("iteration", c.iteration.to_string()),
        );
    }
    let label = c.label();
    let spec = SpawnSpec {
        env: vec![("BRAIDS_LABEL".into(), label.to_string().into())],
        label,
        message: c.message(),
        argv: fx.worker_argv.iter().map(OsString::from).collect(),
        cwd: c.path.clone(),
        log: log_path(fx.paths, c, now),
        placement: c.placement.clone(),
    };
    match fx.backend.spawn(&spec) {
        Ok(_) => {
            tracing::debug!(label = %spec.label, "worker spawned");
            tell(
                crate::events::Draft::new(Kind::WorkerSpawned)
                    .with("session", spec.label.to_string())
                    .with("worker_timeout_seconds", c.worker_timeout),
            );
            if let Some((pending, _)) = claimed {
                out.new_claims.push(pending);
            }
            out.spawned.push(Spawned::from_candidate(c));
            Slot::Taken
        }
        Err(e) => {
            tell(
                crate::events::Draft::new(Kind::Error)
                    .with("message", format!("cannot start a worker: {e}")),
            );
            out.errors.push(format!(
                "{}: cannot start a worker for {}: {e}",
                c.slug, c.bead
            ));
            let Some((pending, tracker)) = claimed else {
                // In review: nothing was claimed; the next run tries again.
                return Slot::NextProject;
            };
            if let Err(e) = tracker.reopen(
                &c.bead,
                "braids: the worker could not be started; claim undone",
            ) {
                out.errors.push(format!(
                    "{}: cannot undo the claim on {}: {e}",
                    c.slug, c.bead
                ));
                // Remembered, so a later run releases it once the tracker answers.
                out.new_claims.push(pending);
            }
            Slot::NextProject
        }
    }
}
