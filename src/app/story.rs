//! A person's part in the protocol pipeline (`Pipeline: protocol`): start or reset a story,
//! see where it is and what comes next, leave a note for its next prompt, approve or reject
//! a review, record an error, and Level 1, dispatching one step in the foreground.
//!
//! Every change is made holding the tick lock, so no tick acts on a story half-changed; a
//! story that waits for the tick gets its bead open again and the tick is woken.

use anyhow::{bail, Result};
use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::config::installation::Installation;
use crate::model::BeadStatus;
use crate::protocol::story_state::{self as story, StoryState};
use crate::protocol::{dispatch, overrides, Action, Reason, Runner, Status, Step};

use super::beads::{self, Located};

/// What `braids story show` says: the state, what happens next, and one sentence for whoever
/// (a person, a script, an LLM) called it.
#[derive(Debug, Serialize)]
pub struct Shown {
    pub project: String,
    pub bead: String,
    pub state: Option<StoryState>,
    /// The step the next dispatch runs or waits at; `done` at the end.
    pub next_step: Option<String>,
    /// What the next dispatch would do (`dispatched`, `needs_human`, `blocked`, …).
    pub next: String,
    pub caller_instruction: String,
    /// The next step's prompt, when it is an agent's: what a person gives their own agent at
    /// Level 1 before `braids story apply`.
    pub prompt: Option<String>,
    /// The test counts, and whether braids measured them or they are the agent's claim.
    pub tests: Option<String>,
}

pub fn find(inst: &Installation, project: &str, bead: &str, write: bool) -> Result<Located> {
    let found = beads::locate(inst, &format!("{project}:{bead}"), write)?;
    if crate::protocol::Pipeline::of(&found.project.config) != crate::protocol::Pipeline::Protocol {
        bail!(
            "{} does not run the protocol pipeline; add `Pipeline: protocol` to its .braids/PROJECT.md",
            found.project.entry.slug
        );
    }
    Ok(found)
}

fn current(found: &Located) -> Result<Option<StoryState>> {
    match story::load(&found.project.entry.path, &found.bead.id) {
        story::Loaded::Missing => Ok(None),
        story::Loaded::Valid(s) => Ok(Some(s)),
        story::Loaded::Invalid(e) => bail!("{e}"),
    }
}

/// Where a story is and what comes next.
pub fn show(inst: &Installation, project: &str, bead: &str, now: DateTime<Utc>) -> Result<Shown> {
    let found = find(inst, project, bead, false)?;
    let slug = found.project.entry.slug.clone();
    let id = found.bead.id.clone();
    let rules = overrides::load(&found.project.entry.path)
        .map_err(|p| anyhow::anyhow!("{}", p.sentence()))?;
    let state = current(&found)?;
    let cmd = |what: &str| format!("braids {what} {slug} {id}");
    let mut prompt = None;
    let (next_step, next, caller_instruction) = match &state {
        None => (
            Some(Step::Bdd.to_string()),
            "not_started".to_string(),
            format!(
                "The story has not started; the tick starts it at bdd when the bead is ready, or run `{}`.",
                cmd("story start")
            ),
        ),
        Some(s) => {
            let d = dispatch(s, &rules, now);
            let kind = d.action.kind().to_string();
            match d.action {
                Action::Dispatched {
                    step,
                    attempt,
                    prompt: text,
                } => {
                    let by_hand = rules.get(step).is_some_and(|r| r.runner != Runner::Braids);
                    let said = match by_hand {
                        true => {
                            prompt = Some(text);
                            format!(
                                "The next dispatch runs {step} (attempt {attempt}); the tick does it, or run `{}` to run it now, or give the prompt to your own agent and run `{}` on the HANDOFF it writes.",
                                cmd("story dispatch"),
                                cmd("story apply")
                            )
                        }
                        false => format!(
                            "The next dispatch runs {step} (attempt {attempt}), braids' own step; the tick does it, or run `{}` to run it now.",
                            cmd("story dispatch")
                        ),
                    };
                    (Some(step.to_string()), kind, said)
                }
                Action::NeedsHuman { step, .. } if step != Step::Review => (
                    Some(step.to_string()),
                    kind,
                    format!(
                        "The executor asks at {step}: \"{}\"; run `braids answer {slug}:{id} \"…\"`, and the answer reaches {step}'s next prompt, no attempt spent.",
                        s.last_error.as_deref().unwrap_or("a question")
                    ),
                ),
                Action::NeedsHuman { step, .. } => (
                    Some(step.to_string()),
                    kind,
                    format!(
                        "A person must decide at {step}: run `{}` or `{} --reason needs_clarification --note \"…\"`; nothing runs until then.",
                        cmd("review approve"),
                        cmd("review reject")
                    ),
                ),
                Action::Blocked { step, .. } if !s.blocked_by.is_empty() => (
                    Some(step.to_string()),
                    kind,
                    format!(
                        "The story waits for its dependencies {} at {step}; it resumes by itself when they close, no person needed.",
                        s.blocked_by.join(", ")
                    ),
                ),
                Action::Blocked { step, reason } => (
                    Some(step.to_string()),
                    kind,
                    format!(
                        "The story is blocked ({reason}); fix what last_error says, then run `{} --step {step}` to try it again.",
                        cmd("story reset")
                    ),
                ),
                Action::Done { .. } => (
                    Some(Step::Done.to_string()),
                    kind,
                    "The story is done; there is nothing to dispatch.".to_string(),
                ),
                Action::AlreadyRunning { step, elapsed_min } => (
                    Some(step.to_string()),
                    kind,
                    format!("{step} is running ({elapsed_min} min so far); wait for it, `braids logs {id}` shows its output."),
                ),
                Action::Timeout { step, elapsed_min } => (
                    Some(step.to_string()),
                    kind,
                    format!("{step} has run {elapsed_min} min, past its timeout; the next tick stops it and counts a failed attempt."),
                ),
            }
        }
    };
    Ok(Shown {
        project: slug,
        bead: id.to_string(),
        tests: state.as_ref().and_then(crate::protocol::measured::summary),
        state,
        next_step,
        next,
        caller_instruction,
        prompt,
    })
}

/// What a change did, for the CLI to print.
#[derive(Debug, Serialize)]
pub struct Changed {
    pub project: String,
    pub bead: String,
    pub state: StoryState,
    pub said: String,
}

/// Changes a story under the tick lock with `f`, then lets the tick go on with it: a bead the
/// story's change makes workable again is reopened, and the tick woken.
fn change(
    inst: &Installation,
    project: &str,
    bead: &str,
    f: impl FnOnce(&Located, Option<&StoryState>) -> Result<(StoryState, String)>,
) -> Result<Changed> {
    let held = beads::hold_ticks(&inst.paths)?;
    let found = find(inst, project, bead, true)?;
    let root = found.project.entry.path.clone();
    let id = found.bead.id.clone();
    let sessions = inst.backend.list()?;
    let live = beads::live_session(&sessions, &found.project.entry.slug, &id).is_some();
    let mut out = None;
    let mut err = None;
    story::update(&root, &id, |cur| match f(&found, cur) {
        Ok((next, said)) => {
            out = Some((next.clone(), said));
            (Some(next), ())
        }
        Err(e) => {
            err = Some(e);
            (None, ())
        }
    })?;
    if let Some(e) = err {
        return Err(e);
    }
    let (state, said) = out.expect("set when no error");
    if !live && !state.waits_for_human() && !state.is_done() && state.status != Status::Running {
        reopen_if_held(&found)?;
    }
    drop(held);
    crate::tick::orchestrator_state::wake(&inst.paths, crate::tick::orchestrator_state::WAKE_WAIT);
    Ok(Changed {
        project: found.project.entry.slug.clone(),
        bead: id.to_string(),
        state,
        said,
    })
}

/// A story's bead kept in_progress (a review) or blocked (out of attempts) goes back to open,
/// so the tick spawns its next step; a live worker's bead is left alone.
pub(crate) fn reopen_if_held(found: &Located) -> Result<()> {
    let bead = &found.bead;
    if matches!(bead.status, BeadStatus::InProgress | BeadStatus::Blocked) {
        found
            .project
            .tracker
            .reopen(&bead.id, "protocol: a person moved the story on")?;
    }
    Ok(())
}

/// The bead's dependencies the tracker does not say are closed.
fn open_dependencies(found: &Located) -> Result<Vec<String>> {
    let open = crate::tracker::open_dependencies(found.project.tracker.as_ref(), &found.bead)?;
    Ok(open.iter().map(|d| d.to_string()).collect())
}

fn refuse_running(found: &Located, s: Option<&StoryState>, force: bool, what: &str) -> Result<()> {
    match s {
        Some(s) if s.status == Status::Running && !force => bail!(
            "{} is running {}; wait for it, or add --force to {what} it anyway",
            found.bead.id,
            s.step
        ),
        Some(s) if s.is_done() && !force => {
            bail!("{} is done; add --force to {what} it anyway", found.bead.id)
        }
        _ => Ok(()),
    }
}

/// `story start`: a fresh story at bdd (or `bootstrap`); refuses a running or done one.
pub fn start(
    inst: &Installation,
    project: &str,
    bead: &str,
    bootstrap: bool,
    force: bool,
) -> Result<Changed> {
    change(inst, project, bead, |found, cur| {
        refuse_running(found, cur, force, "restart")?;
        let first = if bootstrap {
            Step::Bootstrap
        } else {
            Step::Bdd
        };
        let mut s = StoryState::new(&found.project.entry.slug, &found.bead.id, first);
        s.blocked_by = open_dependencies(found)?;
        let said = match s.blocked_by.is_empty() {
            true => format!("started at {first}"),
            false => format!(
                "started at {first}, waiting for its dependencies {}",
                s.blocked_by.join(", ")
            ),
        };
        Ok((s, said))
    })
}

/// `story reset`: back to `step` (bdd by default) at attempt 1, the last error forgotten.
pub fn reset(
    inst: &Installation,
    project: &str,
    bead: &str,
    step: Option<&str>,
    force: bool,
) -> Result<Changed> {
    let to = match step {
        None => Step::Bdd,
        Some(s) => Step::parse(s.trim())
            .filter(|s| *s != Step::Done)
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "`{s}` is not a step to reset to; use one of {}",
                    Step::spellings().replace(", done", "")
                )
            })?,
    };
    change(inst, project, bead, |found, cur| {
        refuse_running(found, cur, force, "reset")?;
        let mut s = cur
            .cloned()
            .unwrap_or_else(|| StoryState::new(&found.project.entry.slug, &found.bead.id, to));
        s.step = to;
        s.attempt = 1;
        s.status = Status::Pending;
        s.reason = None;
        s.dispatched_at = None;
        s.completed_at = None;
        s.failing_tests.clear();
        s.last_error = None;
        Ok((s, format!("reset to {to}, attempt 1")))
    })
}

/// `story note`: a person's instruction for the next dispatched prompt (once). A story that
/// waits for a person at a step that is not a review goes on with it.
pub fn note(inst: &Installation, project: &str, bead: &str, text: &str) -> Result<Changed> {
    let text = text.trim().to_string();
    if text.is_empty() {
        bail!("the note is empty; write the instruction for the executor, in quotes");
    }
    change(inst, project, bead, |found, cur| {
        let Some(cur) = cur else {
            bail!(
                "{} has not started; `braids story start` first",
                found.bead.id
            );
        };
        let mut s = cur.clone();
        s.human_note = Some(text);
        if s.status == Status::NeedsHuman && s.step != Step::Review {
            s.status = Status::Pending;
        }
        Ok((s, "note recorded for the next prompt".into()))
    })
}

/// The question a story's executor asked at a step (not a review) and waits to have answered.
pub fn asked(found: &Located) -> Result<Option<String>> {
    Ok(current(found)?
        .filter(|s| s.status == Status::NeedsHuman && s.step != Step::Review)
        .map(|s| s.last_error.unwrap_or_else(|| "a question".into())))
}

/// `braids answer` for a story: the question and its answer go into the waiting step's next
/// prompt (once, as a note), and the step runs again at the same attempt.
pub fn answer(inst: &Installation, project: &str, bead: &str, text: &str) -> Result<Changed> {
    change(inst, project, bead, |found, cur| {
        let Some(cur) = cur.filter(|s| s.status == Status::NeedsHuman && s.step != Step::Review)
        else {
            bail!(
                "{} asked nothing: its story waits for no answer",
                found.bead.id
            );
        };
        let mut s = cur.clone();
        let question = s.last_error.take().unwrap_or_else(|| "a question".into());
        s.human_note = Some(format!("You asked: {question}\nA person answered: {text}"));
        s.status = Status::Pending;
        s.reason = None;
        s.dispatched_at = None;
        Ok((
            s,
            format!("answered; {} runs again with the answer", cur.step),
        ))
    })
}

/// `review approve`: the step waiting for a person passes; the note goes to the next prompt.
pub fn approve(
    inst: &Installation,
    project: &str,
    bead: &str,
    note: Option<&str>,
) -> Result<Changed> {
    decide(inst, project, bead, None, note)
}

/// `review reject`: the step waiting for a person fails with `reason` (routed by the rules
/// table), the note going to the next prompt.
pub fn reject(
    inst: &Installation,
    project: &str,
    bead: &str,
    reason: Option<&str>,
    note: Option<&str>,
) -> Result<Changed> {
    let reason = match reason
        .map(str::trim)
        .filter(|r| !r.is_empty() && *r != "null")
    {
        None => None,
        Some(r) => Some(Reason::parse(r).ok_or_else(|| {
            anyhow::anyhow!("`{r}` is not a reason; use one of {}", Reason::spellings())
        })?),
    };
    decide(inst, project, bead, Some(reason), note)
}

fn decide(
    inst: &Installation,
    project: &str,
    bead: &str,
    rejected: Option<Option<Reason>>,
    note: Option<&str>,
) -> Result<Changed> {
    let note = note
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .map(String::from);
    change(inst, project, bead, |found, cur| {
        let Some(cur) = cur.filter(|s| s.status == Status::NeedsHuman) else {
            bail!(
                "{} waits for no review; `braids story show {} {}` says where it is",
                found.bead.id,
                found.project.entry.slug,
                found.bead.id
            );
        };
        let mut s = cur.clone();
        s.human_note = note.or(s.human_note.take());
        s.completed_at = Some(Utc::now());
        let said = match rejected {
            None => {
                s.status = Status::Pass;
                s.reason = None;
                format!("{} approved", s.step)
            }
            Some(reason) => {
                s.status = Status::Failing;
                s.reason = reason;
                format!(
                    "{} rejected ({})",
                    s.step,
                    reason.map_or("no reason".to_string(), |r| r.to_string())
                )
            }
        };
        Ok((s, said))
    })
}

/// `report-error`: records an error from outside (a crashed executor a person found) as the
/// story's `last_error`.
pub fn report_error(
    inst: &Installation,
    project: &str,
    bead: &str,
    error: &str,
) -> Result<Changed> {
    let error = error.trim().to_string();
    if error.is_empty() {
        bail!("the error is empty; say what went wrong, in quotes");
    }
    change(inst, project, bead, |found, cur| {
        let Some(cur) = cur else {
            bail!(
                "{} has not started; there is no story to record an error on",
                found.bead.id
            );
        };
        let mut s = cur.clone();
        s.last_error = Some(error);
        Ok((s, "last_error recorded".into()))
    })
}
