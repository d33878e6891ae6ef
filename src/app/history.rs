//! `braids history`: what happened, newest first, from the projects' events; and one sentence
//! per event, shared by the terminal and the dashboard.

use anyhow::Result;
use chrono::{DateTime, Utc};

use crate::events::Event;
use crate::system::paths::Paths;

/// Every event of the registry's projects (or of `project`) at or after `since`, newest first,
/// at most `limit`.
pub fn history(
    paths: &Paths,
    project: Option<&str>,
    since: DateTime<Utc>,
    limit: usize,
) -> Result<Vec<Event>> {
    let sources = super::event_feed::sources(paths, project)?;
    let mut all = Vec::new();
    for s in &sources {
        let mut entries = s.journal.listing();
        entries.reverse();
        let mut taken = 0;
        for entry in entries {
            let Ok(e) = entry.read() else { continue };
            // Ids grow with time within a project: the first older event ends this one.
            if e.timestamp < since || taken == limit {
                break;
            }
            taken += 1;
            all.push(e);
        }
    }
    all.sort_by(|a, b| b.timestamp.cmp(&a.timestamp).then(b.id.cmp(&a.id)));
    all.truncate(limit);
    Ok(all)
}

/// One sentence for an event, from its fields (`what` without time, project or bead).
pub fn describe(e: &Event) -> String {
    let f = |k: &str| -> String {
        match e.fields.get(k) {
            Some(serde_json::Value::String(s)) => s.clone(),
            Some(serde_json::Value::Null) | None => String::new(),
            Some(v) => v.to_string(),
        }
    };
    let took = e
        .fields
        .get("duration_seconds")
        .and_then(|v| v.as_u64())
        .map(|s| format!(" after {}", crate::system::templates::elapsed(s)))
        .unwrap_or_default();
    let text = match e.kind.as_str() {
        "bead_claimed" => "claimed".to_string(),
        "worker_spawned" => format!("worker spawned in {}", f("session")),
        "task_started" => "started".to_string(),
        "task_complete" => {
            let commit = f("commit");
            let pushed = match e.fields.get("pushed").and_then(|v| v.as_bool()) {
                Some(true) => ", pushed",
                Some(false) => ", not pushed",
                None => "",
            };
            if commit.is_empty() {
                format!("completed{took}{pushed}")
            } else {
                format!(
                    "completed{took}, commit {}{pushed}",
                    &commit[..commit.len().min(10)]
                )
            }
        }
        "validation_failed" => {
            let at = f("retry_at");
            let at = DateTime::parse_from_rfc3339(&at)
                .map_or(at, |t| t.format("%Y-%m-%d %H:%M:%S UTC").to_string());
            let cause = f("cause");
            let cause = match cause.is_empty() {
                true => String::new(),
                false => format!(": {cause}"),
            };
            format!(
                "attempt {} failed{took}{cause}; retried from {at}",
                f("failures")
            )
        }
        "bead_blocked" => format!("blocked{took}: {}", f("reason")),
        "question" => format!("asked: {}", f("message")),
        "needs_human" => format!("waits for approval: {}", f("reason")),
        "answered" => format!("answered: {}", f("message")),
        "retried" => format!("retried by a person (was {})", f("from")),
        "killed" => match f("then").as_str() {
            "blocked" => format!("killed by a person and blocked: {}", f("reason")),
            then => format!("killed by a person; {then}"),
        },
        "zombie_killed" => format!("zombie killed: {}", f("reason")),
        "claim_released" => format!("claim released: {}", f("reason")),
        "iteration_complete" => format!("iteration {} complete", f("iteration")),
        "push_failed" => format!("push failed: {}", f("message")),
        "error" => format!("error: {}", f("message")),
        other => {
            let mut s = other.replace('_', " ");
            for k in ["message", "reason"] {
                if !f(k).is_empty() {
                    s.push_str(&format!(": {}", f(k)));
                }
            }
            s
        }
    };
    crate::system::templates::clip(&text, 400)
}
