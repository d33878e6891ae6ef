//! What a tick did ([`TickReport`]): the value `--json` prints, the one INFO line a run logs,
//! and the summary STATUS.md shows.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::act::{Killed, Released, Spawned};
use crate::tick::orchestrator_state::IdleReason;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunType {
    Full,
    Skipped,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    Spawn,
    Idle,
}

/// Why a run was skipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SkipReason {
    /// Idle backoff (2.7) said to wait.
    Backoff,
    /// Another tick holds the lock.
    Locked,
}

impl SkipReason {
    pub fn as_str(self) -> &'static str {
        match self {
            SkipReason::Backoff => "backoff",
            SkipReason::Locked => "locked",
        }
    }
}

/// What a tick did; `--json` prints exactly this, and tests read it back.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TickReport {
    pub run: RunType,
    pub action: Action,
    pub idle_reason: Option<IdleReason>,
    pub spawns: Vec<Spawned>,
    pub zombies: Vec<Killed>,
    pub released: Vec<Released>,
    /// Projects whose earlier failed push succeeded on retry this run (4.4).
    pub pushed: Vec<String>,
    pub errors: Vec<String>,
    /// Problems this run found for the first time, each logged once at WARN: a story its
    /// tracker does not know (1.3). STATUS.md lists them for as long as they last.
    #[serde(default)]
    pub warnings: Vec<String>,
    pub dry_run: bool,
    /// Why a skipped run was skipped: `backoff` or `locked`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skip: Option<SkipReason>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_full_run: Option<DateTime<Utc>>,
    /// Projects whose check-in went out this run.
    pub checkins: Vec<String>,
    /// Errors and warnings the previous run already logged: logged again at DEBUG only, so a
    /// problem is a WARN line when it appears or changes, not every minute.
    #[serde(skip)]
    pub told_before: std::collections::BTreeSet<String>,
}

impl TickReport {
    pub(super) fn skipped(
        skip: SkipReason,
        reason: Option<IdleReason>,
        next: Option<DateTime<Utc>>,
        dry_run: bool,
    ) -> Self {
        TickReport {
            run: RunType::Skipped,
            action: Action::Idle,
            idle_reason: reason,
            spawns: vec![],
            zombies: vec![],
            released: vec![],
            pushed: vec![],
            errors: vec![],
            warnings: vec![],
            told_before: Default::default(),
            dry_run,
            skip: Some(skip),
            next_full_run: next,
            checkins: vec![],
        }
    }

    /// A full run's report, before check-ins are known.
    /// A full run's report; `spawns` are `outcome`'s (moved out by a dry run, which needs
    /// them no more: 20,000 at 10,000 projects).
    pub(super) fn full(
        plan: &super::Plan,
        outcome: &super::act::Outcome,
        spawns: Vec<super::Spawned>,
        pushed: Vec<String>,
        errors: Vec<String>,
        dry_run: bool,
    ) -> Self {
        let spawned = !spawns.is_empty();
        TickReport {
            run: RunType::Full,
            action: if spawned { Action::Spawn } else { Action::Idle },
            idle_reason: (!spawned).then_some(plan.idle_reason),
            spawns,
            zombies: outcome.killed.clone(),
            released: outcome.released.clone(),
            pushed,
            errors,
            warnings: vec![],
            told_before: Default::default(),
            dry_run,
            skip: None,
            next_full_run: None,
            checkins: vec![],
        }
    }

    /// Logs [`summary`](Self::summary) as the run's one INFO line, with the numbers as fields
    /// in JSON logs, and each error as a WARN line. `braids tick` and `braids daemon` both log each run through here.
    pub fn log(&self) {
        let summary = self.summary();
        if crate::system::logging::is_json() {
            self.log_fields(&summary);
        } else {
            tracing::info!("{summary}{}", self.details());
        }
        // The summary counts errors; their text goes to the log too (at WARN, so the run
        // still has one INFO line), since a scheduled run's stdout is not kept. One the last
        // run logged already goes at DEBUG: a WARN line means something new.
        for e in self.errors.iter().chain(&self.warnings) {
            if self.told_before.contains(e) {
                tracing::debug!("{e}");
            } else {
                tracing::warn!("{e}");
            }
        }
    }

    /// Which workers were started and killed, for the log line: ` [spawned: a b; killed: c]`,
    /// the first few of each and then how many more.
    fn details(&self) -> String {
        let mut parts = Vec::new();
        if !self.spawns.is_empty() {
            let labels = self.spawns.iter().map(|s| s.label.as_str());
            parts.push(format!("spawned: {}", first_few(labels)));
        }
        if !self.zombies.is_empty() {
            let labels = self.zombies.iter().map(|z| z.label.as_str());
            parts.push(format!("killed: {}", first_few(labels)));
        }
        if parts.is_empty() {
            String::new()
        } else {
            format!(" [{}]", parts.join("; "))
        }
    }

    fn log_fields(&self, summary: &str) {
        // Space-separated (labels never contain spaces), the first few and how many more.
        let spawned_labels = first_few(self.spawns.iter().map(|s| s.label.as_str()));
        let killed_labels = first_few(self.zombies.iter().map(|z| z.label.as_str()));
        tracing::info!(
            run = match self.run {
                RunType::Full => "full",
                RunType::Skipped => "skipped",
            },
            skip = self.skip.map(SkipReason::as_str),
            dry_run = self.dry_run,
            spawned = self.spawns.len(),
            killed = self.zombies.len(),
            released = self.released.len(),
            idle_reason = self.idle_reason.map(|r| r.as_str()),
            errors = self.errors.len(),
            checkins = self.checkins.len(),
            spawned_labels = %spawned_labels,
            killed_labels = %killed_labels,
            "{summary}"
        );
    }

    /// The one log line that says what the run did.
    pub fn summary(&self) -> String {
        let dry = if self.dry_run { " (dry run)" } else { "" };
        match (self.run, self.skip) {
            (RunType::Skipped, Some(SkipReason::Locked)) => {
                "skipped: another tick holds the lock".into()
            }
            (RunType::Skipped, _) => format!(
                "skipped{dry}: idle ({}) until {}",
                self.idle_reason.map_or("-", |r| r.as_str()),
                self.next_full_run
                    .map_or("-".into(), |t| t.format("%H:%M:%S UTC").to_string())
            ),
            (RunType::Full, _) => {
                let mut s = format!(
                    "full run{dry}: spawned {}, killed {}",
                    self.spawns.len(),
                    self.zombies.len()
                );
                if !self.pushed.is_empty() {
                    s.push_str(&format!(", pushed {}", self.pushed.len()));
                }
                if !self.released.is_empty() {
                    s.push_str(&format!(", released {}", self.released.len()));
                }
                if let Some(r) = self.idle_reason {
                    s.push_str(&format!(", idle: {r}"));
                }
                if !self.checkins.is_empty() {
                    s.push_str(&format!(", checked in: {}", self.checkins.join(" ")));
                }
                if !self.errors.is_empty() {
                    s.push_str(&format!(", {} error(s)", self.errors.len()));
                }
                s
            }
        }
    }
}

/// How many labels a log line names before it only counts the rest.
const LABELS_SHOWN: usize = 5;

/// `a b c`, or `a b c d e and 1795 more`: one readable line at any scale.
fn first_few<'a>(labels: impl ExactSizeIterator<Item = &'a str>) -> String {
    let total = labels.len();
    let mut s = labels.take(LABELS_SHOWN).collect::<Vec<_>>().join(" ");
    if total > LABELS_SHOWN {
        s.push_str(&format!(" and {} more", total - LABELS_SHOWN));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c5_3_the_log_line_names_a_few_labels_then_counts_the_rest() {
        let labels: Vec<String> = (0..1800).map(|i| format!("project:p{i}:t-{i}")).collect();
        let line = first_few(labels.iter().map(String::as_str));
        assert_eq!(
            line,
            "project:p0:t-0 project:p1:t-1 project:p2:t-2 project:p3:t-3 project:p4:t-4 and 1795 more"
        );
        assert_eq!(
            first_few(labels[..2].iter().map(String::as_str)),
            "project:p0:t-0 project:p1:t-1"
        );
        assert_eq!(
            first_few(labels[..5].iter().map(String::as_str))
                .matches(' ')
                .count(),
            4
        );
        assert_eq!(first_few(std::iter::empty()), "");
    }
}
