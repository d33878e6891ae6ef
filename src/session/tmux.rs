//! tmux session backend: each worker in a detached tmux session, for people who like to look.
//!
//! * **Its own server.** Every call goes to a dedicated socket (`-L braids` unless configured)
//!   with `-f /dev/null`, so a user's tmux server and configuration are never touched and never
//!   change how workers run. All calls go through [`Invocation`], with a timeout.
//! * **No shell string.** tmux 3.x runs a command given as several arguments with `execvp`,
//!   without a shell. The pane runs `/bin/sh -c <constant script> braids-worker <message>
//!   <log> <cwd> <argv…>`: the script is fixed text that changes directory and runs the worker
//!   argv with stdin from the message file and stdout and stderr appended to the log. The argv
//!   arrives as positional parameters (`"$@"`) and is never parsed by a shell. The only
//!   rewriting tmux does on its own argv is treating an argument that ends in `;` as a command
//!   separator; [`escape_arg`] undoes that exactly.
//! * **The pane process is that small shell, the worker its child.** The shell keeps the pane's
//!   terminal open: if the pane process itself let go of it (by `exec`ing the worker with all
//!   three descriptors redirected), tmux would see end of file, hang the terminal up and the
//!   worker would die of SIGHUP. The shell leads the pane's session and process group and the
//!   worker stays in that group, so the pane pid identifies the session (pid + start time, as in
//!   the process backend) and killing the group takes the worker's whole tree down.
//! * **Output goes to the log and the pane.** The wrapper pipes the worker's output through
//!   `tee -a` into the log, so the log is complete from the first byte (which `pipe-pane`
//!   cannot promise) and a person who attaches (`tmux -L braids attach -t <session>`) watches
//!   the agent live.
//! * **Labels.** tmux rewrites `:` and `.` in session names, so the name is only a unique
//!   handle derived from the label ([`TmuxBackend::session_name`]); the real label is the user
//!   option `@braids_label`, with `@braids_started` (RFC 3339) and `@braids_log` beside it.
//!   Sessions are created and labelled in one tmux command sequence, so no unlabelled worker
//!   can be observed.
//! * **Exit detection: `remain-on-exit on`.** An exited worker leaves its session in place with
//!   a dead pane, reported as not running until it is killed or forgotten, exactly like an
//!   ended process-backend record. Running means the pane is alive and its pid is still the
//!   process that started then. Like the process backend, a worker counts as ended when it
//!   exits, even if it left background processes behind in its group.
//! * **Environment:** the tmux server's global environment (that of the braids process that
//!   started the server) plus `SpawnSpec::env`, given with `new-session -e`.
//! * **A missing program does not fail the spawn** (the pane's shell reports it): the session
//!   ends at once with status 127 and the reason in the log.
//! * **Requires tmux 3.2 or later** (`new-session -e`).

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};

use super::procfs::{is_alive, kill_group, read_stat, runs};
use super::spec::{file_stem, open_log, remove_if_present, validate_spec};
use super::{
    BackendKind, KillOutcome, Session, SessionBackend, SessionError, SessionProblem, SpawnSpec,
    Survey,
};
use crate::model::SessionLabel;
use crate::system::proc::{Invocation, Output, RunError};

mod wire;

pub use wire::escape_arg;
use wire::{decode_path, new_session_args, no_server, parse_id, Row, LIST_FORMAT};

/// The socket name used unless configured otherwise (`tmux -L braids`).
pub const DEFAULT_SOCKET: &str = "braids";

#[derive(Debug, Clone, PartialEq, Eq)]
enum Socket {
    Name(String),
    Path(PathBuf),
}

/// Workers as sessions on a dedicated tmux server.
#[derive(Debug, Clone)]
pub struct TmuxBackend {
    dir: PathBuf,
    socket: Socket,
    program: OsString,
    timeout: Duration,
}

impl TmuxBackend {
    /// A backend on the default socket; message files live in `sessions_dir`.
    pub fn new(sessions_dir: PathBuf) -> Self {
        TmuxBackend {
            dir: sessions_dir,
            socket: Socket::Name(DEFAULT_SOCKET.into()),
            program: "tmux".into(),
            timeout: Duration::from_secs(10),
        }
    }

    /// Uses `tmux -L <name>`.
    pub fn with_socket_name(mut self, name: impl Into<String>) -> Self {
        self.socket = Socket::Name(name.into());
        self
    }

    /// Uses `tmux -S <path>`.
    pub fn with_socket_path(mut self, path: impl Into<PathBuf>) -> Self {
        self.socket = Socket::Path(path.into());
        self
    }

    /// The tmux program, `tmux` on PATH by default.
    pub fn with_program(mut self, program: impl Into<OsString>) -> Self {
        self.program = program.into();
        self
    }

    /// How long one tmux call may take.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The tmux session name for a label: `<slug>_<bead>` with `_` doubled and `.` written
    /// `_d`, so it is unique per label and free of the `:` and `.` tmux would rewrite.
    pub fn session_name(label: &SessionLabel) -> String {
        let mut name = format!("{}_", label.slug());
        for c in label.bead().as_str().chars() {
            match c {
                '_' => name.push_str("__"),
                '.' => name.push_str("_d"),
                c => name.push(c),
            }
        }
        name
    }

    /// Where the server's socket is, worked out as tmux does: `-S` as given; for `-L <name>`,
    /// `<dir>/tmux-<uid>/<name>`, where `<dir>` is `$TMUX_TMPDIR` when it is set and resolves,
    /// and `/tmp` otherwise.
    pub fn socket_path(&self) -> PathBuf {
        match &self.socket {
            Socket::Path(p) => p.clone(),
            Socket::Name(name) => wire::socket_dir(std::env::var_os("TMUX_TMPDIR"))
                .join(format!("tmux-{}", nix::unistd::getuid()))
                .join(name),
        }
    }

    /// Stops the whole tmux server of this socket, every session on it included.
    pub fn kill_server(&self) -> Result<(), SessionError> {
        let out = self.run(vec!["kill-server".into()])?;
        if out.success() || no_server(&out) {
            Ok(())
        } else {
            Err(self.failed("kill-server", &out))
        }
    }

    fn run(&self, args: Vec<OsString>) -> Result<Output, SessionError> {
        let mut argv = vec![self.program.clone()];
        match &self.socket {
            Socket::Name(n) => argv.extend(["-L".into(), OsString::from(n)]),
            Socket::Path(p) => argv.extend(["-S".into(), p.clone().into_os_string()]),
        }
        argv.extend(["-f".into(), "/dev/null".into()]);
        argv.extend(args);
        let out = Invocation::new(argv)
            .timeout(self.timeout)
            .run()
            .map_err(|e| match e {
                RunError::NotFound { program } => SessionError::Backend {
                    backend: "tmux",
                    detail: format!("`{program}` was not found; install tmux 3.2 or later"),
                },
                e => SessionError::Backend {
                    backend: "tmux",
                    detail: e.to_string(),
                },
            })?;
        if out.timed_out {
            return Err(SessionError::Backend {
                backend: "tmux",
                detail: format!("tmux did not answer within {:?}", self.timeout),
            });
        }
        Ok(out)
    }

    fn failed(&self, what: &str, out: &Output) -> SessionError {
        SessionError::Backend {
            backend: "tmux",
            detail: format!(
                "{what} failed ({}): {}",
                out.status_text(),
                out.stderr.trim()
            ),
        }
    }

    /// Every session on the server; none when no server runs.
    fn rows(&self) -> Result<(Vec<Row>, Vec<SessionProblem>), SessionError> {
        let list = || {
            self.run(vec![
                "list-sessions".into(),
                "-F".into(),
                LIST_FORMAT.into(),
            ])
        };
        let mut out = list()?;
        // A server that is exiting as its last session goes ("server exited unexpectedly") is
        // asked again, rather than taken for an empty one or for a failure.
        for _ in 0..3 {
            if out.success() || no_server(&out) {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
            out = list()?;
        }
        if !out.success() {
            return if no_server(&out) {
                Ok((Vec::new(), Vec::new()))
            } else {
                Err(self.failed("list-sessions", &out))
            };
        }
        let (mut rows, mut problems) = (Vec::new(), Vec::new());
        for line in out.stdout.lines().filter(|l| !l.is_empty()) {
            match Row::parse(line) {
                Some(r) => rows.push(r),
                None => problems.push(SessionProblem {
                    label: None,
                    location: "tmux list-sessions".into(),
                    detail: format!("unreadable line `{}`", line.escape_debug()),
                }),
            }
        }
        Ok((rows, problems))
    }

    fn kill_session(&self, session_id: &str) -> Result<(), SessionError> {
        if !session_id.starts_with('$') {
            return Err(SessionError::Backend {
                backend: "tmux",
                detail: format!("`{session_id}` is not a tmux session id"),
            });
        }
        let out = self.run(vec!["kill-session".into(), "-t".into(), session_id.into()])?;
        if out.success() || self.rows()?.0.iter().all(|r| r.session_id != session_id) {
            Ok(())
        } else {
            Err(self.failed("kill-session", &out))
        }
    }

    fn message_path(&self, label: &SessionLabel) -> Result<PathBuf, SessionError> {
        Ok(self.dir.join(format!("{}.stdin", file_stem(label)?)))
    }

    /// Finds the row of an observed session: same tmux session id, same label.
    fn find(&self, session: &Session) -> Result<(Option<Row>, u32, u64), SessionError> {
        let (sid, pid, start) = parse_id(&session.id).ok_or_else(|| SessionError::Backend {
            backend: "tmux",
            detail: format!(
                "`{}` is not a tmux session id ($n/pid:starttime)",
                session.id
            ),
        })?;
        let label = session.label.to_string();
        let row = self
            .rows()?
            .0
            .into_iter()
            .find(|r| r.session_id == sid && r.label == label);
        Ok((row, pid, start))
    }
}

impl SessionBackend for TmuxBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Tmux
    }

    /// Whether a server listens on the socket: without one no session can run, and nothing
    /// needs to start tmux to find that out (see [`wire::server_may_listen`]).
    fn may_have_sessions(&self) -> bool {
        wire::server_may_listen(&self.socket_path())
    }

    fn survey(&self) -> Result<Survey, SessionError> {
        let (rows, problems) = self.rows()?;
        let mut out = Survey {
            problems,
            ..Survey::default()
        };
        for row in rows {
            let mut problem = |label: Option<String>, detail: String| {
                out.problems.push(SessionProblem {
                    label,
                    location: row.location(),
                    detail,
                })
            };
            if row.label.is_empty() {
                problem(None, "not a braids session: it has no @braids_label".into());
                continue;
            }
            let label = match SessionLabel::parse(&row.label) {
                Ok(l) => l,
                Err(e) => {
                    problem(Some(row.label.clone()), format!("bad @braids_label: {e}"));
                    continue;
                }
            };
            let started_at = DateTime::parse_from_rfc3339(&row.started)
                .map(|t| t.with_timezone(&Utc))
                .ok()
                .or_else(|| DateTime::from_timestamp(row.created, 0));
            let Some(started_at) = started_at else {
                problem(Some(row.label.clone()), "no start time".into());
                continue;
            };
            let log = match decode_path(&row.log) {
                Some(p) if !row.log.is_empty() => Some(p),
                _ => None,
            };
            // tmux reaps its panes, so a live pane's pid is still the worker; the start time is
            // read here and checked again before any signal.
            let stat = if row.pane_dead {
                None
            } else {
                read_stat(row.pane_pid)?
            };
            let running = stat.is_some_and(|s| runs(row.pane_pid, &s));
            let start = stat.map_or(0, |s| s.starttime);
            out.sessions.push(Session {
                label,
                id: format!("{}/{}:{start}", row.session_id, row.pane_pid),
                backend: BackendKind::Tmux,
                pid: Some(row.pane_pid),
                started_at,
                running,
                worker_gone: false,
                queued: false,
                ended: None,
                log,
            });
        }
        out.sessions
            .sort_by(|a, b| (&a.label, a.started_at, &a.id).cmp(&(&b.label, b.started_at, &b.id)));
        Ok(out)
    }

    fn spawn(&self, spec: &SpawnSpec) -> Result<Session, SessionError> {
        let label = spec.label.to_string();
        let fail = |detail: String| SessionError::Spawn {
            label: label.clone(),
            detail,
        };
        validate_spec(spec)?;
        let name = Self::session_name(&spec.label);
        let message_path = std::path::absolute(self.message_path(&spec.label)?)?;
        let log = std::path::absolute(&spec.log)?;
        let cwd = std::path::absolute(&spec.cwd)?;

        // Never a second worker next to a live one; clear away an ended one of the same name.
        let survey = self.survey()?;
        if let Some(p) = survey
            .problems
            .iter()
            .find(|p| p.label.as_deref() == Some(&label))
        {
            return Err(fail(format!("{} is in the way: {}", p.location, p.detail)));
        }
        for old in survey.sessions.iter().filter(|s| s.label == spec.label) {
            if old.running {
                return Err(fail(format!(
                    "already running in tmux{}",
                    old.pid.map(|p| format!(" as pid {p}")).unwrap_or_default()
                )));
            }
            // Never an empty target: tmux would take that to mean some other session.
            if let Some((sid, _, _)) = parse_id(&old.id) {
                self.kill_session(&sid)?;
            }
        }

        std::fs::create_dir_all(&self.dir)?;
        crate::system::atomic::write(&message_path, spec.message.to_string().as_bytes())
            .map_err(|e| fail(format!("{e:#}")))?;
        open_log(&log).map_err(|e| fail(format!("cannot open log {}: {e}", log.display())))?;

        let started_at = Utc::now();
        let started = started_at.to_rfc3339_opts(SecondsFormat::AutoSi, true);
        let args = new_session_args(&name, spec, [&message_path, &log, &cwd], &started);
        let out = self.run(args)?;
        let first = out.stdout.lines().next().unwrap_or("");
        let created = first.split_once('\t').and_then(|(sid, pid)| {
            Some((sid.to_string(), pid.trim().parse::<u32>().ok()?))
                .filter(|_| sid.starts_with('$'))
        });
        let Some((sid, pid)) = created.clone().filter(|_| out.success()) else {
            // Half made (labelling failed): no unlabelled worker may stay behind.
            if let Some((sid, pid)) = created {
                if let Ok(Some(stat)) = read_stat(pid) {
                    let _ = kill_group(pid, stat.starttime, Duration::ZERO);
                }
                let _ = self.kill_session(&sid);
            }
            let _ = remove_if_present(&message_path);
            return Err(fail(format!(
                "tmux new-session failed: {}",
                out.stderr.trim()
            )));
        };
        let stat = read_stat(pid)?;
        let start = stat.map_or(0, |s| s.starttime);
        Ok(Session {
            label: spec.label.clone(),
            id: format!("{sid}/{pid}:{start}"),
            backend: BackendKind::Tmux,
            pid: Some(pid),
            started_at: DateTime::parse_from_rfc3339(&started)
                .map(|t| t.with_timezone(&Utc))
                .unwrap_or(started_at),
            running: stat.is_some_and(|s| runs(pid, &s)),
            worker_gone: false,
            queued: false,
            ended: None,
            log: Some(log),
        })
    }

    fn kill(&self, session: &Session, grace: Duration) -> Result<KillOutcome, SessionError> {
        let (row, pid, start) = self.find(session)?;
        let Some(row) = row else {
            return Ok(KillOutcome::AlreadyGone);
        };
        if row.pane_pid != pid {
            return Ok(KillOutcome::AlreadyGone); // not the session that was observed
        }
        let outcome = if row.pane_dead {
            KillOutcome::AlreadyGone
        } else {
            kill_group(pid, start, grace)?
        };
        // Remove the session only once its pane is known to be dead: kill-session hangs the
        // pane up, which must never reach a process whose identity did not check out.
        let dead = match outcome {
            KillOutcome::AlreadyGone => self
                .rows()?
                .0
                .iter()
                .any(|r| r.session_id == row.session_id && r.pane_dead),
            _ => true,
        };
        if dead {
            self.kill_session(&row.session_id)?;
        }
        Ok(outcome)
    }

    fn forget(&self, session: &Session) -> Result<(), SessionError> {
        let (row, pid, start) = self.find(session)?;
        if let Some(row) = row {
            if !row.pane_dead {
                if row.pane_pid == pid && is_alive(pid, start)? {
                    return Err(SessionError::Backend {
                        backend: "tmux",
                        detail: format!(
                            "session {} is still running as pid {pid}; kill it first",
                            session.label
                        ),
                    });
                }
                return Ok(()); // a live pane that is not the observed session: not ours to drop
            }
            self.kill_session(&row.session_id)?;
        }
        remove_if_present(&self.message_path(&session.label)?)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::BeadId;

    fn label(slug: &str, bead: &str) -> SessionLabel {
        SessionLabel::new(slug, BeadId::new(bead).unwrap()).unwrap()
    }

    #[test]
    fn c2_5_session_names_are_unique_and_tmux_safe() {
        let labels = [
            label("a", "b.c"),
            label("a", "b_c"),
            label("a", "b_dc"),
            label("a", "b__c"),
            label("a-b", "c"),
            label("a", "b-c"),
        ];
        let names: Vec<String> = labels.iter().map(TmuxBackend::session_name).collect();
        for (i, n) in names.iter().enumerate() {
            assert!(
                !n.contains(':') && !n.contains('.') && !n.contains('#'),
                "{n}"
            );
            assert!(!names[..i].contains(n), "{n} collides");
        }
        assert_eq!(names[0], "a_b_dc");
        assert_eq!(names[2], "a_b__dc");
    }
}
