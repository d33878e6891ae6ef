//! `braids pause` and `braids resume`.

use anyhow::Result;

use super::{Output, PauseArgs, ResumeArgs, EXIT_OK};
use crate::app::pause::Changed;
use crate::system::paths::Paths;

impl Output for Changed {
    fn text(&self) -> String {
        let mut o = match self.from {
            Some(from) if from == self.to => {
                format!("{}: already {} in the registry\n", self.project, self.to)
            }
            from => format!(
                "{}: {} → {} in the registry\n",
                self.project,
                from.map_or("missing", |s| s.as_str()),
                self.to
            ),
        };
        if let Some(c) = &self.claw {
            match &c.was_paused {
                Some(why) => o.push_str(&format!("the claw loop goes on (it was paused: {why})\n")),
                None => o.push_str("the claw loop was not paused\n"),
            }
            if let Some(n) = &c.note {
                o.push_str(&format!("the next task's coder will read: {n}\n"));
            }
        }
        o
    }
}

pub fn pause(paths: &Paths, a: PauseArgs) -> Result<i32> {
    crate::app::pause::set_status(paths, &a.project, crate::model::ProjectStatus::Paused)?
        .print(a.json);
    Ok(EXIT_OK)
}

pub fn resume(paths: &Paths, a: ResumeArgs) -> Result<i32> {
    crate::app::pause::resume(paths, &a.project, a.note)?.print(a.json);
    Ok(EXIT_OK)
}
