//! A scripted stand-in model for the real agent CLIs (Claude Code, Codex, opencode, aider), so
//! the integration tests can drive them offline and deterministically.
//!
//! One loopback port speaks the three wire protocols these CLIs use: Anthropic Messages
//! (`POST /v1/messages`), OpenAI Responses (`POST /v1/responses`, streamed only) and Chat
//! Completions (`POST /v1/chat/completions`, plus `GET /v1/models`); streamed (server-sent
//! events) unless the request says `"stream": false` (Claude's fallback, aider's `--no-stream`).
//!
//! Scripting is stateless: the reply is chosen by how many model turns the request's history
//! already holds, so the CLI's own retries and `--resume` need no bookkeeping here. Turn `k` of a
//! [`Script::Write`] calls the CLI's own file tool for `files[k]` (aider, which has no tools, gets
//! its `whole` edit format as text); then comes the final text. Every answered call reports 100
//! input and 20 output tokens, so each CLI's own token and cost totals are deterministic.
//!
//! Several agents share one server: [`AgentModel::script`] keys a script on a marker in the
//! conversation's first user message (the prompt). Set `AGENT_MODEL_DUMP=DIR` to have every
//! request's headers and body written to `DIR/NNNN-api.json` when a test needs looking into.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// Tokens every answered call reports.
const USAGE_IN: u64 = 100;
const USAGE_OUT: u64 = 20;
/// The longest a [`Script::Hang`] keeps a connection open.
const HANG_LIMIT: Duration = Duration::from_secs(15 * 60);

/// What the model does for a conversation.
#[derive(Debug, Clone)]
pub enum Script {
    /// Turn k (k = 0..files.len()) writes files[k] with the CLI's own file tool (path relative to the
    /// agent's working directory taken from the request, made absolute where the tool needs it; aider:
    /// the reply text with the file name and a fenced block in its `whole` edit format). After the last
    /// file, the final assistant text.
    Write {
        files: Vec<(String, String)>,
        final_text: String,
    },
    /// Every request is answered with this HTTP status and the provider's own error body for that
    /// protocol (429 rate_limit_error with a `retry-after` header of retry_after seconds; 529
    /// overloaded_error; 500 api_error).
    Fail { status: u16, retry_after: Option<u64> },
    /// Sends the response headers and the first part of a stream, then never sends more and never
    /// closes (until the client goes away; bound the sleep to 15 minutes).
    Hang,
}

/// One model request the server saw.
#[derive(Debug, Clone)]
pub struct Seen {
    /// "messages" | "responses" | "chat"
    pub api: &'static str,
    pub model: String,
    /// Claude: X-Claude-Code-Session-Id; Codex: session-id header; others: None unless sent.
    pub session: Option<String>,
    /// Text of the first user message (the prompt).
    pub first_user: String,
    /// Model turns already in the history.
    pub turns: usize,
    /// What the server answered.
    pub status: u16,
}

#[derive(Default)]
struct State {
    default: Option<Script>,
    scripts: Vec<(String, Script)>,
    seen: Vec<Seen>,
}

/// The running server; it lives as long as the test process (a thread per connection).
pub struct AgentModel {
    pub port: u16,
    state: Arc<Mutex<State>>,
}

impl AgentModel {
    pub fn start(default: Script) -> AgentModel {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let state = Arc::new(Mutex::new(State {
            default: Some(default),
            ..State::default()
        }));
        let st = state.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let st = st.clone();
                std::thread::spawn(move || {
                    let _ = serve(conn, &st);
                });
            }
        });
        AgentModel { port, state }
    }

    /// "http://127.0.0.1:PORT"
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// From now on, a conversation whose FIRST user message contains `marker` gets `script`
    /// (the default script for the rest). Later calls for the same marker replace it.
    pub fn script(&self, marker: &str, script: Script) {
        let mut st = self.state.lock().unwrap();
        match st.scripts.iter_mut().find(|(m, _)| m == marker) {
            Some(slot) => slot.1 = script,
            None => st.scripts.push((marker.to_string(), script)),
        }
    }

    pub fn set_default(&self, script: Script) {
        self.state.lock().unwrap().default = Some(script);
    }

    /// Every request seen, oldest first.
    pub fn seen(&self) -> Vec<Seen> {
        self.state.lock().unwrap().seen.clone()
    }
}

struct Request {
    method: String,
    path: String,
    headers: HashMap<String, String>,
    body: Vec<u8>,
}

fn read_request(reader: &mut BufReader<TcpStream>) -> std::io::Result<Option<Request>> {
    let mut first = String::new();
    if reader.read_line(&mut first)? == 0 {
        return Ok(None);
    }
    let mut parts = first.split_whitespace();
    let method = parts.next().unwrap_or_default().to_string();
    let path = parts.next().unwrap_or_default().to_string();
    let mut headers = HashMap::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 || line.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
        }
    }
    let mut body = Vec::new();
    if headers.get("transfer-encoding").is_some_and(|t| t.contains("chunked")) {
        loop {
            let mut size = String::new();
            reader.read_line(&mut size)?;
            let n = usize::from_str_radix(size.trim().split(';').next().unwrap_or("0"), 16)
                .unwrap_or(0);
            let mut chunk = vec![0u8; n + 2];
            reader.read_exact(&mut chunk[..if n == 0 { 0 } else { n + 2 }])?;
            if n == 0 {
                let mut end = String::new();
                reader.read_line(&mut end)?;
                break;
            }
            body.extend_from_slice(&chunk[..n]);
        }
    } else {
        let length = headers.get("content-length").and_then(|l| l.parse().ok()).unwrap_or(0);
        body.resize(length, 0);
        reader.read_exact(&mut body)?;
    }
    Ok(Some(Request { method, path, headers, body }))
}

static DUMPED: AtomicUsize = AtomicUsize::new(0);

fn serve(conn: TcpStream, state: &Mutex<State>) -> std::io::Result<()> {
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut out = conn;
    // Keep-alive: clients reuse connections; every reply carries its length or ends the stream.
    while let Some(req) = read_request(&mut reader)? {
        let route = req.path.split('?').next().unwrap_or_default().trim_end_matches('/');
        let api = match route {
            r if r.ends_with("/messages") => "messages",
            r if r.ends_with("/responses") => "responses",
            r if r.ends_with("/chat/completions") => "chat",
            r if r.ends_with("/models") && req.method == "GET" => {
                let data: Vec<Value> = ["standin", "gpt-5.5", "claude-opus-5-5"]
                    .iter()
                    .map(|id| json!({"id": id, "object": "model", "created": 0, "owned_by": "standin"}))
                    .collect();
                let list = json!({"object": "list", "data": data});
                send(&mut out, 200, "application/json", &[], &list.to_string())?;
                continue;
            }
            r if r.ends_with("/count_tokens") => {
                send(&mut out, 200, "application/json", &[], r#"{"input_tokens":100}"#)?;
                continue;
            }
            _ => {
                send(&mut out, 404, "application/json", &[], r#"{"error":"not found"}"#)?;
                continue;
            }
        };
        let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        if let Ok(dir) = std::env::var("AGENT_MODEL_DUMP") {
            let n = DUMPED.fetch_add(1, Ordering::SeqCst);
            let dump = json!({"path": req.path, "headers": req.headers, "body": body});
            let _ = std::fs::create_dir_all(&dir);
            let _ = std::fs::write(format!("{dir}/{n:04}-{api}.json"), dump.to_string());
        }
        let first_user = first_user(api, &body);
        let turns = turns(api, &body);
        let script = {
            let st = state.lock().unwrap();
            st.scripts
                .iter()
                .find(|(m, _)| first_user.contains(m.as_str()))
                .map(|(_, s)| s.clone())
                .or_else(|| st.default.clone())
                .expect("a default script")
        };
        let session = ["x-claude-code-session-id", "session-id", "session_id", "x-session-id"]
            .iter()
            .find_map(|h| req.headers.get(*h).cloned());
        let status = match &script {
            Script::Fail { status, .. } => *status,
            _ => 200,
        };
        state.lock().unwrap().seen.push(Seen {
            api,
            model: body["model"].as_str().unwrap_or_default().to_string(),
            session,
            first_user,
            turns,
            status,
        });
        let stream = api == "responses" || body["stream"].as_bool().unwrap_or(false);
        match script {
            Script::Fail { status, retry_after } => {
                let extra: Vec<(&str, String)> =
                    retry_after.map(|s| ("retry-after", s.to_string())).into_iter().collect();
                send(&mut out, status, "application/json", &extra, &error_body(api, status))?;
            }
            Script::Hang => return hang(out, api, stream, &body),
            Script::Write { files, final_text } => {
                let reply = reply(api, &body, turns, &files, &final_text);
                let events = render(api, &body, &reply, stream);
                if stream {
                    return send_stream(&mut out, &events);
                } else {
                    send(&mut out, 200, "application/json", &[], &events[0].1)?;
                }
            }
        }
    }
    Ok(())
}

fn send(
    out: &mut TcpStream,
    status: u16,
    ctype: &str,
    extra: &[(&str, String)],
    body: &str,
) -> std::io::Result<()> {
    let mut head = format!(
        "HTTP/1.1 {status} {}\r\ncontent-type: {ctype}\r\ncontent-length: {}\r\n",
        reason(status),
        body.len()
    );
    for (k, v) in extra {
        head += &format!("{k}: {v}\r\n");
    }
    write!(out, "{head}\r\n{body}")?;
    out.flush()
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        529 => "Overloaded",
        _ => "Error",
    }
}

const SSE_HEAD: &str = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\nconnection: close\r\n\r\n";

/// A whole event stream, then the connection closes (its end marks the end of the body).
fn send_stream(out: &mut TcpStream, events: &[(String, String)]) -> std::io::Result<()> {
    out.write_all(SSE_HEAD.as_bytes())?;
    for (name, data) in events {
        out.write_all(sse(name, data).as_bytes())?;
    }
    out.flush()?;
    out.shutdown(Shutdown::Both)
}

fn sse(name: &str, data: &str) -> String {
    if name.is_empty() {
        format!("data: {data}\n\n")
    } else {
        format!("event: {name}\ndata: {data}\n\n")
    }
}

/// Headers and the first event, then silence until the client hangs up.
fn hang(mut out: TcpStream, api: &str, stream: bool, body: &Value) -> std::io::Result<()> {
    if stream {
        let reply = Reply::Text("…".into());
        let first = render(api, body, &reply, true).swap_remove(0);
        out.write_all(format!("{SSE_HEAD}{}", sse(&first.0, &first.1)).as_bytes())?;
    } else {
        out.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{")?;
    }
    out.flush()?;
    out.set_read_timeout(Some(Duration::from_millis(500)))?;
    let until = Instant::now() + HANG_LIMIT;
    let mut buf = [0u8; 4096];
    while Instant::now() < until {
        match out.read(&mut buf) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(_) => break,
        }
    }
    Ok(())
}

fn error_body(api: &str, status: u16) -> String {
    let (kind, message) = match status {
        429 => ("rate_limit_error", "stand-in rate limit"),
        529 => ("overloaded_error", "stand-in overloaded"),
        400 => ("invalid_request_error", "stand-in bad request"),
        401 => ("authentication_error", "stand-in bad key"),
        _ => ("api_error", "stand-in boom"),
    };
    if api == "messages" {
        return json!({"type": "error", "error": {"type": kind, "message": message}}).to_string();
    }
    let (kind, code) = match status {
        429 => ("requests", "rate_limit_exceeded"),
        400 => ("invalid_request_error", "invalid_request"),
        401 => ("invalid_request_error", "invalid_api_key"),
        _ => ("server_error", "server_error"),
    };
    json!({"error": {"message": message, "type": kind, "param": null, "code": code}}).to_string()
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

/// The conversation's messages (Responses: its `input` items).
/// Aider's preamble (system prompt, a worked example, `Ok.` acknowledgements) is left out:
/// the conversation starts after its last `Ok.`.
fn history(api: &str, body: &Value) -> Vec<Value> {
    let key = if api == "responses" { "input" } else { "messages" };
    let mut all = body[key].as_array().cloned().unwrap_or_default();
    if is_aider(body) {
        if let Some(at) = all.iter().rposition(|m| m["role"] == "assistant" && m["content"] == "Ok.") {
            all.drain(..=at);
        }
    }
    all
}

/// Aider has no tools; its system prompt asks for the `whole` format's *file listing*.
fn is_aider(body: &Value) -> bool {
    let msgs = body["messages"].as_array();
    msgs.is_some_and(|m| m.iter().any(|m| m["role"] == "system" && text_of(&m["content"]).contains("*file listing*")))
}

/// The prompt: the first user message, without the context CLIs wrap around it (Claude's
/// `<system-reminder>` blocks; Codex's `<environment_context>` and `# AGENTS.md` messages;
/// opencode's title request, whose second user message is the prompt).
fn first_user(api: &str, body: &Value) -> String {
    if let (Some(s), "responses") = (body["input"].as_str(), api) {
        return s.to_string();
    }
    let wrapped = |t: &str| t.starts_with("<system-reminder>") || t.starts_with("# AGENTS.md");
    history(api, body)
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| match &m["content"] {
            // Claude puts `<system-reminder>` blocks before the prompt in the same message.
            Value::Array(parts) => parts
                .iter()
                .filter_map(|p| p["text"].as_str())
                .filter(|t| !wrapped(t))
                .collect::<Vec<_>>()
                .join("\n"),
            c => {
                let t = text_of(c);
                let end = t.find("\n\n\nTo suggest changes to a file").unwrap_or(t.len());
                t[..end].to_string()
            }
        })
        .find(|t| {
            !t.is_empty()
                && !(api == "responses" && t.starts_with('<'))
                && !t.starts_with("Generate a title for this conversation:")
        })
        .unwrap_or_default()
}

/// Model turns already in the history: assistant messages; for Responses, the tool calls and
/// assistant messages in `input`.
fn turns(api: &str, body: &Value) -> usize {
    history(api, body)
        .iter()
        .filter(|m| {
            m["role"] == "assistant"
                || (api == "responses"
                    && matches!(m["type"].as_str(), Some("function_call" | "custom_tool_call")))
        })
        .count()
}

/// The agent's working directory, as the request states it (Claude: `Primary working
/// directory:`; Codex: `<cwd>…</cwd>`; opencode: `Working directory:`). Aider states none.
pub fn cwd_of(api: &str, body: &Value) -> Option<String> {
    let mut texts: Vec<String> = history(api, body)
        .iter()
        .map(|m| text_of(&m["content"]))
        .collect();
    texts.push(text_of(&body["system"]));
    texts.push(body["instructions"].as_str().unwrap_or_default().to_string());
    let find = |t: &str, start: &str, end: &str| {
        let from = t.find(start)? + start.len();
        let rest = &t[from..];
        Some(rest[..rest.find(end).unwrap_or(rest.len())].trim().to_string())
    };
    texts.iter().find_map(|t| {
        find(t, "<cwd>", "</cwd>")
            .or_else(|| find(t, "Primary working directory:", "\n"))
            .or_else(|| find(t, "Working directory:", "\n"))
    })
}

enum Reply {
    Text(String),
    /// A tool call: name, arguments (JSON; for a custom tool, `{"input": text}`).
    Tool(String, Value, bool),
}

/// The tools the request offers, by name, with their parameter names.
fn tools(body: &Value) -> Vec<(String, Vec<String>, bool)> {
    let list = body["tools"].as_array().cloned().unwrap_or_default();
    list.iter()
        .map(|t| {
            let f = if t["function"].is_object() { &t["function"] } else { t };
            let schema = [&f["input_schema"], &f["parameters"]]
                .into_iter()
                .find(|s| s.is_object())
                .cloned()
                .unwrap_or(Value::Null);
            let params = schema["properties"]
                .as_object()
                .map(|p| p.keys().cloned().collect())
                .unwrap_or_default();
            let name = f["name"].as_str().unwrap_or_default().to_string();
            (name, params, t["type"] == "custom")
        })
        .collect()
}

fn reply(api: &str, body: &Value, turns: usize, files: &[(String, String)], final_text: &str) -> Reply {
    let tools = tools(body);
    if tools.is_empty() {
        // No tools: aider (every remaining file in `whole` format), or a side call such as
        // opencode's title generation, which gets the final text.
        let whole = files.iter().skip(turns).fold(String::new(), |acc, (path, content)| {
            let nl = if content.ends_with('\n') { "" } else { "\n" };
            format!("{acc}{path}\n```\n{content}{nl}```\n\n")
        });
        return Reply::Text(if is_aider(body) { format!("{whole}{final_text}") } else { final_text.into() });
    }
    let Some((path, content)) = files.get(turns) else {
        return Reply::Text(final_text.into());
    };
    let abs = match (path.starts_with('/'), cwd_of(api, body)) {
        (false, Some(cwd)) => format!("{}/{path}", cwd.trim_end_matches('/')),
        _ => path.clone(),
    };
    let has = |n: &str| tools.iter().find(|t| t.0 == n);
    if let Some((name, _, true)) = has("apply_patch") {
        let lines: String = content.lines().map(|l| format!("+{l}\n")).collect();
        let patch = format!("*** Begin Patch\n*** Add File: {abs}\n{lines}*** End Patch\n");
        return Reply::Tool(name.clone(), json!({ "input": patch }), true);
    }
    if let Some((name, params, _)) = has("Write").or_else(|| has("write")) {
        let key = ["file_path", "filePath", "path"]
            .into_iter()
            .find(|k| params.iter().any(|p| p == k))
            .unwrap_or("file_path");
        return Reply::Tool(name.clone(), json!({ key: abs, "content": content }), false);
    }
    // A shell tool (Codex without apply_patch): write it with a quoted here-document.
    let shell = has("exec_command").or_else(|| has("shell")).or_else(|| has("bash"));
    let Some((name, params, _)) = shell else {
        return Reply::Text(final_text.into());
    };
    let cmd = format!(
        "mkdir -p \"$(dirname '{abs}')\" && cat > '{abs}' <<'STANDIN_EOF'\n{content}\nSTANDIN_EOF"
    );
    let key = ["cmd", "command"].into_iter().find(|k| params.iter().any(|p| p == k)).unwrap_or("cmd");
    let arg = if name == "shell" { json!(["bash", "-lc", cmd]) } else { json!(cmd) };
    Reply::Tool(name.clone(), json!({ key: arg }), false)
}

static IDS: AtomicUsize = AtomicUsize::new(1);

fn id(prefix: &str) -> String {
    format!("{prefix}_standin{:06}", IDS.fetch_add(1, Ordering::SeqCst))
}

/// The events of one answer, as (event name, data); a non-streaming answer is one JSON body.
fn render(api: &str, body: &Value, reply: &Reply, stream: bool) -> Vec<(String, String)> {
    let model = body["model"].as_str().unwrap_or("standin");
    let ev = |name: &str, v: Value| (name.to_string(), v.to_string());
    match api {
        "messages" => {
            let (block, delta, stop) = match reply {
                Reply::Text(t) => (
                    json!({"type": "text", "text": ""}),
                    json!({"type": "text_delta", "text": t}),
                    "end_turn",
                ),
                Reply::Tool(name, args, _) => (
                    json!({"type": "tool_use", "id": id("toolu"), "name": name, "input": {}}),
                    json!({"type": "input_json_delta", "partial_json": args.to_string()}),
                    "tool_use",
                ),
            };
            let msg = |content: Value, out: u64, stop: Value| {
                json!({"id": id("msg"), "type": "message", "role": "assistant", "model": model,
                    "content": content, "stop_reason": stop, "stop_sequence": null,
                    "usage": {"input_tokens": USAGE_IN, "output_tokens": out,
                              "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}})
            };
            if !stream {
                let mut whole = block.clone();
                match reply {
                    Reply::Text(t) => whole["text"] = json!(t),
                    Reply::Tool(_, args, _) => whole["input"] = args.clone(),
                }
                return vec![ev("", msg(json!([whole]), USAGE_OUT, json!(stop)))];
            }
            vec![
                ev("message_start", json!({"type": "message_start", "message": msg(json!([]), 1, Value::Null)})),
                ev("content_block_start", json!({"type": "content_block_start", "index": 0, "content_block": block})),
                ev("content_block_delta", json!({"type": "content_block_delta", "index": 0, "delta": delta})),
                ev("content_block_stop", json!({"type": "content_block_stop", "index": 0})),
                ev("message_delta", json!({"type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": null},
                    "usage": {"input_tokens": USAGE_IN, "output_tokens": USAGE_OUT}})),
                ev("message_stop", json!({"type": "message_stop"})),
            ]
        }
        "responses" => {
            let rid = id("resp");
            let item = match reply {
                Reply::Text(t) => json!({"type": "message", "id": id("msg"), "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": t, "annotations": []}]}),
                Reply::Tool(name, args, true) => json!({"type": "custom_tool_call", "id": id("ctc"),
                    "call_id": id("call"), "name": name, "input": args["input"], "status": "completed"}),
                Reply::Tool(name, args, false) => json!({"type": "function_call", "id": id("fc"),
                    "call_id": id("call"), "name": name, "arguments": args.to_string(),
                    "status": "completed"}),
            };
            let response = |status: &str, output: Value, usage: Value| {
                json!({"id": rid, "object": "response", "created_at": 0, "status": status,
                       "model": model, "output": output, "usage": usage})
            };
            let usage = json!({"input_tokens": USAGE_IN, "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": USAGE_OUT, "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": USAGE_IN + USAGE_OUT});
            let mut events = vec![
                ev("response.created", json!({"type": "response.created", "sequence_number": 0,
                    "response": response("in_progress", json!([]), Value::Null)})),
                ev("response.output_item.added", json!({"type": "response.output_item.added",
                    "sequence_number": 1, "output_index": 0, "item": item})),
            ];
            if let Reply::Text(t) = reply {
                events.push(ev("response.output_text.delta", json!({"type": "response.output_text.delta",
                    "sequence_number": 2, "item_id": item["id"], "output_index": 0,
                    "content_index": 0, "delta": t})));
            }
            events.push(ev("response.output_item.done", json!({"type": "response.output_item.done",
                "sequence_number": 3, "output_index": 0, "item": item})));
            events.push(ev("response.completed", json!({"type": "response.completed",
                "sequence_number": 4, "response": response("completed", json!([item]), usage)})));
            events
        }
        _ => {
            let cid = id("chatcmpl");
            let chunk = |delta: Value, finish: Value| {
                json!({"id": cid, "object": "chat.completion.chunk", "created": 0, "model": model,
                       "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
            };
            let (delta, finish) = match reply {
                Reply::Text(t) => (json!({"role": "assistant", "content": t}), "stop"),
                Reply::Tool(name, args, _) => (
                    json!({"role": "assistant", "content": null, "tool_calls": [{"index": 0,
                        "id": id("call"), "type": "function",
                        "function": {"name": name, "arguments": args.to_string()}}]}),
                    "tool_calls",
                ),
            };
            let usage = json!({"id": cid, "object": "chat.completion.chunk", "created": 0,
                "model": model, "choices": [], "usage": {"prompt_tokens": USAGE_IN,
                "completion_tokens": USAGE_OUT, "total_tokens": USAGE_IN + USAGE_OUT}});
            if !stream {
                return vec![ev("", json!({"id": cid, "object": "chat.completion", "created": 0,
                    "model": model, "usage": usage["usage"],
                    "choices": [{"index": 0, "message": delta, "finish_reason": finish}]}))];
            }
            // Usage both in the finishing chunk (aider's litellm reads it there) and in the
            // trailing `choices: []` chunk that `stream_options.include_usage` asks for.
            let mut finish_chunk = chunk(json!({}), json!(finish));
            finish_chunk["usage"] = usage["usage"].clone();
            vec![
                ev("", chunk(delta, Value::Null)),
                ev("", finish_chunk),
                ev("", usage),
                ("".into(), "[DONE]".into()),
            ]
        }
    }
}
