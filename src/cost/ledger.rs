//! The cost ledger: `costs/YYYY-MM-DD.json` in braids' directory, one file per UTC day, each a
//! list of attempts. Workers add to today's file under `costs/.lock` (read, add, temp +
//! rename), so two workers finishing together both land; readers take the files of the days
//! they ask for and never lock.

use std::path::{Path, PathBuf};

use anyhow::Result;
use chrono::{NaiveDate, Utc};

use super::Attempt;

#[derive(Debug, Clone)]
pub struct Ledger {
    pub dir: PathBuf,
}

impl Ledger {
    pub fn in_dir(braids_dir: &Path) -> Ledger {
        Ledger {
            dir: braids_dir.join("costs"),
        }
    }

    fn day_file(&self, day: NaiveDate) -> PathBuf {
        self.dir.join(format!("{day}.json"))
    }

    /// One day's attempts; none when the file is missing or unreadable (logged: a lost cost
    /// record must not stop a tick).
    pub fn day(&self, day: NaiveDate) -> Vec<Attempt> {
        let file = self.day_file(day);
        match crate::system::atomic::read(&file) {
            Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|e| {
                tracing::warn!(
                    "{} is not a valid cost ledger ({e}); its costs are not counted",
                    file.display()
                );
                Vec::new()
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => {
                tracing::warn!("cannot read {}: {e}", file.display());
                Vec::new()
            }
        }
    }

    /// Every attempt from `from` to `to` (UTC days, both included), oldest day first.
    pub fn range(&self, from: NaiveDate, to: NaiveDate) -> Vec<Attempt> {
        from.iter_days()
            .take_while(|d| *d <= to)
            .flat_map(|d| self.day(d))
            .collect()
    }

    /// Adds `attempt` to its day's file; returns the project's spend that day before and after
    /// it, for the budget's one notification.
    pub fn record(&self, attempt: Attempt) -> Result<(f64, f64)> {
        let day = attempt.at.date_naive();
        let file = self.day_file(day);
        crate::system::atomic::update_json(
            &file,
            &self.dir.join(".lock"),
            |all: &mut Vec<Attempt>| {
                let before = super::spent_on(all, &attempt.project, day);
                all.push(attempt.clone());
                (before, super::spent_on(all, &attempt.project, day))
            },
        )
    }

    /// Today's attempts (UTC).
    pub fn today(&self) -> Vec<Attempt> {
        self.day(Utc::now().date_naive())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::Usage;

    #[test]
    fn c9_4_concurrent_records_all_land_and_report_the_crossing_once() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = Ledger::in_dir(dir.path());
        let budget = Some(5.0);
        let crossings: usize = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|i| {
                    let ledger = ledger.clone();
                    s.spawn(move || {
                        let (before, after) = ledger
                            .record(Attempt {
                                at: Utc::now(),
                                project: "app".into(),
                                bead: format!("app-{i}"),
                                outcome: "completed".into(),
                                duration_seconds: 1,
                                usage: Usage {
                                    cost_usd: Some(1.0),
                                    ..Usage::default()
                                },
                            })
                            .unwrap();
                        usize::from(crate::cost::crossed(budget, before, after))
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).sum()
        });
        assert_eq!(ledger.today().len(), 8);
        assert_eq!(crossings, 1);
        let today = Utc::now().date_naive();
        assert_eq!(ledger.range(today, today).len(), 8);
    }
}
