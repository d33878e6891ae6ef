//! The claw loop's tracker (see the `claw` module): the native checklist at `.claw/WORKPLAN.md`, with
//! the loop's rule for what is ready. Only the first task not checked off is, and only when no
//! task is in progress: the Architect ordered the tasks, so nothing is sorted by priority and
//! nothing runs beside another. Every write is the native tracker's. (A paused loop is not the
//! tracker's business: the tick holds the project, `claw_eligibility`.)

use std::path::{Path, PathBuf};

use super::native::Workplan;
use super::{ClaimOutcome, Tracker, TrackerError, TrackerKind, TrackerOptions};
use crate::model::{Bead, BeadId, BeadStatus};

pub struct ClawTracker {
    inner: Workplan,
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
        }
    }
}

/// The loop's rule over the checklist in file order (pure).
pub fn next_ready(listed: &[Bead]) -> Vec<Bead> {
    if listed.iter().any(|b| b.status == BeadStatus::InProgress) {
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
        Ok(next_ready(listed))
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
    fn state_files(&self) -> Vec<PathBuf> {
        self.inner.state_files()
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
        assert_eq!(next_ready(&list).len(), 1);
        assert_eq!(next_ready(&list)[0].id.as_str(), "b");
        let busy = [bead("a", InProgress), bead("b", Open)];
        assert!(next_ready(&busy).is_empty());
        let blocked = [bead("a", Blocked), bead("b", Open)];
        assert!(
            next_ready(&blocked).is_empty(),
            "the order is the Architect's"
        );
        assert!(next_ready(&[bead("a", Closed)]).is_empty());
    }
}
