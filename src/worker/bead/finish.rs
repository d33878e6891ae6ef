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
use crate::lifecycle::{tracker_files, TRACKER_FILES};
use crate::model::{Autonomy, Bead, IterationStatus, NotificationEvent};
use crate::workspace::{Landing, Workspace, Workspaces};

use crate::worker::context::Loaded;
use crate::worker::report::{self, StatusReport};
use crate::worker::{clip, first_line, Ending, Run, Worker};

pub(in crate::worker) const PUSH_TIMEOUT: Duration = Duration::from_secs(120);

impl Worker<'_> {
    /// Closes, commits, completes the iteration when done, pushes and notifies.
    pub(in crate::worker) fn finish(
        &self,
        run: &mut Run<'_, '_>,
        l: &Loaded,
        ws: &Workspace,
        bead: &Bead,
        report: &StatusReport,
        deliverable: &Path,
    ) -> Result<Ending> {
        let bead_id = &run.msg.bead;
        run.step("deliverable", format!("verified {}", deliverable.display()));
        let root = &run.msg.project;
        let summary = deliverable::summary(
            &crate::system::beneath::read_string(&ws.dir, deliverable).unwrap_or_default(),
        )
        .or(report.summary.clone())
        .unwrap_or_else(|| bead.title.clone());
        // The agent's words and the title land: they close no issue on the forge.
        let message = format!(
            "{} ({bead_id})",
            crate::forge::words::no_closing(&first_line(&summary))
        );
        let hooks = crate::workspace::hooks::enabled(&l.project);
        let mut lock = RepoLock::acquire(root)?;
        // The branch the worktree was cut from: the person switching branches meanwhile moves
        // neither the landing nor its push.
        let base = ws
            .base
            .clone()
            .or_else(|| crate::workspace::base_branch(root).ok());
        if let (Some(b), false) = (&base, ws.is_shared()) {
            // What others pushed, before the work is replayed onto the base branch: a
            // conflict with it is found while the bead can still be blocked. A failure here
            // (no network) is the push's to report.
            match crate::git::catch_up(root, b, PUSH_TIMEOUT) {
                Ok(c) => {
                    for k in &c.kept {
                        tracing::warn!(bead = %bead_id, "not pushed: {k}");
                    }
                }
                Err(e) => {
                    tracing::info!(bead = %bead_id, "cannot catch up with the upstream before landing: {e:#}")
                }
            }
        }
        if !ws.is_shared() {
            let exclude = landing_excludes(l);
            let prepared = self.workspaces(l).prepare_landing(
                ws,
                bead_id,
                &exclude,
                hooks.then_some(message.as_str()),
            )?;
            if let crate::workspace::Prepared::Refused { hook_output } = prepared {
                drop(lock);
                return self.hook_refused(run, l, ws, bead, deliverable, hook_output);
            }
            if let Some(r) = prepared.refusal() {
                drop(lock);
                return match r.keep {
                    true => self.cannot_land(run, l, ws, &r.why, &r.paths),
                    false => self.held_untouched(run, l, &r.why, &r.paths),
                };
            }
        }
        // Everything the agent changed lands, unless it is research-only (the deliverable
        // alone) or its report lists the files it changed (those, as 3.6 says).
        let landing = (!ws.is_shared()).then(|| {
            let mut include = vec![relative(ws, deliverable)];
            let exclude = if l.project.autonomy == Autonomy::ResearchOnly {
                vec![PathBuf::from(".")]
            } else if !report.files_changed.is_empty() {
                include.extend(listed_files(report));
                vec![PathBuf::from(".")]
            } else {
                landing_excludes(l)
            };
            Landing {
                message: message.clone(),
                exclude,
                include,
                tracker_files: TRACKER_FILES.iter().map(PathBuf::from).collect(),
                hooks,
            }
        });
        crate::crash_point!("worker::after_deliverable");
        // Landing through review: the work goes to a pull request, the bead stays open.
        if let Some(landing) = landing.as_ref().filter(|_| {
            crate::review::ReviewSettings::of(&l.project).0.landing
                == crate::review::Landing::PullRequest
        }) {
            let proposal = super::propose::Proposal {
                ws,
                bead,
                summary: &summary,
                landing: landing.clone(),
                base: base.as_deref(),
            };
            match self.propose(run, l, proposal, lock)? {
                Ok(ending) => return Ok(ending),
                // Nothing to propose: the bead closes as a landing with nothing to commit does.
                Err(back) => lock = back,
            }
        }
        // Before the close, which cannot be undone: a failure here leaves the bead as it was.
        if base
            .as_deref()
            .is_some_and(|b| crate::git::has_upstream(root, b))
        {
            crate::git::expect_push(root)?;
        }
        // Recorded before the close: a worker killed between the close and the landing leaves
        // it, and the tick lands the work as this worker would have.
        let plan = self.paths.landing_plan(&l.slug, bead_id);
        if let Some(landing) = &landing {
            crate::system::atomic::write(&plan, &serde_json::to_vec(landing)?)?;
        }
        let closed = self
            .tracker
            .close(bead_id, report.summary.as_deref().unwrap_or("done"));
        // A timeout or a busy database may have closed it after all: an error like any other.
        if let Err(e @ crate::tracker::TrackerError::Failed { .. }) = closed {
            // The work is done but the tracker will not close the bead (an open child, say):
            // kept for a person to land once they have fixed that, never run again.
            let _ = std::fs::remove_file(&plan);
            drop(lock);
            let why = format!(
                "the tracker refused to close it ({}); fix that first (close its open children, say)",
                clip(&format!("{e:#}"), 300)
            );
            if landing.is_some() {
                return self.cannot_land(run, l, ws, &why, &[]);
            }
            return self.block_and_tell(
                run,
                l,
                format!("{why}, then `braids retry {bead_id}`; the work is left uncommitted in the project's checkout"),
            );
        }
        closed?;
        run.step("close", "bead closed");
        crate::crash_point!("worker::after_close");
        let commit = match &landing {
            None => self.commit(root, l, report, deliverable, &message)?,
            Some(landing) => match self.workspaces(l).land(ws, landing) {
                Ok(c) => c,
                // Closed but not landed: the bead is not done (3.6), so it is held with its
                // work kept, rather than shown closed with nothing in the history.
                Err(e) => {
                    let _ = std::fs::remove_file(&plan);
                    drop(lock);
                    let why = format!("its landing failed after the close: {e:#}");
                    return self.cannot_land(run, l, ws, &why, &[]);
                }
            },
        };
        let _ = std::fs::remove_file(&plan);
        run.step(
            "commit",
            format!(
                "{} {message}",
                commit.as_deref().unwrap_or("(nothing to commit)")
            ),
        );
        crate::crash_point!("worker::after_commit");
        let iteration_completed = self.complete_iteration_if_done(run, l, &lock)?;
        crate::crash_point!("worker::after_iteration");
        let pushed = push(run, root, base.as_deref());
        crate::crash_point!("worker::after_push");
        if matches!(pushed, Push::Pushed(_)) {
            // What earlier failed pushes held back (an iteration complete), told now.
            for o in crate::git::take_owed(root) {
                if let Ok(event) = NotificationEvent::parse(&o.event) {
                    run.notify(l, event, &o.text);
                }
            }
        }
        if let Some(c) = &commit {
            let text = match pushed {
                Push::Pushed(_) => format!("Landed in {c}."),
                _ => format!("Committed as {c}; braids pushes it once the upstream takes it."),
            };
            if let Err(e) = self.tracker.tell(bead_id, &text) {
                tracing::warn!(bead = %bead_id, "cannot tell the tracker where the work landed: {e}");
            }
        }
        drop(lock);
        self.drop_workspace(run, l);
        if let Some(k) = pushed.kept(bead_id) {
            // Others pushed a conflicting change between the catch-up and the push. Closed
            // beads are final (4.6): the bead stays closed, its work kept for a person, who is
            // told now and sees it as not landed until the branch is merged.
            let text = format!("[{}] {bead_id} is closed but did not land: {k}", l.slug);
            run.step("push", text.clone());
            run.notify(l, NotificationEvent::Blocker, &text);
        }

        let unpushed = match &pushed {
            Push::Failed(e) => format!(
                " Committed, not pushed yet (braids retries the push): {}",
                clip(e, 200)
            ),
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
            let n = l.iteration.name;
            let (event, text) = app_iteration::notice(&l.slug, n, IterationStatus::Complete);
            // Complete means on the upstream (4.4): told when the push that owes it succeeds.
            let waits =
                matches!(pushed, Push::Failed(_)) && crate::git::owe(root, event, &text).is_ok();
            if !waits {
                run.notify(l, event, &text);
            }
        }
        Ok(Ending::Completed {
            commit,
            pushed: pushed.as_option(),
            iteration_completed,
        })
    }

    /// The work cannot land: the bead is blocked with the paths in its reason, the agent's
    /// work kept on a branch for a person, and nothing half-merged left anywhere.
    pub(super) fn cannot_land(
        &self,
        run: &mut Run<'_, '_>,
        l: &Loaded,
        ws: &Workspace,
        why: &str,
        paths: &[String],
    ) -> Result<Ending> {
        let bead_id = &run.msg.bead;
        let wss = self.workspaces(l);
        let kept = wss.keep(ws, bead_id)?;
        let _ = wss.remove(ws);
        run.ws = None;
        let paths = if paths.is_empty() {
            String::new()
        } else {
            format!(" ({})", clip(&paths.join(", "), 300))
        };
        let Some(kept) = kept else {
            return self.block_and_tell(
                run,
                l,
                format!("{why}{paths}; nothing was kept: the agent changed nothing"),
            );
        };
        let bead = &run.msg.bead;
        // What landing it would be, for `braids approve`: the worker's own excludes, or
        // nothing but the deliverable for research-only work.
        let held = Landing {
            message: String::new(),
            exclude: match l.project.autonomy {
                Autonomy::ResearchOnly => vec![PathBuf::from(".")],
                _ => landing_excludes(l),
            },
            include: Vec::new(),
            tracker_files: Vec::new(),
            hooks: crate::workspace::hooks::enabled(&l.project),
        };
        crate::system::atomic::write(
            &self.paths.held_landing(&l.slug, bead),
            &serde_json::to_vec(&held)?,
        )?;
        let commit = crate::git::git_ok(&ws.project, &["rev-parse", "--verify", &kept])?
            .trim()
            .to_string();
        let reason = format!(
            "{why}{paths}; the work is kept on branch {kept}: `braids diff {bead}` shows it, \
             `braids approve {bead}` lands it, `braids reject {bead} --reason …` drops it"
        );
        match self.block_and_tell(run, l, reason)? {
            Ending::Blocked { reason } => Ok(Ending::Held {
                reason,
                kept,
                commit,
            }),
            other => Ok(other),
        }
    }

    /// A commit hook of the repository refused the work before the close: a failed attempt
    /// like a failing test, retried (or blocked) by the same rules, with what the hook printed
    /// in the next attempt's prompt.
    fn hook_refused(
        &self,
        run: &mut Run<'_, '_>,
        l: &Loaded,
        ws: &Workspace,
        bead: &Bead,
        deliverable: &Path,
        output: String,
    ) -> Result<Ending> {
        let why = format!(
            "a commit hook of the repository refused the work: {}",
            clip(&output, 1500)
        );
        run.step("commit", why.clone());
        self.failed_before(run, l, ws, bead, deliverable, why, output)
    }

    /// A failed attempt for `why` that is not the agent's run (a commit hook refused its work,
    /// the project's setup command failed): `output` reaches the next attempt's prompt.
    #[allow(clippy::too_many_arguments)]
    pub(in crate::worker) fn failed_before(
        &self,
        run: &mut Run<'_, '_>,
        l: &Loaded,
        ws: &Workspace,
        bead: &Bead,
        deliverable: &Path,
        why: String,
        output: String,
    ) -> Result<Ending> {
        let failure = crate::worker::bead::attempt::Failure {
            fresh: Some(deliverable.to_path_buf()),
            why: why.clone(),
            tried: vec![why],
            result: crate::worker::executor::ExecResult {
                code: Some(1),
                tail: output,
                ..Default::default()
            },
        };
        self.after_failed_attempt(run, l, ws, bead, deliverable, failure)
    }

    /// Blocks the bead with `reason` and tells a person (a blocker notification).
    fn block_and_tell(&self, run: &mut Run<'_, '_>, l: &Loaded, reason: String) -> Result<Ending> {
        let bead_id = &run.msg.bead;
        self.tracker.block(bead_id, &reason)?;
        run.step("block", format!("bead blocked: {reason}"));
        run.notify(
            l,
            NotificationEvent::Blocker,
            &format!("[{}] {bead_id} is blocked: {reason}.", l.slug),
        );
        Ok(Ending::Blocked { reason })
    }

    /// The worktree was turned against braids (it points elsewhere, or the repository's git
    /// configuration changed under the agent): the bead is blocked and a person told, and no
    /// git runs there; the worktree stays as the agent left it for the person to look at.
    fn held_untouched(
        &self,
        run: &mut Run<'_, '_>,
        l: &Loaded,
        why: &str,
        paths: &[String],
    ) -> Result<Ending> {
        run.ws = None;
        let reason = format!("{why} ({}); nothing of it landed", paths.join(", "));
        self.block_and_tell(run, l, reason)
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
            // In the shared work tree braids cannot tell the agent's edits of its control
            // files from the person's: it commits none of them.
            let mut paths: Vec<PathBuf> = listed_files(report)
                .into_iter()
                .filter(|p| !crate::workspace::guard::is_control(p))
                .map(|p| root.join(p))
                .collect();
            paths.extend(ours);
            crate::git::commit_paths(root, &paths, message)?
        } else {
            let mut skip = vec![
                iterations,
                root.join(report::SHARED),
                root.join(report::OWN_DIR),
            ];
            skip.extend(crate::events::GENERATED.iter().map(|g| root.join(g)));
            skip.extend(
                crate::workspace::guard::CONTROL
                    .iter()
                    .map(|c| root.join(c)),
            );
            crate::git::commit_all_except(root, &skip, &ours, message)?
        };
        Ok(oid.map(|o| o.to_string()))
    }

    /// 3.7: the iteration is completed and committed, with the tracker's files, when no story
    /// is left open (see [`app_iteration::complete_if_done`]). The caller pushes and notifies.
    pub(in crate::worker) fn complete_iteration_if_done(
        &self,
        run: &mut Run<'_, '_>,
        l: &Loaded,
        held: &RepoLock,
    ) -> Result<bool> {
        let root = &run.msg.project;
        if let Some(why) = crate::workspace::checkout_elsewhere(root, &l.project) {
            run.step("iteration", why);
            return Ok(false);
        }
        let done = app_iteration::complete_if_done(
            root,
            &l.slug,
            held,
            &l.iteration,
            &self.tracker.list()?,
            &tracker_files(root),
        )?;
        let detail = match done {
            Completion::NoStories => "no Stories listed; the iteration is completed by hand".into(),
            Completion::StoriesOpen(n) => format!("{n} stories still open"),
            Completion::AlreadyComplete => "already completed by another worker".into(),
            Completion::Completed => {
                format!("iteration {} complete; committed", l.iteration.name)
            }
        };
        run.step("iteration", detail);
        Ok(done == Completion::Completed)
    }
}

/// What a worktree's landing leaves out (project-relative): the iterations directory (other
/// beads' deliverables and frozen iterations, 4.5; the bead's own deliverable is put back in)
/// the status reports, which are for braids, not for the history, and what agent CLIs keep of
/// their own in the workspace.
fn landing_excludes(_l: &Loaded) -> Vec<PathBuf> {
    crate::workspace::agent_excludes()
}

/// The files a report says the agent changed, as project-relative paths that stay inside the
/// project and out of the iterations directory.
fn listed_files(report: &StatusReport) -> Vec<PathBuf> {
    report
        .files_changed
        .iter()
        .filter_map(|f| crate::workspace::guard::normalize(Path::new(f)))
        .filter(|p| !p.starts_with(".braids/iterations") && !crate::events::generated(p))
        .collect()
}

/// `p` (in the workspace) relative to the workspace.
fn relative(ws: &Workspace, p: &Path) -> PathBuf {
    p.strip_prefix(&ws.dir).unwrap_or(p).to_path_buf()
}

/// How a push went.
pub(in crate::worker) enum Push {
    NoUpstream,
    /// Pushed, but for the commits that conflict with an upstream others pushed to.
    Pushed(Vec<crate::git::Kept>),
    Failed(String),
}

impl Push {
    pub(in crate::worker) fn as_option(&self) -> Option<bool> {
        match self {
            Push::NoUpstream => None,
            Push::Pushed(_) => Some(true),
            Push::Failed(_) => Some(false),
        }
    }

    /// The bead's landing, when it conflicted with the upstream and was kept for a person
    /// (found by the bead its subject names: a commit replayed once has another id).
    fn kept(&self, bead: &crate::model::BeadId) -> Option<&crate::git::Kept> {
        match self {
            Push::Pushed(kept) => kept
                .iter()
                .find(|k| crate::git::bead_of(&k.subject) == Some(bead.as_str())),
            _ => None,
        }
    }
}

/// 4.4: push when there is an upstream, retrying once (3.10). A failure is reported, not
/// fatal: it is remembered (`git::push_recorded`) and the next tick retries it. The caller
/// holds the repository lock. `branch` is the one the commit went onto.
pub(in crate::worker) fn push(run: &mut Run<'_, '_>, root: &Path, branch: Option<&str>) -> Push {
    // Said once while it lasts (a mark in `.git/`, never committed), not by every bead.
    let told = root.join(".git/braids-no-upstream");
    let Some(branch) = branch.filter(|b| crate::git::has_upstream(root, b)) else {
        run.step("push", "no upstream; nothing to push");
        if !told.exists() && root.join(".git").is_dir() {
            tracing::warn!(
                project = %root.display(),
                "no upstream: beads land locally only; add a remote and `git push -u <remote> <branch>` once to have them pushed"
            );
            // Temp + rename: a link planted there is replaced, never written through.
            let _ = crate::system::atomic::write(&told, b"");
        }
        return Push::NoUpstream;
    };
    let _ = std::fs::remove_file(&told);
    let mut error = String::new();
    for attempt in 1..=2 {
        match crate::git::push_recorded(root, branch, PUSH_TIMEOUT) {
            Ok(pushed) => {
                let mut said = if attempt == 1 {
                    "pushed".to_string()
                } else {
                    "pushed on the second try".to_string()
                };
                if pushed.replayed > 0 {
                    said += &format!(
                        ", after replaying {} commit(s) onto the upstream others pushed to",
                        pushed.replayed
                    );
                }
                for k in &pushed.kept {
                    tracing::warn!(bead = %run.msg.bead, "not pushed: {k}");
                    said += &format!("; not pushed: {k}");
                }
                run.step("push", said);
                return Push::Pushed(pushed.kept);
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
