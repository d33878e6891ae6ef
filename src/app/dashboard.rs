//! The whole picture a person watches (`braids serve`'s `/api/v1/state` and dashboard): the
//! status, each project's beads that wait for a person, its workers with their last output
//! line, the day's cost and a week of completed and failed beads. Computed from the same use
//! cases as the terminal commands, changing nothing.

use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use anyhow::Result;
use chrono::{DateTime, Duration, NaiveDate, Utc};
use serde::Serialize;

use crate::config::installation::Installation;
use crate::events::Journal;

use super::beads::{BeadRow, Opened};
use super::cost::Budget;
use super::sessions::Listed;
use super::status::StatusView;

/// Days in each project's chart.
pub const CHART_DAYS: usize = 7;

#[derive(Serialize)]
pub struct Picture {
    pub generated_at: DateTime<Utc>,
    #[serde(flatten)]
    pub status: StatusView,
    /// Per project: its beads that wait for a person, and its week.
    pub details: BTreeMap<String, ProjectDetail>,
    /// The live workers' last line of output, by session label.
    pub last_output: BTreeMap<String, String>,
    pub cost_today: CostToday,
}

#[derive(Serialize, Default)]
pub struct ProjectDetail {
    /// Blocked beads: questions, reviews and reasons, with their titles.
    pub waiting: Vec<BeadRow>,
    /// Stories of the active iteration: closed and all.
    pub stories_closed: usize,
    pub stories_total: usize,
    pub week: Vec<Day>,
}

/// One day of a project's chart.
#[derive(Serialize, Clone, Copy, PartialEq, Eq, Debug)]
pub struct Day {
    pub day: NaiveDate,
    pub completed: u32,
    pub failed: u32,
}

#[derive(Serialize, Default)]
pub struct CostToday {
    #[serde(serialize_with = "crate::cost::money")]
    pub cost_usd: f64,
    pub attempts: u64,
    pub budgets: Vec<Budget>,
}

pub fn picture(inst: &Installation, now: DateTime<Utc>) -> Result<Picture> {
    let status = super::status::status(inst, now)?;
    let registry = crate::format::registry::read_registry(&inst.paths).value;
    let mut details = BTreeMap::new();
    for r in &status.projects {
        let mut d = ProjectDetail {
            stories_closed: r
                .stories
                .iter()
                .filter(|(_, _, s)| *s == Some(crate::model::BeadStatus::Closed))
                .count(),
            stories_total: r.stories.len(),
            week: week(&Journal::of_project(&r.path), now),
            ..ProjectDetail::default()
        };
        let opened = registry
            .get(&r.slug)
            .and_then(|e| Opened::open(inst, e.clone(), false).ok());
        if let Some(p) = opened {
            if let Ok(all) = p.tracker.list() {
                let sessions: Vec<_> = status.sessions.iter().map(|l| l.session.clone()).collect();
                let blocked = [crate::model::BeadStatus::Blocked];
                d.waiting = super::beads::rows(inst, &p, all, &blocked, &sessions, now).beads;
            }
        }
        details.insert(r.slug.clone(), d);
    }
    let last_output = status
        .sessions
        .iter()
        .filter_map(|l: &Listed| {
            let line = last_line(l.session.log.as_deref()?)?;
            Some((l.session.label.to_string(), line))
        })
        .collect();
    let ledger = crate::cost::ledger::Ledger::in_dir(&inst.paths.braids_dir);
    let today = ledger.day(now.date_naive());
    let (_, total) = crate::cost::sum(&today, crate::cost::By::Project);
    Ok(Picture {
        generated_at: now,
        status,
        details,
        last_output,
        cost_today: CostToday {
            cost_usd: total.cost_usd,
            attempts: total.attempts,
            budgets: super::cost::budgets(&inst.paths, &ledger, now),
        },
    })
}

/// Completed and failed beads per day over the last [`CHART_DAYS`] days (UTC), oldest first.
pub fn week(journal: &Journal, now: DateTime<Utc>) -> Vec<Day> {
    let first = (now - Duration::days(CHART_DAYS as i64 - 1)).date_naive();
    let mut days: Vec<Day> = first
        .iter_days()
        .take(CHART_DAYS)
        .map(|day| Day {
            day,
            completed: 0,
            failed: 0,
        })
        .collect();
    let mut entries = journal.listing();
    entries.reverse();
    for entry in entries {
        let kind = entry.kind();
        let completed = kind == "task_complete";
        if !completed && !matches!(kind.as_str(), "validation_failed" | "bead_blocked") {
            continue;
        }
        let Ok(e) = entry.read() else { continue };
        let day = e.timestamp.date_naive();
        if day < first {
            break;
        }
        if let Some(d) = days.iter_mut().find(|d| d.day == day) {
            if completed {
                d.completed += 1;
            } else {
                d.failed += 1;
            }
        }
    }
    days
}

/// The last non-empty line of a log (read from its last 4 KiB), clipped, without control
/// characters.
pub fn last_line(path: &Path) -> Option<String> {
    let mut f = std::fs::File::open(path).ok()?;
    let len = f.metadata().ok()?.len();
    f.seek(SeekFrom::Start(len.saturating_sub(4096))).ok()?;
    let mut buf = Vec::new();
    f.read_to_end(&mut buf).ok()?;
    let text = String::from_utf8_lossy(&buf);
    text.lines()
        .rev()
        .map(|l| crate::system::templates::clip(l, 200))
        .find(|l| !l.is_empty())
}
