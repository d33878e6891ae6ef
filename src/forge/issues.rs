//! A forge's issues as braids reads and changes them, in forge-neutral terms: what
//! [`crate::tracker::issues`] makes beads of. GitHub numbers an issue, GitLab gives it an
//! `iid`; both are [`Issue::number`] here, what a person writes as `#<n>`.

use serde::{Deserialize, Serialize};

use super::{Conditional, ForgeError};

/// The most pages of 100 braids reads of one list: a list longer than that is a forge that
/// does not stop, not a repository.
pub const MOST_PAGES: u32 = 1_000;

/// The error for a list at `path` that went on past [`MOST_PAGES`].
pub fn endless(path: &str) -> ForgeError {
    ForgeError::Refused(format!(
        "{path} went on past {MOST_PAGES} pages of 100: braids reads no further"
    ))
}

/// One issue, as the tracker keeps it between runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Issue {
    pub number: u64,
    pub title: String,
    #[serde(default)]
    pub body: String,
    pub open: bool,
    #[serde(default)]
    pub labels: Vec<String>,
    /// Logins (GitHub) or usernames (GitLab).
    #[serde(default)]
    pub assignees: Vec<String>,
    #[serde(default)]
    pub author: String,
    /// Where a person reads it.
    #[serde(default)]
    pub url: String,
    #[serde(default)]
    pub milestone: Option<String>,
    /// RFC 3339, as the forge wrote it.
    #[serde(default)]
    pub created: String,
    #[serde(default)]
    pub updated: String,
    /// How many comments it has: with `updated` (to the second), what tells a new reply.
    #[serde(default)]
    pub comments: u64,
    /// The conversation is locked: only people with write access may comment.
    #[serde(default)]
    pub locked: bool,
    /// Issues of the same repository the forge itself says block this one (GitHub's issue
    /// dependencies, GitLab's "is blocked by" links); `Depends on #n` lines in the body are
    /// read by the tracker.
    #[serde(default)]
    pub blocked_by: Vec<u64>,
}

/// One comment on an issue (a GitLab note that is not a system note).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IssueComment {
    pub id: u64,
    pub author: String,
    pub body: String,
    pub created: String,
}

/// What one listing read, and what it cost.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Listing {
    /// The issues changed since the listing's `since` (all of them without one) on the pages
    /// that were read anew.
    pub issues: Vec<Issue>,
    /// The numbers on the pages answered `304`: as braids last read them.
    pub unchanged: Vec<u64>,
    pub requests: u32,
    /// Of them, answered `304 Not Modified`.
    pub not_modified: u32,
    /// The forge's listing does not say what blocks an issue (GitLab): each keeps the
    /// `blocked_by` its last single read found.
    pub blockers_unread: bool,
}

/// What one read of a single issue found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    Issue(Issue),
    /// Deleted, or never there (404, 410).
    Gone,
    /// Transferred to another repository, or (GitLab) moved and closed here.
    Moved,
}

/// The issues of one repository, as one token sees them.
pub trait IssueForge {
    /// The token's own user: who braids assigns and whose comments are its own.
    fn me(&self) -> Result<String, ForgeError>;
    /// Issues and their state, conditional on `cache`: with `labels` (all must match) every
    /// such issue, open or closed; with `since` (RFC 3339) every issue updated since then,
    /// labelled or not, so one that lost a label is seen too. Pull requests are left out.
    fn issues(
        &self,
        labels: &[String],
        since: Option<&str>,
        cache: &mut Conditional,
    ) -> Result<Listing, ForgeError>;
    /// One issue now.
    fn issue(&self, number: u64, cache: &mut Conditional) -> Result<Found, ForgeError>;
    /// The comments on `number`, oldest first.
    fn comments(
        &self,
        number: u64,
        cache: &mut Conditional,
    ) -> Result<Vec<IssueComment>, ForgeError>;
    fn comment(&self, number: u64, body: &str) -> Result<(), ForgeError>;
    /// Adds `add` and removes `remove` from the issue's labels, leaving the others.
    fn relabel(&self, number: u64, add: &[String], remove: &[String]) -> Result<(), ForgeError>;
    /// Assigns the issue to `login` (`Some`) or takes `login` off it (`None` keeps others).
    fn assign(&self, number: u64, login: &str, on: bool) -> Result<(), ForgeError>;
    /// Closes (`false`) or reopens (`true`) the issue.
    fn set_open(&self, number: u64, open: bool) -> Result<(), ForgeError>;
    fn create(&self, title: &str, body: &str, labels: &[String]) -> Result<u64, ForgeError>;
    fn edit_body(&self, number: u64, body: &str) -> Result<(), ForgeError>;
    /// Makes the label `name` exist in the repository (or project).
    fn ensure_label(&self, name: &str, color: &str) -> Result<(), ForgeError>;
    /// Whether `login` may write to the repository (push; GitLab's Developer or above).
    fn can_write(&self, login: &str) -> Result<bool, ForgeError>;
    /// Whether the token may read issues here at all; the error says what is missing.
    fn probe_issues(&self) -> Result<(), ForgeError>;
    /// Whether any issue, open or closed, carries all of `labels` (one small request).
    fn any_labelled(&self, labels: &[String]) -> Result<bool, ForgeError>;
}
