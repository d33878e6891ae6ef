//! `braids new`: arguments in, [`crate::app::project::create`] does the work, the report out.

use anyhow::Result;

use crate::app::project::{create, NewProject, NewReport};
use crate::system::paths::Paths;

use super::{NewArgs, Output, EXIT_OK};

impl Output for NewReport {
    fn text(&self) -> String {
        let mut o = format!(
            "project {} at {} (tracker: {})\n",
            self.slug,
            self.path.display(),
            self.tracker
        );
        for p in &self.created {
            o.push_str(&format!("created {}\n", p.display()));
        }
        o.push_str(&format!("next: add beads, then `braids iteration new {0}` and `braids iteration activate {0}`\n", self.slug));
        o
    }
}

pub fn run(paths: &Paths, a: NewArgs) -> Result<i32> {
    let json = a.json;
    let request = NewProject {
        slug: a.slug,
        path: a.path,
        priority: a.priority,
        max_workers: a.max_workers,
        channel: a.channel,
        tracker: a.tracker,
    };
    create(paths, request)?.print(json);
    Ok(EXIT_OK)
}
