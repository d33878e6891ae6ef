//! Contract 2.3 as one pure function: a project is offered workers only when it is active in
//! both the registry and PROJECT.md and has exactly one active iteration. The tick's observe
//! step and the simulation both call [`eligibility_of`], so they cannot disagree.

use crate::format::iteration::Iteration;
use crate::format::project::ProjectConfig;
use crate::format::registry::RegistryEntry;
use crate::model::{IterationName, IterationStatus, ProjectStatus};

/// Whether a project may receive workers this run, and if not, why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Eligibility {
    /// Active, with exactly one active iteration (2.3).
    Eligible {
        /// The active iteration's directory name as written.
        iteration: IterationName,
    },
    /// Paused or blocked in the registry or PROJECT.md.
    Inactive {
        why: String,
    },
    NoActiveIteration,
    /// More than one active iteration violates 1.3; nothing is spawned until a person fixes it.
    SeveralActive(Vec<IterationName>),
    /// The project could not be read (missing directory, unreadable PROJECT.md …).
    Broken(String),
}

/// Paused or blocked in the registry or PROJECT.md.
fn inactive(entry: &RegistryEntry, config: &ProjectConfig) -> Option<Eligibility> {
    if entry.status == Some(ProjectStatus::Active) && config.status == Some(ProjectStatus::Active) {
        return None;
    }
    let show = |s: Option<ProjectStatus>| s.map_or("missing", |s| s.as_str());
    Some(Eligibility::Inactive {
        why: format!(
            "registry {}, PROJECT.md {}",
            show(entry.status),
            show(config.status)
        ),
    })
}

/// A claw-loop project (`crate::claw`): its phases are WORKPLAN.md's headings, not
/// iterations, so it needs only to be active, and its loop not paused for a person (`paused`:
/// why). Its spawn messages carry iteration `0`.
pub fn claw_eligibility(
    entry: &RegistryEntry,
    config: &ProjectConfig,
    paused: Option<&str>,
) -> Eligibility {
    if let Some(no) = inactive(entry, config) {
        return no;
    }
    match paused {
        Some(why) => Eligibility::Inactive {
            why: format!(
                "the claw loop is paused: {why}; see .claw/ISSUES.md, then `braids resume {}`",
                entry.slug
            ),
        },
        None => Eligibility::Eligible {
            iteration: IterationName::new("0").expect("a valid name"),
        },
    }
}

/// Why a project that reached its `DailyBudget` today (UTC) gets no new worker until the day
/// ends, or `None`. Not a 2.3 status: the project stays eligible, its workers finish, and its
/// ready work waits as it would at capacity; an unreadable budget holds nothing (`braids check`
/// reports it).
#[must_use]
pub fn budget_hold(config: &ProjectConfig, spent_today: f64) -> Option<String> {
    crate::cost::over_budget(crate::cost::budget_of(config), spent_today)
}

/// Contract 2.3 for one project.
pub fn eligibility_of(
    entry: &RegistryEntry,
    config: &ProjectConfig,
    iterations: &[Iteration],
) -> Eligibility {
    if let Some(no) = inactive(entry, config) {
        return no;
    }
    let active: Vec<IterationName> = iterations
        .iter()
        .filter(|i| i.status == Some(IterationStatus::Active))
        .map(|i| i.name)
        .collect();
    match active.as_slice() {
        [] => Eligibility::NoActiveIteration,
        [n] => Eligibility::Eligible { iteration: *n },
        many => Eligibility::SeveralActive(many.to_vec()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(budget: Option<&str>) -> ProjectConfig {
        let mut text = "# App\n\n- **Status:** active\n- **Priority:** normal\n".to_string();
        if let Some(b) = budget {
            text.push_str(&format!("- **DailyBudget:** {b}\n"));
        }
        crate::format::project::parse_project(&text, std::path::Path::new("PROJECT.md")).value
    }

    #[test]
    fn c9_4_a_daily_budget_stops_new_workers_once_reached() {
        let table = [
            (None, 500.0, false),
            (Some("20 USD"), 0.0, false),
            (Some("20 USD"), 19.99, false),
            (Some("20 USD"), 20.0, true),
            (Some("$20"), 31.5, true),
            (Some("lots"), 1000.0, false),
        ];
        for (budget, spent, held) in table {
            let why = budget_hold(&config(budget), spent);
            assert_eq!(why.is_some(), held, "{budget:?} {spent}: {why:?}");
            if let Some(why) = why {
                assert!(
                    why.contains("daily budget") && why.contains("tomorrow"),
                    "{why}"
                );
            }
        }
    }
}
