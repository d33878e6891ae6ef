//! The claw loop's tracker: the native checklist at `.claw/WORKPLAN.md`, with the loop's rule
//! for what is ready. Only the first task not checked off is, and only when no task is in
//! progress and the loop is not paused: the Architect ordered the tasks, so nothing is sorted
//! by priority and nothing runs beside another. Every write is the native tracker's.

use std::path::{Path, PathBuf};

use crate::model::{Bead, BeadId, BeadStatus};
use crate::tracker::workplan::Workplan;
use crate::tracker::{ClaimOutcome, Tracker, TrackerError, TrackerKind, TrackerOptions};

pub struct ClawTracker {
    inner: Workplan,
    project: PathBuf,
}

/// The loop's plan file.
pub fn plan_file(project: &Path) -> PathBuf {
    project.join(".claw/WORKPLAN.md")
}

impl ClawTracker {
    pub fn new(opts: &TrackerOptions, read_only: bool) -> ClawTracker {
        let inner = Workplan::at(plan_file(&opts.project), opts.timeout);
        ClawTracker {
            inner: if read_only { inner.read_only() } else { inner },
            project: opts.project.clone(),
        }
    }
}

/// The loop's rule over the checklist in file order (pure).
pub fn next_ready(listed: &[Bead], paused: bool) -> Vec<Bead> {
    if paused || listed.iter().any(|b| b.status == BeadStatus::InProgress) {
        return Vec::new();
    }
    listed
        .iter()
        .find(|b| b.status != BeadStatus::Closed)
        .filter(|b| b.status == BeadStatus::Open)
        .cloned()
        .into_iter()
        .collect()
}

impl Tracker for ClawTracker {
    fn kind(&self) -> TrackerKind {
        TrackerKind::Claw
    }
    fn ready(&self) -> Result<Vec<Bead>, TrackerError> {
        let listed = self.inner.list()?;
        self.ready_among(&listed)
    }
    fn list(&self) -> Result<Vec<Bead>, TrackerError> {
        self.inner.list()
    }
    fn ready_among(&self, listed: &[Bead]) -> Result<Vec<Bead>, TrackerError> {
        let paused = super::loopstate::load(&self.project).paused.is_some();
        Ok(next_ready(listed, paused))
    }
    fn show(&self, id: &BeadId) -> Result<Option<Bead>, TrackerError> {
        self.inner.show(id)
    }
    fn claim(&self, id: &BeadId, actor: &str) -> Result<ClaimOutcome, TrackerError> {
        self.inner.claim(id, actor)
    }
    fn close(&self, id: &BeadId, reason: &str) -> Result<(), TrackerError> {
        self.inner.close(id, reason)
    }
    fn block(&self, id: &BeadId, reason: &str) -> Result<(), TrackerError> {
        self.inner.block(id, reason)
    }
    fn reopen(&self, id: &BeadId, reason: &str) -> Result<(), TrackerError> {
        self.inner.reopen(id, reason)
    }
    fn create(&self, title: &str, description: &str, priority: u8) -> Result<BeadId, TrackerError> {
        self.inner.create(title, description, priority)
    }
    fn add_dependency(&self, id: &BeadId, on: &BeadId) -> Result<(), TrackerError> {
        self.inner.add_dependency(id, on)
    }
    fn is_cheap(&self) -> bool {
        self.inner.is_cheap()
    }
    /// The checklist and the loop's state: a pause or a resume changes what is ready.
    fn state_files(&self) -> Vec<PathBuf> {
        let mut f = self.inner.state_files();
        f.push(super::loopstate::path(&self.project));
        f
    }
    fn answers_valid(&self) -> Option<Option<chrono::DateTime<chrono::Utc>>> {
        self.inner.answers_valid()
    }
    fn read_path(&self) -> Option<String> {
        self.inner.read_path()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bead(id: &str, s: BeadStatus) -> Bead {
        Bead::new(BeadId::new(id).unwrap(), id, s)
    }

    #[test]
    fn only_the_first_open_task_and_only_when_nothing_runs() {
        use BeadStatus::*;
        let list = [bead("a", Closed), bead("b", Open), bead("c", Open)];
        assert_eq!(next_ready(&list, false).len(), 1);
        assert_eq!(next_ready(&list, false)[0].id.as_str(), "b");
        assert!(next_ready(&list, true).is_empty(), "paused");
        let busy = [bead("a", InProgress), bead("b", Open)];
        assert!(next_ready(&busy, false).is_empty());
        let blocked = [bead("a", Blocked), bead("b", Open)];
        assert!(
            next_ready(&blocked, false).is_empty(),
            "the order is the Architect's"
        );
        assert!(next_ready(&[bead("a", Closed)], false).is_empty());
    }
}
