//! `braids story start|show|dispatch|reset|note`, `braids review approve|reject` and
//! `braids report-error`: arguments in, [`crate::app::story`]'s answer printed.

use anyhow::Result;

use crate::app::story::{self, Changed, Shown};
use crate::installation;
use crate::paths::Paths;
use crate::worker::{Ending, WorkerRun};

use super::{Output, ReportErrorArgs, ReviewCommand, StoryCommand, EXIT_OK, EXIT_STOPPED};

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
        t.push_str(&format!(
            "next: {} {}\n{}\n",
            self.next,
            self.next_step.as_deref().unwrap_or("-"),
            self.caller_instruction
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
            let run = story::dispatch_one(&inst, &a.project, &a.bead)?;
            run.print(a.json);
            return Ok(match run.ending {
                Ending::Completed { .. } | Ending::HandedBack { .. } => EXIT_OK,
                _ => EXIT_STOPPED,
            });
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
