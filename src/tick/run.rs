//! The tick as one straight line: lock → load → observe → decide → act → persist. Each step is
//! one call here; what a step does lives in its own module.

use anyhow::{Context as _, Result};
use chrono::{DateTime, Utc};

use super::attempts::RetryEdge;
use super::{act, checkin, decide, notices, observe, status_md};
use super::{Installation, SkipReason, TickOptions, TickReport};
use crate::model::BeadStatus;
use crate::system::lock::TickLock;
use crate::tick::orchestrator_state::{OrchestratorState, RunKind};

/// One tick. Errors only when the run itself could not happen (the sessions cannot be listed,
/// the state cannot be written); everything project-specific is reported in `errors`.
pub fn run(inst: &Installation, opts: TickOptions, now: DateTime<Utc>) -> Result<TickReport> {
    // lock
    let Some(_lock) = lock(inst, opts)? else {
        return Ok(TickReport::skipped(SkipReason::Locked, None, None, false));
    };

    // load
    let state = load_state(inst);
    if let RunKind::Skipped {
        reason,
        next_full_run,
    } = state.run_kind(now, opts.force)
    {
        let ended = inst.backend.ended_cheaply();
        let woken = state
            .last_run_at
            .and_then(|t| super::wake::changed(&inst.paths, t, now, &ended));
        let Some(slug) = woken else {
            let why = Some(reason);
            return Ok(TickReport::skipped(
                SkipReason::Backoff,
                why,
                Some(next_full_run),
                opts.dry_run,
            ));
        };
        tracing::debug!("idle backoff ended: {slug} changed since the last full run");
    }

    // observe
    let mut observed =
        observe::observe_installation(inst, &state, opts.dry_run, !opts.dry_run, now)?;
    observed.snapshot.allow_mass_kill = opts.allow_mass_kill;
    super::preflight::check(&inst.config, &mut observed);
    let retry = RetryEdge::new(&inst.paths, &inst.config, opts.dry_run);
    let (breaker_change, paused) = retry.observe(&inst.paths, &mut observed, &state, now);
    if let Some(t) = &breaker_change {
        tracing::warn!("{}", t.message(now));
    }

    // decide
    let plan = decide::decide(&observed.snapshot, now);
    if let Some(storm) = &plan.kill_storm {
        tracing::error!("{}", storm.message());
    }
    if opts.dry_run {
        // Only decide and the notices (never sent by a dry run) read the views: freed before
        // acting, a large dry run peaks lower.
        observed.snapshot.projects = Vec::new();
    }

    // act
    let mut ahead = WriteAhead::new(&state, inst.paths.state());
    let argv = inst.config.worker_command();
    let workspaces = inst.config.workspaces(&inst.paths, None);
    let mut outcome = act::act_with(
        &plan,
        &effects(inst, &observed, &argv, &workspaces, &retry),
        now,
        opts.dry_run,
        &mut |a| ahead.record(a),
    );
    retry.probing(&plan, outcome.spawned.len(), now);
    let (completed, completion_errors) = match opts.dry_run {
        true => (Vec::new(), Vec::new()),
        false => act::finish_iterations(
            &observed.reports,
            &observed.snapshot.projects,
            &plan,
            &outcome,
            &observed.trackers,
            PUSH_TIMEOUT,
        ),
    };
    let retried = match opts.dry_run {
        true => super::pushes::Retried::default(),
        false => {
            super::pushes::retry_pushes(&observed.reports, &plan, PUSH_TIMEOUT, now, opts.force)
        }
    };
    let (pushed, mut push_errors) = (retried.pushed, retried.errors);
    // STATUS.md shows what this run leaves: a push it made owes nothing any more.
    for r in observed
        .reports
        .iter_mut()
        .filter(|r| pushed.contains(&r.slug))
    {
        r.push_pending = false;
        r.not_pushed = None;
    }
    push_errors.extend(completion_errors);
    let shown = errors(&observed, &plan, &outcome, push_errors, paused.as_ref());
    let spawns = match opts.dry_run {
        true => std::mem::take(&mut outcome.spawned),
        false => outcome.spawned.clone(),
    };
    let mut report = TickReport::full(&plan, &outcome, spawns, pushed, shown, opts.dry_run);
    let (warnings, unknown_stories) =
        notices::unknown_stories(&observed.reports, &state.unknown_stories);
    let (orphan_warnings, orphans) = notices::orphans(&plan.unmanaged, &state.orphans);
    report.warnings = orphan_warnings;
    report.warnings.extend(warnings);
    report.told_before = state.told.clone();
    if opts.dry_run {
        return Ok(report);
    }
    let notifier = crate::notifier::from_config(&inst.config.notify);
    let dry = notices::send(&observed, &plan, &outcome, &state.dry, &notifier);
    let storm_told = notices::kill_storm(&observed, &plan, state.kill_storm_told, &notifier);
    let (preflight_warnings, preflight) =
        super::preflight::tell(&observed, &state.preflight, &notifier);
    report.warnings.extend(preflight_warnings);
    notices::iterations_completed(&observed, &completed, &notifier);
    notices::owed(&observed, &retried.owed, &notifier);
    notices::kept_work(&observed, &outcome, &notifier);
    notices::blocked(&observed, &outcome, &notifier);
    notices::backend_ended(&observed, &outcome, &notifier);
    if let Some(t) = &breaker_change {
        notices::installation(&observed, &t.message(now), &notifier);
    }
    let sessions_now = inst
        .backend
        .list()
        .unwrap_or_else(|_| observed.snapshot.sessions.clone());
    let sent = checkin::send_due(
        inst,
        &observed.reports,
        &sessions_now,
        &state,
        now,
        &notifier,
    );
    report.checkins = sent.iter().map(|(slug, _)| slug.clone()).collect();
    let drafts = super::events::drafts(
        &outcome,
        &completed,
        &observed.reports,
        &report.errors,
        &state.told,
    );
    super::events::write(
        &inst.paths.braids_dir,
        &observed.reports,
        &observed.snapshot.projects,
        &sessions_now,
        drafts,
        chrono::Utc::now(),
    );

    let retained = super::retention::run(inst, &observed, &outcome, &state, now);
    crate::crash_point!("tick::after_act");
    // persist
    let mut next = state.after_run(now, !outcome.spawned.is_empty(), plan.idle_reason);
    next.dry = dry;
    next.unknown_stories = unknown_stories;
    next.orphans = orphans;
    next.kill_storm_told = storm_told;
    next.preflight = preflight;
    next.held_claims = plan.held.iter().map(decide::held_key).collect();
    next.next_run_by = plan.wake_at;
    next.spawning_paused = paused.clone();
    next.retention_at = retained.or(state.retention_at);
    next.told = report
        .errors
        .iter()
        .chain(&report.warnings)
        .cloned()
        .collect();
    next.checkins.extend(sent);
    next.settle_claims(
        plan.settled()
            .filter(|c| !outcome.still_held.contains(&c.bead)),
        plan.upgraded(),
        &outcome.new_claims,
    );
    // The cache this run wrote (observe), vouched for from now on; older fingerprints go.
    next.observe_cache = observed.cache.take();
    next.tracker_fingerprints.clear();
    persist(inst, &next, observed, &outcome, &sessions_now, &report, now)?;
    Ok(report)
}

/// How long a retried push (4.4) may take.
const PUSH_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);

/// The tick lock, or `None` when another tick holds it. A dry run takes no lock (it writes
/// nothing), so it gets `Some(None)`.
fn lock(inst: &Installation, opts: TickOptions) -> Result<Option<Option<TickLock>>> {
    std::fs::create_dir_all(&inst.paths.braids_dir)
        .with_context(|| format!("cannot create {}", inst.paths.braids_dir.display()))?;
    if !opts.dry_run {
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
    }
    if opts.dry_run {
        return Ok(Some(None));
    }
    let lock = TickLock::try_acquire(&inst.paths.lock())
        .with_context(|| format!("cannot open the lock {}", inst.paths.lock().display()))?;
    let Some(lock) = lock else {
        return Ok(None);
    };
    // Temp files of writes killed half-way (SIGKILL, power loss) would pile up run after run.
    for dir in [&inst.paths.braids_dir, &inst.paths.sessions_dir()] {
        crate::system::atomic::sweep(dir, std::time::Duration::from_secs(3600));
    }
    Ok(Some(Some(lock)))
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

fn effects<'a>(
    inst: &'a Installation,
    observed: &'a observe::Observed,
    worker_argv: &'a [String],
    workspaces: &'a dyn crate::workspace::Workspaces,
    retry: &'a RetryEdge,
) -> act::Effects<'a> {
    act::Effects {
        backend: inst.backend.as_ref(),
        trackers: &observed.trackers,
        paths: &inst.paths,
        worker_argv,
        actor: &inst.config.tracker.actor,
        kill_grace: std::time::Duration::from_secs(inst.config.sessions.kill_grace_secs),
        workspaces,
        retry: Some(retry),
        events: true,
    }
}

/// Every claim is recorded before it is made: a run killed between a claim and its end must
/// not leave a bead in_progress that no later run knows to release (2.1).
struct WriteAhead {
    state: OrchestratorState,
    file: std::path::PathBuf,
}

impl WriteAhead {
    fn new(state: &OrchestratorState, file: std::path::PathBuf) -> Self {
        WriteAhead {
            state: state.clone(),
            file,
        }
    }

    fn record(&mut self, a: act::Ahead<'_>) -> Result<()> {
        match a {
            act::Ahead::Claiming(c) => self.state.claims.push(c.clone()),
            act::Ahead::Refused(c) => self.state.claims.retain(|x| x != c),
        }
        crate::system::atomic::write(&self.file, self.state.to_json().as_bytes())
    }
}

/// The run's errors, in the order STATUS.md lists them: what stands (`problems::standing`,
/// what `braids status` lists too), then pushes, the plan and acting.
fn errors(
    observed: &observe::Observed,
    plan: &decide::Plan,
    outcome: &act::Outcome,
    push_errors: Vec<String>,
    paused: Option<&String>,
) -> Vec<String> {
    let mut errors = super::problems::standing(observed, paused);
    errors.extend(push_errors);
    errors.extend(plan.kill_storm.iter().map(|k| k.message()));
    if !plan.held.is_empty() {
        errors.push(format!(
            "release-storm guard: {} of the {} claims seem to have lost their workers at once, \
             so none was released this run; claims still without a worker next run are released",
            plan.held.len() + plan.releases.len(),
            observed.snapshot.claims.len()
        ));
    }
    errors.extend(plan.errors.iter().cloned());
    errors.extend(outcome.errors.iter().cloned());
    errors
}

/// Writes the state, then STATUS.md. STATUS.md is written even when the state cannot be, and
/// says why (1.5, 1.6).
fn persist(
    inst: &Installation,
    next: &OrchestratorState,
    observed: observe::Observed,
    outcome: &act::Outcome,
    sessions_now: &[crate::session::Session],
    report: &TickReport,
    now: DateTime<Utc>,
) -> Result<()> {
    let saved = crate::system::atomic::write(&inst.paths.state(), next.to_json().as_bytes());
    let mut shown_errors = report.errors.clone();
    if let Err(e) = &saved {
        shown_errors.push(format!("the run's state was not recorded: {e:#}"));
    }
    let mut reports = as_left(observed.reports, outcome);
    observe::see_pools(&mut reports, &inst.config, &inst.paths);
    let text = status_md::render(&status_md::Dashboard {
        now,
        reports: &reports,
        sessions: sessions_now,
        summary: &report.summary(),
        diagnostics: &observed.diagnostics,
        errors: &shown_errors,
    });
    let shown = crate::system::atomic::write(&inst.paths.status(), text.as_bytes());
    saved?;
    shown?;
    Ok(())
}

/// The beads as this run leaves them: claimed ones are in_progress, released ones open.
fn as_left(
    mut reports: Vec<observe::ProjectReport>,
    outcome: &act::Outcome,
) -> Vec<observe::ProjectReport> {
    let at: std::collections::HashMap<String, usize> = reports
        .iter()
        .enumerate()
        .map(|(i, r)| (r.slug.clone(), i))
        .collect();
    let moves = outcome
        .new_claims
        .iter()
        .map(|c| {
            (
                &c.project,
                &c.bead,
                BeadStatus::Open,
                BeadStatus::InProgress,
            )
        })
        .chain(outcome.released.iter().map(|r| {
            (
                &r.project,
                &r.bead,
                BeadStatus::InProgress,
                BeadStatus::Open,
            )
        }));
    for (slug, bead, from, to) in moves {
        if let Some(&i) = at.get(slug) {
            reports[i].record_transition(bead, from, to);
        }
    }
    reports
}
