//! Contract 2.6 for one session: the zombie order (bead status before runtime, then the
//! stall), as one pure function the tick and the simulation share.

use std::path::PathBuf;

use chrono::{DateTime, Duration, Utc};
use serde::Serialize;

use super::BeadLookup;
use crate::model::BeadStatus;
use crate::session::Session;

/// Why a session is a zombie (2.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ZombieReason {
    SessionEnded,
    /// Its worker has exited; what it left running (its agent) works for nobody.
    WorkerGone,
    BeadClosed,
    Timeout,
    /// No output and no changed file for StallTimeout.
    Stalled,
    /// A protocol step ran past its rule's `timeout_min`.
    StepTimeout,
}

impl ZombieReason {
    /// As `--json` and the log name it.
    pub fn as_str(self) -> &'static str {
        match self {
            ZombieReason::SessionEnded => "session-ended",
            ZombieReason::WorkerGone => "worker-gone",
            ZombieReason::BeadClosed => "bead-closed",
            ZombieReason::Timeout => "timeout",
            ZombieReason::Stalled => "stalled",
            ZombieReason::StepTimeout => "step-timeout",
        }
    }
}

impl std::fmt::Display for ZombieReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How 2.6 classifies one session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionVerdict {
    /// Not running: excluded from the count, nothing to kill.
    Ended,
    Kill(ZombieReason),
    Healthy,
}

/// The zombie order of 2.6 for one session. `timeout` is the project's WorkerTimeout;
/// `stall` its StallTimeout (0: off) and `active` the worker's last activity. A `finishing`
/// worker (past its agent, in its fixed steps) closed the bead itself and prints nothing while
/// it commits and pushes: only its WorkerTimeout stops it.
pub fn classify(
    session: &Session,
    bead: BeadLookup,
    timeout_secs: u64,
    stall: (u64, Option<DateTime<Utc>>),
    finishing: bool,
    now: DateTime<Utc>,
) -> SessionVerdict {
    if !session.running {
        return SessionVerdict::Ended;
    }
    // Before anything else: nothing may work on a bead for a worker that is gone, finishing
    // or not.
    if session.worker_gone {
        return SessionVerdict::Kill(ZombieReason::WorkerGone);
    }
    if !finishing
        && matches!(
            bead,
            BeadLookup::Known(BeadStatus::Closed) | BeadLookup::Missing
        )
    {
        return SessionVerdict::Kill(ZombieReason::BeadClosed);
    }
    // Queued on a cluster: no agent runs yet, so neither its time nor a stall has started
    // (Slurm counts `--time` from the job's start).
    if session.queued {
        return SessionVerdict::Healthy;
    }
    let limit = secs(timeout_secs);
    if now - session.started_at > limit {
        return SessionVerdict::Kill(ZombieReason::Timeout);
    }
    let (stall_secs, active) = stall;
    if finishing {
        return SessionVerdict::Healthy;
    }
    let quiet = now - active.map_or(session.started_at, |a| a.max(session.started_at));
    if stall_secs > 0 && quiet > secs(stall_secs) {
        return SessionVerdict::Kill(ZombieReason::Stalled);
    }
    SessionVerdict::Healthy
}

fn secs(n: u64) -> Duration {
    Duration::seconds(
        i64::try_from(n)
            .unwrap_or(i64::MAX / 1000)
            .min(i64::MAX / 1000),
    )
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Zombie {
    pub session: Session,
    pub reason: ZombieReason,
    /// The registered project it works for: a worker stopped for its time or a stall is a
    /// failed attempt of that project's bead.
    pub owner: Option<ZombieOwner>,
}

impl Zombie {
    /// Why it is stopped, in words for its log.
    pub fn why(&self) -> String {
        let (timeout, stall) = self
            .owner
            .as_ref()
            .map_or((0, 0), |o| (o.timeout_secs, o.stall_secs));
        match self.reason {
            ZombieReason::Timeout => format!("its WorkerTimeout of {timeout}s ran out"),
            ZombieReason::Stalled => {
                format!("stalled: no output and no changed file for its StallTimeout of {stall}s")
            }
            ZombieReason::StepTimeout => "its protocol step's timeout_min ran out".into(),
            ZombieReason::BeadClosed => "its bead was closed meanwhile".into(),
            ZombieReason::WorkerGone => "its worker process was gone".into(),
            ZombieReason::SessionEnded => "its session had ended".into(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZombieOwner {
    pub slug: String,
    pub path: PathBuf,
    /// WorkerTimeout and StallTimeout, seconds.
    pub timeout_secs: u64,
    pub stall_secs: u64,
}
