//! `braids worker`: one bead, start to finish, every fixed step done by braids in the fixed
//! order (CONTRACTS 3.1–3.11, 4.4–4.6). The agent does the work that needs understanding;
//! braids claims, checks dependencies, verifies the deliverable, closes, commits, pushes,
//! completes the iteration and notifies — and logs each step with the bead id, so the session
//! log says exactly what happened and why it stopped.
//!
//! [`Worker::run`] is the pipeline; each phase has its own file: `context.rs` (what is read
//! before work, the prompt), `claim.rs` (the gates: frozen iteration, claim, dependencies,
//! ask-first), `execute.rs` (the agent's attempts), `finish.rs` (close, commit, iteration,
//! push) and `escalate.rs` (a blocked bead and a person told, when it cannot be finished).
//!
//! The order of the success path is fixed: work → deliverable verified → close → commit
//! (3.4–3.6) → iteration check (3.7) → push (4.4) → notifications. From the close to the push
//! the worker holds the repository's commit lock, which every worker of the repository takes
//! to commit or push, and a termination signal waits until the fixed steps are done.

pub mod ask;
mod bead;
mod claim;
pub mod claw;
mod context;
mod escalate;
pub mod executor;
mod protocol;
pub use protocol::{apply_by_hand, dispatch_one, Applied};
pub mod report;
mod review;
mod task_events;

use std::time::Instant;

use executor::stop;

use anyhow::{anyhow, Result};
use serde::Serialize;

use crate::config::Config;
use crate::model::{Autonomy, BeadId, NotificationEvent, SpawnMessage};
use crate::notifier::{self, Notifier};
use crate::system::paths::Paths;
use crate::tracker::Tracker;
use crate::workspace::{GitWorktrees, Workspace, WorkspaceMode, Workspaces};

use context::Loaded;

pub use bead::attempt::executor_for;
pub use context::slug_for;
pub use executor::preset::PresetExecutor;
pub use executor::{work_dir, ArgvExecutor, ExecRequest, ExecResult, Executor};

/// How a worker run ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "ending", rename_all = "kebab-case")]
pub enum Ending {
    /// Closed, committed, pushed when possible.
    Completed {
        commit: Option<String>,
        pushed: Option<bool>,
        iteration_completed: bool,
    },
    /// In review, in_progress with no worker: its work is a pull request (`number` 0 until
    /// the forge opens it), `opened` by this run or earlier.
    InReview {
        number: u64,
        url: String,
        opened_now: bool,
    },
    /// Someone else holds the bead (3.2); nothing was done.
    ClaimRefused,
    /// Direct dependencies are open (3.3): the bead is blocked.
    DependenciesOpen { open: Vec<BeadId> },
    /// The agent asked a question (needs_human / needs_clarification): blocked until answered.
    AwaitingHuman,
    /// ask-first autonomy: the plan was posted; blocked until a person unblocks it (3.11).
    AwaitingApproval,
    /// The attempt failed: the bead is open again and may be spawned from `not_before`.
    Retrying {
        not_before: chrono::DateTime<chrono::Utc>,
        failures: u32,
        /// What failed: the exit code, a timeout, a stall, a rate limit, a refusal.
        cause: String,
    },
    /// Retries exhausted: blocked with a partial deliverable (3.10).
    Blocked { reason: String },
    /// The work cannot land without a person: the bead is blocked and the work kept on the
    /// branch `kept` (`braids approve` lands it, `braids reject` drops it).
    Held {
        reason: String,
        kept: String,
        commit: String,
    },
    /// The iteration is complete and may not be modified (4.5).
    IterationFrozen,
    /// A protocol story's next step waits for the tick (a team step's slots, or time): the
    /// bead is open again and its story kept.
    HandedBack { why: String },
    /// An error after the claim (the tracker, git, the disk): the bead was blocked if it still
    /// could be, and a blocker notification says what happened (3.10).
    Failed {
        error: String,
        /// The reason the bead was blocked with, when it could be.
        blocked: Option<String>,
    },
}

/// One step, in the order it happened; tests read this to check the contract order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Step {
    pub name: &'static str,
    pub detail: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct WorkerRun {
    pub bead: BeadId,
    pub ending: Ending,
    pub steps: Vec<Step>,
}

/// The worker's edges.
pub struct Worker<'a> {
    pub paths: &'a Paths,
    pub config: &'a Config,
    pub tracker: &'a dyn Tracker,
    pub notifier: &'a dyn Notifier,
    pub executor: &'a dyn Executor,
}

/// One run in progress: the steps so far, shared by every phase.
struct Run<'w, 'a> {
    w: &'w Worker<'a>,
    msg: &'w SpawnMessage,
    steps: Vec<Step>,
    /// Set once the agent is done: termination waits until the fixed steps are (see [`stop`]).
    hold: Option<stop::Hold>,
    /// The bead's own worktree while it exists; cleaned up when the run ends, however it ends.
    ws: Option<Workspace>,
    /// Set once `task_started` is written: from then on steps move the task in status.json.
    started: bool,
    /// At most this many protocol steps this run (`braids story dispatch`: one); no limit for
    /// a worker the tick started.
    limit: Option<u32>,
}

impl Run<'_, '_> {
    fn step(&mut self, name: &'static str, detail: impl Into<String>) {
        let detail = detail.into();
        tracing::info!(bead = %self.msg.bead, step = name, "{detail}");
        self.steps.push(Step { name, detail });
        if let Some(state) = task_events::state_of(name).filter(|_| self.started) {
            let journal = crate::events::Journal::of_project(&self.msg.project);
            let now = chrono::Utc::now();
            let bead = self.msg.bead.as_str();
            if let Err(e) = journal.update_status(now, |s| s.step(bead, state, now)) {
                tracing::warn!(bead = %self.msg.bead, "cannot update status.json: {e:#}");
            }
        }
    }

    /// Tells the supervisor's stream the task started (and status.json that it is coding).
    fn started(&mut self, l: &Loaded, title: &str) {
        let label = format!("project:{}:{}", l.slug, self.msg.bead);
        let draft = crate::events::Draft::new(crate::events::Kind::TaskStarted)
            .bead(&self.msg.bead)
            .with("task", title)
            .with("session", label)
            .with("iteration", self.msg.iteration.to_string());
        crate::events::emit(&self.msg.project, &l.slug, vec![draft]);
        self.started = true;
    }

    fn notify(&mut self, l: &Loaded, event: NotificationEvent, text: &str) {
        let delivery = notifier::deliver(
            self.w.notifier,
            &l.project,
            &l.slug,
            event,
            Some(&self.msg.bead),
            text,
        );
        self.step("notify", format!("{event}: {delivery}"));
    }
}

impl Worker<'_> {
    /// Runs one bead. `Err` only for problems before the claim (an unreadable iteration, a
    /// tracker that cannot be asked); after the claim every failure ends in a blocked bead and a
    /// blocker notification, never a silently stranded one.
    pub fn run(&self, msg: &SpawnMessage) -> Result<WorkerRun> {
        self.run_steps(msg, None)
    }

    /// [`Worker::run`], running at most `limit` protocol steps (Level 1: a person dispatches
    /// one step at a time); the story is then handed back, its bead open.
    pub fn run_steps(&self, msg: &SpawnMessage, limit: Option<u32>) -> Result<WorkerRun> {
        let started = Instant::now();
        let mut run = Run {
            w: self,
            msg,
            steps: Vec::new(),
            hold: None,
            ws: None,
            started: false,
            limit,
        };
        let l = context::load(self.paths, msg, &mut run)?;
        // A bead in review is braids' already: its pull request is acted on, not claimed.
        let review = crate::review_records::load(self.paths, &l.slug, &msg.bead)?;
        let ending = if let Some(rec) = review {
            self.review(&mut run, &l, rec, started)
                .unwrap_or_else(|e| self.ended_by_error(&mut run, &l, &e))
        } else {
            match self.claim(&mut run, &l)? {
                Some(stop) => stop,
                None => {
                    crate::crash_point!("worker::after_claim");
                    self.work(&mut run, &l, started)
                        .unwrap_or_else(|e| self.ended_by_error(&mut run, &l, &e))
                }
            }
        };
        self.close_workspace(&mut run, &l, matches!(ending, Ending::Held { .. }));
        self.commit_tracker(&mut run, &ending);
        let told = task_events::ending(
            &ending,
            msg.bead.as_str(),
            &msg.iteration.to_string(),
            &run.steps,
            started.elapsed().as_secs(),
        );
        crate::events::emit(&msg.project, &l.slug, told);
        Ok(WorkerRun {
            bead: msg.bead.clone(),
            ending,
            steps: run.steps,
        })
    }

    /// Everything after the claim, in the contract's order.
    fn work(&self, run: &mut Run<'_, '_>, l: &Loaded, started: Instant) -> Result<Ending> {
        let bead_id = &run.msg.bead;
        let bead = self
            .tracker
            .show(bead_id)?
            .ok_or_else(|| anyhow!("bead {bead_id} disappeared after the claim"))?;
        let protocol =
            crate::protocol::Pipeline::of(&l.project) == crate::protocol::Pipeline::Protocol;
        if protocol {
            // A story waits for its dependencies with no slot and no person (CONTRACTS 10.10).
            if let Some(stop) = self.story_dependencies(run, l, &bead)? {
                return Ok(stop);
            }
        } else if let Some(stop) = self.check_dependencies(run, l, &bead)? {
            return Ok(stop);
        }
        let expected = l.deliverable_for(&bead);
        // A story is approved once, before its first step: its later sessions (after a review,
        // a question, a hand-back) go on under that approval. A state with no step dispatched
        // yet (written while the story waited for its dependencies) is not a start.
        let story_started = protocol
            && match crate::protocol::story_state::load(&run.msg.project, bead_id) {
                crate::protocol::story_state::Loaded::Valid(s) => {
                    s.dispatched_at.is_some() || s.completed_at.is_some() || s.attempt > 1
                }
                crate::protocol::story_state::Loaded::Invalid(_) => true,
                crate::protocol::story_state::Loaded::Missing => false,
            };
        if l.project.autonomy == Autonomy::AskFirst
            && !story_started
            && !self.approved(run, l, &bead, &expected)?
        {
            return Ok(Ending::AwaitingApproval);
        }
        if protocol {
            return self.protocol(run, l, &bead, started);
        }
        self.bead(run, l, &bead, &expected, started)
    }

    /// Where workspaces live: outside every project (see [`crate::workspace`]).
    fn workspaces(&self, l: &Loaded) -> GitWorktrees {
        self.config.workspaces(self.paths, Some(&l.project))
    }

    /// The bead's own worktree (the default), or the project itself for `Workspace: shared`
    /// and for a project that is not a git repository.
    fn open_workspace(
        &self,
        run: &mut Run<'_, '_>,
        l: &Loaded,
    ) -> Result<(Workspace, crate::workspace::Readiness)> {
        self.open_workspace_at(run, l, None)
    }

    /// [`Worker::open_workspace`], a worktree's branch at `at` when given.
    fn open_workspace_at(
        &self,
        run: &mut Run<'_, '_>,
        l: &Loaded,
        at: Option<&str>,
    ) -> Result<(Workspace, crate::workspace::Readiness)> {
        let root = &run.msg.project;
        if WorkspaceMode::of(&l.project) == WorkspaceMode::Shared {
            run.step(
                "workspace",
                "shared: the agent works in the project's own work tree",
            );
            return Ok((Workspace::shared(root), Default::default()));
        }
        if !root.join(".git").exists() {
            run.step("workspace", "shared: the project is not a git repository");
            return Ok((Workspace::shared(root), Default::default()));
        }
        let wss = self.workspaces(l);
        let ws = match at {
            Some(commit) => wss.create_at(root, &run.msg.bead, commit)?,
            None => wss.create(root, &run.msg.bead)?,
        };
        run.ws = Some(ws.clone());
        let ready = wss.make_ready(&ws)?;
        run.step(
            "workspace",
            format!(
                "{} worktree {} on branch {} (id {}){}",
                if ready.reused { "pooled" } else { "new" },
                ws.dir.display(),
                ws.branch.as_deref().unwrap_or("-"),
                crate::workspace::workspace_id(&ws.dir),
                match ready.copied.len() {
                    0 => String::new(),
                    n => format!(
                        "; {n} file(s) copied in: {}",
                        clip(&ready.copied.join(", "), 200)
                    ),
                }
            ),
        );
        for w in &ready.warnings {
            tracing::warn!(bead = %run.msg.bead, "{w}");
            run.step("workspace", w.clone());
        }
        if let Some(setup) = &ready.setup {
            if !setup.ok {
                tracing::warn!(bead = %run.msg.bead, "the project's setup command failed ({})", setup.ended);
            }
            run.step(
                "setup",
                format!(
                    "{} {} ({}) in {:.1}s{}",
                    wss.pooling.setup.join(" "),
                    if setup.ok { "passed" } else { "failed" },
                    setup.ended,
                    setup.took.as_secs_f64(),
                    match setup.output.trim() {
                        "" => String::new(),
                        out => format!(":\n{out}"),
                    }
                ),
            );
        }
        Ok((ws, ready))
    }

    /// Removes the bead's worktree at the end of the run. Work that did not land is kept on a
    /// branch for a person first, so nothing the agent did is lost.
    /// A worktree whose work was `held` for a person (it changed what only a person may) is
    /// removed, never pooled: its caches are not handed to another bead.
    fn close_workspace(&self, run: &mut Run<'_, '_>, l: &Loaded, held: bool) {
        let Some(ws) = run.ws.take() else {
            return;
        };
        let wss = self.workspaces(l);
        match wss.keep(&ws, &run.msg.bead) {
            Ok(Some(kept)) => run.step("workspace", format!("unlanded work kept on branch {kept}")),
            Ok(None) => {}
            Err(e) => run.step("workspace", format!("could not keep the work: {e:#}")),
        }
        if held {
            match wss.remove(&ws) {
                Ok(()) => run.step("workspace", "worktree of held work removed, not pooled"),
                Err(e) => run.step(
                    "workspace",
                    format!("worktree not removed (the next tick retries): {e:#}"),
                ),
            }
            return;
        }
        retire(run, &wss, &ws);
    }

    /// After a landing: the worktree goes back to the pool or is removed, with its branch;
    /// nothing is left to keep.
    fn drop_workspace(&self, run: &mut Run<'_, '_>, l: &Loaded) {
        if let Some(ws) = run.ws.take() {
            retire(run, &self.workspaces(l), &ws);
        }
    }
}

/// Ends the run's worktree (see [`crate::workspace::Workspaces::retire`]) and says how.
fn retire(run: &mut Run<'_, '_>, wss: &GitWorktrees, ws: &Workspace) {
    use crate::workspace::Retired;
    let said = match wss.retire(ws) {
        Ok(Retired::Pooled) => "worktree scrubbed and back in the pool".to_string(),
        Ok(Retired::Removed { why: None }) => "worktree removed".to_string(),
        Ok(Retired::Removed { why: Some(why) }) => format!("worktree removed, not pooled: {why}"),
        Err(e) => format!("worktree not removed (the next tick retries): {e:#}"),
    };
    run.step("workspace", said);
}

fn list(ids: &[BeadId]) -> String {
    ids.iter()
        .map(|d| d.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The first non-blank line, at most 72 characters.
fn first_line(s: &str) -> String {
    clip(s.lines().find(|l| !l.trim().is_empty()).unwrap_or(""), 72)
}

pub use crate::system::templates::clip;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_line_and_clip() {
        assert_eq!(first_line("\n\n  Did  it.\nmore"), "Did it.");
        assert_eq!(first_line(&"x".repeat(80)), format!("{}…", "x".repeat(72)));
        assert_eq!(
            clip("git push failed:\n  remote: no", 200),
            "git push failed: remote: no"
        );
    }
}
