//! The worker end to end: a real `br`, a real git repository pushing to
//! a bare upstream, a real local HTTP server as the notification webhook, the real `braids`
//! binary — and scripted `sh` agents standing in for the LLM, the only scripted part.
//!
//! Tests checking a contract are named after its section (CONTRACTS.md): `c3_1_…` (context
//! order), `c3_2_…` (claim), `c3_3_…` (dependencies), `c3_5_…` (close after deliverable),
//! `c3_6_…` (commit), `c3_7_…` (iteration completion), `c3_8_…` (notifications), `c3_10_…`
//! (escalation), `c3_11_…` (autonomy), `c4_4_…` (push), `c4_5_…` (frozen iterations).
//!
//! Lib-level tests that need trait doubles (a recording tracker) call `Worker::run` directly.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[cfg(feature = "failpoints")]
mod crash;
mod workspaces;

use braids::config::Config;
use braids::model::{Bead, BeadId, SpawnMessage};
use braids::system::paths::Paths;
use braids::tracker::{self, ClaimOutcome, Tracker, TrackerError, TrackerKind, TrackerOptions};
use braids::worker::{ArgvExecutor, Ending, ExecRequest, ExecResult, Executor, Worker};
use serde_json::Value;

use crate::support::files::{bead_worktree_files, files_under, worktrees_in_use};
use crate::support::procs::alive;
use crate::support::{br_path, poll_until, wait_for, Install, Sandbox};

// ---------------------------------------------------------------------------------------------
// A webhook: a real HTTP server on 127.0.0.1, recording every request body
// ---------------------------------------------------------------------------------------------

/// A tiny HTTP server answering every POST with `status`, recording each JSON body.
struct Hook {
    url: String,
    bodies: Arc<Mutex<Vec<Value>>>,
    status: Arc<AtomicU16>,
}

impl Hook {
    fn start() -> Hook {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let status = Arc::new(AtomicU16::new(200));
        let (b, s) = (bodies.clone(), status.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                serve(conn, &b, s.load(Ordering::SeqCst));
            }
        });
        Hook {
            url,
            bodies,
            status,
        }
    }

    /// `(event, message)` of every notification received, in order.
    fn events(&self) -> Vec<(String, String)> {
        self.bodies
            .lock()
            .unwrap()
            .iter()
            .map(|v| {
                (
                    v["event"].as_str().unwrap_or_default().to_string(),
                    v["content"].as_str().unwrap_or_default().to_string(),
                )
            })
            .collect()
    }

    fn messages(&self, event: &str) -> Vec<String> {
        self.events()
            .into_iter()
            .filter(|(e, _)| e == event)
            .map(|(_, m)| m)
            .collect()
    }
}

/// Reads one request (headers, then a Content-Length or chunked body) and answers it.
fn serve(mut conn: TcpStream, bodies: &Mutex<Vec<Value>>, status: u16) {
    conn.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        match conn.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
    let header = |name: &str| {
        head.lines().find_map(|l| {
            l.strip_prefix(&format!("{name}:"))
                .map(|v| v.trim().to_string())
        })
    };
    let chunked = header("transfer-encoding").is_some_and(|v| v.contains("chunked"));
    let length: usize = header("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let complete = |b: &[u8]| {
        if chunked {
            b.ends_with(b"0\r\n\r\n")
        } else {
            b.len() >= length
        }
    };
    let mut body = buf[head_end..].to_vec();
    while !complete(&body) {
        match conn.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => body.extend_from_slice(&chunk[..n]),
        }
    }
    if chunked {
        body = dechunk(&body);
    }
    let value = serde_json::from_slice(&body)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into_owned()));
    bodies.lock().unwrap().push(value);
    let reason = if status == 200 { "OK" } else { "Error" };
    let _ = write!(
        conn,
        "HTTP/1.1 {status} {reason}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    );
}

fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(i) = b.windows(2).position(|w| w == b"\r\n") {
        let size = usize::from_str_radix(String::from_utf8_lossy(&b[..i]).trim(), 16).unwrap_or(0);
        if size == 0 {
            break;
        }
        out.extend_from_slice(&b[i + 2..i + 2 + size]);
        b = &b[i + 2 + size + 2..];
    }
    out
}

// ---------------------------------------------------------------------------------------------
// A project: `braids new` with br, a bare upstream, the webhook, a scripted agent
// ---------------------------------------------------------------------------------------------

const SLUG: &str = "app";

struct Project {
    sb: Sandbox,
    root: PathBuf,
    upstream: PathBuf,
    hook: Hook,
    /// One line per executor invocation: the bead id.
    calls: PathBuf,
    agent: PathBuf,
}

/// The result of one `braids worker --json` run.
struct WorkerOut {
    code: i32,
    run: Value,
    stderr: String,
}

impl WorkerOut {
    fn ending(&self) -> &str {
        self.run["ending"]["ending"].as_str().unwrap_or_default()
    }
    fn steps(&self) -> Vec<(String, String)> {
        self.run["steps"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|s| {
                        (
                            s["name"].as_str().unwrap_or_default().to_string(),
                            s["detail"].as_str().unwrap_or_default().to_string(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
    fn step_names(&self) -> Vec<String> {
        self.steps().into_iter().map(|(n, _)| n).collect()
    }
    fn details(&self, name: &str) -> Vec<String> {
        self.steps()
            .into_iter()
            .filter(|(n, _)| n == name)
            .map(|(_, d)| d)
            .collect()
    }
}

impl std::fmt::Debug for WorkerOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {}\nrun: {:#}\nstderr: {}",
            self.code, self.run, self.stderr
        )
    }
}

impl Project {
    /// A registered br project with Channel `#dev`, a committed `src/main.txt`, pushed to a
    /// bare upstream; config.toml points the executor at `agent.sh` and notifications at a
    /// fresh webhook. Write the agent with [`Project::agent`].
    fn new() -> Project {
        let sb = Install::new().build();
        sb.write(
            ".gitconfig",
            "[user]\n\tname = Tester\n\temail = tester@example.com\n[init]\n\tdefaultBranch = main\n",
        );
        let root = sb
            .new_project(SLUG)
            .br()
            .channel("#dev")
            .no_iteration()
            .create()
            .root;
        sb.write(root.join("src/main.txt"), "fn main() {}\n");
        sb.git(&root, &["add", "-A"]);
        sb.git(&root, &["commit", "-q", "-m", "Add the source"]);
        let upstream = sb.home().join("upstream.git");
        sb.git(
            sb.home(),
            &["init", "-q", "--bare", upstream.to_str().unwrap()],
        );
        sb.git(
            &root,
            &["remote", "add", "origin", upstream.to_str().unwrap()],
        );
        sb.git(&root, &["push", "-q", "-u", "origin", "HEAD"]);
        let hook = Hook::start();
        let agent = sb.home().join("agent.sh");
        let p = Project {
            calls: sb.home().join("calls"),
            sb,
            root,
            upstream,
            hook,
            agent,
        };
        p.configure("");
        p
    }

    /// Writes config.toml: the agent as executor, no retry (a failed attempt blocks the bead;
    /// the tests about retries set their own), the webhook, plus `extra`.
    fn configure(&self, extra: &str) {
        self.configure_with_webhook(&self.hook.url.clone(), extra);
    }

    fn configure_with_webhook(&self, url: &str, extra: &str) {
        let text = format!(
            "[worker]\nexecutor = [{:?}, \"{{deliverable}}\", \"{{prompt_file}}\"]\nretries = 0\nretry_backoff = \"0s\"\nsandbox = \"off\"\n\
             [notify]\nwebhook = {url:?}\ntimeout_secs = 5\n{extra}",
            self.agent.to_str().unwrap()
        );
        self.sb.write(".openclaw/braids/config.toml", &text);
    }

    /// The scripted agent: `$1` is the deliverable path, `$2` the prompt file, cwd the
    /// project. Every invocation is counted first.
    fn agent(&self, body: &str) {
        self.sb.script(
            &self.agent,
            &format!("echo \"$BRAIDS_BEAD\" >> {:?}\n{body}", self.calls),
        );
    }

    /// How many times the executor ran.
    fn calls(&self) -> usize {
        std::fs::read_to_string(&self.calls)
            .unwrap_or_default()
            .lines()
            .count()
    }

    fn br(&self, args: &[&str]) -> String {
        self.sb.br(SLUG, args)
    }

    /// Creates beads, lists them as iteration 1's Stories (status `status`), commits and
    /// pushes the plan.
    fn plan(&self, status: &str, titles: &[&str]) -> Vec<String> {
        let ids: Vec<String> = titles.iter().map(|t| self.sb.br_create(SLUG, t)).collect();
        let stories: Vec<(&str, &str)> = ids
            .iter()
            .map(String::as_str)
            .zip(titles.iter().copied())
            .collect();
        self.sb.iteration(SLUG, 1, status, &stories);
        self.commit_setup("Plan iteration 1");
        ids
    }

    /// Commits and pushes whatever the test changed, as a person would.
    fn commit_setup(&self, msg: &str) {
        self.sb.git(&self.root, &["add", "-A"]);
        self.sb
            .git(&self.root, &["commit", "-q", "--allow-empty", "-m", msg]);
        if self.upstream.exists() {
            self.sb.git(&self.root, &["push", "-q"]);
        }
    }

    fn iteration_dir(&self) -> PathBuf {
        self.root.join(".braids/iterations/001")
    }

    fn spawn_message(&self, bead: &str) -> String {
        format!(
            "Project: {}\nBead: {bead}\nIteration: 1\nChannel: #dev\n",
            self.root.display()
        )
    }

    /// `braids worker --json` with the spawn message on stdin.
    fn worker(&self, bead: &str) -> WorkerOut {
        let o = self
            .sb
            .braids()
            .args(["worker", "--json"])
            .write_stdin(self.spawn_message(bead))
            .timeout(Duration::from_secs(120))
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&o.stdout);
        WorkerOut {
            code: o.status.code().unwrap_or(-1),
            run: serde_json::from_str(&stdout).unwrap_or(Value::String(stdout.into_owned())),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }

    /// The bead as br shows it.
    fn bead(&self, id: &str) -> Value {
        let v: Value = serde_json::from_str(&self.br(&["show", id, "--json"])).unwrap();
        v[0].clone()
    }

    fn status(&self, id: &str) -> String {
        self.bead(id)["status"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// Commit subjects, newest first.
    fn log(&self) -> Vec<String> {
        lines(&self.sb.git(&self.root, &["log", "--format=%s"]))
    }

    fn upstream_log(&self) -> Vec<String> {
        lines(&self.sb.git(&self.upstream, &["log", "--format=%s", "main"]))
    }

    fn head(&self) -> String {
        self.sb
            .git(&self.root, &["rev-parse", "HEAD"])
            .trim()
            .to_string()
    }

    /// The files a commit touched, relative to the project root.
    fn files_of(&self, rev: &str) -> Vec<String> {
        lines(
            &self
                .sb
                .git(&self.root, &["show", "--name-only", "--format=", rev]),
        )
    }

    /// `git status --porcelain`: what is not committed.
    fn dirty(&self) -> Vec<String> {
        lines(&self.sb.git(&self.root, &["status", "--porcelain"]))
    }

    /// The bead's deliverables in iteration 1, relative to the project root.
    fn deliverables(&self, id: &str) -> Vec<String> {
        let bead = BeadId::new(id).unwrap();
        braids::format::deliverable::find(&self.iteration_dir(), &bead)
            .into_iter()
            .map(|p| rel(&self.root, &p))
            .collect()
    }

    fn set_field(&self, key: &str, value: &str) {
        self.sb.set_field(SLUG, key, value);
    }

    /// Every log braids wrote (the workers' session logs), for a failure message.
    fn logs(&self) -> String {
        let mut dump = String::new();
        for e in files_under(&self.sb.braids_dir().join("logs")) {
            dump.push_str(&format!(
                "--- {}\n{}\n",
                e.display(),
                std::fs::read_to_string(&e).unwrap_or_default()
            ));
        }
        dump
    }

    /// Replaces text in PROJECT.md.
    fn edit_project(&self, from: &str, to: &str) {
        let p = self.root.join(".braids/PROJECT.md");
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(text.contains(from), "PROJECT.md lacks {from:?}:\n{text}");
        std::fs::write(&p, text.replace(from, to)).unwrap();
    }
}

fn lines(s: &str) -> Vec<String> {
    s.lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::to_string)
        .collect()
}

fn rel(root: &Path, p: &Path) -> String {
    p.strip_prefix(root)
        .unwrap_or(p)
        .to_string_lossy()
        .into_owned()
}

/// An agent that does the job: changes `src/main.txt`, writes a deliverable whose Summary is
/// `Did <bead>.`, reports `pass` in the bead's own report file. It talks on stdout, as agents
/// do: that must not spoil `braids worker --json`.
const GOOD_AGENT: &str = r#"echo "agent: working on $BRAIDS_BEAD"
echo "// work for $BRAIDS_BEAD" >> src/main.txt
cat > "$1" <<EOF
# Work on $BRAIDS_BEAD

## Summary

Did $BRAIDS_BEAD.

## Details

Changed src/main.txt.
EOF
printf 'status: pass\nreason: null\nsummary: did the work\n' > "$BRAIDS_RESULT_FILE"
echo "agent: done"
"#;

fn success_subject(id: &str) -> String {
    format!("Did {id}. ({id})")
}

/// Whether the process is gone (or a zombie nobody reaped: it runs nothing).
fn process_gone(pid: i32) -> bool {
    !alive(pid as u32)
}

// ---------------------------------------------------------------------------------------------
// 1. The success path
// ---------------------------------------------------------------------------------------------

#[test]
fn c3_6_success_closes_commits_pushes_and_notifies() {
    let p = Project::new();
    p.edit_project(
        "| bead-complete | on |",
        "| bead-complete | on (mention <@42>) |",
    );
    let ids = p.plan("active", &["Build the widget", "Polish the widget"]);
    p.agent(GOOD_AGENT);
    let before = p.log().len();

    let out = p.worker(&ids[0]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.ending(), "completed", "{out:?}");
    assert_eq!(p.calls(), 1);
    assert_eq!(p.status(&ids[0]), "closed");
    assert_eq!(p.status(&ids[1]), "open", "the other bead is untouched");

    // One commit `<summary> (<bead-id>)`, with the deliverable and the change.
    let log = p.log();
    assert_eq!(log.len(), before + 1, "exactly one new commit: {log:?}");
    assert_eq!(log[0], success_subject(&ids[0]));
    let files = p.files_of("HEAD");
    let deliverable = p.deliverables(&ids[0]);
    assert_eq!(deliverable.len(), 1, "{deliverable:?}");
    assert!(
        deliverable[0].ends_with("-build-the-widget.md"),
        "{deliverable:?}"
    );
    for f in [
        deliverable[0].as_str(),
        "src/main.txt",
        ".beads/issues.jsonl",
    ] {
        assert!(files.contains(&f.to_string()), "{f} not in {files:?}");
    }
    assert!(
        !files.iter().any(|f| f.starts_with(".ai/")),
        "the status report is for braids, never committed: {files:?}"
    );
    assert_eq!(p.dirty(), Vec::<String>::new(), "everything committed");

    // Pushed (4.4): the bare upstream has the same commit.
    assert_eq!(p.upstream_log()[0], success_subject(&ids[0]));
    assert_eq!(
        p.sb.git(&p.upstream, &["rev-parse", "main"]).trim(),
        p.head()
    );
    assert_eq!(out.details("push"), ["pushed"]);

    // bead-start then bead-complete, the mention appended to the one configured.
    let events = p.hook.events();
    assert_eq!(
        events.iter().map(|(e, _)| e.as_str()).collect::<Vec<_>>(),
        ["bead-start", "bead-complete"],
        "{events:?}"
    );
    assert!(events[0].1.contains(&ids[0]) && !events[0].1.contains("<@42>"));
    assert!(
        events[1].1.contains(&ids[0]) && events[1].1.ends_with(" <@42>"),
        "{events:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// 2–5. Escalation (3.10)
// ---------------------------------------------------------------------------------------------

/// No success commit for the bead: only `Partial: …` commits may mention it.
fn assert_no_success_commit(p: &Project, id: &str) {
    let suffix = format!("({id})");
    let bad: Vec<String> = p
        .log()
        .into_iter()
        .filter(|s| s.ends_with(&suffix) && !s.starts_with("Partial: "))
        .collect();
    assert!(bad.is_empty(), "success commit for a failed bead: {bad:?}");
}

#[test]
fn c3_10_no_deliverable_is_retried_once_then_blocked_with_a_partial_deliverable() {
    let p = Project::new();
    p.configure("");
    let cfg = p.sb.home().join(".openclaw/braids/config.toml");
    let text = std::fs::read_to_string(&cfg)
        .unwrap()
        .replace("retries = 0", "retries = 1");
    std::fs::write(&cfg, text).unwrap();
    let ids = p.plan("active", &["Write the parser"]);
    p.agent("mkdir -p .ai\nprintf 'status: pass\\nsummary: trust me\\n' > .ai/executor-result\n");

    // The first failure sends the bead back to open, to wait its backoff (0 s here).
    let out = p.worker(&ids[0]);
    assert_eq!(out.code, 3, "{out:?}");
    assert_eq!(out.ending(), "retrying", "{out:?}");
    assert_eq!(p.calls(), 1);
    assert_eq!(p.status(&ids[0]), "open");
    assert!(
        p.hook.messages("blocker").is_empty(),
        "a retry tells nobody"
    );
    // The second trips the breaker (retries = 1).
    let out = p.worker(&ids[0]);
    assert_eq!(out.ending(), "blocked", "{out:?}");
    assert_eq!(p.calls(), 2, "retried exactly once");
    assert_eq!(p.status(&ids[0]), "blocked");

    let partial = p.deliverables(&ids[0]);
    assert_eq!(partial.len(), 1, "{partial:?}");
    let text = std::fs::read_to_string(p.root.join(&partial[0])).unwrap();
    assert!(
        text.contains("## Summary") && text.contains("Not completed"),
        "{text}"
    );
    for tried in [
        "attempt 1",
        "attempt 2",
        "wrote no deliverable",
        "failed 2 times in a row",
    ] {
        assert!(text.contains(tried), "partial lacks {tried:?}:\n{text}");
    }
    assert_no_success_commit(&p, &ids[0]);
    assert!(
        p.log()[0].starts_with("Partial: "),
        "the partial deliverable is committed: {:?}",
        p.log()
    );
    let blockers = p.hook.messages("blocker");
    assert_eq!(blockers.len(), 1, "{:?}", p.hook.events());
    assert!(blockers[0].contains(&ids[0]));
    assert!(p.hook.messages("bead-complete").is_empty());
}

#[test]
fn an_agent_that_did_the_work_but_sent_no_report_completes_with_a_note() {
    let p = Project::new();
    let ids = p.plan("active", &["Write the parser"]);
    // GOOD_AGENT without its status report.
    p.agent(&GOOD_AGENT.replace(
        "printf 'status: pass\\nreason: null\\nsummary: did the work\\n' > \"$BRAIDS_RESULT_FILE\"\n",
        "",
    ));
    let out = p.worker(&ids[0]);
    assert_eq!(out.ending(), "completed", "{out:?}");
    assert_eq!(p.calls(), 1, "not retried");
    assert_eq!(p.status(&ids[0]), "closed");
    assert!(
        p.log().contains(&success_subject(&ids[0])),
        "not a Partial: commit: {:?}",
        p.log()
    );
    assert!(
        out.details("report")[0].contains("no status report"),
        "{out:?}"
    );
    let text = std::fs::read_to_string(p.root.join(&p.deliverables(&ids[0])[0])).unwrap();
    assert!(text.contains("Did "), "{text}");
    assert!(text.contains("the agent sent no status report"), "{text}");
    // Without a fresh deliverable, or with a failing exit, no report is still a failure.
    let q = Project::new();
    let ids = q.plan("active", &["Write the parser"]);
    q.agent("echo 'did nothing'\n");
    let out = q.worker(&ids[0]);
    assert_eq!(out.ending(), "blocked", "{out:?}");
    assert!(
        out.details("execute")[0].contains("exit 0, no status report"),
        "no Debug text: {out:?}"
    );
}

#[test]
fn c3_10_question_notifies_and_blocks_without_retry() {
    let p = Project::new();
    let ids = p.plan("active", &["Design the API"]);
    p.agent(
        "mkdir -p .ai\nprintf 'status: needs_human\\nreason: needs_clarification\\nsummary: Should the API speak JSON or XML?\\n' > .ai/executor-result\n",
    );

    let out = p.worker(&ids[0]);
    assert_eq!(out.code, 3, "{out:?}");
    assert_eq!(out.ending(), "awaiting-human", "{out:?}");
    assert_eq!(p.calls(), 1, "a question is not retried");
    assert_eq!(p.status(&ids[0]), "blocked");
    let questions = p.hook.messages("question");
    assert_eq!(questions.len(), 1, "{:?}", p.hook.events());
    assert!(
        questions[0].contains("Should the API speak JSON or XML?")
            && questions[0].contains(&ids[0]),
        "{questions:?}"
    );
    assert!(p.hook.messages("bead-complete").is_empty());
    assert_no_success_commit(&p, &ids[0]);
}

#[test]
fn c3_10_a_guardrail_conflict_blocks_at_once_naming_the_guardrail() {
    let p = Project::new();
    p.sb.write(
        p.root.join(".braids/PROJECT.md"),
        &(std::fs::read_to_string(p.root.join(".braids/PROJECT.md")).unwrap()
            + "\n## Guardrails\n\n- Never touch the billing schema.\n"),
    );
    p.commit_setup("Guardrails");
    let ids = p.plan("active", &["Migrate invoices"]);
    // The agent reads the guardrail in its prompt, and stops as the prompt tells it to.
    p.agent(
        "grep -q 'Never touch the billing schema.' \"$2\" || exit 9\n\
         grep -q 'reason: guardrail_conflict' \"$2\" || exit 9\n\
         printf 'status: failing\\nreason: guardrail_conflict\\nsummary: Guardrail \"Never touch the billing schema\" forbids the migration\\n' > \"$BRAIDS_RESULT_FILE\"\n",
    );
    let out = p.worker(&ids[0]);
    assert_eq!(out.ending(), "blocked", "{out:?}");
    assert_eq!(p.calls(), 1, "a guardrail conflict is not retried");
    assert_eq!(p.status(&ids[0]), "blocked");
    let shown = p.br(&["show", &ids[0], "--json"]);
    assert!(
        shown.contains("guardrail conflict") && shown.contains("billing schema"),
        "{shown}"
    );
    let blockers = p.hook.messages("blocker");
    assert_eq!(blockers.len(), 1, "{:?}", p.hook.events());
    assert!(blockers[0].contains("billing schema"), "{blockers:?}");
    assert!(
        p.hook.messages("question").is_empty(),
        "a blocker, not a question"
    );
    assert_no_success_commit(&p, &ids[0]);
}

#[test]
fn c3_10_hung_executor_is_killed_with_its_process_group() {
    let p = Project::new();
    // About WorkerTimeout: 3 s against an agent that would run ten minutes; cut off, the run
    // ends an order of magnitude sooner, however loaded the machine.
    p.set_field("WorkerTimeout", "3");
    let ids = p.plan("active", &["Hang forever"]);
    let pids = p.sb.home().join("grandchild.pids");
    p.agent(&format!("sleep 600 &\necho $! >> {pids:?}\nsleep 600\n"));

    let start = Instant::now();
    let out = p.worker(&ids[0]);
    let took = start.elapsed();
    assert!(took < Duration::from_secs(60), "took {took:?}: {out:?}");
    // Most of WorkerTimeout goes to the agent; a tenth is kept for the steps after it.
    assert!(
        took >= Duration::from_secs(2),
        "stopped too early: {took:?}"
    );
    assert_eq!(out.code, 3, "{out:?}");
    assert_eq!(out.ending(), "blocked", "{out:?}");
    assert_eq!(p.status(&ids[0]), "blocked");

    let executed = out.details("execute");
    assert!(executed[0].contains("timed out"), "{executed:?}");
    // Every executor started was killed with its whole group: its `sleep 300` too.
    let started: Vec<i32> = std::fs::read_to_string(&pids)
        .unwrap()
        .lines()
        .map(|l| l.trim().parse().unwrap())
        .collect();
    assert_eq!(started.len(), p.calls());
    for pid in started {
        assert!(
            poll_until(Duration::from_secs(30), || process_gone(pid)),
            "grandchild {pid} survived the kill"
        );
    }
    let partial = p.deliverables(&ids[0]);
    assert_eq!(partial.len(), 1, "{partial:?}");
    let text = std::fs::read_to_string(p.root.join(&partial[0])).unwrap();
    assert!(text.contains("timed out"), "{text}");
    assert_eq!(p.hook.messages("blocker").len(), 1, "{:?}", p.hook.events());
    assert_no_success_commit(&p, &ids[0]);
}

#[test]
fn c3_10_garbage_status_is_never_trusted() {
    let p = Project::new();
    let ids = p.plan(
        "active",
        &["Passing is not pass", "Binary junk", "Junk in the value"],
    );
    // A good deliverable every time; only the status report is wrong.
    p.agent(&format!(
        r#"mkdir -p .ai
cat > "$1" <<EOF
# Work

## Summary

Did it.
EOF
case "$BRAIDS_BEAD" in
  {0}) printf 'status: passing\nsummary: did it\n' > .ai/executor-result ;;
  {1}) printf '\377\376\000\001status\000: pass\n\033[0m\377' > .ai/executor-result ;;
  *) printf 'status: pass\377\000\nsummary: did it\n' > .ai/executor-result ;;
esac
"#,
        ids[0], ids[1]
    ));

    for (i, id) in ids.iter().enumerate() {
        let out = p.worker(id);
        assert_eq!(out.code, 3, "{id}: {out:?}");
        assert_eq!(out.ending(), "blocked", "{id}: {out:?}");
        assert_eq!(p.status(id), "blocked", "{id}");
        assert_eq!(
            p.calls(),
            i + 1,
            "{id}: one attempt, and retries 0 blocks it"
        );
        assert_no_success_commit(&p, id);
        let executed = out.details("execute").join("\n");
        assert!(!executed.contains(": pass"), "{executed}");
    }
    assert!(p.hook.messages("bead-complete").is_empty());
    assert_eq!(p.hook.messages("blocker").len(), 3);
}

#[test]
fn c3_4_a_deliverable_left_by_an_earlier_run_does_not_count() {
    let p = Project::new();
    let ids = p.plan("active", &["Try again"]);
    let mode = p.sb.home().join("mode");
    std::fs::write(&mode, "lazy").unwrap();
    // Lazy: reports pass and writes nothing. Otherwise the good agent.
    p.agent(&format!(
        "if [ \"$(cat {mode:?})\" = lazy ]; then mkdir -p .ai; printf 'status: pass\\n' > .ai/executor-result; exit 0; fi\n{GOOD_AGENT}"
    ));

    let out = p.worker(&ids[0]);
    assert_eq!(out.ending(), "blocked", "{out:?}");
    let partial = p.deliverables(&ids[0]);
    assert_eq!(partial.len(), 1);

    // A person unblocks it; the agent again writes nothing: the old partial deliverable is
    // not the agent's work, so the bead is blocked again, never closed on it.
    p.br(&["update", &ids[0], "--status=open", "--json"]);
    let out = p.worker(&ids[0]);
    assert_eq!(out.ending(), "blocked", "{out:?}");
    assert_eq!(p.status(&ids[0]), "blocked");
    assert_no_success_commit(&p, &ids[0]);
    assert_eq!(
        p.deliverables(&ids[0]),
        partial,
        "still one deliverable per bead"
    );
    assert_eq!(p.calls(), 2);

    // This time the agent does the work, in the same file.
    std::fs::write(&mode, "good").unwrap();
    p.br(&["update", &ids[0], "--status=open", "--json"]);
    let out = p.worker(&ids[0]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(p.status(&ids[0]), "closed");
    assert_eq!(p.log()[1], success_subject(&ids[0]), "{:?}", p.log());
    assert_eq!(p.deliverables(&ids[0]), partial);
}

#[test]
fn c3_10_an_error_after_the_claim_blocks_or_escalates() {
    // git cannot commit while another git holds the index: the bead is closed by then (3.5),
    // and closed beads are final (4.6), so a person is told instead of a stranded bead.
    let p = Project::new();
    let ids = p.plan("active", &["Commit fails", "Other"]);
    p.agent(GOOD_AGENT);
    std::fs::write(p.root.join(".git/index.lock"), "").unwrap();

    let out = p.worker(&ids[0]);
    assert_eq!(out.code, 3, "{out:?}");
    assert_eq!(out.ending(), "failed", "{out:?}");
    assert_eq!(p.status(&ids[0]), "closed");
    let error = out.run["ending"]["error"].as_str().unwrap();
    assert!(error.contains("lock"), "{error}");
    let blockers = p.hook.messages("blocker");
    assert_eq!(blockers.len(), 1, "{:?}", p.hook.events());
    assert!(
        blockers[0].contains(&ids[0]) && blockers[0].contains("error"),
        "{blockers:?}"
    );

    // Before the close, the same error leaves the bead blocked, not in progress.
    std::fs::remove_file(p.root.join(".git/index.lock")).unwrap();
    p.agent("exit 1");
    std::fs::write(p.root.join(".git/index.lock"), "").unwrap();
    let out = p.worker(&ids[1]);
    assert_eq!(out.ending(), "failed", "{out:?}");
    assert_eq!(p.status(&ids[1]), "blocked");
    assert_eq!(p.hook.messages("blocker").len(), 2);
}

#[test]
fn c3_10_status_reports_of_other_runs_are_never_trusted() {
    let p = Project::new();
    let ids = p.plan(
        "active",
        &["Stale handoff", "Someone else's handoff", "Shared file"],
    );
    // A HANDOFF.md from an earlier session says pass; it is part of the project.
    p.sb.write(
        p.root.join(".ai/HANDOFF.md"),
        "---\nstatus: pass\nreason: null\n---\n\n# HANDOFF\n",
    );
    p.commit_setup("Handoff from an earlier session");
    // Every run writes a good deliverable and exits 0, but reports only as the case says.
    p.agent(&format!(
        r#"cat > "$1" <<EOF
# Work

## Summary

Did it.
EOF
case "$BRAIDS_BEAD" in
  {0}) ;;
  {1}) printf -- '---\nstory: {2}\nstatus: pass\n---\n' > .ai/HANDOFF.md ;;
  *) printf 'status: pass\n' > .ai/executor-result ;;
esac
"#,
        ids[0], ids[1], ids[2]
    ));
    // The stale HANDOFF.md is not read as this run's report: the run has none, and its exit
    // 0 and fresh deliverable complete the bead, saying so.
    let out = p.worker(&ids[0]);
    assert_eq!(out.ending(), "completed", "unchanged HANDOFF.md: {out:?}");
    assert!(
        out.details("report")[0].contains("no status report"),
        "unchanged HANDOFF.md: {out:?}"
    );
    let out = p.worker(&ids[1]);
    assert_eq!(
        out.ending(),
        "blocked",
        "HANDOFF.md about another story: {out:?}"
    );
    // With MaxWorkers 2 in a shared work tree, `.ai/executor-result` may be another worker's.
    p.set_field("MaxWorkers", "2");
    p.set_field("Workspace", "shared");
    p.commit_setup("Two workers");
    let out = p.worker(&ids[2]);
    assert_eq!(out.ending(), "blocked", "shared executor-result: {out:?}");
    assert_eq!(p.status(&ids[0]), "closed");
    for id in &ids[1..] {
        assert_eq!(p.status(id), "blocked");
        assert_no_success_commit(&p, id);
    }
    assert_eq!(p.calls(), 3, "one attempt each (retries 0)");
}

#[test]
fn c3_6_handoff_front_matter_reports_and_lists_the_files_to_commit() {
    let p = Project::new();
    let ids = p.plan("active", &["Report by handoff", "Next"]);
    p.agent(
        r#"echo changed >> src/main.txt
echo stray > src/scratch.txt
cat > "$1" <<EOF
# Work

## Summary

Handed off.
EOF
printf -- "---\nstory: $BRAIDS_BEAD\nstatus: pass\nreason: null\nfiles_changed:\n  - src/main.txt\n---\n\n# HANDOFF\n" > .ai/HANDOFF.md
"#,
    );
    let out = p.worker(&ids[0]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(p.log()[0], format!("Handed off. ({})", ids[0]));
    let mut files = p.files_of("HEAD");
    files.sort();
    let mut want = vec![
        p.deliverables(&ids[0])[0].clone(),
        ".beads/issues.jsonl".to_string(),
        "src/main.txt".to_string(),
    ];
    want.sort();
    assert_eq!(
        files, want,
        "the listed files, the deliverable, the tracker's record"
    );
}

// ---------------------------------------------------------------------------------------------
// 6–7. Before any work: dependencies (3.3) and the claim (3.2)
// ---------------------------------------------------------------------------------------------

#[test]
fn c3_3_open_dependency_blocks_before_work() {
    let p = Project::new();
    let ids = p.plan("active", &["Needs the schema", "Write the schema"]);
    p.agent(GOOD_AGENT);
    // As the tick does: claim the bead for braids, then spawn the worker. Meanwhile a person
    // adds a dependency that is not done.
    p.br(&["update", &ids[0], "--claim", "--actor=braids", "--json"]);
    p.br(&["dep", "add", &ids[0], &ids[1], "--json"]);

    let out = p.worker(&ids[0]);
    assert_eq!(out.code, 3, "{out:?}");
    assert_eq!(out.ending(), "dependencies-open", "{out:?}");
    assert_eq!(p.calls(), 0, "the executor never ran");
    assert_eq!(p.status(&ids[0]), "blocked");
    assert_eq!(p.status(&ids[1]), "open", "the dependency is untouched");
    let blockers = p.hook.messages("blocker");
    assert_eq!(blockers.len(), 1, "{:?}", p.hook.events());
    assert!(
        blockers[0].contains(&ids[1]),
        "lists the dependency: {blockers:?}"
    );
    assert!(p.hook.messages("bead-start").is_empty());
    assert!(p.deliverables(&ids[0]).is_empty());
}

#[test]
fn c3_3_unclaimed_bead_with_open_dependency_is_left_alone() {
    // br refuses to claim a bead whose blockers are open; the worker stops (3.2) and leaves the
    // bead open (open → blocked skips the claim, which 4.6 does not allow), naming the reason.
    let p = Project::new();
    let ids = p.plan("active", &["Needs the schema", "Write the schema"]);
    p.agent(GOOD_AGENT);
    p.br(&["dep", "add", &ids[0], &ids[1], "--json"]);
    let before = p.bead(&ids[0]);

    let out = p.worker(&ids[0]);
    assert_eq!(out.code, 3, "{out:?}");
    assert_eq!(out.ending(), "claim-refused", "{out:?}");
    assert_eq!(p.calls(), 0);
    assert_eq!(p.bead(&ids[0]), before, "bead unchanged");
    let claim = out.details("claim").join("\n");
    assert!(
        claim.contains(&ids[1]),
        "the refusal names the open dependency: {claim}"
    );
}

#[test]
fn c3_2_claim_refused_stops_without_doing_anything() {
    let p = Project::new();
    let ids = p.plan("active", &["Someone else has it"]);
    p.agent(GOOD_AGENT);
    p.br(&["update", &ids[0], "--claim", "--actor=alice", "--json"]);
    let before = p.bead(&ids[0]);
    let log = p.log();
    let dirty = p.dirty();

    let out = p.worker(&ids[0]);
    assert_eq!(out.code, 3, "{out:?}");
    assert_eq!(out.ending(), "claim-refused", "{out:?}");
    assert_eq!(p.calls(), 0, "the executor never ran");
    assert_eq!(p.bead(&ids[0]), before, "the bead is unchanged");
    assert_eq!(before["assignee"], "alice");
    assert_eq!(p.log(), log, "nothing committed");
    assert_eq!(
        p.hook.events(),
        Vec::<(String, String)>::new(),
        "nothing sent"
    );
    assert_eq!(p.dirty(), dirty, "no file touched");
    assert!(!out
        .step_names()
        .iter()
        .any(|n| n != "context" && n != "claim"));
}

// ---------------------------------------------------------------------------------------------
// 8. Notification discipline (3.8)
// ---------------------------------------------------------------------------------------------

#[test]
fn c3_8_notification_discipline() {
    let p = Project::new();
    let ids = p.plan("active", &["One", "Two", "Three", "Four", "Five"]);
    p.agent(GOOD_AGENT);

    // An event switched off is not sent; the others are.
    p.edit_project("| bead-start | on |", "| bead-start | off |");
    p.commit_setup("bead-start off");
    let out = p.worker(&ids[0]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(
        p.hook
            .events()
            .into_iter()
            .map(|(e, _)| e)
            .collect::<Vec<_>>(),
        ["bead-complete"]
    );
    assert!(
        out.details("notify")[0].starts_with("bead-start: skipped"),
        "{out:?}"
    );

    // No Channel: nothing at all is sent, and the bead still completes.
    p.set_field("Channel", "none");
    p.commit_setup("no channel");
    let out = p.worker(&ids[1]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(p.status(&ids[1]), "closed");
    assert_eq!(p.hook.events().len(), 1, "nothing sent without a Channel");

    // A webhook answering 500 never fails the bead.
    p.set_field("Channel", "#dev");
    p.edit_project("| bead-start | off |", "| bead-start | on |");
    p.commit_setup("channel and bead-start back");
    p.hook.status.store(500, Ordering::SeqCst);
    let out = p.worker(&ids[2]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(p.status(&ids[2]), "closed");
    assert_eq!(p.log()[0], success_subject(&ids[2]));
    assert_eq!(p.hook.events().len(), 3, "delivery was attempted");
    let notified = out.details("notify");
    assert_eq!(notified.len(), 2, "{out:?}");
    assert!(
        notified.iter().all(|d| d.contains("not delivered")),
        "{out:?}"
    );

    // Nor does a webhook whose port is closed.
    let closed = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}/hook", l.local_addr().unwrap())
    };
    p.configure_with_webhook(&closed, "");
    let out = p.worker(&ids[3]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(p.status(&ids[3]), "closed");
    assert_eq!(p.log()[0], success_subject(&ids[3]));
}

// ---------------------------------------------------------------------------------------------
// 9. Context loading order (3.1) and format tolerance (3.9)
// ---------------------------------------------------------------------------------------------

#[test]
fn c3_1_context_loading_order() {
    let p = Project::new();
    let ids = p.plan("active", &["Read everything", "Read what is there"]);
    p.edit_project(
        "What this project is for",
        "MARK-PROJECT-MD. What this project is for",
    );
    p.sb.write(
        ".openclaw/workspace/AGENTS.md",
        "# Workspace\n\nMARK-WORKSPACE-AGENTS\n",
    );
    std::fs::write(
        p.root.join("AGENTS.md"),
        "# Project agents\n\nMARK-PROJECT-AGENTS\n",
    )
    .unwrap();
    let it = p.iteration_dir().join("ITERATION.md");
    let mut text = std::fs::read_to_string(&it).unwrap();
    text.push_str("\n## Notes\n\nMARK-ITERATION-MD\n");
    std::fs::write(&it, text).unwrap();
    p.commit_setup("Context");
    let prompts = p.sb.home().join("prompts");
    std::fs::create_dir_all(&prompts).unwrap();
    // The prompt as the agent sees it, both ways: the env variable and `{prompt_file}`.
    p.agent(&format!(
        "cp \"$BRAIDS_PROMPT_FILE\" {0:?}/\"$BRAIDS_BEAD\".env\ncp \"$2\" {0:?}/\"$BRAIDS_BEAD\".arg\n{GOOD_AGENT}",
        prompts
    ));
    let prompt = |id: &str| {
        let env = std::fs::read_to_string(prompts.join(format!("{id}.env"))).unwrap();
        let arg = std::fs::read_to_string(prompts.join(format!("{id}.arg"))).unwrap();
        assert_eq!(
            env, arg,
            "BRAIDS_PROMPT_FILE and {{prompt_file}} are the same prompt"
        );
        env
    };
    let order = [
        "MARK-PROJECT-MD",
        "MARK-WORKSPACE-AGENTS",
        "MARK-PROJECT-AGENTS",
        "MARK-ITERATION-MD",
    ];

    let out = p.worker(&ids[0]);
    assert_eq!(out.code, 0, "{out:?}");
    let text = prompt(&ids[0]);
    let at: Vec<usize> = order
        .iter()
        .map(|m| {
            text.find(m)
                .unwrap_or_else(|| panic!("{m} missing from the prompt:\n{text}"))
        })
        .collect();
    assert!(at.windows(2).all(|w| w[0] < w[1]), "order {at:?}:\n{text}");
    assert!(
        text.contains("Read everything"),
        "the bead title is in the prompt"
    );
    let context: Vec<String> = out.details("context");
    assert_eq!(context.len(), 4, "{context:?}");
    assert!(
        context.iter().all(|c| c.starts_with("read ")),
        "{context:?}"
    );

    // Missing files are skipped (3.9), and unknown or missing PROJECT.md fields never fail.
    std::fs::remove_file(p.sb.home().join(".openclaw/workspace/AGENTS.md")).unwrap();
    std::fs::remove_file(p.root.join("AGENTS.md")).unwrap();
    p.set_field("Flavour", "vanilla");
    p.edit_project("- **Checkin:** on-demand\n", "");
    p.commit_setup("Less context");
    let out = p.worker(&ids[1]);
    assert_eq!(out.code, 0, "{out:?}");
    let text = prompt(&ids[1]);
    assert!(!text.contains("MARK-WORKSPACE-AGENTS") && !text.contains("MARK-PROJECT-AGENTS"));
    let (a, b) = (text.find("MARK-PROJECT-MD"), text.find("MARK-ITERATION-MD"));
    assert!(a.is_some() && b.is_some() && a < b, "{text}");
    assert_eq!(
        out.details("context")
            .iter()
            .filter(|c| c.starts_with("skipped"))
            .count(),
        2,
        "{out:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// 10. Autonomy (3.11)
// ---------------------------------------------------------------------------------------------

#[test]
fn c3_11_ask_first_waits_for_a_person() {
    let p = Project::new();
    p.set_field("Autonomy", "ask-first");
    let ids = p.plan("active", &["Drop the old tables"]);
    p.agent(GOOD_AGENT);

    let out = p.worker(&ids[0]);
    assert_eq!(out.code, 3, "{out:?}");
    assert_eq!(out.ending(), "awaiting-approval", "{out:?}");
    assert_eq!(p.calls(), 0, "nothing is executed before approval");
    assert_eq!(p.status(&ids[0]), "blocked");
    let questions = p.hook.messages("question");
    assert_eq!(questions.len(), 1, "{:?}", p.hook.events());
    assert!(questions[0].contains("Approval needed") && questions[0].contains(&ids[0]));
    assert!(p.hook.messages("bead-start").is_empty());

    // Running again without approval changes nothing.
    let out = p.worker(&ids[0]);
    assert_eq!((out.code, out.ending()), (3, "claim-refused"), "{out:?}");
    assert_eq!(p.calls(), 0);

    // A person approves by unblocking the bead; the next worker run proceeds.
    p.br(&["update", &ids[0], "--status=open", "--json"]);
    let out = p.worker(&ids[0]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(p.calls(), 1);
    assert_eq!(p.status(&ids[0]), "closed");
    assert_eq!(p.log()[1], success_subject(&ids[0]), "{:?}", p.log());
    assert_eq!(p.hook.messages("question").len(), 1, "not asked twice");
}

#[test]
fn c3_11_research_only_commits_only_the_deliverable() {
    let p = Project::new();
    p.set_field("Autonomy", "research-only");
    let ids = p.plan("active", &["Survey the options", "Next"]);
    p.agent(GOOD_AGENT);

    let out = p.worker(&ids[0]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(p.status(&ids[0]), "closed");
    assert_eq!(p.log()[0], success_subject(&ids[0]));
    let files = p.files_of("HEAD");
    let deliverable = p.deliverables(&ids[0]);
    assert!(files.contains(&deliverable[0]), "{files:?}");
    assert!(
        !files.contains(&"src/main.txt".to_string()),
        "research-only never commits the agent's other changes: {files:?}"
    );
    assert!(
        files.contains(&".beads/issues.jsonl".to_string())
            && files
                .iter()
                .all(|f| *f == deliverable[0] || f.starts_with(".beads/")),
        "only the deliverable and the tracker's record of the closure: {files:?}"
    );
    let prompt = std::fs::read_to_string(
        p.sb.braids_dir()
            .join("work")
            .join(SLUG)
            .join(&ids[0])
            .join("prompt.md"),
    )
    .unwrap();
    assert!(prompt.contains("Research only"), "{prompt}");
}

#[test]
fn c2_6_a_killed_worker_takes_its_agent_along() {
    // The tick stops a zombie worker by signalling its process group; the agent runs in a
    // group of its own (so a timeout can kill it), which must not outlive the worker.
    let p = Project::new();
    let ids = p.plan("active", &["Hangs until the bead is closed"]);
    let pids = p.sb.home().join("agent.pids");
    p.agent(&format!(
        "sleep 300 &\necho $$ $! > {pids:?}.tmp\nmv {pids:?}.tmp {pids:?}\nsleep 300\n"
    ));

    let report = p.sb.tick().force().run();
    assert_eq!(report.spawns.len(), 1, "{report:#?}");
    assert!(
        poll_until(Duration::from_secs(20), || pids.exists()),
        "the agent never started"
    );
    let agent: Vec<i32> = std::fs::read_to_string(&pids)
        .unwrap()
        .split_whitespace()
        .map(|x| x.parse().unwrap())
        .collect();
    assert!(agent.iter().all(|&pid| !process_gone(pid)));

    // A person closes the bead; the next tick kills the worker as a zombie (2.6).
    p.br(&["close", &ids[0], "--json"]);
    let report = p.sb.tick().force().run();
    assert_eq!(report.zombies.len(), 1, "{report:#?}");
    for pid in agent {
        assert!(
            poll_until(Duration::from_secs(30), || process_gone(pid)),
            "agent process {pid} outlived its worker"
        );
    }
}

#[test]
fn c2_6_a_stop_signal_storm_during_the_fixed_steps_never_cuts_a_landing() {
    // A zombie kill signals the worker's whole process group. The worker holds the signal
    // over its fixed steps, but a signal arriving while it starts a helper (each landing runs
    // a dozen `git`s) could reach the new child before it left the group and kill it.
    use std::os::unix::process::{CommandExt, ExitStatusExt};
    let p = Project::new();
    let ids = p.plan("active", &["Land under fire"]);
    p.agent(GOOD_AGENT);
    let msg = p.root.join("spawn-message");
    p.sb.write(&msg, &p.spawn_message(&ids[0]));
    let mut child =
        p.sb.command(&["worker", "--message-file", msg.to_str().unwrap()])
            .process_group(0)
            .spawn()
            .unwrap();
    let group = nix::unistd::Pid::from_raw(child.id() as i32);
    wait_for("the close", Duration::from_secs(120), || {
        (p.status(&ids[0]) == "closed").then_some(())
    });
    // From the close on, SIGTERM to the group every 2 ms until the worker is gone.
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGTERM);
        std::thread::sleep(Duration::from_millis(2));
    };
    assert_eq!(
        status.signal(),
        Some(15),
        "the worker dies of the signal, at the end"
    );
    assert_eq!(
        p.log()[..2],
        [
            "Complete iteration 001".to_string(),
            success_subject(&ids[0])
        ],
        "every fixed step ran"
    );
    let files = p.files_of("HEAD~1");
    assert!(files.contains(&"src/main.txt".to_string()), "{files:?}");
    assert_eq!(p.upstream_log(), p.log(), "pushed");
    let trees = p.sb.git(&p.root, &["worktree", "list", "--porcelain"]);
    assert_eq!(worktrees_in_use(&trees), 1, "{trees}");
}

#[test]
fn c2_6_a_tick_leaves_a_worker_finishing_after_the_close_alone() {
    // The worker closes the bead before committing (3.5); a tick that sees the bead closed while
    // its worker is in its fixed steps leaves it to finish (2.6). The fixed steps all happen.
    let p = Project::new();
    let ids = p.plan("active", &["Slow push"]);
    p.agent(GOOD_AGENT);
    let pushing = p.sb.home().join("pushing");
    // A slow upstream, reached over an ssh command the person configured (braids runs no
    // push hook): a push touches `pushing` and takes 3 s; a fetch is quick.
    let ssh = p.sb.script(
        "slow-ssh",
        &format!(
            "shift\ncase \"$*\" in *receive-pack*) touch {pushing:?}; sleep 3 ;; esac\nexec sh -c \"$*\"\n"
        ),
    );
    let url = format!("ssh://upstream.invalid{}", p.upstream.display());
    p.sb.git(&p.root, &["remote", "set-url", "origin", &url]);
    p.sb.git(
        &p.root,
        &["config", "core.sshCommand", ssh.to_str().unwrap()],
    );

    let report = p.sb.tick().force().run();
    assert_eq!(report.spawns.len(), 1, "{report:#?}");
    assert!(
        poll_until(Duration::from_secs(30), || pushing.exists()),
        "the worker never pushed"
    );
    assert_eq!(p.status(&ids[0]), "closed");
    let report = p.sb.tick().force().run();
    assert!(
        report.zombies.is_empty(),
        "a finishing worker was stopped: {report:#?}"
    );
    assert!(
        poll_until(Duration::from_secs(60), || p.sb.live_labels().is_empty()),
        "the worker never ended"
    );

    // The worker finished its steps.
    assert_eq!(
        p.hook.messages("bead-complete").len(),
        1,
        "{:?}",
        p.hook.events()
    );
    assert_eq!(
        p.hook.messages("iteration-complete").len(),
        1,
        "{:?}",
        p.hook.events()
    );
    assert!(iteration_complete(&p));
    assert_eq!(p.log()[0], "Complete iteration 001");
    assert_eq!(p.log()[1], success_subject(&ids[0]));
}

// ---------------------------------------------------------------------------------------------
// 11. Completed iterations are frozen (4.5)
// ---------------------------------------------------------------------------------------------

#[test]
fn c4_5_completed_iteration_is_refused_before_the_claim() {
    let p = Project::new();
    let ids = p.plan("complete", &["Too late"]);
    p.agent(GOOD_AGENT);
    let before = p.bead(&ids[0]);
    let log = p.log();

    let out = p.worker(&ids[0]);
    assert_eq!(out.code, 3, "{out:?}");
    assert_eq!(out.ending(), "iteration-frozen", "{out:?}");
    assert_eq!(p.calls(), 0);
    assert_eq!(p.bead(&ids[0]), before, "not even claimed");
    assert!(!out.step_names().contains(&"claim".to_string()));
    assert_eq!(p.log(), log);
    assert_eq!(
        p.dirty(),
        Vec::<String>::new(),
        "the iteration is untouched"
    );
    assert!(p.hook.events().is_empty());
}

// ---------------------------------------------------------------------------------------------
// 12. Push failure (4.4)
// ---------------------------------------------------------------------------------------------

#[test]
fn c4_4_push_failure_is_reported_and_the_bead_stays_closed_and_committed() {
    let p = Project::new();
    let ids = p.plan("active", &["Work offline", "Later"]);
    p.agent(GOOD_AGENT);
    std::fs::remove_dir_all(&p.upstream).unwrap();

    let out = p.worker(&ids[0]);
    assert_eq!(out.ending(), "completed", "{out:?}");
    assert_eq!(out.run["ending"]["pushed"], false, "{out:?}");
    assert_eq!(p.status(&ids[0]), "closed");
    assert_eq!(p.log()[0], success_subject(&ids[0]), "committed locally");
    let push = out.details("push").join("\n");
    assert!(push.contains("failed"), "{push}");
    assert!(
        out.stderr.contains("push"),
        "the log says so too: {}",
        out.stderr
    );
    let done = p.hook.messages("bead-complete");
    assert!(
        done[0].contains("not pushed"),
        "the person hears of it: {done:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// 13. The order work → deliverable → close → commit, observed (3.5, 3.6)
// ---------------------------------------------------------------------------------------------

/// What the recording doubles saw, in order.
#[derive(Default)]
struct Journal {
    calls: Vec<String>,
    /// At `close()`: (a deliverable with a Summary was on disk, HEAD then).
    at_close: Option<(bool, String)>,
}

/// The real br adapter, recording each call, and at `close()` what was on disk and in git.
struct Recording<'a> {
    inner: Box<dyn Tracker>,
    root: PathBuf,
    iteration_dir: PathBuf,
    /// Where the bead's worktrees are (its deliverable is written there before landing).
    workspaces: braids::workspace::GitWorktrees,
    journal: &'a Mutex<Journal>,
    /// Runs right after the bead is closed.
    after_close: Option<Box<dyn Fn() + Send + Sync + 'a>>,
}

impl<'a> Recording<'a> {
    fn new(p: &Project, journal: &'a Mutex<Journal>) -> Recording<'a> {
        Recording {
            inner: br_tracker(p),
            root: p.root.clone(),
            iteration_dir: p.iteration_dir(),
            workspaces: braids::workspace::GitWorktrees {
                root: p.sb.braids_dir().join("workspaces"),
                sandbox: Default::default(),
                pooling: Default::default(),
            },
            journal,
            after_close: None,
        }
    }
}

/// The real br adapter for the project.
fn br_tracker(p: &Project) -> Box<dyn Tracker> {
    tracker::open(
        TrackerKind::Br,
        TrackerOptions {
            project: p.root.clone(),
            timeout: Duration::from_secs(30),
            program: Some(br_path()),
            installation: None,
        },
    )
    .unwrap()
}

fn head_of(root: &Path) -> String {
    git2::Repository::open(root)
        .and_then(|r| r.head()?.peel_to_commit().map(|c| c.id().to_string()))
        .unwrap()
}

impl Tracker for Recording<'_> {
    fn kind(&self) -> TrackerKind {
        self.inner.kind()
    }
    fn ready(&self) -> Result<Vec<Bead>, TrackerError> {
        self.journal.lock().unwrap().calls.push("ready".into());
        self.inner.ready()
    }
    fn list(&self) -> Result<Vec<Bead>, TrackerError> {
        self.journal.lock().unwrap().calls.push("list".into());
        self.inner.list()
    }
    fn show(&self, id: &BeadId) -> Result<Option<Bead>, TrackerError> {
        self.journal.lock().unwrap().calls.push("show".into());
        self.inner.show(id)
    }
    fn claim(&self, id: &BeadId, actor: &str) -> Result<ClaimOutcome, TrackerError> {
        self.journal.lock().unwrap().calls.push("claim".into());
        self.inner.claim(id, actor)
    }
    fn close(&self, id: &BeadId, reason: &str) -> Result<(), TrackerError> {
        // In the project, or in the bead's own worktree, from which it lands after the close.
        let in_worktree = self
            .workspaces
            .project_dir(&self.root)
            .join(id.as_str())
            .join(self.iteration_dir.strip_prefix(&self.root).unwrap());
        let written = [&self.iteration_dir, &in_worktree]
            .iter()
            .flat_map(|d| braids::format::deliverable::find(d, id))
            .any(|p| {
                std::fs::read_to_string(p)
                    .ok()
                    .and_then(|t| braids::format::deliverable::summary(&t))
                    .is_some()
            });
        let mut j = self.journal.lock().unwrap();
        j.calls.push("close".into());
        j.at_close = Some((written, head_of(&self.root)));
        drop(j);
        self.inner.close(id, reason)?;
        if let Some(f) = &self.after_close {
            f();
        }
        Ok(())
    }
    fn block(&self, id: &BeadId, reason: &str) -> Result<(), TrackerError> {
        self.journal.lock().unwrap().calls.push("block".into());
        self.inner.block(id, reason)
    }
    fn reopen(&self, id: &BeadId, reason: &str) -> Result<(), TrackerError> {
        self.journal.lock().unwrap().calls.push("reopen".into());
        self.inner.reopen(id, reason)
    }
    fn create(&self, title: &str, description: &str, priority: u8) -> Result<BeadId, TrackerError> {
        self.inner.create(title, description, priority)
    }
    fn add_dependency(&self, id: &BeadId, on: &BeadId) -> Result<(), TrackerError> {
        self.inner.add_dependency(id, on)
    }
}

/// The real executor, recording when it ran.
struct RecordingExecutor<'a> {
    inner: ArgvExecutor,
    journal: &'a Mutex<Journal>,
}

impl Executor for RecordingExecutor<'_> {
    fn run(&self, req: &ExecRequest) -> anyhow::Result<ExecResult> {
        self.journal.lock().unwrap().calls.push("execute".into());
        let r = self.inner.run(req);
        self.journal.lock().unwrap().calls.push("executed".into());
        r
    }
}

#[test]
fn c3_5_close_after_deliverable_and_commit_after_close() {
    let p = Project::new();
    let ids = p.plan("active", &["Order matters", "Another"]);
    // Quiet: in this process, the agent's output would land in the test harness's stderr.
    p.agent(&format!("exec >/dev/null\n{GOOD_AGENT}"));
    let paths = Paths::new(p.sb.home().to_path_buf(), None);
    let config = Config::load(&paths.config()).unwrap().config;
    let journal = Mutex::new(Journal::default());
    let tracker = Recording::new(&p, &journal);
    let executor = RecordingExecutor {
        inner: ArgvExecutor {
            template: config.worker.executor.argv().to_vec(),
            grace: Duration::from_secs(5),
            sandbox: Default::default(),
        },
        journal: &journal,
    };
    let notifier = braids::notifier::from_config(&config.notify);
    let worker = Worker {
        paths: &paths,
        config: &config,
        tracker: &tracker,
        notifier: &notifier,
        executor: &executor,
    };
    let before = head_of(&p.root);
    let msg = SpawnMessage::parse(&p.spawn_message(&ids[0])).unwrap();

    let run = worker.run(&msg).unwrap();
    assert!(matches!(run.ending, Ending::Completed { .. }), "{run:?}");
    let j = journal.lock().unwrap();
    let pos = |what: &str| {
        j.calls
            .iter()
            .position(|c| c == what)
            .unwrap_or_else(|| panic!("no {what} in {:?}", j.calls))
    };
    assert_eq!(pos("claim"), 0, "claim before anything else: {:?}", j.calls);
    assert!(pos("execute") < pos("close"), "{:?}", j.calls);
    assert_eq!(j.calls.iter().filter(|c| *c == "execute").count(), 1);

    let (deliverable_then, head_then) = j.at_close.clone().unwrap();
    assert!(
        deliverable_then,
        "the deliverable was on disk when the bead was closed"
    );
    assert_eq!(head_then, before, "no commit yet when the bead was closed");
    let after = head_of(&p.root);
    assert_ne!(after, before, "committed after the close");
    assert_eq!(p.log()[0], success_subject(&ids[0]));
    match &run.ending {
        Ending::Completed { commit, .. } => assert_eq!(commit.as_deref(), Some(after.as_str())),
        e => panic!("{e:?}"),
    }

    // The steps tell the same story.
    let names: Vec<&str> = run.steps.iter().map(|s| s.name).collect();
    let at = |n: &str| names.iter().position(|x| *x == n).unwrap();
    assert!(
        at("claim") < at("execute")
            && at("execute") < at("deliverable")
            && at("deliverable") < at("close")
            && at("close") < at("commit")
            && at("commit") < at("push"),
        "{names:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// 14–15. Iteration completion (3.7)

#[test]
fn c3_7_the_iteration_completes_only_after_the_last_closed_bead_is_committed() {
    // Worker A has closed its bead but not committed it yet when worker B finishes the other
    // bead. B must not complete the iteration then: its commit would sweep in A's deliverable,
    // leave A without a commit of its own (3.6), and A's work would land in a frozen
    // iteration (4.5).
    let p = &Project::new();
    let ids = &p.plan("active", &["Closes first", "Finishes meanwhile"]);
    p.agent(&format!(
        "exec >/dev/null\n{}",
        GOOD_AGENT.replace("src/main.txt", "src/$BRAIDS_BEAD.txt")
    ));
    let paths = Paths::new(p.sb.home().to_path_buf(), None);
    let config = Config::load(&paths.config()).unwrap().config;
    let notifier = braids::notifier::from_config(&config.notify);
    let argv = || ArgvExecutor {
        template: config.worker.executor.argv().to_vec(),
        grace: Duration::from_secs(5),
        sandbox: Default::default(),
    };
    let msg = |id: &str| SpawnMessage::parse(&p.spawn_message(id)).unwrap();
    let (journal_a, journal_b) = (
        Mutex::new(Journal::default()),
        Mutex::new(Journal::default()),
    );
    let b_done = std::sync::atomic::AtomicBool::new(false);
    let (go, wait_go) = std::sync::mpsc::channel::<()>();

    let (run_a, run_b) = std::thread::scope(|s| {
        let b_env = (&journal_b, &b_done, &paths, &config, &notifier, &argv, &msg);
        let b = s.spawn(move || {
            let (journal_b, b_done, paths, config, notifier, argv, msg) = b_env;
            wait_go.recv().unwrap();
            let tracker = Recording::new(p, journal_b);
            let executor = RecordingExecutor {
                inner: argv(),
                journal: journal_b,
            };
            let worker = Worker {
                paths,
                config,
                tracker: &tracker,
                notifier,
                executor: &executor,
            };
            let run = worker.run(&msg(&ids[1])).unwrap();
            b_done.store(true, Ordering::SeqCst);
            run
        });
        let mut tracker = Recording::new(p, &journal_a);
        // Right after A's close: B runs, and gets as far as it can.
        tracker.after_close = Some(Box::new(|| {
            go.send(()).unwrap();
            let executed = || {
                journal_b
                    .lock()
                    .unwrap()
                    .calls
                    .iter()
                    .any(|c| c == "executed")
            };
            assert!(
                poll_until(Duration::from_secs(30), executed),
                "B's agent never ran"
            );
            poll_until(Duration::from_secs(2), || b_done.load(Ordering::SeqCst));
        }));
        let executor = argv();
        let worker = Worker {
            paths: &paths,
            config: &config,
            tracker: &tracker,
            notifier: &notifier,
            executor: &executor,
        };
        let run_a = worker.run(&msg(&ids[0])).unwrap();
        (run_a, b.join().unwrap())
    });

    for (run, id) in [(&run_a, &ids[0]), (&run_b, &ids[1])] {
        let Ending::Completed { commit, .. } = &run.ending else {
            panic!("{run:#?}");
        };
        let commit = commit
            .as_deref()
            .unwrap_or_else(|| panic!("no commit of its own: {run:#?}"));
        let files = p.files_of(commit);
        assert!(files.contains(&p.deliverables(id)[0]), "{id}: {files:?}");
        assert_eq!(
            p.sb.git(&p.root, &["log", "-1", "--format=%s", commit])
                .trim(),
            success_subject(id)
        );
    }
    let log = p.log();
    assert_eq!(log[0], "Complete iteration 001", "completed last: {log:?}");
    assert_eq!(
        log.iter()
            .filter(|s| *s == "Complete iteration 001")
            .count(),
        1
    );
    assert!(matches!(
        braids::git::check_frozen(&p.root, &p.iteration_dir()).unwrap(),
        braids::git::Frozen::Intact { .. }
    ));
}

// ---------------------------------------------------------------------------------------------

fn iteration_complete(p: &Project) -> bool {
    let text = std::fs::read_to_string(p.iteration_dir().join("ITERATION.md")).unwrap();
    text.lines()
        .any(|l| l.contains("Status:") && l.contains("complete"))
}

#[test]
fn c3_7_two_workers_finishing_together_complete_the_iteration_once() {
    let p = Project::new();
    let ids = p.plan("active", &["Left half", "Right half"]);
    // Both agents do their work, then wait for each other: both finish together, and both
    // workers reach close/commit/complete together.
    let rv = p.sb.home().join("rendezvous");
    std::fs::create_dir_all(&rv).unwrap();
    p.agent(&format!(
        "{}\ntouch {rv:?}/\"$BRAIDS_BEAD\"\nn=0\nwhile [ \"$(ls {rv:?} | wc -l)\" -lt 2 ] && [ $n -lt 600 ]; do sleep 0.05; n=$((n+1)); done\n",
        GOOD_AGENT.replace("src/main.txt", "src/$BRAIDS_BEAD.txt")
    ));

    let outs: Vec<WorkerOut> = std::thread::scope(|s| {
        let handles: Vec<_> = ids.iter().map(|id| s.spawn(|| p.worker(id))).collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for o in &outs {
        assert_eq!(o.code, 0, "{o:?}");
    }
    assert_eq!(p.calls(), 2, "each agent ran once: {outs:?}");
    let completed = outs
        .iter()
        .filter(|o| o.run["ending"]["iteration_completed"] == true)
        .count();
    assert_eq!(completed, 1, "{outs:?}");
    // Each bead's commit holds its own deliverable, never the other's.
    for (id, other) in [(&ids[0], &ids[1]), (&ids[1], &ids[0])] {
        assert_eq!(p.status(id), "closed");
        assert_eq!(
            p.log()
                .iter()
                .filter(|s| **s == success_subject(id))
                .count(),
            1
        );
        let files = p.files_of(&format!(":/^{}", regex_escape(&success_subject(id))));
        let (mine, theirs) = (&p.deliverables(id)[0], &p.deliverables(other)[0]);
        assert!(files.contains(mine), "{id}: {files:?}");
        assert!(
            !files.contains(theirs),
            "{id} committed {other}'s deliverable: {files:?}"
        );
    }
    let log = p.log();
    assert_eq!(
        log.iter()
            .filter(|s| *s == "Complete iteration 001")
            .count(),
        1,
        "{log:?}"
    );
    assert_eq!(log[0], "Complete iteration 001", "{log:?}");
    assert!(iteration_complete(&p));
    assert_eq!(
        p.hook.messages("iteration-complete").len(),
        1,
        "{:?}",
        p.hook.events()
    );
    assert_eq!(p.upstream_log(), log, "everything pushed: {outs:?}");
    assert_eq!(p.dirty(), Vec::<String>::new());
}

#[test]
fn c3_7_full_loop_tick_then_workers_until_the_iteration_is_complete() {
    let p = Project::new();
    p.set_field("MaxWorkers", "2");
    let ids = p.plan("active", &["First story", "Second story", "Third story"]);
    p.agent(&GOOD_AGENT.replace("src/main.txt", "src/$BRAIDS_BEAD.txt"));

    let start = Instant::now();
    let mut ticks = 0;
    let mut max_spawned = 0;
    while !(iteration_complete(&p) && ids.iter().all(|id| p.status(id) == "closed")) {
        // (a deadline for a hang, far from the few seconds this takes: load cannot reach it)
        if start.elapsed() > Duration::from_secs(180) {
            let logs = p.sb.braids_dir().join("logs");
            let mut dump = String::new();
            for e in files_under(&logs) {
                dump.push_str(&format!(
                    "--- {}\n{}\n",
                    e.display(),
                    std::fs::read_to_string(&e).unwrap_or_default()
                ));
            }
            let statuses: Vec<String> = ids.iter().map(|id| p.status(id)).collect();
            panic!(
                "not done after 180s and {ticks} ticks; beads {statuses:?}; git log {:?}\n{}\n{dump}",
                p.log(),
                std::fs::read_to_string(p.iteration_dir().join("ITERATION.md")).unwrap(),
            );
        }
        // Workers inherit the tick's environment: their steps go to the session logs.
        let report = p.sb.tick().force().log("info").run();
        ticks += 1;
        let n = report.spawns.len();
        max_spawned = max_spawned.max(n);
        std::thread::sleep(Duration::from_millis(300));
    }
    assert!(max_spawned <= 2, "MaxWorkers 2");
    assert_eq!(p.calls(), 3, "one executor run per bead");
    let log = p.log();
    for id in &ids {
        let deliverable = p.deliverables(id);
        assert_eq!(deliverable.len(), 1, "{id}");
        assert_eq!(
            log.iter().filter(|s| **s == success_subject(id)).count(),
            1,
            "{id}: {log:?}"
        );
        let files = p.files_of(&format!(":/^{}", regex_escape(&success_subject(id))));
        assert!(files.contains(&deliverable[0]), "{id}: {files:?}");
    }
    // The iteration-completing worker may still be finishing (notify, push).
    assert!(
        poll_until(Duration::from_secs(60), || {
            p.log()
                .iter()
                .filter(|s| *s == "Complete iteration 001")
                .count()
                == 1
                && p.upstream_log() == p.log()
        }),
        "{:?}",
        p.log()
    );
    assert_eq!(
        p.log()
            .iter()
            .filter(|s| *s == "Complete iteration 001")
            .count(),
        1
    );
}

/// Escapes a commit subject for git's `:/<regex>` revision syntax.
fn regex_escape(s: &str) -> String {
    s.chars()
        .flat_map(|c| {
            let special = "\\.^$*+?()[]{}|".contains(c);
            special.then_some('\\').into_iter().chain([c])
        })
        .collect()
}
