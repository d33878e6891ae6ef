//! Notifications the tick itself owes (CONTRACTS 1.2, 3.8): `blocker` when it releases a claim
//! whose worker vanished, and `no-ready-beads` when a project with an active iteration runs
//! dry. The latter is sent once per dry spell: the projects already told are remembered in the
//! state, and forgotten as soon as they have work or workers again.
//!
//! The same once-only rule holds for the log's warning about a story its tracker does not know
//! (1.3): a scheduled tick runs every few minutes, and a warning repeated on every run would bury
//! the log; [`unknown_stories`] says which warnings are new, and [`orphans`] does the same for
//! sessions whose project left the registry.

use std::collections::BTreeSet;

use crate::tick::orchestrator_state::UnknownStories;

use crate::model::{BeadId, NotificationEvent};
use crate::notifier::{self, Notifier};

use crate::tick::act::Outcome;
use crate::tick::decide::{Eligibility, Plan};
use crate::tick::observe::{Observed, ProjectReport};

/// Sends what this run owes and returns the projects now known to be dry.
pub fn send(
    observed: &Observed,
    plan: &Plan,
    outcome: &Outcome,
    dry_before: &BTreeSet<String>,
    notifier: &dyn Notifier,
) -> BTreeSet<String> {
    let config_of = |slug: &str| config_of(observed, slug);
    for r in &outcome.released {
        if let Some(c) = config_of(&r.project) {
            let text = format!("[{}] {} was released back to open: its worker ended without closing or blocking it.", r.project, r.bead);
            notifier::send(
                notifier,
                c,
                &r.project,
                NotificationEvent::Blocker,
                Some(&r.bead),
                &text,
            );
        }
    }
    for (slug, bead, why) in &outcome.step_timeouts {
        if let Some(c) = config_of(slug) {
            let text =
                format!("[{slug}] {bead}: {why}; the next dispatch counts it as a failed attempt.");
            notifier::send(
                notifier,
                c,
                slug,
                NotificationEvent::Blocker,
                Some(bead),
                &text,
            );
        }
    }
    let mut dry = BTreeSet::new();
    // A set, not a scan of the spawns per project: 10,000 projects × 20,000 spawns otherwise.
    let spawned: BTreeSet<&str> = outcome.spawned.iter().map(|s| s.project.as_str()).collect();
    for view in &observed.snapshot.projects {
        let Eligibility::Eligible { iteration } = &view.eligibility else {
            continue;
        };
        let busy = plan.healthy.get(&view.slug).copied().unwrap_or(0) > 0
            || spawned.contains(view.slug.as_str());
        if view.tracker_error.is_some() || busy || !view.ready.is_empty() {
            continue;
        }
        dry.insert(view.slug.clone());
        if dry_before.contains(&view.slug) {
            continue;
        }
        if let Some(c) = config_of(&view.slug) {
            let text = format!(
                "[{}] No ready beads in iteration {iteration}: add beads or unblock one.",
                view.slug
            );
            notifier::send(
                notifier,
                c,
                &view.slug,
                NotificationEvent::NoReadyBeads,
                None,
                &text,
            );
        }
    }
    dry
}

/// Tells the projects whose sessions the kill-storm guard spared, once per storm: a blocker
/// notification each, the first run it holds. Returns whether the storm has been told.
pub fn kill_storm(
    observed: &Observed,
    plan: &Plan,
    told_before: bool,
    notifier: &dyn Notifier,
) -> bool {
    let Some(storm) = &plan.kill_storm else {
        return false;
    };
    if !told_before {
        for slug in &storm.projects {
            let config = config_of(observed, slug);
            if let Some(c) = config {
                let text = format!("[{slug}] {}", storm.message());
                notifier::send(notifier, c, slug, NotificationEvent::Blocker, None, &text);
            }
        }
    }
    true
}

/// A blocker notification for each bead the tick blocked because its breaker tripped.
pub fn blocked(observed: &Observed, outcome: &Outcome, notifier: &dyn Notifier) {
    for (slug, bead, reason) in &outcome.blocked {
        let text = format!("[{slug}] {bead} is blocked: {reason}.");
        blocker(observed, notifier, slug, bead, &text);
    }
}

/// A blocker notification for each worker its backend ended (Slurm's time or memory limit),
/// with the backend's reason: the bead gets no result from that worker.
pub fn backend_ended(observed: &Observed, outcome: &Outcome, notifier: &dyn Notifier) {
    for (slug, bead, why) in &outcome.backend_ended {
        let text = format!("[{slug}] the worker of {bead} was ended: {why}.");
        blocker(observed, notifier, slug, bead, &text);
    }
}

/// A blocker notification about one bead, by its project's settings.
fn blocker(observed: &Observed, notifier: &dyn Notifier, slug: &str, bead: &BeadId, text: &str) {
    if let Some(c) = config_of(observed, slug) {
        notifier::send(
            notifier,
            c,
            slug,
            NotificationEvent::Blocker,
            Some(bead),
            text,
        );
    }
}

/// One notification about the whole installation (the provider breaker opening or closing):
/// a blocker notification through the first project, in registry order, whose settings deliver
/// one.
pub fn installation(observed: &Observed, text: &str, notifier: &dyn Notifier) {
    let first = observed.reports.iter().find_map(|r| {
        let c = r.config.as_ref()?;
        notifier::compose(c, &r.slug, NotificationEvent::Blocker, None, text).map(|_| (c, &r.slug))
    });
    match first {
        Some((c, slug)) => {
            notifier::send(notifier, c, slug, NotificationEvent::Blocker, None, text);
        }
        None => {
            tracing::warn!("no project's channel takes blocker notifications; not sent: {text}")
        }
    }
}

/// A blocker notification for each bead whose dead worker's work the sweep kept on a branch.
pub fn kept_work(observed: &Observed, outcome: &Outcome, notifier: &dyn Notifier) {
    for (slug, bead, branch) in &outcome.kept {
        let text = format!("[{slug}] The worker of {bead} ended before its work landed; the work is kept on branch {branch}: merge or drop it.");
        blocker(observed, notifier, slug, bead, &text);
    }
}

/// Sends iteration-complete for the iterations this run completed for a dead worker.
pub fn iterations_completed(
    observed: &Observed,
    completed: &[(String, crate::model::IterationName)],
    notifier: &dyn Notifier,
) {
    for (slug, name) in completed {
        let config = config_of(observed, slug);
        if let Some(c) = config {
            let (event, text) =
                crate::lifecycle::notice(slug, *name, crate::model::IterationStatus::Complete);
            // Not on the upstream yet: the push that succeeds sends it (`owed`).
            let root = observed
                .reports
                .iter()
                .find(|r| r.slug == *slug)
                .map(|r| &r.path);
            let waits = root
                .and_then(|p| crate::git::push_debt(p))
                .is_some_and(|d| d.owed.iter().any(|o| o.text == text));
            if !waits {
                notifier::send(notifier, c, slug, event, None, &text);
            }
        }
    }
}

/// The notifications that waited for a push this run made (an iteration complete once its
/// commits are on the upstream).
pub fn owed(
    observed: &Observed,
    owed: &[(String, Vec<crate::git::Owed>)],
    notifier: &dyn Notifier,
) {
    for (slug, notices) in owed {
        let Some(c) = config_of(observed, slug) else {
            continue;
        };
        for n in notices {
            if let Ok(event) = crate::model::NotificationEvent::parse(&n.event) {
                notifier::send(notifier, c, slug, event, None, &n.text);
            }
        }
    }
}

/// The warnings this run owes about orphan sessions (a session of no registered project, 2.2),
/// and what to remember: each session is warned about once, in the run that first finds it.
/// Pure.
pub fn orphans(
    unmanaged: &[crate::session::Session],
    before: &BTreeSet<String>,
) -> (Vec<String>, BTreeSet<String>) {
    let mut warnings = Vec::new();
    let mut next = BTreeSet::new();
    for s in unmanaged {
        let key = format!("{} {}", s.label, s.id);
        if !before.contains(&key) {
            warnings.push(format!(
                "orphan session {}: its project is not in the registry; it still counts as a \
                 running worker (against [tick] max_workers, if set) until it ends, times out or \
                 is ended with `braids kill {}`",
                s.label, s.label
            ));
        }
        next.insert(key);
    }
    (warnings, next)
}

/// The warnings this run owes about stories their trackers do not know, and what to remember.
/// Each story is warned about once per project and iteration. A project whose tracker was not
/// read this run keeps what was remembered; everything else is remembered as found, so a story
/// that is fixed and goes missing again is warned about again. Pure.
pub fn unknown_stories(
    reports: &[ProjectReport],
    before: &UnknownStories,
) -> (Vec<String>, UnknownStories) {
    let mut warnings = Vec::new();
    let mut next = UnknownStories::new();
    for r in reports {
        let Some(found) = &r.unknown_stories else {
            // not read this run: nothing is known either way
            if let Some(kept) = before.get(&r.slug) {
                next.insert(r.slug.clone(), kept.clone());
            }
            continue;
        };
        let Some((iteration, _)) = r.iteration.filter(|_| !found.is_empty()) else {
            continue;
        };
        let told = before.get(&r.slug).and_then(|m| m.get(&iteration));
        for u in found {
            if !told.is_some_and(|t| t.contains(&u.bead)) {
                warnings.push(format!("{}: {}", r.slug, u.problem));
            }
        }
        let ids = found.iter().map(|u| u.bead.clone()).collect();
        next.entry(r.slug.clone())
            .or_default()
            .insert(iteration, ids);
    }
    (warnings, next)
}

/// PROJECT.md as this run read it, for a project's notifications (`None` in read-only runs).
pub(in crate::tick) fn config_of<'a>(
    observed: &'a Observed,
    slug: &str,
) -> Option<&'a crate::format::project::ProjectConfig> {
    observed
        .reports
        .iter()
        .find(|r| r.slug == slug)
        .and_then(|r| r.config.as_deref())
}
