//! Phase 4, the fixed steps of a success, in the order of 3.5–3.7 and 4.4: the deliverable
//! verified, the bead closed, the work committed, the iteration completed if it was the last
//! story, the commit pushed — all under the repository lock, so a bead a worker closed is
//! committed by the time any other worker looks at the iteration, and the iteration is
//! completed (and frozen, 4.5) only after the last bead's own commit. The notifications follow.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Result;

use crate::app::iteration::{self as app_iteration, Completion, RepoLock};
use crate::format::{self, deliverable};
use crate::model::{Autonomy, Bead, IterationStatus, NotificationEvent};

use super::context::Loaded;
use super::report::{self, StatusReport};
use super::{clip, first_line, Ending, Run, Worker};

const PUSH_TIMEOUT: Duration = Duration::from_secs(120);
/// Where trackers keep bead state inside a project: it travels with every commit the worker
/// makes, so git carries the bead's closure with its work (4.4).
const TRACKER_FILES: [&str; 2] = [".beads", ".braids/WORKPLAN.md"];

impl Worker<'_> {
    /// Closes, commits, completes the iteration when done, pushes and notifies.
    pub(super) fn finish(
        &self,
        run: &mut Run<'_, '_>,
        l: &Loaded,
        bead: &Bead,
        report: &StatusReport,
        deliverable: &Path,
    ) -> Result<Ending> {
        let bead_id = &run.msg.bead;
        run.step("deliverable", format!("verified {}", deliverable.display()));
        let root = &run.msg.project;
        let lock = RepoLock::acquire(root)?;
        self.tracker
            .close(bead_id, report.summary.as_deref().unwrap_or("done"))?;
        run.step("close", "bead closed");
        let summary =
            deliverable::summary(&std::fs::read_to_string(deliverable).unwrap_or_default())
                .or(report.summary.clone())
                .unwrap_or_else(|| bead.title.clone());
        let message = format!("{} ({bead_id})", first_line(&summary));
        let commit = self.commit(root, l, report, deliverable, &message)?;
        run.step(
            "commit",
            format!(
                "{} {message}",
                commit.as_deref().unwrap_or("(nothing to commit)")
            ),
        );
        let iteration_completed = self.complete_iteration_if_done(run, l, &lock)?;
        let pushed = push(run, root);
        drop(lock);

        let unpushed = match &pushed {
            Push::Failed(e) => format!(" Committed, but not pushed: {}", clip(e, 200)),
            _ => String::new(),
        };
        run.notify(
            l,
            NotificationEvent::BeadComplete,
            &format!(
                "[{}] Completed {bead_id}: {}{unpushed}",
                l.slug,
                first_line(&summary)
            ),
        );
        if iteration_completed {
            let n = l.iteration.number;
            let (event, text) = app_iteration::notice(&l.slug, n, IterationStatus::Complete);
            run.notify(l, event, &text);
        }
        Ok(Ending::Completed {
            commit,
            pushed: pushed.as_option(),
            iteration_completed,
        })
    }

    /// Commits the bead's work with the tracker's record of its closure: research-only commits
    /// only the deliverable; otherwise the files the agent reported changing plus the
    /// deliverable, or every change when it reported none. Other files in the iterations
    /// directory are never part of it: they are other beads' deliverables (committed with their
    /// own bead) or frozen iterations (4.5); nor are status reports, which may be another
    /// worker's, not yet read. The caller holds the repository lock.
    fn commit(
        &self,
        root: &Path,
        l: &Loaded,
        report: &StatusReport,
        deliverable: &Path,
        message: &str,
    ) -> Result<Option<String>> {
        let iterations = format::iteration::iterations_dir(root);
        let mut ours = vec![deliverable.to_path_buf()];
        ours.extend(tracker_files(root));
        let oid = if l.project.autonomy == Autonomy::ResearchOnly {
            crate::git::commit_paths(root, &ours, message)?
        } else if !report.files_changed.is_empty() {
            let mut paths: Vec<PathBuf> = report
                .files_changed
                .iter()
                .map(|f| root.join(f))
                .filter(|p| {
                    p.starts_with(root)
                        && !p.starts_with(&iterations)
                        && !p.components().any(|c| c == std::path::Component::ParentDir)
                })
                .collect();
            paths.extend(ours);
            crate::git::commit_paths(root, &paths, message)?
        } else {
            let skip = [
                iterations,
                root.join(report::SHARED),
                root.join(report::OWN_DIR),
            ];
            crate::git::commit_all_except(root, &skip, &ours, message)?
        };
        Ok(oid.map(|o| o.to_string()))
    }

    /// 3.7: the iteration is completed and committed, with the tracker's files, when no story
    /// is left open (see [`app_iteration::complete_if_done`]). The caller pushes and notifies.
    fn complete_iteration_if_done(
        &self,
        run: &mut Run<'_, '_>,
        l: &Loaded,
        held: &RepoLock,
    ) -> Result<bool> {
        let root = &run.msg.project;
        let done = app_iteration::complete_if_done(
            root,
            &l.slug,
            held,
            &l.iteration,
            self.tracker,
            &tracker_files(root),
        )?;
        let detail = match done {
            Completion::NoStories => "no Stories listed; the iteration is completed by hand".into(),
            Completion::StoriesOpen(n) => format!("{n} stories still open"),
            Completion::AlreadyComplete => "already completed by another worker".into(),
            Completion::Completed => {
                format!("iteration {} complete; committed", l.iteration.number)
            }
        };
        run.step("iteration", detail);
        Ok(done == Completion::Completed)
    }
}

/// The tracker's files in the project, if it keeps any there.
pub(super) fn tracker_files(root: &Path) -> Vec<PathBuf> {
    TRACKER_FILES
        .iter()
        .map(|f| root.join(f))
        .filter(|p| p.exists())
        .collect()
}

/// How a push went.
pub(super) enum Push {
    NoUpstream,
    Pushed,
    Failed(String),
}

impl Push {
    fn as_option(&self) -> Option<bool> {
        match self {
            Push::NoUpstream => None,
            Push::Pushed => Some(true),
            Push::Failed(_) => Some(false),
        }
    }
}

/// 4.4: push when there is an upstream, retrying once (3.10). A failure is reported, not
/// fatal: it is remembered (`git::push_recorded`) and the next tick retries it. The caller
/// holds the repository lock.
pub(super) fn push(run: &mut Run<'_, '_>, root: &Path) -> Push {
    if !crate::git::has_upstream(root) {
        run.step("push", "no upstream; nothing to push");
        return Push::NoUpstream;
    }
    let mut error = String::new();
    for attempt in 1..=2 {
        match crate::git::push_recorded(root, PUSH_TIMEOUT) {
            Ok(()) => {
                run.step(
                    "push",
                    if attempt == 1 {
                        "pushed"
                    } else {
                        "pushed on the second try"
                    },
                );
                return Push::Pushed;
            }
            Err(e) => error = format!("{e:#}"),
        }
    }
    tracing::warn!(bead = %run.msg.bead, "git push failed twice: {error}");
    run.step(
        "push",
        format!("failed twice; the next tick retries the push: {error}"),
    );
    Push::Failed(error)
}
