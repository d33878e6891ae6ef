//! What a tick tells the supervisor's stream (`crate::events`): one event per thing it did to a
//! project, and each touched project's status.json brought up to date. Claims and spawns are
//! written by `act` itself, as they happen, under the journal's lock (so a worker's first
//! event always follows its `worker_spawned`); the rest, whose workers are gone, here.
//!
//! [`drafts`] is pure: the run's outcome in, the events per project out. [`write`] is the
//! edge. status.json is refreshed for a project when this run wrote it an event or when what
//! the tick sees of it (phase, progress, held, live workers) differs from what the last run
//! saw. Those digests live in one small file, so an unchanged installation of 10,000
//! projects costs one read and no write, not 10,000 of each.

use std::collections::{BTreeMap, BTreeSet};
use std::hash::{Hash, Hasher};

use chrono::{DateTime, Utc};

use crate::events::status::{Observation, Progress};
use crate::events::{Draft, Kind};
use crate::model::{BeadStatus, IterationName, IterationStatus, SessionLabel};
use crate::session::Session;
use crate::tick::act::Outcome;
use crate::tick::decide::{Eligibility, ProjectView};
use crate::tick::observe::ProjectReport;

/// What this run did, as the events to write per project (slug).
pub fn drafts(
    outcome: &Outcome,
    completed: &[(String, IterationName)],
    reports: &[ProjectReport],
    errors: &[String],
    told_before: &BTreeSet<String>,
) -> BTreeMap<String, Vec<Draft>> {
    let mut out: BTreeMap<String, Vec<Draft>> = BTreeMap::new();
    let mut put = |slug: &str, d: Draft| out.entry(slug.to_string()).or_default().push(d);
    for k in &outcome.killed {
        let Ok(label) = SessionLabel::parse(&k.label) else {
            continue;
        };
        let d = Draft::new(Kind::ZombieKilled)
            .bead(&k.bead)
            .with("session", &k.label)
            .with("reason", k.reason.as_str());
        put(label.slug(), d);
    }
    for r in &outcome.released {
        let d = Draft::new(Kind::ClaimReleased)
            .bead(&r.bead)
            .with("reason", "no live worker holds the claim");
        put(&r.project, d);
    }
    for (slug, bead, reason) in &outcome.blocked {
        put(
            slug,
            Draft::new(Kind::BeadBlocked)
                .bead(bead)
                .with("reason", reason),
        );
    }
    for f in &outcome.failed {
        put(
            &f.project,
            Draft::new(Kind::ValidationFailed)
                .bead(&f.bead)
                .with("tests_passed", false)
                .with("failures", f.failures)
                .with("cause", &f.cause)
                .with("retry_at", f.retry_at),
        );
    }
    for (slug, bead, branch) in &outcome.kept {
        put(
            slug,
            Draft::new(Kind::WorkKept).bead(bead).with("branch", branch),
        );
    }
    for (slug, name) in completed {
        put(
            slug,
            Draft::new(Kind::IterationComplete).with("iteration", name.to_string()),
        );
    }
    for r in reports {
        let prefix = format!("{}: ", r.slug);
        for e in errors.iter().filter(|e| e.starts_with(&prefix)) {
            if told_before.contains(e) {
                continue;
            }
            let kind = match e.contains("push") {
                true => Kind::PushFailed,
                false => Kind::Error,
            };
            put(
                &r.slug,
                Draft::new(kind).with("message", &e[prefix.len()..]),
            );
        }
    }
    out
}

/// What status.json says a tick sees of a project.
pub fn observation(
    r: &ProjectReport,
    view: Option<&ProjectView>,
    sessions: &[Session],
) -> Observation {
    let stories = || r.stories.iter().filter_map(|(_, _, s)| *s);
    let done = stories().filter(|s| *s == BeadStatus::Closed).count();
    let remaining = stories().filter(|s| *s != BeadStatus::Closed).count();
    let held = view.is_some_and(|v| matches!(v.eligibility, Eligibility::Inactive { .. }))
        || r.loop_paused.is_some();
    let complete = matches!(r.iteration, Some((_, Some(IterationStatus::Complete))))
        || (remaining == 0 && done > 0 && r.ready == 0);
    let mut live: Vec<(String, String)> = sessions
        .iter()
        .filter(|s| s.running && s.label.slug() == r.slug)
        .map(|s| (s.label.bead().to_string(), s.label.to_string()))
        .collect();
    live.sort();
    if let Some((phase, done, remaining, all)) = &r.claw_phase {
        return Observation {
            phase: Some(phase.clone()).filter(|p| !p.is_empty()),
            progress: Progress {
                done: *done,
                remaining: *remaining,
            },
            held,
            complete: *all,
            live,
        };
    }
    Observation {
        phase: r.iteration.map(|(name, _)| format!("Iteration {name}")),
        progress: Progress { done, remaining },
        held,
        complete,
        live,
    }
}

/// A digest of an observation, to tell whether it changed since the last run.
pub fn digest(o: &Observation) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    o.phase.hash(&mut h);
    (o.progress.done, o.progress.remaining, o.held, o.complete).hash(&mut h);
    o.live.hash(&mut h);
    h.finish()
}

/// Writes the drafts to their projects' journals and refreshes the status.json of every
/// project that got an event, or has a journal and an observation that changed. Failures are logged per project:
/// a project whose folder cannot be written never stops the others.
pub fn write(
    braids_dir: &std::path::Path,
    reports: &[ProjectReport],
    views: &[ProjectView],
    sessions: &[Session],
    mut drafts: BTreeMap<String, Vec<Draft>>,
    now: DateTime<Utc>,
) {
    let file = braids_dir.join("status-digests.json");
    let before: BTreeMap<String, u64> = crate::system::atomic::read(&file)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    let mut after = BTreeMap::new();
    for (i, r) in reports.iter().enumerate() {
        let view = views.get(i).filter(|v| v.slug == r.slug);
        let o = observation(r, view, sessions);
        let d = digest(&o);
        after.insert(r.slug.clone(), d);
        let mine = drafts.remove(&r.slug).unwrap_or_default();
        if mine.is_empty() && before.get(&r.slug) == Some(&d) {
            continue;
        }
        let journal = crate::events::Journal::of_project(&r.path);
        // A project braids has never told anything has no `.claw/` yet, and gets none just
        // for being looked at.
        if mine.is_empty() && !journal.dir.is_dir() {
            continue;
        }
        if !mine.is_empty() {
            // Timed under the lock, after whatever a worker wrote before.
            let appended = journal
                .hold()
                .and_then(|h| h.append(&r.slug, mine, Utc::now()));
            if let Err(e) = appended {
                tracing::warn!(project = %r.slug, "cannot write events: {e:#}");
                after.remove(&r.slug);
                continue;
            }
        }
        if let Err(e) = journal.update_status(now, |s| s.observe(&o, now)) {
            tracing::warn!(project = %r.slug, "cannot update status.json: {e:#}");
            after.remove(&r.slug);
        }
    }
    if after != before {
        if let Ok(bytes) = serde_json::to_vec(&after) {
            if let Err(e) = crate::system::atomic::write(&file, &bytes) {
                tracing::warn!("cannot write {}: {e:#}", file.display());
            }
        }
    }
}
