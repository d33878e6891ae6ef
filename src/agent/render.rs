//! A session log as a person reads it: the JSON events the agent CLIs print, one line each
//! (messages, tool calls with their target, results, errors, the final verdict), and every
//! other line as it was, each without terminal escapes or control characters. `braids logs
//! --raw` to a file or pipe skips this.

use serde_json::Value;

/// What one line of a session log shows: `None` drops an event with nothing to read (a
/// stream delta, a start marker), anything that is not a CLI's JSON event passes as written.
/// Either way only printable text remains: the agent wrote the log, a person's terminal
/// shows it.
#[must_use]
pub fn readable(line: &str) -> Option<String> {
    shown(line).map(|s| crate::system::templates::printable(&s))
}

fn shown(line: &str) -> Option<String> {
    let t = line.trim_end_matches(['\r', '\n']);
    if !t.trim_start().starts_with('{') {
        return Some(t.to_string());
    }
    let Ok(v) = serde_json::from_str::<Value>(t) else {
        return Some(t.to_string());
    };
    let kind = v["type"].as_str().unwrap_or_default();
    let clip = |s: &str| crate::system::templates::clip(s, 200);
    let shown = match kind {
        // Claude Code
        "system" if v["subtype"] == "init" => format!(
            "● session {} ({}, {})",
            v["session_id"].as_str().unwrap_or("?"),
            v["model"].as_str().unwrap_or("?"),
            v["cwd"].as_str().unwrap_or("?")
        ),
        "system" => format!("● {}", clip(&compact(&v, &["subtype", "message", "error"]))),
        "assistant" | "user" => {
            let lines: Vec<String> = v["message"]["content"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|c| match c["type"].as_str()? {
                    "text" => Some(format!("» {}", clip(c["text"].as_str()?))),
                    "tool_use" => Some(format!(
                        "→ {} {}",
                        c["name"].as_str()?,
                        clip(&target(&c["input"]))
                    )),
                    "tool_result" => {
                        let text = match &c["content"] {
                            Value::String(s) => s.clone(),
                            other => compact(other, &["text"]),
                        };
                        let mark = if c["is_error"].as_bool() == Some(true) {
                            "✗"
                        } else {
                            "←"
                        };
                        Some(format!("{mark} {}", clip(&text)))
                    }
                    _ => None,
                })
                .collect();
            return (!lines.is_empty()).then(|| lines.join("\n"));
        }
        "result" => {
            let denied = v["permission_denials"].as_array().map_or(0, Vec::len);
            format!(
                "■ {} {}{} — {} turns, {} USD{}",
                if v["is_error"].as_bool() == Some(true) {
                    "failed"
                } else {
                    "done"
                },
                v["terminal_reason"]
                    .as_str()
                    .or(v["subtype"].as_str())
                    .unwrap_or(""),
                v["api_error_status"]
                    .as_u64()
                    .map_or(String::new(), |s| format!(" ({s})")),
                v["num_turns"].as_u64().unwrap_or(0),
                v["total_cost_usd"]
                    .as_f64()
                    .map_or("?".into(), |c| format!("{c}")),
                if denied > 0 {
                    format!(", {denied} action(s) refused")
                } else {
                    String::new()
                }
            )
        }
        // Codex
        "thread.started" => format!("● thread {}", v["thread_id"].as_str().unwrap_or("?")),
        "turn.started" | "item.started" => return None,
        "item.completed" | "item.updated" => {
            let item = &v["item"];
            match item["type"].as_str().unwrap_or_default() {
                "agent_message" | "reasoning" => {
                    format!("» {}", clip(item["text"].as_str().unwrap_or("")))
                }
                "command_execution" => format!(
                    "→ $ {} (exit {})",
                    clip(item["command"].as_str().unwrap_or("")),
                    item["exit_code"]
                        .as_i64()
                        .map_or("?".into(), |c| c.to_string())
                ),
                "file_change" => format!(
                    "→ files {}",
                    item["changes"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|c| format!(
                            "{} {}",
                            c["kind"].as_str().unwrap_or("?"),
                            c["path"].as_str().unwrap_or("?")
                        ))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                "error" => format!("! {}", clip(item["message"].as_str().unwrap_or(""))),
                other => format!("· {other}"),
            }
        }
        "turn.completed" => format!(
            "■ done — {} tokens in, {} out",
            v["usage"]["input_tokens"].as_u64().unwrap_or(0),
            v["usage"]["output_tokens"].as_u64().unwrap_or(0)
        ),
        "turn.failed" => format!("■ failed: {}", clip(&compact(&v["error"], &["message"]))),
        "error" => format!("! {}", clip(&compact(&v, &["message", "error"]))),
        // opencode
        "text" => format!("» {}", clip(v["part"]["text"].as_str().unwrap_or(""))),
        "tool_use" => format!(
            "→ {} {}",
            v["part"]["tool"].as_str().unwrap_or("tool"),
            clip(&target(&v["part"]["state"]["input"]))
        ),
        "step_start" => return None,
        "step_finish" => format!(
            "■ step — {} tokens in, {} out, {} USD",
            v["part"]["tokens"]["input"].as_u64().unwrap_or(0),
            v["part"]["tokens"]["output"].as_u64().unwrap_or(0),
            v["part"]["cost"].as_f64().unwrap_or(0.0)
        ),
        "stream_event" => return None,
        _ => return Some(t.to_string()),
    };
    Some(shown)
}

/// The path or command a tool call is about.
fn target(input: &Value) -> String {
    [
        "file_path",
        "filePath",
        "path",
        "command",
        "cmd",
        "pattern",
        "url",
    ]
    .iter()
    .find_map(|k| match &input[*k] {
        Value::String(s) => Some(s.clone()),
        Value::Array(a) => Some(
            a.iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(" "),
        ),
        _ => None,
    })
    .unwrap_or_default()
}

/// The first of `keys` that holds text, else the value as JSON.
fn compact(v: &Value, keys: &[&str]) -> String {
    keys.iter()
        .find_map(|k| v[*k].as_str().map(str::to_string))
        .or_else(|| v.as_str().map(str::to_string))
        .unwrap_or_else(|| v.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_and_codex_streams_read_as_lines() {
        let claude: Vec<String> = include_str!("testdata/claude_stream.jsonl")
            .lines()
            .filter_map(readable)
            .collect();
        let text = claude.join("\n");
        assert!(text.starts_with("● session a421ec2b"), "{text}");
        assert!(
            text.contains("→ Write /tmp/scratch/smoke-sj/repo/hello.txt"),
            "{text}"
        );
        assert!(text.contains("← File created successfully"), "{text}");
        assert!(
            text.contains("» Created hello.txt containing hi."),
            "{text}"
        );
        assert!(
            text.contains("■ done completed — 2 turns, 0.0016 USD"),
            "{text}"
        );
        assert!(!text.contains("{\""), "no raw JSON left: {text}");
        let codex: Vec<String> = include_str!("testdata/codex_events.jsonl")
            .lines()
            .filter_map(readable)
            .collect();
        assert_eq!(
            codex,
            [
                "● thread 01a21b52-2fa0-7533-94e2-03b4896cc202",
                "→ files add /tmp/scratch/final-cx/repo/hello.txt",
                "» Created hello.txt containing hi.",
                "■ done — 200 tokens in, 40 out"
            ]
        );
    }

    #[test]
    fn other_lines_pass_unchanged() {
        assert_eq!(
            readable("worker: claimed app-1").as_deref(),
            Some("worker: claimed app-1")
        );
        assert_eq!(readable("{not json").as_deref(), Some("{not json"));
        assert_eq!(
            readable("{\"level\":\"info\"}").as_deref(),
            Some("{\"level\":\"info\"}")
        );
    }
}
