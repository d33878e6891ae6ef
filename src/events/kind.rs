//! The event types: the claw-builder seed's seven and the `validation_pass` its status.json
//! shows, then braids' own, named the same way.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    // The seed's.
    TaskStarted,
    TaskComplete,
    ValidationFailed,
    /// The claw loop's checks passed (seed 003's status.json shows it).
    ValidationPass,
    LoopStuck,
    LoopPaused,
    LoopComplete,
    Error,
    // braids'.
    BeadClaimed,
    WorkerSpawned,
    ZombieKilled,
    ClaimReleased,
    BeadBlocked,
    Question,
    IterationComplete,
    NeedsHuman,
    PushFailed,
    WorkKept,
    /// A person answered a bead's question (`braids answer`).
    Answered,
    /// A person made a bead eligible again (`braids retry`).
    Retried,
    /// A person ended a bead's worker (`braids kill`), then requeued or blocked it.
    Killed,
    /// A bead's work was opened as a pull request: it is in review.
    PrOpened,
    /// A check of its pull request failed: an attempt answers it.
    ChecksFailed,
    /// A reviewer asked for changes (or the base conflicts): an attempt answers it.
    ChangesRequested,
    /// Its pull request was merged: the bead is done.
    PrMerged,
    /// Its pull request was closed without a merge: the bead is blocked.
    PrClosed,
}

impl Kind {
    pub const ALL: &'static [Kind] = &[
        Kind::TaskStarted,
        Kind::TaskComplete,
        Kind::ValidationFailed,
        Kind::ValidationPass,
        Kind::LoopStuck,
        Kind::LoopPaused,
        Kind::LoopComplete,
        Kind::Error,
        Kind::BeadClaimed,
        Kind::WorkerSpawned,
        Kind::ZombieKilled,
        Kind::ClaimReleased,
        Kind::BeadBlocked,
        Kind::Question,
        Kind::IterationComplete,
        Kind::NeedsHuman,
        Kind::PushFailed,
        Kind::WorkKept,
        Kind::Answered,
        Kind::Retried,
        Kind::Killed,
        Kind::PrOpened,
        Kind::ChecksFailed,
        Kind::ChangesRequested,
        Kind::PrMerged,
        Kind::PrClosed,
    ];

    /// The `type` field: `task_complete`.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::TaskStarted => "task_started",
            Kind::TaskComplete => "task_complete",
            Kind::ValidationFailed => "validation_failed",
            Kind::ValidationPass => "validation_pass",
            Kind::LoopStuck => "loop_stuck",
            Kind::LoopPaused => "loop_paused",
            Kind::LoopComplete => "loop_complete",
            Kind::Error => "error",
            Kind::BeadClaimed => "bead_claimed",
            Kind::WorkerSpawned => "worker_spawned",
            Kind::ZombieKilled => "zombie_killed",
            Kind::ClaimReleased => "claim_released",
            Kind::BeadBlocked => "bead_blocked",
            Kind::Question => "question",
            Kind::IterationComplete => "iteration_complete",
            Kind::NeedsHuman => "needs_human",
            Kind::PushFailed => "push_failed",
            Kind::WorkKept => "work_kept",
            Kind::Answered => "answered",
            Kind::Retried => "retried",
            Kind::Killed => "killed",
            Kind::PrOpened => "pr_opened",
            Kind::ChecksFailed => "checks_failed",
            Kind::ChangesRequested => "changes_requested",
            Kind::PrMerged => "pr_merged",
            Kind::PrClosed => "pr_closed",
        }
    }

    /// The file name's part, as in the seed's `007-task-complete.event`.
    pub fn file_part(self) -> String {
        self.as_str().replace('_', "-")
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_event_type_is_in_the_docs_event_table() {
        let readme =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/events.md"))
                .expect("docs/events.md");
        let missing: Vec<&str> = Kind::ALL
            .iter()
            .map(|k| k.as_str())
            .filter(|t| {
                !readme.lines().any(|l| {
                    l.starts_with("| `")
                        && l.split('|')
                            .nth(1)
                            .is_some_and(|c| c.contains(&format!("`{t}`")))
                })
            })
            .collect();
        assert!(
            missing.is_empty(),
            "event types the table of docs/events.md lacks: {missing:?}"
        );
    }

    use super::*;

    #[test]
    fn names_match_serde_and_every_kind_is_listed() {
        for k in Kind::ALL {
            let json = serde_json::to_string(k).unwrap();
            assert_eq!(json, format!("\"{}\"", k.as_str()));
            assert!(!k.file_part().contains('_'));
        }
        assert_eq!(Kind::ALL.len(), 26);
    }
}
