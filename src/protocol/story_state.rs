//! A story's STATE file, `<project>/.ai/states/<bead-id>.json`: the protocol's own answer to
//! running many stories of one project at once (seed 002, "Multi-Story Parallel"). The schema is
//! exactly the seed's, plus `last_error` (v0.10) and `commit_hash` (v0.11), and, only where a
//! test command measured the counts, `tests_measured_by` with the agent's own claim beside
//! them (`claimed_tests`, `claimed_failing_tests`).
//!
//! Reading is tolerant of age and hands: a missing field takes its default, an unknown one is
//! ignored, a number written as `"3"` is read. It is strict about meaning: a `step`, `status`
//! or `reason` outside the protocol's lists is an error naming the file and the field, and the
//! story is held until a person fixes it; braids never guesses which step was meant.
//! Every write is temp + rename under the story's lock, so the worker, the tick and a person's
//! command never lose each other's changes.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::single::{self, Layout};
use super::step::{Reason, Status, Step};
use crate::model::BeadId;

/// Where the story files live, relative to the project root.
pub const STATES_DIR: &str = ".ai/states";

/// Test counts from a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tests {
    pub pass: u32,
    pub fail: u32,
    pub skip: u32,
}

/// One story's state: the seed's schema, field for field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoryState {
    pub project: String,
    pub story: Option<String>,
    pub step: Step,
    pub attempt: u32,
    pub max_attempts: u32,
    pub status: Status,
    pub reason: Option<Reason>,
    pub dispatched_at: Option<DateTime<Utc>>,
    pub completed_at: Option<DateTime<Utc>>,
    pub timeout_min: u32,
    pub tests: Option<Tests>,
    pub failing_tests: Vec<String>,
    pub lint_pass: Option<bool>,
    pub files_changed: Vec<String>,
    pub blocked_by: Vec<String>,
    pub human_note: Option<String>,
    pub last_error: Option<String>,
    pub commit_hash: Option<String>,
    /// The test command whose run gave `tests` and `failing_tests`; `None`: they are what
    /// the agent reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tests_measured_by: Option<String>,
    /// What the agent reported, kept beside the measured counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claimed_tests: Option<Tests>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub claimed_failing_tests: Vec<String>,
}

impl StoryState {
    /// A story about to start at `step` (bdd, or bootstrap for a new project).
    pub fn new(project: &str, story: &BeadId, step: Step) -> StoryState {
        StoryState {
            project: project.to_string(),
            story: Some(story.to_string()),
            step,
            attempt: 1,
            max_attempts: 1,
            status: Status::Pending,
            reason: None,
            dispatched_at: None,
            completed_at: None,
            timeout_min: 5,
            tests: None,
            failing_tests: Vec::new(),
            lint_pass: None,
            files_changed: Vec::new(),
            blocked_by: Vec::new(),
            human_note: None,
            last_error: None,
            commit_hash: None,
            tests_measured_by: None,
            claimed_tests: None,
            claimed_failing_tests: Vec::new(),
        }
    }

    /// Whether the story has reached the end of the chain.
    pub fn is_done(&self) -> bool {
        self.step == Step::Done
    }

    /// Whether it used up its attempts at a failing step: a person has to step in.
    pub fn is_blocked(&self) -> bool {
        self.status == Status::Failing && self.attempt >= self.max_attempts && !self.is_done()
    }

    /// Whether a person has to act before it can go on: a review, a question, or a block.
    pub fn waits_for_human(&self) -> bool {
        self.status == Status::NeedsHuman || self.is_blocked()
    }

    /// Minutes since the step was dispatched (0 when it never was).
    pub fn elapsed_min(&self, now: DateTime<Utc>) -> i64 {
        self.dispatched_at
            .map(|d| (now - d).num_minutes().max(0))
            .unwrap_or(0)
    }

    /// Whether a running step is past its timeout.
    pub fn timed_out(&self, now: DateTime<Utc>) -> bool {
        self.status == Status::Running
            && self
                .dispatched_at
                .is_some_and(|d| (now - d).num_seconds() > i64::from(self.timeout_min) * 60)
    }
}

/// The story file of `bead` in `project`: its own, or the seed's one `.ai/STATE.json` under
/// `ProtocolState: single`.
pub fn path_of(project: &Path, bead: &BeadId) -> PathBuf {
    match Layout::read(project) {
        Layout::Single => project.join(single::FILE),
        Layout::PerStory => project.join(STATES_DIR).join(format!("{bead}.json")),
    }
}

fn lock_of(project: &Path, bead: &BeadId, layout: Layout) -> PathBuf {
    match layout {
        Layout::Single => project.join(".ai/.STATE.lock"),
        Layout::PerStory => project.join(STATES_DIR).join(format!(".{bead}.lock")),
    }
}

/// A story file that cannot be used as it is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: {problem}; {fix}")]
pub struct Invalid {
    pub file: String,
    pub problem: String,
    pub fix: String,
}

/// Parses a story file's text (tolerant of age, strict about the enums).
pub fn parse(text: &str, file: &str) -> std::result::Result<StoryState, Invalid> {
    let invalid = |problem: String| Invalid {
        file: file.to_string(),
        problem,
        fix: "correct the value by hand, or start the story again with `braids story reset`".into(),
    };
    let value: Value =
        serde_json::from_str(text).map_err(|e| invalid(format!("not valid JSON ({e})")))?;
    let Value::Object(map) = value else {
        return Err(invalid("not a JSON object".into()));
    };
    let text_of = |k: &str| -> Option<String> {
        match map.get(k) {
            Some(Value::String(s)) => Some(s.clone()),
            Some(Value::Number(n)) => Some(n.to_string()),
            _ => None,
        }
    };
    let enum_of = |k: &str, spellings: String| -> std::result::Result<Option<String>, Invalid> {
        match map.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) if s == "null" => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(invalid(format!(
                "field `{k}` is {other}, not one of {spellings}"
            ))),
        }
    };
    let bad = |k: &str, v: &str, spellings: String| {
        invalid(format!(
            "field `{k}` is `{v}`, which is not one of {spellings}"
        ))
    };
    let step = match enum_of("step", Step::spellings())? {
        None => Step::Bdd,
        Some(s) => Step::parse(&s).ok_or_else(|| bad("step", &s, Step::spellings()))?,
    };
    let status = match enum_of("status", Status::spellings())? {
        None => Status::Pending,
        Some(s) => Status::parse(&s).ok_or_else(|| bad("status", &s, Status::spellings()))?,
    };
    let reason = match enum_of("reason", Reason::spellings())? {
        None => None,
        Some(s) => Some(Reason::parse(&s).ok_or_else(|| bad("reason", &s, Reason::spellings()))?),
    };
    let number = |k: &str, default: u32| -> u32 {
        match map.get(k) {
            Some(Value::Number(n)) => n
                .as_u64()
                .map_or(default, |n| n.min(u32::MAX as u64) as u32),
            Some(Value::String(s)) => s.trim().parse().unwrap_or(default),
            _ => default,
        }
    };
    let time = |k: &str| -> Option<DateTime<Utc>> {
        text_of(k)
            .and_then(|s| DateTime::parse_from_rfc3339(s.trim()).ok())
            .map(|t| t.with_timezone(&Utc))
    };
    let strings = |k: &str| -> Vec<String> {
        match map.get(k) {
            Some(Value::Array(items)) => items
                .iter()
                .filter_map(|v| match v {
                    Value::String(s) => Some(s.clone()),
                    Value::Number(n) => Some(n.to_string()),
                    _ => None,
                })
                .collect(),
            Some(Value::String(s)) if !s.is_empty() => vec![s.clone()],
            _ => Vec::new(),
        }
    };
    let tests_of = |k: &str| match map.get(k) {
        Some(Value::Object(t)) => {
            let n = |k: &str| t.get(k).and_then(Value::as_u64).unwrap_or(0) as u32;
            Some(Tests {
                pass: n("pass"),
                fail: n("fail"),
                skip: n("skip"),
            })
        }
        _ => None,
    };
    let optional = |k: &str| text_of(k).filter(|s| !s.is_empty());
    Ok(StoryState {
        project: text_of("project").unwrap_or_default(),
        story: optional("story"),
        step,
        attempt: number("attempt", 1).max(1),
        max_attempts: number("max_attempts", 1),
        status,
        reason,
        dispatched_at: time("dispatched_at"),
        completed_at: time("completed_at"),
        timeout_min: number("timeout_min", 5),
        tests: tests_of("tests"),
        failing_tests: strings("failing_tests"),
        lint_pass: map.get("lint_pass").and_then(Value::as_bool),
        files_changed: strings("files_changed"),
        blocked_by: strings("blocked_by"),
        human_note: optional("human_note"),
        last_error: optional("last_error"),
        commit_hash: optional("commit_hash"),
        tests_measured_by: optional("tests_measured_by"),
        claimed_tests: tests_of("claimed_tests"),
        claimed_failing_tests: strings("claimed_failing_tests"),
    })
}

/// Renders a story file: every field of the schema, in the seed's order.
pub fn render(state: &StoryState) -> String {
    let mut text = serde_json::to_string_pretty(state).expect("a story state serialises");
    text.push('\n');
    text
}

/// What reading a story file found.
// One per story read, matched at once: boxing the state would cost every caller a deref.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Loaded {
    /// No file: the story has not started.
    Missing,
    Valid(StoryState),
    /// A file that cannot be used; the story is held.
    Invalid(Invalid),
}

/// Reads the story file of `bead`, if any. Under `ProtocolState: single` the one file is
/// `bead`'s only when it names it (or no story).
pub fn load(project: &Path, bead: &BeadId) -> Loaded {
    if Layout::read(project) == Layout::Single {
        return match load_file(project, &project.join(single::FILE)) {
            Loaded::Valid(s) if s.story.as_deref().is_some_and(|o| o != bead.as_str()) => {
                Loaded::Missing
            }
            other => other,
        };
    }
    load_file(project, &path_of(project, bead))
}

/// The story `.ai/STATE.json` holds, when it is another than `bead` and not done: `bead`
/// must wait for it.
pub fn held_by_other(project: &Path, bead: &BeadId) -> Option<String> {
    if Layout::read(project) != Layout::Single {
        return None;
    }
    match load_file(project, &project.join(single::FILE)) {
        Loaded::Valid(s) if !s.is_done() => s.story.filter(|o| o != bead.as_str()),
        _ => None,
    }
}

fn load_file(project: &Path, path: &Path) -> Loaded {
    let path = path.to_path_buf();
    let single = path.ends_with(single::FILE);
    match crate::system::atomic::read(&path) {
        Ok(bytes) => match parse(&String::from_utf8_lossy(&bytes), &shown(project, &path)) {
            Ok(s) if single => Loaded::Valid(
                match crate::system::atomic::read(&project.join(single::EXTRA)) {
                    Ok(extra) => single::with_extra(s, &String::from_utf8_lossy(&extra)),
                    Err(_) => s,
                },
            ),
            Ok(s) => Loaded::Valid(s),
            Err(e) => Loaded::Invalid(e),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Loaded::Missing,
        Err(e) => Loaded::Invalid(Invalid {
            file: shown(project, &path),
            problem: format!("cannot be read ({e})"),
            fix: "check its permissions".into(),
        }),
    }
}

/// The path as a person finds it from the project: `.ai/states/x.json`.
fn shown(project: &Path, path: &Path) -> String {
    path.strip_prefix(project)
        .unwrap_or(path)
        .display()
        .to_string()
}

/// Every story file of a project, by bead id (names that are not bead ids are skipped).
pub fn load_all(project: &Path) -> Vec<(BeadId, Loaded)> {
    if Layout::read(project) == Layout::Single {
        let loaded = load_file(project, &project.join(single::FILE));
        let id = match &loaded {
            Loaded::Valid(s) => s.story.as_deref().and_then(|s| BeadId::new(s).ok()),
            Loaded::Invalid(_) => BeadId::new("STATE").ok(),
            Loaded::Missing => None,
        };
        return id.map(|id| vec![(id, loaded)]).unwrap_or_default();
    }
    let Ok(entries) = std::fs::read_dir(project.join(STATES_DIR)) else {
        return Vec::new();
    };
    let mut out: Vec<(BeadId, Loaded)> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let id = name.strip_suffix(".json")?;
            BeadId::new(id).ok()
        })
        .map(|id| {
            let loaded = load(project, &id);
            (id, loaded)
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// Read-modify-write of one story under its lock: `f` sees the current state (`None` when
/// there is none yet) and returns the state to write, or `None` to leave the file as it is.
/// An invalid file is an error: it is never overwritten with a guess.
pub fn update<R>(
    project: &Path,
    bead: &BeadId,
    f: impl FnOnce(Option<&StoryState>) -> (Option<StoryState>, R),
) -> Result<R> {
    let layout = Layout::read(project);
    let path = path_of(project, bead);
    let dir = project.join(STATES_DIR);
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    exclude_from_git(project);
    let _held = crate::system::lock::TickLock::acquire(
        &lock_of(project, bead, layout),
        std::time::Duration::from_secs(30),
    )?
    .ok_or_else(|| anyhow::anyhow!("the story {bead} is being changed by another process"))?;
    let other = held_by_other(project, bead);
    let current = match load(project, bead) {
        Loaded::Missing => None,
        Loaded::Valid(s) => Some(s),
        Loaded::Invalid(e) => return Err(e.into()),
    };
    let (next, out) = f(current.as_ref());
    if let Some(next) = next.filter(|n| Some(n) != current.as_ref()) {
        if let Some(other) = other {
            anyhow::bail!(
                "{} holds story {other} (`ProtocolState: single` keeps one story at a time); {bead} waits until {other} is done, or run `braids story convert <project> --to per-story` to run both",
                single::FILE
            );
        }
        match layout {
            Layout::Single => {
                crate::system::beneath::write_within(
                    project,
                    &path,
                    single::render(&next).as_bytes(),
                )?;
                let extra = project.join(single::EXTRA);
                crate::system::beneath::write_within(
                    project,
                    &extra,
                    single::render_extra(&next).as_bytes(),
                )?;
            }
            Layout::PerStory => {
                crate::system::beneath::write_within(project, &path, render(&next).as_bytes())?
            }
        }
    }
    Ok(out)
}

/// Records the story's open dependencies as its `blocked_by` (under its lock); a story with
/// no state gets `fresh()` only when it has something to wait for.
pub fn set_blocked_by(
    project: &Path,
    bead: &BeadId,
    fresh: impl FnOnce() -> StoryState,
    open: &[String],
) -> Result<()> {
    if held_by_other(project, bead).is_some() {
        return Ok(()); // it waits for the one file anyway; recorded when it gets it
    }
    // The one `.ai/STATE.json` is never taken by a story that only waits: the story it waits
    // for must be able to write it. Its wait is recorded once it starts.
    if Layout::read(project) == Layout::Single && matches!(load(project, bead), Loaded::Missing) {
        return Ok(());
    }
    update(project, bead, |cur| {
        (super::deps::with_blocked_by(cur, fresh, open), ())
    })
}

/// Writes a story's state as it is (under its lock).
pub fn save(project: &Path, state: &StoryState, bead: &BeadId) -> Result<()> {
    update(project, bead, |_| (Some(state.clone()), ()))
}

/// Marks (or unmarks) a story as run in team mode, beside its state file: the tick counts a
/// team step's session as one worker per role and cannot read the bead's title and
/// description for every session it sees.
pub fn set_team(project: &Path, bead: &BeadId, team: bool) -> Result<()> {
    let p = project.join(STATES_DIR).join(format!("{bead}.team"));
    match team {
        true => crate::system::beneath::write_within(project, &p, b"team\n"),
        false => match std::fs::remove_file(&p) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
            _ => Ok(()),
        },
    }
}

/// Whether [`set_team`] marked the story.
pub fn is_team(project: &Path, bead: &BeadId) -> bool {
    project
        .join(STATES_DIR)
        .join(format!("{bead}.team"))
        .exists()
}

/// The story files are braids' bookkeeping, never the project's history: listed in the
/// repository's own `info/exclude` (which nobody commits), so no `git add -A` takes them.
fn exclude_from_git(project: &Path) {
    let Ok(repo) = crate::git::open(project) else {
        return;
    };
    let file = repo.commondir().join("info").join("exclude");
    let old = std::fs::read_to_string(&file).unwrap_or_default();
    let lines = [
        format!("/{STATES_DIR}/"),
        format!("/{}", single::FILE),
        format!("/{}", single::EXTRA),
        "/.ai/.STATE.lock".to_string(),
    ];
    let missing: Vec<&String> = lines
        .iter()
        .filter(|l| !old.lines().any(|o| o.trim() == l.as_str()))
        .collect();
    if missing.is_empty() {
        return;
    }
    let line = missing
        .iter()
        .map(|l| l.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    let mut text = old;
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    for l in missing {
        text.push_str(l);
        text.push('\n');
    }
    if let Some(dir) = file.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    if let Err(e) = crate::system::atomic::write(&file, text.as_bytes()) {
        tracing::warn!("cannot list {line} in {}: {e:#}", file.display());
    }
}

/// The keys of a map, for tests.
#[cfg(test)]
fn keys(text: &str) -> Vec<String> {
    let v: serde_json::Map<String, Value> = serde_json::from_str(text).unwrap();
    v.keys().cloned().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEED: &str = r#"{
  "project": "cart-app",
  "story": "US-005",
  "step": "impl",
  "attempt": 2,
  "max_attempts": 5,
  "status": "failing",
  "reason": null,
  "dispatched_at": "2026-02-13T14:30:00Z",
  "completed_at": "2026-02-13T14:31:15Z",
  "timeout_min": 10,
  "tests": { "pass": 42, "fail": 2, "skip": 1 },
  "failing_tests": ["cart_test.go:TestApplyCoupon", "cart_test.go:TestRemoveExpired"],
  "lint_pass": true,
  "files_changed": ["internal/cart/service.go"],
  "blocked_by": [],
  "human_note": null
}"#;

    #[test]
    fn the_seeds_example_loads_and_renders_every_field() {
        let s = parse(SEED, "x.json").unwrap();
        assert_eq!(
            (s.step, s.attempt, s.status),
            (Step::Impl, 2, Status::Failing)
        );
        assert_eq!(
            s.tests,
            Some(Tests {
                pass: 42,
                fail: 2,
                skip: 1
            })
        );
        assert_eq!(s.failing_tests.len(), 2);
        let text = render(&s);
        assert_eq!(
            keys(&text),
            [
                "attempt",
                "blocked_by",
                "commit_hash",
                "completed_at",
                "dispatched_at",
                "failing_tests",
                "files_changed",
                "human_note",
                "last_error",
                "lint_pass",
                "max_attempts",
                "project",
                "reason",
                "status",
                "step",
                "story",
                "tests",
                "timeout_min"
            ]
        );
        assert_eq!(parse(&text, "x.json").unwrap(), s, "round trip");
    }

    #[test]
    fn old_and_hand_edited_files_load_tolerantly() {
        let s = parse(
            r#"{"story": "b-1", "step": "bdd", "attempt": "2", "x": 1}"#,
            "f",
        )
        .unwrap();
        assert_eq!(
            (s.step, s.attempt, s.status),
            (Step::Bdd, 2, Status::Pending)
        );
        assert_eq!(s.last_error, None);
        let s = parse(
            r#"{"step": "review", "reason": "null", "files_changed": "a.rs"}"#,
            "f",
        )
        .unwrap();
        assert_eq!(
            (s.reason, s.files_changed),
            (None, vec!["a.rs".to_string()])
        );
    }

    #[test]
    fn an_invalid_enum_names_the_file_and_the_field() {
        let e = parse(r#"{"status": "passing"}"#, ".ai/states/b-1.json").unwrap_err();
        assert_eq!(e.file, ".ai/states/b-1.json");
        assert!(e.problem.contains("`status` is `passing`"), "{e}");
        let e = parse(r#"{"step": "coding"}"#, "f").unwrap_err();
        assert!(
            e.problem.contains("`step`") && e.problem.contains("sdd-delta"),
            "{e}"
        );
        let e = parse(r#"{"reason": "flaky tests"}"#, "f").unwrap_err();
        assert!(e.problem.contains("`reason`"), "{e}");
        let e = parse(r#"{"status": 3}"#, "f").unwrap_err();
        assert!(e.problem.contains("`status` is 3"), "{e}");
        assert!(parse("[1]", "f").is_err());
        assert!(parse("{", "f")
            .unwrap_err()
            .to_string()
            .contains("not valid JSON"));
    }

    #[test]
    fn update_writes_atomically_and_never_replaces_an_invalid_file() {
        let dir = tempfile::tempdir().unwrap();
        let bead = BeadId::new("b-1").unwrap();
        update(dir.path(), &bead, |cur| {
            assert!(cur.is_none());
            (Some(StoryState::new("p", &bead, Step::Bdd)), ())
        })
        .unwrap();
        assert!(matches!(load(dir.path(), &bead), Loaded::Valid(s) if s.step == Step::Bdd));
        std::fs::write(path_of(dir.path(), &bead), r#"{"status": "done"}"#).unwrap();
        assert!(update(dir.path(), &bead, |_| (
            Some(StoryState::new("p", &bead, Step::Bdd)),
            ()
        ))
        .is_err());
        assert_eq!(
            std::fs::read_to_string(path_of(dir.path(), &bead)).unwrap(),
            r#"{"status": "done"}"#
        );
        assert_eq!(load_all(dir.path()).len(), 1);
    }

    #[test]
    fn timeouts_count_from_dispatch() {
        let bead = BeadId::new("b-1").unwrap();
        let mut s = StoryState::new("p", &bead, Step::Impl);
        let t0 = DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        s.status = Status::Running;
        s.dispatched_at = Some(t0);
        s.timeout_min = 10;
        assert!(!s.timed_out(t0 + chrono::Duration::minutes(10)));
        assert!(s.timed_out(t0 + chrono::Duration::seconds(601)));
        assert_eq!(s.elapsed_min(t0 + chrono::Duration::seconds(601)), 10);
    }
}
