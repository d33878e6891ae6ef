//! `braids cost`.

use anyhow::Result;
use chrono::Utc;

use crate::app::cost::CostReport;
use crate::system::paths::Paths;

use super::{CostArgs, Output, EXIT_OK};

fn row(key: &str, t: &crate::cost::Total) -> String {
    let unknown = if t.without_cost > 0 {
        format!("  ({} without a cost)", t.without_cost)
    } else {
        String::new()
    };
    format!(
        "{:<28} {:>9.2} USD  {:>5} attempt(s)  {:>12} tokens in  {:>11} tokens out{unknown}\n",
        crate::system::templates::clip(key, 28),
        t.cost_usd,
        t.attempts,
        t.tokens_in,
        t.tokens_out
    )
}

impl Output for CostReport {
    fn text(&self) -> String {
        let mut o = format!(
            "cost since {}, by {}\n",
            self.since.format("%Y-%m-%d %H:%M UTC"),
            serde_json::to_value(self.by)
                .ok()
                .and_then(|v| v.as_str().map(String::from))
                .unwrap_or_default()
        );
        if self.rows.is_empty() {
            o.push_str("no attempts recorded in that time\n");
        }
        for t in &self.rows {
            o.push_str(&row(&t.key, t));
        }
        o.push_str(&row("total", &self.total));
        for b in &self.budgets {
            o.push_str(&format!(
                "budget {}: {:.2} of {:.2} USD spent today (UTC){}\n",
                b.project,
                b.spent_today_usd,
                b.daily_budget_usd,
                if b.reached {
                    ": reached, no new workers until tomorrow"
                } else {
                    ""
                }
            ));
        }
        o
    }
}

pub fn run(paths: &Paths, a: CostArgs) -> Result<i32> {
    // Only for its warning: a person learns of a broken config.toml whatever they run.
    let _ = super::open_to_read(paths);
    let now = Utc::now();
    let since = now - chrono::Duration::from_std(a.since)?;
    crate::app::cost::report(paths, a.by, since, now).print(a.json);
    Ok(EXIT_OK)
}
