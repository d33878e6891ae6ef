//! `braids answer <bead> "text"`: a person answers the question a bead's agent asked (or
//! approves an ask-first plan). The answer is recorded where every later prompt of the bead
//! reads it, added to the tracker as the reopening's comment, and the bead is open again, so
//! the next run spawns it.

use anyhow::{bail, Result};
use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::answers::Answer;
use crate::config::installation::Installation;
use crate::events::{Draft, Kind};
use crate::model::BeadStatus;

use super::{beads, held};
use crate::events::waiting::{self, WaitKind};

/// What an answer did.
#[derive(Debug, Serialize)]
pub struct Answered {
    pub project: String,
    pub bead: String,
    pub question: String,
    pub answer: String,
    /// `question` or `approval`.
    pub kind: WaitKind,
}

pub fn answer(
    inst: &Installation,
    target: &str,
    text: &str,
    now: DateTime<Utc>,
) -> Result<Answered> {
    let text = text.trim();
    if text.is_empty() {
        bail!("the answer is empty; write what the agent should know, in quotes");
    }
    if let Some(answered) = story_answer(inst, target, text, now)? {
        return Ok(answered);
    }
    respond(inst, target, text, None, None, now)
}

/// As [`answer`], for `author`'s reply on the bead's forge issue (which braids thanks there
/// rather than repeating it).
pub fn answer_from_forge(
    inst: &Installation,
    target: &str,
    text: &str,
    author: &str,
    now: DateTime<Utc>,
) -> Result<Answered> {
    respond(inst, target, text.trim(), None, Some(author), now)
}

/// A protocol story that asked at a step keeps its claim while it waits (CONTRACTS 10.5), so
/// its bead is not blocked as a bead's question is: the answer goes to the story's next
/// prompt. `None` when `target` is no such story.
fn story_answer(
    inst: &Installation,
    target: &str,
    text: &str,
    now: DateTime<Utc>,
) -> Result<Option<Answered>> {
    let found = beads::locate(inst, target, false)?;
    let (p, bead) = (&found.project, &found.bead);
    if crate::protocol::Pipeline::of(&p.config) != crate::protocol::Pipeline::Protocol {
        return Ok(None);
    }
    let Some(question) = super::story::asked(&found)? else {
        return Ok(None);
    };
    let slug = p.entry.slug.clone();
    p.refuse_if_paused(&bead.id)?;
    super::story::answer(inst, &slug, bead.id.as_str(), text)?;
    crate::answers::record(
        &inst.paths,
        &slug,
        &bead.id,
        Answer {
            question: question.clone(),
            answer: text.to_string(),
            at: now,
        },
    )?;
    crate::events::emit(
        &p.entry.path,
        &slug,
        vec![Draft::new(Kind::Answered)
            .bead(&bead.id)
            .with("question", &question)
            .with("message", text)],
    );
    Ok(Some(Answered {
        project: slug,
        bead: bead.id.to_string(),
        question,
        answer: text.to_string(),
        kind: WaitKind::Question,
    }))
}

/// What an approval did: a plan approved, or held work landed.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum Approved {
    Plan(Answered),
    Held(held::Landed),
}

/// Approves what `target` waits for: a plan waiting for review (ask-first), answered
/// "approved" with the reviewer's note for the agent when given; or, for a bead whose work is
/// held for a person, that work, landed ([`held::approve`]).
pub fn approve(
    inst: &Installation,
    target: &str,
    note: Option<&str>,
    now: DateTime<Utc>,
) -> Result<Approved> {
    approve_as(inst, target, note, None, now)
}

/// As [`approve`], by `via`'s `/approve` on the bead's forge issue when given.
pub fn approve_as(
    inst: &Installation,
    target: &str,
    note: Option<&str>,
    via: Option<&str>,
    now: DateTime<Utc>,
) -> Result<Approved> {
    {
        let ticks = beads::hold_ticks(&inst.paths)?;
        let found = beads::locate(inst, target, true)?;
        if !waits_for_review(&found) {
            // Not a plan: held work, or held::approve says why there is none to approve.
            let landed = held::approve(inst, &found)?;
            drop(ticks);
            crate::tick::orchestrator_state::wake(
                &inst.paths,
                crate::tick::orchestrator_state::WAKE_WAIT,
            );
            return Ok(Approved::Held(landed));
        }
    }
    let text = match note.map(str::trim).filter(|n| !n.is_empty()) {
        Some(n) => format!("Approved. {n}"),
        None => "Approved.".to_string(),
    };
    respond(inst, target, &text, Some(WaitKind::Approval), via, now).map(Approved::Plan)
}

/// Whether the bead is blocked waiting for a review of its plan.
fn waits_for_review(found: &beads::Located) -> bool {
    let (p, bead) = (&found.project, &found.bead);
    let w = waiting::waiting(&p.journal(), &[bead.id.as_str()].into_iter().collect());
    bead.status == BeadStatus::Blocked
        && w.get(bead.id.as_str())
            .is_some_and(|w| w.kind == WaitKind::Approval)
}

/// Rejects a plan that waits for review, or work held for a person (its branch deleted): the
/// bead stays blocked, now with the reason, for a person to rework (`braids retry` when it
/// may go on).
pub fn reject(inst: &Installation, target: &str, reason: &str) -> Result<String> {
    let reason = reason.trim();
    if reason.is_empty() {
        bail!("a rejection needs a reason, for the person who reworks the bead");
    }
    let _ticks = beads::hold_ticks(&inst.paths)?;
    let found = beads::locate(inst, target, true)?;
    let (p, bead) = (&found.project, &found.bead);
    if !waits_for_review(&found) {
        return held::reject(inst, &found, reason);
    }
    let why = format!("plan rejected: {reason}");
    // Unblocking is the approval: without the mark, the next run asks for a new one.
    let marker = inst.paths.approval_marker(&p.entry.slug, &bead.id);
    match std::fs::remove_file(&marker) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => bail!(
            "cannot remove {}: {e}; the plan would count as approved on a retry",
            marker.display()
        ),
    }
    crate::events::emit(
        &p.entry.path,
        &p.entry.slug,
        vec![Draft::new(Kind::BeadBlocked)
            .bead(&bead.id)
            .with("reason", &why)],
    );
    Ok(why)
}

/// Answers `target`'s question (or, with `only`, only a wait of that kind).
fn respond(
    inst: &Installation,
    target: &str,
    text: &str,
    only: Option<WaitKind>,
    via: Option<&str>,
    now: DateTime<Utc>,
) -> Result<Answered> {
    let held = beads::hold_ticks(&inst.paths)?;
    let found = beads::locate(inst, target, true)?;
    let (p, bead) = (&found.project, &found.bead);
    let slug = p.entry.slug.as_str();
    let waits = waiting::waiting(&p.journal(), &[bead.id.as_str()].into_iter().collect());
    let wait = waits.get(bead.id.as_str());
    let asked = match (bead.status, wait) {
        (BeadStatus::Blocked, Some(w)) if only.is_some_and(|k| k != w.kind) => bail!(
            "{} waits for no review: it waits for {}; `braids beads {slug}` shows what each bead waits for",
            bead.id,
            w.kind.as_str()
        ),
        (BeadStatus::Blocked, Some(w)) if w.kind.answerable() => w.clone(),
        (BeadStatus::Blocked, Some(w)) => bail!(
            "{} asked nothing: it is blocked because {}; `braids retry {}` makes it eligible again",
            bead.id,
            w.text,
            bead.id
        ),
        _ => bail!(
            "{} asked nothing: it is {}, not waiting for an answer; `braids beads {slug}` shows what each bead waits for",
            bead.id,
            bead.status
        ),
    };
    p.refuse_if_paused(&bead.id)?;
    crate::answers::record(
        &inst.paths,
        slug,
        &bead.id,
        Answer {
            question: asked.text.clone(),
            answer: text.to_string(),
            at: now,
        },
    )?;
    p.tracker
        .reopen(&bead.id, &format!("braids: answered by a person: {text}"))
        .map_err(|e| {
            anyhow::anyhow!(
                "{slug}: the answer is recorded, but {} could not be reopened: {e}",
                bead.id
            )
        })?;
    // Where the bead is a forge's issue, the people there see it answered.
    let said = match via {
        Some(author) => {
            format!("Thanks @{author}: the next attempt of this issue starts from your reply.")
        }
        None => format!(
            "A person answered through braids; the next attempt starts from it:\n\n{}",
            text.lines()
                .map(|l| format!("> {l}"))
                .collect::<Vec<_>>()
                .join("\n")
        ),
    };
    if let Err(e) = p.tracker.tell(&bead.id, &said) {
        tracing::warn!(bead = %bead.id, "cannot say the answer on the tracker: {e}");
    }
    crate::events::emit(
        &p.entry.path,
        slug,
        vec![Draft::new(Kind::Answered)
            .bead(&bead.id)
            .with("question", &asked.text)
            .with("message", text)],
    );
    drop(held);
    crate::tick::orchestrator_state::wake(&inst.paths, crate::tick::orchestrator_state::WAKE_WAIT);
    Ok(Answered {
        project: slug.to_string(),
        bead: bead.id.to_string(),
        question: asked.text,
        answer: text.to_string(),
        kind: asked.kind,
    })
}
