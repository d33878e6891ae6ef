//! Every backend at once, so a session outlives a change of `[sessions] backend`.
//!
//! A worker started under tmux keeps running when config.toml is switched to `process` (and
//! the other way round). If the installation asked only today's backend, that worker would
//! vanish from `braids sessions`, stop counting against MaxWorkers, have its claim released
//! after `claim_grace_secs` and its bead handed to a second agent, and never be killed as a
//! zombie (CONTRACTS 2.9). So the installation holds a [`Composite`]:
//!
//! * `spawn` goes to the backend the project names (PROJECT.md `Backend:`) or else the
//!   configured one, after checking that no other backend that may hold the label
//!   ([`SessionBackend::may_hold`]) has a live session (or an unreadable record) of it: a
//!   backend's own check only sees its own sessions.
//! * `survey` and `list` merge every backend's sessions; each [`Session`] names its owner.
//!   A backend that is not configured is asked only when [`SessionBackend::may_have_sessions`]
//!   says it may have some (tmux: its server socket exists), so an installation that never
//!   used tmux starts no tmux process per tick. The configured backend is always asked, exactly
//!   as before.
//! * `kill` and `forget` go to the session's owner.
//!
//! A backend that cannot be surveyed is named in [`Survey::failed`] rather than failing the
//! whole survey: without its sessions braids cannot tell who is running there, so the tick
//! leaves the projects that use it alone, while a project on another backend goes on (a
//! slurmctld that is down does not stop the local workers). `list`, which callers act on
//! without knowing the projects, still fails.

use std::time::Duration;

use super::{
    BackendFailure, BackendKind, KillOutcome, Session, SessionBackend, SessionError, SpawnSpec,
    Survey,
};

/// The backends of an installation: one that starts workers, all that own them.
pub struct Composite {
    configured: BackendKind,
    backends: Vec<Box<dyn SessionBackend>>,
}

impl Composite {
    /// New workers start under `configured`, which must be one of `backends`.
    pub fn new(configured: BackendKind, backends: Vec<Box<dyn SessionBackend>>) -> Composite {
        assert!(
            backends.iter().any(|b| b.kind() == configured),
            "the configured backend {configured} is not among the composite's backends"
        );
        Composite {
            configured,
            backends,
        }
    }

    /// The backend new workers start under.
    pub fn configured(&self) -> BackendKind {
        self.configured
    }

    fn owner(&self, kind: BackendKind) -> Result<&dyn SessionBackend, SessionError> {
        self.backends
            .iter()
            .find(|b| b.kind() == kind)
            .map(|b| b.as_ref())
            .ok_or_else(|| SessionError::Backend {
                backend: kind.name(),
                detail: "this braids has no such backend".into(),
            })
    }

    /// The backends worth asking now: the configured one always, the others when they may
    /// have sessions.
    fn present(&self) -> impl Iterator<Item = &dyn SessionBackend> {
        self.backends
            .iter()
            .map(|b| b.as_ref())
            .filter(|b| b.kind() == self.configured || b.may_have_sessions())
    }
}

impl SessionBackend for Composite {
    fn kind(&self) -> BackendKind {
        self.configured
    }

    fn may_have_sessions(&self) -> bool {
        self.backends.iter().any(|b| b.may_have_sessions())
    }

    fn ended_cheaply(&self) -> Vec<crate::model::SessionLabel> {
        self.present().flat_map(|b| b.ended_cheaply()).collect()
    }

    fn survey(&self) -> Result<Survey, SessionError> {
        let mut all = Survey::default();
        for b in self.present() {
            match b.survey() {
                Ok(s) => {
                    all.sessions.extend(s.sessions);
                    all.problems.extend(s.problems);
                    all.failed.extend(s.failed);
                }
                Err(e) => all.failed.push(BackendFailure {
                    backend: b.kind(),
                    detail: e.to_string(),
                }),
            }
        }
        all.sessions.sort_by(|a, b| {
            (&a.label, a.started_at, a.backend, &a.id).cmp(&(
                &b.label,
                b.started_at,
                b.backend,
                &b.id,
            ))
        });
        Ok(all)
    }

    fn spawn(&self, spec: &SpawnSpec) -> Result<Session, SessionError> {
        let label = spec.label.to_string();
        let refuse = |detail: String| SessionError::Spawn {
            label: label.clone(),
            detail,
        };
        let target = spec.placement.backend_or(self.configured);
        // The target backend checks its own sessions; the others are checked here, so a
        // switch of backends never puts a second agent on a bead. A backend that certainly
        // holds no session of the label is not asked: asking OpenClaw's gateway costs seconds,
        // and the tick's own survey has already counted sessions it has no record of.
        for b in self.backends.iter().map(|b| b.as_ref()).filter(|b| {
            b.kind() != target
                && (b.kind() == self.configured || b.may_have_sessions())
                && b.may_hold(&spec.label)
        }) {
            let survey = match b.survey() {
                Ok(s) => s,
                // It cannot be asked (slurmctld down), and it may hold this label.
                Err(e) => {
                    return Err(refuse(format!(
                        "the {} backend, which may hold this session, cannot be asked: {e}",
                        b.kind()
                    )))
                }
            };
            if let Some(p) = survey
                .problems
                .iter()
                .find(|p| p.label.as_deref() == Some(label.as_str()))
            {
                return Err(refuse(format!(
                    "{} is in the way: {}",
                    p.location, p.detail
                )));
            }
            if let Some(s) = survey
                .sessions
                .iter()
                .find(|s| s.label == spec.label && s.running)
            {
                return Err(refuse(format!(
                    "already running under the {} backend{}",
                    s.backend,
                    s.pid.map(|p| format!(" (pid {p})")).unwrap_or_default()
                )));
            }
        }
        self.owner(target)?.spawn(spec)
    }

    fn kill(&self, session: &Session, grace: Duration) -> Result<KillOutcome, SessionError> {
        self.owner(session.backend)?.kill(session, grace)
    }

    fn forget(&self, session: &Session) -> Result<(), SessionError> {
        self.owner(session.backend)?.forget(session)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};

    use chrono::{TimeZone, Utc};

    use super::*;
    use crate::model::{BeadId, SessionLabel, SpawnMessage};
    use crate::session::SessionProblem;

    /// A backend that reports what it is given and records what it is asked to do.
    struct Fake {
        kind: BackendKind,
        may_have: bool,
        survey: Survey,
        /// Its survey fails (a server that does not answer), and whether it may hold a label.
        down: Option<bool>,
        surveys: AtomicUsize,
        calls: Mutex<Vec<String>>,
    }

    impl Fake {
        fn new(kind: BackendKind, may_have: bool, sessions: Vec<Session>) -> Fake {
            Fake {
                kind,
                may_have,
                survey: Survey {
                    sessions,
                    ..Survey::default()
                },
                down: None,
                surveys: AtomicUsize::new(0),
                calls: Mutex::new(vec![]),
            }
        }
        fn call(&self, what: &str, label: &SessionLabel) {
            let mut calls = self.calls.lock().unwrap();
            calls.push(format!("{} {what} {label}", self.kind));
        }
    }

    /// The fakes stay readable from the test while the composite owns them.
    impl SessionBackend for Arc<Fake> {
        fn kind(&self) -> BackendKind {
            self.kind
        }
        fn may_have_sessions(&self) -> bool {
            self.may_have
        }
        fn survey(&self) -> Result<Survey, SessionError> {
            self.surveys.fetch_add(1, Ordering::SeqCst);
            match self.down {
                Some(_) => Err(SessionError::Backend {
                    backend: "fake",
                    detail: "no answer".into(),
                }),
                None => Ok(self.survey.clone()),
            }
        }
        fn may_hold(&self, _: &SessionLabel) -> bool {
            self.down.unwrap_or(true)
        }
        fn spawn(&self, spec: &SpawnSpec) -> Result<Session, SessionError> {
            self.call("spawn", &spec.label);
            Ok(session(self.kind, spec.label.bead().as_str(), true))
        }
        fn kill(&self, s: &Session, _: Duration) -> Result<KillOutcome, SessionError> {
            self.call("kill", &s.label);
            Ok(KillOutcome::Terminated)
        }
        fn forget(&self, s: &Session) -> Result<(), SessionError> {
            self.call("forget", &s.label);
            Ok(())
        }
    }

    fn label(bead: &str) -> SessionLabel {
        SessionLabel::new("app", BeadId::new(bead).unwrap()).unwrap()
    }

    fn session(backend: BackendKind, bead: &str, running: bool) -> Session {
        Session {
            label: label(bead),
            id: format!("{backend}:{bead}"),
            backend,
            pid: Some(100),
            started_at: Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap(),
            running,
            worker_gone: false,
            queued: false,
            ended: None,
            log: None,
        }
    }

    fn spec(bead: &str) -> SpawnSpec {
        let id = BeadId::new(bead).unwrap();
        SpawnSpec {
            label: label(bead),
            message: SpawnMessage::new("/p/app".into(), id, 1, "").unwrap(),
            argv: vec!["true".into()],
            cwd: "/".into(),
            env: vec![],
            log: "/dev/null".into(),
            placement: Default::default(),
        }
    }

    fn composite(configured: BackendKind, fakes: &[&Arc<Fake>]) -> Composite {
        let backends = fakes
            .iter()
            .map(|f| Box::new(Arc::clone(f)) as Box<dyn SessionBackend>)
            .collect();
        Composite::new(configured, backends)
    }

    #[test]
    fn c2_9_sessions_of_every_backend_are_listed_and_stopped_by_their_owner() {
        use BackendKind::{Process, Tmux};
        let process = Arc::new(Fake::new(
            Process,
            true,
            vec![session(Process, "app-2", false)],
        ));
        let tmux = Arc::new(Fake::new(Tmux, true, vec![session(Tmux, "app-1", true)]));
        let all = composite(Process, &[&process, &tmux]);

        let listed = all.list().unwrap();
        let seen: Vec<(String, BackendKind)> = listed
            .iter()
            .map(|s| (s.label.bead().to_string(), s.backend))
            .collect();
        assert_eq!(seen, [("app-1".into(), Tmux), ("app-2".into(), Process)]);

        assert_eq!(
            all.kill(&listed[0], Duration::ZERO).unwrap(),
            KillOutcome::Terminated
        );
        all.forget(&listed[0]).unwrap();
        all.forget(&listed[1]).unwrap();
        all.spawn(&spec("app-3")).unwrap();
        assert_eq!(
            *tmux.calls.lock().unwrap(),
            [
                "tmux kill project:app:app-1",
                "tmux forget project:app:app-1"
            ]
        );
        assert_eq!(
            *process.calls.lock().unwrap(),
            [
                "process forget project:app:app-2",
                "process spawn project:app:app-3"
            ],
            "spawns go to the configured backend"
        );
    }

    #[test]
    fn c2_9_a_backend_without_sessions_is_asked_only_when_configured() {
        use BackendKind::{Process, Tmux};
        let process = Arc::new(Fake::new(Process, true, vec![]));
        let tmux = Arc::new(Fake::new(Tmux, false, vec![session(Tmux, "app-1", true)]));
        let all = composite(Process, &[&process, &tmux]);
        assert!(all.list().unwrap().is_empty());
        all.spawn(&spec("app-1")).unwrap();
        assert_eq!(
            tmux.surveys.load(Ordering::SeqCst),
            0,
            "tmux is never asked"
        );

        // Configured, it is always asked, whatever it says about itself.
        let all = composite(Tmux, &[&process, &tmux]);
        assert_eq!(all.list().unwrap().len(), 1);
        assert_eq!(tmux.surveys.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn c2_9_no_spawn_next_to_a_live_session_of_another_backend() {
        use BackendKind::{Process, Tmux};
        let mut tmux = Fake::new(
            Tmux,
            true,
            vec![session(Tmux, "app-1", true), session(Tmux, "app-2", false)],
        );
        tmux.survey.problems.push(SessionProblem {
            label: Some(label("app-3").to_string()),
            location: "tmux session app_app-3".into(),
            detail: "no start time".into(),
        });
        let tmux = Arc::new(tmux);
        let process = Arc::new(Fake::new(Process, true, vec![]));
        let all = composite(Process, &[&process, &tmux]);

        let err = all.spawn(&spec("app-1")).unwrap_err().to_string();
        assert!(
            err.contains("already running under the tmux backend"),
            "{err}"
        );
        let err = all.spawn(&spec("app-3")).unwrap_err().to_string();
        assert!(err.contains("is in the way"), "{err}");
        all.spawn(&spec("app-2")).unwrap(); // its tmux session has ended
        assert_eq!(
            *process.calls.lock().unwrap(),
            ["process spawn project:app:app-2"]
        );
    }

    #[test]
    fn c2_9_a_backend_that_cannot_be_asked_is_named_and_blocks_only_labels_it_may_hold() {
        use BackendKind::{Process, Slurm};
        for holds in [false, true] {
            let process = Arc::new(Fake::new(
                Process,
                true,
                vec![session(Process, "a-1", true)],
            ));
            let mut slurm = Fake::new(Slurm, true, vec![]);
            slurm.down = Some(holds);
            let slurm = Arc::new(slurm);
            let c = Composite::new(
                Process,
                vec![Box::new(process.clone()), Box::new(slurm.clone())],
            );
            // The survey goes on without it and names it.
            let survey = c.survey().unwrap();
            assert_eq!(survey.sessions.len(), 1);
            assert_eq!(
                survey.failure(Slurm).map(|f| f.detail.as_str()),
                Some("session backend fake: no answer")
            );
            assert!(c.list().is_err(), "a list acted on must not hide a backend");
            let spawned = c.spawn(&spec("a-2"));
            assert_eq!(spawned.is_ok(), !holds, "holds={holds}: {spawned:?}");
        }
    }
}
