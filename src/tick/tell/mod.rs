//! What a run tells after acting, and what it leaves owed: iterations a dead worker left
//! finished (`iterations.rs`), pushes owed from earlier runs (`pushes.rs`), notifications
//! (`notices.rs`, the preflight's), check-ins (`checkin.rs`), the projects' event journals
//! (`event_drafts.rs`) and retention (`retention.rs`). [`tell`] returns one [`Told`], which
//! persist stores.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};

use super::act::Outcome;
use super::decide::Plan;
use super::observe::Observed;
use super::{Installation, TickOptions, TickReport};
use crate::session::Session;
use crate::tick::orchestrator_state::{OrchestratorState, UnknownStories};

pub mod checkin;
pub mod event_drafts;
mod iterations;
pub(super) mod notices;
mod pushes;
pub mod retention;

/// How long a retried push (4.4) may take.
const PUSH_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);

/// What a run told: its report, the sessions as acting left them, and what the next run must
/// remember so it does not tell again.
#[derive(Debug)]
pub struct Told {
    pub report: TickReport,
    pub sessions: Vec<Session>,
    told_no_ready: BTreeSet<String>,
    unknown_stories: UnknownStories,
    orphans: BTreeSet<String>,
    kill_storm_told: bool,
    preflight: BTreeMap<String, String>,
    retention_at: Option<DateTime<Utc>>,
    checkins: Vec<(String, DateTime<Utc>)>,
}

impl Told {
    /// Writes what was told into `next`, the state this run leaves.
    pub fn remember(self, next: &mut OrchestratorState) -> (TickReport, Vec<Session>) {
        next.told_no_ready = self.told_no_ready;
        next.unknown_stories = self.unknown_stories;
        next.orphans = self.orphans;
        next.kill_storm_told = self.kill_storm_told;
        next.preflight = self.preflight;
        next.retention_at = self.retention_at.or(next.retention_at);
        next.told = self
            .report
            .errors
            .iter()
            .chain(&self.report.warnings)
            .cloned()
            .collect();
        next.checkins.extend(self.checkins);
        (self.report, self.sessions)
    }
}

/// Tells what the run did. A dry run only reports: it completes, pushes and sends nothing.
pub fn tell(
    inst: &Installation,
    observed: &mut Observed,
    plan: &Plan,
    outcome: &mut Outcome,
    state: &OrchestratorState,
    opts: TickOptions,
    now: DateTime<Utc>,
) -> Told {
    if opts.dry_run {
        let spawns = std::mem::take(&mut outcome.spawned);
        let errors = errors(observed, plan, outcome, Vec::new());
        let (report, unknown_stories, orphans) = report(
            observed,
            plan,
            outcome,
            spawns,
            Vec::new(),
            errors,
            state,
            true,
        );
        return Told {
            report,
            sessions: Vec::new(),
            told_no_ready: BTreeSet::new(),
            unknown_stories,
            orphans,
            kill_storm_told: false,
            preflight: BTreeMap::new(),
            retention_at: None,
            checkins: Vec::new(),
        };
    }
    let views = &observed.snapshot.projects;
    let (completed, completion_errors) = iterations::finish(
        &observed.reports,
        views,
        plan,
        outcome,
        &observed.trackers,
        PUSH_TIMEOUT,
    );
    let retried = pushes::retry_pushes(&observed.reports, plan, PUSH_TIMEOUT, now, opts.force);
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
    let errors = errors(observed, plan, outcome, push_errors);
    let spawns = outcome.spawned.clone();
    let (mut report, unknown_stories, orphans) = report(
        observed, plan, outcome, spawns, pushed, errors, state, false,
    );

    let notifier = crate::notifier::from_config(&inst.config.notify);
    let told_no_ready = notices::send(observed, plan, outcome, &state.told_no_ready, &notifier);
    let kill_storm_told = notices::kill_storm(observed, plan, state.kill_storm_told, &notifier);
    let (preflight_warnings, preflight) =
        super::preflight::tell(observed, &state.preflight, &notifier);
    report.warnings.extend(preflight_warnings);
    notices::iterations_completed(observed, &completed, &notifier);
    notices::owed(observed, &retried.owed, &notifier);
    notices::kept_work(observed, outcome, &notifier);
    notices::blocked(observed, outcome, &notifier);
    notices::backend_ended(observed, outcome, &notifier);
    if let Some(t) = &observed.breaker_change {
        notices::installation(observed, &t.message(now), &notifier);
    }
    let sessions = inst
        .backend
        .list()
        .unwrap_or_else(|_| observed.snapshot.sessions.clone());
    let checkins = checkin::send_due(inst, &observed.reports, &sessions, state, now, &notifier);
    report.checkins = checkins.iter().map(|(slug, _)| slug.clone()).collect();
    let drafts = event_drafts::drafts(
        outcome,
        &completed,
        &observed.reports,
        &report.errors,
        &state.told,
    );
    event_drafts::write(
        &inst.paths.braids_dir,
        &observed.reports,
        &observed.snapshot.projects,
        &sessions,
        drafts,
        chrono::Utc::now(),
    );
    let retention_at = retention::run(inst, observed, outcome, state, now);
    Told {
        report,
        sessions,
        told_no_ready,
        unknown_stories,
        orphans,
        kill_storm_told,
        preflight,
        retention_at,
        checkins,
    }
}

/// The run's report, with the warnings about unknown stories and orphan sessions new this run,
/// and what to remember of both.
#[allow(clippy::too_many_arguments)]
fn report(
    observed: &Observed,
    plan: &Plan,
    outcome: &Outcome,
    spawns: Vec<super::Spawned>,
    pushed: Vec<String>,
    errors: Vec<String>,
    state: &OrchestratorState,
    dry_run: bool,
) -> (TickReport, UnknownStories, BTreeSet<String>) {
    let mut report = TickReport::full(plan, outcome, spawns, pushed, errors, dry_run);
    let (warnings, unknown_stories) =
        notices::unknown_stories(&observed.reports, &state.unknown_stories);
    let (orphan_warnings, orphans) = notices::orphans(&plan.unmanaged, &state.orphans);
    report.warnings = orphan_warnings;
    report.warnings.extend(warnings);
    report.told_before = state.told.clone();
    (report, unknown_stories, orphans)
}

/// The run's errors, in the order STATUS.md lists them: what stands (`problems::standing`,
/// what `braids status` lists too), then pushes, the plan and acting.
fn errors(
    observed: &Observed,
    plan: &Plan,
    outcome: &Outcome,
    push_errors: Vec<String>,
) -> Vec<String> {
    let mut errors = super::problems::standing(observed, observed.paused.as_ref());
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

#[cfg(test)]
mod tests;
