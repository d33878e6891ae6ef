//! `braids diff` and the printing of `braids approve` for work held for a person.

use anyhow::Result;

use crate::app::answer::Approved;
use crate::config::installation;
use crate::system::paths::Paths;
use crate::workspace::HeldDiff;

use super::{BeadArgs, Output, EXIT_OK};

impl Output for HeldDiff {
    fn text(&self) -> String {
        let mut o = format!(
            "held work: commit {} on {} (against {}); `braids approve` lands this commit only\n",
            self.commit, self.branch, self.base
        );
        if !self.control.is_empty() {
            o.push_str(&format!(
                "it changes braids' control files: {}\n",
                self.control.join(", ")
            ));
        }
        o.push_str(&self.stat);
        o.push('\n');
        o.push_str(&self.patch);
        if self.truncated {
            o.push_str(&format!(
                "\n… the patch is cut here; `git diff {}...{}` shows it whole\n",
                self.base, self.commit
            ));
        }
        o
    }
}

impl Output for Approved {
    fn text(&self) -> String {
        match self {
            Approved::Plan(a) => a.text(),
            Approved::Held(l) => {
                let landed = match &l.commit {
                    Some(c) => format!("landed as {c}"),
                    None => "changed nothing any more".to_string(),
                };
                let pushed = match l.pushed {
                    Some(true) => ", pushed",
                    Some(false) => ", not pushed yet (the next run retries)",
                    None => "",
                };
                format!(
                    "{}: the held work of {} {landed}{pushed}; the bead is closed\n",
                    l.bead, l.branch
                )
            }
        }
    }
}

pub fn diff(paths: &Paths, a: BeadArgs) -> Result<i32> {
    let inst = installation::open(paths)?;
    crate::app::held::diff(&inst, &a.bead)?.print(a.json);
    Ok(EXIT_OK)
}
