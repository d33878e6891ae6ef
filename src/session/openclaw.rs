//! Workers whose agent is an OpenClaw session: visible, steerable and counted in OpenClaw,
//! while braids still does every fixed step itself.
//!
//! A spawn starts `braids worker` locally, exactly as the process backend does (its record
//! lives in `sessions/openclaw/`, apart from the process backend's). At its agent step that
//! worker creates the gateway session (key `agent:<agent>:project:<slug>:<bead>`, label
//! `project:<slug>:<bead>`, the bead's workspace as cwd, the project's agent, model and
//! thinking level, the prompt as message), waits for its run, and then checks the deliverable,
//! closes, commits and pushes as with any executor (`worker/openclaw.rs`).
//!
//! Liveness is the union of the two: the local worker while it runs, and every gateway
//! session with a run going on (one `sessions.list {activeOnly: true}` per survey, its labels
//! matched by prefix here, since the gateway's label filter matches exactly). A live gateway
//! session without a worker (its worker died, or the system braids replaces started it) is
//! still a session of its label: counted, and killed as a zombie. A session OpenClaw reports
//! done or killed is not live.
//!
//! Kill stops the local worker first (so it does not go on to block the bead itself), then
//! aborts the run of every gateway session with the label and deletes them: the gateway stops
//! their tool processes. A gateway that cannot be asked fails the survey, so the tick leaves
//! the projects on this backend alone.

mod gateway;

use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono::Utc;
use serde::Deserialize;

use super::process::ProcessBackend;
use super::{
    BackendKind, KillOutcome, Session, SessionBackend, SessionError, SessionProblem, SpawnSpec,
    Survey,
};
use crate::model::SessionLabel;

pub use gateway::{CallError, Gateway, Row, Started, Waited};

/// `[openclaw]` in config.toml.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct OpenClawSettings {
    /// The `openclaw` program.
    pub program: String,
    /// The gateway's WebSocket URL (`OPENCLAW_GATEWAY_URL`); empty: the CLI's configured one.
    pub url: String,
    /// A file holding the gateway's token; empty: the environment's `OPENCLAW_GATEWAY_TOKEN`.
    pub token_file: String,
    /// `OPENCLAW_CONFIG_PATH` and `OPENCLAW_STATE_DIR` for every `openclaw` command; empty:
    /// the environment's, or `~/.openclaw`.
    pub config: String,
    pub state_dir: String,
    /// The agent whose sessions the workers are; a project's `Agent:` overrides it.
    pub agent: String,
    /// `provider/model`; empty: the agent's default. A project's `Model:` overrides it.
    pub model: String,
    /// `off`, `minimal`, `low`, `medium`, `high`, `xhigh`, `adaptive` or `max`; empty: the
    /// model's default. A project's `Thinking:` overrides it.
    pub thinking: String,
    /// Per gateway call (the wait for a run is bounded by the WorkerTimeout instead).
    pub timeout_secs: u64,
}

impl Default for OpenClawSettings {
    fn default() -> Self {
        OpenClawSettings {
            program: "openclaw".into(),
            url: String::new(),
            token_file: String::new(),
            config: String::new(),
            state_dir: String::new(),
            agent: "main".into(),
            model: String::new(),
            thinking: String::new(),
            timeout_secs: 60,
        }
    }
}

/// The thinking levels OpenClaw 2026.9 knows; the gateway still refuses one a model lacks.
pub const THINKING_LEVELS: [&str; 8] = [
    "off", "minimal", "low", "medium", "high", "xhigh", "adaptive", "max",
];

/// The gateway session key of a label's agent: `agent:<agent>:project:<slug>:<bead>`, with
/// `:<role>` for one role of a protocol team step.
pub fn session_key(agent: &str, label: &SessionLabel, role: Option<&str>) -> String {
    match role {
        Some(r) => format!("agent:{agent}:{label}:{r}"),
        None => format!("agent:{agent}:{label}"),
    }
}

/// OpenClaw sessions, each waited on by a local braids worker.
pub struct OpenClawBackend {
    driver: ProcessBackend,
    gateway: Gateway,
}

/// The prefix of a gateway-only session's id: it has no local worker.
const GATEWAY_ONLY: &str = "openclaw:";

impl OpenClawBackend {
    /// The workers' records live in `sessions_dir/openclaw`.
    pub fn new(sessions_dir: &Path, settings: OpenClawSettings) -> OpenClawBackend {
        OpenClawBackend {
            driver: ProcessBackend::driving(records_dir(sessions_dir), BackendKind::OpenClaw),
            gateway: Gateway::new(settings),
        }
    }

    fn fail(e: CallError) -> SessionError {
        SessionError::Backend {
            backend: "openclaw",
            detail: e.to_string(),
        }
    }
}

fn records_dir(sessions_dir: &Path) -> PathBuf {
    sessions_dir.join("openclaw")
}

/// The survey's rule, pure: the workers' sessions, live while their worker runs or a gateway
/// session of their label runs; then every live gateway session of a braids label that no
/// worker accounts for. A live row labelled `project:` that is not a valid label is a
/// problem carrying it, so the tick treats it as maybe running.
fn merge(workers: Survey, live: &[Row]) -> Survey {
    let mut out = workers;
    for s in &mut out.sessions {
        let label = s.label.to_string();
        if live
            .iter()
            .any(|r| r.label.as_deref() == Some(label.as_str()))
        {
            s.running = true;
        }
    }
    let mut extra: Vec<Session> = Vec::new();
    for r in live {
        let Some(raw) = r.label.as_deref().filter(|l| l.starts_with("project:")) else {
            continue;
        };
        match SessionLabel::parse(raw) {
            Ok(label) => {
                let known = out.sessions.iter().chain(&extra).any(|s| s.label == label);
                if !known {
                    extra.push(Session {
                        label,
                        id: format!("{GATEWAY_ONLY}{}", r.key),
                        backend: BackendKind::OpenClaw,
                        pid: None,
                        started_at: r.started_at.unwrap_or_else(Utc::now),
                        running: true,
                        worker_gone: false,
                        queued: false,
                        ended: None,
                        log: None,
                    });
                }
            }
            Err(e) => out.problems.push(SessionProblem {
                label: Some(raw.to_string()),
                location: format!("openclaw session {}", r.key),
                detail: format!("bad label: {e}"),
            }),
        }
    }
    out.sessions.extend(extra);
    out.sessions
        .sort_by(|a, b| (&a.label, a.started_at, &a.id).cmp(&(&b.label, b.started_at, &b.id)));
    out
}

impl SessionBackend for OpenClawBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::OpenClaw
    }

    /// Once braids has started a worker here; before that an installation that does not use
    /// OpenClaw starts no `openclaw` process (each costs a second or two).
    fn may_have_sessions(&self) -> bool {
        std::fs::read_dir(self.driver.sessions_dir())
            .map(|mut d| d.next().is_some())
            .unwrap_or(false)
    }

    /// A worker of the label has a record until it is forgotten, and it is forgotten only
    /// once neither it nor a gateway session of its label runs.
    fn may_hold(&self, label: &SessionLabel) -> bool {
        self.driver.record_path(label).map_or(true, |p| p.exists())
    }

    fn survey(&self) -> Result<Survey, SessionError> {
        let workers = self.driver.survey()?;
        let live = self.gateway.live().map_err(Self::fail)?;
        Ok(merge(workers, &live))
    }

    /// The worker only: it creates the gateway session once it has claimed the bead and made
    /// its workspace. A live gateway session of the label was in this tick's survey, which the
    /// composite checks before any spawn.
    fn spawn(&self, spec: &SpawnSpec) -> Result<Session, SessionError> {
        self.driver.spawn(spec)
    }

    fn kill(&self, session: &Session, grace: Duration) -> Result<KillOutcome, SessionError> {
        let worker = if session.id.starts_with(GATEWAY_ONLY) {
            None
        } else {
            Some(self.driver.kill(session, grace)?)
        };
        let keys = self
            .gateway
            .keys_labelled(&session.label.to_string())
            .map_err(Self::fail)?;
        for key in &keys {
            self.gateway.end(key).map_err(Self::fail)?;
        }
        Ok(match worker {
            Some(outcome) => outcome,
            None if keys.is_empty() => KillOutcome::AlreadyGone,
            None => KillOutcome::Terminated,
        })
    }

    fn forget(&self, session: &Session) -> Result<(), SessionError> {
        if session.id.starts_with(GATEWAY_ONLY) {
            return Ok(());
        }
        self.driver.forget(session)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn row(key: &str, label: Option<&str>) -> Row {
        Row {
            key: key.into(),
            label: label.map(str::to_string),
            status: Some("running".into()),
            has_active_run: true,
            started_at: Some(Utc.timestamp_opt(1_800_000_000, 0).unwrap()),
            cwd: None,
            model: None,
        }
    }

    fn worker(label: &str, running: bool) -> Session {
        Session {
            label: SessionLabel::parse(label).unwrap(),
            id: "4242:99".into(),
            backend: BackendKind::OpenClaw,
            pid: Some(4242),
            started_at: Utc.timestamp_opt(1_700_000_000, 0).unwrap(),
            running,
            worker_gone: false,
            queued: false,
            ended: None,
            log: None,
        }
    }

    #[test]
    fn c2_9_asked_only_once_it_has_a_worker_and_holds_only_recorded_labels() {
        let tmp = tempfile::tempdir().unwrap();
        // A gateway that cannot be reached: nothing here may call it.
        let settings = OpenClawSettings {
            program: "/nonexistent/openclaw".into(),
            ..OpenClawSettings::default()
        };
        let b = OpenClawBackend::new(tmp.path(), settings);
        let label = SessionLabel::parse("project:app:app-1").unwrap();
        assert!(
            !b.may_have_sessions(),
            "no worker yet: no `openclaw` command per tick"
        );
        assert!(!b.may_hold(&label));
        let dir = records_dir(tmp.path());
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("app_app-1.json"), "{}").unwrap();
        assert!(
            b.may_have_sessions(),
            "a worker's record: surveyed whatever the config says"
        );
        assert!(b.may_hold(&label));
        assert!(!b.may_hold(&SessionLabel::parse("project:app:app-2").unwrap()));
        // Asked now, the missing CLI is an error naming the backend, never an empty list.
        let err = b.survey().unwrap_err().to_string();
        assert!(
            err.contains("openclaw") && err.contains("sessions.list"),
            "{err}"
        );
    }

    #[test]
    fn keys_name_the_agent_the_label_and_a_role() {
        let l = SessionLabel::parse("project:app:app-1").unwrap();
        assert_eq!(
            session_key("main", &l, None),
            "agent:main:project:app:app-1"
        );
        assert_eq!(
            session_key("ops", &l, Some("tester")),
            "agent:ops:project:app:app-1:tester"
        );
    }

    #[test]
    fn c2_5_liveness_is_the_worker_or_a_live_session_of_its_label() {
        let workers = Survey {
            sessions: vec![
                worker("project:app:app-1", false),
                worker("project:app:app-2", true),
                worker("project:app:app-3", false),
            ],
            ..Survey::default()
        };
        let live = [
            // The worker of app-1 died; its agent still runs.
            row("agent:main:project:app:app-1", Some("project:app:app-1")),
            // Two roles of one team step: one session of the label.
            row("agent:main:project:web:web-9", Some("project:web:web-9")),
            row(
                "agent:main:project:web:web-9:tester",
                Some("project:web:web-9"),
            ),
            // Not braids' business.
            row("agent:main:main", None),
            row("agent:main:chat", Some("my chat")),
            // braids' prefix, but no valid label: maybe running.
            row("agent:main:project:bad", Some("project:Bad Slug:x")),
        ];
        let s = merge(workers, &live);
        let seen: Vec<(String, bool, bool)> = s
            .sessions
            .iter()
            .map(|s| {
                (
                    s.label.to_string(),
                    s.running,
                    s.id.starts_with(GATEWAY_ONLY),
                )
            })
            .collect();
        assert_eq!(
            seen,
            [
                ("project:app:app-1".into(), true, false),
                ("project:app:app-2".into(), true, false),
                ("project:app:app-3".into(), false, false),
                ("project:web:web-9".into(), true, true),
            ]
        );
        assert_eq!(s.problems.len(), 1);
        assert_eq!(s.problems[0].label.as_deref(), Some("project:Bad Slug:x"));
        assert_eq!(
            s.problems[0].location,
            "openclaw session agent:main:project:bad"
        );
    }
}
