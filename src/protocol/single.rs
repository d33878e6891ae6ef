//! The seed's single-story layout (`ProtocolState: single` in PROJECT.md): one
//! `.ai/STATE.json` per project, in seed 000's schema exactly (its sixteen keys, its types), so
//! the seeds' own hooks and tools (`jq '.step' .ai/STATE.json`) work beside braids. braids'
//! two extra fields (`last_error`, `commit_hash`) live beside it in `.ai/STATE.braids.json`.
//!
//! The layout is chosen explicitly, never switched by how many stories run: a switch would
//! move a running story's file under it. One file holds one story at a time; a second story
//! waits until the first is done (its write is refused with the reason).

use std::path::Path;

use serde::Serialize;

use super::story_state::{StoryState, Tests};

pub const FILE: &str = ".ai/STATE.json";
pub const EXTRA: &str = ".ai/STATE.braids.json";

/// Where a project keeps its stories' state: PROJECT.md `ProtocolState:`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Layout {
    /// `.ai/states/<bead>.json`, one per story (seed 002, "Multi-Story Parallel").
    #[default]
    PerStory,
    /// The seed's one `.ai/STATE.json`.
    Single,
}

impl Layout {
    pub fn parse(s: &str) -> Option<Layout> {
        match super::keyword(s).as_str() {
            "single" | "state.json" => Some(Layout::Single),
            "per-story" | "per_story" | "perstory" | "states" => Some(Layout::PerStory),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Layout::PerStory => "per-story",
            Layout::Single => "single",
        }
    }

    /// The project's layout; an unreadable value is `braids check`'s error and reads as the
    /// default.
    pub fn of(config: &crate::format::project::ProjectConfig) -> Layout {
        config
            .field("protocolstate")
            .and_then(|f| Layout::parse(&f.value))
            .unwrap_or_default()
    }

    /// The layout of the project at `root`, from its PROJECT.md (or its config.edn).
    pub fn read(root: &Path) -> Layout {
        let file = crate::format::layout::project_file(root);
        match crate::system::atomic::read(&file) {
            Ok(b) => Layout::of(
                &crate::format::layout::parse_project(&crate::format::decode(&b), &file).value,
            ),
            Err(_) => Layout::PerStory,
        }
    }
}

/// Seed 000's `State`, field for field and in its order.
#[derive(Serialize)]
struct Seed<'a> {
    project: &'a str,
    story: Option<&'a str>,
    step: &'a str,
    attempt: u32,
    max_attempts: u32,
    status: &'a str,
    reason: Option<&'a str>,
    dispatched_at: Option<String>,
    completed_at: Option<String>,
    timeout_min: u32,
    tests: Option<Tests>,
    failing_tests: &'a [String],
    lint_pass: Option<bool>,
    files_changed: &'a [String],
    blocked_by: &'a [String],
    human_note: Option<&'a str>,
}

/// `.ai/STATE.json`'s text: the seed's keys only.
#[must_use]
pub fn render(s: &StoryState) -> String {
    let time = |t: Option<chrono::DateTime<chrono::Utc>>| {
        t.map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
    };
    let seed = Seed {
        project: &s.project,
        story: s.story.as_deref(),
        step: s.step.as_str(),
        attempt: s.attempt,
        max_attempts: s.max_attempts,
        status: s.status.as_str(),
        reason: s.reason.map(|r| r.as_str()),
        dispatched_at: time(s.dispatched_at),
        completed_at: time(s.completed_at),
        timeout_min: s.timeout_min,
        tests: s.tests,
        failing_tests: &s.failing_tests,
        lint_pass: s.lint_pass,
        files_changed: &s.files_changed,
        blocked_by: &s.blocked_by,
        human_note: s.human_note.as_deref(),
    };
    let mut text = serde_json::to_string_pretty(&seed).expect("a state serialises");
    text.push('\n');
    text
}

/// `.ai/STATE.braids.json`'s text: braids' fields the seed has no place for.
#[must_use]
pub fn render_extra(s: &StoryState) -> String {
    let v = serde_json::json!({
        "last_error": s.last_error,
        "commit_hash": s.commit_hash,
        "tests_measured_by": s.tests_measured_by,
        "claimed_tests": s.claimed_tests,
        "claimed_failing_tests": s.claimed_failing_tests,
    });
    format!("{v:#}\n")
}

/// `s` with braids' extra fields from `.ai/STATE.braids.json`'s text, when they are for it.
#[must_use]
pub fn with_extra(mut s: StoryState, extra: &str) -> StoryState {
    if let Ok(serde_json::Value::Object(m)) = serde_json::from_str(extra) {
        let text = |k: &str| m.get(k).and_then(|v| v.as_str()).map(String::from);
        s.last_error = s.last_error.or(text("last_error"));
        s.commit_hash = s.commit_hash.or(text("commit_hash"));
        s.tests_measured_by = s.tests_measured_by.or(text("tests_measured_by"));
        if s.claimed_tests.is_none() {
            s.claimed_tests = m
                .get("claimed_tests")
                .and_then(|v| serde_json::from_value(v.clone()).ok());
        }
        if s.claimed_failing_tests.is_empty() {
            s.claimed_failing_tests = m
                .get("claimed_failing_tests")
                .and_then(|v| serde_json::from_value(v.clone()).ok())
                .unwrap_or_default();
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::BeadId;
    use crate::protocol::story_state::parse;
    use crate::protocol::Step;

    /// The seed's pre-hook initial file (seed 001), verbatim.
    const HOOK_INIT: &str = r#"{
  "project": "",
  "story": null,
  "step": "bootstrap",
  "attempt": 1,
  "max_attempts": 1,
  "status": "pending",
  "reason": null,
  "dispatched_at": null,
  "completed_at": null,
  "timeout_min": 5,
  "tests": null,
  "failing_tests": [],
  "lint_pass": null,
  "files_changed": [],
  "blocked_by": [],
  "human_note": null
}"#;

    #[test]
    fn c10_12_braids_writes_exactly_the_seeds_keys_and_types() {
        let seed: serde_json::Value = serde_json::from_str(HOOK_INIT).unwrap();
        let s = parse(HOOK_INIT, FILE).unwrap();
        assert_eq!(s.step, Step::Bootstrap);
        // what braids writes for the seed's own file is the seed's own file
        let back: serde_json::Value = serde_json::from_str(&render(&s)).unwrap();
        assert_eq!(back, seed);
        // a story in full: same keys in the same order, each of the seed's type
        let mut s = StoryState::new("app", &BeadId::new("app-1").unwrap(), Step::Impl);
        s.reason = Some(crate::protocol::Reason::NeedsClarification);
        s.tests = Some(Tests {
            pass: 4,
            fail: 1,
            skip: 0,
        });
        s.dispatched_at = Some(chrono::Utc::now());
        s.last_error = Some("boom".into());
        s.commit_hash = Some("abc".into());
        let text = render(&s);
        let keys: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("  \"")?.split('"').next())
            .collect();
        let want: Vec<&str> = HOOK_INIT
            .lines()
            .filter_map(|l| l.strip_prefix("  \"")?.split('"').next())
            .collect();
        assert_eq!(keys, want);
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert!(v["reason"].is_string() && v["dispatched_at"].is_string() && v["attempt"].is_u64());
        assert!(
            v["tests"]["pass"].is_u64() && v["blocked_by"].is_array() && v["lint_pass"].is_null()
        );
        assert!(v.get("last_error").is_none() && v.get("commit_hash").is_none());
        // braids' extras round-trip beside it
        let read = with_extra(parse(&text, FILE).unwrap(), &render_extra(&s));
        assert_eq!(
            (read.last_error, read.commit_hash),
            (s.last_error.clone(), s.commit_hash.clone())
        );
        assert_eq!(read.step, Step::Impl);
    }

    #[test]
    fn layouts_parse() {
        for (v, want) in [
            ("single", Some(Layout::Single)),
            ("`per-story`", Some(Layout::PerStory)),
            ("Single ", Some(Layout::Single)),
            ("one", None),
        ] {
            assert_eq!(Layout::parse(v), want, "{v}");
        }
    }

    #[test]
    fn braids_own_fields_survive_the_single_layout() {
        use crate::protocol::story_state::{StoryState, Tests};
        let mut s = StoryState::new("app", &BeadId::new("app-1").unwrap(), Step::Verify);
        s.last_error = Some("1 failing".into());
        s.tests_measured_by = Some("cargo test".into());
        s.claimed_tests = Some(Tests {
            pass: 3,
            ..Tests::default()
        });
        s.claimed_failing_tests = vec!["t::a".into()];
        let mut back = StoryState::new("app", &BeadId::new("app-1").unwrap(), Step::Verify);
        back = with_extra(back, &render_extra(&s));
        assert_eq!(back.last_error, s.last_error);
        assert_eq!(back.tests_measured_by, s.tests_measured_by);
        assert_eq!(back.claimed_tests, s.claimed_tests);
        assert_eq!(back.claimed_failing_tests, s.claimed_failing_tests);
    }
}
