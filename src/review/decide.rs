//! The one step to take for a bead in review, from what its forge says of the pull request now
//! and what braids already did about it. Pure: the tick calls it once per open pull request
//! with what it observed, and the simulation calls the same function.
//!
//! The order is the order of who must act: a merge or a close by a person ends the review;
//! something the agent has not yet been shown (a conflict, a failing check, a review asking
//! for changes) starts an attempt; what is under way or up to somebody else waits; and only a
//! request with nothing left against it is rebased or merged.

use super::pull_request::{
    Check, CheckState, Mergeable, PrState, PullRequest, Review, ReviewState,
};
use super::settings::MergePolicy;

/// What braids already did about a pull request, kept with it between runs.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Handled {
    /// The head whose failing checks an attempt was started for.
    pub checks_at: Option<String>,
    /// The newest review an attempt was started for.
    pub review: Option<u64>,
    /// The head whose conflict with the base an attempt was started for.
    pub conflict_at: Option<String>,
    /// Attempts started for the forge's sake so far.
    pub attempts: u32,
    /// The head the forge refused to merge (a rule of the branch, say): not asked again
    /// until the head changes.
    pub merge_refused_at: Option<String>,
    /// The head braids could not rebase (a conflict in the replay, a refused push): left to
    /// a person until the head changes.
    pub rebase_failed_at: Option<String>,
}

/// Why the agent works on its pull request again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rework {
    /// These checks of the head failed.
    Checks(Vec<Check>),
    /// The reviews newer than any answered that ask for changes or comment, with their text.
    Changes(Vec<Review>),
    /// The head no longer merges into the base.
    Conflict,
}

/// What to do now.
#[must_use]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Merged: the bead is done (its iteration counts it).
    Done { merged_by: Option<String> },
    /// Closed unmerged: the bead is blocked, naming the request and who closed it.
    Blocked { why: String },
    /// A new attempt of the bead at the request's head, told why.
    Rework(Rework),
    /// The attempts the bead may have are spent: blocked with the last failure.
    GiveUp { why: String },
    /// braids rebases the head onto the base (it replays cleanly) and pushes with a lease.
    Rebase,
    /// braids merges through the API, naming the head it saw pass.
    Merge { head: String },
    /// Nothing to do until the forge says something new.
    Wait { why: String },
    /// Its branch is pushed and the forge has not opened the request: a worker opens it.
    Open,
}

/// The step for `pr`, given what was `handled`, who merges, the approvals needed and how many
/// attempts the bead may have for the forge's sake.
pub fn decide(
    pr: &PullRequest,
    handled: &Handled,
    merge: MergePolicy,
    approvals: u32,
    attempts: u32,
) -> Step {
    let n = pr.number;
    match &pr.state {
        PrState::Merged { by } => {
            return Step::Done {
                merged_by: by.clone(),
            }
        }
        PrState::Closed { by } => {
            return Step::Blocked {
                why: format!(
                    "pull request #{n} was closed without a merge{}",
                    by.as_deref()
                        .map(|b| format!(" by {}", super::prompt::one_line(b)))
                        .unwrap_or_default()
                ),
            }
        }
        PrState::Open => {}
    }
    let head = Some(&pr.head);
    let failed: Vec<Check> = pr
        .checks
        .iter()
        .filter(|c| c.state == CheckState::Failed)
        .cloned()
        .collect();
    let new_reviews: Vec<Review> = pr
        .reviews
        .iter()
        .filter(|r| handled.review.is_none_or(|h| r.id > h))
        .filter(|r| {
            matches!(
                r.state,
                ReviewState::ChangesRequested | ReviewState::Commented
            )
        })
        .cloned()
        .collect();
    // A new request for changes, or new comments on lines: what a reviewer wants done.
    let asked: Vec<&str> = new_reviews
        .iter()
        .filter(|r| r.state == ReviewState::ChangesRequested || r.inline)
        .map(|r| r.author.as_str())
        .collect();
    let verdicts = verdicts(&pr.reviews);
    let asks_changes: Vec<&str> = verdicts
        .iter()
        .filter(|(_, s)| *s == ReviewState::ChangesRequested)
        .map(|(a, _)| a.as_str())
        .collect();
    // Something the agent has not been shown: an attempt, while the bead may have one.
    let rework = if pr.mergeable == Mergeable::Conflict && handled.conflict_at.as_ref() != head {
        Some((
            Rework::Conflict,
            format!("pull request #{n} conflicts with its base"),
        ))
    } else if !failed.is_empty() && handled.checks_at.as_ref() != head {
        let names: Vec<&str> = failed.iter().map(|c| c.name.as_str()).collect();
        let why = format!("pull request #{n}: checks failed: {}", names.join(", "));
        Some((Rework::Checks(failed.clone()), why))
    } else if !asked.is_empty() || (!new_reviews.is_empty() && !asks_changes.is_empty()) {
        let mut who: Vec<&str> = asked.iter().chain(&asks_changes).copied().collect();
        who.sort_unstable();
        who.dedup();
        let why = format!("pull request #{n}: changes asked by {}", who.join(", "));
        Some((Rework::Changes(new_reviews.clone()), why))
    } else {
        None
    };
    if let Some((rework, why)) = rework {
        return match handled.attempts < attempts {
            true => Step::Rework(rework),
            false => Step::GiveUp {
                why: format!("{why}, after {} attempts", handled.attempts),
            },
        };
    }
    let wait = |why: String| Step::Wait { why };
    if pr.mergeable == Mergeable::Conflict {
        return wait(format!("the agent resolves #{n}'s conflict"));
    }
    if !failed.is_empty() {
        return wait(format!("the agent fixes #{n}'s failing checks"));
    }
    if !asks_changes.is_empty() {
        return wait(format!(
            "#{n}: {} asked for changes and has not approved since",
            asks_changes.join(", ")
        ));
    }
    if pr.checks.iter().any(|c| c.state == CheckState::Pending) {
        return wait(format!("#{n}'s checks are running"));
    }
    if pr.mergeable == Mergeable::Unknown {
        return wait(format!("the forge has not said whether #{n} merges"));
    }
    if pr.behind {
        if handled.rebase_failed_at.as_ref() != head {
            return Step::Rebase;
        }
        if merge == MergePolicy::Person {
            return wait(format!(
                "#{n} is behind its base and braids could not rebase it"
            ));
        }
    }
    if merge == MergePolicy::Person {
        return wait(format!("#{n} waits for a person to merge it"));
    }
    let approved = verdicts
        .iter()
        .filter(|(_, s)| *s == ReviewState::Approved)
        .count() as u32;
    if approved < approvals {
        return wait(format!("#{n} has {approved} of {approvals} approvals"));
    }
    if handled.merge_refused_at.as_ref() == head {
        return wait(format!(
            "the forge refused to merge #{n} at this head; a person merges it, or a new head is tried again"
        ));
    }
    Step::Merge {
        head: pr.head.clone(),
    }
}

/// Each reviewer's standing verdict: their latest approval or request for changes, unless
/// dismissed since; comments change none.
fn verdicts(reviews: &[Review]) -> Vec<(String, ReviewState)> {
    let mut out: Vec<(String, ReviewState)> = Vec::new();
    for r in reviews {
        if r.state == ReviewState::Commented {
            continue;
        }
        out.retain(|(a, _)| a != &r.author);
        if r.state != ReviewState::Dismissed {
            out.push((r.author.clone(), r.state));
        }
    }
    out
}

#[cfg(test)]
mod tests;
