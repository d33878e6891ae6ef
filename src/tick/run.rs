//! The tick as one straight line: lock → load → observe → decide → act → tell → persist. Each
//! step is one call here; what a step does lives in its own module.

use anyhow::{Context as _, Result};
use chrono::{DateTime, Utc};

use super::persist::persist;
use super::{act, decide, observe, tell};
use super::{Installation, SkipReason, TickOptions, TickReport};
use crate::system::lock::TickLock;
use crate::tick::orchestrator_state::{OrchestratorState, RunKind};

/// One tick. Errors only when the run itself could not happen (the sessions cannot be listed,
/// the state cannot be written); everything project-specific is reported in `errors`.
pub fn run(inst: &Installation, opts: TickOptions, now: DateTime<Utc>) -> Result<TickReport> {
    let _lock = match lock(inst, opts)? {
        Lock::Busy => return Ok(TickReport::skipped(SkipReason::Locked, None, None, false)),
        held => held,
    };
    let state = match load(inst, opts, now) {
        Load::Run(state) => state,
        Load::Skip(report) => return Ok(report),
    };
    let mut observed = observe::tick(inst, &state, opts, now)?;
    let plan = decide::decide(&observed.snapshot, now);
    let mut outcome = act(inst, &mut observed, &plan, &state, opts, now);
    let told = tell::tell(inst, &mut observed, &plan, &mut outcome, &state, opts, now);
    persist(inst, state, observed, &plan, &outcome, told, opts, now)
}

/// Acts on the plan through the effects this run has: a dry run's record what they would do.
fn act(
    inst: &Installation,
    observed: &mut observe::Observed,
    plan: &decide::Plan,
    state: &OrchestratorState,
    opts: TickOptions,
    now: DateTime<Utc>,
) -> act::Outcome {
    if let Some(storm) = &plan.kill_storm {
        tracing::error!("{}", storm.message());
    }
    if opts.dry_run {
        // Only decide and the notices (never sent by a dry run) read the views: freed before
        // acting, a large dry run peaks lower.
        observed.snapshot.projects = Vec::new();
        return act::act(plan, &mut act::DryRun, now);
    }
    let retry = super::attempts::RetryEdge::new(&inst.paths, &inst.config);
    let argv = inst.config.worker_command();
    let workspaces = inst.config.workspaces(&inst.paths, None);
    let mut live = act::Live::new(inst, &observed.trackers, &argv, &workspaces, &retry, state);
    let outcome = act::act(plan, &mut live, now);
    // Whatever dead workers' agents left in their containers, which no session record names
    // any more (a process that dropped the session's mark and left its group).
    crate::system::container::sweep_dead(&inst.paths.braids_dir);
    outcome
}

/// Whether this run may go on: it holds the tick lock, another tick does, or (a dry run, which
/// writes nothing) it needs none.
enum Lock {
    /// Held until dropped.
    Held(#[allow(dead_code)] TickLock),
    Busy,
    NotNeeded,
}

/// Takes the tick lock.
fn lock(inst: &Installation, opts: TickOptions) -> Result<Lock> {
    std::fs::create_dir_all(&inst.paths.braids_dir)
        .with_context(|| format!("cannot create {}", inst.paths.braids_dir.display()))?;
    // A dry run writes nothing, so it needs no lock.
    if opts.dry_run {
        return Ok(Lock::NotNeeded);
    }
    // Said when the folder itself was open to others (so the person learns of it once);
    // files a run creates with the usual umask are tightened quietly.
    match inst.paths.make_private() {
        Ok(t) if t.contains(&inst.paths.braids_dir) => tracing::warn!(
            "made braids' files private to you (0700 folders, 0600 files): {}",
            t.iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Ok(_) => {}
        Err(e) => tracing::warn!(
            "cannot make {} private: {e}",
            inst.paths.braids_dir.display()
        ),
    }
    let lock = TickLock::try_acquire(&inst.paths.lock())
        .with_context(|| format!("cannot open the lock {}", inst.paths.lock().display()))?;
    let Some(lock) = lock else {
        return Ok(Lock::Busy);
    };
    // Temp files of writes killed half-way (SIGKILL, power loss) would pile up run after run.
    for dir in [&inst.paths.braids_dir, &inst.paths.sessions_dir()] {
        crate::system::atomic::sweep(dir, std::time::Duration::from_secs(3600));
    }
    Ok(Lock::Held(lock))
}

/// What load says: run with this state, or skip with this report.
enum Load {
    Run(OrchestratorState),
    Skip(TickReport),
}

/// The state, and whether the idle backoff (2.7) lets this run go on: a run it would skip
/// still goes when a project's files changed since the last full run (`wake`).
fn load(inst: &Installation, opts: TickOptions, now: DateTime<Utc>) -> Load {
    let state = load_state(inst);
    let RunKind::Skipped {
        reason,
        next_full_run,
    } = state.run_kind(now, opts.force)
    else {
        return Load::Run(state);
    };
    let ended = inst.backend.ended_cheaply();
    let woken = state
        .last_run_at
        .and_then(|t| super::wake::changed(&inst.paths, t, now, &ended));
    match woken {
        Some(slug) => {
            tracing::debug!("idle backoff ended: {slug} changed since the last full run");
            Load::Run(state)
        }
        None => {
            // What a dead worker's agent left in its container is stopped by a skipped run
            // too (a full run does it when it acts, after the zombies its observe found).
            crate::system::container::sweep_dead(&inst.paths.braids_dir);
            Load::Skip(TickReport::skipped(
                SkipReason::Backoff,
                Some(reason),
                Some(next_full_run),
                opts.dry_run,
            ))
        }
    }
}

/// The state file, or a fresh state (and a full run) when it is missing or unusable (1.6).
fn load_state(inst: &Installation) -> OrchestratorState {
    match OrchestratorState::load(&inst.paths.state()) {
        Ok(s) => s.unwrap_or_default(),
        Err(warning) => {
            tracing::warn!("{warning}");
            OrchestratorState::default()
        }
    }
}
