//! opencode's `run --format json`: one JSON event a line, each with the `sessionID`; text
//! parts carry the agent's words, `step_finish` parts the tokens and cost of a step, and an
//! `error` event the reason a run failed.

use super::outcome::{provider_from_message, AgentOutcome, StreamReader};
use super::Preset;

pub struct OpencodeReader {
    out: AgentOutcome,
}

impl OpencodeReader {
    pub fn new() -> OpencodeReader {
        OpencodeReader {
            out: AgentOutcome::of(Preset::Opencode),
        }
    }
}

fn add(to: &mut Option<u64>, n: Option<u64>) {
    if let Some(n) = n {
        *to = Some(to.unwrap_or(0) + n);
    }
}

impl StreamReader for OpencodeReader {
    fn line(&mut self, line: &str) {
        let Some(v) = self.out.event(line) else {
            return;
        };
        if let Some(id) = v["sessionID"]
            .as_str()
            .or_else(|| v["part"]["sessionID"].as_str())
        {
            self.out.session = Some(id.to_string());
        }
        let part = &v["part"];
        match v["type"].as_str().unwrap_or_default() {
            "text" => {
                if let Some(t) = part["text"].as_str().filter(|t| !t.trim().is_empty()) {
                    self.out.final_text = Some(t.to_string());
                }
            }
            "step_finish" => {
                let t = &part["tokens"];
                let cache = t["cache"]["read"].as_u64().unwrap_or(0)
                    + t["cache"]["write"].as_u64().unwrap_or(0);
                add(
                    &mut self.out.usage.tokens_in,
                    t["input"].as_u64().map(|n| n + cache),
                );
                add(
                    &mut self.out.usage.tokens_out,
                    t["output"]
                        .as_u64()
                        .map(|n| n + t["reasoning"].as_u64().unwrap_or(0)),
                );
                if let Some(c) = part["cost"].as_f64() {
                    self.out.usage.cost_usd = Some(self.out.usage.cost_usd.unwrap_or(0.0) + c);
                }
            }
            "error" => {
                let e = &v["error"];
                let why = e["data"]["message"]
                    .as_str()
                    .or_else(|| e["message"].as_str())
                    .or_else(|| e["name"].as_str())
                    .unwrap_or("error")
                    .to_string();
                let status = e["data"]["statusCode"]
                    .as_u64()
                    .and_then(|s| u16::try_from(s).ok());
                self.out.provider = match status {
                    Some(s) if super::outcome::provider_status(s) => Some(super::ProviderFailure {
                        status: Some(s),
                        what: crate::system::templates::clip(&why, 160),
                        retry_after: e["data"]["responseHeaders"]["retry-after"]
                            .as_str()
                            .and_then(|r| r.trim().parse().ok()),
                    }),
                    Some(_) => None,
                    None => provider_from_message(&why),
                };
                self.out.failed = Some(format!(
                    "opencode: {}",
                    crate::system::templates::clip(&why, 200)
                ));
            }
            _ => {}
        }
    }

    fn finish(self: Box<Self>, code: Option<i32>, stderr: &str) -> AgentOutcome {
        let mut out = self.out;
        if code != Some(0) && out.failed.is_none() {
            // Its error can be a multi-line dump (`Error: …` then `params: …`): the provider
            // is read from all of it, the reason from its `Error` line.
            let said = stderr.trim();
            let line = said
                .lines()
                .find(|l| l.trim_start().starts_with("Error"))
                .or_else(|| said.lines().last());
            out.provider = provider_from_message(said);
            if let Some(line) = line {
                out.failed = Some(format!(
                    "opencode: {}",
                    crate::system::templates::clip(line, 200)
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

    #[test]
    fn steps_add_up_and_errors_are_read() {
        let mut r = Box::new(OpencodeReader::new());
        for l in [
            r#"{"type":"step_start","sessionID":"ses_1","part":{"type":"step-start"}}"#,
            r#"{"type":"text","sessionID":"ses_1","part":{"type":"text","text":"Wrote hello.txt."}}"#,
            r#"{"type":"step_finish","sessionID":"ses_1","part":{"type":"step-finish","tokens":{"input":100,"output":20,"reasoning":0,"cache":{"read":0,"write":0}},"cost":0.001}}"#,
            r#"{"type":"step_finish","sessionID":"ses_1","part":{"type":"step-finish","tokens":{"input":100,"output":20,"reasoning":0,"cache":{"read":0,"write":0}},"cost":0.001}}"#,
        ] {
            r.line(l);
        }
        let o = r.finish(Some(0), "");
        assert_eq!(o.session.as_deref(), Some("ses_1"));
        assert_eq!(o.final_text.as_deref(), Some("Wrote hello.txt."));
        assert_eq!(
            (o.usage.tokens_in, o.usage.tokens_out),
            (Some(200), Some(40))
        );
        assert!((o.usage.cost_usd.unwrap() - 0.002).abs() < 1e-12);
        assert_eq!(o.verdict(Some(0)), Verdict::Succeeded);
        let mut r = Box::new(OpencodeReader::new());
        r.line(r#"{"type":"error","sessionID":"ses_2","error":{"name":"APIError","data":{"message":"stand-in says no","statusCode":429,"responseHeaders":{"retry-after":"2"}}}}"#);
        let o = r.finish(Some(1), "");
        let Verdict::Provider(p) = o.verdict(Some(1)) else {
            panic!("{o:?}")
        };
        assert_eq!((p.status, p.retry_after), (Some(429), Some(2)));
        // No JSON error event, a dump on stderr instead.
        let r = Box::new(OpencodeReader::new());
        let o = r.finish(
            Some(1),
            "Error: AI_APICallError: stand-in rate limit\n  statusCode: 429,\n  params: {\n  }\n",
        );
        assert_eq!(
            o.failed.as_deref(),
            Some("opencode: Error: AI_APICallError: stand-in rate limit")
        );
        assert_eq!(o.provider.unwrap().status, Some(429));
    }
}
