//! Codex's `exec --json`: `thread.started` (the session), `item.*` (messages, commands, file
//! changes), `turn.completed` with the thread's token totals and no cost, or `turn.failed`
//! and exit 1. Error events while it reconnects are kept only to explain a failure.

use serde_json::Value;

use super::outcome::{provider_from_message, AgentOutcome, StreamReader};
use super::Preset;

pub struct CodexReader {
    out: AgentOutcome,
    last_error: Option<String>,
}

impl CodexReader {
    pub fn new() -> CodexReader {
        CodexReader {
            out: AgentOutcome::of(Preset::Codex),
            last_error: None,
        }
    }
}

fn message_of(v: &Value) -> Option<String> {
    v["message"]
        .as_str()
        .or_else(|| v["error"]["message"].as_str())
        .or_else(|| v["error"].as_str())
        .map(str::to_string)
}

impl StreamReader for CodexReader {
    fn line(&mut self, line: &str) {
        let Some(v) = self.out.event(line) else {
            return;
        };
        match v["type"].as_str().unwrap_or_default() {
            "thread.started" => self.out.session = v["thread_id"].as_str().map(str::to_string),
            "item.completed" => {
                let item = &v["item"];
                if item["type"] == "agent_message" {
                    if let Some(t) = item["text"].as_str() {
                        self.out.final_text = Some(t.to_string());
                    }
                }
            }
            "turn.completed" => {
                let u = &v["usage"];
                self.out.usage.tokens_in = u["input_tokens"].as_u64();
                self.out.usage.tokens_out = u["output_tokens"].as_u64();
            }
            "turn.failed" => {
                let why = message_of(&v).unwrap_or_else(|| "the turn failed".into());
                self.out.failed = Some(format!(
                    "codex: {}",
                    crate::system::templates::clip(&why, 200)
                ));
                self.out.provider = provider_from_message(&why)
                    .or_else(|| self.last_error.as_deref().and_then(provider_from_message));
            }
            "error" => self.last_error = message_of(&v),
            _ => {}
        }
    }

    fn finish(self: Box<Self>, code: Option<i32>, stderr: &str) -> AgentOutcome {
        let mut out = self.out;
        if code != Some(0) && out.failed.is_none() {
            let said = self
                .last_error
                .clone()
                .or_else(|| stderr.trim().lines().last().map(str::to_string))
                .unwrap_or_default();
            out.provider = out.provider.or_else(|| provider_from_message(&said));
            if !said.is_empty() {
                out.failed = Some(format!(
                    "codex: {}",
                    crate::system::templates::clip(&said, 200)
                ));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::outcome::Verdict;

    fn read(lines: &str, code: i32) -> AgentOutcome {
        crate::agent::outcome::read_all(Box::new(CodexReader::new()), lines, code, "")
    }

    #[test]
    fn the_real_sample_gives_thread_text_and_tokens_but_no_cost() {
        let o = read(include_str!("testdata/codex_events.jsonl"), 0);
        assert_eq!(
            o.session.as_deref(),
            Some("01a21b52-2fa0-7533-94e2-03b4896cc202")
        );
        assert_eq!(
            o.final_text.as_deref(),
            Some("Created hello.txt containing hi.")
        );
        assert_eq!(
            (o.usage.tokens_in, o.usage.tokens_out, o.usage.cost_usd),
            (Some(200), Some(40), None)
        );
        assert_eq!(o.verdict(Some(0)), Verdict::Succeeded);
    }

    #[test]
    fn a_failed_turn_after_rate_limits_is_a_provider_failure() {
        let o = read(
            concat!(
                "{\"type\":\"thread.started\",\"thread_id\":\"t\"}\n",
                "{\"type\":\"error\",\"message\":\"Reconnecting... 1/2 (unexpected status 429 Too Many Requests)\"}\n",
                "{\"type\":\"turn.failed\",\"error\":{\"message\":\"exceeded retry limit, last status: 429 Too Many Requests\"}}\n"
            ),
            1,
        );
        let Verdict::Provider(p) = o.verdict(Some(1)) else {
            panic!("{o:?}")
        };
        assert_eq!(p.status, Some(429));
        let broken = read(
            "{\"type\":\"turn.failed\",\"error\":{\"message\":\"sandbox denied\"}}",
            1,
        );
        assert_eq!(
            broken.verdict(Some(1)),
            Verdict::Failed("codex: sandbox denied".into())
        );
    }
}
