//! `braids daemon`: the tick on an internal schedule, for machines with neither cron nor
//! systemd (containers).
//!
//! Each run is exactly `braids tick`: the installation is opened afresh (so config edits apply
//! at the next run) and [`crate::tick::run`] does the work on a blocking thread while the loop
//! listens for SIGTERM and SIGINT. A signal that arrives during a run is noted, the run finishes
//! — a tick is never interrupted half-way — and the daemon exits 0. SIGHUP is ignored. A tick started by cron at
//! the same time cannot overlap: the tick's own lock makes one of them a skipped run. A run that
//! fails is logged and the daemon carries on.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use chrono::{DateTime, Local};
use tokio::signal::unix::{signal, Signal, SignalKind};

use crate::system::paths::Paths;
use crate::tick::TickReport;

use super::Schedule;

/// How long the daemon sleeps at most before looking at the clock again, so a suspended
/// machine or a changed wall clock delays a calendar run by at most this much.
const RECHECK: Duration = Duration::from_secs(30);

struct Signals {
    term: Signal,
    int: Signal,
    hup: Signal,
}

impl Signals {
    /// Resolves with the name of the first stop signal received. SIGHUP (a closed terminal,
    /// or a habit of asking daemons to reload) is logged and otherwise ignored: it must not
    /// kill a run half-way, and the config is read afresh at every run anyway.
    async fn recv(&mut self) -> &'static str {
        loop {
            tokio::select! {
                _ = self.term.recv() => return "SIGTERM",
                _ = self.int.recv() => return "SIGINT",
                _ = self.hup.recv() => {
                    tracing::info!("SIGHUP ignored: the config is read at every run; stop with SIGTERM");
                }
            }
        }
    }
}

/// Runs until SIGTERM or SIGINT; returns the exit code (0 after a clean stop).
/// `one_run` is what each run does: the tick and what follows it (the CLI's
/// `app::issue_replies::scheduled_run`).
pub fn run(paths: &Paths, schedule: Schedule, one_run: OneRun) -> Result<i32> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    rt.block_on(run_loop(paths.clone(), schedule, one_run))
}

/// One scheduled run, as `braids tick` runs it.
pub type OneRun = fn(&Paths) -> Result<TickReport>;

/// When the next run is due.
enum Due {
    /// On the monotonic clock (intervals).
    At(Instant),
    /// On the wall clock (calendar schedules).
    Wall(DateTime<Local>),
}

fn first_due(schedule: &Schedule) -> Due {
    match schedule {
        // An interval daemon starts with a run: a container that just started has work to do.
        Schedule::Every(_) => Due::At(Instant::now()),
        Schedule::Cron(e) => next_wall(e, Local::now()),
    }
}

fn next_wall(e: &super::CronExpr, after: DateTime<Local>) -> Due {
    match e.next_after(&after) {
        Some(t) => Due::Wall(t),
        // Parsing refuses schedules that never fire; this is a year-9999 safety net.
        None => Due::At(Instant::now() + Duration::from_secs(86_400 * 365)),
    }
}

fn describe(d: &Due) -> String {
    match d {
        Due::At(i) => match i.saturating_duration_since(Instant::now()).as_secs() {
            0 => "now".into(),
            s => format!("in {s}s"),
        },
        Due::Wall(t) => t.format("at %Y-%m-%d %H:%M:%S %Z").to_string(),
    }
}

/// Sleeps until `due`; `Some(signal)` when a stop signal came first.
async fn wait(due: &Due, signals: &mut Signals) -> Option<&'static str> {
    loop {
        let left = match due {
            Due::At(i) => i.saturating_duration_since(Instant::now()),
            Due::Wall(t) => (*t - Local::now()).to_std().unwrap_or(Duration::ZERO),
        };
        if left.is_zero() {
            return None;
        }
        tokio::select! {
            _ = tokio::time::sleep(left.min(RECHECK)) => {}
            s = signals.recv() => return Some(s),
        }
    }
}

async fn run_loop(paths: Paths, schedule: Schedule, one_run: OneRun) -> Result<i32> {
    let mut signals = Signals {
        term: signal(SignalKind::terminate()).context("cannot listen for SIGTERM")?,
        int: signal(SignalKind::interrupt()).context("cannot listen for SIGINT")?,
        hup: signal(SignalKind::hangup()).context("cannot listen for SIGHUP")?,
    };
    let mut due = first_due(&schedule);
    tracing::info!(
        "daemon started ({schedule}); first run {}; stop with SIGTERM or Ctrl-C",
        describe(&due)
    );
    let stopped_by = 'outer: loop {
        if let Some(s) = wait(&due, &mut signals).await {
            break s;
        }
        let started = Instant::now();
        let p = paths.clone();
        let mut run = tokio::task::spawn_blocking(move || one_run(&p));
        let mut stopping: Option<&'static str> = None;
        loop {
            tokio::select! {
                result = &mut run => {
                    match result {
                        Ok(Ok(report)) => report.log(),
                        Ok(Err(e)) => tracing::error!("tick failed: {e:#}"),
                        Err(e) => tracing::error!("tick panicked: {e}"),
                    }
                    break;
                }
                s = signals.recv(), if stopping.is_none() => {
                    tracing::info!("{s} received; stopping once the run in progress finishes");
                    stopping = Some(s);
                }
            }
        }
        if let Some(s) = stopping {
            break 'outer s;
        }
        due = match &schedule {
            Schedule::Every(i) => {
                // Fixed rate from the last start; a run longer than the interval is followed
                // at once by the next, never by a burst of missed ones.
                Due::At((started + i.duration()).max(Instant::now()))
            }
            Schedule::Cron(e) => next_wall(e, Local::now()),
        };
        tracing::debug!("next run {}", describe(&due));
    };
    tracing::info!("daemon stopped ({stopped_by})");
    Ok(crate::system::exit::EXIT_OK)
}
