//! `braids worker`: one bead, start to finish, every fixed step done by braids in the fixed
//! order (CONTRACTS 3.1–3.11, 4.4–4.6). The agent does the work that needs understanding;
//! braids claims, checks dependencies, verifies the deliverable, closes, commits, pushes,
//! completes the iteration and notifies — and logs each step with the bead id, so the session
//! log says exactly what happened and why it stopped.
//!
//! The order of the success path is fixed: work → deliverable verified → close → commit
//! (3.4–3.6) → iteration check (3.7) → push (4.4) → notifications. From the close to the push
//! the worker holds the repository's commit lock, which every worker of the repository takes
//! to commit or push, and a termination signal waits until the fixed steps are done.

mod exec;
pub mod report;
mod stop;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use serde::Serialize;

use crate::config::Config;
use crate::format::{self, deliverable, iteration::Iteration, project::ProjectConfig};
use crate::lock::TickLock;
use crate::model::{
    Autonomy, Bead, BeadId, BeadStatus, IterationStatus, NotificationEvent, SpawnMessage,
};
use crate::notify::{self, Notifier};
use crate::paths::Paths;
use crate::tracker::{ClaimOutcome, Tracker};

pub use exec::{work_dir, ArgvExecutor, ExecRequest, ExecResult, Executor};
use report::StatusReport;

/// How long a worker waits for another worker of the same repository to finish committing and
/// pushing.
const REPO_LOCK_WAIT: Duration = Duration::from_secs(600);
const PUSH_TIMEOUT: Duration = Duration::from_secs(120);
/// Where trackers keep bead state inside a project: it travels with every commit the worker
/// makes, so git carries the bead's closure with its work (4.4).
const TRACKER_FILES: [&str; 2] = [".beads", ".braids/WORKPLAN.md"];

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
    /// Someone else holds the bead (3.2); nothing was done.
    ClaimRefused,
    /// Direct dependencies are open (3.3): the bead is blocked.
    DependenciesOpen { open: Vec<BeadId> },
    /// The agent asked a question (needs_human / needs_clarification): blocked until answered.
    AwaitingHuman,
    /// ask-first autonomy: the plan was posted; blocked until a person unblocks it (3.11).
    AwaitingApproval,
    /// Retries exhausted: blocked with a partial deliverable (3.10).
    Blocked { reason: String },
    /// The iteration is complete and may not be modified (4.5).
    IterationFrozen,
    /// An error after the claim (the tracker, git, the disk): the bead was blocked if it still
    /// could be, and a blocker notification says what happened (3.10).
    Failed { error: String },
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

/// Everything loaded before work (3.1).
struct Loaded {
    slug: String,
    project: ProjectConfig,
    iteration: Iteration,
    context: Vec<(PathBuf, String)>,
}

struct Run<'w, 'a> {
    w: &'w Worker<'a>,
    msg: &'w SpawnMessage,
    steps: Vec<Step>,
    /// Set once the agent is done: termination waits until the fixed steps are (see [`stop`]).
    hold: Option<stop::Hold>,
}

impl Run<'_, '_> {
    fn step(&mut self, name: &'static str, detail: impl Into<String>) {
        let detail = detail.into();
        tracing::info!(bead = %self.msg.bead, step = name, "{detail}");
        self.steps.push(Step { name, detail });
    }

    fn notify(&mut self, l: &Loaded, event: NotificationEvent, text: &str) {
        let delivery = notify::deliver(
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

/// The slug of the project at `root`, from the registry; the directory name otherwise.
fn slug_for(paths: &Paths, root: &Path) -> String {
    let reg = format::registry::read_registry(paths).value;
    reg.entries
        .iter()
        .find(|e| crate::paths::normalize(&e.path) == crate::paths::normalize(root))
        .map(|e| e.slug.clone())
        .unwrap_or_else(|| {
            root.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        })
}

/// Reads the context in the order of 3.1, skipping what is missing (3.9).
fn load(paths: &Paths, msg: &SpawnMessage, run: &mut Run<'_, '_>) -> Result<Loaded> {
    let root = &msg.project;
    let project_md = root.join(".braids/PROJECT.md");
    let iterations = format::iteration::read_iterations(root).value;
    let iteration = iterations
        .into_iter()
        .find(|i| i.number == msg.iteration)
        .ok_or_else(|| {
            anyhow!(
                "iteration {} of {} does not exist (no ITERATION.md)",
                msg.iteration,
                root.display()
            )
        })?;
    let order = [
        project_md.clone(),
        paths.workspace_agents(),
        root.join("AGENTS.md"),
        iteration.dir.join("ITERATION.md"),
    ];
    let mut context = Vec::new();
    for p in order {
        match std::fs::read(&p) {
            Ok(b) => {
                run.step("context", format!("read {}", p.display()));
                context.push((p, format::decode(&b).into_owned()));
            }
            Err(_) => run.step("context", format!("skipped {} (missing)", p.display())),
        }
    }
    let project = context
        .iter()
        .find(|(p, _)| *p == project_md)
        .map(|(p, t)| format::project::parse_project(t, p).value)
        .unwrap_or_default();
    Ok(Loaded {
        slug: slug_for(paths, root),
        project,
        iteration,
        context,
    })
}

fn autonomy_rules(a: Autonomy) -> &'static str {
    match a {
        Autonomy::Full => "You may change code, tests and docs as the bead requires.",
        Autonomy::ResearchOnly => "Research only: gather information and write it up in the deliverable. Do not change any other file; braids commits only the deliverable.",
        Autonomy::AskFirst => "A person approved this plan. Carry it out as described.",
    }
}

fn prompt(l: &Loaded, bead: &Bead, msg: &SpawnMessage, deliverable: &Path) -> String {
    let context: String = l
        .context
        .iter()
        .map(|(p, t)| format!("## {}\n\n{}\n\n", p.display(), t.trim_end()))
        .collect();
    let it = msg.iteration.to_string();
    let path = msg.project.to_string_lossy();
    let dl = deliverable.to_string_lossy();
    crate::templates::render(
        crate::templates::PROMPT,
        &[
            ("bead", bead.id.as_str()),
            ("project_name", l.project.name.as_deref().unwrap_or(&l.slug)),
            ("iteration", &it),
            ("bead_title", &bead.title),
            (
                "bead_description",
                if bead.description.trim().is_empty() {
                    "(no description)"
                } else {
                    &bead.description
                },
            ),
            ("autonomy", l.project.autonomy.as_str()),
            ("autonomy_rules", autonomy_rules(l.project.autonomy)),
            ("context", &context),
            ("project_path", &path),
            ("deliverable", &dl),
            ("result_file", &report::own_file(&bead.id).to_string_lossy()),
        ],
    )
}

/// The argv the agent runs: the project's `Executor` field, else config.toml's.
fn executor_template(config: &Config, project: &ProjectConfig) -> Vec<String> {
    project
        .field("executor")
        .and_then(|f| shlex::split(&f.value))
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| config.worker.executor.clone())
}

/// The executor a worker uses for a project.
pub fn executor_for(config: &Config, project: &ProjectConfig) -> ArgvExecutor {
    ArgvExecutor {
        template: executor_template(config, project),
        grace: Duration::from_secs(config.sessions.kill_grace_secs),
    }
}

/// Marker that an ask-first plan was posted; its presence on a later run means a person
/// unblocked the bead, which is the approval (3.11).
fn approval_marker(paths: &Paths, slug: &str, bead: &BeadId) -> PathBuf {
    work_dir(&paths.braids_dir, slug, bead).join("asked")
}

impl Worker<'_> {
    /// Runs one bead. `Err` only for problems before the claim (an unreadable iteration, a
    /// tracker that cannot be asked); after the claim every failure ends in a blocked bead and a
    /// blocker notification, never a silently stranded one.
    pub fn run(&self, msg: &SpawnMessage) -> Result<WorkerRun> {
        let started = Instant::now();
        let mut run = Run {
            w: self,
            msg,
            steps: Vec::new(),
            hold: None,
        };
        let l = load(self.paths, msg, &mut run)?;
        let ending = match self.claim(&mut run, &l)? {
            Some(stop) => stop,
            None => self
                .work(&mut run, &l, started)
                .unwrap_or_else(|e| self.fail(&mut run, &l, &e)),
        };
        Ok(WorkerRun {
            bead: msg.bead.clone(),
            ending,
            steps: run.steps,
        })
    }

    /// 4.5, then 3.2: `Some(ending)` when the worker must stop before doing anything.
    fn claim(&self, run: &mut Run<'_, '_>, l: &Loaded) -> Result<Option<Ending>> {
        let bead_id = &run.msg.bead;
        // 4.5: never write into a completed iteration.
        if l.iteration.status == Some(IterationStatus::Complete) {
            run.step(
                "refuse",
                format!(
                    "iteration {} is complete; completed iterations are never modified",
                    l.iteration.number
                ),
            );
            return Ok(Some(Ending::IterationFrozen));
        }
        // 3.2: claim before any work; a refusal stops at once.
        let actor = &self.config.tracker.actor;
        let (status, holder) = match self.tracker.claim(bead_id, actor)? {
            ClaimOutcome::Claimed => {
                run.step("claim", "claimed");
                return Ok(None);
            }
            ClaimOutcome::Refused { status, holder } => (status, holder),
        };
        let mut why = format!(
            "refused: bead is {status}, held by {}",
            holder.as_deref().unwrap_or("nobody")
        );
        // br refuses to claim an open bead whose blockers are open: say which. The bead is left
        // as it is: without the claim it is not ours to block (4.6).
        if status == BeadStatus::Open && holder.as_deref().is_none_or(|h| h == actor.as_str()) {
            let bead = self.tracker.show(bead_id).ok().flatten();
            let open = bead.and_then(|b| self.open_dependencies(&b).ok());
            if let Some(open) = open.filter(|o| !o.is_empty()) {
                why.push_str(&format!("; open dependencies: {}", list(&open)));
            }
        }
        run.step("claim", why);
        Ok(Some(Ending::ClaimRefused))
    }

    /// The bead's direct dependencies that are not closed (3.3).
    fn open_dependencies(&self, bead: &Bead) -> Result<Vec<BeadId>> {
        let mut open = Vec::new();
        for dep in &bead.dependencies {
            let closed =
                matches!(self.tracker.show(dep)?, Some(d) if d.status == BeadStatus::Closed);
            if !closed {
                open.push(dep.clone());
            }
        }
        Ok(open)
    }

    /// Everything after the claim.
    fn work(&self, run: &mut Run<'_, '_>, l: &Loaded, started: Instant) -> Result<Ending> {
        let msg = run.msg;
        let bead_id = &msg.bead;
        let bead = self
            .tracker
            .show(bead_id)?
            .ok_or_else(|| anyhow!("bead {bead_id} disappeared after the claim"))?;

        // 3.3: direct dependencies must be closed.
        let open = self.open_dependencies(&bead)?;
        if !open.is_empty() {
            let list = list(&open);
            self.tracker
                .block(bead_id, &format!("open dependencies: {list}"))?;
            run.step("dependencies", format!("open: {list}; bead blocked"));
            run.notify(
                l,
                NotificationEvent::Blocker,
                &format!(
                    "[{}] {bead_id} is blocked: its dependencies {list} are not closed.",
                    l.slug
                ),
            );
            return Ok(Ending::DependenciesOpen { open });
        }
        run.step(
            "dependencies",
            format!(
                "{} direct dependencies, all closed",
                bead.dependencies.len()
            ),
        );

        let expected = l
            .iteration
            .dir
            .join(deliverable::file_name(bead_id, &bead.title));

        // 3.11: ask-first posts the plan and waits for a person.
        if l.project.autonomy == Autonomy::AskFirst && !self.approved(run, l, &bead, &expected)? {
            return Ok(Ending::AwaitingApproval);
        }

        run.notify(
            l,
            NotificationEvent::BeadStart,
            &format!("[{}] Started {bead_id}: {}", l.slug, bead.title),
        );

        // The work, retried once (3.10).
        let template = executor_template(self.config, &l.project);
        if template.is_empty() {
            let reason = "no executor is configured: set [worker] executor in config.toml";
            return self.give_up(run, l, &bead, &expected, None, reason, &[]);
        }
        let wd = work_dir(&self.paths.braids_dir, &l.slug, bead_id);
        let prompt_file = wd.join("prompt.md");
        crate::atomic::write(&prompt_file, prompt(l, &bead, msg, &expected).as_bytes())?;
        // A deliverable counts only if this run wrote it, not one left by an earlier run.
        let before = deliverables_now(&l.iteration.dir, bead_id);
        let timeout = Duration::from_secs(l.project.worker_timeout);
        let deadline = started + agent_budget(timeout);
        let attempts = 1 + self.config.worker.retries;
        let mut inbox = report::Inbox::new(&msg.project, bead_id, l.project.max_workers <= 1);
        let mut tried = Vec::new();
        let mut fresh = None;
        let mut success: Option<(StatusReport, PathBuf)> = None;
        for attempt in 1..=attempts {
            inbox.clear();
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                tried.push(format!(
                    "attempt {attempt}: not started, WorkerTimeout of {}s used up",
                    timeout.as_secs()
                ));
                break;
            }
            let req = ExecRequest {
                project: msg.project.clone(),
                bead: bead_id.clone(),
                prompt_file: prompt_file.clone(),
                deliverable: expected.clone(),
                result_file: msg.project.join(report::own_file(bead_id)),
                timeout: left,
            };
            let res = self.executor.run(&req);
            let report = inbox.take();
            fresh = find_deliverable(&l.iteration.dir, bead_id, &before);
            let verdict = judge(&res, report.as_ref(), fresh.as_ref());
            run.step(
                "execute",
                format!("attempt {attempt}/{attempts}: {verdict}"),
            );
            tried.push(format!("attempt {attempt}: {verdict}"));
            if let Some(r) = report.as_ref().filter(|r| r.needs_human()) {
                let question = r.summary.clone().unwrap_or_else(|| {
                    "the agent needs a person's answer (see the session log)".into()
                });
                self.tracker
                    .block(bead_id, &format!("question: {question}"))?;
                run.step(
                    "question",
                    format!("bead blocked until answered: {question}"),
                );
                run.notify(
                    l,
                    NotificationEvent::Question,
                    &format!("[{}] Question on {bead_id}: {question}", l.slug),
                );
                return Ok(Ending::AwaitingHuman);
            }
            if let (Some(r), Some(p), true) = (report, fresh.clone(), verdict.starts_with("pass")) {
                success = Some((r, p));
                break;
            }
        }
        run.hold = Some(stop::Hold::new());
        let Some((report, deliverable)) = success else {
            let why = "the executor did not succeed";
            return self.give_up(run, l, &bead, &expected, fresh.as_deref(), why, &tried);
        };
        run.step("deliverable", format!("verified {}", deliverable.display()));

        // 3.5: close only after the deliverable; 3.6: then commit; 3.7: then the iteration;
        // 4.4: then push. All of it under the repository lock: a bead a worker closed is then
        // committed by the time any other worker looks at the iteration, so the iteration is
        // completed (and frozen, 4.5) only after the last bead's own commit.
        let root = &msg.project;
        let lock = repo_lock(root)?;
        self.tracker
            .close(bead_id, report.summary.as_deref().unwrap_or("done"))?;
        run.step("close", "bead closed");
        let summary =
            deliverable::summary(&std::fs::read_to_string(&deliverable).unwrap_or_default())
                .or(report.summary.clone())
                .unwrap_or_else(|| bead.title.clone());
        let message = format!("{} ({bead_id})", first_line(&summary));
        let commit = self.commit(root, l, &report, &deliverable, &message)?;
        run.step(
            "commit",
            format!(
                "{} {message}",
                commit.as_deref().unwrap_or("(nothing to commit)")
            ),
        );
        let iteration_completed = self.complete_iteration_if_done(run, l)?;
        let pushed = push(run, root);
        drop(lock);

        let unpushed = match &pushed {
            Push::Failed(e) => format!(" Committed, but not pushed: {}", clip(e, 200)),
            _ => String::new(),
        };
        run.notify(
            l,
            NotificationEvent::BeadComplete,
            &format!(
                "[{}] Completed {bead_id}: {}{unpushed}",
                l.slug,
                first_line(&summary)
            ),
        );
        if iteration_completed {
            run.notify(
                l,
                NotificationEvent::IterationComplete,
                &format!("[{}] Iteration {} is complete.", l.slug, l.iteration.number),
            );
        }
        Ok(Ending::Completed {
            commit,
            pushed: pushed.as_option(),
            iteration_completed,
        })
    }

    /// 3.11, ask-first: whether a person approved the plan. The first run posts the plan as a
    /// question and blocks the bead; a person unblocking it is the approval.
    fn approved(
        &self,
        run: &mut Run<'_, '_>,
        l: &Loaded,
        bead: &Bead,
        deliverable: &Path,
    ) -> Result<bool> {
        let marker = approval_marker(self.paths, &l.slug, &bead.id);
        if marker.exists() {
            let _ = std::fs::remove_file(&marker);
            run.step(
                "autonomy",
                "ask-first: approved (a person unblocked the bead)",
            );
            return Ok(true);
        }
        let root = &run.msg.project;
        let plan = format!(
            "[{}] Approval needed for {} \"{}\": the agent will do this bead and write {}. Unblock the bead to approve.",
            l.slug,
            bead.id,
            bead.title,
            deliverable.strip_prefix(root).unwrap_or(deliverable).display()
        );
        // Blocked first: the marker must never exist for a bead nobody was asked about.
        self.tracker.block(
            &bead.id,
            "ask-first: waiting for a person to approve the plan",
        )?;
        crate::atomic::write(&marker, plan.as_bytes())?;
        run.step(
            "autonomy",
            "ask-first: plan posted, bead blocked until a person unblocks it",
        );
        run.notify(l, NotificationEvent::Question, &plan);
        Ok(false)
    }

    /// Partial deliverable, blocked bead, blocker notification (3.10). A deliverable the agent
    /// wrote in this run is kept and told why it is not complete; otherwise a partial one is
    /// written (in place of one left by an earlier run: one deliverable per bead, 1.4).
    #[allow(clippy::too_many_arguments)]
    fn give_up(
        &self,
        run: &mut Run<'_, '_>,
        l: &Loaded,
        bead: &Bead,
        expected: &Path,
        fresh: Option<&Path>,
        why: &str,
        tried: &[String],
    ) -> Result<Ending> {
        let tried_text = if tried.is_empty() {
            "- nothing was run".to_string()
        } else {
            tried
                .iter()
                .map(|t| format!("- {t}"))
                .collect::<Vec<_>>()
                .join("\n")
        };
        let details = format!(
            "What was tried:\n\n{tried_text}\n\nThe session log has the agent's full output."
        );
        let path = match fresh {
            Some(p) => {
                let mut text = std::fs::read_to_string(p).unwrap_or_default();
                text.push_str(&format!(
                    "\n\n## Not completed\n\n{why}; the bead is blocked until a person looks at it.\n\n{details}\n"
                ));
                crate::atomic::write(p, text.as_bytes())?;
                p.to_path_buf()
            }
            None => {
                let p = deliverable::find(&l.iteration.dir, &bead.id)
                    .into_iter()
                    .next()
                    .unwrap_or_else(|| expected.to_path_buf());
                let text = crate::templates::render(
                    crate::templates::DELIVERABLE,
                    &[
                        ("title", &format!("Partial: {}", bead.title)),
                        ("bead", bead.id.as_str()),
                        ("summary", &format!("Not completed: {why}. The bead is blocked until a person looks at it.")),
                        ("details", &details),
                    ],
                );
                crate::atomic::write(&p, text.as_bytes())?;
                p
            }
        };
        run.step(
            "deliverable",
            format!("partial deliverable written to {}", path.display()),
        );
        self.tracker
            .block(&bead.id, &format!("{why}; see the partial deliverable"))?;
        run.step("block", format!("bead blocked: {why}"));
        let root = &run.msg.project;
        {
            let _lock = repo_lock(root)?;
            let mut paths = vec![path];
            paths.extend(tracker_files(root));
            let message = format!("Partial: {} ({})", first_line(&bead.title), bead.id);
            let commit = crate::git::commit_paths(root, &paths, &message)?;
            run.step(
                "commit",
                format!(
                    "{} {message}",
                    commit.map_or("(nothing to commit)".into(), |c| c.to_string())
                ),
            );
            push(run, root);
        }
        run.notify(
            l,
            NotificationEvent::Blocker,
            &format!("[{}] {} is blocked: {why}.", l.slug, bead.id),
        );
        Ok(Ending::Blocked {
            reason: why.to_string(),
        })
    }

    /// After an error past the claim: block the bead if it still can be, and tell a person.
    fn fail(&self, run: &mut Run<'_, '_>, l: &Loaded, e: &anyhow::Error) -> Ending {
        let error = format!("{e:#}");
        tracing::error!(bead = %run.msg.bead, "worker error: {error}");
        run.step("error", error.clone());
        match self.tracker.block(
            &run.msg.bead,
            &format!("worker error: {}", clip(&error, 200)),
        ) {
            Ok(()) => run.step("block", "bead blocked after the error"),
            Err(b) => run.step("block", format!("the bead could not be blocked: {b}")),
        }
        run.notify(
            l,
            NotificationEvent::Blocker,
            &format!(
                "[{}] {} needs a person: the worker stopped on an error: {}",
                l.slug,
                run.msg.bead,
                clip(&error, 300)
            ),
        );
        Ending::Failed { error }
    }

    /// Commits the bead's work with the tracker's record of its closure: research-only commits
    /// only the deliverable; otherwise the files the agent reported changing plus the
    /// deliverable, or every change when it reported none. Other files in the iterations
    /// directory are never part of it: they are other beads' deliverables (committed with their
    /// own bead) or frozen iterations (4.5); nor are status reports, which may be another
    /// worker's, not yet read. The caller holds the repository lock.
    fn commit(
        &self,
        root: &Path,
        l: &Loaded,
        report: &StatusReport,
        deliverable: &Path,
        message: &str,
    ) -> Result<Option<String>> {
        let iterations = format::iteration::iterations_dir(root);
        let mut ours = vec![deliverable.to_path_buf()];
        ours.extend(tracker_files(root));
        let oid = if l.project.autonomy == Autonomy::ResearchOnly {
            crate::git::commit_paths(root, &ours, message)?
        } else if !report.files_changed.is_empty() {
            let mut paths: Vec<PathBuf> = report
                .files_changed
                .iter()
                .map(|f| root.join(f))
                .filter(|p| {
                    p.starts_with(root)
                        && !p.starts_with(&iterations)
                        && !p.components().any(|c| c == std::path::Component::ParentDir)
                })
                .collect();
            paths.extend(ours);
            crate::git::commit_paths(root, &paths, message)?
        } else {
            let skip = [
                iterations,
                root.join(report::SHARED),
                root.join(report::OWN_DIR),
            ];
            crate::git::commit_all_except(root, &skip, &ours, message)?
        };
        Ok(oid.map(|o| o.to_string()))
    }

    /// 3.7: when no story is left open, mark the iteration complete and commit it — exactly once
    /// even when two workers finish together (the lock, then a re-read). The caller holds the
    /// repository lock, pushes and notifies.
    fn complete_iteration_if_done(&self, run: &mut Run<'_, '_>, l: &Loaded) -> Result<bool> {
        if l.iteration.stories.is_empty() {
            run.step(
                "iteration",
                "no Stories listed; the iteration is completed by hand",
            );
            return Ok(false);
        }
        let all = self.tracker.list()?;
        let open: Vec<&BeadId> = l
            .iteration
            .stories
            .iter()
            .map(|s| &s.id)
            .filter(|id| {
                !all.iter()
                    .any(|b| &b.id == *id && b.status == BeadStatus::Closed)
            })
            .collect();
        if !open.is_empty() {
            run.step("iteration", format!("{} stories still open", open.len()));
            return Ok(false);
        }
        let root = &run.msg.project;
        let n = l.iteration.number;
        let file = l.iteration.dir.join("ITERATION.md");
        let now = format::iteration::parse_iteration(
            &format::decode(&std::fs::read(&file)?),
            &file,
            n,
            l.iteration.dir.clone(),
        )
        .value;
        if now.status == Some(IterationStatus::Complete) {
            run.step("iteration", "already completed by another worker");
            return Ok(false);
        }
        format::iteration::write_status(&file, IterationStatus::Complete)?;
        let mut paths = vec![l.iteration.dir.clone()];
        paths.extend(tracker_files(root));
        crate::git::commit_paths(root, &paths, &format!("Complete iteration {n}"))?;
        run.step("iteration", format!("iteration {n} complete; committed"));
        Ok(true)
    }
}

/// The part of WorkerTimeout the agent may use, counted from the worker's start: a tenth (at
/// most five minutes) is kept for the fixed steps after it, so the worker blocks or completes
/// the bead itself before the tick would stop it as a zombie (2.6).
fn agent_budget(worker_timeout: Duration) -> Duration {
    worker_timeout - (worker_timeout / 10).min(Duration::from_secs(300))
}

/// Commits and pushes of the workers sharing a repository, one at a time: concurrent index
/// writes or `git push`es of one repository fail or lose work.
fn repo_lock(root: &Path) -> Result<TickLock> {
    let path = crate::git::lock_path(root)?;
    TickLock::acquire(&path, REPO_LOCK_WAIT)
        .with_context(|| format!("cannot lock {}", path.display()))?
        .ok_or_else(|| {
            anyhow!(
                "another worker held {} for over {}s",
                path.display(),
                REPO_LOCK_WAIT.as_secs()
            )
        })
}

/// The tracker's files in the project, if it keeps any there.
fn tracker_files(root: &Path) -> Vec<PathBuf> {
    TRACKER_FILES
        .iter()
        .map(|f| root.join(f))
        .filter(|p| p.exists())
        .collect()
}

/// How a push went.
enum Push {
    NoUpstream,
    Pushed,
    Failed(String),
}

impl Push {
    fn as_option(&self) -> Option<bool> {
        match self {
            Push::NoUpstream => None,
            Push::Pushed => Some(true),
            Push::Failed(_) => Some(false),
        }
    }
}

/// 4.4: push when there is an upstream, retrying once (3.10). A failure is reported, not
/// fatal: it is remembered (`git::push_recorded`) and the next tick retries it. The caller
/// holds the repository lock.
fn push(run: &mut Run<'_, '_>, root: &Path) -> Push {
    if !crate::git::has_upstream(root) {
        run.step("push", "no upstream; nothing to push");
        return Push::NoUpstream;
    }
    let mut error = String::new();
    for attempt in 1..=2 {
        match crate::git::push_recorded(root, PUSH_TIMEOUT) {
            Ok(()) => {
                run.step(
                    "push",
                    if attempt == 1 {
                        "pushed"
                    } else {
                        "pushed on the second try"
                    },
                );
                return Push::Pushed;
            }
            Err(e) => error = format!("{e:#}"),
        }
    }
    tracing::warn!(bead = %run.msg.bead, "git push failed twice: {error}");
    run.step(
        "push",
        format!("failed twice; the next tick retries the push: {error}"),
    );
    Push::Failed(error)
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

/// `s` trimmed, on one line, at most `max` characters (an ellipsis marks a cut).
fn clip(s: &str, max: usize) -> String {
    let one = s.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut out: String = one.chars().take(max).collect();
    if one.chars().count() > max {
        out.push('…');
    }
    out
}

/// The bead's deliverables and their contents, now.
fn deliverables_now(dir: &Path, bead: &BeadId) -> Vec<(PathBuf, Vec<u8>)> {
    deliverable::find(dir, bead)
        .into_iter()
        .filter_map(|p| std::fs::read(&p).ok().map(|b| (p, b)))
        .collect()
}

/// The bead's deliverable with a Summary that is new or changed since `before`.
fn find_deliverable(dir: &Path, bead: &BeadId, before: &[(PathBuf, Vec<u8>)]) -> Option<PathBuf> {
    deliverables_now(dir, bead)
        .into_iter()
        .find(|(p, bytes)| {
            !before.iter().any(|(q, b)| q == p && b == bytes)
                && deliverable::summary(&String::from_utf8_lossy(bytes)).is_some()
        })
        .map(|(p, _)| p)
}

/// One line on an attempt: `pass` only with exit 0, a `pass` report and a deliverable.
fn judge(
    res: &Result<ExecResult>,
    report: Option<&StatusReport>,
    deliverable: Option<&PathBuf>,
) -> String {
    let exit = match res {
        Err(e) => return format!("failed to start: {e}"),
        Ok(r) if r.timed_out => return "timed out".into(),
        Ok(r) => r.code,
    };
    let Some(rep) = report else {
        return format!("exit {exit:?}, no status report");
    };
    let invalid = if rep.invalid.is_empty() {
        String::new()
    } else {
        format!(" (invalid {})", rep.invalid.join(", "))
    };
    match (exit, rep.status, deliverable) {
        (Some(0), report::ExecStatus::Pass, Some(_)) => format!("pass{invalid}"),
        (Some(0), report::ExecStatus::Pass, None) => {
            "reported pass but wrote no deliverable with a Summary".into()
        }
        (code, status, _) => format!("exit {code:?}, status {status:?}{invalid}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_budget_keeps_a_tenth_for_the_fixed_steps() {
        let s = Duration::from_secs;
        assert_eq!(agent_budget(s(3)), Duration::from_millis(2700));
        assert_eq!(agent_budget(s(1000)), s(900));
        assert_eq!(agent_budget(s(3600)), s(3300), "at most five minutes");
        assert_eq!(agent_budget(s(36_000)), s(35_700));
    }

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
