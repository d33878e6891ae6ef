//! The last step of a run: the state it leaves (what was told remembered, claims settled,
//! the cache vouched for), then STATUS.md.

use anyhow::Result;
use chrono::{DateTime, Utc};

use super::tell::Told;
use super::{act, decide, observe, status_md, Installation, TickOptions, TickReport};
use crate::model::BeadStatus;
use crate::tick::orchestrator_state::OrchestratorState;

/// Stores what the run did and told; a dry run stores nothing and only reports.
#[allow(clippy::too_many_arguments)]
pub fn persist(
    inst: &Installation,
    state: OrchestratorState,
    mut observed: observe::Observed,
    plan: &decide::Plan,
    outcome: &act::Outcome,
    told: Told,
    opts: TickOptions,
    now: DateTime<Utc>,
) -> Result<TickReport> {
    if opts.dry_run {
        return Ok(told.report);
    }
    crate::crash_point!("tick::after_act");
    let mut next = state.after_run(now, !outcome.spawned.is_empty(), plan.idle_reason);
    let (report, sessions) = told.remember(&mut next);
    next.held_claims = plan.held.iter().map(decide::held_key).collect();
    next.next_run_by = plan.wake_at;
    next.spawning_paused = observed.paused.clone();
    next.settle_claims(
        plan.settled()
            .filter(|c| !outcome.still_held.contains(&c.bead)),
        plan.upgraded(),
        &outcome.new_claims,
    );
    // The cache this run wrote (observe), vouched for from now on; older fingerprints go.
    next.observe_cache = observed.cache.take();
    next.tracker_fingerprints.clear();
    write(inst, &next, observed, outcome, &sessions, &report, now)?;
    Ok(report)
}

/// Writes the state, then STATUS.md. STATUS.md is written even when the state cannot be, and
/// says why (1.5, 1.6).
fn write(
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
