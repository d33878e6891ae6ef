//! Preflight: before anything is claimed for a project, the program its workers will run must
//! exist, and its repository must be able to host a worker (a commit to cut a worktree from, a
//! branch, a whole history: `workspace::cannot_host`). A missing or misspelled executor would otherwise fail every spawn, and each bead
//! would be retried and blocked in turn until the project ran dry. A project that fails the
//! preflight gets one error instead: its STATUS.md note, one WARN line and one blocker
//! notification while the problem stays the same, and nothing claimed or blocked.

use std::collections::BTreeMap;

use crate::config::Config;
use crate::model::NotificationEvent;
use crate::notifier::{self, Notifier};

use super::decide::Eligibility;
use super::observe::Observed;

/// Checks every scheduled project the run read in full (a dry run reads no PROJECT.md for
/// notifications, and claims nothing anyway), marking the ones no worker could serve.
pub fn check(config: &Config, paths: &crate::system::paths::Paths, observed: &mut Observed) {
    // The agents' sandbox is config.toml's: one that was asked for and cannot run stops every
    // project; "auto" finding none lets agents run, said on every run.
    let sandbox = match crate::system::sandbox::choose(config.worker.sandbox, &config.worker.bwrap)
    {
        Err(why) => Some(why),
        Ok(c) if c.fell_back => {
            tracing::warn!("agents run without a sandbox: {}", c.why);
            observed
                .installation
                .insert(format!("agents run without a sandbox: {}", c.why));
            None
        }
        Ok(_) => None,
    };
    // Views and reports are made in the same (registry) order, one each: pairing them by
    // position, not by a search per view, keeps a 10,000-project tick linear.
    let reports = &mut observed.reports;
    for (i, view) in observed.snapshot.projects.iter_mut().enumerate() {
        if !matches!(view.eligibility, Eligibility::Eligible { .. }) {
            continue;
        }
        let report = match reports.get(i).filter(|r| r.slug == view.slug) {
            Some(_) => reports.get_mut(i),
            None => reports.iter_mut().find(|r| r.slug == view.slug),
        };
        let Some(report) = report else {
            continue;
        };
        let Some(project) = report.config.as_deref() else {
            continue;
        };
        let project_md = crate::format::layout::project_file(&report.path);
        let preflight = match &sandbox {
            Some(why) => Some((why.clone(), None)),
            None => config.preflight_at(project, &project_md),
        };
        let (why, shared) = match preflight {
            // config.toml's: the same for every project that uses it, listed once.
            Some((why, None)) => (Some(why), true),
            Some((why, Some(_))) => (Some(why), false),
            None => (
                crate::workspace::cannot_host(&report.path, project)
                    .or_else(|| review_problem(config, paths, &report.path, project)),
                false,
            ),
        };
        if let Some(why) = why {
            if shared {
                report.note = Some("no worker can start (see Problems)".into());
                observed
                    .installation
                    .insert(format!("no worker can start: {why}"));
            } else {
                report.note = Some(format!("no worker can start: {why}"));
            }
            view.preflight_error = Some(why);
        }
    }
}

/// Why a project landing through pull requests cannot open one: its landing fields, its forge
/// and its token, checked without asking the forge (`braids check` asks it).
fn review_problem(
    config: &Config,
    paths: &crate::system::paths::Paths,
    root: &std::path::Path,
    project: &crate::format::project::ProjectConfig,
) -> Option<String> {
    let (settings, problems) = crate::review::ReviewSettings::of(project);
    // A landing field it cannot read could send work straight to the branch it meant to
    // protect: nothing is claimed until it is fixed.
    if let Some(p) = problems.first() {
        return Some(format!(
            "PROJECT.md line {}: {}; {}",
            p.line, p.sentence, p.fix
        ));
    }
    if settings.landing != crate::review::Landing::PullRequest {
        return None;
    }
    if crate::workspace::WorkspaceMode::of(project) == crate::workspace::WorkspaceMode::Shared {
        return Some(
            "`Landing: pull-request` needs a worktree per bead, and PROJECT.md says `Workspace: shared`: remove one of them".into(),
        );
    }
    let base = match crate::workspace::base_branch(root) {
        Ok(b) => b,
        Err(e) => return Some(format!("{e:#}")),
    };
    let target = match crate::forge::connect::target(config, &settings, root, &base).and_then(|t| {
        t.forge
            .token(&paths.home, |v| std::env::var(v).ok())
            .map(|_| t)
    }) {
        Ok(t) => t,
        Err(why) => return Some(why),
    };
    // Work finished while its forge is out could not be opened: nothing is claimed while it
    // is paused, and a run whose probe is due goes ahead (the sentence stays the same while
    // the forge is out: told once).
    match crate::forge::health::look(paths, &target.forge.name, chrono::Utc::now()) {
        crate::retry::forge_breaker::Look::Ask | crate::retry::forge_breaker::Look::Probe => None,
        crate::retry::forge_breaker::Look::Paused { .. } => Some(format!(
            "forge `{}` is paused after an outage: nothing is claimed until it answers again",
            target.forge.name
        )),
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
    for (i, view) in observed.snapshot.projects.iter().enumerate() {
        let Some(why) = &view.preflight_error else {
            continue;
        };
        if before.get(&view.slug) != Some(why) {
            let text = format!(
                "[{}] No worker can start, so nothing is claimed: {why}.",
                view.slug
            );
            // config.toml's problem is the run's error already, said once for all projects.
            let shared = format!("no worker can start: {why}");
            if !observed.installation.contains(&shared) {
                warnings.push(format!(
                    "{}: no worker can start, so nothing is claimed: {why}",
                    view.slug
                ));
            }
            // Its report is at the same place (see `check`), else found by slug.
            let config = match observed.reports.get(i).filter(|r| r.slug == view.slug) {
                Some(r) => r.config.as_deref(),
                None => super::tell::notices::config_of(observed, &view.slug),
            };
            if let Some(c) = config {
                notifier::send(
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
