//! Landing through review (`Landing: pull-request`): after the same checks as a push landing,
//! the work becomes one commit on the bead's own branch, pushed to the base branch's remote
//! under `braids/<bead>` and opened as a pull request against the base branch. The bead is
//! then in review: left in_progress, recorded (`app::reviews`), holding no worker; the tick
//! watches the request and starts a worker again when there is something to do about it.

use anyhow::Result;

use crate::app::iteration::RepoLock;
use crate::forge::connect;
use crate::forge::Opening;
use crate::model::{Bead, NotificationEvent};
use crate::review::{InReview, ReviewSettings, ToOpen};
use crate::workspace::{Landing, Workspace, Workspaces};

use super::finish::PUSH_TIMEOUT;
use crate::worker::context::Loaded;
use crate::worker::{clip, first_line, Ending, Run, Worker};

/// A bead's checked work, about to be proposed.
pub(in crate::worker) struct Proposal<'a> {
    pub ws: &'a Workspace,
    pub bead: &'a Bead,
    pub summary: &'a str,
    pub landing: Landing,
    pub base: Option<&'a str>,
}

impl Worker<'_> {
    /// Opens the bead's work as a pull request. `Err(lock)` (the lock handed back) when the
    /// agent changed nothing to propose: the bead then closes as a landing with nothing to
    /// commit does.
    pub(in crate::worker) fn propose(
        &self,
        run: &mut Run<'_, '_>,
        l: &Loaded,
        p: Proposal<'_>,
        lock: RepoLock,
    ) -> Result<Result<Ending, RepoLock>> {
        let bead_id = &run.msg.bead;
        let root = run.msg.project.clone();
        let refuse = |run: &mut Run<'_, '_>, lock: RepoLock, why: String| {
            drop(lock);
            self.cannot_land(run, l, p.ws, &why, &[]).map(Ok)
        };
        let Some(base) = p.base else {
            return refuse(
                run,
                lock,
                "the project has no base branch to open a pull request against".into(),
            );
        };
        let Some((remote, merge)) = crate::git::upstream_of(&root, base) else {
            return refuse(
                run,
                lock,
                format!("the branch {base} has no upstream to open a pull request on: set one with `git push -u <remote> {base}`"),
            );
        };
        let settings = ReviewSettings::of(&l.project).0;
        let forge = connect::target(self.config, &settings, &root, base)
            .and_then(|t| Ok((connect::connect(&t, &self.paths.home)?, t)));
        let (forge, target) = match forge {
            Ok(f) => f,
            Err(why) => return refuse(run, lock, why),
        };
        // The pull request carries the work only: the bead's state stays the tracker's own
        // until the request is merged.
        let landing = Landing {
            tracker_files: vec![],
            ..p.landing
        };
        // An attempt answering the forge goes to the request it answers.
        let open = crate::review_records::load(self.paths, &l.slug, bead_id)?;
        let commit = match self.workspaces(l).propose(p.ws, &landing) {
            Ok(Some(c)) => c,
            Ok(None) if open.is_none() => return Ok(Err(lock)),
            Ok(None) => String::new(),
            Err(e) => return refuse(run, lock, format!("its work cannot be proposed: {e:#}")),
        };
        if let Some(rec) = open {
            drop(lock);
            return self.push_answer(run, l, rec, &remote, &commit).map(Ok);
        }
        let branch = crate::review::branch_of(bead_id.as_str());
        // A branch of that name left by an earlier request of the bead (closed unmerged, or
        // given up) is braids' own: replaced, under a lease on what it holds now.
        let left = crate::git::fetch_review_branch(&root, &remote, &branch, PUSH_TIMEOUT).ok();
        if let Err(e) = crate::git::push_review_branch(
            &root,
            &remote,
            &commit,
            &branch,
            left.as_deref(),
            PUSH_TIMEOUT,
        ) {
            return refuse(run, lock, format!("{e:#}"));
        }
        run.step("push", format!("{commit} pushed to {remote} as {branch}"));
        let base_name = merge
            .strip_prefix("refs/heads/")
            .unwrap_or(&merge)
            .to_string();
        let opening = Opening {
            head: branch.clone(),
            base: base_name.clone(),
            title: format!(
                "{} ({bead_id})",
                crate::forge::words::no_closing(&first_line(&p.bead.title))
            ),
            body: body(bead_id, p.bead, p.summary),
        };
        // Recorded before the forge is asked: a forge that fails to open it, or a worker
        // killed before it heard, leaves the next run a pushed branch to open, never an
        // orphan request.
        let mut record = InReview {
            bead: bead_id.to_string(),
            forge: target.forge.name.clone(),
            repository: target.repository.clone(),
            number: 0,
            url: String::new(),
            branch,
            base: base_name,
            head: commit,
            opened_at: chrono::Utc::now(),
            handled: Default::default(),
            last: "its branch is pushed; not opened yet".into(),
            rework: None,
            pending: None,
            pushed_at: None,
            to_open: Some(ToOpen {
                title: opening.title.clone(),
                body: opening.body.clone(),
            }),
        };
        crate::review_records::save(self.paths, &l.slug, bead_id, &record)?;
        let asked = forge.open(&opening);
        let _ =
            crate::forge::health::heard(self.paths, &target.forge.name, &asked, chrono::Utc::now());
        match asked {
            Ok(o) => {
                record.number = o.number;
                record.url = o.url;
                record.to_open = None;
                record.last = "opened".into();
            }
            // The forge's trouble, not the bead's: opened by a later run once it answers.
            Err(e) if e.is_outage() => {
                record.last = format!("not opened yet: {e}");
                run.step(
                    "review",
                    format!("{} would not open it: {e}", target.forge.name),
                );
            }
            Err(e) => {
                crate::review_records::remove(self.paths, &l.slug, bead_id);
                return refuse(
                    run,
                    lock,
                    format!(
                        "its branch {} is pushed, but {} would not open a pull request: {e}",
                        record.branch, target.forge.name
                    ),
                );
            }
        }
        crate::review_records::save(self.paths, &l.slug, bead_id, &record)?;
        drop(lock);
        if record.opened() {
            run.step("review", format!("opened pull request {}", record.named()));
        }
        self.drop_workspace(run, l);
        let text = format!(
            "[{}] {bead_id} is in review: pull request {} ({})",
            l.slug,
            record.named(),
            clip(&first_line(p.summary), 200)
        );
        run.notify(l, NotificationEvent::Review, &text);
        Ok(Ok(Ending::InReview {
            number: record.number,
            opened_now: record.opened(),
            url: record.url,
        }))
    }
}

impl Worker<'_> {
    /// Pushes an attempt's `commit` (empty: the agent changed nothing) to its request's branch,
    /// with a lease on the head the attempt started from: a person's push since is refused,
    /// never overwritten, and the next run looks again.
    fn push_answer(
        &self,
        run: &mut Run<'_, '_>,
        l: &Loaded,
        mut rec: InReview,
        remote: &str,
        commit: &str,
    ) -> Result<Ending> {
        let bead_id = run.msg.bead.clone();
        let root = run.msg.project.clone();
        let pushed = match commit.is_empty() {
            true => Err("the agent changed nothing".to_string()),
            false => crate::git::push_review_branch(
                &root,
                remote,
                commit,
                &rec.branch,
                Some(&rec.head),
                PUSH_TIMEOUT,
            )
            .map_err(|e| format!("{e:#}")),
        };
        match pushed {
            Ok(()) => {
                run.step(
                    "push",
                    format!("{commit} pushed to {remote} as {}", rec.branch),
                );
                rec.head = commit.to_string();
                rec.pushed_at = Some(chrono::Utc::now());
                rec.last = format!("attempt {} pushed {commit}", rec.handled.attempts);
                // Answered: what the attempt answered no longer asks for one.
                if let Some(answered) = rec.pending.take() {
                    rec.handled = answered;
                }
            }
            Err(why) => {
                rec.unanswered("not pushed", &why);
                run.step("push", rec.last.clone());
            }
        }
        rec.rework = None;
        crate::review_records::save(self.paths, &l.slug, &bead_id, &rec)?;
        self.drop_workspace(run, l);
        Ok(Ending::InReview {
            number: rec.number,
            url: rec.url,
            opened_now: false,
        })
    }
}

/// The pull request's description: the bead, what the agent said it did, and where braids
/// keeps track of it. The agent's words are quoted as text (the forge renders markdown, and
/// a summary is not the reviewer's instruction).
fn body(bead_id: &crate::model::BeadId, bead: &Bead, summary: &str) -> String {
    let no_closing = crate::forge::words::no_closing;
    let quoted: Vec<String> = no_closing(summary)
        .lines()
        .map(|l| format!("> {l}"))
        .collect();
    // A forge issue's bead: the forge closes the issue when the request merges.
    let closes = bead_id
        .issue_number()
        .filter(|_| bead_id.as_str().starts_with(crate::model::ISSUE_PREFIX))
        .map(|n| format!("Closes #{n}\n\n"))
        .unwrap_or_default();
    format!(
        "{closes}Bead `{bead_id}`: {}\n\nWhat the agent reported:\n\n{}\n\nOpened by braids. A failing check or a review asking for changes starts another attempt of the bead on this branch.\n",
        no_closing(&first_line(&bead.title)),
        quoted.join("\n")
    )
}
