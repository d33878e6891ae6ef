//! Running a helper program (a tracker, git hooks, a notifier) with an argv, a timeout and
//! captured output, and [`ProcessGroup`], which every program braids starts runs in.
//!
//! Nothing read from a file or a tracker ever reaches a shell: callers pass an argv. The child
//! runs in its own process group so a timeout kills everything it started, not just the parent.

use std::ffi::OsString;
use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

mod group;

pub use group::{reap_detached, Detach, ProcessGroup, Stopped};

/// What a finished (or killed) helper program did.
#[derive(Debug, Clone)]
pub struct Output {
    /// `None` when the program was killed by a signal.
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub timed_out: bool,
}

impl Output {
    pub fn success(&self) -> bool {
        self.code == Some(0) && !self.timed_out
    }

    /// How it ended, for people: `exit 3`, `killed by a signal`, `timed out`.
    pub fn status_text(&self) -> String {
        if self.timed_out {
            "timed out".into()
        } else {
            exit_text(self.code)
        }
    }
}

/// An exit status for people: `exit 3`, or `killed by a signal` for no code.
pub fn exit_text(code: Option<i32>) -> String {
    code.map_or("killed by a signal".into(), |c| format!("exit {c}"))
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("`{program}` was not found on PATH")]
    NotFound { program: String },
    #[error("cannot start `{program}`: {source}")]
    Spawn {
        program: String,
        source: std::io::Error,
    },
}

/// A program invocation: argv, working directory, extra environment, stdin, timeout.
#[derive(Debug, Clone)]
pub struct Invocation {
    pub argv: Vec<OsString>,
    pub cwd: Option<PathBuf>,
    pub env: Vec<(OsString, OsString)>,
    pub stdin: Option<Vec<u8>>,
    pub timeout: Duration,
    /// Told the process group's id once it runs, and again when it is gone: a worker uses it
    /// to take a helper that stands for its agent down with it on a stop signal.
    pub watch: Option<GroupWatch>,
}

/// `(started, gone)`, each given the process group's id.
pub type GroupWatch = (fn(i32), fn(i32));

impl Invocation {
    pub fn new<I, S>(argv: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        Invocation {
            argv: argv.into_iter().map(Into::into).collect(),
            cwd: None,
            env: Vec::new(),
            stdin: None,
            timeout: Duration::from_secs(30),
            watch: None,
        }
    }
    pub fn cwd(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cwd = Some(dir.into());
        self
    }
    pub fn env(mut self, k: impl Into<OsString>, v: impl Into<OsString>) -> Self {
        self.env.push((k.into(), v.into()));
        self
    }
    pub fn stdin(mut self, bytes: impl Into<Vec<u8>>) -> Self {
        self.stdin = Some(bytes.into());
        self
    }
    pub fn timeout(mut self, t: Duration) -> Self {
        self.timeout = t;
        self
    }
    pub fn watch(mut self, watch: Option<GroupWatch>) -> Self {
        self.watch = watch;
        self
    }

    /// Runs to completion or until the timeout, when the whole process group is killed.
    pub fn run(&self) -> Result<Output, RunError> {
        let program = self.argv.first().cloned().unwrap_or_default();
        let shown = program.to_string_lossy().into_owned();
        let mut cmd = Command::new(&program);
        cmd.args(&self.argv[1.min(self.argv.len())..])
            .stdin(if self.stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(d) = &self.cwd {
            cmd.current_dir(d);
        }
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        let mut group =
            ProcessGroup::spawn(&mut cmd, Detach::Group).map_err(|e| match e.kind() {
                std::io::ErrorKind::NotFound => RunError::NotFound {
                    program: shown.clone(),
                },
                _ => RunError::Spawn {
                    program: shown.clone(),
                    source: e,
                },
            })?;
        let pgid = group.id() as i32;
        if let Some((started, _)) = self.watch {
            started(pgid);
        }
        let child = group.leader().expect("just started");
        let stdin_thread = self.stdin.clone().and_then(|bytes| {
            let mut pipe = child.stdin.take()?;
            Some(std::thread::spawn(move || {
                use std::io::Write;
                let _ = pipe.write_all(&bytes);
            }))
        });
        let mut out_pipe = child.stdout.take().expect("piped");
        let mut err_pipe = child.stderr.take().expect("piped");
        let out_thread = std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = out_pipe.read_to_end(&mut buf);
            buf
        });
        let err_thread = std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = err_pipe.read_to_end(&mut buf);
            buf
        });
        // A helper gets no grace: on timeout its whole group is killed at once.
        let timed_out = !group.wait(Some(self.timeout));
        if timed_out {
            group.kill();
        }
        // Anything the group left behind holding the pipes open dies with it.
        let status = group.finish();
        if let Some((_, gone)) = self.watch {
            gone(pgid);
        }
        let status = status.map_err(|e| RunError::Spawn {
            program: shown.clone(),
            source: e,
        })?;
        if let Some(t) = stdin_thread {
            let _ = t.join();
        }
        let stdout = String::from_utf8_lossy(&out_thread.join().unwrap_or_default()).into_owned();
        let stderr = String::from_utf8_lossy(&err_thread.join().unwrap_or_default()).into_owned();
        Ok(Output {
            code: status.code(),
            stdout,
            stderr,
            timed_out,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn captures_output_and_code() {
        let o = Invocation::new(["sh", "-c", "echo out; echo err >&2; exit 3"])
            .run()
            .unwrap();
        assert_eq!(
            (o.code, o.stdout.as_str(), o.stderr.as_str(), o.timed_out),
            (Some(3), "out\n", "err\n", false)
        );
        let o = Invocation::new(["cat"]).stdin("hi").run().unwrap();
        assert_eq!(o.stdout, "hi");
    }

    #[test]
    fn timeout_kills_the_whole_group() {
        let start = Instant::now();
        let o = Invocation::new(["sh", "-c", "sleep 30 & sleep 30"])
            .timeout(Duration::from_millis(200))
            .run()
            .unwrap();
        assert!(o.timed_out && !o.success());
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "grandchild kept the pipes open"
        );
    }

    #[test]
    fn missing_program() {
        assert!(matches!(
            Invocation::new(["/nonexistent/braids-x"]).run(),
            Err(RunError::NotFound { .. })
        ));
    }
}
