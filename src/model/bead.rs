//! Bead identity and state, as every tracker adapter reports them.
//!
//! A bead id comes from a tracker or a file a person edited, and it ends up in session labels,
//! spawn messages, file names and commit messages. It is therefore validated once, at the edge,
//! into a [`BeadId`] that cannot carry a separator, a path component, a newline or shell syntax.

use std::fmt;

use serde::{Deserialize, Serialize};
use smol_str::SmolStr;

/// The prefix of a forge issue's bead id.
pub const ISSUE_PREFIX: &str = "issue-";

/// The longest bead id accepted; real ids are a prefix plus a short hash.
const MAX_LEN: usize = 64;

/// Why a string is not a bead id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BeadIdError {
    #[error("bead id is empty")]
    Empty,
    #[error("bead id `{0}` is longer than 64 characters")]
    TooLong(String),
    #[error("bead id `{0}` may only contain letters, digits, `-`, `_` and `.`, and must start with a letter or digit")]
    BadChar(String),
}

/// A validated bead id: `[A-Za-z0-9][A-Za-z0-9._-]*`, at most 64 bytes.
///
/// Ids are copied into every view, story, candidate, label and message a tick builds; held
/// inline (up to 23 bytes, as real ids are), they cost no allocation to make or copy.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BeadId(SmolStr);

impl BeadId {
    pub fn new(raw: &str) -> Result<Self, BeadIdError> {
        let s = raw.trim();
        if s.is_empty() {
            return Err(BeadIdError::Empty);
        }
        if s.len() > MAX_LEN {
            return Err(BeadIdError::TooLong(s.chars().take(MAX_LEN).collect()));
        }
        let mut chars = s.chars();
        let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphanumeric());
        if !first_ok
            || !s
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        {
            return Err(BeadIdError::BadChar(s.escape_debug().to_string()));
        }
        Ok(BeadId(SmolStr::new(s)))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The bead of a forge's issue `#number`: `issue-<number>`.
    pub fn of_issue(number: u64) -> BeadId {
        BeadId(SmolStr::new(format!("{ISSUE_PREFIX}{number}")))
    }

    /// The issue number this bead id names (`issue-12`, or a bare `12`), if any; written as
    /// the forge writes it (`012` names nothing, so one issue has one id).
    pub fn issue_number(&self) -> Option<u64> {
        let s = self.0.as_str();
        let digits = s.strip_prefix(ISSUE_PREFIX).unwrap_or(s);
        if digits.starts_with('0') || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        digits.parse().ok()
    }

    /// The short form used to name deliverables (1.4): the part after the last `-`, or the
    /// last three characters when the id has no `-`.
    pub fn suffix(&self) -> &str {
        match self.0.rsplit_once('-') {
            Some((_, tail)) if !tail.is_empty() => tail,
            _ => {
                let n = self.0.len();
                &self.0[n.saturating_sub(3)..]
            }
        }
    }

    /// Whether a deliverable file-name prefix refers to this bead: the suffix, the last three
    /// characters (the letter of 1.4), or the whole id.
    pub fn matches_prefix(&self, prefix: &str) -> bool {
        let n = self.0.len();
        prefix.eq_ignore_ascii_case(self.suffix())
            || prefix.eq_ignore_ascii_case(&self.0[n.saturating_sub(3)..])
            || prefix.eq_ignore_ascii_case(&self.0)
    }
}

impl fmt::Display for BeadId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for BeadId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for BeadId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        BeadId::new(&s).map_err(serde::de::Error::custom)
    }
}

impl std::str::FromStr for BeadId {
    type Err = BeadIdError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        BeadId::new(s)
    }
}

/// A bead's lifecycle state (4.6): `open → in_progress → closed | blocked`, blocked may reopen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BeadStatus {
    Open,
    InProgress,
    Blocked,
    /// Postponed by a person; never ready.
    Deferred,
    Closed,
    /// A status this version does not know; treated as not ready and not closed.
    Unknown,
}

impl BeadStatus {
    /// Reads a tracker's spelling (`in_progress`, `in-progress`, `done`, `[x]` …).
    pub fn parse(raw: &str) -> BeadStatus {
        match raw.trim().to_ascii_lowercase().replace('-', "_").as_str() {
            "open" | "ready" | "todo" => BeadStatus::Open,
            "in_progress" | "inprogress" | "claimed" | "doing" => BeadStatus::InProgress,
            "blocked" => BeadStatus::Blocked,
            "deferred" | "pinned" | "hooked" => BeadStatus::Deferred,
            "closed" | "done" | "complete" | "completed" | "tombstone" => BeadStatus::Closed,
            _ => BeadStatus::Unknown,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            BeadStatus::Open => "open",
            BeadStatus::InProgress => "in_progress",
            BeadStatus::Blocked => "blocked",
            BeadStatus::Deferred => "deferred",
            BeadStatus::Closed => "closed",
            BeadStatus::Unknown => "unknown",
        }
    }

    /// Whether moving from `self` to `to` is a lifecycle transition 4.6 allows. Staying put is
    /// allowed; closed is final.
    pub fn can_become(self, to: BeadStatus) -> bool {
        use BeadStatus::*;
        self == to
            || matches!(
                (self, to),
                (Open, InProgress)
                    | (InProgress, Closed)
                    | (InProgress, Blocked)
                    | (InProgress, Open)
                    | (Blocked, Open)
                    | (Open, Blocked)
                    | (Open, Deferred)
                    | (Deferred, Open)
            )
    }
}

impl fmt::Display for BeadStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One bead as a tracker reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bead {
    pub id: BeadId,
    pub title: String,
    pub status: BeadStatus,
    /// 0 is most urgent, as in beads; trackers without priorities report 2.
    pub priority: u8,
    #[serde(default)]
    pub description: String,
    /// Direct blocking dependencies (3.3); transitive ones are the tracker's business.
    #[serde(default)]
    pub dependencies: Vec<BeadId>,
    #[serde(default)]
    pub assignee: Option<String>,
    /// The tracker's labels (`size:L` sizes a protocol story); empty where it has none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<String>,
    /// Where a person reads it, for a tracker that has pages (a forge's issue).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

impl Bead {
    /// A bead with defaults for everything but id, title and status; handy for adapters and tests.
    pub fn new(id: BeadId, title: impl Into<String>, status: BeadStatus) -> Bead {
        Bead {
            id,
            title: title.into(),
            status,
            priority: 2,
            description: String::new(),
            dependencies: Vec::new(),
            assignee: None,
            labels: Vec::new(),
            url: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_ids_are_rejected() {
        for bad in [
            "", "a:b", "../x", "a/b", "a b", "$(rm)", "a\nb", "-x", ".x", "a\"b", "é1",
        ] {
            assert!(BeadId::new(bad).is_err(), "{bad:?} accepted");
        }
        assert!(BeadId::new(&"a".repeat(65)).is_err());
    }

    #[test]
    fn suffixes() {
        let id = BeadId::new("braids-a1b").unwrap();
        assert_eq!(id.suffix(), "a1b");
        assert!(id.matches_prefix("a1b") && id.matches_prefix("braids-a1b"));
        assert!(!id.matches_prefix("a1"));
        let long = BeadId::new("proj-x9k2q").unwrap();
        assert_eq!(long.suffix(), "x9k2q");
        assert!(
            long.matches_prefix("k2q"),
            "last three characters, the letter of 1.4"
        );
        assert_eq!(BeadId::new("abcdef").unwrap().suffix(), "def");
    }

    #[test]
    fn c4_6_lifecycle_transitions() {
        use BeadStatus::*;
        assert!(Open.can_become(InProgress));
        assert!(InProgress.can_become(Closed) && InProgress.can_become(Blocked));
        assert!(Blocked.can_become(Open));
        for to in [Open, InProgress, Blocked, Deferred] {
            assert!(!Closed.can_become(to), "closed is final, but became {to}");
        }
        assert!(
            !Open.can_become(Closed),
            "a bead is claimed before it is closed"
        );
    }
}
