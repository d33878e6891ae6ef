//! [`Tick`]: one `braids tick` in a sandbox, under a time limit, read back as a typed report.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use braids::tick::decide::ZombieReason;
use braids::tick::TickReport;
use serde_json::Value;

use super::Sandbox;

/// How long a tick may take before the test calls it hung (and kills it).
const DEFAULT_LIMIT: Duration = Duration::from_secs(120);

/// `braids tick --json` in a sandbox, refined by the builder methods and then run by
/// [`run`](Tick::run) (a typed report, success asserted), [`json`](Tick::json) (the raw
/// report) or [`output`](Tick::output) (whatever happened).
#[must_use]
pub struct Tick<'a> {
    sb: &'a Sandbox,
    global: Vec<String>,
    args: Vec<String>,
    json: bool,
    env: Vec<(String, String)>,
    limit: Duration,
}

impl<'a> Tick<'a> {
    pub(super) fn new(sb: &'a Sandbox) -> Tick<'a> {
        Tick {
            sb,
            global: Vec::new(),
            args: Vec::new(),
            json: true,
            env: Vec::new(),
            limit: DEFAULT_LIMIT,
        }
    }

    /// `--force`: ignore idle backoff.
    pub fn force(mut self) -> Self {
        self.args.push("--force".into());
        self
    }

    /// `--dry-run`: observe and decide, change nothing.
    pub fn dry_run(mut self) -> Self {
        self.args.push("--dry-run".into());
        self
    }

    /// Without `--json`: the human output (and the log on stderr).
    pub fn human(mut self) -> Self {
        self.json = false;
        self
    }

    /// `braids --log-format json tick …`: one JSON object per log line.
    pub fn log_json(mut self) -> Self {
        self.global.extend(["--log-format".into(), "json".into()]);
        self
    }

    /// `BRAIDS_LOG=<level>` (the sandbox's default is `warn`).
    pub fn log(self, level: &str) -> Self {
        self.env("BRAIDS_LOG", level)
    }

    /// `TZ=UTC`, for check-in times.
    pub fn utc(self) -> Self {
        self.env("TZ", "UTC")
    }

    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Kill the tick after `limit` (default two minutes); a killed tick fails [`run`] and
    /// [`json`], and shows as `timed_out` in [`output`].
    ///
    /// [`run`]: Tick::run
    /// [`json`]: Tick::json
    /// [`output`]: Tick::output
    pub fn limit(mut self, limit: Duration) -> Self {
        self.limit = limit;
        self
    }

    /// The command this tick runs, to spawn it (several at once, or to kill it).
    pub fn command(self) -> Command {
        let mut argv: Vec<&str> = self.global.iter().map(String::as_str).collect();
        argv.push("tick");
        if self.json {
            argv.push("--json");
        }
        argv.extend(self.args.iter().map(String::as_str));
        let mut c = self.sb.command(&argv);
        for (k, v) in &self.env {
            c.env(k, v);
        }
        c
    }

    /// Runs it, whatever happens.
    pub fn output(self) -> Run {
        let limit = self.limit;
        run_limited(self.command(), limit)
    }

    /// Runs it, asserts it finished in time and succeeded, and returns its report.
    #[track_caller]
    pub fn run(self) -> TickReport {
        self.output().assert_ok().report()
    }

    /// Runs it, asserts it finished in time and succeeded, and returns the report as printed.
    #[track_caller]
    pub fn json(self) -> Value {
        self.output().assert_ok().json()
    }
}

/// What a limited run did.
#[derive(Debug)]
pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
    pub timed_out: bool,
}

impl Run {
    /// Asserts the run finished in time with exit status 0.
    #[track_caller]
    pub fn assert_ok(&self) -> &Run {
        assert!(
            !self.timed_out,
            "killed after {:?}: it hung\nstderr: {}",
            self.elapsed, self.stderr
        );
        assert_eq!(
            self.code,
            Some(0),
            "exit status\nstdout: {}\nstderr: {}",
            self.stdout,
            self.stderr
        );
        self
    }

    /// stdout as a tick report.
    #[track_caller]
    pub fn report(&self) -> TickReport {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "not a tick report ({e}): {}\nstderr: {}",
                self.stdout, self.stderr
            )
        })
    }

    /// stdout as JSON.
    #[track_caller]
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}\nstderr: {}", self.stdout, self.stderr))
    }
}

/// Runs a command, SIGKILLing it (and failing nothing) after `limit`.
pub fn run_limited(mut cmd: Command, limit: Duration) -> Run {
    let start = Instant::now();
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let o = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = out.read_to_end(&mut b);
        b
    });
    let e = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = err.read_to_end(&mut b);
        b
    });
    let mut timed_out = false;
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if start.elapsed() > limit {
            timed_out = true;
            let _ = child.kill();
            break child.wait().unwrap();
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let elapsed = start.elapsed();
    Run {
        code: status.code(),
        stdout: String::from_utf8_lossy(&o.join().unwrap()).into_owned(),
        stderr: String::from_utf8_lossy(&e.join().unwrap()).into_owned(),
        elapsed,
        timed_out,
    }
}

/// The session label of a bead: `project:<slug>:<bead>` (2.5).
pub fn label(slug: &str, bead: &str) -> String {
    format!("project:{slug}:{bead}")
}

/// The views of a [`TickReport`] tests compare.
pub trait ReportExt {
    /// The labels of the workers started, in order.
    fn labels(&self) -> Vec<String>;
    /// (project, bead) of each worker started, in order.
    fn spawned(&self) -> Vec<(String, String)>;
    /// The beads given workers, in order.
    fn spawned_beads(&self) -> Vec<String>;
    /// (bead, reason) of each zombie killed.
    fn killed(&self) -> Vec<(String, ZombieReason)>;
    /// (project, bead) of each claim released.
    fn released_pairs(&self) -> Vec<(String, String)>;
    /// The errors, one a line.
    fn errors_text(&self) -> String;
    /// Fails the test when the run reported errors.
    fn assert_no_errors(&self);
}

impl ReportExt for TickReport {
    fn labels(&self) -> Vec<String> {
        self.spawns.iter().map(|s| s.label.clone()).collect()
    }
    fn spawned(&self) -> Vec<(String, String)> {
        self.spawns
            .iter()
            .map(|s| (s.project.clone(), s.bead.to_string()))
            .collect()
    }
    fn spawned_beads(&self) -> Vec<String> {
        self.spawns.iter().map(|s| s.bead.to_string()).collect()
    }
    fn killed(&self) -> Vec<(String, ZombieReason)> {
        self.zombies
            .iter()
            .map(|z| (z.bead.to_string(), z.reason))
            .collect()
    }
    fn released_pairs(&self) -> Vec<(String, String)> {
        self.released
            .iter()
            .map(|r| (r.project.clone(), r.bead.to_string()))
            .collect()
    }
    fn errors_text(&self) -> String {
        self.errors.join("\n")
    }
    #[track_caller]
    fn assert_no_errors(&self) {
        assert!(self.errors.is_empty(), "unexpected errors: {self:#?}");
    }
}
