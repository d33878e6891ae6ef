//! Notifications the tick itself owes (CONTRACTS 1.2, 3.8): `blocker` when it releases a claim
//! whose worker vanished, and `no-ready-beads` when a project with an active iteration runs
//! dry. The latter is sent once per dry spell: the projects already told are remembered in the
//! state, and forgotten as soon as they have work or workers again.

use std::collections::BTreeSet;

use crate::model::NotificationEvent;
use crate::notify::{self, Notifier};

use super::act::Outcome;
use super::decide::{Eligibility, Plan};
use super::observe::Observed;

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
    for view in &observed.snapshot.projects {
        let Eligibility::Eligible { iteration } = view.eligibility else {
            continue;
        };
        let busy = plan.healthy.get(&view.slug).copied().unwrap_or(0) > 0
            || outcome.spawned.iter().any(|s| s.project == view.slug);
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
