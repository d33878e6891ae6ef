//! Claude Code's `--output-format stream-json --verbose`: one JSON event a line, `system/init`
//! first (the session), `assistant` and `user` turns, and a final `result` with the verdict,
//! the cost and the refused tool calls. It exits 0 with `is_error: false` after refusing a
//! write, so the refusals are read, not the exit status.

use serde_json::Value;

use super::outcome::{
    provider_from_message, provider_status, AgentOutcome, ProviderFailure, StreamReader,
};
use super::Preset;

#[derive(Default)]
pub struct ClaudeReader {
    out: AgentOutcome,
    result: Option<Value>,
    /// Refusals seen in the stream: tool call id, what.
    streamed_denials: Vec<(String, String)>,
}

impl ClaudeReader {
    pub fn new() -> ClaudeReader {
        ClaudeReader {
            out: AgentOutcome::of(Preset::ClaudeCode),
            result: None,
            streamed_denials: Vec::new(),
        }
    }
}

fn text_of(message: &Value) -> Option<String> {
    let parts: Vec<&str> = message["content"]
        .as_array()?
        .iter()
        .filter(|c| c["type"] == "text")
        .filter_map(|c| c["text"].as_str())
        .collect();
    (!parts.is_empty()).then(|| parts.join("\n"))
}

/// "Write /tmp/x" for a refused tool call.
pub fn denial(d: &Value) -> String {
    let tool = d["tool_name"].as_str().unwrap_or("a tool");
    let input = &d["tool_input"];
    let target = ["file_path", "path", "command", "notebook_path", "url"]
        .iter()
        .find_map(|k| input[*k].as_str());
    match target {
        Some(t) => format!("{tool} {}", crate::system::templates::clip(t, 120)),
        None => tool.to_string(),
    }
}

impl StreamReader for ClaudeReader {
    fn line(&mut self, line: &str) {
        let Some(v) = self.out.event(line) else {
            return;
        };
        if let Some(id) = v["session_id"].as_str() {
            self.out.session = Some(id.to_string());
        }
        match v["type"].as_str() {
            // Said as it happens; the result lists them again (kept once, by tool call).
            Some("system") if v["subtype"] == "permission_denied" => {
                let id = v["tool_use_id"].as_str().unwrap_or_default().to_string();
                // "… requested permissions to write to /x, but …": the path, not the verb.
                let target = v["message"]
                    .as_str()
                    .and_then(|m| m.split_once("permissions to ").map(|(_, r)| r))
                    .map(|r| r.split(", but").next().unwrap_or(r))
                    .filter(|r| !r.starts_with("use "))
                    .map(|r| r.split_once(" to ").map_or(r, |(_, t)| t).to_string());
                let what = format!(
                    "{}{}",
                    v["tool_name"].as_str().unwrap_or("a tool"),
                    target.map_or(String::new(), |t| format!(" {t}"))
                );
                self.streamed_denials.push((id, what));
            }
            Some("system") if v["subtype"] == "init" => {
                if let Some(m) = v["model"].as_str() {
                    self.out.model = Some(m.to_string());
                }
            }
            Some("assistant") => {
                if let Some(t) = text_of(&v["message"]) {
                    self.out.final_text = Some(t);
                }
                if let Some(m) = v["message"]["model"].as_str() {
                    self.out.model = Some(m.to_string());
                }
            }
            Some("result") => self.result = Some(v),
            _ => {}
        }
    }

    fn finish(self: Box<Self>, code: Option<i32>, stderr: &str) -> AgentOutcome {
        let mut out = self.out;
        let streamed = self.streamed_denials;
        let Some(r) = self.result else {
            out.denials = streamed.into_iter().map(|(_, w)| w).collect();
            if code != Some(0) {
                let said = stderr.trim();
                out.provider = provider_from_message(said);
                out.failed = Some(if said.is_empty() {
                    "claude-code ended without a result".into()
                } else {
                    crate::system::templates::clip(said.lines().last().unwrap_or(said), 200)
                });
            }
            return out;
        };
        if let Some(t) = r["result"].as_str().filter(|t| !t.trim().is_empty()) {
            out.final_text = Some(t.to_string());
        }
        let usage = &r["usage"];
        let tokens = |k: &str| usage[k].as_u64();
        if tokens("input_tokens").is_some() {
            out.usage.tokens_in = Some(
                [
                    "input_tokens",
                    "cache_creation_input_tokens",
                    "cache_read_input_tokens",
                ]
                .iter()
                .filter_map(|k| tokens(k))
                .sum(),
            );
        }
        out.usage.tokens_out = tokens("output_tokens");
        out.usage.cost_usd = r["total_cost_usd"].as_f64();
        if let Some(m) = r["modelUsage"].as_object().and_then(|m| m.keys().next()) {
            out.model = Some(m.clone());
        }
        let listed: Vec<&Value> = r["permission_denials"]
            .as_array()
            .map(|d| d.iter().collect())
            .unwrap_or_default();
        out.denials = listed.iter().map(|d| denial(d)).collect();
        out.denials.extend(
            streamed
                .into_iter()
                .filter(|(id, _)| !listed.iter().any(|d| d["tool_use_id"].as_str() == Some(id)))
                .map(|(_, w)| w),
        );
        let is_error = r["is_error"].as_bool().unwrap_or(false);
        let text = r["result"].as_str().unwrap_or_default();
        if let Some(status) = r["api_error_status"]
            .as_u64()
            .and_then(|s| u16::try_from(s).ok())
        {
            if provider_status(status) {
                out.provider = Some(ProviderFailure {
                    status: Some(status),
                    what: crate::system::templates::clip(text, 160),
                    retry_after: super::outcome::retry_after_in(text),
                });
            }
        }
        if is_error
            || r["subtype"]
                .as_str()
                .is_some_and(|s| s.starts_with("error"))
        {
            if out.provider.is_none() && r["terminal_reason"] == "api_error" {
                out.provider = provider_from_message(text);
            }
            let why = [r["terminal_reason"].as_str(), r["subtype"].as_str()]
                .into_iter()
                .flatten()
                .find(|s| *s != "success" && *s != "completed")
                .unwrap_or("error");
            out.failed = Some(if text.is_empty() {
                format!("claude-code: {why}")
            } else {
                format!(
                    "claude-code: {why}: {}",
                    crate::system::templates::clip(text, 200)
                )
            });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::outcome::Verdict;

    fn read(lines: &str, code: i32) -> AgentOutcome {
        crate::agent::outcome::read_all(Box::new(ClaudeReader::new()), lines, code, "")
    }

    const INIT: &str =
        r#"{"type":"system","subtype":"init","session_id":"s-1","model":"claude-opus-5-5"}"#;

    #[test]
    fn a_finished_run_gives_its_session_text_and_cost() {
        let o = read(
            &format!(
                "{INIT}\n{}\n{}",
                r#"{"type":"assistant","message":{"content":[{"type":"text","text":"Created hello.txt."}]},"session_id":"s-1"}"#,
                r#"{"type":"result","subtype":"success","is_error":false,"terminal_reason":"completed","result":"Created hello.txt containing hi.","session_id":"s-1","total_cost_usd":0.0016,"usage":{"input_tokens":200,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":40},"modelUsage":{"claude-opus-5-5":{}},"permission_denials":[]}"#
            ),
            0,
        );
        assert_eq!(o.session.as_deref(), Some("s-1"));
        assert_eq!(
            o.final_text.as_deref(),
            Some("Created hello.txt containing hi.")
        );
        assert_eq!(
            (o.usage.tokens_in, o.usage.tokens_out, o.usage.cost_usd),
            (Some(200), Some(40), Some(0.0016))
        );
        assert_eq!(o.verdict(Some(0)), Verdict::Succeeded);
    }

    #[test]
    fn a_refused_write_is_not_a_success_though_it_exits_0() {
        let o = read(
            &format!(
                "{INIT}\n{}",
                r#"{"type":"result","subtype":"success","is_error":false,"result":"I could not write it.","session_id":"s-1","permission_denials":[{"tool_name":"Write","tool_use_id":"t1","tool_input":{"file_path":"/tmp/outside/x.txt","content":"hi"}}]}"#
            ),
            0,
        );
        assert_eq!(
            o.verdict(Some(0)),
            Verdict::Denied(vec!["Write /tmp/outside/x.txt".into()])
        );
    }

    #[test]
    fn a_refusal_said_only_in_the_stream_still_counts() {
        let o = read(
            &format!(
                "{INIT}\n{}\n{}",
                r#"{"type":"system","subtype":"permission_denied","tool_name":"Write","tool_use_id":"t7","message":"Claude requested permissions to write to /tmp/outside/x.txt, but you haven't granted it yet."}"#,
                r#"{"type":"result","subtype":"success","is_error":false,"result":"Wrote outside.","session_id":"s-1","permission_denials":[{"tool_name":"Write","tool_use_id":"t7","tool_input":{"file_path":"/tmp/outside/x.txt"}}]}"#
            ),
            0,
        );
        assert_eq!(o.denials, ["Write /tmp/outside/x.txt"], "listed once");
        let mut r = Box::new(ClaudeReader::new());
        r.line(r#"{"type":"system","subtype":"permission_denied","tool_name":"Bash","tool_use_id":"t8","message":"Claude requested permissions to use Bash, but you haven't granted it yet."}"#);
        let o = r.finish(Some(1), "");
        assert_eq!(o.denials, ["Bash"]);
    }

    #[test]
    fn an_api_error_is_a_provider_failure() {
        let sample = include_str!("testdata/claude_result_error.json");
        let o = read(&format!("{INIT}\n{sample}"), 1);
        let Verdict::Provider(p) = o.verdict(Some(1)) else {
            panic!("{o:?}")
        };
        assert_eq!(p.status, Some(500));
        assert!(o.failed.unwrap().contains("api_error"));
        let limited = read(
            r#"{"type":"result","subtype":"success","is_error":true,"terminal_reason":"api_error","api_error_status":429,"result":"API Error: 429 {\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\"}}","session_id":"s"}"#,
            1,
        );
        assert_eq!(limited.provider.unwrap().status, Some(429));
    }

    #[test]
    fn no_result_and_a_failure_reads_stderr() {
        let mut r = Box::new(ClaudeReader::new());
        r.line("not json at all");
        let o = r.finish(
            Some(1),
            "Error: No conversation found with session ID: nope\n",
        );
        assert_eq!(o.garbage.as_deref(), Some("not json at all"));
        assert!(o.failed.unwrap().contains("No conversation found"));
    }
}
