//! What a blocked bead waits for, from braids' own events: the question its agent asked, the
//! plan waiting for approval, or the reason it was blocked. The trackers keep these only as
//! free-text comments that differ between `br`, `bd` and WORKPLAN.md; the events say them the
//! same way everywhere.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::{Event, Journal};

/// What a bead waits for, from braids' own events.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Waiting {
    /// `question` (the agent asked something), `approval` (ask-first), `blocked` (a reason),
    /// `retry` (a failed attempt, eligible again at `retry_at`).
    pub kind: WaitKind,
    pub text: String,
    pub since: DateTime<Utc>,
    /// `held`: the branch braids kept the work on and the commit it pointed at then; only
    /// that commit is ever approved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kept: Option<Kept>,
}

/// Where braids kept a bead's work for a person.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Kept {
    pub branch: String,
    pub commit: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WaitKind {
    Question,
    Approval,
    Blocked,
    /// Blocked with its work kept on a branch for a person to approve or reject.
    Held,
}

impl WaitKind {
    pub fn as_str(self) -> &'static str {
        match self {
            WaitKind::Question => "question",
            WaitKind::Approval => "approval",
            WaitKind::Blocked => "blocked",
            WaitKind::Held => "held",
        }
    }

    /// Whether `braids answer` is what this bead waits for.
    pub fn answerable(self) -> bool {
        matches!(self, WaitKind::Question | WaitKind::Approval)
    }
}

/// The event types [`waiting_from`] reads.
const SETTLING: &[&str] = &[
    "question",
    "needs_human",
    "bead_blocked",
    "error",
    "killed",
    "answered",
    "retried",
    "task_started",
    "task_complete",
    "bead_claimed",
    "worker_spawned",
    "validation_failed",
];

/// What the newest event about a bead says it waits for, if it waits for a person at all.
/// Events that end the wait (an answer, a retry, a new attempt, completion) end it.
pub fn waiting_from(e: &Event) -> Option<Option<Waiting>> {
    let text_of = |k: &str| {
        e.fields
            .get(k)
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_string()
    };
    let text = text_of;
    let w = |kind, text: String| {
        let kept = (kind == WaitKind::Held).then(|| Kept {
            branch: text_of("kept"),
            commit: text_of("kept_commit"),
        });
        Some(Some(Waiting {
            kind,
            text,
            since: e.timestamp,
            kept,
        }))
    };
    match e.kind.as_str() {
        "question" => w(WaitKind::Question, text("message")),
        "needs_human" => w(WaitKind::Approval, text("reason")),
        "bead_blocked" if e.fields.contains_key("kept") => w(WaitKind::Held, text("reason")),
        "bead_blocked" => w(WaitKind::Blocked, text("reason")),
        "error" if e.bead.is_some() => w(WaitKind::Blocked, text("message")),
        "killed" if text("then") == "blocked" => w(WaitKind::Blocked, text("reason")),
        "answered" | "retried" | "killed" | "task_started" | "task_complete" | "bead_claimed"
        | "worker_spawned" | "validation_failed" => Some(None),
        _ => None,
    }
}

/// For each of `beads`, what the project's events say it waits for (newest event first; the
/// search stops once every bead is settled).
pub fn waiting(journal: &Journal, beads: &BTreeSet<&str>) -> BTreeMap<String, Waiting> {
    let mut out = BTreeMap::new();
    let mut settled: BTreeSet<String> = BTreeSet::new();
    if beads.is_empty() {
        return out;
    }
    let mut entries = journal.listing();
    entries.reverse();
    for entry in entries {
        if settled.len() == beads.len() {
            break;
        }
        // The type is in the file name: only events that can settle a wait are read.
        if !SETTLING.contains(&entry.kind().as_str()) {
            continue;
        }
        let Ok(e) = entry.read() else { continue };
        let Some(bead) = e.bead.as_deref() else {
            continue;
        };
        if !beads.contains(bead) || settled.contains(bead) {
            continue;
        }
        if let Some(w) = waiting_from(&e) {
            settled.insert(bead.to_string());
            if let Some(w) = w {
                out.insert(bead.to_string(), w);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(kind: &str, fields: serde_json::Value) -> Event {
        Event {
            id: 1,
            kind: kind.into(),
            timestamp: Utc::now(),
            project: "app".into(),
            bead: Some("app-1".into()),
            fields: fields.as_object().cloned().unwrap_or_default(),
        }
    }

    #[test]
    fn what_each_event_says_a_bead_waits_for() {
        let q = waiting_from(&event(
            "question",
            serde_json::json!({"message": "JSON or XML?"}),
        ));
        let q = q.unwrap().unwrap();
        assert_eq!(
            (q.kind, q.text.as_str()),
            (WaitKind::Question, "JSON or XML?")
        );
        let b = waiting_from(&event(
            "bead_blocked",
            serde_json::json!({"reason": "3 failures"}),
        ));
        assert_eq!(b.unwrap().unwrap().kind, WaitKind::Blocked);
        let a = waiting_from(&event("needs_human", serde_json::json!({"reason": "plan"})));
        assert!(a.unwrap().unwrap().kind.answerable());
        for ends in ["answered", "retried", "task_complete", "worker_spawned"] {
            assert_eq!(
                waiting_from(&event(ends, serde_json::json!({}))),
                Some(None),
                "{ends}"
            );
        }
        let killed = event(
            "killed",
            serde_json::json!({"then": "blocked", "reason": "wrong"}),
        );
        assert_eq!(waiting_from(&killed).unwrap().unwrap().text, "wrong");
        assert_eq!(
            waiting_from(&event("push_failed", serde_json::json!({}))),
            None
        );
    }

    #[test]
    fn a_block_with_kept_work_is_held_for_a_person() {
        let held = event(
            "bead_blocked",
            serde_json::json!({"reason": "r", "kept": "braids/kept/app-1-x"}),
        );
        let plain = event("bead_blocked", serde_json::json!({"reason": "r"}));
        let kind = |e: &Event| waiting_from(e).flatten().map(|w| w.kind);
        assert_eq!(kind(&held), Some(WaitKind::Held));
        assert_eq!(kind(&plain), Some(WaitKind::Blocked));
        assert!(!WaitKind::Held.answerable());
    }
}
