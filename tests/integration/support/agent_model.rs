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
use std::io::{self, BufRead, BufReader, Read, Write};
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
    Fail {
        status: u16,
        retry_after: Option<u64>,
    },
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

struct State {
    default: Script,
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
            default,
            scripts: Vec::new(),
            seen: Vec::new(),
        }));
        let st = state.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let st = st.clone();
                std::thread::spawn(move || serve(conn, &st));
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
        self.state.lock().unwrap().default = script;
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

fn read_request(reader: &mut BufReader<TcpStream>) -> io::Result<Option<Request>> {
    let mut first = String::new();
    if reader.read_line(&mut first)? == 0 {
        return Ok(None);
    }
    let mut parts = first.split_whitespace().map(str::to_string);
    let (method, path) = (
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
    );
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
    // All four CLIs send a content-length (none sends a chunked body).
    let length = headers.get("content-length").and_then(|l| l.parse().ok());
    let mut body = vec![0u8; length.unwrap_or(0)];
    reader.read_exact(&mut body)?;
    Ok(Some(Request {
        method,
        path,
        headers,
        body,
    }))
}

/// Claude: `X-Claude-Code-Session-Id`; Codex: `session-id`; opencode: `x-session-id`.
const SESSION_HEADERS: [&str; 3] = ["x-claude-code-session-id", "session-id", "x-session-id"];

static COUNTER: AtomicUsize = AtomicUsize::new(1);

fn serve(conn: TcpStream, state: &Mutex<State>) -> io::Result<()> {
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut out = conn;
    // Keep-alive: JSON replies carry their length; a stream ends with the connection.
    while let Some(req) = read_request(&mut reader)? {
        let route = req.path.split('?').next().unwrap_or_default();
        let api = match route {
            r if r.ends_with("/messages") => "messages",
            r if r.ends_with("/responses") => "responses",
            r if r.ends_with("/chat/completions") => "chat",
            r if r.ends_with("/models") && req.method == "GET" => {
                let data: Vec<Value> = ["standin", "gpt-5.5", "claude-opus-5-5"]
                    .map(|id| json!({"id": id, "object": "model", "created": 0, "owned_by": "standin"}))
                    .to_vec();
                send(
                    &mut out,
                    200,
                    None,
                    &json!({"object": "list", "data": data}),
                )?;
                continue;
            }
            _ => {
                let error = json!({"error": {"message": "no such route"}});
                send(&mut out, 404, None, &error)?;
                continue;
            }
        };
        let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
        if let Ok(dir) = std::env::var("AGENT_MODEL_DUMP") {
            let n = COUNTER.fetch_add(1, Ordering::SeqCst);
            let dump = json!({"path": req.path, "headers": req.headers, "body": body});
            let _ = std::fs::create_dir_all(&dir);
            let _ = std::fs::write(format!("{dir}/{n:04}-{api}.json"), dump.to_string());
        }
        let (first_user, turns) = (first_user(api, &body), turns(api, &body));
        let script = {
            let st = state.lock().unwrap();
            let keyed = st
                .scripts
                .iter()
                .find(|(m, _)| first_user.contains(m.as_str()));
            keyed.map_or(&st.default, |(_, s)| s).clone()
        };
        let session = SESSION_HEADERS
            .iter()
            .find_map(|h| req.headers.get(*h).cloned());
        let status = match script {
            Script::Fail { status, .. } => status,
            _ => 200,
        };
        let model = str_of(&body["model"]);
        let seen = Seen {
            api,
            model,
            session,
            first_user,
            turns,
            status,
        };
        state.lock().unwrap().seen.push(seen);
        let stream = api == "responses" || body["stream"].as_bool().unwrap_or(false);
        match script {
            Script::Fail {
                status,
                retry_after,
            } => send(&mut out, status, retry_after, &error_body(api, status))?,
            Script::Hang => return hang(out, api, stream, &body),
            Script::Write { files, final_text } => {
                let reply = reply(api, &body, turns, &files, &final_text);
                let events = render(api, &body, &reply, stream);
                if !stream {
                    send(&mut out, 200, None, &events[0])?;
                    continue;
                }
                out.write_all(SSE_HEAD.as_bytes())?;
                for e in &events {
                    out.write_all(sse(api, e).as_bytes())?;
                }
                if api == "chat" {
                    out.write_all(b"data: [DONE]\n\n")?;
                }
                out.flush()?;
                return out.shutdown(Shutdown::Both);
            }
        }
    }
    Ok(())
}

fn send(out: &mut TcpStream, status: u16, retry: Option<u64>, body: &Value) -> io::Result<()> {
    let reason = match status {
        200 => "OK",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        529 => "Overloaded",
        _ => "Error",
    };
    let body = body.to_string();
    let retry = retry
        .map(|s| format!("retry-after: {s}\r\n"))
        .unwrap_or_default();
    let length = body.len();
    write!(out, "HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n{retry}content-length: {length}\r\n\r\n{body}")?;
    out.flush()
}

const SSE_HEAD: &str = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
                        cache-control: no-cache\r\nconnection: close\r\n\r\n";

/// One server-sent event: Anthropic and Responses name each event after its `type`.
fn sse(api: &str, data: &Value) -> String {
    match data["type"].as_str() {
        Some(name) if api != "chat" => format!("event: {name}\ndata: {data}\n\n"),
        _ => format!("data: {data}\n\n"),
    }
}

/// Headers and the first event (for JSON, the first byte), then silence until the client hangs up.
fn hang(mut out: TcpStream, api: &str, stream: bool, body: &Value) -> io::Result<()> {
    if stream {
        let first = render(api, body, &Reply::Text("…".into()), true).swap_remove(0);
        out.write_all(format!("{SSE_HEAD}{}", sse(api, &first)).as_bytes())?;
    } else {
        let head =
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{";
        out.write_all(head.as_bytes())?;
    }
    out.flush()?;
    out.set_read_timeout(Some(Duration::from_millis(500)))?;
    let until = Instant::now() + HANG_LIMIT;
    let mut buf = [0u8; 4096];
    while Instant::now() < until {
        match out.read(&mut buf) {
            Ok(0) => break,
            Err(e)
                if !matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                break
            }
            _ => {}
        }
    }
    Ok(())
}

fn error_body(api: &str, status: u16) -> Value {
    let (kind, message) = match status {
        429 => ("rate_limit_error", "stand-in rate limit"),
        529 => ("overloaded_error", "stand-in overloaded"),
        400 => ("invalid_request_error", "stand-in bad request"),
        _ => ("api_error", "stand-in boom"),
    };
    if api == "messages" {
        return json!({"type": "error", "error": {"type": kind, "message": message}});
    }
    let (kind, code) = match status {
        429 => ("requests", "rate_limit_exceeded"),
        400 => ("invalid_request_error", "invalid_request"),
        _ => ("server_error", "server_error"),
    };
    json!({"error": {"message": message, "type": kind, "param": null, "code": code}})
}

fn str_of(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_string()
}

fn array(v: &Value) -> &[Value] {
    v.as_array().map(Vec::as_slice).unwrap_or_default()
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

/// The conversation: `messages` (Responses: `input` items). Aider's preamble (a worked example,
/// the repository map and the files it added, each acknowledged with an assistant message
/// starting `Ok`) is left out: its conversation starts after the last acknowledgement.
fn history(api: &str, body: &Value) -> Vec<Value> {
    let mut all = array(
        &body[if api == "responses" {
            "input"
        } else {
            "messages"
        }],
    )
    .to_vec();
    if is_aider(body) {
        if let Some(at) = all.iter().rposition(|m| {
            m["role"] == "assistant" && m["content"].as_str().is_some_and(|c| c.starts_with("Ok"))
        }) {
            all.drain(..=at);
        }
    }
    all
}

/// Aider sends no tools; its system prompt asks for the `whole` format's *file listing*.
fn is_aider(body: &Value) -> bool {
    array(&body["messages"])
        .iter()
        .any(|m| m["role"] == "system" && text_of(&m["content"]).contains("*file listing*"))
}

/// The prompt: the first user message, without what the CLIs wrap around it (Claude's
/// `<system-reminder>` blocks, Codex's `<environment_context>` and AGENTS.md messages, aider's
/// format reminder) and skipping opencode's title request (its second user message is the prompt).
fn first_user(api: &str, body: &Value) -> String {
    if let (Some(s), "responses") = (body["input"].as_str(), api) {
        return s.to_string();
    }
    let wrapped = |t: &str| t.starts_with("<system-reminder>") || t.starts_with("# AGENTS.md");
    let text = |m: &Value| match &m["content"] {
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .filter(|t| !wrapped(t))
            .collect::<Vec<_>>()
            .join("\n"),
        c => {
            let t = text_of(c);
            t[..t
                .find("\n\n\nTo suggest changes to a file")
                .unwrap_or(t.len())]
                .to_string()
        }
    };
    let history = history(api, body);
    let mut users = history.iter().filter(|m| m["role"] == "user").map(text);
    users
        .find(|t| {
            let context = api == "responses" && t.starts_with('<');
            !(t.is_empty() || context || t.starts_with("Generate a title for this conversation:"))
        })
        .unwrap_or_default()
}

/// Model turns already in the history: assistant messages; for Responses, also tool calls.
fn turns(api: &str, body: &Value) -> usize {
    let calls = ["function_call", "custom_tool_call"];
    let is_turn = |m: &&Value| {
        m["role"] == "assistant"
            || (api == "responses" && calls.contains(&m["type"].as_str().unwrap_or_default()))
    };
    history(api, body).iter().filter(is_turn).count()
}

/// The agent's working directory as the request states it (Claude: `Primary working
/// directory: X`; Codex: `<cwd>X</cwd>`; opencode: `Working directory: X`). Aider states none.
pub fn cwd_of(api: &str, body: &Value) -> Option<String> {
    let mut texts: Vec<String> = history(api, body)
        .iter()
        .map(|m| text_of(&m["content"]))
        .collect();
    texts.push(text_of(&body["system"]));
    texts.push(str_of(&body["instructions"]));
    let find = |t: &str, start: &str, end: &str| {
        let rest = &t[t.find(start)? + start.len()..];
        Some(
            rest[..rest.find(end).unwrap_or(rest.len())]
                .trim()
                .to_string(),
        )
    };
    texts.iter().find_map(|t| {
        find(t, "<cwd>", "</cwd>")
            .or_else(|| find(t, "Primary working directory:", "\n"))
            .or_else(|| find(t, "Working directory:", "\n"))
    })
}

enum Reply {
    Text(String),
    /// A function tool call: name and arguments.
    Call(String, Value),
    /// A free-form (custom) tool call, Codex's `apply_patch`: name and input text.
    Custom(String, String),
}

/// The tools the request offers: name, parameter names, whether free-form.
fn tools(body: &Value) -> Vec<(String, Vec<String>, bool)> {
    let list = array(&body["tools"]);
    let tool = |t: &Value| {
        let f = if t["function"].is_object() {
            &t["function"]
        } else {
            t
        };
        let schema = if f["input_schema"].is_object() {
            &f["input_schema"]
        } else {
            &f["parameters"]
        };
        let params = schema["properties"]
            .as_object()
            .map(|p| p.keys().cloned().collect());
        let name = str_of(&f["name"]);
        (name, params.unwrap_or_default(), t["type"] == "custom")
    };
    list.iter().map(tool).collect()
}

fn reply(api: &str, body: &Value, turns: usize, files: &[(String, String)], last: &str) -> Reply {
    let tools = tools(body);
    if tools.is_empty() {
        // Aider gets every remaining file as a *file listing*; a tool-less side call (opencode's
        // title) gets the final text.
        if !is_aider(body) {
            return Reply::Text(last.into());
        }
        let listing = |(path, content): &(String, String)| {
            let nl = if content.ends_with('\n') { "" } else { "\n" };
            format!("{path}\n```\n{content}{nl}```\n\n")
        };
        return Reply::Text(files.iter().skip(turns).map(listing).collect::<String>() + last);
    }
    let Some((path, content)) = files.get(turns) else {
        return Reply::Text(last.into());
    };
    let abs = match cwd_of(api, body) {
        Some(cwd) if !path.starts_with('/') => format!("{}/{path}", cwd.trim_end_matches('/')),
        _ => path.clone(),
    };
    let has = |n: &str| tools.iter().find(|t| t.0 == n);
    let param = |params: &[String], keys: &[&'static str]| {
        keys.iter()
            .copied()
            .find(|k| params.iter().any(|p| p == k))
            .unwrap_or(keys[0])
    };
    if let Some((name, _, true)) = has("apply_patch") {
        let lines: String = content.lines().map(|l| format!("+{l}\n")).collect();
        let patch = format!("*** Begin Patch\n*** Add File: {abs}\n{lines}*** End Patch\n");
        return Reply::Custom(name.clone(), patch);
    }
    if let Some((name, params, _)) = has("Write").or_else(|| has("write")) {
        let key = param(params, &["file_path", "filePath", "path"]);
        return Reply::Call(name.clone(), json!({ key: abs, "content": content }));
    }
    // Only a shell (Codex with a model slug it does not know): a quoted here-document.
    let Some((name, params, _)) = has("exec_command").or_else(|| has("shell")) else {
        return Reply::Text(last.into());
    };
    let cmd = format!(
        "mkdir -p \"$(dirname '{abs}')\" && cat > '{abs}' <<'STANDIN_EOF'\n{content}\nSTANDIN_EOF"
    );
    let arg = if name == "shell" {
        json!(["bash", "-lc", cmd])
    } else {
        json!(cmd)
    };
    Reply::Call(
        name.clone(),
        json!({ param(params, &["cmd", "command"]): arg }),
    )
}

fn id(prefix: &str) -> String {
    format!(
        "{prefix}_standin{:06}",
        COUNTER.fetch_add(1, Ordering::SeqCst)
    )
}

/// The events of one answer in the request's protocol; a non-streaming answer is one JSON body.
fn render(api: &str, body: &Value, reply: &Reply, stream: bool) -> Vec<Value> {
    let model = body["model"].as_str().unwrap_or("standin");
    match api {
        "messages" => {
            let (block, delta, stop) = match reply {
                Reply::Text(t) => (
                    json!({"type": "text", "text": t}),
                    json!({"type": "text_delta", "text": t}),
                    "end_turn",
                ),
                Reply::Call(name, args) => (
                    json!({"type": "tool_use", "id": id("toolu"), "name": name, "input": args}),
                    json!({"type": "input_json_delta", "partial_json": args.to_string()}),
                    "tool_use",
                ),
                Reply::Custom(..) => unreachable!("free-form tools are Codex's"),
            };
            let msg = |content: Value, out: u64, stop: Value| {
                json!({"id": id("msg"), "type": "message", "role": "assistant", "model": model,
                    "content": content, "stop_reason": stop, "stop_sequence": null,
                    "usage": {"input_tokens": USAGE_IN, "output_tokens": out,
                              "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}})
            };
            if !stream {
                return vec![msg(json!([block]), USAGE_OUT, json!(stop))];
            }
            // The block starts empty and the delta fills it.
            let mut start = block;
            match start["type"].as_str() {
                Some("text") => start["text"] = json!(""),
                _ => start["input"] = json!({}),
            }
            vec![
                json!({"type": "message_start", "message": msg(json!([]), 1, Value::Null)}),
                json!({"type": "content_block_start", "index": 0, "content_block": start}),
                json!({"type": "content_block_delta", "index": 0, "delta": delta}),
                json!({"type": "content_block_stop", "index": 0}),
                json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
                       "usage": {"input_tokens": USAGE_IN, "output_tokens": USAGE_OUT}}),
                json!({"type": "message_stop"}),
            ]
        }
        "responses" => {
            let item = match reply {
                Reply::Text(t) => json!({"type": "message", "id": id("msg"), "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": t, "annotations": []}]}),
                Reply::Custom(name, input) => json!({"type": "custom_tool_call", "id": id("ctc"),
                    "call_id": id("call"), "name": name, "input": input, "status": "completed"}),
                Reply::Call(name, args) => json!({"type": "function_call", "id": id("fc"),
                    "call_id": id("call"), "name": name, "arguments": args.to_string(),
                    "status": "completed"}),
            };
            let rid = id("resp");
            let response = |status: &str, output: Value, usage: Value| {
                json!({"id": rid, "object": "response", "created_at": 0, "status": status,
                       "model": model, "output": output, "usage": usage})
            };
            let usage = json!({"input_tokens": USAGE_IN, "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": USAGE_OUT, "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": USAGE_IN + USAGE_OUT});
            let mut events = vec![
                json!({"type": "response.created",
                       "response": response("in_progress", json!([]), Value::Null)}),
                json!({"type": "response.output_item.added", "output_index": 0, "item": item}),
            ];
            if let Reply::Text(t) = reply {
                events.push(
                    json!({"type": "response.output_text.delta", "item_id": item["id"],
                    "output_index": 0, "content_index": 0, "delta": t}),
                );
            }
            events.push(
                json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
            );
            events.push(json!({"type": "response.completed",
                               "response": response("completed", json!([item]), usage)}));
            for (n, e) in events.iter_mut().enumerate() {
                e["sequence_number"] = json!(n);
            }
            events
        }
        _ => {
            let (delta, finish) = match reply {
                Reply::Text(t) => (json!({"role": "assistant", "content": t}), "stop"),
                Reply::Call(name, args) => (
                    json!({"role": "assistant", "content": null, "tool_calls": [{"index": 0,
                        "id": id("call"), "type": "function",
                        "function": {"name": name, "arguments": args.to_string()}}]}),
                    "tool_calls",
                ),
                Reply::Custom(..) => unreachable!("free-form tools are Codex's"),
            };
            let cid = id("chatcmpl");
            let usage = json!({"prompt_tokens": USAGE_IN, "completion_tokens": USAGE_OUT,
                               "total_tokens": USAGE_IN + USAGE_OUT});
            let chunk = |choices: Value| {
                json!({"id": cid, "object": "chat.completion.chunk", "created": 0, "model": model,
                       "choices": choices})
            };
            if !stream {
                return vec![json!({"id": cid, "object": "chat.completion", "created": 0,
                    "model": model, "usage": usage,
                    "choices": [{"index": 0, "message": delta, "finish_reason": finish}]})];
            }
            // Usage both in the finishing chunk (aider's litellm reads it there) and in the
            // trailing `choices: []` chunk that `stream_options.include_usage` asks for.
            let mut last = chunk(json!([{"index": 0, "delta": {}, "finish_reason": finish}]));
            last["usage"] = usage.clone();
            let mut tail = chunk(json!([]));
            tail["usage"] = usage;
            vec![
                chunk(json!([{"index": 0, "delta": delta, "finish_reason": null}])),
                last,
                tail,
            ]
        }
    }
}
