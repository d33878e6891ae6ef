//! What an agent CLI said about its run, read from its own machine output rather than from a
//! report it may forget to write: whether it succeeded, its final words, its session, what it
//! used, which of its actions were refused, and whether the model provider failed it.

use serde::{Deserialize, Serialize};

use super::Preset;
use crate::cost::Usage;

/// The provider, not the work, failed the run: a rate limit, an overload, a server error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderFailure {
    /// The HTTP status, when the CLI said.
    pub status: Option<u16>,
    /// One line, as the CLI put it.
    pub what: String,
    /// Seconds the provider asked to wait.
    pub retry_after: Option<u64>,
}

/// One run's outcome as the CLI reported it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct AgentOutcome {
    pub preset: Option<Preset>,
    /// The CLI's session (thread) id, for resuming it.
    pub session: Option<String>,
    /// The agent's last message.
    pub final_text: Option<String>,
    /// The CLI said the run failed, and why.
    pub failed: Option<String>,
    /// Actions the CLI refused ("Write /etc/x"): a run with any is not a success.
    pub denials: Vec<String>,
    pub provider: Option<ProviderFailure>,
    /// Tokens and dollars, as the CLI counted them for this run.
    pub usage: Usage,
    /// What the CLI had counted for the whole session (a resumed one reports its totals).
    pub session_usage: Usage,
    /// The model the CLI says it used.
    pub model: Option<String>,
    /// Lines of output the reader understood.
    pub events: usize,
    /// The first line that should have been a JSON event and was not.
    pub garbage: Option<String>,
}

/// How the run counts, decided from the outcome and the exit status alone.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub enum Verdict {
    /// The CLI finished its turn without error.
    Succeeded,
    /// The provider failed it: never the bead's fault.
    Provider(ProviderFailure),
    /// An action the agent needed was refused.
    Denied(Vec<String>),
    /// Anything else, with one line on why.
    Failed(String),
}

impl AgentOutcome {
    /// Pure: a denial beats an exit 0 (Claude Code exits 0 after refusing a write), a provider
    /// failure beats any other failure, and a CLI that should speak JSON and said nothing it
    /// could read is a failure that names its own output.
    pub fn verdict(&self, code: Option<i32>) -> Verdict {
        if let Some(p) = &self.provider {
            return Verdict::Provider(p.clone());
        }
        if !self.denials.is_empty() {
            return Verdict::Denied(self.denials.clone());
        }
        if let Some(why) = &self.failed {
            return Verdict::Failed(why.clone());
        }
        let json = self.preset.is_some_and(Preset::speaks_json);
        if json && self.events == 0 {
            let name = self.preset.map_or("the agent", Preset::name);
            let seen = self.garbage.as_deref().map_or("nothing".to_string(), |g| {
                format!("`{}`", crate::system::templates::clip(g, 80))
            });
            return Verdict::Failed(format!(
                "{name} printed no JSON events (it printed {seen}); check [executors.{name}] program and args in config.toml: the program must be {name} and args must not change its output format"
            ));
        }
        match code {
            Some(0) => Verdict::Succeeded,
            other => Verdict::Failed(crate::system::proc::exit_text(other)),
        }
    }

    /// The run's usage less what an earlier run of the same session had counted (CLIs report
    /// a resumed session's totals).
    #[must_use]
    pub fn less(mut self, earlier: &Usage) -> AgentOutcome {
        self.session_usage = self.usage;
        let minus = |now: Option<u64>, before: Option<u64>| match (now, before) {
            (Some(n), Some(b)) => Some(n.saturating_sub(b)),
            (n, _) => n,
        };
        self.usage.tokens_in = minus(self.usage.tokens_in, earlier.tokens_in);
        self.usage.tokens_out = minus(self.usage.tokens_out, earlier.tokens_out);
        if let (Some(n), Some(b)) = (self.usage.cost_usd, earlier.cost_usd) {
            self.usage.cost_usd = Some((n - b).max(0.0));
        }
        self
    }
}

/// Reads one CLI's output a line at a time, while it runs, so memory stays bounded however
/// long the run.
pub trait StreamReader: Send {
    /// One line of the CLI's standard output, without its newline.
    fn line(&mut self, line: &str);
    /// The outcome, once the CLI has exited; `stderr` is the end of what it printed there.
    fn finish(self: Box<Self>, code: Option<i32>, stderr: &str) -> AgentOutcome;
}

/// A provider failure read from an HTTP status: 429 and 529 always, 5xx too.
pub fn provider_status(status: u16) -> bool {
    status == 429 || status == 529 || (500..600).contains(&status)
}

/// The HTTP status a provider error message names (`API Error: 429 …`, `status 529`,
/// `429 Too Many Requests`), when it looks like one.
pub fn status_in(text: &str) -> Option<u16> {
    let lower = text.to_ascii_lowercase();
    for w in lower.split(|c: char| !c.is_ascii_alphanumeric()) {
        if w.len() == 3 {
            if let Ok(n) = w.parse::<u16>() {
                if provider_status(n) {
                    return Some(n);
                }
            }
        }
    }
    None
}

/// Whether a message is one of the provider failures the CLIs print in prose.
pub fn provider_words(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    [
        "rate limit",
        "rate_limit",
        "ratelimit",
        "too many requests",
        "overloaded",
        "429",
        "529",
        "quota",
        "server_error",
        "internal server error",
    ]
    .iter()
    .any(|w| lower.contains(w))
}

/// A provider failure from a CLI's error message, when it reads like one.
pub fn provider_from_message(text: &str) -> Option<ProviderFailure> {
    // Words stand for the status a CLI did not print (aider names litellm's exceptions).
    let lower = text.to_ascii_lowercase();
    let status = status_in(text).or_else(|| {
        if ["rate limit", "rate_limit", "ratelimit", "too many requests"]
            .iter()
            .any(|w| lower.contains(w))
        {
            Some(429)
        } else if lower.contains("overloaded") {
            Some(529)
        } else {
            None
        }
    });
    (status.is_some() || provider_words(text)).then(|| ProviderFailure {
        status,
        what: crate::system::templates::clip(text, 160),
        retry_after: retry_after_in(text),
    })
}

/// The seconds of a `retry-after` in a message, when there is one (the breaker reads agents'
/// output the same way).
pub fn retry_after_in(text: &str) -> Option<u64> {
    crate::retry::breaker::retry_after(&text.to_lowercase())
}

/// Feeds `text` to `reader` a line at a time and finishes it: how the readers' tests read a
/// sample.
#[cfg(test)]
pub(crate) fn read_all(
    mut reader: Box<dyn StreamReader>,
    text: &str,
    code: i32,
    stderr: &str,
) -> AgentOutcome {
    for l in text.lines() {
        reader.line(l);
    }
    reader.finish(Some(code), stderr)
}

impl AgentOutcome {
    /// One line of a JSON-speaking CLI: the event, counted, or `None` (the first such line kept
    /// as the garbage a failed run names).
    pub fn event(&mut self, line: &str) -> Option<serde_json::Value> {
        let Ok(v) = serde_json::from_str(line) else {
            if self.garbage.is_none() && !line.trim().is_empty() {
                self.garbage = Some(line.to_string());
            }
            return None;
        };
        self.events += 1;
        Some(v)
    }

    /// An empty outcome of `preset`'s CLI, for its reader to fill.
    pub fn of(preset: Preset) -> AgentOutcome {
        AgentOutcome {
            preset: Some(preset),
            ..AgentOutcome::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn out(preset: Preset) -> AgentOutcome {
        AgentOutcome {
            preset: Some(preset),
            events: 3,
            ..AgentOutcome::default()
        }
    }

    #[test]
    fn verdict_table() {
        let ok = out(Preset::ClaudeCode);
        assert_eq!(ok.verdict(Some(0)), Verdict::Succeeded);
        assert_eq!(ok.verdict(Some(1)), Verdict::Failed("exit 1".into()));
        let denied = AgentOutcome {
            denials: vec!["Write /tmp/x".into()],
            ..out(Preset::ClaudeCode)
        };
        assert_eq!(
            denied.verdict(Some(0)),
            Verdict::Denied(vec!["Write /tmp/x".into()])
        );
        let p = ProviderFailure {
            status: Some(429),
            what: "rate limited".into(),
            retry_after: Some(2),
        };
        let limited = AgentOutcome {
            provider: Some(p.clone()),
            failed: Some("api error".into()),
            denials: vec!["x".into()],
            ..out(Preset::Codex)
        };
        assert_eq!(limited.verdict(Some(1)), Verdict::Provider(p));
        let said = AgentOutcome {
            failed: Some("turn failed".into()),
            ..out(Preset::Codex)
        };
        assert_eq!(said.verdict(Some(0)), Verdict::Failed("turn failed".into()));
        let garbage = AgentOutcome {
            events: 0,
            garbage: Some("Segmentation fault".into()),
            ..out(Preset::Opencode)
        };
        let Verdict::Failed(why) = garbage.verdict(Some(0)) else {
            panic!()
        };
        assert!(why.contains("opencode printed no JSON events"), "{why}");
        assert!(
            why.contains("[executors.opencode]") && why.contains("config.toml"),
            "{why}"
        );
        let aider = AgentOutcome {
            events: 0,
            ..out(Preset::Aider)
        };
        assert_eq!(
            aider.verdict(Some(0)),
            Verdict::Succeeded,
            "aider speaks text"
        );
    }

    #[test]
    fn provider_failures_are_read_from_messages() {
        let p =
            provider_from_message("API Error: 429 {\"type\":\"rate_limit_error\"} retry-after: 7")
                .unwrap();
        assert_eq!((p.status, p.retry_after), (Some(429), Some(7)));
        assert_eq!(
            provider_from_message("Overloaded").unwrap().status,
            Some(529)
        );
        let aider = "litellm.RateLimitError: RateLimitError: OpenAIException - stand-in rate limit";
        assert_eq!(provider_from_message(aider).unwrap().status, Some(429));
        assert_eq!(
            provider_from_message("quota exceeded for this key")
                .unwrap()
                .status,
            None
        );
        assert_eq!(
            provider_from_message("exceeded retry limit, last status: 529 <unknown status code>")
                .unwrap()
                .status,
            Some(529)
        );
        assert!(provider_from_message("file not found: src/x.rs").is_none());
        assert!(provider_from_message("wrote 1500 lines").is_none());
    }

    #[test]
    fn a_resumed_sessions_totals_become_this_runs_usage() {
        let o = AgentOutcome {
            usage: Usage {
                tokens_in: Some(500),
                tokens_out: Some(80),
                cost_usd: Some(0.004),
            },
            ..AgentOutcome::default()
        };
        let before = Usage {
            tokens_in: Some(200),
            tokens_out: Some(40),
            cost_usd: Some(0.0016),
        };
        let u = o.less(&before).usage;
        assert_eq!((u.tokens_in, u.tokens_out), (Some(300), Some(40)));
        assert!((u.cost_usd.unwrap() - 0.0024).abs() < 1e-12);
    }
}
