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
use crate::forge::health;
use crate::forge::{connect, Conditional, ForgeError, Merged};
use crate::model::NotificationEvent;
use crate::review::prompt::one_line;
use crate::review::{InReview, ReviewSettings, Rework, Step};

use super::bead::attempt::AttemptEnd;
use super::bead::finish::{push, PUSH_TIMEOUT};
use super::context::Loaded;
use super::{clip, Ending, Run, Worker};

impl Worker<'_> {
    /// Acts on the bead's pull request `rec`.
    pub(super) fn review(
        &self,
        run: &mut Run<'_, '_>,
        l: &Loaded,
        mut rec: InReview,
        started: std::time::Instant,
    ) -> Result<Ending> {
        let bead_id = run.msg.bead.clone();
        let root = run.msg.project.clone();
        // Out of review once the bead is not in progress (a person closed or blocked it, or
        // braids blocked it): its request is no longer watched or acted on.
        let status = self.tracker.show(&bead_id)?.map(|b| b.status);
        if status != Some(crate::model::BeadStatus::InProgress) {
            crate::review_records::remove(self.paths, &l.slug, &bead_id);
            run.step(
                "review",
                format!(
                    "{} is no longer watched: its bead is {}",
                    rec.named(),
                    status.map_or("gone".to_string(), |s| s.to_string())
                ),
            );
            return Ok(Ending::ClaimRefused);
        }
        let settings = ReviewSettings::of(&l.project).0;
        let base = crate::workspace::base_branch(&root)?;
        let forge = connect::target(self.config, &settings, &root, &base)
            .and_then(|t| Ok((connect::connect(&t, &self.paths.home)?, t)));
        let (forge, target) = match forge {
            Ok(f) => f,
            // The settings changed under an open request: a person fixes them; nothing is lost.
            Err(why) => {
                run.step(
                    "review",
                    format!("cannot reach the forge of {}: {why}", rec.named()),
                );
                return Ok(in_review(&rec));
            }
        };
        let name = target.forge.name.clone();
        let heard = |outage: Option<&ForgeError>| {
            let outcome = outage.map_or(Ok(()), |e| Err(e.clone()));
            let _ = health::heard(self.paths, &name, &outcome, chrono::Utc::now());
        };
        if !rec.opened() {
            return self.open(run, l, rec, forge.as_ref(), &name);
        }
        let observed = forge.observe(rec.number, &mut Conditional::default());
        heard(observed.as_ref().err());
        let observed = match observed {
            Ok(o) => o,
            Err(e) => {
                run.step("review", format!("cannot look at {}: {e}", rec.named()));
                return Ok(in_review(&rec));
            }
        };
        let watched = crate::review::Watched {
            bead: bead_id.clone(),
            to_open: false,
            handled: rec.handled.clone(),
            pr: Some(observed.pr.clone()),
            merge: settings.merge,
            approvals: settings.approvals,
            attempts: crate::review::attempts(self.config.worker.retries),
            pushed: rec.pushed(),
        };
        let Some(step) = watched.step(chrono::Utc::now()) else {
            return Ok(in_review(&rec));
        };
        run.step("review", format!("{}: {step:?}", rec.named()));
        match step {
            Step::Done { merged_by } => self.merged(run, l, &rec, merged_by, None),
            Step::Merge { head } => {
                let merged = forge.merge(rec.number, &head, target.forge.merge_method);
                heard(merged.as_ref().err());
                match merged {
                    Ok(Merged::Merged { commit }) => {
                        if let Err(e) = forge.delete_branch(&rec.branch) {
                            run.step("review", format!("the branch {} stays: {e}", rec.branch));
                        }
                        self.merged(run, l, &rec, Some("braids".into()), Some(commit))
                    }
                    Ok(Merged::HeadMoved) => {
                        rec.last = format!(
                            "not merged: its head moved from {head}; looked at again next run"
                        );
                        self.keep_record(run, l, &rec)
                    }
                    Ok(Merged::NotMergeable(why)) => {
                        rec.handled.merge_refused_at = Some(head.clone());
                        rec.last = format!("not merged: {}", one_line(&why));
                        self.keep_record(run, l, &rec)
                    }
                    Err(e) => {
                        rec.last = format!("not merged: {e}");
                        self.keep_record(run, l, &rec)
                    }
                }
            }
            Step::Blocked { why } | Step::GiveUp { why } => {
                // Spent on red checks: the reason carries what they last said.
                let said: Vec<String> = observed
                    .pr
                    .checks
                    .iter()
                    .filter(|c| c.state == crate::review::CheckState::Failed)
                    .map(|c| format!("{}: {}", one_line(&c.name), one_line(last_line(&c.summary))))
                    .collect();
                let why = match said.is_empty()
                    || matches!(observed.pr.state, crate::review::PrState::Closed { .. })
                {
                    true => why,
                    false => format!("{why}; last: {}", clip(&said.join("; "), 400)),
                };
                let closed = matches!(observed.pr.state, crate::review::PrState::Closed { .. });
                self.tracker.block(&bead_id, &why)?;
                crate::review_records::remove(self.paths, &l.slug, &bead_id);
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
                run.notify(
                    l,
                    NotificationEvent::Blocker,
                    &format!("[{}] {bead_id} blocked: {why}", l.slug),
                );
                Ok(Ending::Blocked { reason: why })
            }
            Step::Rework(rework) => self.rework(run, l, rec, &observed.pr, &rework, started),
            Step::Rebase => self.rebase(run, l, rec, &observed.pr.head),
            Step::Wait { why } => {
                rec.last = why;
                self.keep_record(run, l, &rec)
            }
            // An opened request is never to open.
            Step::Open => Ok(in_review(&rec)),
        }
    }

    /// A new attempt of the bead at the request's head, its agent told what the forge said;
    /// what it commits is pushed to the request's branch (see `propose`). An attempt that does
    /// not pass leaves the request as it was, to be tried again by a later run while the bead
    /// has attempts left.
    fn rework(
        &self,
        run: &mut Run<'_, '_>,
        l: &Loaded,
        mut rec: InReview,
        pr: &crate::review::PullRequest,
        rework: &Rework,
        started: std::time::Instant,
    ) -> Result<Ending> {
        let bead_id = run.msg.bead.clone();
        let root = run.msg.project.clone();
        // What the request counts as answered once this attempt's work is pushed: kept aside
        // until then, so an attempt that dies or fails leaves the same step for a later run.
        let mut answered = rec.handled.clone();
        match rework {
            Rework::Checks(_) => answered.checks_at = Some(pr.head.clone()),
            Rework::Conflict => answered.conflict_at = Some(pr.head.clone()),
            Rework::Changes(r) => {
                answered.review = r.iter().map(|r| r.id).max().or(answered.review)
            }
        }
        // Counted now: a worker killed mid-attempt has used it.
        rec.handled.attempts += 1;
        answered.attempts = rec.handled.attempts;
        rec.pending = Some(answered);
        rec.rework = Some(crate::review::prompt::block(
            rec.number,
            &rec.url,
            &rec.branch,
            rework,
        ));
        let (kind, what) = match rework {
            Rework::Checks(c) => (
                Kind::ChecksFailed,
                c.iter()
                    .map(|c| c.name.clone())
                    .collect::<Vec<_>>()
                    .join(", "),
            ),
            Rework::Changes(r) => (
                Kind::ChangesRequested,
                r.iter()
                    .map(|r| r.author.clone())
                    .collect::<Vec<_>>()
                    .join(", "),
            ),
            Rework::Conflict => (Kind::ChangesRequested, "a conflict with the base".into()),
        };
        crate::events::emit(
            &root,
            &l.slug,
            vec![Draft::new(kind)
                .bead(&bead_id)
                .with("number", rec.number)
                .with("head", pr.head.clone())
                .with("attempt", rec.handled.attempts)
                .with("what", what.clone())],
        );
        run.step(
            "review",
            format!(
                "attempt {} answers {}: {what}",
                rec.handled.attempts,
                rec.named()
            ),
        );
        // The branch as the forge has it (a person's commits on it included): the base of the
        // lease the new work is pushed with.
        let base = crate::workspace::base_branch(&root)?;
        let head = crate::git::upstream_of(&root, &base)
            .ok_or_else(|| anyhow::anyhow!("{base} has no upstream"))
            .and_then(|(remote, _)| {
                crate::git::fetch_review_branch(&root, &remote, &rec.branch, PUSH_TIMEOUT)
            });
        let head = match head {
            Ok(h) => h,
            Err(e) => {
                // Not started: not counted.
                rec.handled.attempts -= 1;
                rec.pending = None;
                rec.last = format!("cannot fetch its branch: {e:#}");
                return self.keep_record(run, l, &rec);
            }
        };
        rec.head = head.clone();
        crate::review_records::save(self.paths, &l.slug, &bead_id, &rec)?;
        let bead = self
            .tracker
            .show(&bead_id)?
            .ok_or_else(|| anyhow::anyhow!("bead {bead_id} is gone"))?;
        let expected = l.deliverable_for(&bead);
        let (ws, _) = self.open_workspace_at(run, l, Some(&head))?;
        run.started(l, &bead.title);
        let ended = match self.attempt(run, l, &ws, &bead, &expected, started)? {
            AttemptEnd::Passed {
                report,
                deliverable,
            } => {
                return self.finish(run, l, &ws, &bead, &report, &deliverable);
            }
            AttemptEnd::Failed(f) => f.why,
            AttemptEnd::Question => "the agent asked a question instead".into(),
            AttemptEnd::Guardrail(r) => format!(
                "the agent stopped at a guardrail: {}",
                r.summary.as_deref().unwrap_or("(no summary)")
            ),
        };
        rec.unanswered("did not pass", &ended);
        run.step("review", rec.last.clone());
        self.drop_workspace(run, l);
        self.keep_record(run, l, &rec)
    }

    /// Its base moved and the forge says the request still merges: braids replays the
    /// branch onto the base as it is now and pushes it with a lease on the head it replayed,
    /// so a push by a person in between is refused, not overwritten. A replay that conflicts
    /// is left to the forge's next answer (a conflict goes to the agent).
    fn rebase(
        &self,
        run: &mut Run<'_, '_>,
        l: &Loaded,
        mut rec: InReview,
        seen: &str,
    ) -> Result<Ending> {
        let root = run.msg.project.clone();
        let base = crate::workspace::base_branch(&root)?;
        let Some((remote, merge)) = crate::git::upstream_of(&root, &base) else {
            rec.last = format!("{base} has no upstream to rebase onto");
            return self.keep_record(run, l, &rec);
        };
        let rebased = (|| -> anyhow::Result<(String, crate::git::Rebased)> {
            let head = crate::git::fetch_review_branch(&root, &remote, &rec.branch, PUSH_TIMEOUT)?;
            let onto = crate::git::fetch_review_branch(
                &root,
                &remote,
                merge.strip_prefix("refs/heads/").unwrap_or(&merge),
                PUSH_TIMEOUT,
            )?;
            Ok((head.clone(), crate::git::rebase_onto(&root, &head, &onto)?))
        })();
        let replayed: Result<String, String> = match rebased {
            Ok((head, crate::git::Rebased::Onto(new))) => crate::git::push_review_branch(
                &root,
                &remote,
                &new,
                &rec.branch,
                Some(&head),
                PUSH_TIMEOUT,
            )
            .map(|()| new)
            .map_err(|e| format!("not rebased: {e:#}")),
            Ok((_, crate::git::Rebased::Conflict(paths))) => Err(format!(
                "its rebase conflicts in {}: the forge's next answer goes to the agent",
                clip(&paths.join(", "), 200)
            )),
            Err(e) => Err(format!("not rebased: {e:#}")),
        };
        match replayed {
            Ok(new) => {
                run.step(
                    "push",
                    format!("{} rebased onto {}: {new}", rec.branch, rec.base),
                );
                rec.last = format!("rebased onto {} as {new}", rec.base);
                rec.head = new;
                rec.pushed_at = Some(chrono::Utc::now());
            }
            // Not tried again at this head: the forge's next answer decides.
            Err(why) => {
                rec.handled.rebase_failed_at = Some(seen.to_string());
                rec.last = why;
            }
        }
        run.step("review", rec.last.clone());
        self.keep_record(run, l, &rec)
    }

    /// Opens the request whose branch an earlier worker pushed when the forge would not open
    /// it (or the worker died first): the forge finds one already open for the branch.
    fn open(
        &self,
        run: &mut Run<'_, '_>,
        l: &Loaded,
        mut rec: InReview,
        forge: &dyn crate::forge::Forge,
        name: &str,
    ) -> Result<Ending> {
        let words = rec
            .to_open
            .clone()
            .unwrap_or_else(|| crate::review::ToOpen {
                title: rec.bead.clone(),
                body: String::new(),
            });
        let asked = forge.open(&crate::forge::Opening {
            head: rec.branch.clone(),
            base: rec.base.clone(),
            title: words.title,
            body: words.body,
        });
        let _ = health::heard(self.paths, name, &asked, chrono::Utc::now());
        match asked {
            Ok(o) => {
                rec.number = o.number;
                rec.url = o.url;
                rec.to_open = None;
                rec.last = "opened".into();
                crate::review_records::save(self.paths, &l.slug, &run.msg.bead, &rec)?;
                run.step("review", format!("opened pull request {}", rec.named()));
                Ok(Ending::InReview {
                    number: rec.number,
                    url: rec.url,
                    opened_now: true,
                })
            }
            Err(e) if e.is_outage() => {
                rec.last = format!("not opened yet: {e}");
                run.step("review", rec.last.clone());
                self.keep_record(run, l, &rec)
            }
            Err(e) => {
                let why = format!(
                    "its branch {} is pushed, but {name} would not open a pull request: {e}",
                    rec.branch
                );
                crate::review_records::remove(self.paths, &l.slug, &run.msg.bead);
                self.tracker.block(&run.msg.bead, &why)?;
                run.step("block", why.clone());
                Ok(Ending::Blocked { reason: why })
            }
        }
    }

    fn keep_record(&self, run: &mut Run<'_, '_>, l: &Loaded, rec: &InReview) -> Result<Ending> {
        crate::review_records::save(self.paths, &l.slug, &run.msg.bead, rec)?;
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
                run.step(
                    "review",
                    format!("cannot catch up with the merged base: {e:#}"),
                );
            }
        }
        let merged_by = merged_by.as_deref().map(one_line);
        let by = merged_by.clone().unwrap_or_else(|| "a person".into());
        self.tracker.close(
            &bead_id,
            &format!("merged as pull request #{} by {by}", rec.number),
        )?;
        crate::review_records::remove(self.paths, &l.slug, &bead_id);
        run.step(
            "close",
            format!("bead closed: {} merged by {by}", rec.named()),
        );
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
            &format!(
                "[{}] Completed {bead_id}: pull request {} merged by {by}",
                l.slug,
                rec.named()
            ),
        );
        if iteration_completed {
            let (event, text) = crate::app::iteration::notice(
                &l.slug,
                l.iteration.name,
                crate::model::IterationStatus::Complete,
            );
            run.notify(l, event, &text);
        }
        Ok(Ending::Completed {
            commit,
            pushed: pushed.as_option(),
            iteration_completed,
        })
    }
}

/// The last line with something on it: where a log says what failed.
fn last_line(text: &str) -> &str {
    text.lines()
        .rev()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("")
}

fn in_review(rec: &InReview) -> Ending {
    Ending::InReview {
        number: rec.number,
        url: rec.url.clone(),
        opened_now: false,
    }
}
