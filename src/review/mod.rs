//! Landing through review: a bead's work opened as a pull request (a merge request on GitLab)
//! instead of pushed to the base branch, and what braids does with it while it waits there.
//!
//! Everything here is pure. [`settings`] reads a project's choice (`Landing:`, `Merge:`,
//! `Approvals:`, `Forge:`); [`decide`] turns what a forge says of one pull request, in the
//! forge-neutral [`PullRequest`] both forges map onto, and what braids remembers of it
//! ([`Handled`]) into the one [`Step`] to take. The forge clients, the worker that opens the
//! request and the tick that watches it live at the edges and call these; the simulation calls
//! the same code.

pub mod decide;
pub mod prompt;
pub mod pull_request;
pub mod record;
pub mod remote;
pub mod settings;
pub mod watched;

pub use decide::{decide, Handled, Rework, Step};

pub use pull_request::{Check, CheckState, Mergeable, PrState, PullRequest, Review, ReviewState};
pub use record::{branch_of, request_words, InReview, ToOpen};
pub use settings::{ForgeRef, Landing, MergePolicy, ReviewSettings};
pub use watched::Watched;

/// The attempts a bead in review may have for the forge's sake: the first, then its retries
/// (config.toml `[worker] retries`).
pub fn attempts(retries: u32) -> u32 {
    retries + 1
}
