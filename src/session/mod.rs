//! Worker sessions behind one trait: local processes (the default), tmux, Slurm batch jobs, and
//! OpenClaw sessions.
//!
//! A session is identified by its label `project:<slug>:<bead-id>` (CONTRACTS 2.5). Backends
//! report every session they know of, running or ended, so `decide` can apply the zombie order
//! of 2.6 itself; they never guess at liveness from a pid alone (a reused pid is not a worker).
//!
//! The backend is a property of the session, not of today's config (CONTRACTS 2.9): a worker
//! started under `tmux` keeps running after config.toml says `process`, so it must stay
//! counted, killable and subject to the zombie rules. An installation therefore works through a
//! [`Composite`] of every backend braids knows ([`all_backends`]): new workers start under the
//! configured one, while listing, killing and forgetting reach every backend, each
//! [`Session`] naming the backend that owns it.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::model::{SessionLabel, SpawnMessage};

mod composite;
pub mod openclaw;
pub mod placement;
pub mod process;
mod procfs;
pub mod slurm;
mod spec;
pub mod tmux;

pub use composite::Composite;
pub use placement::{Placement, PlacementProblem};

/// Which backend runs workers (config.toml `[sessions] backend`), and which one owns a session.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default,
)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    #[default]
    Process,
    Tmux,
    Slurm,
    #[serde(rename = "openclaw")]
    OpenClaw,
}

impl BackendKind {
    /// Every backend, as PROJECT.md's `Backend:` accepts them.
    pub const ALL: [BackendKind; 4] = [
        BackendKind::Process,
        BackendKind::Tmux,
        BackendKind::Slurm,
        BackendKind::OpenClaw,
    ];

    /// The name config.toml and `braids sessions --json` use.
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Process => "process",
            BackendKind::Tmux => "tmux",
            BackendKind::Slurm => "slurm",
            BackendKind::OpenClaw => "openclaw",
        }
    }

    /// Reads a backend's name, in any case.
    pub fn parse(raw: &str) -> Option<BackendKind> {
        let raw = raw.trim();
        BackendKind::ALL
            .into_iter()
            .find(|k| k.name().eq_ignore_ascii_case(raw))
    }
}

impl std::fmt::Display for BackendKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What to start.
#[derive(Debug, Clone)]
pub struct SpawnSpec {
    pub label: SessionLabel,
    /// Given to the worker on stdin (2.4).
    pub message: SpawnMessage,
    /// The worker command; never a shell string.
    pub argv: Vec<OsString>,
    pub cwd: PathBuf,
    pub env: Vec<(OsString, OsString)>,
    /// Where the session's stdout and stderr go.
    pub log: PathBuf,
    /// Where and with what the session runs; only a cluster backend reads the resources.
    pub placement: Placement,
}

/// A session as observed now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Session {
    #[serde(serialize_with = "ser_label")]
    pub label: SessionLabel,
    /// Backend-specific identity, for example `pid:starttime` or a tmux session name.
    pub id: String,
    /// The backend that started the session and alone can stop it, whatever the config says
    /// now.
    pub backend: BackendKind,
    pub pid: Option<u32>,
    pub started_at: DateTime<Utc>,
    /// False when the process has exited, or its pid now belongs to another process.
    pub running: bool,
    /// Running only in what its worker left behind (its agent, its agent's children): the
    /// worker itself has exited, so they work for nobody and are stopped before the bead is
    /// handed on.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub worker_gone: bool,
    /// Waiting in a cluster's queue: it holds its bead and counts against MaxWorkers, but no
    /// agent runs yet, so it is never timed out or stalled.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub queued: bool,
    /// Why the backend itself ended a session that is no longer running (Slurm's time or
    /// memory limit), for the tick's error and the blocker notification.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended: Option<String>,
    pub log: Option<PathBuf>,
}

fn ser_label<S: serde::Serializer>(l: &SessionLabel, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&l.to_string())
}

/// How a kill went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[must_use]
pub enum KillOutcome {
    /// Exited within the grace period after SIGTERM.
    Terminated,
    /// Needed SIGKILL.
    Killed,
    /// Was already gone, or its pid now belongs to someone else: nothing was signalled.
    AlreadyGone,
}

impl From<crate::system::proc::Stopped> for KillOutcome {
    fn from(s: crate::system::proc::Stopped) -> Self {
        match s {
            crate::system::proc::Stopped::Terminated => KillOutcome::Terminated,
            crate::system::proc::Stopped::Killed => KillOutcome::Killed,
            crate::system::proc::Stopped::AlreadyGone => KillOutcome::AlreadyGone,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("cannot start session {label}: {detail}")]
    Spawn { label: String, detail: String },
    #[error("session backend {backend}: {detail}")]
    Backend {
        backend: &'static str,
        detail: String,
    },
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// A session record a backend found but could not read (a corrupt file, a tmux session without
/// a valid label). Reported so a person can look, never fatal and never guessed at.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SessionProblem {
    /// The label, when it could still be recovered (from a file name, say).
    pub label: Option<String>,
    /// Where the record lives: a file path or a tmux session.
    pub location: String,
    pub detail: String,
}

impl SessionProblem {
    /// What STATUS.md and `braids status` say of it.
    pub fn sentence(&self) -> String {
        match &self.label {
            Some(l) => format!(
                "{l}: session record {} cannot be read ({}); counted as running until a \
                 person checks the worker and fixes or removes the record",
                self.location, self.detail
            ),
            None => format!(
                "session record {} cannot be read ({}) and names no session; fix or remove it",
                self.location, self.detail
            ),
        }
    }
}

/// What a backend observed: its sessions, and the records it could not read.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Survey {
    pub sessions: Vec<Session>,
    pub problems: Vec<SessionProblem>,
    /// Backends that could not be asked this time (slurmctld down, say), with why: the projects
    /// that run workers there are left untouched, the others go on.
    pub failed: Vec<BackendFailure>,
}

/// A backend that could not be surveyed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BackendFailure {
    pub backend: BackendKind,
    pub detail: String,
}

impl Survey {
    /// Why `backend` could not be surveyed, if it could not.
    pub fn failure(&self, backend: BackendKind) -> Option<&BackendFailure> {
        self.failed.iter().find(|f| f.backend == backend)
    }
}

pub trait SessionBackend: Send + Sync {
    /// Which backend this is; every [`Session`] it reports carries it.
    fn kind(&self) -> BackendKind;

    fn name(&self) -> &'static str {
        self.kind().name()
    }

    /// Whether this backend may have sessions at all, answered without starting a program: a
    /// composite skips a backend that is not configured when this is false, so an installation
    /// that never used tmux starts no tmux process to learn that. Only a certain "none" may
    /// return false.
    fn may_have_sessions(&self) -> bool {
        true
    }

    /// Every braids session this backend knows, running or ended, in a stable order. Records
    /// that cannot be read are left out here (and logged); [`SessionBackend::survey`] reports them.
    /// A backend that could not be asked fails the list: a caller that acts on it must not
    /// take an unseen worker for a missing one.
    fn list(&self) -> Result<Vec<Session>, SessionError> {
        let survey = self.survey()?;
        if let Some(f) = survey.failed.first() {
            return Err(SessionError::Backend {
                backend: f.backend.name(),
                detail: f.detail.clone(),
            });
        }
        for p in &survey.problems {
            tracing::warn!(backend = self.name(), location = %p.location, label = ?p.label, "unreadable session record: {}", p.detail);
        }
        Ok(survey.sessions)
    }

    /// The labels of sessions that ended and are not forgotten yet, when the backend can tell
    /// without starting a program (the process backend reads its records and `/proc`): a run
    /// skipped for its idle backoff asks, so a worker that died hands its bead on at the next
    /// run, not when the backoff ends. Empty when it cannot tell cheaply.
    fn ended_cheaply(&self) -> Vec<SessionLabel> {
        Vec::new()
    }

    /// Like [`SessionBackend::list`], plus the records that could not be read. A caller that must
    /// not double-spawn should treat a problem carrying a label as "maybe running".
    fn survey(&self) -> Result<Survey, SessionError>;

    /// Starts a worker in its own session and process group, detached from the caller.
    fn spawn(&self, spec: &SpawnSpec) -> Result<Session, SessionError>;

    /// Stops a session's whole process tree: SIGTERM, up to `grace`, then SIGKILL.
    fn kill(&self, session: &Session, grace: Duration) -> Result<KillOutcome, SessionError>;

    /// Whether this backend may hold a session of `label`, answered without asking its server:
    /// when its survey fails, a spawn of that label under another backend is refused only if
    /// this says yes. Only a certain "no" may return false.
    fn may_hold(&self, label: &SessionLabel) -> bool {
        let _ = label;
        true
    }

    /// Drops the record of an ended session (its log stays).
    fn forget(&self, session: &Session) -> Result<(), SessionError>;
}

/// Every backend braids knows, with the default tmux socket and the installation's `[slurm]`
/// and `[openclaw]` settings; records and message files live in `sessions_dir`
/// (`Paths::sessions_dir()`).
/// Adding a backend is one line here (beside its [`BackendKind`] variant): the composite then
/// lists, kills and forgets its sessions too.
pub fn all_backends(
    sessions_dir: &Path,
    slurm: &slurm::SlurmSettings,
    openclaw: &openclaw::OpenClawSettings,
) -> Vec<Box<dyn SessionBackend>> {
    vec![
        Box::new(process::ProcessBackend::new(sessions_dir.to_path_buf())),
        Box::new(tmux::TmuxBackend::new(sessions_dir.to_path_buf())),
        Box::new(slurm::SlurmBackend::new(
            sessions_dir.to_path_buf(),
            slurm.clone(),
        )),
        Box::new(openclaw::OpenClawBackend::new(
            sessions_dir,
            openclaw.clone(),
        )),
    ]
}

/// What an installation works through: new workers start under `configured` (or the backend
/// their project names), and the sessions of every backend in [`all_backends`] are listed,
/// killed and forgotten by their owner.
pub fn installed(
    configured: BackendKind,
    sessions_dir: PathBuf,
    slurm: &slurm::SlurmSettings,
    openclaw: &openclaw::OpenClawSettings,
) -> Composite {
    Composite::new(configured, all_backends(&sessions_dir, slurm, openclaw))
}

/// Ends a stopped worker's log with who stopped it and why, so the log does not just break
/// off. Only a log in its project's folder of session logs (`logs`) is written, through no
/// link: the record naming it may have been changed by the agent (a tmux option).
pub fn log_stop(logs: &std::path::Path, session: &Session, why: &str, now: DateTime<Utc>) {
    let Some(log) = &session.log else {
        return;
    };
    let line = format!(
        "\n[braids {}] worker stopped: {why}\n",
        now.format("%Y-%m-%d %H:%M:%S UTC")
    );
    if let Err(e) = crate::system::beneath::append(logs, log, line.as_bytes()) {
        tracing::debug!(label = %session.label, "the stop is not in the worker's log: {e}");
    }
}
