//! `braids iteration new|activate|complete`: arguments in, report out. The rules (1.3, 4.5),
//! the lock, the commit and the notification are [`crate::app::iteration`]'s.

use std::path::PathBuf;

use anyhow::Result;
use serde::Serialize;

use crate::app::iteration::{self as app, Change};
use crate::model::{IterationName, IterationStatus};
use crate::system::paths::Paths;

use super::{IterationCommand, Output, EXIT_OK};

#[derive(Debug, Serialize)]
pub struct IterationReport {
    pub project: String,
    /// The iteration's directory name as written (`008`).
    pub iteration: IterationName,
    pub number: u32,
    pub path: PathBuf,
    pub status: IterationStatus,
    pub changed: bool,
}

impl IterationReport {
    fn new(project: &str, c: Change) -> IterationReport {
        IterationReport {
            project: project.to_string(),
            iteration: c.name,
            number: c.name.number(),
            path: c.file,
            status: c.status,
            changed: c.changed,
        }
    }
}

impl Output for IterationReport {
    fn text(&self) -> String {
        let verb = if self.changed {
            "is now"
        } else {
            "was already"
        };
        format!(
            "{} iteration {} {verb} {} ({})\n",
            self.project,
            self.iteration,
            self.status,
            self.path.display()
        )
    }
}

pub fn run(paths: &Paths, cmd: IterationCommand) -> Result<i32> {
    let (a, to) = match cmd {
        IterationCommand::New(a) => (a, None),
        IterationCommand::Activate(a) => (a, Some(IterationStatus::Active)),
        IterationCommand::Complete(a) => (a, Some(IterationStatus::Complete)),
    };
    let change = match to {
        None => app::create(paths, &a.slug, a.number)?,
        Some(to) => app::set_status(paths, &a.slug, a.number, to)?,
    };
    IterationReport::new(&a.slug, change).print(a.json);
    Ok(EXIT_OK)
}
