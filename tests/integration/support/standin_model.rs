//! A stand-in model behind an OpenAI-compatible HTTP API, for OpenClaw's gateway to call: the
//! one scripted part of the OpenClaw tests, like the `sh` stand-in agents elsewhere.
//!
//! `GET /v1/models` lists its models; `POST /v1/chat/completions` (streamed, server-sent
//! events) answers a braids prompt with one `exec` tool call that writes the deliverable and the
//! status report the prompt asks for, in the session's cwd, then with a short final reply once
//! the tool's result is in. A prompt that says `hold-on` gets a command that sleeps instead, so
//! the run stays live until someone stops it. OpenClaw's synthetic context messages
//! (`<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>`) are not requests, and the gateway's own requests
//! (heartbeats) get a plain reply.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

const INTERNAL: &str = "<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>";

/// One braids prompt the model was asked, with the model named in the request.
#[derive(Debug, Clone)]
pub struct Asked {
    pub model: String,
    pub prompt: String,
}

/// The running server; it lives as long as the test process (a thread per connection).
pub struct StandinModel {
    pub port: u16,
    asked: Arc<Mutex<Vec<Asked>>>,
    gate: Arc<AtomicBool>,
}

impl StandinModel {
    /// Starts serving on a free loopback port. Work is held back until [`StandinModel::open`].
    pub fn start() -> StandinModel {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let asked = Arc::new(Mutex::new(Vec::new()));
        let gate = Arc::new(AtomicBool::new(false));
        let (a, g) = (asked.clone(), gate.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let (a, g) = (a.clone(), g.clone());
                std::thread::spawn(move || {
                    let _ = serve(conn, &a, &g);
                });
            }
        });
        StandinModel { port, asked, gate }
    }

    /// Lets the held-back prompts be answered.
    pub fn open(&self) {
        self.gate.store(true, Ordering::SeqCst);
    }

    /// The braids prompts asked so far.
    pub fn asked(&self) -> Vec<Asked> {
        self.asked.lock().unwrap().clone()
    }

    /// A custom provider `standin` with models `m1` and `m2`, as OpenClaw's config has it. `m2`
    /// is declared a reasoning model, so a session on it takes a thinking level (the gateway
    /// refuses any level but `off` for `m1`).
    pub fn provider(&self) -> Value {
        let model = |id: &str| {
            json!({"id": id, "name": id, "contextWindow": 128000, "maxTokens": 4096,
                   "input": ["text"], "reasoning": id == "m2",
                   "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0}})
        };
        json!({"baseUrl": format!("http://127.0.0.1:{}/v1", self.port), "apiKey": "standin",
               "api": "openai-completions", "models": [model("m1"), model("m2")]})
    }
}

fn serve(conn: TcpStream, asked: &Mutex<Vec<Asked>>, gate: &AtomicBool) -> std::io::Result<()> {
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut first = String::new();
    reader.read_line(&mut first)?;
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 || line.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                length = v.trim().parse().unwrap_or(0);
            }
        }
    }
    let mut body = vec![0u8; length];
    reader.read_exact(&mut body)?;
    let mut out = conn;
    if first.starts_with("GET") {
        let list = json!({"object": "list", "data": [
            {"id": "m1", "object": "model"}, {"id": "m2", "object": "model"}]})
        .to_string();
        return write!(
            out,
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{list}",
            list.len()
        );
    }
    let req: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let model = req["model"].as_str().unwrap_or_default().to_string();
    let reply = answer(&req, |prompt| {
        asked.lock().unwrap().push(Asked {
            model: model.clone(),
            prompt: prompt.to_string(),
        });
        // Held back so a test can see the run live; bounded so nothing hangs for ever.
        let until = Instant::now() + Duration::from_secs(600);
        while !gate.load(Ordering::SeqCst) && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(100));
        }
    });
    write!(
        out,
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\nconnection: close\r\n\r\n"
    )?;
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "standin", "object": "chat.completion.chunk", "created": 0, "model": model,
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let events = match reply {
        Reply::Text(t) => vec![
            chunk(json!({"role": "assistant", "content": t}), Value::Null),
            chunk(json!({}), json!("stop")),
        ],
        Reply::Exec(args) => vec![
            chunk(
                json!({"role": "assistant", "tool_calls": [{"index": 0, "id": "call-1",
                    "type": "function",
                    "function": {"name": "exec", "arguments": args.to_string()}}]}),
                Value::Null,
            ),
            chunk(json!({}), json!("tool_calls")),
        ],
    };
    for e in events {
        write!(out, "data: {e}\n\n")?;
    }
    write!(out, "data: [DONE]\n\n")?;
    out.flush()
}

enum Reply {
    Text(String),
    Exec(Value),
}

fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// What to say to a conversation; `on_prompt` sees a braids prompt before its tool call.
fn answer(req: &Value, on_prompt: impl FnOnce(&str)) -> Reply {
    let msgs = req["messages"].as_array().cloned().unwrap_or_default();
    let Some(at) = msgs
        .iter()
        .rposition(|m| m["role"] == "user" && !text_of(&m["content"]).contains(INTERNAL))
    else {
        return Reply::Text("HEARTBEAT_OK".into());
    };
    if msgs[at + 1..].iter().any(|m| m["role"] == "tool") {
        return Reply::Text("Done: the deliverable and the status report are written.".into());
    }
    let prompt = text_of(&msgs[at]["content"]);
    let between = |start: &str| {
        let from = prompt.find(start)? + start.len();
        let len = prompt[from..].find('`')?;
        Some(prompt[from..from + len].to_string())
    };
    let (Some(deliverable), Some(result)) = (
        between("Write the deliverable at `"),
        between("Report your status in `"),
    ) else {
        return Reply::Text("HEARTBEAT_OK".into());
    };
    on_prompt(&prompt);
    if prompt.contains("hold-on") {
        return Reply::Exec(
            json!({"command": "sleep 617", "yieldMs": 900000, "timeoutSeconds": 1200}),
        );
    }
    let command = format!(
        "mkdir -p \"$(dirname '{deliverable}')\" && \
         printf '# Done\\n\\n## Summary\\n\\nDone as an OpenClaw session in %s.\\n' \"$(pwd)\" > '{deliverable}' && \
         printf 'status: pass\\nreason: null\\nsummary: done as an OpenClaw session\\n' > '{result}'"
    );
    Reply::Exec(json!({ "command": command }))
}
