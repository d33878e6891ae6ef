//! How a story's session ends: a person asked (a review, a question), the story blocked or
//! held, handed back to the tick, or done and landed.

use anyhow::Result;
use chrono::Utc;

use crate::model::{Bead, BeadId, NotificationEvent};
use crate::protocol::handoff;
use crate::protocol::story_state::StoryState;
use crate::protocol::{Rules, Status, Step};
use crate::workspace::Workspace;

use super::super::context::Loaded;
use super::super::report::StatusReport;
use super::super::{clip, Ending, Run, Worker};

impl Worker<'_> {
    /// A review or a question: the person is told what to read and what to run; the bead keeps
    /// its claim (in_progress), holding no worker slot, until they answer (a review with
    /// `braids review`, a question with `braids answer`).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn ask_person(
        &self,
        run: &mut Run<'_, '_>,
        l: &Loaded,
        ws: &Workspace,
        s: &StoryState,
        rules: &Rules,
        step: Step,
        message: &str,
    ) -> Result<Ending> {
        let story_id = s.story.as_deref().unwrap_or("");
        if step != Step::Review {
            // A question the executor asked: the answer reaches the step's next prompt.
            let question = s
                .last_error
                .as_deref()
                .unwrap_or("the executor asked a question");
            let text = format!(
                "[{}] Question on {} at {step}: {question} (its report: {}). Answer with `braids answer {}:{} \"…\"`.",
                l.slug,
                run.msg.bead,
                ws.dir.join(handoff::HANDOFF).display(),
                l.slug,
                run.msg.bead,
            );
            run.step("question", format!("waiting for a person: {question}"));
            run.notify(l, NotificationEvent::Question, &text);
            return Ok(Ending::AwaitingHuman);
        }
        let reads: Vec<String> = if step == Step::Review {
            [Step::Bdd, Step::SddDelta, Step::Contract]
                .iter()
                .filter_map(|st| rules.get(*st))
                .flat_map(|r| r.claude_writes.iter())
                .map(|w| crate::protocol::rules::resolve(w, story_id))
                .filter(|w| !w.contains('*'))
                .map(|w| ws.dir.join(w).display().to_string())
                .collect()
        } else {
            vec![ws.dir.join(handoff::HANDOFF).display().to_string()]
        };
        let question = format!(
            "[{}] {message}. Read: {}. Then run `braids review approve {} {}` (add --note \"…\" for the next step) or `braids review reject {} {} --reason needs_clarification --note \"…\"`.",
            l.slug,
            reads.join(", "),
            l.slug,
            run.msg.bead,
            l.slug,
            run.msg.bead,
        );
        run.step("question", format!("waiting for a person: {message}"));
        run.notify(l, NotificationEvent::Question, &question);
        Ok(Ending::AwaitingHuman)
    }

    /// Out of attempts: the bead is blocked and a person told; the story and its workspace
    /// stay as they are for `braids story reset` or a retry.
    pub(super) fn story_blocked(
        &self,
        run: &mut Run<'_, '_>,
        l: &Loaded,
        s: &StoryState,
        step: Step,
        reason: &str,
    ) -> Result<Ending> {
        let last = s.last_error.as_deref().map_or(String::new(), |e| {
            format!(" (last error: {})", clip(e, 200))
        });
        let why = format!("{reason}{last}");
        self.tracker.block(&run.msg.bead, &why)?;
        run.step("block", format!("bead blocked at {step}: {why}"));
        run.notify(
            l,
            NotificationEvent::Blocker,
            &format!("[{}] {} is blocked: {why}.", l.slug, run.msg.bead),
        );
        Ok(Ending::Blocked { reason: why })
    }

    /// A story file or rules table braids cannot read: the story is held (the bead blocked,
    /// a person told), never guessed at.
    pub(super) fn hold_story(
        &self,
        run: &mut Run<'_, '_>,
        l: &Loaded,
        why: &str,
    ) -> Result<Ending> {
        self.tracker.block(&run.msg.bead, why)?;
        run.step("block", format!("story held: {why}"));
        run.notify(
            l,
            NotificationEvent::Blocker,
            &format!("[{}] {} is held: {why}", l.slug, run.msg.bead),
        );
        Ok(Ending::Blocked {
            reason: why.to_string(),
        })
    }

    /// The next step waits for the tick: the bead goes back to open, its story kept.
    pub(super) fn hand_back(
        &self,
        run: &mut Run<'_, '_>,
        bead: &BeadId,
        why: &str,
    ) -> Result<Ending> {
        self.tracker
            .reopen(bead, &format!("protocol: {why}; the next tick goes on"))?;
        run.step("protocol", format!("handed back to the tick: {why}"));
        Ok(Ending::HandedBack {
            why: why.to_string(),
        })
    }

    /// The chain is complete: braids writes the deliverable from the story, then closes,
    /// commits and pushes as for any bead (3.4–3.7, 4.4).
    pub(super) fn story_done(
        &self,
        run: &mut Run<'_, '_>,
        l: &Loaded,
        ws: Workspace,
        bead: &Bead,
        mut s: StoryState,
    ) -> Result<Ending> {
        let root = run.msg.project.clone();
        let expected = ws.here(&l.deliverable_for(bead));
        let history =
            crate::system::beneath::read_string(&ws.dir, std::path::Path::new(handoff::HISTORY))
                .unwrap_or_default();
        let text = deliverable_text(bead, &s, &history);
        crate::system::beneath::write_within(&ws.dir, &expected, text.as_bytes())?;
        let summary = format!("{} walked the protocol to done", bead.title);
        let mut report = StatusReport::assumed(Some(summary));
        report.source = "the protocol pipeline";
        if !ws.is_shared() {
            run.ws = Some(ws.clone());
        }
        let ending = self.finish(run, l, &ws, bead, &report, &expected)?;
        if let Ending::Completed { commit, .. } = &ending {
            s.status = Status::Pass;
            s.completed_at = Some(Utc::now());
            if commit.is_some() {
                s.commit_hash = commit.clone();
            }
            self.save_story(&root, &bead.id, &s)?;
        }
        Ok(ending)
    }
}

/// The bead's deliverable: what the story did, from its history, tests, files and commit.
fn deliverable_text(bead: &Bead, s: &StoryState, history: &str) -> String {
    let story = s.story.as_deref().unwrap_or(bead.id.as_str());
    // The story's runs in the history, and the files each said it changed.
    let mut steps: Vec<&str> = Vec::new();
    let mut files: Vec<&str> = Vec::new();
    let mut ours = false;
    for l in history.lines() {
        if let Some(heading) = l.strip_prefix("## ") {
            ours = heading.split(' ').next() == Some(story);
            if ours {
                steps.push(heading);
            }
        } else if let Some(list) = l.strip_prefix("- files: ").filter(|_| ours) {
            for f in list.split(", ") {
                if !files.contains(&f) {
                    files.push(f);
                }
            }
        }
    }
    let tests = s.tests.map_or("none reported".to_string(), |t| {
        format!("{} pass, {} fail, {} skip", t.pass, t.fail, t.skip)
    });
    let files = if files.is_empty() {
        "none reported".to_string()
    } else {
        files.join(", ")
    };
    let details = format!(
        "Steps:\n\n{}\n\nTests: {tests}\n\nFiles changed: {files}\n\nStory commit: {}\n",
        if steps.is_empty() {
            "- (no history)".to_string()
        } else {
            steps
                .iter()
                .map(|s| format!("- {s}"))
                .collect::<Vec<_>>()
                .join("\n")
        },
        s.commit_hash.as_deref().unwrap_or("none"),
    );
    crate::system::templates::render(
        crate::system::templates::DELIVERABLE,
        &[
            ("title", &bead.title),
            ("bead", bead.id.as_str()),
            (
                "summary",
                // The title alone on the first line: it is the landing commit's message.
                &format!(
                    "{}\n\nThe story walked the Agentic Coding Protocol's steps to done ({} step runs).",
                    bead.title,
                    steps.len()
                ),
            ),
            ("details", &details),
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_deliverable_tells_the_story() {
        let bead = Bead::new(
            BeadId::new("app-1").unwrap(),
            "Checkout",
            crate::model::BeadStatus::InProgress,
        );
        let mut s = StoryState::new("app", &bead.id, Step::Done);
        s.commit_hash = Some("abc".into());
        let text = deliverable_text(
            &bead,
            &s,
            "\n## app-1 bdd attempt 1 — pass (t)\n\n- files: a.rs, b.rs\n\n## app-2 bdd attempt 1 — pass (t)\n\n- files: c.rs\n\n## app-1 impl attempt 1 — pass (t)\n\n- files: b.rs, d.rs\n",
        );
        assert!(
            text.contains("## Summary") && text.contains("- app-1 bdd attempt 1 — pass (t)"),
            "{text}"
        );
        assert!(
            !text.contains("app-2"),
            "another story's history is not this one's"
        );
        assert!(text.contains("Story commit: abc"));
        assert!(text.contains("Files changed: a.rs, b.rs, d.rs"), "{text}");
        assert!(
            text.contains("## Summary\n\nCheckout\n\nThe story walked"),
            "the title first: {text}"
        );
    }
}
