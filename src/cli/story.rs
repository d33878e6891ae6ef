//! `braids story start|show|dispatch|apply|convert|reset|note`, `braids review approve|reject` and
//! `braids report-error`: arguments in, [`crate::app::story`]'s answer printed.

use anyhow::Result;

use crate::app::story::{self, Changed, Shown};
use crate::config::installation;
use crate::system::paths::Paths;
use crate::worker::{Applied, Ending, WorkerRun};

use clap::{Args, Subcommand};

use super::{Output, EXIT_OK, EXIT_STOPPED};

#[derive(Debug, Subcommand)]
pub enum StoryCommand {
    /// Start a story at bdd (or bootstrap); refuses a running or done one without --force.
    Start(StoryStartArgs),
    /// Where the story is, what comes next, and what to do (`--json` for scripts).
    Show(StoryTarget),
    /// Run the story's next step now, in the foreground (Level 1), then hand it to the tick.
    Dispatch(StoryTarget),
    /// Apply a HANDOFF your own agent wrote as the current step's result (Level 1 by hand).
    Apply(StoryApplyArgs),
    /// Move a project's story state between `.ai/states/` and the seed's one `.ai/STATE.json`.
    Convert(StoryConvertArgs),
    /// Back to a step (bdd unless --step) at attempt 1, the last error forgotten.
    Reset(StoryResetArgs),
    /// An instruction for the story's next prompt (given once).
    Note(StoryNoteArgs),
}

#[derive(Debug, Args)]
pub struct StoryTarget {
    /// The project's slug.
    pub project: String,
    /// The bead (story) id.
    pub bead: String,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct StoryStartArgs {
    pub project: String,
    pub bead: String,
    /// Start at `bootstrap` (a story that sets up a new project).
    #[arg(long)]
    pub bootstrap: bool,
    /// Restart a running or done story anyway.
    #[arg(long)]
    pub force: bool,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct StoryApplyArgs {
    #[command(flatten)]
    pub target: StoryTarget,
    /// The report (a HANDOFF.md or an executor-result); default: the story workspace's
    /// `.ai/executor-result`, else its `.ai/HANDOFF.md`.
    #[arg(long, value_name = "FILE")]
    pub handoff: Option<std::path::PathBuf>,
}

#[derive(Debug, Args)]
pub struct StoryConvertArgs {
    /// The project's slug.
    pub project: String,
    /// `single` (the seed's .ai/STATE.json) or `per-story` (.ai/states/<bead>.json).
    #[arg(long)]
    pub to: String,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct StoryResetArgs {
    #[command(flatten)]
    pub target: StoryTarget,
    /// The step to go back to (default: bdd).
    #[arg(long)]
    pub step: Option<String>,
    #[arg(long)]
    pub force: bool,
}

#[derive(Debug, Args)]
pub struct StoryNoteArgs {
    #[command(flatten)]
    pub target: StoryTarget,
    /// The instruction, in quotes.
    pub text: String,
}

#[derive(Debug, Subcommand)]
pub enum ReviewCommand {
    /// The step passes; an optional note goes to the next prompt.
    Approve(ReviewArgs),
    /// The step fails with a reason the rules table routes (e.g. needs_clarification → bdd).
    Reject(ReviewArgs),
}

#[derive(Debug, Args)]
pub struct ReviewArgs {
    #[command(flatten)]
    pub target: StoryTarget,
    /// Why (reject): constitution_violation, needs_clarification, nfr_missing, scope_warning
    /// or test_timeout.
    #[arg(long)]
    pub reason: Option<String>,
    /// An instruction for the next prompt.
    #[arg(long)]
    pub note: Option<String>,
}

#[derive(Debug, Args)]
pub struct ReportErrorArgs {
    #[command(flatten)]
    pub target: StoryTarget,
    /// What went wrong, in quotes.
    pub error: String,
}

impl Output for Shown {
    fn text(&self) -> String {
        let Some(s) = &self.state else {
            return format!(
                "{} {}: not started\n{}\n",
                self.project, self.bead, self.caller_instruction
            );
        };
        let mut t = format!(
            "{} {}: {} ({}), attempt {} of {}\n",
            self.project, self.bead, s.step, s.status, s.attempt, s.max_attempts
        );
        if let Some(r) = s.reason {
            t.push_str(&format!("reason: {r}\n"));
        }
        if let Some(e) = &s.last_error {
            t.push_str(&format!("last error: {e}\n"));
        }
        if let Some(n) = &s.human_note {
            t.push_str(&format!("note for the next prompt: {n}\n"));
        }
        if let Some(c) = &s.commit_hash {
            t.push_str(&format!("commit: {c}\n"));
        }
        if let Some(tests) = &self.tests {
            t.push_str(&format!("tests: {tests}\n"));
        }
        t.push_str(&format!(
            "next: {} {}\n{}\n",
            self.next,
            self.next_step.as_deref().unwrap_or("-"),
            self.caller_instruction
        ));
        if let Some(p) = &self.prompt {
            t.push_str(&format!("\n--- prompt ---\n{p}"));
            if !p.ends_with('\n') {
                t.push('\n');
            }
        }
        t
    }
}

impl Output for crate::app::story_layout::Converted {
    fn text(&self) -> String {
        format!(
            "{}: {} → {}: {}\n",
            self.project, self.from, self.to, self.said
        )
    }
}

impl Output for Applied {
    fn text(&self) -> String {
        let s = &self.state;
        let mut t = format!(
            "{} {}: {} applied from {}: {}{}\n",
            self.next.project,
            self.next.bead,
            self.step,
            self.report,
            s.status,
            s.reason.map_or(String::new(), |r| format!(" ({r})"))
        );
        if let Some(c) = &self.post_check {
            t.push_str(&format!("post_check {c}\n"));
        }
        if let Some(e) = &s.last_error {
            t.push_str(&format!("last error: {e}\n"));
        }
        t.push_str(&format!(
            "next: {} {}\n{}\n",
            self.next.next,
            self.next.next_step.as_deref().unwrap_or("-"),
            self.next.caller_instruction
        ));
        t
    }
}

impl Output for Changed {
    fn text(&self) -> String {
        format!(
            "{} {}: {}; now {} ({}), attempt {}\n",
            self.project,
            self.bead,
            self.said,
            self.state.step,
            self.state.status,
            self.state.attempt
        )
    }
}

impl Output for WorkerRun {
    fn text(&self) -> String {
        let mut t = String::new();
        for s in &self.steps {
            t.push_str(&format!("{:<12} {}\n", s.name, s.detail));
        }
        t.push_str(&format!(
            "ended: {}\n",
            serde_json::to_string(&self.ending).unwrap_or_default()
        ));
        t
    }
}

pub fn run(paths: &Paths, c: StoryCommand) -> Result<i32> {
    let inst = installation::open(paths)?;
    match c {
        StoryCommand::Start(a) => {
            story::start(&inst, &a.project, &a.bead, a.bootstrap, a.force)?.print(a.json)
        }
        StoryCommand::Show(a) => {
            story::show(&inst, &a.project, &a.bead, chrono::Utc::now())?.print(a.json)
        }
        StoryCommand::Dispatch(a) => {
            let run = crate::worker::dispatch_one(&inst, &a.project, &a.bead)?;
            run.print(a.json);
            return Ok(match run.ending {
                Ending::Completed { .. } | Ending::HandedBack { .. } => EXIT_OK,
                _ => EXIT_STOPPED,
            });
        }
        StoryCommand::Apply(a) => crate::worker::apply_by_hand(
            &inst,
            &a.target.project,
            &a.target.bead,
            a.handoff.as_deref(),
            chrono::Utc::now(),
        )?
        .print(a.target.json),
        StoryCommand::Convert(a) => {
            crate::app::story_layout::convert(&inst, &a.project, &a.to)?.print(a.json)
        }
        StoryCommand::Reset(a) => story::reset(
            &inst,
            &a.target.project,
            &a.target.bead,
            a.step.as_deref(),
            a.force,
        )?
        .print(a.target.json),
        StoryCommand::Note(a) => {
            story::note(&inst, &a.target.project, &a.target.bead, &a.text)?.print(a.target.json)
        }
    }
    Ok(EXIT_OK)
}

pub fn review(paths: &Paths, c: ReviewCommand) -> Result<i32> {
    let inst = installation::open(paths)?;
    match c {
        ReviewCommand::Approve(a) => {
            story::approve(&inst, &a.target.project, &a.target.bead, a.note.as_deref())?
                .print(a.target.json)
        }
        ReviewCommand::Reject(a) => story::reject(
            &inst,
            &a.target.project,
            &a.target.bead,
            a.reason.as_deref(),
            a.note.as_deref(),
        )?
        .print(a.target.json),
    }
    Ok(EXIT_OK)
}

pub fn report_error(paths: &Paths, a: ReportErrorArgs) -> Result<i32> {
    let inst = installation::open(paths)?;
    story::report_error(&inst, &a.target.project, &a.target.bead, &a.error)?.print(a.target.json);
    Ok(EXIT_OK)
}
