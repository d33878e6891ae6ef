//! A protocol story's session (`Pipeline: protocol`, [`crate::protocol`]): dispatch, run the
//! step (the executor, a team of executors, or braids itself for `commit`), read the report,
//! run the `post_check`, write the state, and go on while the story needs nobody, in one
//! session. It stops when a person is needed (a review, a question: the bead keeps its claim),
//! when the story is stuck (blocked, a person told), when it is done (deliverable, close,
//! commit, push, as any bead), or when the next step must wait for the tick (a team step
//! needs more slots than this session holds, or the WorkerTimeout would not cover it: the bead
//! is handed back open, its state kept).
//!
//! The story's workspace outlives the session: its worktree is reused by the next session
//! and removed when the story lands.
//!
//! Parallel stories all write the project's memory (`PROJECT_MEMORY.md`, `.ai/history.md`) in
//! their last step, and would conflict when they land. So the last executor step and the
//! landing run one story at a time per repository, under the memory lock, from the story's
//! branch rebased onto everything landed so far; until then each run's archived handoff waits
//! in braids' work directory, and is appended to `.ai/history.md` at that point.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Result;
use chrono::Utc;

use crate::model::{Bead, BeadId, NotificationEvent};
use crate::protocol::handoff::{self, Handoff};
use crate::protocol::state::{self as story, StoryState};
use crate::protocol::{dispatch, overrides, team, Action, Rule, Rules, Runner, Status, Step};
use crate::workspace::{Workspace, WorkspaceMode};

use super::context::Loaded;
use super::execute::agent_budget;
use super::report::StatusReport;
use super::{clip, stop, work_dir, Ending, ExecRequest, ExecResult, Run, Worker};

/// Paths braids' own `commit` step leaves out: status reports, the executor's notes, and what
/// `update-memory` writes after the commit (seed 002: not PROJECT_MEMORY.md, not history.md).
const NOT_COMMITTED: &[&str] = &[
    handoff::EXECUTOR_RESULT,
    super::report::OWN_DIR,
    handoff::HANDOFF,
    ".ai/handoffs",
    handoff::HISTORY,
    "PROJECT_MEMORY.md",
    ".braids/iterations",
];

impl Worker<'_> {
    /// Runs the story of `bead` from wherever its state says, in this session.
    pub(super) fn protocol(
        &self,
        run: &mut Run<'_, '_>,
        l: &Loaded,
        bead: &Bead,
        started: Instant,
    ) -> Result<Ending> {
        let root = run.msg.project.clone();
        let bead_id = bead.id.clone();
        let rules = match overrides::load(&root) {
            Ok(r) => r,
            Err(p) => return self.hold_story(run, l, &p.sentence()),
        };
        let mut state = match story::load(&root, &bead_id) {
            story::Loaded::Missing => {
                let first = if bead.title.to_ascii_lowercase().contains("[bootstrap]") {
                    Step::Bootstrap
                } else {
                    Step::Bdd
                };
                StoryState::new(&l.slug, &bead_id, first)
            }
            story::Loaded::Valid(s) => s,
            story::Loaded::Invalid(e) => return self.hold_story(run, l, &e.to_string()),
        };
        if state.status == Status::Running {
            // This session holds the story's only label: the step's earlier worker is gone.
            state.status = Status::Failing;
            state.completed_at = Some(Utc::now());
            state.last_error = Some(format!(
                "the worker ended while {} was running (no session left)",
                state.step
            ));
        }
        state.project = l.slug.clone();
        state.story = Some(bead_id.to_string());
        let ws = self.story_workspace(run, l)?;
        run.started(l, &bead.title);
        let mode = team::mode(
            team::complexity(&bead.labels, &bead.title),
            team::parallel_tags(&bead.description),
        );
        story::set_team(&root, &bead_id, mode == team::Mode::Team)?;
        run.step(
            "protocol",
            format!(
                "story at {} ({}), attempt {}; {} mode",
                state.step,
                state.status,
                state.attempt,
                match mode {
                    team::Mode::Single => "single",
                    team::Mode::Team => "team",
                }
            ),
        );
        let budget = agent_budget(Duration::from_secs(l.project.worker_timeout));
        let mut dispatched = 0u32;
        // Held from the last executor step to the landing (see the module docs).
        let mut memory: Option<crate::lock::TickLock> = None;
        loop {
            let now = Utc::now();
            let d = dispatch(&state, &rules, now);
            match d.action {
                Action::Dispatched {
                    step,
                    attempt,
                    prompt,
                } => {
                    let rule = rules.get(step).expect("a dispatched step has a rule");
                    let roles = team_roles(rule, mode);
                    let left = budget.saturating_sub(started.elapsed());
                    let needs = Duration::from_secs(u64::from(rule.timeout_min) * 60);
                    // A session is spawned for the slots of its first step: a team step later
                    // on waits for the tick to find it the slots, and so does a step the
                    // rest of WorkerTimeout would not cover.
                    let why = if run.limit.is_some_and(|n| dispatched >= n) {
                        Some(format!("{dispatched} step(s) dispatched by hand"))
                    } else if dispatched > 0 && roles.len() > 1 {
                        Some(format!("{step} runs as a team of {}", roles.len()))
                    } else if dispatched > 0 && left < needs {
                        Some(format!("the WorkerTimeout left does not cover {step}"))
                    } else {
                        None
                    };
                    if let Some(why) = why {
                        let mut waiting = d.state.clone();
                        waiting.status = Status::Pending;
                        waiting.dispatched_at = None;
                        waiting.human_note = state.human_note.clone();
                        self.save_story(&root, &bead_id, &waiting)?;
                        return self.hand_back(run, &bead_id, &why);
                    }
                    if rule.next_on_pass == Step::Done && memory.is_none() {
                        memory = Some(self.memory_stage(run, l, &ws)?);
                    }
                    dispatched += 1;
                    self.save_story(&root, &bead_id, &d.state)?;
                    run.step("dispatch", format!("{step} attempt {attempt}"));
                    let timeout = needs.min(left.max(Duration::from_secs(1)));
                    let ran =
                        self.run_step(run, l, &ws, bead, &d.state, rule, &roles, &prompt, timeout)?;
                    let history = self.history_file(l, &bead_id, &ws, memory.is_some());
                    state =
                        self.finish_step(run, &root, &bead_id, &d.state, rule, &ws, ran, &history)?;
                    if state.status == Status::Timeout {
                        self.timed_out(run, l, state.step, i64::from(state.timeout_min));
                    }
                }
                Action::Timeout { step, elapsed_min } => {
                    self.save_story(&root, &bead_id, &d.state)?;
                    state = d.state;
                    self.timed_out(run, l, step, elapsed_min);
                }
                Action::AlreadyRunning { step, .. } => {
                    // Only when another process wrote `running` since this session loaded it.
                    run.step("protocol", format!("{step} is running elsewhere; stopping"));
                    return Ok(Ending::ClaimRefused);
                }
                Action::NeedsHuman { step, message } => {
                    self.save_story(&root, &bead_id, &d.state)?;
                    return self.ask_person(run, l, &ws, &d.state, &rules, step, &message);
                }
                Action::Blocked { step, reason } => {
                    self.save_story(&root, &bead_id, &d.state)?;
                    return self.story_blocked(run, l, &d.state, step, &reason);
                }
                Action::Done { .. } => {
                    return self.story_done(run, l, ws, bead, d.state);
                }
            }
        }
    }

    /// The story's worktree, reused from its earlier sessions, or the shared work tree.
    fn story_workspace(&self, run: &mut Run<'_, '_>, l: &Loaded) -> Result<Workspace> {
        let root = &run.msg.project;
        if WorkspaceMode::of(&l.project) == WorkspaceMode::Shared || !root.join(".git").exists() {
            run.step(
                "workspace",
                "shared: the story works in the project's own work tree",
            );
            return Ok(Workspace::shared(root));
        }
        let wss = self.workspaces();
        let (ws, how) = match wss.reuse(root, &run.msg.bead)? {
            Some(ws) => (ws, "reused"),
            None => (
                crate::workspace::Workspaces::create(&wss, root, &run.msg.bead)?,
                "new",
            ),
        };
        run.step(
            "workspace",
            format!(
                "{how} worktree {} on branch {}",
                ws.dir.display(),
                ws.branch.as_deref().unwrap_or("-")
            ),
        );
        Ok(ws)
    }

    /// Where this run's archived handoff goes: the workspace's `.ai/history.md` once the story
    /// holds the memory lock (or works in the shared tree), else braids' work directory.
    fn history_file(&self, l: &Loaded, bead: &BeadId, ws: &Workspace, memory: bool) -> PathBuf {
        match memory || ws.is_shared() {
            true => ws.dir.join(handoff::HISTORY),
            false => work_dir(&self.paths.braids_dir, &l.slug, bead).join("history.md"),
        }
    }

    /// Before the last executor step: the memory lock, the story's branch rebased onto what
    /// landed meanwhile, and the waiting history entries appended to `.ai/history.md`.
    fn memory_stage(
        &self,
        run: &mut Run<'_, '_>,
        l: &Loaded,
        ws: &Workspace,
    ) -> Result<crate::lock::TickLock> {
        let root = &run.msg.project;
        let path = crate::git::lock_path(root)?.with_file_name("braids-memory.lock");
        let held = crate::lock::TickLock::acquire(&path, MEMORY_WAIT)?.ok_or_else(|| {
            anyhow::anyhow!(
                "another story held {} for over {} min",
                path.display(),
                MEMORY_WAIT.as_secs() / 60
            )
        })?;
        if !ws.is_shared() {
            let _repo = crate::app::iteration::RepoLock::acquire(root)?;
            let prepared = crate::workspace::Workspaces::prepare_landing(
                &self.workspaces(),
                ws,
                &run.msg.bead,
                &[],
            )?;
            let said = match prepared {
                crate::workspace::Prepared::Conflict { paths } => {
                    format!(
                        "conflicts with landed work ({}); the landing will say",
                        paths.join(", ")
                    )
                }
                _ => "rebased onto the landed work".to_string(),
            };
            run.step("memory", said);
            let pending =
                work_dir(&self.paths.braids_dir, &l.slug, &run.msg.bead).join("history.md");
            if let Ok(text) = std::fs::read_to_string(&pending) {
                append(&ws.dir.join(handoff::HISTORY), &text)?;
                let _ = std::fs::remove_file(&pending);
            }
        }
        Ok(held)
    }

    /// Writes the story's state. The worker owns a story while it runs; a person's command and
    /// the tick take the tick lock, which a running worker's session keeps them from racing.
    fn save_story(&self, root: &Path, bead: &BeadId, s: &StoryState) -> Result<()> {
        story::save(root, s, bead)
    }

    /// Runs one dispatched step and says what it reported.
    #[allow(clippy::too_many_arguments)]
    fn run_step(
        &self,
        run: &mut Run<'_, '_>,
        l: &Loaded,
        ws: &Workspace,
        bead: &Bead,
        state: &StoryState,
        rule: &Rule,
        roles: &[crate::protocol::rules::Role],
        prompt: &str,
        timeout: Duration,
    ) -> Result<Ran> {
        if rule.runner == Runner::Braids {
            return Ok(Ran::Report(Some(self.commit_step(run, ws, bead)?)));
        }
        let wd = work_dir(&self.paths.braids_dir, &l.slug, &bead.id);
        let tag = format!("{}-{}", state.step, state.attempt);
        if roles.len() <= 1 {
            let prompt_file = wd.join(format!("prompt-{tag}.md"));
            crate::atomic::write(&prompt_file, prompt.as_bytes())?;
            crate::atomic::write(&wd.join("prompt.md"), prompt.as_bytes())?;
            let before = stamp(&ws.dir.join(handoff::HANDOFF));
            let _ = std::fs::remove_file(ws.dir.join(handoff::EXECUTOR_RESULT));
            let res = self.exec(run, l, ws, &bead.id, &prompt_file, timeout);
            if res.timed_out {
                return Ok(Ran::TimedOut);
            }
            let fresh = stamp(&ws.dir.join(handoff::HANDOFF)) != before
                || ws.dir.join(handoff::EXECUTOR_RESULT).exists();
            let found = fresh
                .then(|| handoff::read(&ws.dir, handoff::HANDOFF))
                .flatten();
            let _ = std::fs::remove_file(ws.dir.join(handoff::EXECUTOR_RESULT));
            return Ok(Ran::Report(found.map(|h| with_exit(h, &res))));
        }
        // A team: one executor per role at once, each with its own prompt and handoff file.
        let mut jobs = Vec::new();
        for role in roles {
            // The note was taken into the step's prompt by the dispatch; each role gets it.
            let p = crate::protocol::prompt::build_for(state, rule, None, Some(role));
            let p = carry_note(prompt, p);
            let file = wd.join(format!("prompt-{tag}-{}.md", role.name));
            crate::atomic::write(&file, p.as_bytes())?;
            let _ = std::fs::remove_file(ws.dir.join(team::handoff_of(&role.name)));
            jobs.push((role.name.clone(), file));
        }
        run.step(
            "team",
            format!(
                "{} roles at once: {}",
                jobs.len(),
                jobs.iter()
                    .map(|j| j.0.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        );
        let results: Vec<(String, ExecResult)> = std::thread::scope(|s| {
            let handles: Vec<_> = jobs
                .iter()
                .map(|(name, file)| {
                    let req = self.request(l, ws, &bead.id, file, timeout);
                    let name = name.clone();
                    s.spawn(move || {
                        let res = self.executor.run(&req).unwrap_or_else(|e| ExecResult {
                            code: None,
                            timed_out: false,
                            tail: format!("failed to start: {e}"),
                        });
                        (name, res)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("a role's thread"))
                .collect()
        });
        run.hold = Some(stop::Hold::new());
        if results.iter().any(|(_, r)| r.timed_out) {
            return Ok(Ran::TimedOut);
        }
        let found: Vec<(String, Option<Handoff>)> = results
            .iter()
            .map(|(name, res)| {
                let rel = team::handoff_of(name);
                let h = handoff::read_file(&ws.dir.join(&rel)).map(|h| with_exit(h, res));
                (name.clone(), h)
            })
            .collect();
        let merged = team::merge(state, &found);
        crate::atomic::write(&ws.dir.join(handoff::HANDOFF), merged.text.as_bytes())?;
        for (file, roles) in &merged.conflicts {
            run.step(
                "team",
                format!("conflict: {file} written by {}", roles.join(" and ")),
            );
        }
        Ok(Ran::Report(Some(merged.handoff)))
    }

    fn request(
        &self,
        l: &Loaded,
        ws: &Workspace,
        bead: &BeadId,
        prompt: &Path,
        timeout: Duration,
    ) -> ExecRequest {
        ExecRequest {
            project: ws.project.clone(),
            workspace: ws.dir.clone(),
            bead: bead.clone(),
            prompt_file: prompt.to_path_buf(),
            deliverable: ws.here(&l.iteration.dir),
            result_file: ws.dir.join(handoff::EXECUTOR_RESULT),
            timeout,
            activity: self.paths.activity(&l.slug, bead),
        }
    }

    /// One executor run; a failure to start is an exit without a report.
    fn exec(
        &self,
        run: &mut Run<'_, '_>,
        l: &Loaded,
        ws: &Workspace,
        bead: &BeadId,
        prompt: &Path,
        timeout: Duration,
    ) -> ExecResult {
        run.hold = None;
        let req = self.request(l, ws, bead, prompt, timeout);
        let res = self.executor.run(&req).unwrap_or_else(|e| ExecResult {
            code: None,
            timed_out: false,
            tail: format!("failed to start: {e}"),
        });
        run.hold = Some(stop::Hold::new());
        res
    }

    /// Applies what a step reported, runs its `post_check`, archives the handoff and writes the
    /// state; returns the state the next dispatch starts from.
    #[allow(clippy::too_many_arguments)]
    fn finish_step(
        &self,
        run: &mut Run<'_, '_>,
        root: &Path,
        bead: &BeadId,
        running: &StoryState,
        rule: &Rule,
        ws: &Workspace,
        ran: Ran,
        history: &Path,
    ) -> Result<StoryState> {
        let now = Utc::now();
        let found = match ran {
            Ran::TimedOut => {
                let mut s = running.clone();
                s.status = Status::Timeout;
                s.completed_at = Some(now);
                s.last_error = Some(format!(
                    "{} timed out after {} min (timeout_min)",
                    s.step, s.timeout_min
                ));
                self.save_story(root, bead, &s)?;
                return Ok(s);
            }
            Ran::Report(found) => found,
        };
        for w in found.iter().flat_map(|h| &h.warnings) {
            tracing::warn!(bead = %bead, "{w}");
            run.step("report", format!("warning: {w}"));
        }
        let mut s = handoff::apply(running, found.as_ref(), rule, now);
        if let Some(check) = &rule.post_check {
            let (passed, detail) = post_check(&ws.dir, &check.argv());
            run.step(
                "post_check",
                format!(
                    "{}: {}",
                    check.shown(),
                    if passed { "passed" } else { "failed" }
                ),
            );
            s = handoff::apply_post_check(&s, passed, &detail);
        }
        let entry = handoff::archive_entry(&s, found.as_ref(), now);
        append(history, &entry)?;
        run.step(
            "step",
            format!(
                "{} attempt {}: {}{}{}",
                s.step,
                s.attempt,
                s.status,
                s.reason.map_or(String::new(), |r| format!(" ({r})")),
                s.last_error
                    .as_deref()
                    .map_or(String::new(), |e| format!(": {}", clip(e, 200)))
            ),
        );
        self.save_story(root, bead, &s)?;
        Ok(s)
    }

    /// braids' own `commit` step: the story's changes staged and committed with a conventional
    /// message carrying the story id; the hash recorded. Nothing to commit still passes, with
    /// the current commit.
    fn commit_step(&self, run: &mut Run<'_, '_>, ws: &Workspace, bead: &Bead) -> Result<Handoff> {
        let _lock = crate::app::iteration::RepoLock::acquire(&ws.project)?;
        let mut skip: Vec<PathBuf> = NOT_COMMITTED.iter().map(|p| ws.dir.join(p)).collect();
        skip.extend(
            crate::lifecycle::TRACKER_FILES
                .iter()
                .map(|p| ws.dir.join(p)),
        );
        skip.extend(crate::events::GENERATED.iter().map(|p| ws.dir.join(p)));
        let message = format!("feat({}): {}", bead.id, super::first_line(&bead.title));
        let oid = crate::git::commit_all_except(&ws.dir, &skip, &[], &message)?;
        let hash = match oid {
            Some(o) => o.to_string(),
            None => crate::git::open(&ws.dir)?
                .head()?
                .peel_to_commit()?
                .id()
                .to_string(),
        };
        run.step("commit", format!("{hash} {message}"));
        Ok(Handoff {
            status: Some(Status::Pass),
            summary: Some(message),
            commit_hash: Some(hash),
            source: "braids",
            ..Handoff::default()
        })
    }

    fn timed_out(&self, run: &mut Run<'_, '_>, l: &Loaded, step: Step, minutes: i64) {
        let text = format!(
            "[{}] {}: step {step} timed out after {minutes} min; the next dispatch counts it as a failed attempt",
            l.slug, run.msg.bead
        );
        run.notify(l, NotificationEvent::Blocker, &text);
    }

    /// A review or a question: the person is told what to read and what to run; the bead keeps
    /// its claim (in_progress), holding no worker slot, until they answer.
    #[allow(clippy::too_many_arguments)]
    fn ask_person(
        &self,
        run: &mut Run<'_, '_>,
        l: &Loaded,
        ws: &Workspace,
        s: &StoryState,
        rules: &Rules,
        step: Step,
        message: &str,
    ) -> Result<Ending> {
        let story_id = s.story.as_deref().unwrap_or("");
        let reads: Vec<String> = if step == Step::Review {
            [Step::Bdd, Step::SddDelta, Step::Contract]
                .iter()
                .filter_map(|st| rules.get(*st))
                .flat_map(|r| r.claude_writes.iter())
                .map(|w| crate::protocol::rules::resolve(w, story_id))
                .filter(|w| !w.contains('*'))
                .map(|w| ws.dir.join(w).display().to_string())
                .collect()
        } else {
            vec![ws.dir.join(handoff::HANDOFF).display().to_string()]
        };
        let question = format!(
            "[{}] {message}. Read: {}. Then run `braids review approve {} {}` (add --note \"…\" for the next step) or `braids review reject {} {} --reason needs_clarification --note \"…\"`.",
            l.slug,
            reads.join(", "),
            l.slug,
            run.msg.bead,
            l.slug,
            run.msg.bead,
        );
        run.step(
            "question",
            format!("bead blocked until answered: {message}"),
        );
        run.notify(l, NotificationEvent::Question, &question);
        Ok(Ending::AwaitingHuman)
    }

    /// Out of attempts: the bead is blocked and a person told; the story and its workspace
    /// stay as they are for `braids story reset` or a retry.
    fn story_blocked(
        &self,
        run: &mut Run<'_, '_>,
        l: &Loaded,
        s: &StoryState,
        step: Step,
        reason: &str,
    ) -> Result<Ending> {
        let last = s.last_error.as_deref().map_or(String::new(), |e| {
            format!(" (last error: {})", clip(e, 200))
        });
        let why = format!("{reason}{last}");
        self.tracker.block(&run.msg.bead, &why)?;
        run.step("block", format!("bead blocked at {step}: {why}"));
        run.notify(
            l,
            NotificationEvent::Blocker,
            &format!("[{}] {} is blocked: {why}.", l.slug, run.msg.bead),
        );
        Ok(Ending::Blocked { reason: why })
    }

    /// A story file or rules table braids cannot read: the story is held (the bead blocked,
    /// a person told), never guessed at.
    fn hold_story(&self, run: &mut Run<'_, '_>, l: &Loaded, why: &str) -> Result<Ending> {
        self.tracker.block(&run.msg.bead, why)?;
        run.step("block", format!("story held: {why}"));
        run.notify(
            l,
            NotificationEvent::Blocker,
            &format!("[{}] {} is held: {why}", l.slug, run.msg.bead),
        );
        Ok(Ending::Blocked {
            reason: why.to_string(),
        })
    }

    /// The next step waits for the tick: the bead goes back to open, its story kept.
    fn hand_back(&self, run: &mut Run<'_, '_>, bead: &BeadId, why: &str) -> Result<Ending> {
        self.tracker
            .reopen(bead, &format!("protocol: {why}; the next tick goes on"))?;
        run.step("protocol", format!("handed back to the tick: {why}"));
        Ok(Ending::HandedBack {
            why: why.to_string(),
        })
    }

    /// The chain is complete: braids writes the deliverable from the story, then closes,
    /// commits and pushes as for any bead (3.4–3.7, 4.4).
    fn story_done(
        &self,
        run: &mut Run<'_, '_>,
        l: &Loaded,
        ws: Workspace,
        bead: &Bead,
        mut s: StoryState,
    ) -> Result<Ending> {
        let root = run.msg.project.clone();
        let expected = ws.here(&l.deliverable_for(bead));
        let history = std::fs::read_to_string(ws.dir.join(handoff::HISTORY)).unwrap_or_default();
        let text = deliverable_text(bead, &s, &history);
        if let Some(dir) = expected.parent() {
            std::fs::create_dir_all(dir)?;
        }
        crate::atomic::write(&expected, text.as_bytes())?;
        let summary = format!("{} walked the protocol to done", bead.title);
        let mut report = StatusReport::assumed(Some(summary));
        report.source = "the protocol pipeline";
        if !ws.is_shared() {
            run.ws = Some(ws.clone());
        }
        let ending = self.finish(run, l, &ws, bead, &report, &expected)?;
        if let Ending::Completed { commit, .. } = &ending {
            s.status = Status::Pass;
            s.completed_at = Some(Utc::now());
            if commit.is_some() {
                s.commit_hash = commit.clone();
            }
            self.save_story(&root, &bead.id, &s)?;
        }
        Ok(ending)
    }
}

/// How long a story waits for another's last step and landing.
const MEMORY_WAIT: Duration = Duration::from_secs(3600);

/// What running a step gave.
enum Ran {
    Report(Option<Handoff>),
    TimedOut,
}

/// The roles a dispatched step runs with: one (the step itself) unless the story is a team
/// story and the step has roles.
fn team_roles(rule: &Rule, mode: team::Mode) -> Vec<crate::protocol::rules::Role> {
    match mode {
        team::Mode::Team if rule.team_roles.len() > 1 => rule.team_roles.clone(),
        _ => Vec::new(),
    }
}

/// A human instruction in the step's prompt goes into every role's prompt too.
fn carry_note(step_prompt: &str, role_prompt: String) -> String {
    let Some(start) = step_prompt.find("=== Human Instruction ===") else {
        return role_prompt;
    };
    let block = &step_prompt[start..];
    let end = block
        .find("==========================\n")
        .map_or(block.len(), |e| e + 27);
    format!("{role_prompt}\n{}", &block[..end])
}

/// A report from an executor that exited non-zero without saying `failing` is not a pass.
fn with_exit(mut h: Handoff, res: &ExecResult) -> Handoff {
    if res.code != Some(0) && h.status == Some(Status::Pass) {
        h.warnings.push(format!(
            "the executor reported pass but exited with {}",
            crate::proc::exit_text(res.code)
        ));
        h.status = Some(Status::Failing);
    }
    h
}

/// Runs a `post_check` argv in the workspace: never through a shell unless the project's own
/// rules said `{shell: …}` (then it is `sh -c` with the string as one argument).
fn post_check(dir: &Path, argv: &[String]) -> (bool, String) {
    let out = crate::proc::Invocation::new(argv.iter().map(String::as_str))
        .cwd(dir)
        .timeout(Duration::from_secs(600))
        .run();
    match out {
        Ok(o) if o.success() => (true, String::new()),
        Ok(o) => (false, clip(&format!("{}{}", o.stdout, o.stderr), 300)),
        Err(e) => (false, format!("{e}")),
    }
}

/// Appends to a file (temp + rename of the whole: a crash leaves the old or the new text).
fn append(path: &Path, entry: &str) -> Result<()> {
    let mut text = std::fs::read_to_string(path).unwrap_or_default();
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(entry);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    crate::atomic::write(path, text.as_bytes())
}

type Stamp = Option<(Vec<u8>, Option<std::time::SystemTime>)>;

fn stamp(p: &Path) -> Stamp {
    let bytes = std::fs::read(p).ok()?;
    Some((bytes, std::fs::metadata(p).and_then(|m| m.modified()).ok()))
}

/// The bead's deliverable: what the story did, from its history, tests, files and commit.
fn deliverable_text(bead: &Bead, s: &StoryState, history: &str) -> String {
    let story = s.story.as_deref().unwrap_or(bead.id.as_str());
    let steps: Vec<&str> = history
        .lines()
        .filter(|l| l.starts_with("## ") && l.contains(story))
        .map(|l| l.trim_start_matches("## "))
        .collect();
    let tests = s.tests.map_or("none reported".to_string(), |t| {
        format!("{} pass, {} fail, {} skip", t.pass, t.fail, t.skip)
    });
    let files = if s.files_changed.is_empty() {
        "none reported".to_string()
    } else {
        s.files_changed.join(", ")
    };
    let details = format!(
        "Steps:\n\n{}\n\nTests: {tests}\n\nFiles changed: {files}\n\nStory commit: {}\n",
        if steps.is_empty() {
            "- (no history)".to_string()
        } else {
            steps
                .iter()
                .map(|s| format!("- {s}"))
                .collect::<Vec<_>>()
                .join("\n")
        },
        s.commit_hash.as_deref().unwrap_or("none"),
    );
    crate::templates::render(
        crate::templates::DELIVERABLE,
        &[
            ("title", &bead.title),
            ("bead", bead.id.as_str()),
            (
                "summary",
                &format!(
                    "The story walked the Agentic Coding Protocol's steps to done ({} steps run).",
                    steps.len()
                ),
            ),
            ("details", &details),
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_post_check_is_argv_and_never_reaches_a_shell_unasked() {
        let dir = tempfile::tempdir().unwrap();
        let argv = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        // a report's text in an argument stays an argument
        let (ok, _) = post_check(dir.path(), &argv(&["test", "-e", "$(touch pwned); x"]));
        assert!(!ok);
        assert!(!dir.path().join("pwned").exists());
        assert!(post_check(dir.path(), &argv(&["true"])).0);
        let (ok, detail) = post_check(
            dir.path(),
            &argv(&["sh", "-c", "echo lint: 3 problems; exit 1"]),
        );
        assert!(!ok);
        assert!(detail.contains("lint: 3 problems"), "{detail}");
        let (ok, detail) = post_check(dir.path(), &argv(&["no-such-program-anywhere"]));
        assert!(!ok && !detail.is_empty());
        // a shell string runs only as `sh -c <string>`, written by the project itself
        let shell = crate::protocol::PostCheck::Shell("touch made-by-the-project".into()).argv();
        assert!(post_check(dir.path(), &shell).0);
        assert!(dir.path().join("made-by-the-project").exists());
    }

    #[test]
    fn the_note_reaches_every_role_and_the_deliverable_tells_the_story() {
        let step =
            "header\n\n=== Human Instruction ===\nUse UTC\n==========================\n\nrest";
        let role = carry_note(step, "role prompt".into());
        assert!(
            role.ends_with("=== Human Instruction ===\nUse UTC\n==========================\n"),
            "{role}"
        );
        assert_eq!(carry_note("no note", "role".into()), "role");
        let bead = Bead::new(
            BeadId::new("app-1").unwrap(),
            "Checkout",
            crate::model::BeadStatus::InProgress,
        );
        let mut s = StoryState::new("app", &bead.id, Step::Done);
        s.commit_hash = Some("abc".into());
        let text = deliverable_text(
            &bead,
            &s,
            "\n## app-1 bdd attempt 1 — pass (t)\n\n## app-2 bdd attempt 1 — pass (t)\n",
        );
        assert!(
            text.contains("## Summary") && text.contains("- app-1 bdd attempt 1 — pass (t)"),
            "{text}"
        );
        assert!(
            !text.contains("app-2"),
            "another story's history is not this one's"
        );
        assert!(text.contains("Story commit: abc"));
    }
}
