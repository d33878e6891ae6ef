//! When the bead cannot be finished, a person takes over, never a silently stranded bead
//! (3.10): after failed attempts, a partial deliverable is written and committed, the bead
//! blocked and a blocker notification sent; after an error, the bead is blocked if it still can
//! be and the error sent.

use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::app::iteration::RepoLock;
use crate::format::deliverable;
use crate::model::{Bead, NotificationEvent};
use crate::retry::{self, AfterFailure};

use crate::workspace::Workspace;

use super::bead::attempt::Failure;
use super::bead::finish::push;
use super::context::Loaded;
use super::{clip, first_line, Ending, Run, Worker};
use crate::lifecycle::tracker_files;

impl Worker<'_> {
    /// A failed attempt: recorded, then the bead goes back to open to wait its backoff, or, when
    /// its breaker trips, it is given up ([`crate::retry`]).
    pub(super) fn after_failed_attempt(
        &self,
        run: &mut Run<'_, '_>,
        l: &Loaded,
        ws: &Workspace,
        bead: &Bead,
        expected: &Path,
        mut failure: Failure,
    ) -> Result<Ending> {
        let now = chrono::Utc::now();
        let breaker = self.config.breaker.policy();
        let r = &failure.result;
        // A preset's CLI says itself when the provider failed it; otherwise its output is read.
        let (signature, retry_after_secs) = match r.agent.as_ref().and_then(|a| a.provider.as_ref())
        {
            Some(p) => (
                Some(retry::breaker::provider_signature(p.status, &p.what)),
                p.retry_after,
            ),
            None => retry::breaker::signature(r.code, r.timed_out, &r.tail, &breaker.patterns),
        };
        let cause = match &signature {
            Some(sig) if !failure.tried.iter().any(|t| t.contains(sig.as_str())) => {
                format!("{} ({sig})", failure.tried.join("; "))
            }
            _ => failure.tried.join("; "),
        };
        let record = retry::Failure {
            signature,
            retry_after_secs,
            ..retry::Failure::new(now, failure.tried.join("; "))
        };
        let store = retry::store::Store::in_dir(&self.paths.braids_dir);
        let policy = self.config.worker.retry_policy();
        let verdict = store.update(|a| a.fail(&run.msg.project, &bead.id, record, &policy, true));
        match verdict {
            Ok(AfterFailure::Retry {
                not_before,
                failures,
            }) => {
                let at = not_before.format("%Y-%m-%d %H:%M:%S UTC");
                self.tracker.reopen(
                    &bead.id,
                    &format!(
                        "braids: attempt failed ({}); retried from {at}",
                        failure.tried.join("; ")
                    ),
                )?;
                run.step(
                    "retry",
                    format!("failure {failures}: bead open again, eligible from {at}"),
                );
                Ok(Ending::Retrying {
                    not_before,
                    failures,
                    cause,
                })
            }
            Ok(AfterFailure::Block { reason, failures }) => {
                failure.why = reason;
                failure.tried = failures
                    .iter()
                    .enumerate()
                    .map(|(i, f)| {
                        format!(
                            "attempt {} ({}): {}",
                            i + 1,
                            f.at.format("%Y-%m-%d %H:%M UTC"),
                            f.why
                        )
                    })
                    .collect();
                self.give_up(run, l, ws, bead, expected, &failure)
            }
            Err(e) => {
                // Without the record a retry could go on for ever: a person takes over now.
                failure.why = format!(
                    "{} (and the attempt could not be recorded: {e:#})",
                    failure.why
                );
                self.give_up(run, l, ws, bead, expected, &failure)
            }
        }
    }

    /// Partial deliverable, blocked bead, blocker notification (3.10).
    pub(super) fn give_up(
        &self,
        run: &mut Run<'_, '_>,
        l: &Loaded,
        ws: &Workspace,
        bead: &Bead,
        expected: &Path,
        failure: &Failure,
    ) -> Result<Ending> {
        let why = failure.why.as_str();
        let mut path = write_partial(l, &ws.dir, bead, expected, failure)?;
        // From a worktree, the partial deliverable lands in the project on its own; the agent's
        // other changes are kept on a branch for a person when the run ends.
        if !ws.is_shared() && path.starts_with(&ws.dir) {
            let in_project = ws.in_project(&path);
            let bytes = crate::system::beneath::read(&ws.dir, &path)?;
            crate::system::beneath::write_within(&ws.project, &in_project, &bytes)?;
            path = in_project;
        }
        run.step(
            "deliverable",
            format!("partial deliverable written to {}", path.display()),
        );
        self.tracker
            .block(&bead.id, &format!("{why}; see the partial deliverable"))?;
        run.step("block", format!("bead blocked: {why}"));
        let root = &run.msg.project;
        {
            let _lock = RepoLock::acquire(root)?;
            let mut paths = vec![path];
            paths.extend(tracker_files(root));
            let message = format!("Partial: {} ({})", first_line(&bead.title), bead.id);
            let commit = crate::git::commit_paths(root, &paths, &message)?;
            run.step(
                "commit",
                format!(
                    "{} {message}",
                    commit.map_or("(nothing to commit)".into(), |c| c.to_string())
                ),
            );
            push(run, root, crate::git::checked_out(root).as_deref());
        }
        run.notify(
            l,
            NotificationEvent::Blocker,
            &format!("[{}] {} is blocked: {why}.", l.slug, bead.id),
        );
        Ok(Ending::Blocked {
            reason: why.to_string(),
        })
    }

    /// The agent stopped because the work would break a guardrail: the bead is blocked at once,
    /// without another attempt, with the guardrail (the agent's summary) in its reason, and a
    /// person told (3.10: never violate; block and escalate). A bead's agent and a protocol
    /// story's step end here alike (10.13).
    pub(super) fn guardrail(
        &self,
        run: &mut Run<'_, '_>,
        l: &Loaded,
        bead: &Bead,
        summary: Option<&str>,
    ) -> Result<Ending> {
        let which = summary
            .map(|s| clip(s, 300))
            .unwrap_or_else(|| "the agent named no guardrail (see the session log)".into());
        let reason = format!("guardrail conflict: {which}");
        self.tracker.block(&bead.id, &reason)?;
        run.step("block", format!("bead blocked, not retried: {reason}"));
        run.notify(
            l,
            NotificationEvent::Blocker,
            &format!("[{}] {} is blocked: {reason}", l.slug, bead.id),
        );
        Ok(Ending::Blocked { reason })
    }

    /// After an error past the claim: block the bead if it still can be, and tell a person.
    pub(super) fn ended_by_error(
        &self,
        run: &mut Run<'_, '_>,
        l: &Loaded,
        e: &anyhow::Error,
    ) -> Ending {
        let error = format!("{e:#}");
        // A lock another worker held all along is a wait, not a failure: the bead is handed
        // back to be retried, uncounted, and nobody is paged.
        let closed = run.steps.iter().any(|s| s.name == "close");
        if crate::system::lock::is_busy(e) && !closed {
            let why = format!("waited too long for a lock: {}", clip(&error, 200));
            match self.tracker.reopen(
                &run.msg.bead,
                &format!("braids: {why}; retried by a later run"),
            ) {
                Ok(()) => {
                    run.step("retry", format!("bead open again, uncounted: {why}"));
                    return Ending::HandedBack { why };
                }
                Err(r) => run.step("retry", format!("the bead could not be opened again: {r}")),
            }
        }
        tracing::error!(bead = %run.msg.bead, "worker error: {error}");
        run.step("error", error.clone());
        let reason = format!("worker error: {}", clip(&error, 200));
        let blocked = match self.tracker.block(&run.msg.bead, &reason) {
            Ok(()) => {
                run.step("block", "bead blocked after the error");
                Some(reason)
            }
            Err(b) => {
                run.step("block", format!("the bead could not be blocked: {b}"));
                None
            }
        };
        run.notify(
            l,
            NotificationEvent::Blocker,
            &format!(
                "[{}] {} needs a person: the worker stopped on an error: {}",
                l.slug,
                run.msg.bead,
                clip(&error, 300)
            ),
        );
        Ending::Failed { error, blocked }
    }
}

/// Writes the partial deliverable and returns its path. A deliverable the agent wrote in this
/// run is kept and told why it is not complete; otherwise a partial one is written (in place of
/// one left by an earlier run: one deliverable per bead, 1.4).
fn write_partial(
    l: &Loaded,
    root: &Path,
    bead: &Bead,
    expected: &Path,
    failure: &Failure,
) -> Result<PathBuf> {
    let why = failure.why.as_str();
    let tried_text = if failure.tried.is_empty() {
        "- nothing was run".to_string()
    } else {
        failure
            .tried
            .iter()
            .map(|t| format!("- {t}"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let details =
        format!("What was tried:\n\n{tried_text}\n\nThe session log has the agent's full output.");
    if let Some(p) = &failure.fresh {
        let mut text = crate::system::beneath::read_within(root, p).unwrap_or_default();
        text.push_str(&format!(
            "\n\n## Not completed\n\n{why}; the bead is blocked until a person looks at it.\n\n{details}\n"
        ));
        crate::system::beneath::write_within(root, p, text.as_bytes())?;
        return Ok(p.clone());
    }
    let p = deliverable::find(&l.iteration.dir, &bead.id)
        .into_iter()
        .next()
        .unwrap_or_else(|| expected.to_path_buf());
    let summary = format!("Not completed: {why}. The bead is blocked until a person looks at it.");
    let text = crate::system::templates::render(
        crate::system::templates::DELIVERABLE,
        &[
            ("title", &format!("Partial: {}", bead.title)),
            ("bead", bead.id.as_str()),
            ("summary", &summary),
            ("details", &details),
        ],
    );
    crate::system::beneath::write_within(root, &p, text.as_bytes())?;
    Ok(p)
}

impl Worker<'_> {
    /// What the tracker recorded of a run that landed nothing (a failed attempt, a block, a
    /// question) is committed on its own ([`crate::lifecycle::commit_tracker`]).
    pub(super) fn commit_tracker(&self, run: &mut Run<'_, '_>, ending: &Ending) {
        let what = match ending {
            Ending::Retrying { failures, .. } => format!("attempt {failures} failed"),
            Ending::Blocked { .. } | Ending::Held { .. } | Ending::Failed { .. } => {
                "blocked".into()
            }
            Ending::DependenciesOpen { .. } => "waits for its dependencies".into(),
            Ending::AwaitingHuman | Ending::AwaitingApproval => "waits for a person".into(),
            // Landed, never claimed, or handed back on a lock another worker holds.
            Ending::Completed { .. }
            | Ending::InReview { .. }
            | Ending::ClaimRefused
            | Ending::IterationFrozen
            | Ending::HandedBack { .. } => return,
        };
        let root = &run.msg.project;
        let message = format!("braids: {} {what}", run.msg.bead);
        match crate::lifecycle::commit_tracker(root, &message) {
            Ok(Some((c, base))) => {
                run.step("commit", format!("{c} {message} (the tracker's record)"));
                push(run, root, Some(&base));
            }
            Ok(None) => {}
            Err(e) => run.step(
                "commit",
                format!("the tracker's record is not committed: {e:#}"),
            ),
        }
    }
}
