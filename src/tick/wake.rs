//! Idle backoff that ends when something changed. A run skipped for its idle backoff first
//! looks whether a project's files changed since the last full run (a person added a bead,
//! edited PROJECT.md or an iteration, a worker closed its bead); if one did, the run is a full
//! one after all. `init`, `new` and `iteration activate` end the backoff themselves
//! (`state::wake`).
//!
//! A skipped run must stay cheap at any scale, so it looks at [`SLICE`] projects of the
//! registry, a different slice each minute: every project is looked at every run up to
//! [`SLICE`] projects, and at least once per backoff interval up to about a thousand.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use chrono::{DateTime, Utc};

use crate::paths::Paths;

/// How many projects a skipped run looks at.
pub const SLICE: usize = 64;

/// The registry rows a skipped run at `now` looks at: a window of [`SLICE`] rows that moves by
/// one window each minute. Pure.
#[must_use]
pub fn slice(rows: usize, now: DateTime<Utc>) -> std::ops::Range<usize> {
    if rows <= SLICE {
        return 0..rows;
    }
    let windows = rows.div_ceil(SLICE);
    let turn = usize::try_from(now.timestamp().div_euclid(60)).unwrap_or(0) % windows;
    let start = turn * SLICE;
    start..(start + SLICE).min(rows)
}

/// The files whose change may bring work: PROJECT.md, the native tracker, br's export and its
/// directory, the iterations directory and each ITERATION.md.
fn watched(root: &Path) -> Vec<PathBuf> {
    let dot = root.join(".braids");
    let iterations = dot.join("iterations");
    let mut files = vec![
        dot.join("PROJECT.md"),
        dot.join("WORKPLAN.md"),
        root.join(".beads"),
        root.join(".beads/issues.jsonl"),
        iterations.clone(),
    ];
    if let Ok(dirs) = std::fs::read_dir(&iterations) {
        files.extend(dirs.flatten().map(|d| d.path().join("ITERATION.md")));
    }
    files
}

/// The first project in this run's slice with a file changed after `since`, by slug.
pub fn changed(paths: &Paths, since: DateTime<Utc>, now: DateTime<Utc>) -> Option<String> {
    let since = SystemTime::from(since);
    let rows = crate::format::registry::read_registry(paths).value.entries;
    let range = slice(rows.len(), now);
    rows[range].iter().find_map(|e| {
        watched(&e.path)
            .iter()
            .filter_map(|f| std::fs::metadata(f).ok()?.modified().ok())
            .any(|m| m > since)
            .then(|| e.slug.clone())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn c2_7_every_project_is_looked_at_in_turn() {
        let at = |min: i64| {
            Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap() + chrono::Duration::minutes(min)
        };
        assert_eq!(
            slice(10, at(0)),
            0..10,
            "a small registry: every row, every run"
        );
        let rows = 150; // three windows: 0..64, 64..128, 128..150
        let seen: Vec<std::ops::Range<usize>> = (0..3).map(|m| slice(rows, at(m))).collect();
        assert_eq!(seen, [0..64, 64..128, 128..150]);
        assert_eq!(slice(rows, at(3)), 0..64, "and round again");
    }
}
