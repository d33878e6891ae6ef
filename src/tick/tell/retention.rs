//! Bounded growth: what braids writes on its own behalf (worker session logs under
//! `logs/sessions/`, each bead's prompt and marks under `work/`) is removed when it is older
//! than `[retention] max_age`, and the oldest goes first while the whole is over
//! `max_total_mb`. Nothing of a bead a worker may still need (a live session, a claim) or a
//! person may still need (a blocked bead) is removed. The tick applies it at most once an hour.
//!
//! [`plan`] is pure; [`scan`] and [`apply`] are the I/O edge.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Duration, Utc};

/// How often the tick looks.
pub const EVERY: Duration = Duration::hours(1);

/// The limits, from config.toml's `[retention]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    pub max_age: Duration,
    pub max_total: u64,
}

/// One file braids wrote, and the bead it belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    pub path: PathBuf,
    /// (project slug, bead id), as the file's place names them.
    pub bead: (String, String),
    pub modified: DateTime<Utc>,
    pub size: u64,
}

/// The files to remove, oldest first. Pure.
#[must_use]
pub fn plan(
    items: &[Item],
    keep: &BTreeSet<(String, String)>,
    policy: &Policy,
    now: DateTime<Utc>,
) -> Vec<PathBuf> {
    let mut by_age: Vec<&Item> = items.iter().collect();
    by_age.sort_by_key(|i| (i.modified, i.path.clone()));
    let mut total: u64 = items.iter().map(|i| i.size).sum();
    let mut out = Vec::new();
    for i in by_age {
        if keep.contains(&i.bead) {
            continue;
        }
        if now - i.modified > policy.max_age || total > policy.max_total {
            total = total.saturating_sub(i.size);
            out.push(i.path.clone());
        }
    }
    out
}

/// Applies retention once an hour, after a full run acted; returns when it ran.
pub fn run(
    inst: &crate::config::installation::Installation,
    observed: &crate::tick::observe::Observed,
    outcome: &crate::tick::act::Outcome,
    state: &crate::tick::orchestrator_state::OrchestratorState,
    now: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    if state
        .retention_at
        .is_some_and(|t| now - t < EVERY && now >= t)
    {
        return None;
    }
    let c = &inst.config.retention;
    let policy = Policy {
        max_age: chrono_span(c.max_age),
        max_total: c.max_total_mb.saturating_mul(1024 * 1024),
    };
    let items = scan(&inst.paths.braids_dir);
    let remove = plan(&items, &needed(observed, outcome, state), &policy, now);
    if !remove.is_empty() {
        let (n, bytes) = apply(&items, &remove);
        tracing::info!(
            "retention: removed {n} old worker logs and prompts ({} KB)",
            bytes / 1024
        );
    }
    prune_events(&observed.reports, chrono_span(c.processed_events), now);
    Some(now)
}

/// Removes the events supervisors marked processed longer ago than `age`, project by project
/// (only projects with an events folder cost more than a `stat`). Unprocessed events stay.
fn prune_events(
    reports: &[crate::tick::observe::ProjectReport],
    age: Duration,
    now: DateTime<Utc>,
) {
    let cutoff = now - age;
    let mut removed = 0;
    for r in reports {
        let journal = crate::events::Journal::of_project(&r.path);
        match journal.prune(cutoff) {
            Ok(n) => removed += n,
            Err(e) => tracing::warn!(project = %r.slug, "cannot prune events: {e:#}"),
        }
    }
    if removed > 0 {
        tracing::info!("retention: removed {removed} processed events");
    }
}

fn chrono_span(d: std::time::Duration) -> Duration {
    Duration::from_std(d).unwrap_or(Duration::MAX)
}

/// The beads whose files a worker or a person may still need: running sessions, claims
/// (remembered and made this run), the blocked beads the run saw and the beads in review.
fn needed(
    observed: &crate::tick::observe::Observed,
    outcome: &crate::tick::act::Outcome,
    state: &crate::tick::orchestrator_state::OrchestratorState,
) -> BTreeSet<(String, String)> {
    use crate::model::{BeadId, BeadStatus};
    let pair = |slug: &str, bead: &BeadId| (slug.to_string(), bead.to_string());
    let sessions = observed.snapshot.sessions.iter();
    let mut keep: BTreeSet<(String, String)> = sessions
        .map(|s| pair(s.label.slug(), s.label.bead()))
        .chain(state.claims.iter().map(|c| pair(&c.project, &c.bead)))
        .chain(outcome.new_claims.iter().map(|c| pair(&c.project, &c.bead)))
        .collect();
    for r in &observed.reports {
        let blocked = r
            .stories
            .iter()
            .filter(|(_, _, s)| *s == Some(BeadStatus::Blocked));
        keep.extend(blocked.map(|(b, _, _)| pair(&r.slug, b)));
        keep.extend(r.blocked.iter().map(|b| pair(&r.slug, b)));
        // In review: no session and no claim, for as long as its request is open.
        keep.extend(r.reviews.iter().map(|v| pair(&r.slug, &v.bead)));
    }
    keep
}

/// Every file under `logs/sessions/<slug>/<bead>-<time>.log` and `work/<slug>/<bead>/…`.
pub fn scan(braids_dir: &Path) -> Vec<Item> {
    let mut out = Vec::new();
    let logs = braids_dir.join("logs").join("sessions");
    for (slug, file) in two_levels(&logs) {
        let name = file
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let Some((bead, _time)) = name.trim_end_matches(".log").rsplit_once('-') else {
            continue;
        };
        if let Some(i) = item(&file, (slug, bead.to_string())) {
            out.push(i);
        }
    }
    for (slug, bead_dir) in two_levels(&braids_dir.join("work")) {
        let bead = bead_dir
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        for f in std::fs::read_dir(&bead_dir).into_iter().flatten().flatten() {
            if let Some(i) = item(&f.path(), (slug.clone(), bead.clone())) {
                out.push(i);
            }
        }
    }
    out
}

/// `(first-level name, second-level path)` for every entry two levels under `dir`.
fn two_levels(dir: &Path) -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    for a in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = a.file_name().to_string_lossy().into_owned();
        for b in std::fs::read_dir(a.path()).into_iter().flatten().flatten() {
            out.push((name.clone(), b.path()));
        }
    }
    out
}

fn item(path: &Path, bead: (String, String)) -> Option<Item> {
    let m = std::fs::symlink_metadata(path)
        .ok()
        .filter(|m| m.is_file())?;
    Some(Item {
        path: path.to_path_buf(),
        bead,
        modified: m.modified().ok()?.into(),
        size: m.len(),
    })
}

/// Removes the files (and the bead folders left empty); returns how many and how many bytes.
pub fn apply(items: &[Item], remove: &[PathBuf]) -> (usize, u64) {
    let mut n = 0;
    let mut bytes = 0;
    for p in remove {
        if std::fs::remove_file(p).is_ok() {
            n += 1;
            bytes += items.iter().find(|i| &i.path == p).map_or(0, |i| i.size);
            if let Some(dir) = p.parent() {
                let _ = std::fs::remove_dir(dir); // only when empty
            }
        }
    }
    (n, bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn t(days: i64) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 6, 1, 0, 0, 0).unwrap() + Duration::days(days)
    }

    fn item(name: &str, bead: &str, day: i64, size: u64) -> Item {
        Item {
            path: PathBuf::from(name),
            bead: ("app".into(), bead.into()),
            modified: t(day),
            size,
        }
    }

    #[test]
    fn c2_15_retention_by_age_then_by_size_and_never_what_is_still_needed() {
        let policy = Policy {
            max_age: Duration::days(30),
            max_total: 150,
        };
        let items = vec![
            item("old-a", "a-1", 0, 10),
            item("old-kept", "a-2", 0, 10),
            item("mid", "a-3", 20, 50),
            item("new", "a-4", 39, 50),
        ];
        let keep = BTreeSet::from([("app".to_string(), "a-2".to_string())]);
        // day 40: old-a is over 30 days; old-kept too, but its bead is still needed
        assert_eq!(
            plan(&items, &keep, &policy, t(40)),
            [PathBuf::from("old-a")]
        );
        // a smaller budget: then the oldest unprotected go until the rest fits
        let tight = Policy {
            max_total: 65,
            ..policy
        };
        assert_eq!(
            plan(&items, &keep, &tight, t(40)),
            [PathBuf::from("old-a"), PathBuf::from("mid")]
        );
        // under both limits nothing goes
        assert!(plan(&items, &keep, &policy, t(10)).is_empty());
    }

    #[test]
    fn scan_finds_logs_and_work_files_with_their_beads() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir
            .path()
            .join("logs/sessions/app/app-1-20260601T000000Z.log");
        let prompt = dir.path().join("work/app/app-1/prompt.md");
        for p in [&log, &prompt] {
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, "x").unwrap();
        }
        let items = scan(dir.path());
        let beads: BTreeSet<(String, String)> = items.iter().map(|i| i.bead.clone()).collect();
        assert_eq!(beads, BTreeSet::from([("app".into(), "app-1".into())]));
        assert_eq!(items.len(), 2);
        let (n, bytes) = apply(&items, std::slice::from_ref(&prompt));
        assert_eq!((n, bytes), (1, 1));
        assert!(
            !prompt.parent().unwrap().exists(),
            "the empty bead folder goes too"
        );
    }
}
