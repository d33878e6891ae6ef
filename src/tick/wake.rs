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

use crate::system::paths::Paths;

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
/// directory, the iterations directory and each ITERATION.md, the claw loop's WORKPLAN.md and
/// its state (a resume).
fn watched(root: &Path) -> Vec<PathBuf> {
    let dot = root.join(".braids");
    let iterations = dot.join("iterations");
    let mut files = vec![
        dot.join("PROJECT.md"),
        dot.join("WORKPLAN.md"),
        root.join(".beads"),
        root.join(".beads/issues.jsonl"),
        iterations.clone(),
        root.join(".claw/WORKPLAN.md"),
        root.join(".claw/loop.json"),
    ];
    files.extend(
        crate::format::layout::PROJECT_FILES[1..]
            .iter()
            .map(|f| root.join(f)),
    );
    if let Ok(dirs) = std::fs::read_dir(crate::format::iteration::iterations_dir(root)) {
        for d in dirs.flatten() {
            files.push(d.path().join("ITERATION.md"));
            files.push(d.path().join("iteration.edn"));
        }
    }
    files
}

/// The registry's table cut down to this run's slice of rows (its header, its separator and
/// those rows), so a skipped run parses 64 rows, not 10,000 (about 30 ms). `None` when the
/// file has no plain table to cut; the caller then reads it whole.
fn sliced_registry(text: &str, now: DateTime<Utc>) -> Option<String> {
    let lines: Vec<&str> = text.lines().collect();
    let is_row = |l: &str| l.trim_start().starts_with('|');
    let is_rule = |l: &str| {
        let t = l.trim();
        t.starts_with('|') && t.contains('-') && t.chars().all(|c| "|-: ".contains(c))
    };
    let header =
        (0..lines.len().saturating_sub(1)).find(|&i| is_row(lines[i]) && is_rule(lines[i + 1]))?;
    let rows: Vec<&str> = lines[header + 2..]
        .iter()
        .copied()
        .take_while(|l| is_row(l))
        .collect();
    let mut out = format!("{}\n{}\n", lines[header], lines[header + 1]);
    for r in &rows[slice(rows.len(), now)] {
        out.push_str(r);
        out.push('\n');
    }
    Some(out)
}

/// The first project in this run's slice with a file changed after `since`, or with a worker
/// session that ended (`ended`: its bead waits to be handed on), by slug; or `config.toml`
/// when that changed.
pub fn changed(
    paths: &Paths,
    since: DateTime<Utc>,
    now: DateTime<Utc>,
    ended: &[crate::model::SessionLabel],
) -> Option<String> {
    let since = SystemTime::from(since);
    // A person who fixed or changed config.toml (an executor set, a typo corrected) expects
    // the next run to use it.
    let modified = |f: &Path| std::fs::metadata(f).ok()?.modified().ok();
    if modified(&paths.config()).is_some_and(|m| m > since) {
        return Some("config.toml".into());
    }
    let file = crate::format::layout::registry_file(paths);
    let text = crate::system::atomic::read(&file).ok()?;
    let text = crate::format::decode(&text);
    let cut = (!crate::format::layout::is_edn(&file)).then(|| sliced_registry(&text, now));
    let rows = match cut.flatten() {
        Some(cut) => {
            crate::format::registry::parse_registry(&cut, &file, paths)
                .value
                .entries
        }
        None => {
            let all = crate::format::registry::read_registry(paths).value.entries;
            let range = slice(all.len(), now);
            all[range].to_vec()
        }
    };
    rows.iter().find_map(|e| {
        let gone = ended.iter().any(|l| l.slug() == e.slug);
        (gone
            || watched(&e.path)
                .iter()
                .filter_map(|f| modified(f))
                .any(|m| m > since))
        .then(|| e.slug.clone())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn c2_7_a_skipped_run_parses_only_its_slice_of_the_registry() {
        let at = Utc.with_ymd_and_hms(2026, 1, 1, 0, 1, 0).unwrap(); // the second window
        let mut text =
            String::from("# Registry\n\n| Path | Slug | Status | Priority |\n|:--|---|---|---|\n");
        for i in 0..150 {
            text.push_str(&format!("| /p/{i} | p{i} | active | normal |\n"));
        }
        text.push_str("\nNotes after the table.\n");
        let cut = sliced_registry(&text, at).unwrap();
        let lines: Vec<&str> = cut.lines().collect();
        assert_eq!(lines.len(), 2 + SLICE);
        assert_eq!(lines[0], "| Path | Slug | Status | Priority |");
        assert_eq!(lines[2], "| /p/64 | p64 | active | normal |");
        assert_eq!(lines[SLICE + 1], "| /p/127 | p127 | active | normal |");
        assert_eq!(sliced_registry("no table here\n", at), None);
    }

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
