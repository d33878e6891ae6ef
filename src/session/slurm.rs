//! Workers as Slurm batch jobs: the cluster's scheduler places them, braids still decides who
//! runs.
//!
//! A spawn submits one job named with the session label, limited to the project's
//! WorkerTimeout (`--time`, so Slurm enforces it too), never requeued (a requeued job would be
//! a second agent on its bead), writing the worker log through `--output`. The job runs a fixed
//! script that `exec`s the worker with the spawn message on stdin, so the worker itself gets
//! Slurm's TERM. Every command is an argv; labels and paths Slurm would read as patterns or
//! lists (`%`, `,`, line breaks) are refused, not passed through.
//!
//! The queue is the truth about who is running: one `squeue` per survey for the user's jobs,
//! mapped back to labels by name. A small record per job (`<stem>.slurm` in the sessions
//! folder) keeps what the queue forgets: the log path, and that a job braids submitted has
//! ended, with the reason Slurm gave (`scontrol show job` while it still knows the job, `sacct`
//! when accounting is there). PENDING jobs hold their bead and count against MaxWorkers.
//!
//! braids' home and the project directories must be on a file system the compute nodes share:
//! the job reads its spawn message there and works in the project. Where they are not, the
//! job's script fails at once with a sentence saying so in the worker log, and the tick sees
//! the session end without a finished bead.

mod queue;

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::spec::{file_stem, label_from_stem, remove_if_present, validate_spec};
use super::{
    BackendKind, KillOutcome, Session, SessionBackend, SessionError, SessionProblem, SpawnSpec,
    Survey,
};
use crate::system::proc::Invocation;

/// `[slurm]` in config.toml.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct SlurmSettings {
    /// `--partition`; empty: the cluster's default.
    pub partition: String,
    /// `--account`; empty: the user's default.
    pub account: String,
    /// More `sbatch` arguments, each one argv element (`["--qos=low"]`).
    pub extra_args: Vec<String>,
    pub sbatch: String,
    pub squeue: String,
    pub scancel: String,
    pub scontrol: String,
    /// Asked only for a job `scontrol` no longer knows; a cluster without accounting just says
    /// so, and braids does without.
    pub sacct: String,
    /// `SLURM_CONF` for every Slurm command; empty: the environment's, or the system's.
    pub conf: String,
    /// Per Slurm command.
    pub timeout_secs: u64,
}

impl Default for SlurmSettings {
    fn default() -> Self {
        SlurmSettings {
            partition: String::new(),
            account: String::new(),
            extra_args: Vec::new(),
            sbatch: "sbatch".into(),
            squeue: "squeue".into(),
            scancel: "scancel".into(),
            scontrol: "scontrol".into(),
            sacct: "sacct".into(),
            conf: String::new(),
            timeout_secs: 30,
        }
    }
}

/// The job's script: fixed text, nothing in it built from input. The message file, the project
/// directory and the worker's argv arrive as its arguments.
const JOB_SCRIPT: &str = r#"#!/bin/sh
# braids: a worker as a Slurm batch job. Arguments: the spawn message file, the project
# directory, then the worker's argv. The worker is exec'd so Slurm's TERM reaches it.
msg="$1"; dir="$2"; shift 2
if [ ! -r "$msg" ] || [ ! -d "$dir" ]; then
  echo "braids: $msg or $dir is not on this node ($(hostname)): braids' home and the project directories must be on a file system shared with the compute nodes" >&2
  exit 97
fi
cd "$dir" || exit 97
exec "$@" < "$msg"
"#;

/// What braids keeps of a job it submitted.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Record {
    job: String,
    label: String,
    log: PathBuf,
    submitted_at: DateTime<Utc>,
    /// braids cancelled it (a zombie, `braids kill`): its CANCELLED end is not news.
    #[serde(default)]
    cancelled: bool,
}

pub struct SlurmBackend {
    dir: PathBuf,
    settings: SlurmSettings,
}

impl SlurmBackend {
    pub fn new(sessions_dir: PathBuf, settings: SlurmSettings) -> SlurmBackend {
        SlurmBackend {
            dir: sessions_dir,
            settings,
        }
    }

    fn record_path(&self, stem: &str) -> PathBuf {
        self.dir.join(format!("{stem}.slurm"))
    }

    fn message_path(&self, stem: &str) -> PathBuf {
        self.dir.join(format!("{stem}.slurm-stdin"))
    }

    /// Written on the first spawn; while it exists every survey asks the queue.
    fn script_path(&self) -> PathBuf {
        self.dir.join("slurm-job.sh")
    }

    fn fail(detail: impl Into<String>) -> SessionError {
        SessionError::Backend {
            backend: "slurm",
            detail: detail.into(),
        }
    }

    /// Runs one Slurm command; its failure is an error naming the command and what it said.
    fn run(
        &self,
        program: &str,
        args: Vec<OsString>,
        env: &[(OsString, OsString)],
    ) -> Result<String, SessionError> {
        let mut inv = Invocation::new(std::iter::once(OsString::from(program)).chain(args))
            .timeout(Duration::from_secs(self.settings.timeout_secs.max(1)));
        if !self.settings.conf.is_empty() {
            inv = inv.env("SLURM_CONF", &self.settings.conf);
        }
        for (k, v) in env {
            inv = inv.env(k, v);
        }
        let out = inv.run().map_err(|e| Self::fail(e.to_string()))?;
        if !out.success() {
            let said = out.stderr.trim();
            let said = if said.is_empty() {
                out.stdout.trim()
            } else {
                said
            };
            return Err(Self::fail(format!(
                "`{program}` failed ({}): {}",
                out.status_text(),
                said.lines().next().unwrap_or("no output")
            )));
        }
        Ok(out.stdout)
    }

    /// `squeue` over every state Slurm still remembers, without a header: `select` picks the
    /// jobs, `format` the columns.
    fn squeue(&self, select: String, format: &str) -> Result<String, SessionError> {
        let args = [
            "--noheader".into(),
            select,
            "--states=all".into(),
            format!("--format={format}"),
        ];
        self.run(
            &self.settings.squeue,
            args.map(OsString::from).to_vec(),
            &[],
        )
    }

    /// The user's jobs.
    fn queue(&self) -> Result<Vec<queue::Row>, SessionError> {
        let uid = nix::unistd::getuid().as_raw();
        let out = self.squeue(format!("--user={uid}"), queue::FORMAT)?;
        let (rows, odd) = queue::parse_squeue(&out);
        for line in odd {
            tracing::warn!("squeue printed a line braids cannot read: {line}");
        }
        Ok(rows)
    }

    /// One job's state now: `None` once Slurm has forgotten it. A controller that does not
    /// answer is an error, never "gone": a job taken for gone would run on unseen.
    fn job_state(&self, job: &str) -> Result<Option<String>, SessionError> {
        let asked = self.squeue(format!("--jobs={job}"), "%T");
        match asked {
            Ok(out) => Ok(out
                .lines()
                .next()
                .map(|l| l.trim().to_string())
                .filter(|s| !s.is_empty())),
            Err(SessionError::Backend { detail, .. }) if detail.contains("Invalid job id") => {
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    fn is_live(&self, job: &str) -> Result<bool, SessionError> {
        Ok(self.job_state(job)?.is_some_and(|s| queue::is_live(&s)))
    }

    /// How a job that left the queue ended, if Slurm can still say.
    fn finished(&self, job: &str) -> Option<queue::Finished> {
        let shown = self
            .run(
                &self.settings.scontrol,
                vec!["show".into(), "job".into(), "-o".into(), job.into()],
                &[],
            )
            .ok()
            .and_then(|o| queue::parse_scontrol(&o));
        shown.or_else(|| {
            self.run(
                &self.settings.sacct,
                ["-n", "-P", "-X", "-o", "State,ExitCode", "-j", job]
                    .map(OsString::from)
                    .to_vec(),
                &[],
            )
            .ok()
            .and_then(|o| queue::parse_sacct(&o))
        })
    }

    fn records(&self) -> (Vec<(String, Record)>, Vec<SessionProblem>) {
        let mut found = Vec::new();
        let mut problems = Vec::new();
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return (found, problems);
        };
        for e in entries.flatten() {
            let name = e.file_name();
            let Some(stem) = name.to_str().and_then(|n| n.strip_suffix(".slurm")) else {
                continue;
            };
            let label = label_from_stem(stem);
            let read = crate::system::atomic::read(&e.path())
                .map_err(|e| e.to_string())
                .and_then(|b| serde_json::from_slice::<Record>(&b).map_err(|e| e.to_string()));
            match read {
                Ok(r) if label.as_ref().is_some_and(|l| l.to_string() == r.label) => {
                    found.push((stem.to_string(), r))
                }
                Ok(_) => problems.push(SessionProblem {
                    label: label.map(|l| l.to_string()),
                    location: e.path().display().to_string(),
                    detail: "the record names another session than its file".into(),
                }),
                Err(detail) => problems.push(SessionProblem {
                    label: label.map(|l| l.to_string()),
                    location: e.path().display().to_string(),
                    detail: format!("not a Slurm session record: {detail}"),
                }),
            }
        }
        found.sort_by(|a, b| a.0.cmp(&b.0));
        (found, problems)
    }

    fn write_record(&self, stem: &str, rec: &Record) -> Result<(), SessionError> {
        let bytes = serde_json::to_vec_pretty(rec).map_err(|e| Self::fail(e.to_string()))?;
        crate::system::atomic::write(&self.record_path(stem), &bytes)
            .map_err(|e| Self::fail(format!("{e:#}")))
    }

    /// The `sbatch` argv for a spawn, or why it is refused.
    fn submit_args(&self, spec: &SpawnSpec, message: &Path) -> Result<Vec<OsString>, String> {
        let label = spec.label.to_string();
        if label
            .bytes()
            .any(|b| b == b',' || b.is_ascii_whitespace() || b.is_ascii_control())
        {
            return Err(format!("the label {label:?} has a character Slurm would split or mangle (a comma, a space or a control character)"));
        }
        for (what, p) in [
            ("log", &spec.log),
            ("project directory", &spec.cwd),
            ("sessions folder", &self.dir),
        ] {
            let b = p.as_os_str().as_bytes();
            if b.contains(&b'%') || b.contains(&b'\\') || b.contains(&b'\n') {
                return Err(format!(
                    "the {what} path {} has `%`, `\\` or a line break, which Slurm reads as a pattern; move it",
                    p.display()
                ));
            }
        }
        let p = &spec.placement;
        let minutes = p.time_limit_secs.div_ceil(60).max(1);
        let mut args: Vec<OsString> = vec![
            "--parsable".into(),
            format!("--job-name={label}").into(),
            format!("--time={minutes}").into(),
            join("--chdir=", &spec.cwd),
            join("--output=", &spec.log),
            "--open-mode=append".into(),
            "--no-requeue".into(),
            "--export=ALL".into(),
        ];
        let s = &self.settings;
        if !s.partition.is_empty() {
            args.push(format!("--partition={}", s.partition).into());
        }
        if !s.account.is_empty() {
            args.push(format!("--account={}", s.account).into());
        }
        if let Some(n) = p.cpus {
            args.push(format!("--cpus-per-task={n}").into());
        }
        if let Some(m) = &p.memory {
            args.push(format!("--mem={m}").into());
        }
        if let Some(g) = &p.gpus {
            args.push(format!("--gpus={g}").into());
        }
        args.extend(s.extra_args.iter().map(OsString::from));
        args.push(self.script_path().into());
        args.push(message.into());
        args.push(spec.cwd.clone().into());
        args.extend(spec.argv.iter().cloned());
        Ok(args)
    }

    /// Waits until the job has left the live states, up to `limit`.
    fn gone_within(&self, job: &str, limit: Duration) -> Result<bool, SessionError> {
        let start = Instant::now();
        loop {
            if !self.is_live(job)? {
                return Ok(true);
            }
            if start.elapsed() >= limit {
                return Ok(false);
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn mark_cancelled(&self, label: &crate::model::SessionLabel, job: &str) {
        let Ok(stem) = file_stem(label) else { return };
        if let Some((_, mut rec)) = self
            .records()
            .0
            .into_iter()
            .find(|(s, r)| *s == stem && r.job == job)
        {
            rec.cancelled = true;
            if let Err(e) = self.write_record(&stem, &rec) {
                tracing::warn!(%label, "cannot mark the Slurm job as cancelled by braids: {e}");
            }
        }
    }
}

fn join(flag: &str, path: &Path) -> OsString {
    let mut s = OsString::from(flag);
    s.push(path);
    s
}

impl SessionBackend for SlurmBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Slurm
    }

    /// Once braids has submitted a job here, every survey asks the queue (one `squeue`, a few
    /// milliseconds); before that, an installation that never used Slurm runs no Slurm command.
    fn may_have_sessions(&self) -> bool {
        self.script_path().exists()
    }

    /// Every job braids submits has a record until it is forgotten after its end.
    fn may_hold(&self, label: &crate::model::SessionLabel) -> bool {
        file_stem(label).map_or(true, |stem| self.record_path(&stem).exists())
    }

    fn survey(&self) -> Result<Survey, SessionError> {
        let (records, problems) = self.records();
        let rows = self.queue()?;
        let mut out = Survey {
            problems,
            ..Survey::default()
        };
        let mut seen = std::collections::BTreeSet::new();
        for (stem, rec) in records {
            let Some(label) = label_from_stem(&stem) else {
                continue;
            };
            seen.insert(rec.job.clone());
            let row = rows.iter().find(|r| r.job == rec.job);
            let (state, reason) = match row {
                Some(r) => (r.state.clone(), r.reason.clone()),
                None => self
                    .finished(&rec.job)
                    .map(|f| (f.state, f.reason))
                    .unwrap_or_default(),
            };
            let running = queue::is_live(&state);
            let queued = running && queue::is_queued(&state);
            out.sessions.push(Session {
                label,
                id: rec.job.clone(),
                backend: BackendKind::Slurm,
                pid: None,
                // WorkerTimeout counts from the job's start, as Slurm's `--time` does.
                started_at: row
                    .and_then(|r| r.started)
                    .filter(|_| !queued)
                    .map_or(rec.submitted_at, |s| s.max(rec.submitted_at)),
                running,
                worker_gone: false,
                queued,
                ended: (!running && !rec.cancelled)
                    .then(|| queue::ended_why(&state, &reason))
                    .flatten(),
                log: Some(rec.log.clone()),
            });
        }
        // A live job named like a session that braids has no record of (the record was lost,
        // or another braids of this user submitted it): it may be a worker, so it is counted.
        for r in rows
            .iter()
            .filter(|r| !seen.contains(&r.job) && queue::is_live(&r.state))
        {
            let Some(label) = r.label.clone() else {
                continue;
            };
            out.sessions.push(Session {
                label,
                id: r.job.clone(),
                backend: BackendKind::Slurm,
                pid: None,
                started_at: r
                    .started
                    .filter(|_| !queue::is_queued(&r.state))
                    .or(r.submitted)
                    .unwrap_or_else(Utc::now),
                running: true,
                worker_gone: false,
                queued: queue::is_queued(&r.state),
                ended: None,
                log: None,
            });
        }
        out.sessions
            .sort_by(|a, b| (&a.label, a.started_at, &a.id).cmp(&(&b.label, b.started_at, &b.id)));
        Ok(out)
    }

    fn spawn(&self, spec: &SpawnSpec) -> Result<Session, SessionError> {
        validate_spec(spec)?;
        let label = spec.label.to_string();
        let refuse = |detail: String| SessionError::Spawn {
            label: label.clone(),
            detail,
        };
        let stem = file_stem(&spec.label)?;
        std::fs::create_dir_all(&self.dir)?;
        let message = self.message_path(&stem);
        let args = self.submit_args(spec, &message).map_err(refuse)?;
        if let Some(s) = self
            .survey()?
            .sessions
            .into_iter()
            .find(|s| s.label == spec.label && s.running)
        {
            return Err(refuse(format!(
                "already queued or running as Slurm job {}",
                s.id
            )));
        }
        let script = self.script_path();
        if crate::system::atomic::read(&script).ok().as_deref() != Some(JOB_SCRIPT.as_bytes()) {
            crate::system::atomic::write(&script, JOB_SCRIPT.as_bytes())
                .map_err(|e| refuse(format!("{e:#}")))?;
        }
        crate::system::atomic::write(&message, spec.message.to_string().as_bytes())
            .map_err(|e| refuse(format!("{e:#}")))?;
        if let Some(dir) = spec.log.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let submitted_at = Utc::now();
        let out = self
            .run(&self.settings.sbatch, args, &spec.env)
            .map_err(|e| refuse(e.to_string()))?;
        // `--parsable` prints `ID` or `ID;cluster`.
        let job = out.trim().split(';').next().unwrap_or("").to_string();
        if job.is_empty() || !job.bytes().all(|b| b.is_ascii_digit()) {
            return Err(refuse(format!(
                "sbatch printed no job id: {:?}",
                out.trim()
            )));
        }
        let rec = Record {
            job: job.clone(),
            label: label.clone(),
            log: spec.log.clone(),
            submitted_at,
            cancelled: false,
        };
        if let Err(e) = self.write_record(&stem, &rec) {
            // A job braids cannot remember must not run: it would hold a bead unseen.
            let _ = self.run(&self.settings.scancel, vec![job.clone().into()], &[]);
            return Err(refuse(format!(
                "cannot record Slurm job {job}, so it was cancelled: {e}"
            )));
        }
        tracing::debug!(%label, %job, "submitted to Slurm");
        Ok(Session {
            label: spec.label.clone(),
            id: job,
            backend: BackendKind::Slurm,
            pid: None,
            started_at: submitted_at,
            running: true,
            worker_gone: false,
            queued: true,
            ended: None,
            log: Some(spec.log.clone()),
        })
    }

    /// TERM to the worker (the job's batch step is the worker itself), up to `grace`; then
    /// `scancel` of the whole allocation. Done only once the job has left the live states.
    fn kill(&self, session: &Session, grace: Duration) -> Result<KillOutcome, SessionError> {
        let job = session.id.as_str();
        if job.is_empty() || !job.bytes().all(|b| b.is_ascii_digit()) {
            return Err(Self::fail(format!("`{job}` is not a Slurm job id")));
        }
        let Some(state) = self.job_state(job)?.filter(|s| queue::is_live(s)) else {
            return Ok(KillOutcome::AlreadyGone);
        };
        self.mark_cancelled(&session.label, job);
        if !queue::is_queued(&state) {
            self.run(
                &self.settings.scancel,
                vec!["--full".into(), "--signal=TERM".into(), job.into()],
                &[],
            )?;
            if self.gone_within(job, grace)? {
                return Ok(KillOutcome::Terminated);
            }
        }
        self.run(&self.settings.scancel, vec![job.into()], &[])?;
        // Slurm sends KILL after its own KillWait; allow for it.
        if self.gone_within(job, Duration::from_secs(60))? {
            Ok(if queue::is_queued(&state) {
                KillOutcome::Terminated
            } else {
                KillOutcome::Killed
            })
        } else {
            Err(Self::fail(format!(
                "job {job} is still in the queue a minute after scancel"
            )))
        }
    }

    fn forget(&self, session: &Session) -> Result<(), SessionError> {
        let stem = file_stem(&session.label)?;
        let path = self.record_path(&stem);
        let ours = self
            .records()
            .0
            .into_iter()
            .any(|(s, r)| s == stem && r.job == session.id);
        if ours {
            if self.is_live(&session.id)? {
                return Err(Self::fail(format!(
                    "session {} is still in the queue as job {}; kill it first",
                    session.label, session.id
                )));
            }
            remove_if_present(&path)?;
            remove_if_present(&self.message_path(&stem))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{SessionLabel, SpawnMessage};
    use crate::session::Placement;

    fn spec(dir: &Path, label: &str, log: &Path) -> SpawnSpec {
        let label = SessionLabel::parse(label).unwrap();
        SpawnSpec {
            message: SpawnMessage::new(dir.to_path_buf(), label.bead().clone(), 1, "").unwrap(),
            label,
            argv: vec!["braids".into(), "worker".into()],
            cwd: dir.to_path_buf(),
            env: vec![],
            log: log.to_path_buf(),
            placement: Placement {
                backend: Some(BackendKind::Slurm),
                cpus: Some(2),
                memory: Some("4G".into()),
                gpus: Some("a100:1".into()),
                time_limit_secs: 61,
                ..Placement::default()
            },
        }
    }

    #[test]
    fn sbatch_args_carry_the_label_limits_and_resources_as_argv() {
        let tmp = tempfile::tempdir().unwrap();
        let b = SlurmBackend::new(
            tmp.path().join("sessions"),
            SlurmSettings {
                partition: "gpu".into(),
                extra_args: vec!["--qos=low".into()],
                ..SlurmSettings::default()
            },
        );
        let log = tmp.path().join("logs/app_app-1.log");
        let msg = tmp.path().join("m");
        let args = b
            .submit_args(&spec(tmp.path(), "project:app:app-1", &log), &msg)
            .unwrap();
        let args: Vec<String> = args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        for want in [
            "--job-name=project:app:app-1",
            "--time=2",
            "--no-requeue",
            "--partition=gpu",
            "--cpus-per-task=2",
            "--mem=4G",
            "--gpus=a100:1",
            "--qos=low",
        ] {
            assert!(args.iter().any(|a| a == want), "{want} in {args:?}");
        }
        assert_eq!(
            args.iter().rev().take(2).cloned().collect::<Vec<_>>(),
            ["worker", "braids"]
        );
    }

    #[test]
    fn paths_slurm_would_expand_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let b = SlurmBackend::new(tmp.path().join("sessions"), SlurmSettings::default());
        let err = b
            .submit_args(
                &spec(tmp.path(), "project:app:app-1", &tmp.path().join("log-%j")),
                &tmp.path().join("m"),
            )
            .unwrap_err();
        assert!(err.contains("`%`"), "{err}");
    }
}
