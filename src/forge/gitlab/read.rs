//! What GitLab's answers are read as: the few fields braids reads of each, and how a merge
//! request, its pipeline's jobs, approvals and discussions become a [`PullRequest`].

use super::*;

/// The system note GitLab writes when a reviewer submits a review requesting changes.
pub(super) const REQUESTED_CHANGES: &str = "requested changes";
/// The system note GitLab writes when a user approves.
pub(super) const APPROVED: &str = "approved this merge request";

pub(super) fn job_state(job: &JobJson) -> CheckState {
    match job.status.as_str() {
        "success" | "skipped" => CheckState::Passed,
        "failed" | "canceled" if job.allow_failure => CheckState::Passed,
        "failed" | "canceled" => CheckState::Failed,
        // A manual job blocks the pipeline only when it may not be skipped.
        "manual" if job.allow_failure => CheckState::Passed,
        _ => CheckState::Pending,
    }
}

pub(super) fn pipeline_state(status: &str) -> CheckState {
    match status {
        "success" | "skipped" => CheckState::Passed,
        "failed" | "canceled" => CheckState::Failed,
        _ => CheckState::Pending,
    }
}

pub(super) fn parse<T: for<'de> Deserialize<'de>>(v: &Value, what: &str) -> Result<T, ForgeError> {
    T::deserialize(v)
        .map_err(|e| ForgeError::Refused(format!("GitLab sent {what} braids cannot read: {e}")))
}

#[derive(Deserialize)]
pub(super) struct User {
    pub(super) username: String,
}

#[derive(Deserialize)]
pub(super) struct MrJson {
    pub(super) iid: u64,
    pub(super) state: String,
    pub(super) sha: Option<String>,
    pub(super) merge_status: Option<String>,
    pub(super) detailed_merge_status: Option<String>,
    #[serde(default)]
    pub(super) has_conflicts: bool,
    pub(super) diverged_commits_count: Option<u64>,
    pub(super) merge_user: Option<User>,
    pub(super) merged_by: Option<User>,
    pub(super) closed_by: Option<User>,
    pub(super) head_pipeline: Option<PipelineJson>,
}

#[derive(Deserialize)]
pub(super) struct PipelineJson {
    pub(super) id: u64,
    pub(super) sha: Option<String>,
    pub(super) status: String,
    pub(super) web_url: Option<String>,
}

#[derive(Deserialize)]
pub(super) struct JobJson {
    pub(super) id: u64,
    pub(super) name: String,
    pub(super) status: String,
    #[serde(default)]
    pub(super) allow_failure: bool,
    pub(super) failure_reason: Option<String>,
}

#[derive(Deserialize)]
pub(super) struct ApprovalsJson {
    #[serde(default)]
    pub(super) approved_by: Vec<ApprovedBy>,
}

#[derive(Deserialize)]
pub(super) struct ApprovedBy {
    pub(super) user: User,
}

#[derive(Deserialize)]
pub(super) struct DiscussionJson {
    #[serde(default)]
    pub(super) individual_note: bool,
    pub(super) notes: Vec<NoteJson>,
}

#[derive(Deserialize)]
pub(super) struct NoteJson {
    pub(super) id: u64,
    pub(super) body: String,
    pub(super) author: User,
    #[serde(default)]
    pub(super) system: bool,
    #[serde(default)]
    pub(super) resolvable: bool,
    #[serde(default)]
    pub(super) resolved: bool,
    pub(super) position: Option<PositionJson>,
}

#[derive(Deserialize)]
pub(super) struct PositionJson {
    pub(super) new_path: Option<String>,
    pub(super) old_path: Option<String>,
    pub(super) new_line: Option<u32>,
    pub(super) old_line: Option<u32>,
}

#[derive(Deserialize)]
pub(super) struct ReviewerJson {
    pub(super) user: User,
    pub(super) state: String,
}

/// The reviews GitLab's approvals, discussions and reviewers make (see the module's notes),
/// oldest first.
pub(super) fn reviews_of(
    approvals: &ApprovalsJson,
    discussions: &[DiscussionJson],
    reviewers: &[ReviewerJson],
) -> Vec<Review> {
    let mut out = Vec::new();
    let system = || {
        discussions
            .iter()
            .flat_map(|d| &d.notes)
            .filter(|n| n.system)
    };
    let latest = |body: &str, who: &str| {
        system()
            .filter(|n| n.body == body && n.author.username == who)
            .map(|n| n.id)
            .max()
    };
    for a in &approvals.approved_by {
        let who = &a.user.username;
        out.push(Review {
            id: latest(APPROVED, who).unwrap_or(0),
            author: who.clone(),
            state: ReviewState::Approved,
            body: String::new(),
            inline: false,
        });
    }
    let mut askers: Vec<&str> = system()
        .filter(|n| n.body == REQUESTED_CHANGES)
        .map(|n| n.author.username.as_str())
        .collect();
    askers.sort_unstable();
    askers.dedup();
    for who in askers {
        let stands = reviewers
            .iter()
            .any(|r| r.user.username == who && r.state == "requested_changes");
        out.push(Review {
            id: latest(REQUESTED_CHANGES, who).unwrap_or(0),
            author: who.to_string(),
            state: match stands {
                true => ReviewState::ChangesRequested,
                false => ReviewState::Dismissed,
            },
            body: REQUESTED_CHANGES.to_string(),
            inline: false,
        });
    }
    for d in discussions {
        let notes: Vec<&NoteJson> = d.notes.iter().filter(|n| !n.system).collect();
        let Some(first) = notes.first() else {
            continue;
        };
        if !d.individual_note && !notes.iter().any(|n| n.resolvable && !n.resolved) {
            continue;
        }
        let place = first.position.as_ref().map(|p| {
            let path = p.new_path.as_deref().or(p.old_path.as_deref());
            match (path, p.new_line.or(p.old_line)) {
                (Some(path), Some(line)) => format!("{path}:{line}: "),
                (Some(path), None) => format!("{path}: "),
                _ => String::new(),
            }
        });
        let body: Vec<String> = notes
            .iter()
            .map(|n| format!("{}{}", place.as_deref().unwrap_or_default(), n.body))
            .collect();
        out.push(Review {
            id: notes.iter().map(|n| n.id).max().unwrap_or(first.id),
            author: first.author.username.clone(),
            state: ReviewState::Commented,
            body: body.join("\n"),
            inline: place.is_some(),
        });
    }
    out.sort_by_key(|r| r.id);
    out
}

/// Whether the head merges, from GitLab's background check: `merge_status` (git only), with
/// `detailed_merge_status` where it is the only one sent.
pub(super) fn mergeable(mr: &MrJson) -> Mergeable {
    let detailed = mr.detailed_merge_status.as_deref();
    if detailed == Some("broken_status") {
        // The source branch is gone: nothing to merge, and nothing the agent can resolve.
        return Mergeable::Unknown;
    }
    if mr.has_conflicts || detailed == Some("conflict") {
        return Mergeable::Conflict;
    }
    match (mr.merge_status.as_deref(), detailed) {
        (Some("can_be_merged"), _) => Mergeable::Clean,
        (Some("cannot_be_merged"), _) => Mergeable::Conflict,
        // `unchecked`, `checking`, `cannot_be_merged_recheck`.
        (Some(_), _) => Mergeable::Unknown,
        (None, Some("unchecked" | "checking" | "preparing" | "approvals_syncing") | None) => {
            Mergeable::Unknown
        }
        (None, Some(_)) => Mergeable::Clean,
    }
}

/// The forge-neutral pull request GitLab's answers make.
pub(super) fn pull_request(mr: &MrJson, checks: Vec<Check>, reviews: Vec<Review>) -> PullRequest {
    let who = |u: &Option<User>| u.as_ref().map(|u| u.username.clone());
    let state = match mr.state.as_str() {
        "merged" => PrState::Merged {
            by: who(&mr.merge_user).or_else(|| who(&mr.merged_by)),
        },
        "closed" => PrState::Closed {
            by: who(&mr.closed_by),
        },
        _ => PrState::Open,
    };
    let open = state == PrState::Open;
    PullRequest {
        number: mr.iid,
        state,
        head: mr.sha.clone().unwrap_or_default(),
        behind: open
            && (mr.diverged_commits_count.is_some_and(|n| n > 0)
                || mr.detailed_merge_status.as_deref() == Some("need_rebase")),
        mergeable: match open {
            true => mergeable(mr),
            false => Mergeable::Unknown,
        },
        checks,
        reviews,
    }
}

/// The last `lines` lines of a job's log, without ANSI escapes, GitLab's collapsible-section
/// markers and what a carriage return overwrote.
pub(super) fn tail(log: &str, lines: usize) -> String {
    let mut clean: Vec<String> = Vec::new();
    for line in log.lines() {
        // `section_start:<time>:<name>\r\e[0K<header>`: the header is the line.
        let (line, marked) = match line
            .strip_prefix("section_start:")
            .or_else(|| line.strip_prefix("section_end:"))
        {
            Some(rest) => (rest.split_once('\r').map_or("", |(_, after)| after), true),
            None => (line, false),
        };
        let mut out = String::new();
        let mut chars = line.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\u{1b}' => {
                    if chars.peek() == Some(&'[') {
                        chars.next();
                        for d in chars.by_ref() {
                            if d.is_ascii_alphabetic() {
                                break;
                            }
                        }
                    }
                }
                '\r' => {
                    // A progress line redrawn: what follows wins.
                    if chars.peek().is_some() {
                        out.clear();
                    }
                }
                c => out.push(c),
            }
        }
        if !(marked && out.trim().is_empty()) {
            clean.push(out.trim_end().to_string());
        }
    }
    while clean.last().is_some_and(|l| l.is_empty()) {
        clean.pop();
    }
    let from = clean.len().saturating_sub(lines);
    clean[from..].join("\n")
}

/// GitLab's words for a refusal: `message` as a string, a list of strings or an object of
/// field → errors, or Grape's and OAuth's `error`.
pub(super) fn said(v: &Value) -> String {
    fn words(m: &Value) -> String {
        match m {
            Value::String(s) => s.clone(),
            Value::Array(a) => a.iter().map(words).collect::<Vec<_>>().join("; "),
            Value::Object(o) => o
                .iter()
                .map(|(k, v)| format!("{k} {}", words(v)))
                .collect::<Vec<_>>()
                .join("; "),
            Value::Null => String::new(),
            other => other.to_string(),
        }
    }
    let m = words(&v["message"]);
    if !m.is_empty() {
        return m;
    }
    v["error_description"]
        .as_str()
        .or(v["error"].as_str())
        .unwrap_or("refused")
        .to_string()
}
