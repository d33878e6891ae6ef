//! The Agentic Coding Protocol as a pipeline mode (`Pipeline: protocol` in PROJECT.md; seeds
//! 000–002): every bead in scope is a story that walks `bdd → sdd-delta → contract → review →
//! scaffold → impl → verify → commit → update-memory → done`, one step per executor run,
//! decided by table lookup and template filling with zero tokens.
//!
//! The pure parts live here: the vocabularies (`step.rs`), the story file (`state.rs`), the
//! rules table (`rules.rs`) and its overrides (`overrides.rs`), the decision (`dispatch.rs`),
//! the prompt (`prompt.rs`), reading an executor's report (`handoff.rs`) and team dispatch
//! (`team.rs`). Running a step is the worker's (`worker/protocol/`); the tick's part is
//! `tick/decide` (a story waiting for a person holds its claim but no slot; a step past its
//! timeout is a zombie).

pub mod deps;
pub mod dispatch;
pub mod handoff;
pub mod measured;
pub mod overrides;
pub mod prompt;
pub mod rules;
pub mod single;
pub mod step;
pub mod story_state;
pub mod team;
pub mod tick;

pub use dispatch::{dispatch, Action, Dispatch};
pub use rules::{PostCheck, Rule, Rules, Runner};
pub use step::{Reason, Status, Step};
pub use story_state::StoryState;

/// How a project's beads are worked: PROJECT.md `Pipeline:`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Pipeline {
    /// One agent run per bead (braids' worker).
    #[default]
    Single,
    /// Every bead a story walking the protocol's steps.
    Protocol,
    /// The claw-builder loop over `.claw/WORKPLAN.md` ([`crate::claw`]).
    Claw,
}

/// A field's value as a keyword: trimmed, unquoted from backticks, lowercase.
fn keyword(s: &str) -> String {
    s.trim().trim_matches('`').trim().to_ascii_lowercase()
}

impl Pipeline {
    pub fn parse(s: &str) -> Option<Pipeline> {
        match keyword(s).as_str() {
            "single" | "worker" | "default" => Some(Pipeline::Single),
            "protocol" | "acp" => Some(Pipeline::Protocol),
            "claw" => Some(Pipeline::Claw),
            _ => None,
        }
    }

    /// What the project asked for; an unreadable value is `braids check`'s error and reads as
    /// the default here.
    pub fn of(config: &crate::format::project::ProjectConfig) -> Pipeline {
        config
            .field("pipeline")
            .and_then(|f| Pipeline::parse(&f.value))
            .unwrap_or_default()
    }
}
