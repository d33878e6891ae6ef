//! Notifications the tick itself owes (CONTRACTS 1.2, 3.8): `blocker` when it releases a claim
//! whose worker vanished, and `no-ready-beads` when a project with an active iteration runs
//! dry. The latter is sent once per dry spell: the projects already told are remembered in the
//! state, and forgotten as soon as they have work or workers again.
//!
//! The same once-only rule holds for the log's warning about a story its tracker does not know
//! (1.3): a scheduled tick runs every few minutes, and a warning repeated on every run would bury
//! the log; [`unknown_stories`] says which warnings are new.

use std::collections::BTreeSet;

use crate::state::UnknownStories;

use crate::model::NotificationEvent;
use crate::notify::{self, Notifier};

use super::act::Outcome;
use super::decide::{Eligibility, Plan};
use super::observe::{Observed, ProjectReport};

/// Sends what this run owes and returns the projects now known to be dry.
pub fn send(
    observed: &Observed,
    plan: &Plan,
    outcome: &Outcome,
    dry_before: &BTreeSet<String>,
    notifier: &dyn Notifier,
) -> BTreeSet<String> {
    let config_of = |slug: &str| {
        observed
            .reports
            .iter()
            .find(|r| r.slug == slug)
            .and_then(|r| r.config.as_ref())
    };
    for r in &outcome.released {
        if let Some(c) = config_of(&r.project) {
            let text = format!("[{}] {} was released back to open: its worker ended without closing or blocking it.", r.project, r.bead);
            notify::send(
                notifier,
                c,
                &r.project,
                NotificationEvent::Blocker,
                Some(&r.bead),
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
            notify::send(
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
