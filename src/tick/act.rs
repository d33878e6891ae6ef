//! Carrying out a [`Plan`]: kill zombies, forget ended sessions, release stranded claims, and
//! claim-then-spawn, in that order.
//!
//! The orchestrator never does bead work (2.1): the only tracker writes here are the claim, the
//! release of a claim whose worker is gone, and undoing a claim whose worker could not start.
//! A claim comes before the spawn, and a refused claim means another worker holds the bead, so
//! the next candidate stands in.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::events::Kind;
use crate::model::{BeadId, IterationName};
use crate::retry::{AfterFailure, Failure};
use crate::session::{KillOutcome, SessionBackend, SpawnSpec};
use crate::system::paths::Paths;
use crate::tick::orchestrator_state::Claim;
use crate::tracker::{ClaimOutcome, Tracker};

pub use super::attempts::{Failed, Stopped};
use super::decide::{Plan, Slot, SpawnCandidate, ZombieReason};

/// A worker started this run, as `--json` reports it.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct Spawned {
    pub project: String,
    pub bead: BeadId,
    /// The iteration's directory name as written (`008`), a string in `--json`.
    pub iteration: IterationName,
    pub channel: Option<String>,
    pub path: String,
    pub label: String,
    pub worker_timeout: u64,
}

impl Spawned {
    pub fn from_candidate(c: &SpawnCandidate) -> Spawned {
        Spawned {
            project: c.slug.clone(),
            bead: c.bead.clone(),
            iteration: c.iteration,
            channel: c.channel.clone(),
            path: c.path.display().to_string(),
            label: c.label().to_string(),
            worker_timeout: c.worker_timeout,
        }
    }
}

#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct Killed {
    pub label: String,
    pub bead: BeadId,
    pub reason: ZombieReason,
    /// `None` on a dry run.
    pub outcome: Option<KillOutcome>,
}

#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct Released {
    pub project: String,
    pub bead: BeadId,
}

/// What acting did.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    pub spawned: Vec<Spawned>,
    pub killed: Vec<Killed>,
    pub released: Vec<Released>,
    pub new_claims: Vec<Claim>,
    pub errors: Vec<String>,
    /// Work dead workers left, kept on branches by the sweep: (project, bead, branch).
    pub kept: Vec<(String, BeadId, String)>,
    /// Beads whose breaker tripped on a failure this run saw: (project, bead, reason).
    pub blocked: Vec<(String, BeadId, String)>,
    /// Protocol steps stopped for their timeout: (project, bead, what the story recorded).
    pub step_timeouts: Vec<(String, BeadId, String)>,
    /// Sessions the backend itself ended (Slurm's time or memory limit): (project, bead, why).
    pub backend_ended: Vec<(String, BeadId, String)>,
    /// Claims the plan would release whose worker could not be stopped: still held.
    pub still_held: Vec<BeadId>,
    /// Attempts this run ended for their time or a stall, retried later.
    pub failed: Vec<Failed>,
}

/// The I/O edges `act` drives.
pub struct Effects<'a> {
    pub backend: &'a dyn SessionBackend,
    pub trackers: &'a BTreeMap<String, Arc<dyn Tracker>>,
    pub paths: &'a Paths,
    pub worker_argv: &'a [String],
    pub actor: &'a str,
    pub kill_grace: Duration,
    pub workspaces: &'a dyn crate::workspace::Workspaces,
    /// Where failed attempts are recorded; `None` records nothing (the simulation).
    pub retry: Option<&'a super::attempts::RetryEdge>,
    /// Whether claims and spawns are written to the projects' event journals.
    pub events: bool,
}

/// Where a worker's output goes: one file per session start.
fn log_path(paths: &Paths, c: &SpawnCandidate, now: DateTime<Utc>) -> std::path::PathBuf {
    paths
        .session_logs(&c.slug)
        .join(format!("{}-{}.log", c.bead, now.format("%Y%m%dT%H%M%SZ")))
}

/// A claim about to be made, or one that was refused, for the caller to record before the
/// tracker is touched (see [`act_with`]).
#[derive(Debug, Clone, Copy)]
pub enum Ahead<'a> {
    Claiming(&'a Claim),
    Refused(&'a Claim),
}

/// Acts on `plan`. A dry run reports what would happen and touches nothing.
pub fn act(plan: &Plan, fx: &Effects<'_>, now: DateTime<Utc>, dry_run: bool) -> Outcome {
    act_with(plan, fx, now, dry_run, &mut |_| Ok(()))
}

/// [`act`], telling `ahead` of every claim before it is made (and of every refused one), so the
/// caller can record it first. A claim braids does not remember is never released if the
/// process dies between the claim and the end of the run, so when `ahead` fails nothing more
/// is claimed this run.
pub fn act_with(
    plan: &Plan,
    fx: &Effects<'_>,
    now: DateTime<Utc>,
    dry_run: bool,
    ahead: &mut dyn FnMut(Ahead<'_>) -> anyhow::Result<()>,
) -> Outcome {
    let mut out = Outcome::default();
    // Beads whose worker could not be stopped: their claims are not released.
    let mut unkilled: std::collections::BTreeSet<BeadId> = std::collections::BTreeSet::new();

    for z in &plan.zombies {
        let outcome = if dry_run {
            None
        } else {
            match fx.backend.kill(&z.session, fx.kill_grace) {
                Ok(o) => {
                    if let Err(e) = fx.backend.forget(&z.session) {
                        out.errors.push(format!(
                            "{}: killed but cannot forget: {e}",
                            z.session.label
                        ));
                    }
                    Some(o)
                }
                Err(e) => {
                    out.errors
                        .push(format!("cannot kill {}: {e}", z.session.label));
                    unkilled.insert(z.session.label.bead().clone());
                    continue;
                }
            }
        };
        tracing::debug!(label = %z.session.label, reason = %z.reason, "zombie {}", if dry_run { "found" } else { "killed" });
        // Told in its log when the tick stopped it (not when it was gone already).
        let stopped = matches!(outcome, Some(KillOutcome::Terminated | KillOutcome::Killed));
        if stopped
            && !matches!(
                z.reason,
                ZombieReason::SessionEnded | ZombieReason::WorkerGone
            )
        {
            let logs = fx.paths.session_logs(z.session.label.slug());
            crate::session::log_stop(&logs, &z.session, &format!("by the tick: {}", z.why()), now);
        }
        match fx
            .retry
            .and_then(|r| r.stopped(z, now, &fx.paths.braids_dir))
        {
            Some(Stopped::Blocked { slug, reason }) => {
                block(fx, &slug, z.session.label.bead(), &reason, &mut out)
            }
            Some(Stopped::Retried(f)) => out.failed.push(f),
            None => {}
        }
        if let (false, ZombieReason::StepTimeout, Some(owner)) = (dry_run, z.reason, &z.owner) {
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
        out.killed.push(Killed {
            label: z.session.label.to_string(),
            bead: z.session.label.bead().clone(),
            reason: z.reason,
            outcome,
        });
    }
    if !dry_run {
        for s in &plan.ended {
            // Told once: the session is forgotten below, so the next run does not see it.
            if let Some(why) = &s.ended {
                out.errors.push(format!("{}: {why}", s.label));
                out.backend_ended.push((
                    s.label.slug().to_string(),
                    s.label.bead().clone(),
                    why.clone(),
                ));
            }
            if let Err(e) = fx.backend.forget(s) {
                out.errors
                    .push(format!("cannot forget ended session {}: {e}", s.label));
            }
        }
    }

    for o in plan.orphaned_steps.iter().filter(|_| !dry_run) {
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

    for u in plan.dependency_updates.iter().filter(|_| !dry_run) {
        let fresh = || crate::protocol::StoryState::new(&u.slug, &u.bead, u.first);
        if let Err(e) =
            crate::protocol::story_state::set_blocked_by(&u.path, &u.bead, fresh, &u.open)
        {
            out.errors.push(format!("{}: {}: {e:#}", u.slug, u.bead));
        }
    }

    out.still_held = unkilled.iter().cloned().collect();
    for r in plan.releases.iter().filter(|r| !unkilled.contains(&r.bead)) {
        // Its stop this run tripped its breaker: blocked, never opened again.
        if out
            .blocked
            .iter()
            .any(|(s, b, _)| *s == r.slug && *b == r.bead)
        {
            continue;
        }
        if !dry_run {
            let Some(t) = fx.trackers.get(&r.slug) else {
                continue;
            };
            // The worker ended without finishing: a failed attempt, unless it said so itself.
            let failure = Failure::new(
                now,
                "the worker ended before finishing (crashed, killed, or the machine restarted)",
            );
            // A protocol story counts its attempts itself, per step.
            let story =
                r.claim.path.as_deref().is_some_and(|dir| {
                    crate::protocol::story_state::path_of(dir, &r.bead).exists()
                });
            let verdict = fx
                .retry
                .filter(|_| !story)
                .zip(r.claim.path.as_deref())
                .and_then(|(retry, dir)| {
                    retry.failed(dir, &r.bead, Some(r.claim.claimed_at), failure)
                });
            if let Some(AfterFailure::Block { reason, .. }) = verdict {
                block(fx, &r.slug, &r.bead, &reason, &mut out);
                continue;
            }
            if let Err(e) = t.reopen(
                &r.bead,
                "braids: the worker holding this claim is gone; released back to open",
            ) {
                out.errors
                    .push(format!("{}: cannot release {}: {e}", r.slug, r.bead));
                continue;
            }
        }
        tracing::warn!(project = %r.slug, bead = %r.bead, "stranded claim released");
        out.released.push(Released {
            project: r.slug.clone(),
            bead: r.bead.clone(),
        });
    }

    if !dry_run {
        sweep_workspaces(plan, fx, &mut out);
    }

    if dry_run {
        out.spawned = plan
            .intended()
            .into_iter()
            .map(Spawned::from_candidate)
            .collect();
        return out;
    }
    plan.walk(|c| {
        let Some(tracker) = fx.trackers.get(&c.slug) else {
            return Slot::NextProject;
        };
        claim_and_spawn(c, tracker.as_ref(), fx, now, ahead, &mut out)
    });
    out
}

/// Blocks a bead whose breaker tripped on a failure the tick saw; the caller's notices tell.
fn block(fx: &Effects<'_>, slug: &str, bead: &BeadId, reason: &str, out: &mut Outcome) {
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
fn sweep_workspaces(plan: &Plan, fx: &Effects<'_>, out: &mut Outcome) {
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

/// Claims one candidate (recorded first through `ahead`) and starts its worker; a spawn that
/// fails undoes the claim. Says how the walk goes on.
fn claim_and_spawn(
    c: &SpawnCandidate,
    tracker: &dyn Tracker,
    fx: &Effects<'_>,
    now: DateTime<Utc>,
    ahead: &mut dyn FnMut(Ahead<'_>) -> anyhow::Result<()>,
    out: &mut Outcome,
) -> Slot {
    let pending = Claim {
        project: c.slug.clone(),
        path: Some(c.path.clone()),
        bead: c.bead.clone(),
        claimed_at: now,
    };
    if let Err(e) = ahead(Ahead::Claiming(&pending)) {
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
            let _ = ahead(Ahead::Refused(&pending));
            return Slot::Passed;
        }
        Err(e) => {
            out.errors
                .push(format!("{}: cannot claim {}: {e}", c.slug, c.bead));
            return Slot::NextProject;
        }
    }
    // Held across the spawn, so the worker's first event comes after these.
    let journal = crate::events::Journal::of_project(&c.path);
    let held = fx.events.then(|| journal.hold()).and_then(|h| {
        h.map_err(|e| tracing::warn!(project = %c.slug, "cannot write events: {e:#}"))
            .ok()
    });
    let tell = |d: crate::events::Draft| {
        if let Some(h) = &held {
            if let Err(e) = h.append(&c.slug, vec![d.bead(&c.bead)], Utc::now()) {
                tracing::warn!(project = %c.slug, "cannot write events: {e:#}");
            }
        }
    };
    tell(crate::events::Draft::new(Kind::BeadClaimed).with("iteration", c.iteration.to_string()));
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
            out.new_claims.push(pending);
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

/// Completes the iterations a dead worker left behind (3.7, 7.2): every story closed, the
/// iteration still active, because the worker that closed the last one died before completing
/// it. Only in projects with no worker running and none started this run (a live worker
/// completes its own), under the repository lock without waiting, and with the same check and
/// commit a worker makes (`lifecycle::complete_if_done`), pushed like a worker's. Returns the
/// iterations completed, for their notifications, and the errors.
pub fn finish_iterations(
    reports: &[super::observe::ProjectReport],
    views: &[super::decide::ProjectView],
    plan: &Plan,
    outcome: &Outcome,
    trackers: &BTreeMap<String, Arc<dyn Tracker>>,
    push_timeout: Duration,
) -> (Vec<(String, IterationName)>, Vec<String>) {
    let mut done = Vec::new();
    let mut errors = Vec::new();
    for r in reports.iter().filter(|r| looks_finished(r)) {
        // Only what a dead worker of a scheduled project left: a paused project is a person's.
        let eligible = views.iter().any(|v| {
            v.slug == r.slug && matches!(v.eligibility, super::decide::Eligibility::Eligible { .. })
        });
        let busy = !eligible
            || plan.healthy.get(&r.slug).copied().unwrap_or(0) > 0
            || outcome.spawned.iter().any(|s| s.project == r.slug)
            || outcome.kept.iter().any(|(slug, _, _)| *slug == r.slug);
        let (Some((name, _)), Some(tracker), false) = (r.iteration, trackers.get(&r.slug), busy)
        else {
            continue;
        };
        match finish_one(&r.path, &r.slug, name, tracker.as_ref(), push_timeout) {
            Ok(true) => {
                tracing::info!(project = %r.slug, iteration = %name, "iteration completed: its last worker ended before completing it");
                done.push((r.slug.clone(), name));
            }
            Ok(false) => {}
            Err(e) => errors.push(format!(
                "{}: cannot complete iteration {name}, whose stories are all closed: {e:#}",
                r.slug
            )),
        }
    }
    (done, errors)
}

/// What the run saw: an active iteration whose Stories are all closed (prose entries, with no
/// status, aside). The tracker has the last word in [`finish_one`].
fn looks_finished(r: &super::observe::ProjectReport) -> bool {
    use crate::model::{BeadStatus, IterationStatus};
    let known: Vec<BeadStatus> = r.stories.iter().filter_map(|(_, _, s)| *s).collect();
    matches!(r.iteration, Some((_, Some(IterationStatus::Active))))
        && !known.is_empty()
        && known.iter().all(|s| *s == BeadStatus::Closed)
}

/// Completes iteration `name` of the project at `root` if every story is closed; `Ok(false)`
/// when the repository is busy (the next run tries again) or a story is still open.
fn finish_one(
    root: &std::path::Path,
    slug: &str,
    name: IterationName,
    tracker: &dyn Tracker,
    push_timeout: Duration,
) -> anyhow::Result<bool> {
    let Some(lock) = crate::git::RepoLock::try_acquire(root)? else {
        return Ok(false);
    };
    let config = crate::format::project::read_project(root).value;
    if let Some(why) = crate::workspace::checkout_elsewhere(root, &config) {
        tracing::debug!(project = %slug, "iteration left active: {why}");
        return Ok(false);
    }
    let its = crate::format::iteration::read_iterations(root).value;
    let Some(it) = name.find(&its, |i| i.name) else {
        return Ok(false);
    };
    // A story whose work is kept on a branch has not landed: completing (and freezing, 4.5)
    // the iteration now would shut that work out. A person merges or drops it first.
    for s in &it.stories {
        if !crate::workspace::kept_branches(root, &s.id)?.is_empty() {
            tracing::debug!(project = %slug, story = %s.id, "iteration left active: the story's work is kept on a branch");
            return Ok(false);
        }
    }
    // The completing commit goes onto the checked-out branch (`lifecycle::transition`).
    let branch = crate::git::checked_out(root).filter(|b| crate::git::has_upstream(root, b));
    let upstream = branch.is_some();
    let marked_before = crate::git::push_pending(root);
    if upstream {
        crate::git::expect_push(root)?;
    }
    let all = tracker.list()?;
    let files = crate::lifecycle::tracker_files(root);
    let completed = crate::lifecycle::complete_if_done(root, slug, &lock, it, &all, &files)?
        == crate::lifecycle::Completion::Completed;
    if let (Some(branch), true) = (&branch, completed) {
        // A failure leaves the mark: the next run retries the push (4.4).
        match crate::git::push_recorded(root, branch, push_timeout) {
            Ok(p) => p
                .kept
                .iter()
                .for_each(|k| tracing::warn!(project = %slug, "not pushed: {k}")),
            Err(e) => {
                tracing::warn!(project = %slug, "iteration completed, push failed (retried next run): {e:#}");
                // Announced once it is on the upstream (4.4): the push that succeeds tells.
                let (event, text) =
                    crate::lifecycle::notice(slug, name, crate::model::IterationStatus::Complete);
                let _ = crate::git::owe(root, event, &text);
            }
        }
    } else if upstream && !marked_before {
        crate::git::clear_push_mark(root);
    }
    Ok(completed)
}
