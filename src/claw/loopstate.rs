//! `.claw/loop.json`: what the claw loop remembers between tasks, and the pure rules that
//! move it: a run that checks off its task resets the count of runs without progress; one that
//! does not adds to it, and `stuck_after` of them pause the loop (`loop_stuck`); a validation
//! that fails beyond the retries pauses it at once (`loop_paused`). A paused loop starts
//! nothing until `braids resume`.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::events::{Draft, Kind};

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct LoopState {
    pub paused: Option<Paused>,
    /// Runs since a task was last checked off.
    pub since_progress: u32,
    /// A person's note for the next task's context packet (`braids resume --note`).
    pub note: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Paused {
    pub reason: String,
    pub task: Option<String>,
    pub since: DateTime<Utc>,
}

/// How one run of the loop ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunEnd {
    /// Validated and checked off; `left` unchecked tasks remain.
    Done { left: usize },
    /// Validation still failing after the retries.
    ValidationFailed { output: String },
    /// The coder failed, or anything else that left the task unchecked.
    NoProgress { why: String },
}

impl LoopState {
    /// The state after a run of `task`, and the loop events it calls for.
    #[must_use]
    pub fn after(
        &self,
        task: &str,
        end: &RunEnd,
        stuck_after: u32,
        now: DateTime<Utc>,
    ) -> (LoopState, Vec<Draft>) {
        let mut next = self.clone();
        let mut told = Vec::new();
        match end {
            RunEnd::Done { left } => {
                next.since_progress = 0;
                next.note = None;
                if *left == 0 {
                    told.push(Draft::new(Kind::LoopComplete));
                }
            }
            RunEnd::ValidationFailed { output } => {
                next.since_progress += 1;
                let reason = "validation failed after the retries".to_string();
                next.paused = Some(Paused {
                    reason: reason.clone(),
                    task: Some(task.into()),
                    since: now,
                });
                told.push(
                    Draft::new(Kind::LoopPaused)
                        .with("task", task)
                        .with("reason", reason)
                        .with("message", crate::system::templates::clip(output, 400)),
                );
            }
            RunEnd::NoProgress { why } => {
                next.since_progress += 1;
                if stuck_after > 0 && next.since_progress >= stuck_after {
                    let reason = format!(
                        "{} loop iterations without a task checked off",
                        next.since_progress
                    );
                    next.paused = Some(Paused {
                        reason: reason.clone(),
                        task: Some(task.into()),
                        since: now,
                    });
                    told.push(
                        Draft::new(Kind::LoopStuck)
                            .with("task", task)
                            .with("reason", reason)
                            .with("message", why),
                    );
                }
            }
        }
        (next, told)
    }

    /// `braids resume`: the loop goes on, with the person's note for the next packet.
    #[must_use]
    pub fn resumed(&self, note: Option<String>) -> LoopState {
        LoopState {
            paused: None,
            since_progress: 0,
            note: note.or_else(|| self.note.clone()),
        }
    }
}

pub fn path(project: &std::path::Path) -> std::path::PathBuf {
    project.join(".claw/loop.json")
}

/// The state on disk; a missing or unreadable file is a fresh loop.
pub fn load(project: &std::path::Path) -> LoopState {
    crate::system::atomic::read(&path(project))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

pub fn store(project: &std::path::Path, s: &LoopState) -> anyhow::Result<()> {
    let mut bytes = serde_json::to_vec_pretty(s)?;
    bytes.push(b'\n');
    crate::system::atomic::write(&path(project), &bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(d: &[Draft]) -> Vec<Kind> {
        d.iter().map(|d| d.kind).collect()
    }

    #[test]
    fn the_loops_rules_table() {
        let now = Utc::now();
        let fresh = LoopState::default();
        let (s, t) = fresh.after("a", &RunEnd::Done { left: 2 }, 3, now);
        assert_eq!((s.since_progress, kinds(&t)), (0, vec![]));
        let (s, t) = fresh.after("a", &RunEnd::Done { left: 0 }, 3, now);
        assert_eq!(kinds(&t), [Kind::LoopComplete]);
        assert!(s.paused.is_none());
        let (s, t) = fresh.after(
            "a",
            &RunEnd::ValidationFailed {
                output: "1 failed".into(),
            },
            3,
            now,
        );
        assert_eq!(kinds(&t), [Kind::LoopPaused]);
        assert!(s.paused.is_some());
        let mut s = fresh.clone();
        for i in 1..=3 {
            let (n, t) = s.after(
                "a",
                &RunEnd::NoProgress {
                    why: "coder failed".into(),
                },
                3,
                now,
            );
            assert_eq!(n.since_progress, i);
            assert_eq!(
                kinds(&t),
                if i == 3 {
                    vec![Kind::LoopStuck]
                } else {
                    vec![]
                }
            );
            s = n;
        }
        assert!(s.paused.is_some());
        let r = s.resumed(Some("try the other API".into()));
        assert_eq!(
            (r.paused.clone(), r.since_progress, r.note.as_deref()),
            (None, 0, Some("try the other API"))
        );
        let (s, _) = r.after("a", &RunEnd::Done { left: 1 }, 3, now);
        assert_eq!(s.note, None, "a note reaches one packet");
    }
}
