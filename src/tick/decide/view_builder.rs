//! The one way to make a [`ProjectView`]: observe starts every project's view here, and the
//! unit tests and the simulation build their worlds with it, so a new field is defaulted in one
//! place instead of in every hand-written literal.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::{BeadLookup, Eligibility, ProjectView};
use crate::model::{Bead, BeadId, Priority};
use crate::protocol::{deps::Waits, tick::StoryView};
use crate::session::Placement;
use crate::workspace::WorkspaceMode;

/// Builds a [`ProjectView`]. What is not set is what a project with an empty PROJECT.md and no
/// active iteration shows: PROJECT.md's defaults, nothing ready, nothing failed.
#[derive(Debug, Clone)]
#[must_use]
pub struct ProjectViewBuilder(ProjectView);

impl ProjectView {
    /// A view of the project `slug` at `path`, to fill in.
    pub fn builder(slug: impl Into<String>, path: impl Into<PathBuf>) -> ProjectViewBuilder {
        ProjectViewBuilder(ProjectView {
            slug: slug.into(),
            path: path.into(),
            priority: Priority::default(),
            max_workers: 1,
            worker_timeout: crate::format::project::DEFAULT_WORKER_TIMEOUT,
            stall_timeout: 0,
            channel: None,
            eligibility: Eligibility::NoActiveIteration,
            stories: Vec::new(),
            scope_named: false,
            ready: Vec::new(),
            beads: BTreeMap::new(),
            tracker_error: None,
            preflight_error: None,
            workspace: WorkspaceMode::default(),
            held_by_budget: None,
            protocol: BTreeMap::new(),
            dependencies: BTreeMap::new(),
            single_state: false,
            placement: Placement::default(),
            backend_error: None,
            reviews: Vec::new(),
        })
    }
}

impl ProjectViewBuilder {
    pub fn build(self) -> ProjectView {
        self.0
    }
    pub fn path(mut self, path: impl Into<PathBuf>) -> Self {
        self.0.path = path.into();
        self
    }
    pub fn priority(mut self, p: Priority) -> Self {
        self.0.priority = p;
        self
    }
    pub fn max_workers(mut self, n: u32) -> Self {
        self.0.max_workers = n;
        self
    }
    /// WorkerTimeout, seconds.
    pub fn worker_timeout(mut self, secs: u64) -> Self {
        self.0.worker_timeout = secs;
        self
    }
    /// StallTimeout, seconds; 0: never stalled.
    pub fn stall_timeout(mut self, secs: u64) -> Self {
        self.0.stall_timeout = secs;
        self
    }
    pub fn channel(mut self, channel: Option<String>) -> Self {
        self.0.channel = channel;
        self
    }
    pub fn eligibility(mut self, e: Eligibility) -> Self {
        self.0.eligibility = e;
        self
    }
    /// The active iteration's Stories, in order.
    pub fn stories(mut self, ids: impl IntoIterator<Item = BeadId>) -> Self {
        self.0.stories = ids.into_iter().collect();
        self
    }
    /// Ready beads, in the tracker's order.
    pub fn ready(mut self, beads: impl IntoIterator<Item = Bead>) -> Self {
        self.0.ready = beads.into_iter().collect();
        self
    }
    /// What the tracker said about one bead of a session or claim.
    pub fn bead(mut self, id: BeadId, lookup: BeadLookup) -> Self {
        self.0.beads.insert(id, lookup);
        self
    }
    pub fn beads(mut self, lookups: impl IntoIterator<Item = (BeadId, BeadLookup)>) -> Self {
        self.0.beads.extend(lookups);
        self
    }
    pub fn tracker_error(mut self, why: impl Into<String>) -> Self {
        self.0.tracker_error = Some(why.into());
        self
    }
    pub fn preflight_error(mut self, why: impl Into<String>) -> Self {
        self.0.preflight_error = Some(why.into());
        self
    }
    pub fn workspace(mut self, mode: WorkspaceMode) -> Self {
        self.0.workspace = mode;
        self
    }
    /// Why the project's `DailyBudget` holds its new workers today.
    pub fn held_by_budget(mut self, why: Option<String>) -> Self {
        self.0.held_by_budget = why;
        self
    }
    /// One protocol story with a state file.
    pub fn story(mut self, id: BeadId, view: StoryView) -> Self {
        self.0.protocol.insert(id, view);
        self
    }
    pub fn protocol(mut self, stories: BTreeMap<BeadId, StoryView>) -> Self {
        self.0.protocol = stories;
        self
    }
    pub fn dependencies(mut self, waits: impl IntoIterator<Item = (BeadId, Waits)>) -> Self {
        self.0.dependencies = waits.into_iter().collect();
        self
    }
    pub fn single_state(mut self, single: bool) -> Self {
        self.0.single_state = single;
        self
    }
    pub fn placement(mut self, placement: Placement) -> Self {
        self.0.placement = placement;
        self
    }
    pub fn reviews(mut self, reviews: Vec<crate::review::Watched>) -> Self {
        self.0.reviews = reviews;
        self
    }

    pub fn backend_error(mut self, why: Option<String>) -> Self {
        self.0.backend_error = why;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::BeadStatus;

    #[test]
    fn unset_fields_are_project_md_defaults_and_set_ones_stick() {
        let id = |s: &str| BeadId::new(s).unwrap();
        let bare = ProjectView::builder("a", "/p/a").build();
        let rows: [(&str, bool); 8] = [
            ("slug", bare.slug == "a"),
            ("path", bare.path == std::path::Path::new("/p/a")),
            ("max_workers", bare.max_workers == 1),
            ("worker_timeout", bare.worker_timeout == 3600),
            ("stall", bare.stall_timeout == 0),
            (
                "no iteration",
                bare.eligibility == Eligibility::NoActiveIteration,
            ),
            ("worktree", bare.workspace == WorkspaceMode::Worktree),
            (
                "nothing known",
                bare.ready.is_empty() && bare.beads.is_empty() && bare.tracker_error.is_none(),
            ),
        ];
        for (what, ok) in rows {
            assert!(ok, "{what}: {bare:?}");
        }
        let v = ProjectView::builder("a", "/p/a")
            .max_workers(3)
            .stall_timeout(60)
            .bead(id("a-1"), BeadLookup::Missing)
            .ready([Bead::new(id("a-2"), "t", BeadStatus::Open)])
            .tracker_error("br timed out")
            .build();
        assert_eq!(
            (v.max_workers, v.stall_timeout, v.beads.len(), v.ready.len()),
            (3, 60, 1, 1)
        );
        assert_eq!(v.tracker_error.as_deref(), Some("br timed out"));
    }
}
