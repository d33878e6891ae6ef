//! Preflight: before anything is claimed for a project, the program its workers will run must
//! exist. A missing or misspelled executor would otherwise fail every spawn, and each bead
//! would be retried and blocked in turn until the project ran dry. A project that fails the
//! preflight gets one error instead: its STATUS.md note, one WARN line and one blocker
//! notification while the problem stays the same, and nothing claimed or blocked.

use std::collections::BTreeMap;

use crate::config::Config;
use crate::model::NotificationEvent;
use crate::notify::{self, Notifier};

use super::decide::Eligibility;
use super::observe::Observed;

/// Checks every scheduled project the run read in full (a dry run reads no PROJECT.md for
/// notifications, and claims nothing anyway), marking the ones no worker could serve.
pub fn check(config: &Config, observed: &mut Observed) {
    for view in observed.snapshot.projects.iter_mut() {
        if !matches!(view.eligibility, Eligibility::Eligible { .. }) {
            continue;
        }
        let Some(report) = observed.reports.iter_mut().find(|r| r.slug == view.slug) else {
            continue;
        };
        let Some(project) = report.config.as_ref() else {
            continue;
        };
        let project_md = report.path.join(".braids/PROJECT.md");
        if let Some(why) = config.preflight(project, &project_md) {
            report.note = Some(format!("no worker can start: {why}"));
            view.preflight_error = Some(why);
        }
    }
}

/// The warnings this run owes and the notifications it sends for preflight problems, each
/// once while it stays the same; returns what to remember.
pub fn tell(
    observed: &Observed,
    before: &BTreeMap<String, String>,
    notifier: &dyn Notifier,
) -> (Vec<String>, BTreeMap<String, String>) {
    let mut warnings = Vec::new();
    let mut next = BTreeMap::new();
    for view in &observed.snapshot.projects {
        let Some(why) = &view.preflight_error else {
            continue;
        };
        if before.get(&view.slug) != Some(why) {
            let text = format!(
                "[{}] No worker can start, so nothing is claimed: {why}.",
                view.slug
            );
            warnings.push(format!(
                "{}: no worker can start, so nothing is claimed: {why}",
                view.slug
            ));
            let config = super::notices::config_of(observed, &view.slug);
            if let Some(c) = config {
                notify::send(
                    notifier,
                    c,
                    &view.slug,
                    NotificationEvent::Blocker,
                    None,
                    &text,
                );
            }
        }
        next.insert(view.slug.clone(), why.clone());
    }
    (warnings, next)
}
