//! What the agents cost: the tokens and dollars each attempt's status report gives (optional
//! `tokens_in`, `tokens_out`, `cost_usd`), recorded per attempt in braids' own ledger
//! ([`ledger`]), summed by project, bead or day (`braids cost`), and a project's
//! `DailyBudget` that stops new spawns for the rest of the UTC day once reached.
//!
//! Everything here but the ledger is pure.

pub mod ledger;

use std::collections::BTreeMap;

use chrono::{DateTime, NaiveDate, Utc};
use serde::{Deserialize, Serialize};

/// What one attempt used, as its report said (each part optional: agents report what they
/// know).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_in: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_out: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
}

impl Usage {
    pub fn is_empty(&self) -> bool {
        self.tokens_in.is_none() && self.tokens_out.is_none() && self.cost_usd.is_none()
    }

    /// Reads one `key: value` of a status report into the usage; false when the key is not
    /// one of its three. A value that is not a number (or is negative) is refused with the
    /// reason, for the report's list of invalid values.
    pub fn read(&mut self, key: &str, value: &str) -> Option<Result<(), String>> {
        let v = value.trim().trim_start_matches('$').replace(['_', ','], "");
        let bad = || {
            Err(format!(
                "{key} `{}`",
                value.chars().take(40).collect::<String>()
            ))
        };
        Some(match key {
            "tokens_in" | "tokens_out" => match v.parse::<u64>() {
                Ok(n) => {
                    if key == "tokens_in" {
                        self.tokens_in = Some(n);
                    } else {
                        self.tokens_out = Some(n);
                    }
                    Ok(())
                }
                Err(_) => bad(),
            },
            "cost_usd" => match v.parse::<f64>() {
                Ok(x) if x.is_finite() && x >= 0.0 => {
                    self.cost_usd = Some(x);
                    Ok(())
                }
                _ => bad(),
            },
            _ => return None,
        })
    }
}

/// One attempt in the ledger.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Attempt {
    pub at: DateTime<Utc>,
    pub project: String,
    pub bead: String,
    /// How the attempt ended: `completed`, `failed`, `question`, `blocked` …
    pub outcome: String,
    #[serde(default)]
    pub duration_seconds: u64,
    #[serde(flatten)]
    pub usage: Usage,
}

/// Dollars as JSON shows them: rounded to a millionth of a dollar, so a sum of 0.1s prints
/// 0.6, never 0.6000000000000001.
pub fn money<S: serde::Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(exact(*v))
}

/// `v` rounded to a millionth.
#[must_use]
pub fn exact(v: f64) -> f64 {
    (v * 1e6).round() / 1e6
}

/// How `braids cost` groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum By {
    Project,
    Bead,
    Day,
}

/// One group's sums.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Total {
    /// The project, `project:bead`, or `YYYY-MM-DD` (UTC).
    pub key: String,
    pub attempts: u64,
    pub tokens_in: u64,
    pub tokens_out: u64,
    #[serde(serialize_with = "money")]
    pub cost_usd: f64,
    /// Attempts that reported no cost: the sum leaves them out.
    pub without_cost: u64,
}

impl Total {
    fn add(&mut self, a: &Attempt) {
        self.attempts += 1;
        self.tokens_in += a.usage.tokens_in.unwrap_or(0);
        self.tokens_out += a.usage.tokens_out.unwrap_or(0);
        match a.usage.cost_usd {
            Some(c) => self.cost_usd += c,
            None => self.without_cost += 1,
        }
    }
}

/// Sums `attempts` by `by`, in key order (days oldest first), and the grand total.
#[must_use]
pub fn sum(attempts: &[Attempt], by: By) -> (Vec<Total>, Total) {
    let mut groups: BTreeMap<String, Total> = BTreeMap::new();
    let mut all = Total {
        key: "total".into(),
        ..Total::default()
    };
    for a in attempts {
        let key = match by {
            By::Project => a.project.clone(),
            By::Bead => format!("{}:{}", a.project, a.bead),
            By::Day => a.at.date_naive().to_string(),
        };
        groups
            .entry(key.clone())
            .or_insert_with(|| Total {
                key,
                ..Total::default()
            })
            .add(a);
        all.add(a);
    }
    (groups.into_values().collect(), all)
}

/// A project's spend on `day` (UTC), in dollars.
#[must_use]
pub fn spent_on(attempts: &[Attempt], project: &str, day: NaiveDate) -> f64 {
    attempts
        .iter()
        .filter(|a| a.project == project && a.at.date_naive() == day)
        .filter_map(|a| a.usage.cost_usd)
        .sum()
}

/// Dollars spent by each project in `attempts` (one day's, for the budget gate).
#[must_use]
pub fn spent_by_project(attempts: &[Attempt]) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for a in attempts {
        *out.entry(a.project.clone()).or_insert(0.0) += a.usage.cost_usd.unwrap_or(0.0);
    }
    out
}

/// A PROJECT.md `DailyBudget` (`20 USD`, `$20`, `12.50`): dollars, or why it cannot be read.
pub fn parse_budget(raw: &str) -> Result<f64, String> {
    let t = raw.trim();
    let number = t
        .strip_prefix('$')
        .or_else(|| t.strip_suffix("USD").or_else(|| t.strip_suffix("usd")))
        .unwrap_or(t)
        .trim();
    match number.parse::<f64>() {
        Ok(x) if x.is_finite() && x > 0.0 => Ok(x),
        _ => Err(format!(
            "DailyBudget `{t}` is not an amount in dollars; write it like `20 USD`"
        )),
    }
}

/// A project's `DailyBudget` in dollars, when it sets one braids can read.
pub fn budget_of(config: &crate::format::project::ProjectConfig) -> Option<f64> {
    parse_budget(&config.field("dailybudget")?.value).ok()
}

/// Whether a project with `budget` dollars a day may start another worker, having spent
/// `spent` today: `Some(why not)` once the budget is reached.
#[must_use]
pub fn over_budget(budget: Option<f64>, spent: f64) -> Option<String> {
    let budget = budget?;
    (spent >= budget).then(|| {
        format!(
            "its daily budget of {budget:.2} USD is reached ({spent:.2} USD spent today, UTC); new workers start again tomorrow"
        )
    })
}

/// Whether the attempt that took the day's spend from `before` to `after` is the one that
/// crossed the budget: the moment for the one notification.
#[must_use]
pub fn crossed(budget: Option<f64>, before: f64, after: f64) -> bool {
    budget.is_some_and(|b| before < b && after >= b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn attempt(day: u32, project: &str, bead: &str, cost: Option<f64>, tokens: u64) -> Attempt {
        Attempt {
            at: Utc.with_ymd_and_hms(2026, 11, day, 12, 0, 0).unwrap(),
            project: project.into(),
            bead: bead.into(),
            outcome: "completed".into(),
            duration_seconds: 60,
            usage: Usage {
                tokens_in: Some(tokens),
                tokens_out: Some(tokens / 10),
                cost_usd: cost,
            },
        }
    }

    #[test]
    fn sums_by_project_bead_and_day() {
        let all = [
            attempt(20, "app", "app-1", Some(1.5), 1000),
            attempt(20, "app", "app-1", Some(0.5), 1000),
            attempt(21, "app", "app-2", None, 500),
            attempt(21, "lib", "lib-1", Some(2.0), 2000),
        ];
        let (rows, total) = sum(&all, By::Project);
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].key, "app");
        assert_eq!((rows[0].attempts, rows[0].without_cost), (3, 1));
        assert!((rows[0].cost_usd - 2.0).abs() < 1e-9);
        assert_eq!(rows[0].tokens_in, 2500);
        assert_eq!(total.attempts, 4);
        assert!((total.cost_usd - 4.0).abs() < 1e-9);
        let (rows, _) = sum(&all, By::Bead);
        assert_eq!(
            rows.iter().map(|r| r.key.as_str()).collect::<Vec<_>>(),
            ["app:app-1", "app:app-2", "lib:lib-1"]
        );
        let (rows, _) = sum(&all, By::Day);
        assert_eq!(rows[0].key, "2026-11-20");
        assert_eq!(rows[1].attempts, 2);
        let day = NaiveDate::from_ymd_opt(2026, 11, 20).unwrap();
        assert!((spent_on(&all, "app", day) - 2.0).abs() < 1e-9);
        assert_eq!(spent_on(&all, "lib", day), 0.0);
    }

    #[test]
    fn budgets_parse_and_gate_spawns() {
        for (raw, want) in [
            ("20 USD", 20.0),
            ("$12.50", 12.5),
            ("7", 7.0),
            ("3 usd", 3.0),
        ] {
            assert_eq!(parse_budget(raw), Ok(want), "{raw}");
        }
        for bad in ["", "twenty", "-5 USD", "0", "20 EUR"] {
            assert!(parse_budget(bad).unwrap_err().contains("20 USD"), "{bad}");
        }
        let table = [
            (None, 100.0, false),
            (Some(20.0), 19.99, false),
            (Some(20.0), 20.0, true),
            (Some(20.0), 20.40, true),
        ];
        for (budget, spent, stopped) in table {
            assert_eq!(
                over_budget(budget, spent).is_some(),
                stopped,
                "{budget:?} {spent}"
            );
        }
        assert!(over_budget(Some(20.0), 20.4).unwrap().contains("20.00 USD"));
        assert!(crossed(Some(20.0), 19.0, 20.4));
        assert!(
            !crossed(Some(20.0), 20.4, 21.0),
            "one notification, not one per attempt"
        );
        assert!(!crossed(Some(20.0), 1.0, 2.0));
        assert!(!crossed(None, 1.0, 200.0));
    }

    #[test]
    fn usage_reads_numbers_and_refuses_the_rest() {
        let mut u = Usage::default();
        assert_eq!(u.read("tokens_in", "12,345"), Some(Ok(())));
        assert_eq!(u.read("cost_usd", "$0.42"), Some(Ok(())));
        assert!(u.read("tokens_out", "lots").unwrap().is_err());
        assert!(u.read("cost_usd", "-1").unwrap().is_err());
        assert!(u.read("cost_usd", "NaN").unwrap().is_err());
        assert_eq!(u.read("summary", "x"), None);
        assert_eq!(u.tokens_in, Some(12_345));
        assert_eq!(u.cost_usd, Some(0.42));
        assert_eq!(u.tokens_out, None);
    }
}
