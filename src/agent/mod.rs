//! The agent CLIs people run — Claude Code, Codex, opencode, aider and OpenClaw — as presets:
//! `executor = "claude-code"` instead of an argv template. A preset knows how to start its CLI
//! unattended (the prompt where the CLI takes it, standard input closed where it would wait,
//! a permission setting that lets the agent work in its workspace, the CLI's own retries
//! bounded so braids' breaker decides) and how to read its machine output, so braids learns
//! from the CLI itself whether the run succeeded, what it cost, which session to resume and
//! whether the provider failed it.
//!
//! Pure but for nothing: building a command and reading output are functions of their inputs;
//! running the process is the worker's.

mod aider;
mod check;
mod choice;
mod claude;
mod codex;
mod command;
mod network;
mod opencode;
pub mod outcome;
mod preset;
pub mod render;
pub mod session;
mod settings;

pub use check::{preflight, running_as_root, version_check, VersionCheck};
pub use choice::Choice;
pub use command::{AgentCommand, Launch, Prompt};
pub use network::provider_ports;
pub use outcome::{AgentOutcome, ProviderFailure, StreamReader, Verdict};
pub use preset::{compare_versions, version_in, Preset};
pub use settings::{priced, Permission, PresetSettings, Price, Prices, DEFAULT_RETRIES};

/// What agent CLIs write into the workspace for themselves (aider's chat history and its
/// repository map's cache, which it has no option to put elsewhere): never landed.
pub const TOOL_STATE: &[&str] = &[
    ".aider.tags.cache.v4",
    ".aider.chat.history.md",
    ".aider.input.history",
    ".aider.llm.history",
];

impl Preset {
    /// A fresh reader of this CLI's output.
    pub fn reader(self) -> Box<dyn StreamReader> {
        match self {
            Preset::ClaudeCode => Box::new(claude::ClaudeReader::new()),
            Preset::Codex => Box::new(codex::CodexReader::new()),
            Preset::Opencode => Box::new(opencode::OpencodeReader::new()),
            Preset::Aider => Box::new(aider::AiderReader::new()),
            Preset::OpenClaw => Box::new(ExitOnly(AgentOutcome::of(Preset::OpenClaw))),
        }
    }

    /// Whether the CLI can continue a session braids names.
    pub fn resumes(self) -> bool {
        matches!(self, Preset::ClaudeCode | Preset::Codex | Preset::Opencode)
    }

    /// Whether a failed resume says the session is gone (then a fresh session is started with
    /// the question and its answer in the prompt).
    pub fn session_gone(self, outcome: &AgentOutcome, stderr: &str) -> bool {
        let said = format!(
            "{} {} {}",
            outcome.failed.as_deref().unwrap_or_default(),
            outcome.garbage.as_deref().unwrap_or_default(),
            stderr
        )
        .to_ascii_lowercase();
        [
            "no conversation found",
            "not found",
            "no such session",
            "does not exist",
            "no rollout found",
            "unknown session",
        ]
        .iter()
        .any(|w| said.contains(w))
    }
}

/// A CLI judged by its exit status alone (OpenClaw's `agent exec`).
struct ExitOnly(AgentOutcome);

impl StreamReader for ExitOnly {
    fn line(&mut self, line: &str) {
        if !line.trim().is_empty() {
            self.0.events += 1;
        }
    }

    fn finish(self: Box<Self>, code: Option<i32>, stderr: &str) -> AgentOutcome {
        let mut out = self.0;
        if code != Some(0) {
            out.provider = stderr
                .lines()
                .last()
                .and_then(outcome::provider_from_message);
        }
        out
    }
}

/// The cost of a run: the CLI's own figure, else its tokens at `[prices]` for the model it
/// used (or was asked for), else none (tokens only).
#[must_use]
pub fn cost_of(outcome: &AgentOutcome, asked_model: Option<&str>, prices: &Prices) -> Option<f64> {
    if let Some(c) = outcome.usage.cost_usd {
        return Some(c);
    }
    let model = outcome.model.as_deref().or(asked_model)?;
    priced(
        prices,
        model,
        outcome.usage.tokens_in.unwrap_or(0),
        outcome.usage.tokens_out.unwrap_or(0),
    )
    .filter(|_| outcome.usage.tokens_in.is_some() || outcome.usage.tokens_out.is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cost_is_the_clis_else_priced_else_none() {
        let prices: Prices = toml::from_str("[m1]\ninput = 10\noutput = 50\n").unwrap();
        let mut o = AgentOutcome {
            usage: crate::cost::Usage {
                tokens_in: Some(200),
                tokens_out: Some(40),
                cost_usd: None,
            },
            ..AgentOutcome::default()
        };
        assert_eq!(
            cost_of(&o, Some("m9"), &prices),
            None,
            "no price known: tokens only"
        );
        let c = cost_of(&o, Some("m1"), &prices).unwrap();
        assert!((c - 0.004).abs() < 1e-12, "{c}");
        o.usage.cost_usd = Some(0.5);
        assert_eq!(
            cost_of(&o, Some("m1"), &prices),
            Some(0.5),
            "the CLI's own figure wins"
        );
    }

    #[test]
    fn a_gone_session_is_recognised() {
        let o = AgentOutcome {
            failed: Some("claude-code ended without a result".into()),
            ..AgentOutcome::default()
        };
        assert!(Preset::ClaudeCode.session_gone(&o, "No conversation found with session ID: x"));
        assert!(!Preset::ClaudeCode.session_gone(&o, "API Error: 500"));
    }
}
