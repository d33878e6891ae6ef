//! What braids remembers of a bead in review: the pull request its work was opened as, where,
//! and what braids already did about it. Written by the worker that opens the request and by
//! each worker that acts on it; read by the tick, which watches the request, and by every view
//! that shows the bead as in review. Fields a later braids adds are defaulted on load.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::Handled;

/// One bead's pull request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InReview {
    pub bead: String,
    /// The forge's name (config.toml's `[forges.<name>]` or a built-in).
    pub forge: String,
    /// `owner/name` (GitHub) or `group/sub/name` (GitLab).
    pub repository: String,
    pub number: u64,
    /// Where a person reads it.
    pub url: String,
    /// The branch with the work, on the remote.
    pub branch: String,
    /// The branch it merges into, as the remote names it.
    pub base: String,
    /// The head braids last pushed.
    pub head: String,
    pub opened_at: DateTime<Utc>,
    #[serde(default)]
    pub handled: Handled,
    /// What the last look found or did, for people: "checks running", "merged by ana".
    #[serde(default)]
    pub last: String,
    /// While an attempt answers the forge: what its agent is told ([`super::prompt::block`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rework: Option<String>,
    /// When braids pushed `head` (absent in records that predate it: `opened_at`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pushed_at: Option<DateTime<Utc>>,
    /// While an attempt answers the forge: what counts as answered once its work is pushed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<Handled>,
    /// Until the forge opens it: the title and body to open it with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_open: Option<ToOpen>,
}

/// The words of a pull request not opened yet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToOpen {
    pub title: String,
    pub body: String,
}

/// A bead's request as people read it: `pull request #12 <url>`, or that it is not opened yet
/// (its number is 0 until the forge opens it).
pub fn request_words(number: u64, url: &str) -> String {
    match number {
        0 => "pull request not opened yet (its branch is pushed)".into(),
        n => format!("pull request #{n} {url}"),
    }
}

/// The branch a bead's pull request is opened from: braids' own name for it.
pub fn branch_of(bead: &str) -> String {
    format!("braids/{bead}")
}

impl InReview {
    /// The head braids last pushed, and when.
    pub fn pushed(&self) -> (String, DateTime<Utc>) {
        (self.head.clone(), self.pushed_at.unwrap_or(self.opened_at))
    }

    /// Whether the forge opened it: a record is saved, with no number yet, as soon as its
    /// branch is pushed, so a forge that fails to open it (or a worker killed before it
    /// heard) leaves the next worker something to open.
    pub fn opened(&self) -> bool {
        self.number != 0
    }

    /// An attempt did not answer the forge (`what` befell it, `why`): the step it took is left
    /// for a later run, this attempt counted.
    pub fn unanswered(&mut self, what: &str, why: &str) {
        self.pending = None;
        self.rework = None;
        let why: String = why.chars().take(300).collect();
        self.last = format!("attempt {} {what}: {why}", self.handled.attempts);
    }

    /// `#12` with its link, as logs and notifications name it.
    pub fn named(&self) -> String {
        if !self.opened() {
            return format!("the pull request of {} (not opened yet)", self.branch);
        }
        format!("#{} ({})", self.number, self.url)
    }
}
