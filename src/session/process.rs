//! Local-process session backend, the default.
//!
//! Each worker is a detached process in its own session and process group (`setsid`), with its
//! stdin read from a message file, its stdout and stderr appended to its log, and no file
//! descriptor of braids' beyond 0, 1 and 2: the tick lock must never live on in a worker.
//!
//! A JSON record per session, `<sessions_dir>/<slug>_<bead>.json`, holds its identity: the pid
//! and that pid's start time as the kernel reports it (`/proc/<pid>/stat` field 22, clock ticks
//! since boot). The record is written ahead of the spawn, with the session's token and no pid,
//! and completed once the worker runs: a braids killed in between leaves a pending record, and
//! whoever reads it finds the worker by its token in `/proc` (CONTRACTS 7.1). So no worker
//! braids started is ever unknown to it. A process whose start time differs is somebody else's process that happens to
//! have the same pid: it is never reported running and never signalled. Records stay after the
//! worker exits, so an ended session is still reported (not running) until it is forgotten.
//!
//! The worker's environment is braids' own with `SpawnSpec::env` added on top (overriding
//! variables of the same name). A program that cannot be started fails the spawn itself, with
//! nothing left behind.
//!
//! A session is every process its worker started, not only the worker: each session gets a
//! token, recorded and passed to the worker as `BRAIDS_SESSION=<token>`, which the worker's
//! agent and everything it starts inherit. Once the worker has exited, what is left of it (its
//! group's members, or any process carrying the token, such as the agent's group) is reported
//! as running with `worker_gone`, for the tick to stop before the bead is handed on; a kill
//! reaches all of it. (The kernel does not reuse a pid while a process still has it as its
//! group id; the token also rules out a group that merely has the same number, after a reboot
//! say.) A descendant that drops its environment and leaves its group is out of braids' sight.
//!
//! Workers are started as [`ProcessGroup`]s with [`Detach::Session`]; their leaders are reaped
//! (see [`reap_children`]) whenever any backend lists, spawns, kills or forgets.

use std::collections::{BTreeSet, HashMap};
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::procfs::{
    find_marked, group_has_live_members, kill_group, marked_groups, read_stat, runs, stop_marked,
    stronger,
};
use super::spec::{file_stem, label_from_stem, open_log, remove_if_present, validate_spec};
use super::{
    BackendKind, KillOutcome, Session, SessionBackend, SessionError, SessionProblem, SpawnSpec,
    Survey,
};
use crate::model::SessionLabel;
use crate::system::proc::{reap_detached, Detach, ProcessGroup};

/// Reaps every worker this process spawned that has exited, so none stays a defunct zombie.
pub use crate::system::proc::reap_detached as reap_children;

/// The environment variable that marks every process of a session (see the module docs).
pub const SESSION_ENV: &str = "BRAIDS_SESSION";

/// `BRAIDS_SESSION=<token>`, as it appears in a marked process's environment.
fn mark(token: &str) -> String {
    format!("{SESSION_ENV}={token}")
}

/// What still runs of a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Alive {
    /// Its worker, the leader braids started.
    Worker,
    /// Only processes the worker left behind: members of its group, or processes elsewhere
    /// (its agent's group) carrying its token.
    Leftovers,
    Nothing,
}

/// One look at the machine's marked processes, taken when first needed and shared by every
/// record of a survey.
#[derive(Default)]
struct Marks(std::cell::OnceCell<HashMap<String, BTreeSet<i32>>>);

impl Marks {
    fn carried(&self, token: &str) -> bool {
        self.0
            .get_or_init(|| marked_groups(SESSION_ENV))
            .get(token)
            .is_some_and(|groups| !groups.is_empty())
    }
}

/// What runs of the session `pid`/`starttime`/`token`. A leader whose pid now belongs to
/// somebody else's process no longer vouches for its group; its token still finds what it
/// left.
fn session_alive(
    pid: u32,
    starttime: u64,
    token: Option<&str>,
    marks: &Marks,
) -> io::Result<Alive> {
    if let Some(s) = read_stat(pid)?.filter(|s| s.starttime == starttime) {
        if runs(pid, &s) {
            return Ok(Alive::Worker);
        }
        // Its unreaped zombie holds the pid, so the group is still the session's.
        if group_has_live_members(pid as i32) {
            return Ok(Alive::Leftovers);
        }
    }
    Ok(match token {
        Some(t) if marks.carried(t) => Alive::Leftovers,
        _ => Alive::Nothing,
    })
}

/// Stops a session: [`kill_group`] while its leader's pid still vouches for the group, then
/// every group a process carrying its token is in: the agent's, whose leader dies with the
/// worker but whose children would not.
fn kill_session(
    pid: u32,
    starttime: u64,
    token: Option<&str>,
    grace: Duration,
) -> io::Result<KillOutcome> {
    if pid <= 1 || pid > i32::MAX as u32 || pid == std::process::id() {
        return Ok(KillOutcome::AlreadyGone);
    }
    let worker = if read_stat(pid)?.is_some() {
        kill_group(pid, starttime, grace)?
    } else {
        reap_detached();
        KillOutcome::AlreadyGone
    };
    let left = match token {
        Some(t) => stop_marked(SESSION_ENV, t, grace)?,
        None => KillOutcome::AlreadyGone,
    };
    Ok(stronger(worker, left))
}

/// A token no other session of this machine has had.
fn new_token() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!(
        "{:x}-{nanos:x}-{:x}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// Kills a worker just started that could not be recorded, and reaps it.
fn abort(group: ProcessGroup) {
    group.kill();
    let _ = group.finish();
}

/// What `<sessions_dir>/<slug>_<bead>.json` holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Record {
    label: String,
    /// Absent while the spawn is under way: the record is written first (see the module docs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pid: Option<u32>,
    /// `/proc/<pid>/stat` field 22 when the worker was started; 0 when it is not known (a
    /// pending record whose leader had already exited when it was found).
    #[serde(default)]
    starttime: u64,
    started_at: DateTime<Utc>,
    log: PathBuf,
    /// `BRAIDS_SESSION` of the session's processes; absent in records of older versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    token: Option<String>,
    /// For people reading the file; braids does not use them.
    #[serde(default)]
    argv: Vec<String>,
    #[serde(default)]
    cwd: Option<PathBuf>,
}

impl Record {
    fn id(&self) -> String {
        format!("{}:{}", self.pid.unwrap_or(0), self.starttime)
    }

    fn alive(&self, marks: &Marks) -> io::Result<Alive> {
        match self.pid {
            Some(pid) => session_alive(pid, self.starttime, self.token.as_deref(), marks),
            None => Ok(Alive::Nothing),
        }
    }

    fn runs(&self) -> io::Result<bool> {
        Ok(self.alive(&Marks::default())? != Alive::Nothing)
    }

    /// A pending record with the worker found by its token, if it runs; otherwise as it is
    /// (and a pending record whose worker is not found is an ended session).
    fn resolved(mut self) -> Record {
        if self.pid.is_none() {
            if let Some((pid, starttime)) =
                self.token.as_deref().and_then(|t| find_marked(&mark(t)))
            {
                self.pid = Some(pid);
                self.starttime = starttime.unwrap_or(0);
            }
        }
        self
    }
}

/// `pid:starttime`, the identity of a process-backend session.
fn parse_id(id: &str) -> Option<(u32, u64)> {
    let (pid, start) = id.split_once(':')?;
    Some((pid.parse().ok()?, start.parse().ok()?))
}

/// Workers as detached local processes, tracked by record files.
#[derive(Debug, Clone)]
pub struct ProcessBackend {
    dir: PathBuf,
    /// `Process`, or the backend this one drives local workers for (OpenClaw's sessions are
    /// waited on by a local worker each).
    kind: BackendKind,
}

impl ProcessBackend {
    /// Records and message files live in `sessions_dir` (`Paths::sessions_dir()`); it is
    /// created on the first spawn.
    pub fn new(sessions_dir: PathBuf) -> Self {
        ProcessBackend::driving(sessions_dir, BackendKind::Process)
    }

    /// Local workers whose sessions belong to `kind`; its records must live in a folder of
    /// their own, apart from the process backend's.
    pub(crate) fn driving(dir: PathBuf, kind: BackendKind) -> Self {
        ProcessBackend { dir, kind }
    }

    pub fn sessions_dir(&self) -> &Path {
        &self.dir
    }

    /// Where the record of `label` lives.
    pub fn record_path(&self, label: &SessionLabel) -> Result<PathBuf, SessionError> {
        Ok(self.dir.join(format!("{}.json", file_stem(label)?)))
    }

    /// Where the spawn message of `label` is kept for the worker's stdin.
    pub fn message_path(&self, label: &SessionLabel) -> Result<PathBuf, SessionError> {
        Ok(self.dir.join(format!("{}.stdin", file_stem(label)?)))
    }

    /// Reads one record: `Ok(None)` when there is none, `Err` with a reason when it is unusable.
    fn load(&self, path: &Path) -> Result<Option<Record>, String> {
        let text = match crate::system::atomic::read(path).and_then(|b| {
            String::from_utf8(b)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))
        }) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("cannot read: {e}")),
        };
        let rec: Record =
            serde_json::from_str(&text).map_err(|e| format!("not a session record: {e}"))?;
        if let Some(pid) = rec.pid.filter(|p| *p <= 1 || *p > i32::MAX as u32) {
            return Err(format!("pid {pid} cannot be a worker"));
        }
        Ok(Some(rec.resolved()))
    }

    fn session(&self, label: SessionLabel, rec: &Record, alive: Alive) -> Session {
        Session {
            label,
            id: rec.id(),
            backend: self.kind,
            pid: rec.pid,
            started_at: rec.started_at,
            running: alive != Alive::Nothing,
            worker_gone: alive == Alive::Leftovers,
            queued: false,
            ended: None,
            log: Some(rec.log.clone()),
        }
    }
}

impl SessionBackend for ProcessBackend {
    fn kind(&self) -> BackendKind {
        self.kind
    }

    fn ended_cheaply(&self) -> Vec<SessionLabel> {
        self.survey()
            .map(|s| {
                s.sessions
                    .into_iter()
                    // A dead worker whose agent left processes has ended too: the full run
                    // this wakes stops them.
                    .filter(|s| !s.running || s.worker_gone)
                    .map(|s| s.label)
                    .collect()
            })
            .unwrap_or_default()
    }

    fn survey(&self) -> Result<Survey, SessionError> {
        reap_detached();
        let mut out = Survey::default();
        let marks = Marks::default();
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(d) => d,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(out),
            Err(e) => return Err(e.into()),
        };
        for entry in entries {
            let entry = entry?;
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let Some(stem) = name.strip_suffix(".json") else {
                continue;
            };
            if name.starts_with('.') {
                continue; // an atomic write in progress
            }
            let path = entry.path();
            let by_name = label_from_stem(stem);
            let mut problem = |label: Option<String>, detail: String| {
                out.problems.push(SessionProblem {
                    label,
                    location: path.display().to_string(),
                    detail,
                })
            };
            let rec = match self.load(&path) {
                Ok(Some(rec)) => rec,
                Ok(None) => continue, // forgotten meanwhile
                Err(detail) => {
                    problem(by_name.map(|l| l.to_string()), detail);
                    continue;
                }
            };
            let label = match SessionLabel::parse(&rec.label) {
                Ok(l) if Some(&l) == by_name.as_ref() => l,
                Ok(l) => {
                    problem(
                        Some(l.to_string()),
                        format!("records label {l} under another file name"),
                    );
                    continue;
                }
                Err(e) => {
                    problem(by_name.map(|l| l.to_string()), format!("bad label: {e}"));
                    continue;
                }
            };
            let alive = rec.alive(&marks)?;
            out.sessions.push(self.session(label, &rec, alive));
        }
        out.sessions
            .sort_by(|a, b| (&a.label, a.started_at, &a.id).cmp(&(&b.label, b.started_at, &b.id)));
        out.problems.sort_by(|a, b| a.location.cmp(&b.location));
        Ok(out)
    }

    fn spawn(&self, spec: &SpawnSpec) -> Result<Session, SessionError> {
        let label = spec.label.to_string();
        let fail = |detail: String| SessionError::Spawn {
            label: label.clone(),
            detail,
        };
        validate_spec(spec)?;
        let record_path = self.record_path(&spec.label)?;
        let message_path = self.message_path(&spec.label)?;
        let log = std::path::absolute(&spec.log)?;
        if log.to_str().is_none() {
            return Err(fail(format!("log path {} is not UTF-8", log.display())));
        }

        // A second worker over a live one would make the first invisible: refuse.
        reap_detached();
        match self.load(&record_path) {
            Ok(None) => {}
            Ok(Some(old)) => {
                if old.runs()? {
                    return Err(fail(format!(
                        "already running as pid {}",
                        old.pid.unwrap_or(0)
                    )));
                }
            }
            Err(detail) => {
                return Err(fail(format!(
                    "{} is in the way ({detail}); remove it once no worker runs for this label",
                    record_path.display()
                )))
            }
        }

        std::fs::create_dir_all(&self.dir)?;
        crate::system::atomic::write(&message_path, spec.message.to_string().as_bytes())
            .map_err(|e| fail(format!("{e:#}")))?;
        let token = new_token();
        let mut rec = Record {
            label: label.clone(),
            pid: None,
            starttime: 0,
            started_at: Utc::now(),
            log,
            token: Some(token.clone()),
            argv: spec
                .argv
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect(),
            cwd: std::path::absolute(&spec.cwd).ok(),
        };
        let write = |rec: &Record| {
            serde_json::to_vec_pretty(rec)
                .map_err(anyhow::Error::from)
                .and_then(|json| crate::system::atomic::write(&record_path, &json))
        };
        // Written ahead: from here on, a worker that starts is findable by its token even if
        // this process dies before it learns the pid.
        if let Err(e) = write(&rec) {
            let _ = remove_if_present(&message_path);
            return Err(fail(format!("cannot record the session: {e:#}")));
        }
        crate::crash_point!("session::after_pending_record");
        let started = (|| {
            let stdin = File::open(&message_path)?;
            let out = open_log(&rec.log)
                .map_err(|e| fail(format!("cannot open log {}: {e}", rec.log.display())))?;
            let err = out.try_clone()?;

            let mut cmd = Command::new(&spec.argv[0]);
            cmd.args(&spec.argv[1..])
                .current_dir(&spec.cwd)
                .envs(spec.env.iter().map(|(k, v)| (k, v)))
                .env(SESSION_ENV, &token)
                .stdin(stdin)
                .stdout(out)
                .stderr(err);
            let group = ProcessGroup::spawn(&mut cmd, Detach::Session).map_err(|e| {
                fail(format!(
                    "cannot start `{}`: {e}",
                    spec.argv[0].to_string_lossy()
                ))
            })?;
            crate::crash_point!("session::after_spawn");
            rec.started_at = Utc::now();
            let pid = group.id();
            // Not reaped before it is recorded, so the pid cannot be reused before it is read.
            rec.starttime = match read_stat(pid) {
                Ok(Some(s)) => s.starttime,
                other => {
                    abort(group);
                    let why = match other {
                        Err(e) => e.to_string(),
                        _ => "the process is already gone".into(),
                    };
                    return Err(fail(format!("cannot read /proc/{pid}/stat: {why}")));
                }
            };
            rec.pid = Some(pid);
            if let Err(e) = write(&rec) {
                // The pending record would still find it, but a worker braids cannot describe
                // is not worth keeping: stop it.
                abort(group);
                return Err(fail(format!(
                    "cannot record the session, so it was stopped: {e:#}"
                )));
            }
            group.detach();
            crate::crash_point!("session::after_record");
            // Recorded now, so any later list tells the truth even if this look fails.
            let alive = rec.alive(&Marks::default()).unwrap_or(Alive::Worker);
            Ok(self.session(spec.label.clone(), &rec, alive))
        })();
        if started.is_err() {
            let _ = remove_if_present(&message_path);
            let _ = remove_if_present(&record_path);
        }
        started
    }

    fn kill(&self, session: &Session, grace: Duration) -> Result<KillOutcome, SessionError> {
        let bad = || SessionError::Backend {
            backend: self.kind.name(),
            detail: format!(
                "`{}` is not a process session id (pid:starttime)",
                session.id
            ),
        };
        let (pid, starttime) = parse_id(&session.id).ok_or_else(bad)?;
        if session.pid.is_some_and(|p| p != pid) {
            return Err(bad());
        }
        // The token, from the record of this very session (not a newer one of the label).
        let token = match self.load(&self.record_path(&session.label)?) {
            Ok(Some(rec)) if rec.id() == session.id => rec.token,
            _ => None,
        };
        Ok(kill_session(pid, starttime, token.as_deref(), grace)?)
    }

    fn forget(&self, session: &Session) -> Result<(), SessionError> {
        reap_detached();
        let record_path = self.record_path(&session.label)?;
        let message_path = self.message_path(&session.label)?;
        match self.load(&record_path) {
            Ok(None) => {}
            Err(detail) => {
                return Err(SessionError::Backend {
                    backend: self.kind.name(),
                    detail: format!("cannot forget {}: {detail}", record_path.display()),
                })
            }
            // A newer session of the same label: not ours to drop. (A pending record whose
            // worker is gone is an ended session whatever its id was when it was found.)
            Ok(Some(rec)) if rec.pid.is_some() && rec.id() != session.id => return Ok(()),
            Ok(Some(rec)) => {
                if rec.runs()? {
                    return Err(SessionError::Backend {
                        backend: self.kind.name(),
                        detail: format!(
                            "session {} is still running as pid {}; kill it first",
                            session.label,
                            rec.pid.unwrap_or(0)
                        ),
                    });
                }
                remove_if_present(&record_path)?;
            }
        }
        remove_if_present(&message_path)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::BeadId;
    use crate::session::procfs::POLL;
    use std::time::Instant;

    /// A spawn of `argv` for bead app-1, working and logging in `dir`.
    fn spec(dir: &Path, argv: &[&str]) -> SpawnSpec {
        let bead = BeadId::new("app-1").unwrap();
        SpawnSpec {
            label: SessionLabel::new("app", bead.clone()).unwrap(),
            message: crate::model::SpawnMessage::new(dir.to_path_buf(), bead, 1, "").unwrap(),
            argv: argv.iter().map(std::ffi::OsString::from).collect(),
            cwd: dir.to_path_buf(),
            env: vec![],
            log: dir.join("log"),
            placement: Default::default(),
        }
    }

    /// The pid the session's script wrote to `child`, once its leader is gone.
    fn child_once_leader_gone(dir: &Path, leader: u32) -> u32 {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            reap_children();
            let child = std::fs::read_to_string(dir.join("child"))
                .ok()
                .and_then(|t| t.trim().parse().ok());
            if let (Some(c), Ok(None)) = (child, read_stat(leader)) {
                return c;
            }
            assert!(Instant::now() < deadline, "the leader did not exit");
            std::thread::sleep(POLL);
        }
    }

    #[test]
    fn a_session_runs_while_its_marked_group_outlives_the_leader() {
        let dir = tempfile::tempdir().unwrap();
        let backend = ProcessBackend::new(dir.path().join("sessions"));
        // The leader backgrounds the "agent" and exits at once.
        let spec = spec(
            dir.path(),
            &["/bin/sh", "-c", "sleep 30 & echo $! > child; exit 0"],
        );
        let s = backend.spawn(&spec).unwrap();
        let leader = s.pid.unwrap();
        let child = child_once_leader_gone(dir.path(), leader);
        assert!(read_stat(child)
            .unwrap()
            .is_some_and(|s| s.pgrp == leader as i32));

        let listed = backend.list().unwrap();
        assert!(listed[0].running, "the group still works on the bead");
        assert!(listed[0].worker_gone, "but for nobody");
        // Without the token (a record of an older version), a group with the leader's number
        // is not taken for the session: nothing vouches that it is the same one.
        let start: u64 = s.id.split(':').nth(1).unwrap().parse().unwrap();
        assert_eq!(
            session_alive(leader, start, None, &Marks::default()).unwrap(),
            Alive::Nothing
        );
        assert!(
            backend.forget(&listed[0]).is_err(),
            "not forgotten while it runs"
        );
        assert_eq!(
            backend.kill(&listed[0], Duration::from_secs(5)).unwrap(),
            KillOutcome::Terminated
        );
        assert!(
            !group_has_live_members(leader as i32),
            "the agent is gone too"
        );
        assert!(!backend.list().unwrap()[0].running);
        backend.forget(&listed[0]).unwrap();
    }

    #[test]
    fn an_agent_in_a_group_of_its_own_is_found_by_its_token_and_stopped_with_its_children() {
        let dir = tempfile::tempdir().unwrap();
        let backend = ProcessBackend::new(dir.path().join("sessions"));
        // The "agent" leads a group of its own (as the worker starts it) and has a child; the
        // worker then dies without stopping it.
        let spec = spec(
            dir.path(),
            &[
                "/bin/sh",
                "-c",
                "setsid /bin/sh -c 'sleep 30 & echo $! > child; wait' & \
                 while [ ! -s child ]; do sleep 0.05; done; kill -KILL $$",
            ],
        );
        let s = backend.spawn(&spec).unwrap();
        let leader = s.pid.unwrap();
        let child = child_once_leader_gone(dir.path(), leader);
        let group = read_stat(child).unwrap().unwrap().pgrp;
        assert_ne!(group, leader as i32, "the agent is in a group of its own");

        let listed = backend.list().unwrap();
        assert!(listed[0].running && listed[0].worker_gone, "{listed:?}");
        assert!(backend.spawn(&spec).is_err(), "no second worker over it");
        assert_ne!(
            backend.kill(&listed[0], Duration::from_secs(5)).unwrap(),
            KillOutcome::AlreadyGone
        );
        assert!(!group_has_live_members(group), "the agent's group is gone");
        assert!(!backend.list().unwrap()[0].running);
        backend.forget(&listed[0]).unwrap();
    }

    #[test]
    fn c7_1_a_pending_record_finds_its_worker_by_its_token() {
        let dir = tempfile::tempdir().unwrap();
        let backend = ProcessBackend::new(dir.path().join("sessions"));
        let spec = spec(dir.path(), &["/bin/sleep", "30"]);
        let label = spec.label.clone();
        let s = backend.spawn(&spec).unwrap();
        let pid = s.pid.unwrap();
        // The record as a braids killed right after the spawn leaves it: token, no pid.
        let path = backend.record_path(&label).unwrap();
        let mut rec: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        let obj = rec.as_object_mut().unwrap();
        obj.remove("pid");
        obj.remove("starttime");
        std::fs::write(&path, serde_json::to_vec(&rec).unwrap()).unwrap();

        let found = backend.list().unwrap();
        assert_eq!(found.len(), 1);
        assert!(found[0].running, "found by its token");
        assert_eq!((found[0].pid, &found[0].id), (Some(pid), &s.id));
        assert!(
            backend.spawn(&spec).is_err(),
            "no second worker over a pending one"
        );
        assert_eq!(
            backend.kill(&found[0], Duration::from_secs(5)).unwrap(),
            KillOutcome::Terminated
        );
        reap_children();

        // Its worker gone, a pending record is an ended session, and it can be forgotten.
        let ended = backend.list().unwrap();
        assert!(!ended[0].running && ended[0].pid.is_none(), "{ended:?}");
        backend.forget(&ended[0]).unwrap();
        assert!(backend.list().unwrap().is_empty());
    }

    #[test]
    fn ids() {
        assert_eq!(parse_id("12:345"), Some((12, 345)));
        assert_eq!(parse_id("12"), None);
        assert_eq!(parse_id("$1/12:345"), None);
    }
}
