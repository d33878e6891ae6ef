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
//! * **Output goes to the log, not the pane.** The log file is complete from the first byte,
//!   which `pipe-pane` cannot promise; attaching shows an empty pane.
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

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};

use super::process::{
    file_stem, is_alive, kill_group, open_log, read_stat, remove_if_present, runs, validate_spec,
};
use super::{
    KillOutcome, Session, SessionBackend, SessionError, SessionProblem, SpawnSpec, Survey,
};
use crate::model::SessionLabel;
use crate::proc::{Invocation, Output, RunError};

/// The socket name used unless configured otherwise (`tmux -L braids`).
pub const DEFAULT_SOCKET: &str = "braids";

/// Runs in the pane: `$1` message file, `$2` log, `$3` working directory, then the worker argv.
/// Its exit status is the worker's (126 when the directory is missing, 127 when the program is).
const WRAPPER: &str =
    "cd -- \"$3\" 2>>\"$2\" || exit 126\nm=$1 l=$2\nshift 3\n\"$@\" <\"$m\" >>\"$l\" 2>&1";

/// One row per session; every field is free of tabs and newlines (`@braids_log` is encoded).
const LIST_FORMAT: &str = "#{session_id}\t#{session_name}\t#{session_created}\t#{pane_pid}\t#{pane_dead}\t#{@braids_label}\t#{@braids_started}\t#{@braids_log}";

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

/// One line of `list-sessions`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Row {
    session_id: String,
    name: String,
    created: i64,
    pane_pid: u32,
    pane_dead: bool,
    label: String,
    started: String,
    log: String,
}

impl Row {
    fn parse(line: &str) -> Option<Row> {
        let f: Vec<&str> = line.split('\t').collect();
        if f.len() != 8 || !f[0].starts_with('$') {
            return None;
        }
        Some(Row {
            session_id: f[0].to_string(),
            name: f[1].to_string(),
            created: f[2].parse().ok()?,
            pane_pid: f[3].parse().ok()?,
            pane_dead: match f[4] {
                "0" => false,
                "1" => true,
                _ => return None,
            },
            label: f[5].to_string(),
            started: f[6].to_string(),
            log: f[7].to_string(),
        })
    }

    fn location(&self) -> String {
        format!("tmux session {} ({})", self.name, self.session_id)
    }
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
            detail: format!("{what} failed ({:?}): {}", out.code, out.stderr.trim()),
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

/// Whether a failed call only means that no server runs on the socket (so no session exists).
/// Anything else, a permission problem say, is an error: an unreachable server may well have
/// workers on it.
fn no_server(out: &Output) -> bool {
    let e = &out.stderr;
    e.contains("no server running")
        || (e.contains("error connecting to")
            && (e.contains("No such file or directory") || e.contains("Connection refused")))
}

/// `$n/pid:starttime`.
fn parse_id(id: &str) -> Option<(String, u32, u64)> {
    let (sid, rest) = id.split_once('/')?;
    let (pid, start) = rest.split_once(':')?;
    if !sid.starts_with('$') {
        return None;
    }
    Some((sid.to_string(), pid.parse().ok()?, start.parse().ok()?))
}

/// Protects an argument from tmux's own argv parsing, which takes any argument ending in `;`
/// as a command separator (and `\;` at the end as a literal `;`): a final `;` becomes `\;`.
/// Nothing else in an argument is interpreted.
pub fn escape_arg(arg: &OsStr) -> OsString {
    let b = arg.as_bytes();
    if b.last() == Some(&b';') {
        let mut v = b[..b.len() - 1].to_vec();
        v.extend_from_slice(b"\\;");
        OsString::from_vec(v)
    } else {
        arg.to_os_string()
    }
}

/// `%XX` for control bytes, non-ASCII bytes and `%`, so any path fits one tab-separated field.
fn encode_path(p: &Path) -> String {
    let mut s = String::new();
    for &b in p.as_os_str().as_bytes() {
        if !(0x20..0x7f).contains(&b) || b == b'%' {
            s.push_str(&format!("%{b:02X}"));
        } else {
            s.push(b as char);
        }
    }
    s
}

fn decode_path(s: &str) -> Option<PathBuf> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    Some(PathBuf::from(OsString::from_vec(out)))
}

impl SessionBackend for TmuxBackend {
    fn name(&self) -> &'static str {
        "tmux"
    }

    fn survey(&self) -> Result<Survey, SessionError> {
        let (rows, problems) = self.rows()?;
        let mut out = Survey {
            sessions: Vec::new(),
            problems,
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
                pid: Some(row.pane_pid),
                started_at,
                running,
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
                    "already running in tmux as pid {:?}",
                    old.pid
                )));
            }
            // Never an empty target: tmux would take that to mean some other session.
            if let Some((sid, _, _)) = parse_id(&old.id) {
                self.kill_session(&sid)?;
            }
        }

        std::fs::create_dir_all(&self.dir)?;
        crate::atomic::write(&message_path, spec.message.to_string().as_bytes())
            .map_err(|e| fail(format!("{e:#}")))?;
        open_log(&log).map_err(|e| fail(format!("cannot open log {}: {e}", log.display())))?;

        let started_at = Utc::now();
        let started = started_at.to_rfc3339_opts(SecondsFormat::AutoSi, true);
        let target = format!("={name}:");
        let mut args: Vec<OsString> = ["new-session", "-d", "-s", &name, "-P", "-F"]
            .into_iter()
            .map(OsString::from)
            .collect();
        args.push("#{session_id}\t#{pane_pid}".into());
        for (k, v) in &spec.env {
            let mut kv = k.clone();
            kv.push("=");
            kv.push(v);
            args.extend(["-e".into(), escape_arg(&kv)]);
        }
        args.extend(["--", "/bin/sh", "-c", WRAPPER, "braids-worker"].map(OsString::from));
        for a in [message_path.as_os_str(), log.as_os_str(), cwd.as_os_str()] {
            args.push(escape_arg(a));
        }
        args.extend(spec.argv.iter().map(|a| escape_arg(a)));
        for option in [
            vec!["set-option", "-w", "-t", &target, "remain-on-exit", "on"],
            vec!["set-option", "-t", &target, "@braids_label", &label],
            vec!["set-option", "-t", &target, "@braids_started", &started],
        ] {
            args.push(";".into());
            args.extend(option.into_iter().map(|a| escape_arg(OsStr::new(a))));
        }
        args.push(";".into());
        args.extend(["set-option", "-t", &target, "@braids_log"].map(OsString::from));
        args.push(escape_arg(OsStr::new(&encode_path(&log))));

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
            pid: Some(pid),
            started_at: DateTime::parse_from_rfc3339(&started)
                .map(|t| t.with_timezone(&Utc))
                .unwrap_or(started_at),
            running: stat.is_some_and(|s| runs(pid, &s)),
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

    #[test]
    fn escaping_undoes_tmux_separator_parsing() {
        // What tmux's cmd_parse_from_arguments does to one argument.
        fn tmux_reads(arg: &[u8]) -> Option<Vec<u8>> {
            let mut v = arg.to_vec();
            if v.last() == Some(&b';') {
                v.pop();
                match v.last_mut() {
                    Some(b) if *b == b'\\' => *b = b';',
                    _ => return None, // a separator
                }
            }
            Some(v)
        }
        for arg in [
            ";", "a;", "a\\;", "a\\\\;", ";;", "\\", "plain", "", "a;b", "#{x}", "\\;\\;",
        ] {
            let escaped = escape_arg(OsStr::new(arg));
            assert_eq!(
                tmux_reads(escaped.as_bytes()).as_deref(),
                Some(arg.as_bytes()),
                "{arg:?}"
            );
        }
    }

    #[test]
    fn log_paths_survive_the_list_format() {
        for p in ["/tmp/a b/log", "/x/%41\t\n/é", "/plain"] {
            let enc = encode_path(Path::new(p));
            assert!(
                !enc.contains('\t') && !enc.contains('\n') && enc.is_ascii(),
                "{enc}"
            );
            assert_eq!(decode_path(&enc), Some(PathBuf::from(p)));
        }
        assert_eq!(decode_path("%4"), None);
    }

    #[test]
    fn rows_and_ids() {
        let row = Row::parse("$3\ta_b\t1700000000\t4242\t0\tproject:a:b\t2026-01-01T00:00:00Z\t/l")
            .unwrap();
        assert_eq!(
            (row.pane_pid, row.pane_dead, row.label.as_str()),
            (4242, false, "project:a:b")
        );
        assert!(Row::parse("$3\ta_b\t1\t4242\t0\tproject:a:b").is_none());
        assert!(Row::parse("$3\ta_b\t1\tx\t0\tl\ts\tlog").is_none());
        assert_eq!(parse_id("$3/4242:99"), Some(("$3".into(), 4242, 99)));
        assert_eq!(parse_id("4242:99"), None);
    }
}
