//! One turn of the claw loop, as `braids worker` runs it for a claw project: the task the tick
//! claimed walks CONTEXT_PREP → CODING → VALIDATION → COMMIT, with the seed's events at each
//! step. Every fixed step is braids': the packet is built by code, the checks are argv lists
//! from `.claw/config.yaml`, the check-off, commit and push are the worker's. The coder only
//! codes.
//!
//! - Validation failing: the coder tries again with the failure in its packet, up to `retries`
//!   more times; then the loop pauses (`loop_paused`, an entry in `.claw/ISSUES.md`) until
//!   `braids resume`.
//! - The coder failing (non-zero exit, a timeout) or asking a question: the task goes back to
//!   open; `stuck_after` such turns in a row pause the loop (`loop_stuck`).
//! - The last task checked off: `loop_complete`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};
use chrono::Utc;

use crate::claw::loopstate::{self, RunEnd};
use crate::claw::status_block::{self, ClawStatus, Said};
use crate::claw::tasks::Plan;
use crate::claw::{config, packet, turn_events};
use crate::events::status::State;
use crate::events::{Draft, Journal, Kind};
use crate::model::{BeadId, SpawnMessage};
use crate::tracker::{ClaimOutcome, Tracker};
use crate::worker::{ExecRequest, Executor};

/// How a turn ended, for the worker's exit code and `--json`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "ending", rename_all = "kebab-case")]
pub enum TurnEnd {
    Completed { commit: Option<String>, left: usize },
    ClaimRefused,
    ValidationFailed,
    NoProgress { why: String },
    Paused { why: String },
}

/// The turn's edges.
pub struct Turn<'a> {
    pub tracker: &'a dyn Tracker,
    pub executor: &'a dyn Executor,
    pub actor: &'a str,
    pub slug: &'a str,
    pub worker_timeout: Duration,
    pub activity: PathBuf,
}

impl Turn<'_> {
    /// Claims the task and runs the turn. After the claim nothing leaves the task claimed: an
    /// error reopens it and counts as a turn without progress (or, once the task is checked
    /// off, pauses the loop for a person, since closed is final).
    pub fn run(&self, msg: &SpawnMessage) -> Result<TurnEnd> {
        let root = &msg.project;
        if let ClaimOutcome::Refused { .. } = self.tracker.claim(&msg.bead, self.actor)? {
            return Ok(TurnEnd::ClaimRefused);
        }
        let tell = |drafts: Vec<Draft>| crate::events::emit(root, self.slug, drafts);
        match self.claimed(msg) {
            Ok(end) => Ok(end),
            Err(e) => {
                let why = format!("{e:#}");
                tracing::warn!(bead = %msg.bead, "claw turn failed: {why}");
                let closed = self
                    .tracker
                    .show(&msg.bead)
                    .ok()
                    .flatten()
                    .is_some_and(|b| b.status == crate::model::BeadStatus::Closed);
                if closed {
                    let why = format!("the task was checked off but its commit failed ({why}); commit its work by hand");
                    return self.pause(root, &msg.bead, None, &why, &tell);
                }
                let cfg = config::load(root).unwrap_or_default();
                let task = msg.bead.to_string();
                self.no_progress(root, &msg.bead, &task, &cfg, why, &tell)
            }
        }
    }

    fn claimed(&self, msg: &SpawnMessage) -> Result<TurnEnd> {
        let root = &msg.project;
        let started = Instant::now();
        // One deadline for the whole turn, inside WorkerTimeout, with room for the fixed steps
        // after it: the tick never has to stop a turn as a zombie.
        let deadline = started + crate::worker::executor::agent_budget(self.worker_timeout);
        let left = || deadline.saturating_duration_since(Instant::now());
        let journal = Journal::of_project(root);
        let tell = |drafts: Vec<Draft>| crate::events::emit(root, self.slug, drafts);
        let step = |state: State| {
            let now = Utc::now();
            let bead = msg.bead.as_str();
            if let Err(e) = journal.update_status(now, |s| s.step(bead, state, now)) {
                tracing::warn!("cannot update status.json: {e:#}");
            }
        };
        let cfg = match config::load(root) {
            Ok(c) => c,
            Err(e) => return self.pause(root, &msg.bead, None, &format!("{e:#}"), &tell),
        };
        let plan = Plan::parse(&std::fs::read_to_string(crate::tracker::claw::plan_file(
            root,
        ))?);
        let task = plan
            .find(&msg.bead)
            .ok_or_else(|| anyhow!("task {} is not in .claw/WORKPLAN.md", msg.bead))?
            .clone();
        let state = loopstate::load(root);
        let label = format!("project:{}:{}", self.slug, msg.bead);
        tell(vec![Draft::new(Kind::TaskStarted)
            .bead(&msg.bead)
            .with("task", &task.title)
            .with("session", &label)
            .with("phase", plan.phases.get(task.phase))]);

        // What differs from HEAD before the coder runs is a person's (or an earlier failed
        // attempt's): the task's commit takes only what changes from here.
        let before = match root.join(".git").exists() {
            true => Some(crate::git::dirty(root)?),
            false => None,
        };
        let mut failure: Option<String> = None;
        let mut passed = false;
        let mut said: Option<ClawStatus> = None;
        let mut counted = None;
        for attempt in 0..=cfg.retries {
            step(State::ContextPrep);
            let p = packet::gather(
                root,
                &plan,
                &task,
                state.note.clone(),
                failure.clone(),
                &cfg.validation,
            );
            let prompt = root.join(".claw/context/current.md");
            crate::system::atomic::write(&prompt, packet::render(&p).as_bytes())?;
            if left().is_zero() {
                let why = "the turn ran out of time before the coder could run".to_string();
                return self.no_progress(root, &msg.bead, &task.title, &cfg, why, &tell);
            }
            step(State::Coding);
            let result_file = root.join(".claw/context/result");
            let _ = std::fs::remove_file(&result_file);
            let res = self.executor.run(&ExecRequest {
                project: root.clone(),
                workspace: root.clone(),
                bead: msg.bead.clone(),
                prompt_file: prompt,
                deliverable: root.join(".claw/context/deliverable.md"),
                result_file: result_file.clone(),
                timeout: left(),
                activity: self.activity.clone(),
                role: None,
            })?;
            let result_text = std::fs::read_to_string(&result_file).ok();
            // The coder's CLAW_STATUS block: in the result file, else its last message, else
            // the end of what it printed.
            said = [
                result_text.as_deref(),
                res.agent.as_ref().and_then(|a| a.final_text.as_deref()),
                Some(res.tail.as_str()),
            ]
            .into_iter()
            .flatten()
            .find_map(status_block::parse);
            for w in said.iter().flat_map(|s| &s.warnings) {
                tracing::warn!(bead = %msg.bead, "{w}");
            }
            let report = match said {
                Some(_) => None,
                None => result_text
                    .as_deref()
                    .and_then(crate::worker::report::parse_executor_result),
            };
            let asked = said
                .as_ref()
                .and_then(ClawStatus::question_text)
                .or_else(|| {
                    report.as_ref().filter(|r| r.needs_human()).map(|r| {
                        r.summary
                            .clone()
                            .unwrap_or_else(|| "the coder needs a person".into())
                    })
                });
            if let Some(q) = asked {
                tell(vec![Draft::new(Kind::Question)
                    .bead(&msg.bead)
                    .with("message", &q)]);
                return self.pause(
                    root,
                    &msg.bead,
                    Some(&task.title),
                    &format!("the coder asked: {q}"),
                    &tell,
                );
            }
            if res.code != Some(0) || res.timed_out {
                let why = match res.timed_out {
                    true => "the coder ran out of the turn's time".to_string(),
                    false => format!("the coder {}", crate::system::proc::exit_text(res.code)),
                };
                return self.no_progress(root, &msg.bead, &task.title, &cfg, why, &tell);
            }
            if let Some(s) = said.as_ref().filter(|s| s.status == Some(Said::Failed)) {
                // Checks that pass over unfinished work would check the task off.
                let why = format!(
                    "the coder reported it failed: {}",
                    s.summary.as_deref().unwrap_or("no summary")
                );
                return self.no_progress(root, &msg.bead, &task.title, &cfg, why, &tell);
            }
            step(State::Validation);
            let (outcome, counts) = validate(
                root,
                &cfg.validation,
                cfg.timeout.min(left()),
                &self.activity,
            );
            match outcome {
                Ok(()) => {
                    tell(vec![turn_events::validation_pass(
                        &task.title,
                        attempt + 1,
                        counts.as_ref(),
                    )
                    .bead(&msg.bead)]);
                    counted = counts;
                    passed = true;
                    break;
                }
                Err(out) => {
                    tell(vec![turn_events::validation_failed(
                        &task.title,
                        attempt + 1,
                        &out,
                        counts.as_ref(),
                    )
                    .bead(&msg.bead)]);
                    failure = Some(out);
                }
            }
        }
        if !passed {
            self.tracker
                .reopen(&msg.bead, "claw: validation failed; the loop is paused")?;
            issue(root, &task.title, failure.as_deref().unwrap_or(""))?;
            // Read again: a `braids resume --note` may have come meanwhile.
            let (next, told) = loopstate::load(root).after(
                &task.title,
                &RunEnd::ValidationFailed {
                    output: failure.unwrap_or_default(),
                },
                cfg.stuck_after,
                Utc::now(),
            );
            loopstate::store(root, &next)?;
            tell(told.into_iter().map(|d| d.bead(&msg.bead)).collect());
            return Ok(TurnEnd::ValidationFailed);
        }

        step(State::Commit);
        self.tracker.close(&msg.bead, "claw: validated")?;
        let lock = crate::git::RepoLock::acquire(root)?;
        let mut committed = Vec::new();
        let commit = match &before {
            Some(before) => {
                let message = format!(
                    "{} ({})",
                    crate::system::templates::clip(&task.title, 72),
                    msg.bead
                );
                committed = changed_since(before, &crate::git::dirty(root)?);
                crate::git::commit_paths(root, &committed, &message)?.map(|o| o.to_string())
            }
            None => None,
        };
        // The commit went onto the checked-out branch: that is the one pushed.
        let branch = crate::git::checked_out(root).filter(|b| crate::git::has_upstream(root, b));
        if let Some(branch) = branch {
            let failed = match crate::git::push_recorded(root, &branch, Duration::from_secs(120)) {
                Ok(p) => p.kept.iter().map(|k| format!("not pushed: {k}")).collect(),
                Err(e) => vec![format!("{e:#}")],
            };
            tell(
                failed
                    .into_iter()
                    .map(|m| {
                        Draft::new(Kind::PushFailed)
                            .bead(&msg.bead)
                            .with("message", m)
                    })
                    .collect(),
            );
        }
        drop(lock);
        let remaining = Plan::parse(&std::fs::read_to_string(crate::tracker::claw::plan_file(
            root,
        ))?)
        .tasks
        .iter()
        .filter(|t| t.status != crate::model::BeadStatus::Closed)
        .count();
        let (next, told) = loopstate::load(root).after(
            &task.title,
            &RunEnd::Done { left: remaining },
            cfg.stuck_after,
            Utc::now(),
        );
        loopstate::store(root, &next)?;
        if before.is_none() {
            // No repository to tell what changed: the coder's own list is all there is.
            committed = said
                .iter()
                .flat_map(|s| &s.files_changed)
                .map(PathBuf::from)
                .collect();
        }
        let mut all = vec![turn_events::task_complete(
            &task.title,
            started.elapsed().as_secs(),
            commit.as_deref(),
            &committed,
            counted.as_ref(),
            said.as_ref(),
        )
        .bead(&msg.bead)];
        all.extend(told);
        tell(all);
        Ok(TurnEnd::Completed {
            commit,
            left: remaining,
        })
    }

    fn no_progress(
        &self,
        root: &Path,
        bead: &BeadId,
        task: &str,
        cfg: &config::ClawConfig,
        why: String,
        tell: &dyn Fn(Vec<Draft>),
    ) -> Result<TurnEnd> {
        self.tracker.reopen(bead, &format!("claw: {why}"))?;
        let (next, told) = loopstate::load(root).after(
            task,
            &RunEnd::NoProgress { why: why.clone() },
            cfg.stuck_after,
            Utc::now(),
        );
        loopstate::store(root, &next)?;
        let mut all = vec![Draft::new(Kind::Error)
            .bead(bead)
            .with("task", task)
            .with("message", &why)];
        all.extend(told.into_iter().map(|d| d.bead(bead)));
        tell(all);
        Ok(TurnEnd::NoProgress { why })
    }

    /// Pauses the loop for a person, the task open again.
    fn pause(
        &self,
        root: &Path,
        bead: &BeadId,
        task: Option<&str>,
        why: &str,
        tell: &dyn Fn(Vec<Draft>),
    ) -> Result<TurnEnd> {
        self.tracker.reopen(bead, &format!("claw: {why}"))?;
        let mut s = loopstate::load(root);
        s.paused = Some(loopstate::Paused {
            reason: why.to_string(),
            task: task.map(str::to_string),
            since: Utc::now(),
        });
        loopstate::store(root, &s)?;
        issue(root, task.unwrap_or("(no task)"), why)?;
        tell(vec![Draft::new(Kind::LoopPaused)
            .bead(bead)
            .with("task", task)
            .with("reason", why)]);
        Ok(TurnEnd::Paused {
            why: why.to_string(),
        })
    }
}

/// What the turn changed: paths dirty now that were clean before or changed since, and the
/// plan (its check-off), never braids' own generated files.
pub fn changed_since(
    before: &std::collections::BTreeMap<PathBuf, crate::git::Stamp>,
    after: &std::collections::BTreeMap<PathBuf, crate::git::Stamp>,
) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = after
        .iter()
        .filter(|(p, stamp)| before.get(*p) != Some(*stamp))
        .map(|(p, _)| p.clone())
        .filter(|p| !crate::events::generated(p))
        .collect();
    let plan = PathBuf::from(".claw/WORKPLAN.md");
    if !out.contains(&plan) {
        out.push(plan);
    }
    out
}

/// Runs the checks in order in the project; the first failure's output (its last 60 lines,
/// each clipped), which goes into the next packet, the event and ISSUES.md; and the tests
/// counted from the output of the checks that ran, where they are test runners.
fn validate(
    root: &Path,
    checks: &[Vec<String>],
    timeout: Duration,
    activity: &Path,
) -> (Result<(), String>, Option<crate::testrun::Counts>) {
    let mut counts = Vec::new();
    let outcome = run_checks(root, checks, timeout, activity, &mut counts);
    (outcome, turn_events::sum(&counts))
}

fn run_checks(
    root: &Path,
    checks: &[Vec<String>],
    timeout: Duration,
    activity: &Path,
    counts: &mut Vec<Option<crate::testrun::Counts>>,
) -> Result<(), String> {
    for argv in checks {
        if timeout.is_zero() {
            return Err("the turn ran out of time before the checks could run".into());
        }
        // Each check counts as activity, so a quiet test suite is not stopped as stalled.
        let _ = crate::worker::executor::tee::touch(activity);
        let out = crate::system::proc::Invocation::new(argv)
            .cwd(root)
            .timeout(timeout)
            .run()
            .map_err(|e| format!("`{}` could not run: {e}", packet::shown(argv)))?;
        let text = format!("{}{}", out.stdout, out.stderr);
        counts.push(crate::testrun::parse(&text, None));
        if !out.success() {
            let tail: Vec<String> = text.lines().rev().take(60).map(clip_line).collect();
            let tail: Vec<String> = tail.into_iter().rev().collect();
            return Err(format!(
                "`{}` {}:\n{}",
                packet::shown(argv),
                out.status_text(),
                tail.join("\n")
            ));
        }
    }
    Ok(())
}

/// One line of a check's output, at most 300 characters, control characters dropped.
fn clip_line(l: &str) -> String {
    let clean: String = l
        .chars()
        .filter(|c| !c.is_control() || *c == '\t')
        .collect();
    match clean.char_indices().nth(300) {
        Some((at, _)) => format!("{}…", &clean[..at]),
        None => clean,
    }
}

/// Appends an entry to `.claw/ISSUES.md` (created with a heading when missing).
fn issue(root: &Path, task: &str, what: &str) -> Result<()> {
    let path = root.join(".claw/ISSUES.md");
    let mut text = crate::system::beneath::read_within(root, &path).unwrap_or_else(|_| "# Issues\n\nProblems the claw loop stopped on, newest last. `braids resume <project> [--note \"…\"]` goes on.\n".into());
    text.push_str(&format!(
        "\n## {} — {}\n\n```\n{}\n```\n",
        Utc::now().format("%Y-%m-%d %H:%M UTC"),
        task,
        what.trim_end()
    ));
    crate::system::beneath::write_within(root, &path, text.as_bytes())
}
