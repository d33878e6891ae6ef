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

use crate::format::project::test_command::TestCommand;
use crate::model::{Bead, BeadId, NotificationEvent};
use crate::protocol::handoff::{self, Handoff};
use crate::protocol::story_state::{self as story, StoryState};
use crate::protocol::{dispatch, measured, overrides, team, Action, Rule, Status, Step};
use crate::workspace::{Workspace, WorkspaceMode};

use super::context::Loaded;
use super::executor::agent_budget;
use super::{clip, work_dir, Ending, Run, Worker};

mod end;
mod level1;
mod measure;
mod run;

pub use level1::{apply_by_hand, dispatch_one, Applied};
use run::post_check;

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
        let project_tests = l.project.test_command();
        let mut state = match story::load(&root, &bead_id) {
            story::Loaded::Missing => {
                StoryState::new(&l.slug, &bead_id, Step::first_of(&bead.title))
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
        let mut memory: Option<crate::system::lock::TickLock> = None;
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
                    let roles = team::at_once(rule, mode);
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
                    let prompt = super::context::story_prompt(l, &prompt);
                    let ran =
                        self.run_step(run, l, &ws, bead, &d.state, rule, &roles, &prompt, timeout)?;
                    let conflict = match &ran {
                        Ran::Report(Some(h)) if h.guardrail_conflict => Some(h.summary.clone()),
                        _ => None,
                    };
                    let history = self.history_file(l, &bead_id, &ws, memory.is_some());
                    let tests = measured::command_for(rule, project_tests.as_ref())
                        .filter(|_| rule.runner == crate::protocol::Runner::Executor);
                    let step = Finishing {
                        running: &d.state,
                        rule,
                        tests: tests.as_ref(),
                        history: &history,
                    };
                    state = self.finish_step(run, l, &bead_id, &ws, step, ran)?;
                    if let Some(which) = conflict {
                        // As for a bead (3.10): blocked at once, never retried, a person told.
                        return self.guardrail(run, l, bead, which.as_deref());
                    }
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

    /// The story's `blocked_by`, from its bead's open dependencies: recorded (and cleared when
    /// they have closed); while any is open the bead is handed back open, so the tick spawns
    /// it again once the tracker says it is ready.
    pub(super) fn story_dependencies(
        &self,
        run: &mut Run<'_, '_>,
        l: &Loaded,
        bead: &Bead,
    ) -> Result<Option<Ending>> {
        let open: Vec<String> = self
            .open_dependencies(bead)?
            .iter()
            .map(|d| d.to_string())
            .collect();
        let fresh = || StoryState::new(&l.slug, &bead.id, Step::first_of(&bead.title));
        story::set_blocked_by(&run.msg.project, &bead.id, fresh, &open)?;
        if open.is_empty() {
            super::claim::all_closed(run, bead);
            return Ok(None);
        }
        let why = format!("waits for its dependencies {}", open.join(", "));
        run.step(
            "dependencies",
            format!("open: {}; blocked_by recorded", open.join(", ")),
        );
        self.hand_back(run, &bead.id, &why).map(Some)
    }

    /// The story's worktree, reused from its earlier sessions, or the shared work tree.
    pub(super) fn story_workspace(&self, run: &mut Run<'_, '_>, l: &Loaded) -> Result<Workspace> {
        let root = &run.msg.project;
        if WorkspaceMode::of(&l.project) == WorkspaceMode::Shared || !root.join(".git").exists() {
            run.step(
                "workspace",
                "shared: the story works in the project's own work tree",
            );
            return Ok(Workspace::shared(root));
        }
        let wss = self.workspaces(l);
        let (ws, how) = match wss.reuse(root, &run.msg.bead)? {
            Some(ws) => (ws, "reused"),
            None => {
                use crate::workspace::Workspaces;
                let ws = wss.create(root, &run.msg.bead)?;
                // A story's steps need what any bead's agent does; a setup that fails is the
                // step's error.
                if let Some(setup) = wss.make_ready(&ws)?.setup.filter(|s| !s.ok) {
                    anyhow::bail!(
                        "the project's setup command failed in the new workspace: {}",
                        crate::system::templates::clip(&setup.output, 1500)
                    );
                }
                (ws, "new")
            }
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
    ) -> Result<crate::system::lock::TickLock> {
        let root = &run.msg.project;
        let path = crate::git::lock_path(root)?.with_file_name("braids-memory.lock");
        let held =
            crate::system::lock::TickLock::acquire(&path, MEMORY_WAIT)?.ok_or_else(|| {
                anyhow::anyhow!(
                    "another story held {} for over {} min",
                    path.display(),
                    MEMORY_WAIT.as_secs() / 60
                )
            })?;
        if !ws.is_shared() {
            let _repo = crate::app::iteration::RepoLock::acquire(root)?;
            let prepared = crate::workspace::Workspaces::prepare_landing(
                &self.workspaces(l),
                ws,
                &run.msg.bead,
                &[],
                None,
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
                append(&ws.dir, &ws.dir.join(handoff::HISTORY), &text)?;
                let _ = std::fs::remove_file(&pending);
            }
        }
        Ok(held)
    }

    /// Writes the story's state. The worker owns a story while it runs; a person's command and
    /// the tick take the tick lock, which a running worker's session keeps them from racing.
    pub(super) fn save_story(&self, root: &Path, bead: &BeadId, s: &StoryState) -> Result<()> {
        story::save(root, s, bead)
    }

    /// Applies what a step reported, runs its test command and its `post_check`, archives the
    /// handoff and writes the state; returns the state the next dispatch starts from.
    fn finish_step(
        &self,
        run: &mut Run<'_, '_>,
        l: &Loaded,
        bead: &BeadId,
        ws: &Workspace,
        f: Finishing<'_>,
        ran: Ran,
    ) -> Result<StoryState> {
        let Finishing {
            running,
            rule,
            tests,
            history,
        } = f;
        let root = run.msg.project.clone();
        let root = root.as_path();
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
            Ran::Report(found) => found.map(|h| *h),
        };
        for w in found.iter().flat_map(|h| &h.warnings) {
            tracing::warn!(bead = %bead, "{w}");
            run.step("report", format!("warning: {w}"));
        }
        let settled = settle(
            running,
            found.as_ref(),
            rule,
            (&ws.dir, history),
            now,
            |applied| match tests {
                Some(cmd) => self.measure(run, l, bead, ws, applied, found.as_ref(), cmd, rule),
                None => applied.clone(),
            },
        )?;
        if let Some(said) = &settled.post_check {
            run.step("post_check", said.clone());
        }
        let s = settled.state;
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

    pub(super) fn timed_out(&self, run: &mut Run<'_, '_>, l: &Loaded, step: Step, minutes: i64) {
        let text = format!(
            "[{}] {}: step {step} timed out after {minutes} min; the next dispatch counts it as a failed attempt",
            l.slug, run.msg.bead
        );
        run.notify(l, NotificationEvent::Blocker, &text);
    }
}

/// A step ended: its report applied, then `measure`d (braids' own test run, where the step has
/// a test command), its `post_check` run and its archived handoff appended to `history`. The worker's sessions and a person's `braids story apply` both end a step
/// here, so a report written by hand counts exactly as one an executor wrote.
pub(crate) struct Settled {
    pub state: StoryState,
    /// `<check>: passed|failed`, when the step has a `post_check`.
    pub post_check: Option<String>,
}

pub(crate) fn settle(
    running: &StoryState,
    found: Option<&Handoff>,
    rule: &Rule,
    (dir, history): (&Path, &Path),
    now: chrono::DateTime<Utc>,
    measure: impl FnOnce(&StoryState) -> StoryState,
) -> Result<Settled> {
    let mut s = measure(&handoff::apply(running, found, rule, now));
    let mut said = None;
    if let Some(check) = &rule.post_check {
        let (passed, detail) = post_check(dir, &check.argv());
        said = Some(format!(
            "{}: {}",
            check.shown(),
            if passed { "passed" } else { "failed" }
        ));
        s = handoff::apply_post_check(&s, passed, &detail);
    }
    let entry = handoff::archive_entry(&s, found, now);
    append(dir, history, &entry)?;
    Ok(Settled {
        state: s,
        post_check: said,
    })
}

/// What `finish_step` needs of the dispatched step.
struct Finishing<'a> {
    running: &'a StoryState,
    rule: &'a Rule,
    /// The test command braids runs after the executor, if the step has one.
    tests: Option<&'a TestCommand>,
    history: &'a Path,
}

/// How long a story waits for another's last step and landing.
const MEMORY_WAIT: Duration = Duration::from_secs(3600);

/// What running a step gave.
pub(super) enum Ran {
    Report(Option<Box<Handoff>>),
    TimedOut,
}

/// Appends to a file (temp + rename of the whole: a crash leaves the old or the new text). A
/// file in the workspace `root` is read beneath it, and one that cannot be (a planted link) is
/// replaced; braids' own files elsewhere are read as they are.
pub(super) fn append(root: &Path, path: &Path, entry: &str) -> Result<()> {
    let mut text = crate::system::beneath::read_within(root, path).unwrap_or_default();
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(entry);
    crate::system::beneath::write_within(root, path, text.as_bytes())
}
