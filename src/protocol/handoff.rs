//! What an executor reported, and applying it to the story (seed 002, "Hook Mechanism";
//! seed 000, `parseHandoff` / `applyHandoff`): `.ai/executor-result` first, then the YAML
//! front matter of `.ai/HANDOFF.md`, then the old format's keywords.
//!
//! Values are never trusted beyond their lists: agents write `passing` for `pass` and prose in
//! `reason`. An invalid status reads as `failing` and an invalid reason as none, each with a
//! warning naming what was written, so the pipeline never stops on a typo and never advances
//! on one. Parsing takes any bytes and never panics (a property test holds it to that).

use std::path::Path;

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;

use super::rules::Rule;
use super::step::{Reason, Status};
use super::story_state::{StoryState, Tests};

pub const EXECUTOR_RESULT: &str = ".ai/executor-result";
pub const HANDOFF: &str = ".ai/HANDOFF.md";
pub const HISTORY: &str = ".ai/history.md";

/// One report, from whichever file it came.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct Handoff {
    pub status: Option<Status>,
    pub reason: Option<Reason>,
    pub summary: Option<String>,
    pub story: Option<String>,
    pub step: Option<String>,
    pub files_changed: Vec<String>,
    pub tests: Option<Tests>,
    pub failing_tests: Vec<String>,
    pub commit_hash: Option<String>,
    /// The markdown after the front matter (the whole text for the keyword fallback).
    pub body: String,
    pub source: &'static str,
    /// Values that were not valid, as written.
    pub warnings: Vec<String>,
    /// `reason: guardrail_conflict`: the work would break a Guardrail. Not one of the
    /// protocol's reasons: braids stops the story as it stops a bead (CONTRACTS 10.13).
    pub guardrail_conflict: bool,
}

/// The reason an agent gives when the work would break a Guardrail (CONTRACTS 3.10).
pub const GUARDRAIL_CONFLICT: &str = "guardrail_conflict";

/// The protocol's status values an executor may report (`timeout` is read as `failing`).
fn status_of(v: &str, warnings: &mut Vec<String>) -> Status {
    match v {
        "pass" => Status::Pass,
        "failing" | "timeout" => Status::Failing,
        "needs_human" => Status::NeedsHuman,
        other => {
            warnings.push(format!(
                "invalid status `{}`, read as failing (valid: pass, failing, needs_human)",
                clip(other)
            ));
            Status::Failing
        }
    }
}

fn reason_of(v: &str, warnings: &mut Vec<String>) -> Option<Reason> {
    if v.is_empty() || v == "null" || v == "~" {
        return None;
    }
    let r = Reason::parse(v);
    if r.is_none() {
        warnings.push(format!(
            "invalid reason `{}`, read as none (valid: {})",
            clip(v),
            Reason::spellings()
        ));
    }
    r
}

fn clip(v: &str) -> String {
    crate::system::templates::clip(v, 80)
}

fn clean(v: &str) -> String {
    v.trim()
        .trim_matches(|c| c == '"' || c == '\'' || c == '`')
        .trim()
        .to_string()
}

/// `.ai/executor-result`: flat `key: value` lines; `None` without a `status` line.
pub fn parse_executor_result(text: &str) -> Option<Handoff> {
    let mut h = Handoff {
        source: EXECUTOR_RESULT,
        ..Handoff::default()
    };
    let mut status = None;
    for line in text.lines().filter(|l| !l.trim_start().starts_with('#')) {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let v = clean(v);
        match k.trim().to_ascii_lowercase().as_str() {
            "status" => status = Some(v),
            "reason" if v == GUARDRAIL_CONFLICT => h.guardrail_conflict = true,
            "reason" => h.reason = reason_of(&v, &mut h.warnings),
            "summary" => h.summary = Some(v).filter(|s| !s.is_empty()),
            "commit_hash" => h.commit_hash = Some(v).filter(|s| !s.is_empty() && s != "null"),
            _ => {}
        }
    }
    h.status = Some(status_of(&status?, &mut h.warnings));
    Some(h)
}

/// A scalar as text: strings, numbers and booleans; `None` for null and structures.
fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.trim().to_string()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// A list of strings, tolerant of a single string where a list belongs.
fn strings(v: Option<&Value>) -> Vec<String> {
    match v {
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(scalar)
            .filter(|s| !s.is_empty())
            .collect(),
        Some(v) => scalar(v).filter(|s| !s.is_empty()).into_iter().collect(),
        None => Vec::new(),
    }
}

fn count(v: Option<&Value>) -> Option<u32> {
    match v? {
        Value::Number(n) => n.as_u64().map(|n| n.min(u64::from(u32::MAX)) as u32),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// HANDOFF.md: its YAML front matter, or else the keyword fallback. `None` when it has
/// neither.
pub fn parse_handoff(text: &str) -> Option<Handoff> {
    let text = text.trim_start_matches('\u{feff}');
    if let Some((front, body)) = split_front_matter(text) {
        return Some(from_front_matter(front, body));
    }
    keywords(text)
}

/// The text between a first line `---` and the next `---` line, and what follows.
fn split_front_matter(text: &str) -> Option<(&str, &str)> {
    let rest = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))?;
    let mut at = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end() == "---" {
            return Some((&rest[..at], &rest[at + line.len()..]));
        }
        at += line.len();
    }
    None
}

fn from_front_matter(front: &str, body: &str) -> Handoff {
    let mut h = Handoff {
        source: HANDOFF,
        body: body.trim_start_matches(['\r', '\n']).to_string(),
        ..Handoff::default()
    };
    let map = match serde_saphyr::from_str::<Value>(front) {
        Ok(Value::Object(m)) => m,
        Ok(Value::Null) => Default::default(),
        Ok(_) | Err(_) => {
            h.warnings
                .push("the front matter of .ai/HANDOFF.md is not a YAML mapping".into());
            h.status = Some(Status::Failing);
            return h;
        }
    };
    let get = |k: &str| map.get(k);
    h.status = match get("status").and_then(scalar) {
        Some(s) => Some(status_of(&s, &mut h.warnings)),
        None => None,
    };
    let reason = get("reason").and_then(scalar);
    h.guardrail_conflict = reason.as_deref() == Some(GUARDRAIL_CONFLICT);
    h.reason = reason
        .filter(|_| !h.guardrail_conflict)
        .and_then(|r| reason_of(&r, &mut h.warnings));
    h.summary = get("summary").and_then(scalar).filter(|s| !s.is_empty());
    h.story = get("story")
        .and_then(scalar)
        .filter(|s| !s.is_empty() && s != "null");
    h.step = get("step").and_then(scalar);
    h.files_changed = strings(get("files_changed"));
    h.failing_tests = strings(get("failing_tests"));
    h.commit_hash = get("commit_hash")
        .and_then(scalar)
        .filter(|s| !s.is_empty() && s != "null");
    let (pass, fail, skip) = (
        count(get("tests_pass")),
        count(get("tests_fail")),
        count(get("tests_skip")),
    );
    if pass.is_some() || fail.is_some() || skip.is_some() {
        h.tests = Some(Tests {
            pass: pass.unwrap_or(0),
            fail: fail.unwrap_or(0),
            skip: skip.unwrap_or(0),
        });
    }
    h
}

/// The old format: a reason from the first keyword in the text; the step failed.
fn keywords(text: &str) -> Option<Handoff> {
    let found = [
        ("NEEDS CLARIFICATION", Reason::NeedsClarification),
        ("CONSTITUTION VIOLATION", Reason::ConstitutionViolation),
        ("SCOPE WARNING", Reason::ScopeWarning),
    ]
    .into_iter()
    .filter_map(|(k, r)| text.find(k).map(|at| (at, r)))
    .min_by_key(|(at, _)| *at)?;
    Some(Handoff {
        status: Some(Status::Failing),
        reason: Some(found.1),
        body: text.to_string(),
        source: "HANDOFF.md keywords",
        ..Handoff::default()
    })
}

/// Reads a report from a file (a team role's own handoff, say); `None` when there is none.
pub fn read_file(path: &Path) -> Option<Handoff> {
    let bytes = crate::system::atomic::read(path).ok()?;
    parse_handoff(&String::from_utf8_lossy(&bytes))
}

/// The report of a run in `dir`: `.ai/executor-result` first, then `handoff_rel`. Its
/// `files_changed`, tests and commit come from the HANDOFF when the result file lacks them.
/// Both are read beneath `dir`, never through a link the agent planted.
pub fn read(dir: &Path, handoff_rel: &str) -> Option<Handoff> {
    let result = crate::system::beneath::read(dir, Path::new(EXECUTOR_RESULT))
        .ok()
        .and_then(|b| parse_executor_result(&String::from_utf8_lossy(&b)));
    let handoff = crate::system::beneath::read(dir, Path::new(handoff_rel))
        .ok()
        .and_then(|b| parse_handoff(&String::from_utf8_lossy(&b)));
    match (result, handoff) {
        (Some(mut r), Some(h)) => {
            r.files_changed = h.files_changed;
            r.tests = h.tests;
            r.failing_tests = h.failing_tests;
            r.commit_hash = r.commit_hash.or(h.commit_hash);
            r.body = h.body;
            r.story = h.story;
            r.step = h.step;
            Some(r)
        }
        (r, h) => r.or(h),
    }
}

/// `applyHandoff`: the running state of a step, with what its executor reported. Pure.
#[must_use]
pub fn apply(
    state: &StoryState,
    found: Option<&Handoff>,
    rule: &Rule,
    now: DateTime<Utc>,
) -> StoryState {
    let mut s = state.clone();
    s.completed_at = Some(now);
    let Some(h) = found else {
        s.status = Status::Failing;
        s.reason = None;
        s.last_error =
            Some("the executor wrote no handoff (.ai/HANDOFF.md or .ai/executor-result)".into());
        return s;
    };
    let mut error = None;
    let mut status = match h.status {
        Some(st) => st,
        None => {
            error = Some(format!("the report ({}) gave no status", h.source));
            Status::Failing
        }
    };
    if status == Status::Timeout {
        status = Status::Failing;
    }
    if h.guardrail_conflict {
        // The worker blocks the story's bead at once; the step failed, the reason recorded.
        status = Status::Failing;
        error = Some(format!(
            "guardrail conflict: {}",
            h.summary
                .as_deref()
                .unwrap_or("the executor named no guardrail")
        ));
    }
    // Scaffold's red tests are its correct output.
    if status == Status::Failing
        && h.reason.is_none()
        && rule.treat_failing_as_pass
        && error.is_none()
    {
        status = Status::Pass;
    }
    // A question goes to a person at the step that asked it, whatever the step: no attempt
    // is spent and no route taken (CONTRACTS 10.14, seed 001's post-hook).
    let asked = !rule.requires_human
        && !h.guardrail_conflict
        && (status == Status::NeedsHuman || h.reason == Some(Reason::NeedsClarification));
    if asked {
        status = Status::NeedsHuman;
    }
    s.status = status;
    s.reason = h.reason;
    if !h.files_changed.is_empty() {
        s.files_changed = h.files_changed.clone();
    }
    if s.tests_measured_by.is_some() {
        // Counts a test command measured stand; a later claim is kept beside them.
        s.claimed_tests = h.tests;
        s.claimed_failing_tests = h.failing_tests.clone();
    } else {
        if h.tests.is_some() {
            s.tests = h.tests;
        }
        s.failing_tests = match status {
            Status::Pass => Vec::new(),
            _ => h.failing_tests.clone(),
        };
    }
    if h.commit_hash.is_some() {
        s.commit_hash = h.commit_hash.clone();
    }
    s.last_error = match status {
        Status::Failing => error
            .or_else(|| (!h.warnings.is_empty()).then(|| h.warnings.join("; ")))
            .or_else(|| h.summary.clone()),
        // The question itself, for the person asked and for the prompt that carries the answer.
        Status::NeedsHuman => Some(question(h)),
        _ => None,
    };
    s
}

/// What an executor asked: its summary, else the first line of its report's body that is
/// not a heading.
fn question(h: &Handoff) -> String {
    h.summary
        .clone()
        .or_else(|| {
            h.body
                .lines()
                .map(str::trim)
                .find(|l| !l.is_empty() && !l.starts_with('#'))
                .map(|l| crate::system::templates::clip(l, 300))
        })
        .unwrap_or_else(|| format!("the executor asked a question (see {})", h.source))
}

/// The `post_check`'s verdict on a step: `lint_pass`, and a failure keeps the step failing.
#[must_use]
pub fn apply_post_check(state: &StoryState, passed: bool, detail: &str) -> StoryState {
    let mut s = state.clone();
    s.lint_pass = Some(passed);
    if !passed {
        let detail = crate::system::templates::clip(detail.trim(), 300);
        let why = if detail.is_empty() {
            "post_check failed".to_string()
        } else {
            format!("post_check failed: {detail}")
        };
        s.last_error = Some(match (s.status, s.last_error.take()) {
            (Status::Failing, Some(e)) => format!("{e}; {why}"),
            _ => why,
        });
        if s.status == Status::Pass {
            s.status = Status::Failing;
        }
    }
    s
}

/// The archived handoff of one run, for `.ai/history.md`.
pub fn archive_entry(state: &StoryState, found: Option<&Handoff>, now: DateTime<Utc>) -> String {
    let story = state.story.as_deref().unwrap_or("");
    let mut e = format!(
        "\n## {story} {} attempt {} — {} ({})\n\n",
        state.step,
        state.attempt,
        state.status,
        now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    );
    if let Some(r) = state.reason {
        e.push_str(&format!("- reason: {r}\n"));
    }
    if !state.files_changed.is_empty() {
        e.push_str(&format!("- files: {}\n", state.files_changed.join(", ")));
    }
    if let Some(t) = state.tests {
        e.push_str(&format!(
            "- tests: {} pass, {} fail, {} skip\n",
            t.pass, t.fail, t.skip
        ));
    }
    if let Some(err) = &state.last_error {
        e.push_str(&format!("- last error: {err}\n"));
    }
    match found {
        Some(h) if !h.body.trim().is_empty() => {
            e.push('\n');
            e.push_str(h.body.trim());
            e.push('\n');
        }
        Some(h) => e.push_str(&format!("\n(report from {}, no body)\n", h.source)),
        None => e.push_str("\n(no handoff)\n"),
    }
    e
}

#[cfg(test)]
mod tests;
