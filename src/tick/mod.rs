//! The orchestrator tick, one straight line: lock → load → observe → decide → act → persist.
//!
//! [`run`] is that line and nothing else. `observe` and `act` are the only places with I/O
//! (through the tracker and session-backend traits); [`decide()`] is pure. A run that finds the
//! lock held, or that idle backoff says to skip (2.7), returns at once and writes nothing —
//! STATUS.md is rewritten on full runs only (2.8). Check-ins ([`checkin`]) are sent
//! after act and recorded with the state, on full runs that are not dry runs.

pub mod act;
pub mod checkin;
pub mod decide;
mod notices;
pub mod observe;
pub mod status_md;

use anyhow::{Context as _, Result};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::lock::TickLock;
use crate::model::BeadStatus;
use crate::state::{IdleReason, OrchestratorState, RunKind};

pub use crate::installation::Installation;
pub use act::{Killed, Released, Spawned};
pub use decide::{decide, Plan, Snapshot};

#[derive(Debug, Clone, Copy, Default)]
pub struct TickOptions {
    /// Observe and decide; kill, claim, spawn and write nothing.
    pub dry_run: bool,
    /// Ignore idle backoff.
    pub force: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunType {
    Full,
    Skipped,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    Spawn,
    Idle,
}

/// Why a run was skipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SkipReason {
    /// Idle backoff (2.7) said to wait.
    Backoff,
    /// Another tick holds the lock.
    Locked,
}

impl SkipReason {
    pub fn as_str(self) -> &'static str {
        match self {
            SkipReason::Backoff => "backoff",
            SkipReason::Locked => "locked",
        }
    }
}

/// What a tick did; `--json` prints exactly this, and tests read it back.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TickReport {
    pub run: RunType,
    pub action: Action,
    pub idle_reason: Option<IdleReason>,
    pub spawns: Vec<Spawned>,
    pub zombies: Vec<Killed>,
    pub released: Vec<Released>,
    /// Projects whose earlier failed push succeeded on retry this run (4.4).
    pub pushed: Vec<String>,
    pub errors: Vec<String>,
    pub dry_run: bool,
    /// Why a skipped run was skipped: `backoff` or `locked`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skip: Option<SkipReason>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_full_run: Option<DateTime<Utc>>,
    /// Projects whose check-in went out this run.
    pub checkins: Vec<String>,
}

impl TickReport {
    fn skipped(
        skip: SkipReason,
        reason: Option<IdleReason>,
        next: Option<DateTime<Utc>>,
        dry_run: bool,
    ) -> Self {
        TickReport {
            run: RunType::Skipped,
            action: Action::Idle,
            idle_reason: reason,
            spawns: vec![],
            zombies: vec![],
            released: vec![],
            pushed: vec![],
            errors: vec![],
            dry_run,
            skip: Some(skip),
            next_full_run: next,
            checkins: vec![],
        }
    }

    /// Logs [`summary`](Self::summary) as the run's one INFO line, with the numbers as fields
    /// in JSON logs, and each error as a WARN line. `braids tick` and `braids daemon` both log each run through here.
    pub fn log(&self) {
        let summary = self.summary();
        if crate::logging::is_json() {
            self.log_fields(&summary);
        } else {
            tracing::info!("{summary}{}", self.details());
        }
        // The summary counts errors; their text goes to the log too (at WARN, so the run
        // still has one INFO line), since a scheduled run's stdout is not kept.
        for e in &self.errors {
            tracing::warn!("{e}");
        }
    }

    /// Which workers were started and killed, for the log line: ` [spawned: a b; killed: c]`.
    fn details(&self) -> String {
        let mut parts = Vec::new();
        if !self.spawns.is_empty() {
            let labels: Vec<&str> = self.spawns.iter().map(|s| s.label.as_str()).collect();
            parts.push(format!("spawned: {}", labels.join(" ")));
        }
        if !self.zombies.is_empty() {
            let labels: Vec<&str> = self.zombies.iter().map(|z| z.label.as_str()).collect();
            parts.push(format!("killed: {}", labels.join(" ")));
        }
        if parts.is_empty() {
            String::new()
        } else {
            format!(" [{}]", parts.join("; "))
        }
    }

    fn log_fields(&self, summary: &str) {
        // Space-separated: labels never contain spaces.
        let spawned_labels: Vec<&str> = self.spawns.iter().map(|s| s.label.as_str()).collect();
        let killed_labels: Vec<&str> = self.zombies.iter().map(|z| z.label.as_str()).collect();
        let (spawned_labels, killed_labels) = (spawned_labels.join(" "), killed_labels.join(" "));
        tracing::info!(
            run = match self.run {
                RunType::Full => "full",
                RunType::Skipped => "skipped",
            },
            skip = self.skip.map(SkipReason::as_str),
            dry_run = self.dry_run,
            spawned = self.spawns.len(),
            killed = self.zombies.len(),
            released = self.released.len(),
            idle_reason = self.idle_reason.map(|r| r.as_str()),
            errors = self.errors.len(),
            checkins = self.checkins.len(),
            spawned_labels = %spawned_labels,
            killed_labels = %killed_labels,
            "{summary}"
        );
    }

    /// The one log line that says what the run did.
    pub fn summary(&self) -> String {
        let dry = if self.dry_run { " (dry run)" } else { "" };
        match (self.run, self.skip) {
            (RunType::Skipped, Some(SkipReason::Locked)) => {
                "skipped: another tick holds the lock".into()
            }
            (RunType::Skipped, _) => format!(
                "skipped{dry}: idle ({}) until {}",
                self.idle_reason.map_or("-", |r| r.as_str()),
                self.next_full_run
                    .map_or("-".into(), |t| t.format("%H:%M:%S UTC").to_string())
            ),
            (RunType::Full, _) => {
                let mut s = format!(
                    "full run{dry}: spawned {}, killed {}",
                    self.spawns.len(),
                    self.zombies.len()
                );
                if !self.pushed.is_empty() {
                    s.push_str(&format!(", pushed {}", self.pushed.len()));
                }
                if !self.released.is_empty() {
                    s.push_str(&format!(", released {}", self.released.len()));
                }
                if let Some(r) = self.idle_reason {
                    s.push_str(&format!(", idle: {r}"));
                }
                if !self.checkins.is_empty() {
                    s.push_str(&format!(", checked in: {}", self.checkins.join(" ")));
                }
                if !self.errors.is_empty() {
                    s.push_str(&format!(", {} error(s)", self.errors.len()));
                }
                s
            }
        }
    }
}

/// One tick. Errors only when the run itself could not happen (the sessions cannot be listed,
/// the state cannot be written); everything project-specific is reported in `errors`.
pub fn run(inst: &Installation, opts: TickOptions, now: DateTime<Utc>) -> Result<TickReport> {
    // lock
    std::fs::create_dir_all(&inst.paths.braids_dir)
        .with_context(|| format!("cannot create {}", inst.paths.braids_dir.display()))?;
    let _lock = if opts.dry_run {
        None
    } else {
        match TickLock::try_acquire(&inst.paths.lock())
            .with_context(|| format!("cannot open the lock {}", inst.paths.lock().display()))?
        {
            Some(l) => Some(l),
            None => return Ok(TickReport::skipped(SkipReason::Locked, None, None, false)),
        }
    };

    // Temp files of writes killed half-way (SIGKILL, power loss) would pile up run after run.
    if !opts.dry_run {
        for dir in [&inst.paths.braids_dir, &inst.paths.sessions_dir()] {
            crate::atomic::sweep(dir, std::time::Duration::from_secs(3600));
        }
    }

    // load
    let state = match OrchestratorState::load(&inst.paths.state()) {
        Ok(s) => s.unwrap_or_default(),
        Err(warning) => {
            tracing::warn!("{warning}");
            OrchestratorState::default()
        }
    };
    if let RunKind::Skipped {
        reason,
        next_full_run,
    } = state.run_kind(now, opts.force)
    {
        return Ok(TickReport::skipped(
            SkipReason::Backoff,
            Some(reason),
            Some(next_full_run),
            opts.dry_run,
        ));
    }

    // observe
    let survey = inst
        .backend
        .survey()
        .context("cannot list worker sessions, so cannot tell who is running")?;
    let sessions = survey.sessions;
    let ctx = observe::Context {
        paths: &inst.paths,
        config: &inst.config,
        config_warnings: &inst.config_warnings,
        read_only: opts.dry_run,
    };
    let mut observed = observe::observe(&ctx, sessions, state.claims.clone());
    observed.snapshot.unreadable = survey.problems;

    // decide
    let plan = decide(&observed.snapshot, now);

    // act
    let worker_argv = inst.config.worker_command();
    let fx = act::Effects {
        backend: inst.backend.as_ref(),
        trackers: &observed.trackers,
        paths: &inst.paths,
        worker_argv: &worker_argv,
        actor: &inst.config.tracker.actor,
        kill_grace: std::time::Duration::from_secs(inst.config.sessions.kill_grace_secs),
    };
    // Every claim is recorded before it is made: a run killed between a claim and its end
    // must not leave a bead in_progress that no later run knows to release (2.1).
    let mut ahead_state = state.clone();
    let state_file = inst.paths.state();
    let mut write_ahead = |a: act::Ahead<'_>| -> Result<()> {
        match a {
            act::Ahead::Claiming(c) => ahead_state.claims.push(c.clone()),
            act::Ahead::Refused(c) => ahead_state
                .claims
                .retain(|x| !(x.project == c.project && x.bead == c.bead)),
        }
        crate::atomic::write(&state_file, ahead_state.to_json().as_bytes())
    };
    let outcome = act::act_with(&plan, &fx, now, opts.dry_run, &mut write_ahead);

    let (pushed, push_errors) = if opts.dry_run {
        (Vec::new(), Vec::new())
    } else {
        act::retry_pushes(
            &observed.reports,
            &plan,
            std::time::Duration::from_secs(120),
        )
    };
    let spawned = !outcome.spawned.is_empty();
    let mut errors = Vec::new();
    errors.extend(push_errors);
    errors.extend(plan.errors.iter().cloned());
    errors.extend(outcome.errors.iter().cloned());
    errors.extend(
        observed
            .reports
            .iter()
            .filter_map(|r| r.error.as_ref().map(|e| format!("{}: {e}", r.slug))),
    );
    let mut report = TickReport {
        run: RunType::Full,
        action: if spawned { Action::Spawn } else { Action::Idle },
        idle_reason: (!spawned).then_some(plan.idle_reason),
        spawns: outcome.spawned.clone(),
        zombies: outcome.killed.clone(),
        released: outcome.released.clone(),
        pushed,
        errors,
        dry_run: opts.dry_run,
        skip: None,
        next_full_run: None,
        checkins: vec![],
    };
    if opts.dry_run {
        return Ok(report);
    }

    let notifier = crate::notify::from_config(&inst.config.notify);
    let dry = notices::send(&observed, &plan, &outcome, &state.dry, &notifier);

    // check-ins
    let sessions_now = inst
        .backend
        .list()
        .unwrap_or_else(|_| observed.snapshot.sessions.clone());
    let sent = checkin::send_due(inst, &observed.reports, &sessions_now, &state, now);
    report.checkins = sent.iter().map(|(slug, _)| slug.clone()).collect();

    // persist
    let mut next = state.after_run(now, spawned, plan.idle_reason);
    next.dry = dry;
    next.checkins.extend(sent);
    next.settle_claims(plan.settled(), &outcome.new_claims);
    // STATUS.md is written even when the state cannot be, and says why (1.5, 1.6).
    let saved = crate::atomic::write(&inst.paths.state(), next.to_json().as_bytes());
    let mut shown_errors = report.errors.clone();
    if let Err(e) = &saved {
        shown_errors.push(format!("the run's state was not recorded: {e:#}"));
    }

    // The beads as this run leaves them: claimed ones are in_progress, released ones open.
    let mut reports = observed.reports;
    let at: std::collections::HashMap<String, usize> = reports
        .iter()
        .enumerate()
        .map(|(i, r)| (r.slug.clone(), i))
        .collect();
    let mut mark = |slug: &str, bead, from, to| {
        if let Some(&i) = at.get(slug) {
            reports[i].record_transition(bead, from, to);
        }
    };
    for c in &outcome.new_claims {
        mark(
            &c.project,
            &c.bead,
            BeadStatus::Open,
            BeadStatus::InProgress,
        );
    }
    for r in &outcome.released {
        mark(
            &r.project,
            &r.bead,
            BeadStatus::InProgress,
            BeadStatus::Open,
        );
    }
    let text = status_md::render(&status_md::Dashboard {
        now,
        reports: &reports,
        sessions: &sessions_now,
        summary: &report.summary(),
        diagnostics: &observed.diagnostics,
        errors: &shown_errors,
    });
    let shown = crate::atomic::write(&inst.paths.status(), text.as_bytes());
    saved?;
    shown?;
    Ok(report)
}
