//! A worker for a bead in review: the tick started it because the bead's pull request has
//! something to act on. The worker looks at the request afresh, takes the same pure decision
//! the tick took ([`crate::review::decide`]) and does what it says, each fixed step braids'
//! own: a merge through the API naming the head it saw pass, the bead closed once merged (by
//! braids or a person) with the tracker's record committed and pushed onto the merged base,
//! the bead blocked when the request was closed unmerged or its attempts are spent. The bead
//! is never claimed again: it has been braids' since its first worker, in_progress throughout.

use anyhow::Result;

use crate::app::iteration::RepoLock;
use crate::events::{Draft, Kind};
use crate::forge::{connect, Conditional, Merged};
use crate::model::NotificationEvent;
use crate::review::{decide, InReview, ReviewSettings, Step};

use super::bead::finish::{push, PUSH_TIMEOUT};
use super::context::Loaded;
use super::{clip, Ending, Run, Worker};

impl Worker<'_> {
    /// Acts on the bead's pull request `rec`.
    pub(super) fn review(&self, run: &mut Run<'_, '_>, l: &Loaded, mut rec: InReview) -> Result<Ending> {
        let bead_id = run.msg.bead.clone();
        let root = run.msg.project.clone();
        let settings = ReviewSettings::of(&l.project).0;
        let base = crate::workspace::base_branch(&root)?;
        let forge = connect::target(self.config, &settings, &root, &base)
            .and_then(|t| Ok((connect::connect(&t, &self.paths.home)?, t)));
        let (forge, target) = match forge {
            Ok(f) => f,
            // The settings changed under an open request: a person fixes them; nothing is lost.
            Err(why) => {
                run.step("review", format!("cannot reach the forge of {}: {why}", rec.named()));
                return Ok(in_review(&rec));
            }
        };
        let observed = match forge.observe(rec.number, &mut Conditional::default()) {
            Ok(o) => o,
            Err(e) => {
                run.step("review", format!("cannot look at {}: {e}", rec.named()));
                return Ok(in_review(&rec));
            }
        };
        let attempts = self.config.worker.retries + 1;
        let step = decide(&observed.pr, &rec.handled, settings.merge, settings.approvals, attempts);
        run.step("review", format!("{}: {step:?}", rec.named()));
        match step {
            Step::Done { merged_by } => self.merged(run, l, &rec, merged_by, None),
            Step::Merge { head } => {
                match forge.merge(rec.number, &head, target.forge.merge_method) {
                    Ok(Merged::Merged { commit }) => {
                        if let Err(e) = forge.delete_branch(&rec.branch) {
                            run.step("review", format!("the branch {} stays: {e}", rec.branch));
                        }
                        self.merged(run, l, &rec, Some("braids".into()), Some(commit))
                    }
                    Ok(Merged::HeadMoved) => {
                        rec.last = format!("not merged: its head moved from {head}; looked at again next run");
                        self.keep_record(run, l, &rec)
                    }
                    Ok(Merged::NotMergeable(why)) => {
                        rec.last = format!("not merged: {}", clip(&why, 200));
                        self.keep_record(run, l, &rec)
                    }
                    Err(e) => {
                        rec.last = format!("not merged: {e}");
                        self.keep_record(run, l, &rec)
                    }
                }
            }
            Step::Blocked { why } | Step::GiveUp { why } => {
                let closed = matches!(observed.pr.state, crate::review::PrState::Closed { .. });
                self.tracker.block(&bead_id, &why)?;
                crate::app::reviews::remove(self.paths, &l.slug, &bead_id);
                if closed {
                    let by = match &observed.pr.state {
                        crate::review::PrState::Closed { by } => by.clone(),
                        _ => None,
                    };
                    crate::events::emit(
                        &root,
                        &l.slug,
                        vec![Draft::new(Kind::PrClosed)
                            .bead(&bead_id)
                            .with("number", rec.number)
                            .with("closed_by", by)],
                    );
                }
                run.step("block", why.clone());
                run.notify(l, NotificationEvent::Blocker, &format!("[{}] {bead_id} blocked: {why}", l.slug));
                Ok(Ending::Blocked { reason: why })
            }
            Step::Rework(_) | Step::Rebase => {
                // What the agent or a rebase would answer is a person's to do here: they are
                // told once for this head, and braids goes on watching.
                let why = match &step {
                    Step::Rebase => format!("{} is behind its base: rebase it", rec.named()),
                    _ => format!("{} needs changes (failing checks, a conflict or a review): push them to {}", rec.named(), rec.branch),
                };
                rec.handled.checks_at = Some(observed.pr.head.clone());
                rec.handled.conflict_at = Some(observed.pr.head.clone());
                rec.handled.review = observed.pr.reviews.iter().map(|r| r.id).max().or(rec.handled.review);
                rec.last = why.clone();
                run.notify(l, NotificationEvent::Review, &format!("[{}] {bead_id}: {why}", l.slug));
                self.keep_record(run, l, &rec)
            }
            Step::Wait { why } => {
                rec.last = why;
                self.keep_record(run, l, &rec)
            }
        }
    }

    fn keep_record(&self, run: &mut Run<'_, '_>, l: &Loaded, rec: &InReview) -> Result<Ending> {
        crate::app::reviews::save(self.paths, &l.slug, &run.msg.bead, rec)?;
        Ok(in_review(rec))
    }

    /// The request is merged: the bead closes, and its close is committed onto the merged base
    /// and pushed; the iteration completes if it was its last story.
    fn merged(
        &self,
        run: &mut Run<'_, '_>,
        l: &Loaded,
        rec: &InReview,
        merged_by: Option<String>,
        commit: Option<String>,
    ) -> Result<Ending> {
        let bead_id = run.msg.bead.clone();
        let root = run.msg.project.clone();
        let base = crate::workspace::base_branch(&root).ok();
        let lock = RepoLock::acquire(&root)?;
        if let Some(b) = &base {
            // The merge is on the upstream: the base branch meets it before the close lands.
            if let Err(e) = crate::git::catch_up(&root, b, PUSH_TIMEOUT) {
                run.step("review", format!("cannot catch up with the merged base: {e:#}"));
            }
        }
        let by = merged_by.clone().unwrap_or_else(|| "a person".into());
        self.tracker
            .close(&bead_id, &format!("merged as pull request #{} by {by}", rec.number))?;
        crate::app::reviews::remove(self.paths, &l.slug, &bead_id);
        run.step("close", format!("bead closed: {} merged by {by}", rec.named()));
        let message = format!("braids: {bead_id} merged as #{}", rec.number);
        let recorded = crate::lifecycle::commit_tracker_held(&root, &message, &lock)?;
        if let Some((c, _)) = &recorded {
            run.step("commit", format!("{c} {message} (the tracker's record)"));
        }
        let iteration_completed = self.complete_iteration_if_done(run, l, &lock)?;
        let pushed = push(run, &root, base.as_deref());
        drop(lock);
        crate::events::emit(
            &root,
            &l.slug,
            vec![Draft::new(Kind::PrMerged)
                .bead(&bead_id)
                .with("number", rec.number)
                .with("merged_by", merged_by)
                .with("commit", commit.clone())],
        );
        run.notify(
            l,
            NotificationEvent::BeadComplete,
            &format!("[{}] Completed {bead_id}: pull request {} merged by {by}", l.slug, rec.named()),
        );
        if iteration_completed {
            let (event, text) = crate::app::iteration::notice(&l.slug, l.iteration.name, crate::model::IterationStatus::Complete);
            run.notify(l, event, &text);
        }
        Ok(Ending::Completed {
            commit,
            pushed: pushed.as_option(),
            iteration_completed,
        })
    }
}

fn in_review(rec: &InReview) -> Ending {
    Ending::InReview {
        number: rec.number,
        url: rec.url.clone(),
    }
}
