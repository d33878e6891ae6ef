//! Local-process session backend, the default.
//!
//! Each worker is a detached process in its own session and process group (`setsid`), with its
//! stdin read from a message file, its stdout and stderr appended to its log, and no file
//! descriptor of braids' beyond 0, 1 and 2: the tick lock must never live on in a worker.
//!
//! A JSON record per session, `<sessions_dir>/<slug>_<bead>.json`, holds its identity: the pid
//! and that pid's start time as the kernel reports it (`/proc/<pid>/stat` field 22, clock ticks
//! since boot). A process whose start time differs is somebody else's process that happens to
//! have the same pid: it is never reported running and never signalled. Records stay after the
//! worker exits, so an ended session is still reported (not running) until it is forgotten.
//!
//! The worker's environment is braids' own with `SpawnSpec::env` added on top (overriding
//! variables of the same name). A program that cannot be started fails the spawn itself, with
//! nothing left behind.
//!
//! A session is its process group, not only its first process: an agent that outlives the
//! worker braids started (the worker crashed, or backgrounded it) still works on the bead. Each
//! session gets a token, recorded and passed to the worker as `BRAIDS_SESSION=<token>`; once
//! the leader has exited, the session runs while a process of its group carries that token in
//! its environment, and a kill reaches that group. (The kernel does not reuse the leader's pid
//! while any process still has it as its group id; the token also rules out a group that
//! merely has the same number, after a reboot say.) A descendant that leaves the group
//! (`setsid`, `setpgid`) or drops its environment is out of braids' sight, as it was before.
//!
//! The process that spawns workers may live long (daemon mode, tests), so the children it
//! spawned are kept in a process-wide table and reaped whenever any backend lists or kills;
//! otherwise they would linger as defunct zombies until braids exits.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use nix::errno::Errno;
use nix::libc;
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};

use super::{
    KillOutcome, Session, SessionBackend, SessionError, SessionProblem, SpawnSpec, Survey,
};
use crate::model::{BeadId, SessionLabel};

/// How long to wait for a process group to vanish after SIGKILL before reporting anyway.
const AFTER_KILL_WAIT: Duration = Duration::from_secs(5);
/// How often a dying process group is looked at.
const POLL: Duration = Duration::from_millis(20);

// ---------------------------------------------------------------------------------------------
// /proc and process groups (shared with the tmux backend)

/// What `/proc/<pid>/stat` says about a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProcStat {
    /// Field 3: `R`, `S`, `D`, `Z`, …
    pub state: char,
    /// Field 5.
    pub pgrp: i32,
    /// Field 22: clock ticks after boot at which the process started.
    pub starttime: u64,
}

impl ProcStat {
    /// A zombie (exited, not yet reaped) or a dead process: it runs nothing any more.
    pub fn is_dead(&self) -> bool {
        matches!(self.state, 'Z' | 'X' | 'x')
    }
}

/// Parses the text of `/proc/<pid>/stat`. The command name (field 2) is in parentheses and may
/// itself contain spaces and parentheses, so fields are counted from the last `)`.
pub(crate) fn parse_stat(text: &str) -> Option<ProcStat> {
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // fields[0] is field 3 of stat(5).
    Some(ProcStat {
        state: fields.first()?.chars().next()?,
        pgrp: fields.get(2)?.parse().ok()?,
        starttime: fields.get(19)?.parse().ok()?,
    })
}

/// Reads `/proc/<pid>/stat`: `Ok(None)` when there is no such process.
pub(crate) fn read_stat(pid: u32) -> io::Result<Option<ProcStat>> {
    if pid == 0 {
        return Ok(None);
    }
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(text) => parse_stat(&text).map(Some).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("cannot parse /proc/{pid}/stat"),
            )
        }),
        Err(e) if e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ESRCH) => {
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// Whether the process `stat` describes still runs something. `/proc/<pid>/stat` shows the
/// main thread, which can be a zombie while other threads of the process still run.
pub(crate) fn runs(pid: u32, stat: &ProcStat) -> bool {
    if !stat.is_dead() {
        return true;
    }
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.flatten().any(|t| {
        std::fs::read_to_string(t.path().join("stat"))
            .ok()
            .and_then(|text| parse_stat(&text))
            .is_some_and(|s| !s.is_dead())
    })
}

/// Whether `pid` is still the process that started at `starttime` and has not exited.
pub(crate) fn is_alive(pid: u32, starttime: u64) -> io::Result<bool> {
    Ok(read_stat(pid)?.is_some_and(|s| s.starttime == starttime && runs(pid, &s)))
}

/// Whether any process of group `pgid` still runs. `kill(-pgid, 0)` also succeeds while only
/// zombies remain (an unreaped leader, say), so a success is confirmed by looking for a member
/// in `/proc` that is not one.
pub(crate) fn group_has_live_members(pgid: i32) -> bool {
    if pgid <= 1 {
        return false;
    }
    if killpg(Pid::from_raw(pgid), None) == Err(Errno::ESRCH) {
        return false;
    }
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return true;
    };
    dir.flatten().any(|entry| {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            return false;
        };
        read_stat(pid)
            .ok()
            .flatten()
            .is_some_and(|s| s.pgrp == pgid && runs(pid, &s))
    })
}

/// The environment variable that marks every process of a session (see the module docs).
pub const SESSION_ENV: &str = "BRAIDS_SESSION";

/// Whether a live process of group `pgid` carries `BRAIDS_SESSION=<token>` in its environment.
fn group_has_marked_member(pgid: i32, token: &str) -> bool {
    if pgid <= 1 {
        return false;
    }
    let marker = format!("{SESSION_ENV}={token}");
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return false;
    };
    dir.flatten().any(|entry| {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            return false;
        };
        let member = read_stat(pid)
            .ok()
            .flatten()
            .is_some_and(|s| s.pgrp == pgid && runs(pid, &s));
        member
            && std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|b| *b == 0).any(|var| var == marker.as_bytes()))
    })
}

/// Whether the session `pid`/`starttime`/`token` still runs: its leader does, or the leader
/// has exited and its group still has a live member (a marked one, once the leader's pid no
/// longer vouches for the group).
fn session_runs(pid: u32, starttime: u64, token: Option<&str>) -> io::Result<bool> {
    match read_stat(pid)? {
        // Somebody else's process: the pid was free, so our group had emptied.
        Some(s) if s.starttime != starttime => Ok(false),
        // The leader, or its unreaped zombie holding the pid, vouches for group `pid`.
        Some(s) => Ok(runs(pid, &s) || group_has_live_members(pid as i32)),
        None => Ok(token.is_some_and(|t| group_has_marked_member(pid as i32, t))),
    }
}

/// Stops a session: [`kill_group`] while its leader's pid still vouches for the group, and
/// otherwise the group of the marked processes that outlived the leader.
fn kill_session(
    pid: u32,
    starttime: u64,
    token: Option<&str>,
    grace: Duration,
) -> io::Result<KillOutcome> {
    if pid <= 1 || pid > i32::MAX as u32 || pid == std::process::id() {
        return Ok(KillOutcome::AlreadyGone);
    }
    if read_stat(pid)?.is_some() {
        return kill_group(pid, starttime, grace);
    }
    reap_children();
    match token {
        Some(t) if group_has_marked_member(pid as i32, t) => signal_group(pid as i32, grace),
        _ => Ok(KillOutcome::AlreadyGone),
    }
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

/// Stops the process group led by `pid`, but only if `pid` is still the process that started
/// at `starttime`: otherwise nothing is signalled and the answer is `AlreadyGone`. SIGTERM, up
/// to `grace` for the whole group to exit, then SIGKILL.
///
/// A leader that has exited but is not yet reaped still holds its pid, so its group can be
/// cleaned up safely; once the identity check fails, nothing is touched.
pub(crate) fn kill_group(pid: u32, starttime: u64, grace: Duration) -> io::Result<KillOutcome> {
    let own = std::process::id();
    if pid <= 1 || pid > i32::MAX as u32 || pid == own {
        return Ok(KillOutcome::AlreadyGone);
    }
    let Some(stat) = read_stat(pid)? else {
        reap_children();
        return Ok(KillOutcome::AlreadyGone);
    };
    if stat.starttime != starttime {
        return Ok(KillOutcome::AlreadyGone);
    }
    // Workers lead their own session, so their group is their pid; never signal our own group.
    let pgid = pid as i32;
    if nix::unistd::getpgrp().as_raw() == pgid {
        return Ok(KillOutcome::AlreadyGone);
    }
    if !runs(pid, &stat) && !group_has_live_members(pgid) {
        reap_children();
        return Ok(KillOutcome::AlreadyGone);
    }
    signal_group(pgid, grace)
}

/// SIGTERM to group `pgid`, up to `grace` for it to empty, then SIGKILL. The caller has
/// established that the group is the session's.
fn signal_group(pgid: i32, grace: Duration) -> io::Result<KillOutcome> {
    if pgid <= 1 || nix::unistd::getpgrp().as_raw() == pgid {
        return Ok(KillOutcome::AlreadyGone);
    }
    match killpg(Pid::from_raw(pgid), Signal::SIGTERM) {
        Ok(()) => {}
        Err(Errno::ESRCH) => {
            reap_children();
            return Ok(KillOutcome::AlreadyGone);
        }
        Err(e) => return Err(e.into()),
    }
    if wait_group_gone(pgid, grace) {
        return Ok(KillOutcome::Terminated);
    }
    match killpg(Pid::from_raw(pgid), Signal::SIGKILL) {
        Ok(()) => {}
        // It finished exiting between the last look and now.
        Err(Errno::ESRCH) => return Ok(KillOutcome::Terminated),
        Err(e) => return Err(e.into()),
    }
    wait_group_gone(pgid, AFTER_KILL_WAIT);
    Ok(KillOutcome::Killed)
}

/// Waits up to `limit` for group `pgid` to have no live member, reaping our children meanwhile.
fn wait_group_gone(pgid: i32, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        reap_children();
        if !group_has_live_members(pgid) {
            return true;
        }
        let now = Instant::now();
        if now >= deadline {
            return false;
        }
        std::thread::sleep(POLL.min(deadline - now));
    }
}

// ---------------------------------------------------------------------------------------------
// Reaping

/// Workers this process spawned and has not reaped yet, for every backend instance: a daemon
/// that makes a new backend each tick must still reap the workers of earlier ticks.
static CHILDREN: Mutex<Vec<Child>> = Mutex::new(Vec::new());

fn remember_child(child: Child) {
    CHILDREN
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(child);
}

/// Reaps every spawned worker that has exited, so none stays a defunct zombie. Waits only on
/// our own children by pid (never `waitpid(-1)`), so other code's children are left alone.
pub fn reap_children() {
    let mut children = CHILDREN.lock().unwrap_or_else(|p| p.into_inner());
    children.retain_mut(|c| matches!(c.try_wait(), Ok(None)));
}

/// SIGKILLs a worker we just started and could not record, and reaps it.
fn abort_child(pid: u32) {
    let _ = killpg(Pid::from_raw(pid as i32), Signal::SIGKILL);
    let mut children = CHILDREN.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(i) = children.iter().position(|c| c.id() == pid) {
        let mut child = children.swap_remove(i);
        let _ = child.kill();
        let _ = child.wait();
    }
}

// ---------------------------------------------------------------------------------------------
// Child setup

/// Runs in the forked child before `exec`, so it only makes async-signal-safe system calls.
fn detach_child() -> io::Result<()> {
    // A session of its own: its own process group, no controlling terminal, and nothing that
    // happens to the caller's group or terminal reaches it.
    nix::unistd::setsid()?;
    // The signals a supervisor sends act by default, even if braids was started ignoring them.
    for sig in [
        libc::SIGHUP,
        libc::SIGINT,
        libc::SIGQUIT,
        libc::SIGTERM,
        libc::SIGPIPE,
    ] {
        // SAFETY: resetting a disposition to the default is async-signal-safe.
        unsafe { libc::signal(sig, libc::SIG_DFL) };
    }
    close_inherited_fds_on_exec();
    Ok(())
}

/// Marks every descriptor above stderr close-on-exec, so the worker gets 0, 1 and 2 only, even
/// when braids holds a descriptor it did not open with `O_CLOEXEC` (one inherited from cron, or
/// opened by a library). Marking instead of closing keeps std's own exec-error pipe working.
fn close_inherited_fds_on_exec() {
    // SAFETY: close_range(2) with CLOSE_RANGE_CLOEXEC only changes descriptor flags.
    let done = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3 as libc::c_uint,
            libc::c_uint::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    } == 0;
    if done {
        return;
    }
    // Kernels before 5.11: walk the descriptor table.
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we pass.
    let max = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0 {
        lim.rlim_cur.min(1 << 20) as libc::c_int
    } else {
        4096
    };
    for fd in 3..max {
        // SAFETY: fcntl on a descriptor number that may or may not be open is harmless.
        unsafe {
            let flags = libc::fcntl(fd, libc::F_GETFD);
            if flags >= 0 && flags & libc::FD_CLOEXEC == 0 {
                libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Labels as names

/// The file stem for a label: `<slug>_<bead>`. Reversible because a slug has no `_`; it cannot
/// contain `/` or `:`, start with `.`, or be `..`, because slug and bead id are validated, and
/// that is checked again here rather than trusted.
pub(crate) fn file_stem(label: &SessionLabel) -> Result<String, SessionError> {
    let stem = format!("{}_{}", label.slug(), label.bead());
    let safe = stem.as_bytes()[0].is_ascii_alphanumeric()
        && stem
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if safe {
        Ok(stem)
    } else {
        Err(SessionError::Spawn {
            label: label.to_string(),
            detail: "the label cannot be turned into a safe file name".into(),
        })
    }
}

/// The label a file stem names, if it is exactly the stem of that label.
pub(crate) fn label_from_stem(stem: &str) -> Option<SessionLabel> {
    let (slug, bead) = stem.split_once('_')?;
    let label = SessionLabel::new(slug, BeadId::new(bead).ok()?).ok()?;
    (file_stem(&label).ok()? == stem).then_some(label)
}

/// Checks a spawn request before anything is started: shared by both backends.
pub(crate) fn validate_spec(spec: &SpawnSpec) -> Result<(), SessionError> {
    let fail = |detail: String| SessionError::Spawn {
        label: spec.label.to_string(),
        detail,
    };
    match spec.argv.first() {
        None => return Err(fail("the worker command is empty".into())),
        Some(p) if p.is_empty() => return Err(fail("the worker program name is empty".into())),
        Some(_) => {}
    }
    if spec.argv.iter().any(|a| a.as_bytes().contains(&0)) {
        return Err(fail("a worker argument contains a NUL byte".into()));
    }
    for (k, v) in &spec.env {
        let k = k.as_bytes();
        if k.is_empty() || k.contains(&b'=') || k.contains(&0) || v.as_bytes().contains(&0) {
            return Err(fail(format!(
                "environment variable `{}` has an invalid name or value",
                String::from_utf8_lossy(k)
            )));
        }
    }
    if !spec.cwd.is_dir() {
        return Err(fail(format!(
            "working directory {} is not a directory",
            spec.cwd.display()
        )));
    }
    Ok(())
}

/// Creates the log's directory and opens it for appending.
pub(crate) fn open_log(log: &Path) -> io::Result<File> {
    if let Some(dir) = log.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    OpenOptions::new().create(true).append(true).open(log)
}

// ---------------------------------------------------------------------------------------------
// The backend

/// What `<sessions_dir>/<slug>_<bead>.json` holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Record {
    label: String,
    pid: u32,
    /// `/proc/<pid>/stat` field 22 when the worker was started.
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
        format!("{}:{}", self.pid, self.starttime)
    }

    fn runs(&self) -> io::Result<bool> {
        session_runs(self.pid, self.starttime, self.token.as_deref())
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
}

impl ProcessBackend {
    /// Records and message files live in `sessions_dir` (`Paths::sessions_dir()`); it is
    /// created on the first spawn.
    pub fn new(sessions_dir: PathBuf) -> Self {
        ProcessBackend { dir: sessions_dir }
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
        let text = match crate::atomic::read(path).and_then(|b| {
            String::from_utf8(b)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))
        }) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("cannot read: {e}")),
        };
        let rec: Record =
            serde_json::from_str(&text).map_err(|e| format!("not a session record: {e}"))?;
        if rec.pid <= 1 || rec.pid > i32::MAX as u32 {
            return Err(format!("pid {} cannot be a worker", rec.pid));
        }
        Ok(Some(rec))
    }

    fn session(label: SessionLabel, rec: &Record, running: bool) -> Session {
        Session {
            label,
            id: rec.id(),
            pid: Some(rec.pid),
            started_at: rec.started_at,
            running,
            log: Some(rec.log.clone()),
        }
    }
}

impl SessionBackend for ProcessBackend {
    fn name(&self) -> &'static str {
        "process"
    }

    fn survey(&self) -> Result<Survey, SessionError> {
        reap_children();
        let mut out = Survey::default();
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
            let running = rec.runs()?;
            out.sessions.push(Self::session(label, &rec, running));
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
        reap_children();
        match self.load(&record_path) {
            Ok(None) => {}
            Ok(Some(old)) => {
                if old.runs()? {
                    return Err(fail(format!("already running as pid {}", old.pid)));
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
        crate::atomic::write(&message_path, spec.message.to_string().as_bytes())
            .map_err(|e| fail(format!("{e:#}")))?;
        let started = (|| {
            let stdin = File::open(&message_path)?;
            let out = open_log(&log)
                .map_err(|e| fail(format!("cannot open log {}: {e}", log.display())))?;
            let err = out.try_clone()?;

            let token = new_token();
            let mut cmd = Command::new(&spec.argv[0]);
            cmd.args(&spec.argv[1..])
                .current_dir(&spec.cwd)
                .envs(spec.env.iter().map(|(k, v)| (k, v)))
                .env(SESSION_ENV, &token)
                .stdin(stdin)
                .stdout(out)
                .stderr(err);
            // SAFETY: detach_child only makes async-signal-safe calls.
            unsafe { cmd.pre_exec(detach_child) };
            let child = crate::proc::spawn_retrying(&mut cmd).map_err(|e| {
                fail(format!(
                    "cannot start `{}`: {e}",
                    spec.argv[0].to_string_lossy()
                ))
            })?;
            let started_at = Utc::now();
            let pid = child.id();
            // Not reaped until the next list or kill, so the pid cannot be reused before it is read.
            remember_child(child);

            let starttime = match read_stat(pid) {
                Ok(Some(s)) => s.starttime,
                other => {
                    abort_child(pid);
                    return Err(fail(format!("cannot read /proc/{pid}/stat: {other:?}")));
                }
            };
            let rec = Record {
                label: label.clone(),
                pid,
                starttime,
                started_at,
                log,
                token: Some(token),
                argv: spec
                    .argv
                    .iter()
                    .map(|a| a.to_string_lossy().into_owned())
                    .collect(),
                cwd: std::path::absolute(&spec.cwd).ok(),
            };
            let written = serde_json::to_vec_pretty(&rec)
                .map_err(anyhow::Error::from)
                .and_then(|json| crate::atomic::write(&record_path, &json));
            if let Err(e) = written {
                // An unrecorded worker would be invisible to every later tick.
                abort_child(pid);
                return Err(fail(format!(
                    "cannot record the session, so it was stopped: {e:#}"
                )));
            }
            // Recorded now, so any later list tells the truth even if this look fails.
            let running = rec.runs().unwrap_or(true);
            Ok(Self::session(spec.label.clone(), &rec, running))
        })();
        if started.is_err() {
            let _ = remove_if_present(&message_path);
        }
        started
    }

    fn kill(&self, session: &Session, grace: Duration) -> Result<KillOutcome, SessionError> {
        let bad = || SessionError::Backend {
            backend: "process",
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
        reap_children();
        let record_path = self.record_path(&session.label)?;
        let message_path = self.message_path(&session.label)?;
        match self.load(&record_path) {
            Ok(None) => {}
            Err(detail) => {
                return Err(SessionError::Backend {
                    backend: "process",
                    detail: format!("cannot forget {}: {detail}", record_path.display()),
                })
            }
            // A newer session of the same label: not ours to drop.
            Ok(Some(rec)) if rec.id() != session.id => return Ok(()),
            Ok(Some(rec)) => {
                if rec.runs()? {
                    return Err(SessionError::Backend {
                        backend: "process",
                        detail: format!(
                            "session {} is still running as pid {}; kill it first",
                            session.label, rec.pid
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

pub(crate) fn remove_if_present(path: &Path) -> io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_runs_while_its_marked_group_outlives_the_leader() {
        let dir = tempfile::tempdir().unwrap();
        let backend = ProcessBackend::new(dir.path().join("sessions"));
        let label = SessionLabel::new("app", BeadId::new("app-1").unwrap()).unwrap();
        let spec = SpawnSpec {
            label: label.clone(),
            message: crate::model::SpawnMessage::new(
                dir.path().to_path_buf(),
                BeadId::new("app-1").unwrap(),
                1,
                "",
            )
            .unwrap(),
            // The leader backgrounds the "agent" and exits at once.
            argv: ["/bin/sh", "-c", "sleep 30 & echo $! > child; exit 0"]
                .map(std::ffi::OsString::from)
                .into(),
            cwd: dir.path().to_path_buf(),
            env: vec![],
            log: dir.path().join("log"),
        };
        let s = backend.spawn(&spec).unwrap();
        let leader = s.pid.unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        let child: u32 = loop {
            reap_children();
            let child = std::fs::read_to_string(dir.path().join("child"))
                .ok()
                .and_then(|t| t.trim().parse().ok());
            if let (Some(c), Ok(None)) = (child, read_stat(leader)) {
                break c;
            }
            assert!(Instant::now() < deadline, "the leader did not exit");
            std::thread::sleep(POLL);
        };
        assert!(read_stat(child)
            .unwrap()
            .is_some_and(|s| s.pgrp == leader as i32));

        let listed = backend.list().unwrap();
        assert!(listed[0].running, "the group still works on the bead");
        // Without the token (a record of an older version), a group with the leader's number
        // is not taken for the session: nothing vouches that it is the same one.
        let start: u64 = s.id.split(':').nth(1).unwrap().parse().unwrap();
        assert!(!session_runs(leader, start, None).unwrap());
        assert!(
            backend.forget(&listed[0]).is_err(),
            "not forgotten while it runs"
        );
        assert_eq!(
            backend.kill(&listed[0], Duration::from_secs(2)).unwrap(),
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
    fn stat_fields_are_counted_from_the_last_paren() {
        let text =
            "4242 (a) b (c) d) S 1 4242 4242 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 987654 1 2 3";
        let s = parse_stat(text).unwrap();
        assert_eq!((s.state, s.pgrp, s.starttime), ('S', 4242, 987654));
        assert!(!s.is_dead());
        assert!(parse_stat("12 (x) Z 1 12 12").is_none());
        let own = read_stat(std::process::id()).unwrap().unwrap();
        assert!(runs(std::process::id(), &own));
        assert!(is_alive(std::process::id(), own.starttime).unwrap());
        assert!(!is_alive(std::process::id(), own.starttime + 1).unwrap());
    }

    #[test]
    fn c2_5_label_file_names_are_safe_and_reversible() {
        for raw in [
            "project:my-app:my-app-x1y",
            "project:a:b.c_d",
            "project:0:A..B",
            "project:a-:x_y_z",
        ] {
            let label = SessionLabel::parse(raw).unwrap();
            let stem = file_stem(&label).unwrap();
            assert!(
                !stem.contains('/') && !stem.contains(':') && !stem.starts_with('.'),
                "{stem}"
            );
            assert_ne!(stem, "..");
            assert_eq!(label_from_stem(&stem), Some(label), "{stem}");
        }
        for bad in [
            "noseparator",
            "A_b",
            "a_",
            "_b",
            "a_b c",
            "a_ b",
            "a_../x",
            "..",
            "a_.x",
        ] {
            assert_eq!(label_from_stem(bad), None, "{bad}");
        }
    }

    #[test]
    fn ids() {
        assert_eq!(parse_id("12:345"), Some((12, 345)));
        assert_eq!(parse_id("12"), None);
        assert_eq!(parse_id("$1/12:345"), None);
    }

    #[test]
    fn never_signals_pid_0_1_or_itself() {
        for pid in [0, 1, std::process::id()] {
            let start = read_stat(pid).unwrap().map_or(0, |s| s.starttime);
            assert_eq!(
                kill_group(pid, start, Duration::ZERO).unwrap(),
                KillOutcome::AlreadyGone
            );
        }
    }
}
