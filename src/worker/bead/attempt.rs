//! Phase 3, the agent's work: one executor run within the WorkerTimeout, judged by its exit
//! code, its status report and a deliverable it wrote. A failed attempt is retried by a later
//! worker after a backoff, or the bead blocked (3.10, [`crate::retry`]). A
//! question from the agent blocks the bead until a person answers. Running the process is
//! [`crate::worker::executor`]'s.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Result;

use crate::config::Config;
use crate::format::{deliverable, project::ProjectConfig};
use crate::model::{Bead, BeadId, NotificationEvent};

use crate::system::beneath;
use crate::system::proc::exit_text;
use crate::worker::context::{self, Loaded};
use crate::worker::report::{self, StatusReport};
use crate::workspace::Workspace;

use crate::worker::executor::stop;
use crate::worker::{work_dir, ArgvExecutor, ExecRequest, ExecResult, Executor, Run, Worker};

/// How the attempts ended.
pub(in crate::worker) enum AttemptEnd {
    /// An attempt passed with this report and deliverable.
    Passed {
        report: StatusReport,
        deliverable: PathBuf,
    },
    /// The agent asked a question: the bead is blocked and a person told.
    Question,
    /// The work would break a guardrail: blocked at once, never retried (3.10).
    Guardrail(StatusReport),
    /// No attempt passed.
    Failed(Failure),
}

/// Why an attempt failed; when the bead is given up, what the partial deliverable says (3.10).
pub(in crate::worker) struct Failure {
    /// The bead's deliverable if this run's attempt wrote one.
    pub(in crate::worker) fresh: Option<PathBuf>,
    pub(in crate::worker) why: String,
    /// One line per attempt, oldest first.
    pub(in crate::worker) tried: Vec<String>,
    /// How the agent's run ended (exit, timeout, output), for the failure's signature.
    pub(in crate::worker) result: ExecResult,
}

/// The agent a worker runs for a project's bead: the gateway session of its label when the
/// project's backend is OpenClaw (its `Backend:`, else `[sessions] backend`), else the preset
/// or argv template of its `Executor` field or config.toml.
pub fn executor_for(
    config: &Config,
    project: &ProjectConfig,
    slug: &str,
    bead: &BeadId,
) -> Box<dyn Executor> {
    let (placement, _) = crate::session::Placement::of(project);
    let backend = placement.backend_or(config.sessions.backend);
    if backend == crate::session::BackendKind::OpenClaw {
        if let Ok(label) = crate::model::SessionLabel::new(slug, bead.clone()) {
            return Box::new(crate::worker::executor::openclaw::SessionAgent::new(
                &config.openclaw,
                &placement,
                label,
            ));
        }
    }
    let grace = Duration::from_secs(config.sessions.kill_grace_secs);
    // A malformed `Executor:` is the tick's preflight error; it never reaches a worker.
    match config
        .agent_for(project, Path::new(".braids/PROJECT.md"))
        .unwrap_or_default()
    {
        crate::agent::Choice::Preset(preset) => {
            let settings = config.preset_settings(preset);
            // A state folder moved by the CLI's own variable, as the agent will see it.
            let moved: Vec<String> = preset
                .state_env()
                .iter()
                .filter_map(|v| {
                    settings
                        .env
                        .get(*v)
                        .cloned()
                        .or_else(|| std::env::var(v).ok())
                })
                .collect();
            let mut state: Vec<&str> = preset.state_dirs().to_vec();
            state.extend(moved.iter().map(String::as_str));
            Box::new(crate::worker::PresetExecutor {
                preset,
                settings,
                model: placement.model,
                grace,
                sandbox: config.preset_sandbox(preset, &state),
            })
        }
        crate::agent::Choice::Argv(template) => Box::new(ArgvExecutor {
            template,
            grace,
            sandbox: config.sandbox_settings(&[]),
        }),
    }
}

impl Worker<'_> {
    /// Runs the agent once: a failed attempt is retried by a later worker, after a backoff
    /// ([`crate::retry`]). From then on a termination signal waits for the fixed steps.
    pub(in crate::worker) fn attempt(
        &self,
        run: &mut Run<'_, '_>,
        l: &Loaded,
        ws: &Workspace,
        bead: &Bead,
        expected: &Path,
        started: Instant,
    ) -> Result<AttemptEnd> {
        let msg = run.msg;
        let bead_id = &msg.bead;
        if let Some(why) = self.executor.unavailable() {
            return Ok(AttemptEnd::Failed(Failure {
                fresh: None,
                why,
                tried: Vec::new(),
                result: ExecResult::default(),
            }));
        }
        let wd = work_dir(&self.paths.braids_dir, &l.slug, bead_id);
        let prompt_file = wd.join("prompt.md");
        // The agent writes its deliverable in its workspace; it lands with its work.
        let expected = ws.here(expected);
        let iteration_dir = ws.here(&l.iteration.dir);
        let store = crate::retry::store::Store::in_dir(&self.paths.braids_dir);
        let earlier = store
            .load()
            .record(&msg.project, bead_id)
            .map(|r| r.failures.clone())
            .unwrap_or_default();
        let answers = crate::answers::load(self.paths, &l.slug, bead_id);
        // An attempt answering the bead's pull request is told what the forge said.
        let review = crate::review_records::load(self.paths, &l.slug, bead_id)
            .ok()
            .flatten()
            .and_then(|r| r.rework)
            .unwrap_or_default();
        let prompt = context::prompt(l, bead, &ws.dir, &expected, &earlier, &answers, &review);
        crate::system::atomic::write(&prompt_file, prompt.as_bytes())?;
        // A deliverable counts only if this run wrote it, not one left by an earlier run.
        let before = deliverables_now(&ws.dir, &iteration_dir, bead_id);
        let timeout = Duration::from_secs(l.project.worker_timeout);
        let deadline = started + crate::worker::executor::agent_budget(timeout);
        // In a worktree of its own the agent is alone, so the shared report file is its own.
        let alone = l.project.max_workers <= 1 || !ws.is_shared();
        let mut inbox = report::Inbox::new(&ws.dir, bead_id, alone);
        inbox.clear();
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(AttemptEnd::Failed(Failure {
                fresh: None,
                why: "the executor did not succeed".into(),
                tried: vec![format!(
                    "not started: the WorkerTimeout of {}s was used up",
                    timeout.as_secs()
                )],
                result: ExecResult::default(),
            }));
        }
        let req = ExecRequest {
            project: msg.project.clone(),
            workspace: ws.dir.clone(),
            bead: bead_id.clone(),
            prompt_file: prompt_file.clone(),
            deliverable: expected.clone(),
            result_file: ws.dir.join(report::own_file(bead_id)),
            timeout: left,
            activity: self.paths.activity(&l.slug, bead_id),
            role: None,
        };
        let agent_started = Instant::now();
        let res = self.executor.run(&req);
        let agent = res.as_ref().ok().and_then(|r| r.agent.clone());
        let mut report = inbox.take();
        let mut fresh = find_deliverable(&ws.dir, &iteration_dir, bead_id, &before);
        if let Some(a) = agent.as_ref().filter(|_| report.is_none()) {
            (report, fresh) = from_agent(run, a, &res, bead, (&ws.dir, &expected), fresh);
        }
        if report.is_none() {
            report = tolerated(run, &ws.dir, &res, fresh.as_deref());
        }
        let verdict = judge(&res, report.as_ref(), fresh.as_ref());
        run.step("execute", format!("attempt: {verdict}"));
        self.account(
            run,
            l,
            report.as_ref(),
            agent.as_ref(),
            &verdict,
            agent_started.elapsed(),
        );
        run.hold = Some(stop::Hold::marking(
            self.paths.finishing(&l.slug, &run.msg.bead),
        ));
        if let Some(r) = report.as_ref().filter(|r| r.guardrail_conflict()) {
            return Ok(AttemptEnd::Guardrail(r.clone()));
        }
        if let Some(r) = report.as_ref().filter(|r| r.needs_human()) {
            if let Some(a) = &agent {
                crate::worker::executor::preset::keep_session(&wd, a);
            }
            self.ask(run, l, r)?;
            return Ok(AttemptEnd::Question);
        }
        if let (Some(r), Some(p), true) = (report, fresh.clone(), verdict.starts_with("pass")) {
            // Its work goes to review: an attempt answering the forge resumes this session.
            let reviewed = crate::review::ReviewSettings::of(&l.project).0.landing
                == crate::review::Landing::PullRequest;
            if let (true, Some(a)) = (reviewed, &agent) {
                crate::worker::executor::preset::keep_session(&wd, a);
            }
            return Ok(AttemptEnd::Passed {
                report: r,
                deliverable: p,
            });
        }
        Ok(AttemptEnd::Failed(Failure {
            fresh,
            why: "the executor did not succeed".into(),
            tried: vec![verdict],
            result: res.unwrap_or_default(),
        }))
    }

    /// Records what the attempt cost in the ledger ([`crate::cost`]) and, when it is the one that
    /// took the project past its `DailyBudget`, tells a person once. Never fails the bead: a
    /// cost that cannot be recorded is logged.
    fn account(
        &self,
        run: &mut Run<'_, '_>,
        l: &Loaded,
        report: Option<&StatusReport>,
        agent: Option<&crate::agent::AgentOutcome>,
        verdict: &str,
        took: Duration,
    ) {
        // The CLI's own count beats what the agent wrote in its report.
        let usage = match agent.filter(|a| !a.usage.is_empty()) {
            Some(a) => crate::cost::Usage {
                cost_usd: crate::agent::cost_of(
                    a,
                    self.asked_model(l).as_deref(),
                    &self.config.prices,
                ),
                ..a.usage
            },
            None => report.map(|r| r.usage).unwrap_or_default(),
        };
        let attempt = crate::cost::Attempt {
            at: chrono::Utc::now(),
            project: l.slug.clone(),
            bead: run.msg.bead.to_string(),
            outcome: match report {
                Some(r) if r.needs_human() => "question",
                _ if verdict.starts_with("pass") => "passed",
                _ => "failed",
            }
            .to_string(),
            duration_seconds: took.as_secs(),
            usage,
        };
        let ledger = crate::cost::ledger::Ledger::in_dir(&self.paths.braids_dir);
        let (before, after) = match ledger.record(attempt) {
            Ok(spent) => spent,
            Err(e) => {
                tracing::warn!(bead = %run.msg.bead, "the attempt's cost is not recorded: {e:#}");
                return;
            }
        };
        if !usage.is_empty() {
            run.step(
                "cost",
                format!(
                    "{} tokens in, {} tokens out, {}; {after:.2} USD spent today in {}",
                    usage.tokens_in.map_or("?".into(), |n| n.to_string()),
                    usage.tokens_out.map_or("?".into(), |n| n.to_string()),
                    usage
                        .cost_usd
                        .map_or("cost not reported".into(), |c| format!("{c:.4} USD")),
                    l.slug
                ),
            );
        }
        let budget = crate::cost::budget_of(&l.project);
        if crate::cost::crossed(budget, before, after) {
            run.notify(
                l,
                NotificationEvent::Blocker,
                &format!(
                    "[{}] {}",
                    l.slug,
                    crate::cost::over_budget(budget, after).unwrap_or_default()
                ),
            );
        }
    }

    /// The model the project asks its preset for (PROJECT.md `Model:`, else the preset's
    /// settings), for pricing a run whose CLI named none.
    fn asked_model(&self, l: &Loaded) -> Option<String> {
        let (placement, _) = crate::session::Placement::of(&l.project);
        let preset = self
            .config
            .agent_for(&l.project, Path::new(".braids/PROJECT.md"))
            .ok()?
            .preset()?;
        placement
            .model
            .or_else(|| Some(self.config.preset_settings(preset).model))
            .filter(|m| !m.trim().is_empty())
    }

    /// The agent needs a person's answer: the bead is blocked until it comes.
    fn ask(&self, run: &mut Run<'_, '_>, l: &Loaded, r: &StatusReport) -> Result<()> {
        let bead_id = &run.msg.bead;
        let question = r
            .summary
            .clone()
            .unwrap_or_else(|| "the agent needs a person's answer (see the session log)".into());
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
        Ok(())
    }
}

/// The bead's deliverables and their contents, now, as far as they can be read beneath the
/// workspace `ws` (never through a link the agent planted).
fn deliverables_now(ws: &Path, dir: &Path, bead: &BeadId) -> Vec<(PathBuf, Vec<u8>)> {
    deliverable::find(dir, bead)
        .into_iter()
        .filter_map(|p| beneath::read(ws, &p).ok().map(|b| (p, b)))
        .collect()
}

/// The bead's deliverable with a Summary that is new or changed since `before`.
fn find_deliverable(
    ws: &Path,
    dir: &Path,
    bead: &BeadId,
    before: &[(PathBuf, Vec<u8>)],
) -> Option<PathBuf> {
    deliverables_now(ws, dir, bead)
        .into_iter()
        .find(|(p, bytes)| {
            !before.iter().any(|(q, b)| q == p && b == bytes)
                && deliverable::summary(&String::from_utf8_lossy(bytes)).is_some()
        })
        .map(|(p, _)| p)
}

/// A preset's CLI finished its turn without error but the agent wrote no status report: the
/// CLI's own result is the report, and when the agent wrote no deliverable either, braids
/// writes one from the agent's last message (the work is in the workspace; the summary is the
/// agent's own words).
fn from_agent(
    run: &mut Run<'_, '_>,
    agent: &crate::agent::AgentOutcome,
    res: &Result<ExecResult>,
    bead: &Bead,
    (ws, expected): (&Path, &Path),
    fresh: Option<PathBuf>,
) -> (Option<StatusReport>, Option<PathBuf>) {
    let code = res
        .as_ref()
        .ok()
        .and_then(|r| (!r.timed_out).then_some(r.code))
        .flatten();
    if agent.verdict(code) != crate::agent::Verdict::Succeeded {
        return (None, fresh);
    }
    let summary = agent
        .final_text
        .as_deref()
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .unwrap_or("The agent finished its turn without a closing message; see the session log.")
        .to_string();
    let name = agent.preset.map_or("the agent", crate::agent::Preset::name);
    let mut report = StatusReport::assumed(Some(crate::system::templates::clip(&summary, 300)));
    report.source = "the agent CLI's own result (no status report)";
    run.step("report", format!("no status report: {name} finished its turn without error, and its result counts as the report"));
    if fresh.is_some() {
        return (Some(report), fresh);
    }
    let text = crate::system::templates::expand(
        crate::system::templates::DELIVERABLE,
        &[
            ("title", bead.title.as_str()),
            ("bead", bead.id.as_str()),
            ("summary", summary.as_str()),
            (
                "details",
                &format!(
                    "Written by braids from {name}'s last message; the agent wrote no deliverable."
                ),
            ),
        ],
    );
    match beneath::write_within(ws, expected, text.as_bytes()) {
        Ok(()) => {
            run.step("deliverable", format!("written from {name}'s last message"));
            (Some(report), Some(expected.to_path_buf()))
        }
        Err(e) => {
            tracing::warn!(bead = %bead.id, "cannot write the deliverable from the agent's message: {e:#}");
            (Some(report), None)
        }
    }
}

/// Exit 0 and a fresh deliverable with a Summary, but no status report: the work is taken as
/// done, with a warning in the log and a note in the deliverable saying so.
fn tolerated(
    run: &mut Run<'_, '_>,
    ws: &Path,
    res: &Result<ExecResult>,
    fresh: Option<&Path>,
) -> Option<StatusReport> {
    let (Ok(r), Some(path)) = (res, fresh) else {
        return None;
    };
    if r.timed_out || r.code != Some(0) {
        return None;
    }
    let text = beneath::read_string(ws, path).ok()?;
    let summary = deliverable::summary(&text)?;
    let noted = format!(
        "{}\n\n> Note: the agent sent no status report; braids took its exit status 0 and this \
         deliverable as success.\n",
        text.trim_end()
    );
    if let Err(e) = beneath::write_within(ws, path, noted.as_bytes()) {
        tracing::warn!(bead = %run.msg.bead, "cannot note the missing status report in the deliverable: {e:#}");
    }
    tracing::warn!(bead = %run.msg.bead, "the agent sent no status report; exit 0 and a fresh deliverable count as a pass");
    run.step(
        "report",
        "no status report: exit 0 and a fresh deliverable with a Summary count as a pass",
    );
    Some(StatusReport::assumed(Some(summary)))
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
    if let Some(a) = res.as_ref().ok().and_then(|r| r.agent.as_ref()) {
        match a.verdict(exit) {
            crate::agent::Verdict::Succeeded => {}
            crate::agent::Verdict::Denied(what) => {
                return format!(
                    "the agent was refused {}: {} (it may act only in its workspace; do the work there, or ask a person with status needs_human)",
                    if what.len() == 1 { "an action" } else { "actions" },
                    what.join("; ")
                )
            }
            crate::agent::Verdict::Provider(p) => {
                return format!(
                    "the model provider failed{}: {}",
                    p.status.map_or(String::new(), |s| format!(" (HTTP {s})")),
                    p.what
                )
            }
            crate::agent::Verdict::Failed(why) => return why,
        }
    }
    let Some(rep) = report else {
        return format!("{}, no status report", exit_text(exit));
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
        (code, status, _) => {
            let said = rep.summary.as_deref().map_or(String::new(), |s| {
                format!(": {}", crate::worker::clip(s, 200))
            });
            format!(
                "{}, status {}{invalid}{said}",
                exit_text(code),
                status.as_str()
            )
        }
    }
}
