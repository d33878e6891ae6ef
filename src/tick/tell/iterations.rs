//! Iterations a dead worker left finished but active (3.7, 7.2), completed by the tick.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::model::IterationName;
use crate::tick::act::Outcome;
use crate::tick::decide::Plan;
use crate::tracker::Tracker;

/// Completes the iterations a dead worker left behind (3.7, 7.2): every story closed, the
/// iteration still active, because the worker that closed the last one died before completing
/// it. Only in projects with no worker running and none started this run (a live worker
/// completes its own), under the repository lock without waiting, and with the same check and
/// commit a worker makes (`lifecycle::complete_if_done`), pushed like a worker's. Returns the
/// iterations completed, for their notifications, and the errors.
pub fn finish(
    reports: &[crate::tick::observe::ProjectReport],
    views: &[crate::tick::decide::ProjectView],
    plan: &Plan,
    outcome: &Outcome,
    trackers: &BTreeMap<String, Arc<dyn Tracker>>,
    push_timeout: Duration,
) -> (Vec<(String, IterationName)>, Vec<String>) {
    let mut done = Vec::new();
    let mut errors = Vec::new();
    for r in reports.iter().filter(|r| looks_finished(r)) {
        // Only what a dead worker of a scheduled project left: a paused project is a person's.
        let eligible = views.iter().any(|v| {
            v.slug == r.slug
                && matches!(
                    v.eligibility,
                    crate::tick::decide::Eligibility::Eligible { .. }
                )
        });
        let busy = !eligible
            || plan.healthy.get(&r.slug).copied().unwrap_or(0) > 0
            || outcome.spawned.iter().any(|s| s.project == r.slug)
            || outcome.kept.iter().any(|(slug, _, _)| *slug == r.slug);
        let (Some((name, _)), Some(tracker), false) = (r.iteration, trackers.get(&r.slug), busy)
        else {
            continue;
        };
        match finish_one(&r.path, &r.slug, name, tracker.as_ref(), push_timeout) {
            Ok(true) => {
                tracing::info!(project = %r.slug, iteration = %name, "iteration completed: its last worker ended before completing it");
                done.push((r.slug.clone(), name));
            }
            Ok(false) => {}
            Err(e) => errors.push(format!(
                "{}: cannot complete iteration {name}, whose stories are all closed: {e:#}",
                r.slug
            )),
        }
    }
    (done, errors)
}

/// What the run saw: an active iteration whose Stories are all closed (prose entries, with no
/// status, aside). The tracker has the last word in [`finish_one`].
fn looks_finished(r: &crate::tick::observe::ProjectReport) -> bool {
    use crate::model::{BeadStatus, IterationStatus};
    let known: Vec<BeadStatus> = r.stories.iter().filter_map(|(_, _, s)| *s).collect();
    matches!(r.iteration, Some((_, Some(IterationStatus::Active))))
        && !known.is_empty()
        && known.iter().all(|s| *s == BeadStatus::Closed)
}

/// Completes iteration `name` of the project at `root` if every story is closed; `Ok(false)`
/// when the repository is busy (the next run tries again) or a story is still open.
fn finish_one(
    root: &std::path::Path,
    slug: &str,
    name: IterationName,
    tracker: &dyn Tracker,
    push_timeout: Duration,
) -> anyhow::Result<bool> {
    let Some(lock) = crate::git::RepoLock::try_acquire(root)? else {
        return Ok(false);
    };
    let config = crate::format::project::read_project(root).value;
    if let Some(why) = crate::workspace::checkout_elsewhere(root, &config) {
        tracing::debug!(project = %slug, "iteration left active: {why}");
        return Ok(false);
    }
    let its = crate::format::iteration::read_iterations(root).value;
    let Some(it) = name.find(&its, |i| i.name) else {
        return Ok(false);
    };
    // A story whose work is kept on a branch has not landed: completing (and freezing, 4.5)
    // the iteration now would shut that work out. A person merges or drops it first.
    for s in &it.stories {
        if !crate::workspace::kept_branches(root, &s.id)?.is_empty() {
            tracing::debug!(project = %slug, story = %s.id, "iteration left active: the story's work is kept on a branch");
            return Ok(false);
        }
    }
    // The completing commit goes onto the checked-out branch (`lifecycle::transition`).
    let branch = crate::git::checked_out(root).filter(|b| crate::git::has_upstream(root, b));
    let upstream = branch.is_some();
    let marked_before = crate::git::push_pending(root);
    if upstream {
        crate::git::expect_push(root)?;
    }
    let all = tracker.list()?;
    let files = crate::lifecycle::tracker_files(root);
    let completed = crate::lifecycle::complete_if_done(root, slug, &lock, it, &all, &files)?
        == crate::lifecycle::Completion::Completed;
    if let (Some(branch), true) = (&branch, completed) {
        // A failure leaves the mark: the next run retries the push (4.4).
        match crate::git::push_recorded(root, branch, push_timeout) {
            Ok(p) => p
                .kept
                .iter()
                .for_each(|k| tracing::warn!(project = %slug, "not pushed: {k}")),
            Err(e) => {
                tracing::warn!(project = %slug, "iteration completed, push failed (retried next run): {e:#}");
                // Announced once it is on the upstream (4.4): the push that succeeds tells.
                let (event, text) =
                    crate::lifecycle::notice(slug, name, crate::model::IterationStatus::Complete);
                let _ = crate::git::owe(root, event, &text);
            }
        }
    } else if upstream && !marked_before {
        crate::git::clear_push_mark(root);
    }
    Ok(completed)
}
