//! `.claw/WORKPLAN.md` read as the claw loop reads it: tasks are the checklist's items in file
//! order (the Architect ordered them; nothing is re-sorted), phases are the headings above
//! them, and `<!-- slice:…, touches:… -->` says where a task works. The checklist itself (ids,
//! statuses, byte-preserving edits) is the native tracker's format, `crate::format::workplan`.

use pulldown_cmark::{Event, Parser, Tag, TagEnd};

use crate::format::workplan::Checklist;
use crate::model::{BeadId, BeadStatus};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Task {
    pub id: Option<BeadId>,
    pub title: String,
    pub status: BeadStatus,
    /// Index into [`Plan::phases`].
    pub phase: usize,
    pub slice: Option<String>,
    pub touches: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The headings that hold tasks, in order (`Phase 2: Features`); tasks before any heading
    /// are in a phase with an empty title.
    pub phases: Vec<String>,
    pub tasks: Vec<Task>,
}

impl Plan {
    pub fn parse(text: &str) -> Plan {
        // Each heading's byte offset and title.
        let mut headings: Vec<(usize, String)> = Vec::new();
        let mut open: Option<(usize, String)> = None;
        for (e, range) in Parser::new(text).into_offset_iter() {
            match e {
                Event::Start(Tag::Heading { .. }) => open = Some((range.start, String::new())),
                Event::Text(t) | Event::Code(t) => {
                    if let Some((_, title)) = &mut open {
                        title.push_str(&t);
                    }
                }
                Event::End(TagEnd::Heading(_)) => headings.extend(open.take()),
                _ => {}
            }
        }
        let checklist = Checklist::parse(text);
        let mut phases: Vec<String> = Vec::new();
        let mut tasks = Vec::new();
        for item in &checklist.items {
            let at = item.offset();
            let heading = headings
                .iter()
                .rev()
                .find(|(h, _)| *h < at)
                .map(|(_, t)| t.trim().to_string())
                .unwrap_or_default();
            let phase = match phases.iter().position(|p| *p == heading) {
                Some(i) => i,
                None => {
                    phases.push(heading);
                    phases.len() - 1
                }
            };
            let bead = checklist.bead(item);
            tasks.push(Task {
                id: item.meta.id(),
                title: item.title.clone(),
                status: bead.status,
                phase,
                slice: item.meta.get("slice").map(str::to_string),
                touches: item
                    .meta
                    .get("touches")
                    .map(|t| {
                        t.split(|c: char| c == ',' || c == ';' || c.is_whitespace())
                            .filter(|s| !s.is_empty())
                            .map(str::to_string)
                            .collect()
                    })
                    .unwrap_or_default(),
            });
        }
        Plan { phases, tasks }
    }

    /// The project's plan, when it has a readable `.claw/WORKPLAN.md`.
    pub fn read(root: &std::path::Path) -> Option<Plan> {
        let bytes = crate::system::atomic::read(&crate::tracker::claw::plan_file(root)).ok()?;
        Some(Plan::parse(&crate::format::decode(&bytes)))
    }

    /// Where the loop is: the phase of the first task not checked off (the last phase when
    /// all are), its done and remaining tasks, and whether every task is done.
    pub fn now(&self) -> (String, usize, usize, bool) {
        let phase = self
            .tasks
            .iter()
            .find(|t| t.status != BeadStatus::Closed)
            .or(self.tasks.last())
            .map_or(0, |t| t.phase);
        let (done, remaining) = self.progress(phase);
        let title = self.phases.get(phase).cloned().unwrap_or_default();
        (title, done, remaining, self.complete())
    }

    /// The task the loop works next: the first unchecked one, unless a task is already in
    /// progress (the loop runs one at a time) or the first unchecked one is blocked.
    pub fn next(&self) -> Option<&Task> {
        if self
            .tasks
            .iter()
            .any(|t| t.status == BeadStatus::InProgress)
        {
            return None;
        }
        self.tasks
            .iter()
            .find(|t| t.status != BeadStatus::Closed)
            .filter(|t| t.status == BeadStatus::Open)
    }

    /// Done and remaining tasks of a phase.
    pub fn progress(&self, phase: usize) -> (usize, usize) {
        let of = self.tasks.iter().filter(|t| t.phase == phase);
        let done = of
            .clone()
            .filter(|t| t.status == BeadStatus::Closed)
            .count();
        (done, of.count() - done)
    }

    pub fn complete(&self) -> bool {
        self.tasks.iter().all(|t| t.status == BeadStatus::Closed)
    }

    pub fn find(&self, id: &BeadId) -> Option<&Task> {
        self.tasks.iter().find(|t| t.id.as_ref() == Some(id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAN: &str = "# WORKPLAN\n\n## Phase 1: Foundation\n\n- [x] Set up <!-- id:wp-a -->\n- [ ] Window <!-- id:wp-b, slice:windows, touches:windowStore,shellStore -->\n\n```\n- [ ] not a task\n```\n\n## Phase 2: Features\n\n- [ ] Snapping <!-- id:wp-c -->\n";

    #[test]
    fn tasks_in_file_order_with_their_phases_and_metadata() {
        let p = Plan::parse(PLAN);
        assert_eq!(p.phases, ["Phase 1: Foundation", "Phase 2: Features"]);
        assert_eq!(p.tasks.len(), 3);
        assert_eq!(p.tasks[1].slice.as_deref(), Some("windows"));
        assert_eq!(p.tasks[1].touches, ["windowStore", "shellStore"]);
        assert_eq!(p.tasks[2].phase, 1);
        assert_eq!(p.next().unwrap().title, "Window");
        assert_eq!(p.progress(0), (1, 1));
        assert!(!p.complete());
    }

    #[test]
    fn one_at_a_time_and_a_blocked_task_stops_the_loop() {
        let busy = PLAN.replace("id:wp-c", "id:wp-c, status:in_progress");
        assert_eq!(Plan::parse(&busy).next(), None);
        let blocked = PLAN.replace("id:wp-b,", "id:wp-b, status:blocked,");
        assert_eq!(
            Plan::parse(&blocked).next(),
            None,
            "the Architect's order is kept"
        );
        let done = PLAN.replace("- [ ]", "- [x]");
        assert!(Plan::parse(&done).complete());
    }
}
