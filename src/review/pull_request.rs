//! A pull request as braids sees it, whichever forge it is on: GitHub's pull requests and
//! GitLab's merge requests both map onto these.

/// Where a pull request stands on its forge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PrState {
    Open,
    /// Merged, by whom when the forge says.
    Merged {
        by: Option<String>,
    },
    /// Closed without a merge, by whom when the forge says.
    Closed {
        by: Option<String>,
    },
}

/// Whether the head merges into the base without a conflict, as the forge computed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mergeable {
    Clean,
    Conflict,
    /// Not computed yet (GitHub answers `null` at first).
    Unknown,
}

/// A check of the head commit: a GitHub check run or commit status, a GitLab pipeline job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    pub name: String,
    pub state: CheckState,
    /// What the check said of itself (its summary, or the tail of its log), as the forge's text.
    pub summary: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckState {
    Pending,
    /// Passed, or ended neutral or skipped: nothing to fix.
    Passed,
    Failed,
}

/// A review, in the order the forge lists them (oldest first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Review {
    /// The forge's id: later reviews have larger ones.
    pub id: u64,
    pub author: String,
    pub state: ReviewState,
    /// The review's text and its line comments (`path:line: body`), as the forge's text.
    pub body: String,
    /// It comments on lines of the change: something to act on even without a verdict.
    pub inline: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReviewState {
    Approved,
    ChangesRequested,
    /// A comment only: it changes no reviewer's verdict.
    Commented,
    /// Withdrawn: the reviewer's verdict is gone.
    Dismissed,
}

/// What the forge says of one pull request now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullRequest {
    pub number: u64,
    pub state: PrState,
    /// The head commit's id.
    pub head: String,
    /// The base branch moved since the head was made on it.
    pub behind: bool,
    pub mergeable: Mergeable,
    /// The head commit's checks.
    pub checks: Vec<Check>,
    pub reviews: Vec<Review>,
}
