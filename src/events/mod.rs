//! The supervisor's stream (claw-builder's "file-based events"): everything braids does
//! to a project is also written as one small JSON file, `<project>/.claw/events/NNNNNN-<type>.event`,
//! so a person, a script or a stronger model can follow braids without polling STATUS.md and
//! diffing it.
//!
//! Why files and not a socket or a log: they survive every crash of every party, need no
//! running server, and the seed's supervisors (a bash loop over `*.event`, `inotifywait`) work
//! on them unchanged. What makes them dependable is the [`journal`]:
//! - **atomic**: an event file appears whole (temp + fsync + rename) or not at all;
//! - **ordered and never reused**: ids are per project, strictly increasing, allocated under a
//!   lock from a counter written *before* the event, so a crash leaves a gap, never a repeat;
//! - **never lost**: retention prunes only events a supervisor marked `.processed`, and never
//!   the newest one.
//!
//! `.processed` markers belong to the supervisor: the tick and the worker never create or
//! remove one (retention removes a marker only with its pruned event). [`status`] keeps
//! `.claw/status.json`, the project's state at a glance; [`stream`] reads every project's
//! events as one ordered stream and follows it live.

pub mod journal;
pub mod kind;
pub mod status;
pub mod stream;
pub mod waiting;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

pub use journal::Journal;
pub use kind::Kind;

/// The project folder braids' supervisor files live in (the seed's).
pub const CLAW_DIR: &str = ".claw";

/// What braids writes under `.claw/` for supervisors; never part of a commit (the worker's
/// landings skip these, and `.claw/.gitignore` names them for people's own `git add -A`).
pub const GENERATED: &[&str] = &[
    ".claw/events",
    ".claw/status.json",
    ".claw/context",
    ".claw/loop.json",
    ".claw/ISSUES.md",
    ".claw/.workplan.lock",
];

/// Whether a project-relative path is one of braids' [`GENERATED`] files.
pub fn generated(rel: &std::path::Path) -> bool {
    GENERATED.iter().any(|g| rel.starts_with(g))
}

/// One event as written and read. Unknown fields and types (a newer braids, a hand-written
/// event) are kept, never an error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub id: u64,
    #[serde(rename = "type")]
    pub kind: String,
    pub timestamp: DateTime<Utc>,
    #[serde(default)]
    pub project: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bead: Option<String>,
    /// The fields of its kind: `message`, `reason`, `session`, `duration_seconds`, …
    #[serde(flatten)]
    pub fields: serde_json::Map<String, serde_json::Value>,
}

/// An event before it has an id and a time: what the tick and the worker hand to the journal.
#[derive(Debug, Clone, PartialEq)]
#[must_use]
pub struct Draft {
    pub kind: Kind,
    pub bead: Option<String>,
    pub fields: serde_json::Map<String, serde_json::Value>,
}

impl Draft {
    pub fn new(kind: Kind) -> Draft {
        Draft {
            kind,
            bead: None,
            fields: serde_json::Map::new(),
        }
    }

    pub fn bead(mut self, bead: impl std::fmt::Display) -> Draft {
        self.bead = Some(bead.to_string());
        self
    }

    /// Adds a field; a `None` or a unit value adds nothing.
    pub fn with(mut self, key: &str, value: impl Serialize) -> Draft {
        match serde_json::to_value(value) {
            Ok(serde_json::Value::Null) | Err(_) => {}
            Ok(v) => {
                self.fields.insert(key.to_string(), v);
            }
        }
        self
    }
}

/// Appends `drafts` to the project's journal, logging (never returning) a failure: an event
/// that cannot be written must not fail the bead or the tick it tells of.
pub fn emit(project_root: &std::path::Path, slug: &str, drafts: Vec<Draft>) {
    if drafts.is_empty() {
        return;
    }
    let journal = Journal::of_project(project_root);
    // The time is taken with the lock held, so a project's events never go back in time.
    if let Err(e) = journal
        .hold()
        .and_then(|h| h.append(slug, drafts, Utc::now()))
    {
        tracing::warn!(project = slug, "cannot write events: {e:#}");
    }
}
