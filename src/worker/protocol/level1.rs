//! Level 1 of the protocol (seed 002, "Progressive Adoption"): a person dispatches a story's
//! next step by hand, in the foreground, as the tick's worker would run it.

use anyhow::{bail, Result};

use crate::app::beads;
use crate::config::installation::Installation;
use crate::workspace::WorkspaceMode;

/// Level 1: runs the story's next step now, in the foreground, as the tick's worker would
/// (claim, workspace, step, report, state), holding the tick lock so no tick races it; the
/// story is then handed back to the tick.
pub fn dispatch_one(
    inst: &Installation,
    project: &str,
    bead: &str,
) -> Result<crate::worker::WorkerRun> {
    let _held = beads::hold_ticks(&inst.paths)?;
    let found = crate::app::story::find(inst, project, bead, true)?;
    let p = &found.project;
    let sessions = inst.backend.list()?;
    if let Some(s) = beads::live_session(&sessions, &p.entry.slug, &found.bead.id) {
        bail!(
            "{} is running now in {}; wait for its step to end",
            found.bead.id,
            s.label
        );
    }
    let iterations = crate::format::iteration::read_iterations(&p.entry.path).value;
    let crate::tick::decide::Eligibility::Eligible { iteration } =
        crate::tick::decide::eligibility_of(&p.entry, &p.config, &iterations)
    else {
        bail!(
            "{} has no active iteration to work in; `braids iteration activate` one first",
            p.entry.slug
        );
    };
    let msg = crate::model::SpawnMessage::new(
        p.entry.path.clone(),
        found.bead.id.clone(),
        iteration,
        p.config.channel.clone().unwrap_or_default(),
    )
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    let notifier = crate::notifier::from_config(&inst.config.notify);
    let executor =
        crate::worker::executor_for(&inst.config, &p.config, &p.entry.slug, &found.bead.id);
    let worker = crate::worker::Worker {
        paths: &inst.paths,
        config: &inst.config,
        tracker: p.tracker.as_ref(),
        notifier: &notifier,
        executor: executor.as_ref(),
    };
    worker.run_steps(&msg, Some(1))
}

/// What `braids story apply` did: the step the report was applied to, where it came from,
/// the story's new state and what comes next.
#[derive(Debug, serde::Serialize)]
pub struct Applied {
    pub step: String,
    pub report: String,
    pub post_check: Option<String>,
    pub state: crate::protocol::StoryState,
    pub next: crate::app::story::Shown,
}

/// Level 1 by hand: a report a person's own agent wrote (`file`, or the story workspace's
/// `.ai/executor-result` / `.ai/HANDOFF.md`) ends the story's current step exactly as a
/// worker's executor run would ([`super::settle`]). Needs no tick and no executor. A report
/// that cannot be used is refused, naming the file and the fix, with the state untouched.
pub fn apply_by_hand(
    inst: &Installation,
    project: &str,
    bead: &str,
    file: Option<&std::path::Path>,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Applied> {
    use crate::protocol::story_state as story;
    use crate::protocol::{dispatch, overrides, Action, Runner, Status};

    let held = beads::hold_ticks(&inst.paths)?;
    let found = crate::app::story::find(inst, project, bead, true)?;
    let p = &found.project;
    let (root, slug, id) = (
        p.entry.path.clone(),
        p.entry.slug.clone(),
        found.bead.id.clone(),
    );
    let sessions = inst.backend.list()?;
    if let Some(s) = beads::live_session(&sessions, &slug, &id) {
        bail!(
            "{id} is running now in {}; its worker applies its own report",
            s.label
        );
    }
    let rules = overrides::load(&root).map_err(|p| anyhow::anyhow!("{}", p.sentence()))?;
    let state = match story::load(&root, &id) {
        story::Loaded::Missing => {
            bail!("{id} has not started; run `braids story start {slug} {id}` first")
        }
        story::Loaded::Invalid(e) => bail!("{e}"),
        story::Loaded::Valid(s) => s,
    };
    // The step the report ends: the one marked running, else the one the next dispatch runs.
    let running = if state.status == Status::Running {
        state.clone()
    } else {
        let d = dispatch(&state, &rules, now);
        match d.action {
            Action::Dispatched { .. } => d.state,
            other => bail!(
                "{id} has no step to apply a report to (next: {}); `braids story show {slug} {id}` says what it waits for",
                other.kind()
            ),
        }
    };
    let rule = rules
        .get(running.step)
        .ok_or_else(|| anyhow::anyhow!("{id} is at {}, which has no rule", running.step))?;
    if rule.runner == Runner::Braids {
        bail!(
            "{} is braids' own step, not an agent's; run `braids story dispatch {slug} {id}` (or let the tick) to do it",
            running.step
        );
    }
    let ws = story_dir(inst, p, &id)?;
    let (report, from) = read_report(&ws, file)?;
    if let Some(step) = report.step.as_deref().filter(|s| !s.is_empty()) {
        if step != running.step.as_str() {
            bail!(
                "{from} reports step `{step}` but {id} is at {}; write the report for {} (or fix its `step:`)",
                running.step,
                running.step
            );
        }
    }
    let history = match ws == root || WorkspaceMode::of(&p.config) == WorkspaceMode::Shared {
        true => ws.join(crate::protocol::handoff::HISTORY),
        false => crate::worker::work_dir(&inst.paths.braids_dir, &slug, &id).join("history.md"),
    };
    // The project's test command runs here as after a worker's step: the counts are measured,
    // not taken from the hand-written report (CONTRACTS 10.9).
    let tests = crate::protocol::measured::command_for(rule, p.config.test_command().as_ref());
    let settled = super::settle(
        &running,
        Some(&report),
        rule,
        (&ws, &history),
        now,
        |applied| {
            let Some(cmd) = &tests else {
                return applied.clone();
            };
            let deadline = std::time::Duration::from_secs(u64::from(rule.timeout_min.max(1)) * 60);
            let ran = crate::testrun::run(&ws, cmd, deadline);
            let judged =
                crate::protocol::measured::judge(applied, Some(&report), &cmd.shown, &ran, rule);
            if let Some(d) = &judged.disagreement {
                tracing::warn!(bead = %id, "the report and the tests disagree: {d}");
            }
            judged.state
        },
    )?;
    let next_state = settled.state.clone();
    let changed = story::update(&root, &id, |cur| match cur == Some(&state) {
        true => (Some(next_state.clone()), false),
        false => (None, true),
    })?;
    if changed {
        bail!("{id}'s state changed while its report was applied; run `braids story apply` again");
    }
    if file.is_none() {
        // Consumed, as a worker consumes it: never applied to the next step too.
        let _ = std::fs::remove_file(ws.join(crate::protocol::handoff::EXECUTOR_RESULT));
    }
    if !next_state.waits_for_human() && !next_state.is_done() {
        crate::app::story::reopen_if_held(&found)?;
    }
    drop(held);
    crate::tick::orchestrator_state::wake(&inst.paths, crate::tick::orchestrator_state::WAKE_WAIT);
    Ok(Applied {
        step: running.step.to_string(),
        report: from,
        post_check: settled.post_check,
        state: next_state,
        next: crate::app::story::show(inst, &slug, id.as_str(), now)?,
    })
}

/// The story's working directory: its worktree when it has one, else the project's own tree.
fn story_dir(
    inst: &Installation,
    p: &crate::app::beads::Opened,
    id: &crate::model::BeadId,
) -> Result<std::path::PathBuf> {
    let root = &p.entry.path;
    if WorkspaceMode::of(&p.config) == WorkspaceMode::Shared || !root.join(".git").exists() {
        return Ok(root.clone());
    }
    let wss = inst.config.workspaces(&inst.paths, Some(&p.config));
    Ok(wss
        .reuse(root, id)?
        .map_or_else(|| root.clone(), |ws| ws.dir))
}

/// The report a person hands back, and the file it came from; refused with the fix when it
/// cannot be used as it is.
fn read_report(
    dir: &std::path::Path,
    file: Option<&std::path::Path>,
) -> Result<(crate::protocol::handoff::Handoff, String)> {
    use crate::protocol::handoff::{self, EXECUTOR_RESULT, HANDOFF};
    let (found, from) = match file {
        Some(f) => {
            let text = std::fs::read(f).map_err(|e| {
                anyhow::anyhow!(
                    "{}: cannot be read ({e}); give the path of the report your agent wrote",
                    f.display()
                )
            })?;
            let text = String::from_utf8_lossy(&text);
            let is_result = f.file_name().is_some_and(|n| n == "executor-result");
            let h = match is_result {
                true => handoff::parse_executor_result(&text),
                false => {
                    handoff::parse_handoff(&text).or_else(|| handoff::parse_executor_result(&text))
                }
            };
            (h, f.display().to_string())
        }
        None => {
            let h = handoff::read(dir, HANDOFF);
            let from = match h.as_ref().map(|h| h.source) {
                Some(EXECUTOR_RESULT) => dir.join(EXECUTOR_RESULT),
                _ => dir.join(HANDOFF),
            };
            if h.is_none() {
                bail!(
                    "neither {} nor {} holds a report; have your agent write {HANDOFF} (YAML front matter with `status:`), or give one with --handoff FILE",
                    dir.join(HANDOFF).display(),
                    dir.join(EXECUTOR_RESULT).display()
                );
            }
            (h, from.display().to_string())
        }
    };
    let Some(h) = found else {
        bail!("{from}: no report in it; start it with a `---` front matter block holding `status: pass`, `failing` or `needs_human` (and `step:`), closed by `---`");
    };
    if h.status.is_none() {
        bail!("{from}: the report has no `status:`; add `status: pass`, `failing` or `needs_human` to its front matter");
    }
    if !h.warnings.is_empty() {
        // A worker reads such a value leniently; by hand it is refused, so say only what is wrong.
        let said: Vec<String> = h
            .warnings
            .iter()
            .map(|w| {
                w.replace(", read as failing", "")
                    .replace(", read as none", "")
            })
            .collect();
        bail!(
            "{from}: {}; correct it and run `braids story apply` again",
            said.join("; ")
        );
    }
    Ok((h, from))
}
