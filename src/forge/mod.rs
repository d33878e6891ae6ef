//! The forges pull requests are opened on, behind one small trait: what braids asks of GitHub
//! and GitLab, answered in the forge-neutral terms of [`crate::review`].
//!
//! Watching is cheap by construction: every read is a conditional request against the
//! [`Conditional`] cache a tick keeps between runs, so a pull request where nothing changed
//! costs a few `304 Not Modified` answers, which GitHub does not count against the rate limit.
//! GitLab documents no ETags for its REST API and counts every request: there a quiet look is
//! a few small requests, and any ETag it sends is used all the same (see [`gitlab`]).

pub mod conditional;
pub mod connect;
pub mod github;
pub mod github_issues;
pub mod gitlab;
pub mod health;
pub mod issues;
pub mod tracker;
pub mod words;

pub use crate::config::forges::MergeMethod;
pub use conditional::Conditional;

use crate::review::PullRequest;

/// Why a forge did not answer as asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ForgeError {
    /// 401: the token is wrong, expired or revoked.
    #[error("the forge refused the token (401): {0}")]
    Unauthorized(String),
    /// 404: no such repository or pull request, or the token may not see it.
    #[error("the forge does not show {0} to this token (404)")]
    NotFound(String),
    /// The rate limit is spent until `reset` (epoch seconds), when the forge said.
    #[error("the forge's rate limit is spent{}", reset.map(|r| format!(" until {r}")).unwrap_or_default())]
    RateLimited { reset: Option<i64> },
    /// Unreachable, or a 5xx: an outage, not the bead's fault.
    #[error("the forge is unavailable: {0}")]
    Unavailable(String),
    /// Any other refusal, in the forge's words.
    #[error("the forge refused: {0}")]
    Refused(String),
}

impl ForgeError {
    /// Whether this is the forge's trouble (breaker), not the bead's or the settings'.
    pub fn is_outage(&self) -> bool {
        matches!(
            self,
            ForgeError::RateLimited { .. } | ForgeError::Unavailable(_)
        )
    }
}

/// What one look at a pull request found, and what it cost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observed {
    pub pr: PullRequest,
    /// Requests made.
    pub requests: u32,
    /// Of them, answered `304 Not Modified`: free of quota.
    pub not_modified: u32,
    /// Requests left in the rate-limit window, when the forge said.
    pub remaining: Option<u32>,
}

/// A pull request to open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Opening {
    /// The branch with the work, already pushed.
    pub head: String,
    pub base: String,
    pub title: String,
    pub body: String,
}

/// An open pull request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Opened {
    pub number: u64,
    /// Where a person reads it.
    pub url: String,
}

/// What a merge came to.
#[must_use]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Merged {
    /// Merged: the base's new commit.
    Merged { commit: String },
    /// The head is not the one braids saw pass: somebody pushed in between.
    HeadMoved,
    /// The forge will not merge it now, in its words (a conflict, a rule of the branch).
    NotMergeable(String),
}

/// A forge repository braids opens, watches and merges pull requests on.
pub trait Forge {
    /// Opens a pull request, or finds the one already open for the same head and base.
    fn open(&self, opening: &Opening) -> Result<Opened, ForgeError>;
    /// The pull request `number` now, with its head's checks and its reviews.
    fn observe(&self, number: u64, cache: &mut Conditional) -> Result<Observed, ForgeError>;
    /// Merges `number` with `method` if its head is still `head`.
    fn merge(&self, number: u64, head: &str, method: MergeMethod) -> Result<Merged, ForgeError>;
    /// Deletes the branch `name`; one already gone is no error.
    fn delete_branch(&self, name: &str) -> Result<(), ForgeError>;
    /// Asks for the repository itself: whether the token is taken and may see it (and, where
    /// the forge says, push to it).
    fn probe(&self) -> Result<(), ForgeError>;
}
