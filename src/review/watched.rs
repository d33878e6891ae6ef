//! A bead in review as a tick sees it: what braids remembers of its pull request, what the
//! forge said of it this run and the project's rules, which decide whether a worker is needed.

use super::{decide, Handled, MergePolicy, PullRequest, Step};
use crate::model::BeadId;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Watched {
    pub bead: BeadId,
    pub handled: Handled,
    /// What the forge said this run; `None` when it could not be asked (an outage, settings
    /// a person must fix): nothing is done about the request then.
    pub pr: Option<PullRequest>,
    pub merge: MergePolicy,
    pub approvals: u32,
    /// Attempts the bead may have for the forge's sake.
    pub attempts: u32,
}

impl Watched {
    /// The step the forge's answer calls for, when there was one. Pure.
    #[must_use]
    pub fn step(&self) -> Option<Step> {
        let pr = self.pr.as_ref()?;
        Some(decide(
            pr,
            &self.handled,
            self.merge,
            self.approvals,
            self.attempts,
        ))
    }

    /// Whether a worker must act on the request now (anything but waiting).
    pub fn needs_worker(&self) -> bool {
        self.step().is_some_and(|s| !matches!(s, Step::Wait { .. }))
    }
}
