//! `braids cost`: what the agents cost, summed by project, bead or day, from the ledger the
//! workers write ([`crate::cost`]), with each project's budget for today beside it.

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::cost::{ledger::Ledger, By, Total};
use crate::system::paths::Paths;

/// A cost report.
#[derive(Debug, Serialize)]
pub struct CostReport {
    pub by: By,
    pub since: DateTime<Utc>,
    pub rows: Vec<Total>,
    pub total: Total,
    /// Today (UTC), per project with a `DailyBudget`: spent and budget, in dollars.
    pub budgets: Vec<Budget>,
}

#[derive(Debug, Serialize)]
pub struct Budget {
    pub project: String,
    #[serde(serialize_with = "crate::cost::money")]
    pub spent_today_usd: f64,
    #[serde(serialize_with = "crate::cost::money")]
    pub daily_budget_usd: f64,
    pub reached: bool,
}

pub fn report(paths: &Paths, by: By, since: DateTime<Utc>, now: DateTime<Utc>) -> CostReport {
    let ledger = Ledger::in_dir(&paths.braids_dir);
    let attempts: Vec<_> = ledger
        .range(since.date_naive(), now.date_naive())
        .into_iter()
        .filter(|a| a.at >= since)
        .collect();
    let (rows, total) = crate::cost::sum(&attempts, by);
    CostReport {
        by,
        since,
        rows,
        total,
        budgets: budgets(paths, &ledger, now),
    }
}

/// Every registered project's budget for today, for those that set one.
pub fn budgets(paths: &Paths, ledger: &Ledger, now: DateTime<Utc>) -> Vec<Budget> {
    let today = ledger.day(now.date_naive());
    crate::format::registry::read_registry(paths)
        .value
        .entries
        .iter()
        .filter_map(|e| {
            let config = crate::format::project::read_project(&e.path).value;
            let budget = crate::cost::budget_of(&config)?;
            let spent = crate::cost::spent_on(&today, &e.slug, now.date_naive());
            Some(Budget {
                project: e.slug.clone(),
                spent_today_usd: spent,
                daily_budget_usd: budget,
                reached: crate::cost::over_budget(Some(budget), spent).is_some(),
            })
        })
        .collect()
}
