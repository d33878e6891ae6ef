//! `braids worker`: one bead, start to finish, every fixed step done by braids in the fixed
//! order (CONTRACTS 3.1–3.11, 4.4–4.6). The agent does the work that needs understanding;
//! braids claims, checks dependencies, verifies the deliverable, closes, commits, pushes,
//! completes the iteration and notifies — and logs each step with the bead id, so the session
//! log says exactly what happened and why it stopped.
//!
//! The order of the success path is fixed: work → deliverable verified → close → commit →
//! push (3.4–3.6, 4.4) → iteration check (3.7).

mod exec;
pub mod report;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use serde::Serialize;

use crate::config::Config;
use crate::format::{self, deliverable, iteration::Iteration, project::ProjectConfig};
use crate::model::{
    Autonomy, Bead, BeadId, BeadStatus, IterationStatus, NotificationEvent, SpawnMessage,
};
use crate::notify::{self, Notifier};
use crate::paths::Paths;
use crate::tracker::{ClaimOutcome, Tracker};

pub use exec::{work_dir, ArgvExecutor, ExecRequest, ExecResult, Executor};
use report::StatusReport;

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
}

impl Run<'_, '_> {
    fn step(&mut self, name: &'static str, detail: impl Into<String>) {
        let detail = detail.into();
        tracing::info!(bead = %self.msg.bead, step = name, "{detail}");
        self.steps.push(Step { name, detail });
    }

    fn notify(&mut self, l: &Loaded, event: NotificationEvent, text: &str) {
        let sent = notify::send(
            self.w.notifier,
            &l.project,
            &l.slug,
            event,
            Some(&self.msg.bead),
            text,
        );
        self.step(
            "notify",
            format!("{event}: {}", if sent { "sent" } else { "skipped" }),
        );
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
            (
                "result_file",
                &report::result_file(&msg.project, &bead.id).to_string_lossy(),
            ),
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
    /// Runs one bead. `Err` only for problems before the claim (unreadable spawn message or
    /// iteration); after the claim every failure ends in a blocked bead, never a stranded one.
    pub fn run(&self, msg: &SpawnMessage) -> Result<WorkerRun> {
        let mut run = Run {
            w: self,
            msg,
            steps: Vec::new(),
        };
        let l = load(self.paths, msg, &mut run)?;
        let bead_id = &msg.bead;
        let end = |run: Run<'_, '_>, ending: Ending| {
            Ok(WorkerRun {
                bead: bead_id.clone(),
                ending,
                steps: run.steps,
            })
        };

        // 4.5: never write into a completed iteration.
        if l.iteration.status == Some(IterationStatus::Complete) {
            run.step(
                "refuse",
                format!(
                    "iteration {} is complete; completed iterations are never modified",
                    msg.iteration
                ),
            );
            return end(run, Ending::IterationFrozen);
        }

        // 3.2: claim before any work; a refusal stops at once.
        match self.tracker.claim(bead_id, &self.config.tracker.actor)? {
            ClaimOutcome::Claimed => run.step("claim", "claimed"),
            ClaimOutcome::Refused { status, holder } => {
                run.step(
                    "claim",
                    format!(
                        "refused: bead is {status}, held by {}",
                        holder.as_deref().unwrap_or("nobody")
                    ),
                );
                return end(run, Ending::ClaimRefused);
            }
        }
        let bead = self
            .tracker
            .show(bead_id)?
            .ok_or_else(|| anyhow!("bead {bead_id} disappeared after the claim"))?;

        // 3.3: direct dependencies must be closed.
        let mut open = Vec::new();
        for dep in &bead.dependencies {
            let closed =
                matches!(self.tracker.show(dep)?, Some(d) if d.status == BeadStatus::Closed);
            if !closed {
                open.push(dep.clone());
            }
        }
        if !open.is_empty() {
            let list = open
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ");
            self.tracker
                .block(bead_id, &format!("open dependencies: {list}"))?;
            run.step("dependencies", format!("open: {list}; bead blocked"));
            run.notify(
                &l,
                NotificationEvent::Blocker,
                &format!(
                    "[{}] {bead_id} is blocked: its dependencies {list} are not closed.",
                    l.slug
                ),
            );
            return end(run, Ending::DependenciesOpen { open });
        }
        run.step(
            "dependencies",
            format!(
                "{} direct dependencies, all closed",
                bead.dependencies.len()
            ),
        );

        let deliverable_path = l
            .iteration
            .dir
            .join(deliverable::file_name(bead_id, &bead.title));

        // 3.11: ask-first posts the plan and waits for a person.
        if l.project.autonomy == Autonomy::AskFirst {
            let marker = approval_marker(self.paths, &l.slug, bead_id);
            if marker.exists() {
                let _ = std::fs::remove_file(&marker);
                run.step(
                    "autonomy",
                    "ask-first: approved (a person unblocked the bead)",
                );
            } else {
                let plan = format!(
                    "[{}] Approval needed for {bead_id} \"{}\": the agent will do this bead and write {}. Unblock the bead to approve.",
                    l.slug,
                    bead.title,
                    deliverable_path.strip_prefix(&msg.project).unwrap_or(&deliverable_path).display()
                );
                crate::atomic::write(&marker, plan.as_bytes())?;
                self.tracker.block(
                    bead_id,
                    "ask-first: waiting for a person to approve the plan",
                )?;
                run.step(
                    "autonomy",
                    "ask-first: plan posted, bead blocked until a person unblocks it",
                );
                run.notify(&l, NotificationEvent::Question, &plan);
                return end(run, Ending::AwaitingApproval);
            }
        }

        run.notify(
            &l,
            NotificationEvent::BeadStart,
            &format!("[{}] Started {bead_id}: {}", l.slug, bead.title),
        );

        // The work, retried once (3.10).
        let template = executor_template(self.config, &l.project);
        if template.is_empty() {
            let reason = "no executor is configured: set [worker] executor in config.toml";
            return self.give_up(run, &l, &bead, &deliverable_path, reason, &[]);
        }
        let executor: &dyn Executor = self.executor;
        let wd = work_dir(&self.paths.braids_dir, &l.slug, bead_id);
        let prompt_file = wd.join("prompt.md");
        crate::atomic::write(
            &prompt_file,
            prompt(&l, &bead, msg, &deliverable_path).as_bytes(),
        )?;
        let started = Instant::now();
        let budget = Duration::from_secs(l.project.worker_timeout);
        let attempts = 1 + self.config.worker.retries;
        let mut tried = Vec::new();
        let mut success: Option<(StatusReport, PathBuf)> = None;
        let shared = l.project.max_workers == 1;
        let result_file = report::result_file(&msg.project, bead_id);
        for attempt in 1..=attempts {
            report::clear(&msg.project, bead_id, shared);
            let left = budget.saturating_sub(started.elapsed());
            if left.is_zero() {
                tried.push(format!(
                    "attempt {attempt}: not started, WorkerTimeout of {}s used up",
                    budget.as_secs()
                ));
                break;
            }
            let req = ExecRequest {
                project: msg.project.clone(),
                bead: bead_id.clone(),
                prompt_file: prompt_file.clone(),
                deliverable: deliverable_path.clone(),
                result_file: result_file.clone(),
                timeout: left,
            };
            let res = executor.run(&req);
            let report = report::read(&msg.project, bead_id, shared);
            // A status report is for braids, not for the project's history.
            report::clear(&msg.project, bead_id, shared);
            let found = find_deliverable(&l.iteration.dir, bead_id);
            let verdict = judge(&res, report.as_ref(), found.as_ref());
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
                    &l,
                    NotificationEvent::Question,
                    &format!("[{}] Question on {bead_id}: {question}", l.slug),
                );
                return end(run, Ending::AwaitingHuman);
            }
            if let (Some(r), Some(p), true) = (report, found, verdict.starts_with("pass")) {
                success = Some((r, p));
                break;
            }
        }
        let Some((report, deliverable)) = success else {
            return self.give_up(
                run,
                &l,
                &bead,
                &deliverable_path,
                "the executor did not succeed",
                &tried,
            );
        };
        run.step("deliverable", format!("verified {}", deliverable.display()));

        // 3.5: close only after the deliverable; 3.6: then commit.
        self.tracker
            .close(bead_id, report.summary.as_deref().unwrap_or("done"))?;
        run.step("close", "bead closed");
        let summary =
            deliverable::summary(&std::fs::read_to_string(&deliverable).unwrap_or_default())
                .or(report.summary.clone())
                .unwrap_or_else(|| bead.title.clone());
        let message = format!("{} ({bead_id})", first_line(&summary));
        let commit = self.commit(&msg.project, &l, &report, &deliverable, &message)?;
        run.step(
            "commit",
            format!(
                "{} {message}",
                commit.as_deref().unwrap_or("(nothing to commit)")
            ),
        );
        let pushed = self.push(&mut run, &msg.project);
        run.notify(
            &l,
            NotificationEvent::BeadComplete,
            &format!("[{}] Completed {bead_id}: {}", l.slug, first_line(&summary)),
        );

        // 3.7
        let iteration_completed = self.complete_iteration_if_done(&mut run, &l)?;
        end(
            run,
            Ending::Completed {
                commit,
                pushed,
                iteration_completed,
            },
        )
    }

    /// Partial deliverable, blocked bead, blocker notification (3.10).
    fn give_up(
        &self,
        mut run: Run<'_, '_>,
        l: &Loaded,
        bead: &Bead,
        path: &Path,
        why: &str,
        tried: &[String],
    ) -> Result<WorkerRun> {
        let tried_text = if tried.is_empty() {
            "- nothing was run".to_string()
        } else {
            tried
                .iter()
                .map(|t| format!("- {t}"))
                .collect::<Vec<_>>()
                .join("\n")
        };
        if find_deliverable(&l.iteration.dir, &bead.id).is_none() {
            let text = crate::templates::render(
                crate::templates::DELIVERABLE,
                &[
                    ("title", &format!("Partial: {}", bead.title)),
                    ("bead", bead.id.as_str()),
                    ("summary", &format!("Not completed: {why}. The bead is blocked until a person looks at it.")),
                    ("details", &format!("What was tried:\n\n{tried_text}\n\nThe session log has the agent's full output.")),
                ],
            );
            crate::atomic::write(path, text.as_bytes())?;
            run.step(
                "deliverable",
                format!("partial deliverable written to {}", path.display()),
            );
            let _ = crate::git::commit_paths(
                &run.msg.project,
                &[path.to_path_buf()],
                &format!("Partial: {} ({})", first_line(&bead.title), bead.id),
            );
        }
        self.tracker
            .block(&bead.id, &format!("{why}; see the partial deliverable"))?;
        run.step("block", format!("bead blocked: {why}"));
        run.notify(
            l,
            NotificationEvent::Blocker,
            &format!("[{}] {} is blocked: {why}.", l.slug, bead.id),
        );
        Ok(WorkerRun {
            bead: bead.id.clone(),
            ending: Ending::Blocked {
                reason: why.to_string(),
            },
            steps: run.steps,
        })
    }

    /// Commits the bead's work: research-only commits only the deliverable; otherwise the files
    /// the agent reported changing plus the deliverable, or the whole tree when it reported none.
    fn commit(
        &self,
        root: &Path,
        l: &Loaded,
        report: &StatusReport,
        deliverable: &Path,
        message: &str,
    ) -> Result<Option<String>> {
        let _guard = crate::lock::TickLock::acquire(
            &root.join(".git/braids-commit.lock"),
            Duration::from_secs(60),
        )
        .context("cannot lock the repository for committing")?;
        let oid = if l.project.autonomy == Autonomy::ResearchOnly {
            crate::git::commit_paths(root, &[deliverable.to_path_buf()], message)?
        } else if !report.files_changed.is_empty() {
            let mut paths: Vec<PathBuf> = report
                .files_changed
                .iter()
                .map(|f| root.join(f))
                .filter(|p| {
                    p.starts_with(root)
                        && !p.components().any(|c| c == std::path::Component::ParentDir)
                })
                .collect();
            paths.push(deliverable.to_path_buf());
            crate::git::commit_paths(root, &paths, message)?
        } else {
            crate::git::commit_all(root, message)?
        };
        Ok(oid.map(|o| o.to_string()))
    }

    /// 4.4: push when there is an upstream; a failure is reported, and the next tick retries.
    fn push(&self, run: &mut Run<'_, '_>, root: &Path) -> Option<bool> {
        if !crate::git::has_upstream(root) {
            run.step("push", "no upstream; nothing to push");
            return None;
        }
        match crate::git::push_recorded(root, Duration::from_secs(120)) {
            Ok(()) => {
                run.step("push", "pushed");
                Some(true)
            }
            Err(e) => {
                run.step(
                    "push",
                    format!("failed, will be retried by the next tick: {e}"),
                );
                Some(false)
            }
        }
    }

    /// 3.7: when no story is left open, mark the iteration complete, notify, commit — exactly
    /// once even when two workers finish together (a lock, then a re-read).
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
        let _guard = crate::lock::TickLock::acquire(
            &root.join(".git/braids-commit.lock"),
            Duration::from_secs(60),
        )
        .context("cannot lock the repository")?;
        let file = l.iteration.dir.join("ITERATION.md");
        let now = format::iteration::parse_iteration(
            &format::decode(&std::fs::read(&file)?),
            &file,
            l.iteration.number,
            l.iteration.dir.clone(),
        )
        .value;
        if now.status == Some(IterationStatus::Complete) {
            run.step("iteration", "already completed by another worker");
            return Ok(false);
        }
        format::iteration::write_status(&file, IterationStatus::Complete)?;
        let n = l.iteration.number;
        crate::git::commit_paths(
            root,
            &[l.iteration.dir.clone()],
            &format!("Complete iteration {n}"),
        )?;
        run.step("iteration", format!("iteration {n} complete; committed"));
        drop(_guard);
        run.notify(
            l,
            NotificationEvent::IterationComplete,
            &format!("[{}] Iteration {n} is complete.", l.slug),
        );
        self.push(run, root);
        Ok(true)
    }
}

fn first_line(s: &str) -> String {
    let line = s
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim();
    let mut out: String = line.chars().take(72).collect();
    if line.chars().count() > 72 {
        out.push('…');
    }
    out
}

/// The bead's deliverable with a Summary, if there is exactly one such file.
fn find_deliverable(dir: &Path, bead: &BeadId) -> Option<PathBuf> {
    deliverable::find(dir, bead).into_iter().find(|p| {
        std::fs::read_to_string(p)
            .ok()
            .and_then(|t| deliverable::summary(&t))
            .is_some()
    })
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
