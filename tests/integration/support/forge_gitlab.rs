//! A stand-in GitLab: the part of the REST API v4 braids' merge-request landing uses, with the
//! paths, status codes, bodies and headers GitLab's API documentation and its API code give
//! them, and a real bare repository behind each project that it merges into the way GitLab
//! does (a merge commit, a squash commit under it when asked, or a fast-forward).
//!
//! As with the stand-in GitHub, the tests drive what a person or a CI would do on the forge
//! through methods ([`GitLab::job`], [`GitLab::approve`], [`GitLab::discuss`],
//! [`GitLab::merge_by`], ...) and read back what braids asked of it ([`GitLab::requests`]).
//!
//! What GitLab does that GitHub does not, and this stand-in keeps:
//! - A project is addressed by its id or by its URL-encoded full path (`group%2Fsub%2Fapp`), a
//!   branch in a path likewise (`braids%2Fapp-1`); with an unencoded slash nothing is found.
//! - Whether a merge request merges is computed in the background. GitLab says `checking`
//!   for as long as that takes; here the first look after its head or its target moved
//!   answers `merge_status: checking` and starts the check, and the next has the answer. `diverged_commits_count` (how far behind the target) is only
//!   sent when asked for with `include_diverged_commits_count=true`.
//! - Error bodies are `{"message": …}` where the message is a string, a list of strings (409 on
//!   a second open merge request) or an object of field → errors (400 on a missing branch).
//! - Conditional requests: GitLab documents no `ETag`s for REST v4 (its ETag-caching
//!   middleware serves the web UI's polling routes and GraphQL only). Rails' Rack stack may add
//!   a weak `ETag` over the rendered body of a read and answer `If-None-Match` with a 304, but
//!   the work is done and the request counted against the rate limit all the same. So ETags
//!   are off here unless a test turns them on ([`GitLab::set_etags`]), and when on a 304
//!   still costs quota.
//! - The rate limit (GitLab.com's authenticated API throttle) is per minute, reported in
//!   `RateLimit-*` headers, and spent it is a 429 with `Retry-After` and a plain-text body.
//!   The headers come with every answer here; GitLab.com sends them with many, a
//!   self-managed GitLab may only with the 429, so a client must do without them.
//!
//! Under `/api/v4`:
//! - `GET /projects/:id`
//! - `GET|POST /projects/:id/merge_requests`, `GET /projects/:id/merge_requests/:iid`
//! - `GET .../merge_requests/:iid/approvals`, `.../reviewers`, `.../discussions`,
//!   `.../pipelines`; `PUT .../merge_requests/:iid/merge`
//! - `GET /projects/:id/pipelines`, `.../pipelines/:pid`, `.../pipelines/:pid/jobs`,
//!   `GET /projects/:id/jobs/:job_id`, `.../jobs/:job_id/trace`
//! - `GET|DELETE /projects/:id/repository/branches/:branch`

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::State as Shared;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

use super::bare_git::{commit_tree, default_branch, git, merge_tree, rev};

#[path = "forge_gitlab/issues.rs"]
mod issues;
#[allow(unused_imports)]
pub use issues::GlIssue;

/// Who the forge's own commits are by.
const FORGE: (&str, &str) = ("GitLab", "noreply@gitlab.example");

/// One request braids made, as the forge answered it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    /// As sent, still URL-encoded.
    pub path: String,
    pub status: u16,
}

#[derive(Debug, Clone)]
struct Project {
    id: u64,
    /// `group/sub/app`.
    path: String,
    bare: PathBuf,
    /// `merge`, `rebase_merge` (semi-linear) or `ff`.
    merge_method: String,
    pipeline_must_succeed: bool,
}

#[derive(Debug, Clone)]
struct Mr {
    project: u64,
    iid: u64,
    id: u64,
    title: String,
    description: String,
    source: String,
    target: String,
    author: String,
    /// `opened`, `merged` or `closed`.
    state: &'static str,
    merged_by: Option<String>,
    closed_by: Option<String>,
    merge_commit: Option<String>,
    squash_commit: Option<String>,
    remove_source_branch: bool,
    /// The head last seen: what `sha` says once the branch is merged, closed or gone.
    sha: String,
    /// GitLab's background mergeability check.
    check: Check,
    /// Usernames of who approves it now, in the order they did.
    approvals: Vec<String>,
    /// Reviewers and their state (`unreviewed`, `reviewed`, `requested_changes`, `approved`,
    /// `unapproved`).
    reviewers: Vec<(String, &'static str)>,
    /// Bumped by whatever changes `updated_at`: notes, pushes seen, merge, close.
    updated: u64,
}

/// GitLab's background mergeability check, by the (target, head) commits it is for.
#[derive(Debug, Clone)]
enum Check {
    Queued(String, String),
    /// Done: whether they merge without a conflict.
    Done(String, String, bool),
}

#[derive(Debug, Clone)]
enum Kind {
    /// A comment on its own (`individual_note`), or a system note.
    Individual,
    /// A thread on the merge request as a whole.
    Thread,
    /// A thread on a line of the change.
    Diff {
        path: String,
        line: u32,
        base: String,
        head: String,
    },
}

#[derive(Debug, Clone)]
struct Note {
    id: u64,
    project: u64,
    iid: u64,
    discussion: String,
    author: String,
    body: String,
    system: bool,
    kind: Kind,
    resolved_by: Option<String>,
}

#[derive(Debug, Clone)]
struct Pipeline {
    id: u64,
    iid: u64,
    project: u64,
    sha: String,
    reference: String,
}

#[derive(Debug, Clone)]
struct Job {
    id: u64,
    pipeline: u64,
    name: String,
    stage: String,
    status: String,
    allow_failure: bool,
    trace: String,
    /// Run again since: GitLab lists only the newest run of a job unless asked.
    retried: bool,
}

#[derive(Debug)]
struct State {
    token: String,
    login: String,
    projects: Vec<Project>,
    mrs: Vec<Mr>,
    notes: Vec<Note>,
    pipelines: Vec<Pipeline>,
    jobs: Vec<Job>,
    next_id: u64,
    limit: u32,
    remaining: u32,
    down: bool,
    etags: bool,
    requests: Vec<Request>,
    issues: Vec<issues::IssueRec>,
    /// Issue links, kept as GitLab keeps them: `is_blocked_by` turned round into `blocks`.
    links: Vec<issues::Link>,
    /// Each project's labels, by project id.
    labels: BTreeMap<u64, Vec<String>>,
    /// Usernames by user id, of the users asked for or given access.
    users: BTreeMap<u64, String>,
    /// Access levels by username.
    access: BTreeMap<String, u64>,
}

/// The running stand-in; it serves as long as the test process lives.
pub struct GitLab {
    pub port: u16,
    state: Arc<Mutex<State>>,
}

impl GitLab {
    /// Serves on a free loopback port, accepting `token` for the user `login`.
    pub fn start(token: &str, login: &str) -> GitLab {
        let state = Arc::new(Mutex::new(State {
            token: token.into(),
            login: login.into(),
            projects: Vec::new(),
            mrs: Vec::new(),
            notes: Vec::new(),
            pipelines: Vec::new(),
            jobs: Vec::new(),
            next_id: 1000,
            limit: 2000,
            remaining: 2000,
            down: false,
            etags: false,
            requests: Vec::new(),
            issues: Vec::new(),
            links: Vec::new(),
            labels: BTreeMap::new(),
            users: BTreeMap::new(),
            access: BTreeMap::new(),
        }));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let shared = state.clone();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                let app = axum::Router::new().fallback(handle).with_state(shared);
                axum::serve(listener, app).await.unwrap();
            });
        });
        GitLab { port, state }
    }

    /// The API's root URL, what `[forges.<name>] api` names.
    pub fn api(&self) -> String {
        format!("http://127.0.0.1:{}/api/v4", self.port)
    }

    /// Serves the project `group/…/name` from the bare repository `bare`; its id.
    pub fn project(&self, path: &str, bare: &Path) -> u64 {
        self.with(|s| {
            let id = s.projects.len() as u64 + 1;
            s.projects.push(Project {
                id,
                path: path.into(),
                bare: bare.to_path_buf(),
                merge_method: "merge".into(),
                pipeline_must_succeed: false,
            });
            id
        })
    }

    /// The project's merge method: `merge`, `rebase_merge` or `ff`.
    pub fn set_merge_method(&self, project: &str, method: &str) {
        self.with(|s| project_mut(s, project).merge_method = method.into());
    }

    /// "Pipelines must succeed": no merge while the head's pipeline has not passed.
    pub fn set_pipeline_must_succeed(&self, project: &str, on: bool) {
        self.with(|s| project_mut(s, project).pipeline_must_succeed = on);
    }

    /// Runs the job `name` of `sha`'s pipeline (made on first use) with `status` (`pending`,
    /// `running`, `success`, `failed`, `canceled`, `skipped`, `manual`) and the log `trace`;
    /// a job of that name already there is retried: the new run has a new id. The job's id.
    pub fn job(&self, project: &str, sha: &str, name: &str, status: &str, trace: &str) -> u64 {
        self.add_job(project, sha, name, status, trace, false)
    }

    /// As [`GitLab::job`], for a job that is allowed to fail.
    pub fn job_allowed_to_fail(&self, project: &str, sha: &str, name: &str, status: &str) -> u64 {
        self.add_job(project, sha, name, status, "", true)
    }

    fn add_job(
        &self,
        project: &str,
        sha: &str,
        name: &str,
        status: &str,
        trace: &str,
        allow_failure: bool,
    ) -> u64 {
        self.with(|s| {
            let p = project_mut(s, project).clone();
            let pipeline = match s
                .pipelines
                .iter()
                .rev()
                .find(|x| x.project == p.id && x.sha == sha)
            {
                Some(x) => x.id,
                None => {
                    let reference = git(
                        &p.bare,
                        &[
                            "for-each-ref",
                            "--points-at",
                            sha,
                            "--format=%(refname:short)",
                            "refs/heads",
                        ],
                    )
                    .ok()
                    .and_then(|o| o.lines().next().map(String::from))
                    .unwrap_or_else(|| default_branch(&p.bare));
                    s.next_id += 1;
                    let id = s.next_id;
                    let iid = s.pipelines.iter().filter(|x| x.project == p.id).count() as u64 + 1;
                    s.pipelines.push(Pipeline {
                        id,
                        iid,
                        project: p.id,
                        sha: sha.into(),
                        reference,
                    });
                    id
                }
            };
            for j in s
                .jobs
                .iter_mut()
                .filter(|j| j.pipeline == pipeline && j.name == name)
            {
                j.retried = true;
            }
            s.next_id += 1;
            let id = s.next_id;
            s.jobs.push(Job {
                id,
                pipeline,
                name: name.into(),
                stage: "test".into(),
                status: status.into(),
                allow_failure,
                trace: trace.into(),
                retried: false,
            });
            id
        })
    }

    /// Opens a merge request of `source` into `target` as braids' user would; its iid.
    pub fn open(&self, project: &str, source: &str, target: &str, title: &str) -> u64 {
        let mut s = self.state.lock().unwrap();
        let p = project_mut(&mut s, project).clone();
        let input = json!({"title": title, "source_branch": source, "target_branch": target});
        let (status, r) = create_mr(&mut s, &p, &input);
        assert_eq!(status, StatusCode::CREATED, "cannot open {source}: {r:?}");
        s.mrs.iter().filter(|m| m.project == p.id).count() as u64
    }

    /// `user` approves merge request `iid` (a system note says so, as on GitLab).
    pub fn approve(&self, project: &str, iid: u64, user: &str) {
        self.with(|s| {
            let m = mr_mut(s, project, iid);
            if m.approvals.iter().any(|a| a == user) {
                return;
            }
            m.approvals.push(user.into());
            set_reviewer(m, user, "approved");
            system_note(s, project, iid, user, "approved this merge request");
        });
    }

    /// `user` takes their approval back.
    pub fn unapprove(&self, project: &str, iid: u64, user: &str) {
        self.with(|s| {
            let m = mr_mut(s, project, iid);
            m.approvals.retain(|a| a != user);
            set_reviewer(m, user, "unapproved");
            system_note(s, project, iid, user, "unapproved this merge request");
        });
    }

    /// `user` submits a review that requests changes: their approval, if any, goes.
    pub fn request_changes(&self, project: &str, iid: u64, user: &str) {
        self.with(|s| {
            let m = mr_mut(s, project, iid);
            m.approvals.retain(|a| a != user);
            set_reviewer(m, user, "requested_changes");
            system_note(s, project, iid, user, "requested changes");
        });
    }

    /// The author asks `user` to review again: their request for changes no longer stands.
    pub fn request_review(&self, project: &str, iid: u64, user: &str) {
        self.with(|s| {
            let author = mr_mut(s, project, iid).author.clone();
            set_reviewer(mr_mut(s, project, iid), user, "unreviewed");
            system_note(
                s,
                project,
                iid,
                &author,
                &format!("requested review from @{user}"),
            );
        });
    }

    /// `user` starts a thread on merge request `iid`: on line `line` of `path` in the head
    /// when given, else on the whole request. The discussion's id.
    pub fn discuss(
        &self,
        project: &str,
        iid: u64,
        user: &str,
        at: Option<(&str, u32)>,
        body: &str,
    ) -> String {
        let (head, base) = self.heads(project, iid);
        self.with(|s| {
            let kind = match at {
                Some((path, line)) => Kind::Diff {
                    path: path.into(),
                    line,
                    base,
                    head,
                },
                None => Kind::Thread,
            };
            add_note(s, project, iid, user, body, kind, None)
        })
    }

    /// `user` comments on merge request `iid` outside any thread.
    pub fn comment(&self, project: &str, iid: u64, user: &str, body: &str) {
        self.with(|s| {
            add_note(s, project, iid, user, body, Kind::Individual, None);
        });
    }

    /// `user` answers in the thread `discussion`.
    pub fn reply(&self, project: &str, iid: u64, discussion: &str, user: &str, body: &str) {
        self.with(|s| {
            let kind = s
                .notes
                .iter()
                .find(|n| n.discussion == discussion)
                .map(|n| n.kind.clone())
                .expect("no such discussion");
            add_note(s, project, iid, user, body, kind, Some(discussion));
        });
    }

    /// `user` resolves the thread `discussion`.
    pub fn resolve(&self, project: &str, iid: u64, discussion: &str, user: &str) {
        self.with(|s| {
            for n in s.notes.iter_mut().filter(|n| n.discussion == discussion) {
                n.resolved_by = Some(user.into());
            }
            mr_mut(s, project, iid).updated += 1;
        });
    }

    /// A person merges merge request `iid` on the forge, the way the project merges.
    pub fn merge_by(&self, project: &str, iid: u64, user: &str) -> Result<String, String> {
        let mut s = self.state.lock().unwrap();
        merge(&mut s, project, iid, false, None, user).map_err(|(_, e)| e)
    }

    /// A person closes merge request `iid` without merging it.
    pub fn close_by(&self, project: &str, iid: u64, user: &str) {
        self.with(|s| {
            let m = mr_mut(s, project, iid);
            m.state = "closed";
            m.closed_by = Some(user.into());
            m.updated += 1;
        });
    }

    /// The head commit of merge request `iid` now, and its target's.
    fn heads(&self, project: &str, iid: u64) -> (String, String) {
        self.with(|s| {
            let bare = project_mut(s, project).bare.clone();
            let m = mr_mut(s, project, iid);
            (
                rev(&bare, &m.source).unwrap_or_else(|| m.sha.clone()),
                rev(&bare, &m.target).unwrap_or_default(),
            )
        })
    }

    /// The head commit of merge request `iid` now.
    pub fn head_of(&self, project: &str, iid: u64) -> String {
        self.heads(project, iid).0
    }

    /// The project's merge requests: iid, source branch and state.
    pub fn merge_requests(&self, project: &str) -> Vec<(u64, String, &'static str)> {
        self.with(|s| {
            let id = project_mut(s, project).id;
            s.mrs
                .iter()
                .filter(|m| m.project == id)
                .map(|m| (m.iid, m.source.clone(), m.state))
                .collect()
        })
    }

    /// Requests left in this minute's window before the rate limit answers 429.
    pub fn set_remaining(&self, n: u32) {
        self.with(|s| s.remaining = n);
    }

    /// Whether every request gets 503, as during an outage.
    pub fn set_down(&self, down: bool) {
        self.with(|s| s.down = down);
    }

    /// Whether reads carry a weak `ETag` and answer a matching `If-None-Match` with 304, as
    /// Rails' Rack stack may (see the module's notes).
    pub fn set_etags(&self, on: bool) {
        self.with(|s| s.etags = on);
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<Request> {
        self.with(|s| s.requests.clone())
    }

    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        f(&mut self.state.lock().unwrap())
    }
}

fn project_mut<'a>(s: &'a mut State, project: &str) -> &'a mut Project {
    s.projects
        .iter_mut()
        .find(|p| p.path == project || p.id.to_string() == project)
        .expect("no such project")
}

fn mr_mut<'a>(s: &'a mut State, project: &str, iid: u64) -> &'a mut Mr {
    let id = project_mut(s, project).id;
    s.mrs
        .iter_mut()
        .find(|m| m.project == id && m.iid == iid)
        .expect("no such merge request")
}

fn set_reviewer(m: &mut Mr, user: &str, state: &'static str) {
    match m.reviewers.iter_mut().find(|r| r.0 == user) {
        Some(r) => r.1 = state,
        None => m.reviewers.push((user.into(), state)),
    }
}

fn system_note(s: &mut State, project: &str, iid: u64, user: &str, body: &str) {
    let id = project_mut(s, project).id;
    s.next_id += 1;
    let note = s.next_id;
    s.notes.push(Note {
        id: note,
        project: id,
        iid,
        discussion: discussion_id(note),
        author: user.into(),
        body: body.into(),
        system: true,
        kind: Kind::Individual,
        resolved_by: None,
    });
}

fn add_note(
    s: &mut State,
    project: &str,
    iid: u64,
    user: &str,
    body: &str,
    kind: Kind,
    discussion: Option<&str>,
) -> String {
    let id = project_mut(s, project).id;
    s.next_id += 1;
    let note = s.next_id;
    let discussion = discussion.map_or_else(|| discussion_id(note), String::from);
    s.notes.push(Note {
        id: note,
        project: id,
        iid,
        discussion: discussion.clone(),
        author: user.into(),
        body: body.into(),
        system: false,
        kind,
        resolved_by: None,
    });
    // A new note is a new comment count on the merge request, so its body changes.
    mr_mut(s, project, iid).updated += 1;
    discussion
}

/// A discussion's id: forty hex digits, as GitLab's are.
fn discussion_id(note: u64) -> String {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    note.hash(&mut h);
    format!("{:016x}{:024x}", h.finish(), note)
}

async fn handle(
    Shared(state): Shared<Arc<Mutex<State>>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let mut s = state.lock().unwrap();
    let path = uri.path().to_string();
    let (status, mut response) = answer(&mut s, &method, &uri, &headers, &body);
    if !s.down {
        // GitLab counts a request before it answers: a 304 costs as much as a 200.
        s.remaining = s.remaining.saturating_sub(1);
        let h = response.headers_mut();
        let num = |n: u64| HeaderValue::from_str(&n.to_string()).unwrap();
        let reset = reset_at();
        h.insert("ratelimit-limit", num(u64::from(s.limit)));
        h.insert("ratelimit-observed", num(u64::from(s.limit - s.remaining)));
        h.insert("ratelimit-remaining", num(u64::from(s.remaining)));
        h.insert("ratelimit-reset", num(reset));
        let when = chrono::DateTime::from_timestamp(reset as i64, 0).unwrap_or_default();
        h.insert(
            "ratelimit-resettime",
            HeaderValue::from_str(&when.format("%a, %d %b %Y %H:%M:%S GMT").to_string()).unwrap(),
        );
    }
    s.requests.push(Request {
        method: method.to_string(),
        path,
        status: status.as_u16(),
    });
    response
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// The epoch second the throttle's one-minute window resets at.
fn reset_at() -> u64 {
    (now() / 60 + 1) * 60
}

/// GitLab's error body: `{"message": …}`, whatever shape the message has.
fn message(status: StatusCode, text: Value) -> (StatusCode, Response) {
    (
        status,
        (status, axum::Json(json!({ "message": text }))).into_response(),
    )
}

/// A JSON answer, with a weak `ETag` (and a 304 when the client has it) when they are on.
fn fresh(
    s: &State,
    headers: &HeaderMap,
    status: StatusCode,
    body: Value,
    extra: &[(&str, String)],
) -> (StatusCode, Response) {
    let text = body.to_string();
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut hasher);
    let tag = format!("W/\"{:032x}\"", hasher.finish());
    let matches = headers
        .get("if-none-match")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == tag));
    let (status, mut r) = if s.etags && matches {
        (
            StatusCode::NOT_MODIFIED,
            StatusCode::NOT_MODIFIED.into_response(),
        )
    } else {
        (
            status,
            (status, [("content-type", "application/json")], text).into_response(),
        )
    };
    let h = r.headers_mut();
    if s.etags {
        h.insert("etag", HeaderValue::from_str(&tag).unwrap());
        h.insert(
            "cache-control",
            HeaderValue::from_static("max-age=0, private, must-revalidate"),
        );
    } else {
        h.insert("cache-control", HeaderValue::from_static("no-cache"));
    }
    for (k, v) in extra {
        h.insert(
            axum::http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            HeaderValue::from_str(v).unwrap(),
        );
    }
    (status, r)
}

/// One page of `list` as `page`/`per_page` ask (20 a page unless told, 100 at most), with
/// GitLab's `x-*` pagination headers.
fn paged(
    s: &State,
    headers: &HeaderMap,
    query: &BTreeMap<String, String>,
    list: Vec<Value>,
) -> (StatusCode, Response) {
    let per: usize = query
        .get("per_page")
        .and_then(|v| v.parse().ok())
        .unwrap_or(20)
        .clamp(1, 100);
    let page: usize = query
        .get("page")
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
        .max(1);
    let total = list.len();
    let pages = total.div_ceil(per).max(1);
    let items: Vec<Value> = list.into_iter().skip((page - 1) * per).take(per).collect();
    let opt = |n: usize, ok: bool| if ok { n.to_string() } else { String::new() };
    fresh(
        s,
        headers,
        StatusCode::OK,
        Value::Array(items),
        &[
            ("x-page", page.to_string()),
            ("x-per-page", per.to_string()),
            ("x-total", total.to_string()),
            ("x-total-pages", pages.to_string()),
            ("x-next-page", opt(page + 1, page < pages)),
            ("x-prev-page", opt(page.saturating_sub(1), page > 1)),
        ],
    )
}

fn answer(
    s: &mut State,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: &[u8],
) -> (StatusCode, Response) {
    if s.down {
        let page = "<!DOCTYPE html>\n<html><head><title>GitLab is not responding (503)</title></head><body><h1>503</h1><p>Service Unavailable</p></body></html>\n";
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            (
                StatusCode::SERVICE_UNAVAILABLE,
                [("content-type", "text/html; charset=utf-8")],
                page,
            )
                .into_response(),
        );
    }
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let given = header("private-token").or_else(|| {
        header("authorization")
            .and_then(|a| a.strip_prefix("Bearer "))
            .map(str::trim)
    });
    if given != Some(s.token.as_str()) {
        return message(StatusCode::UNAUTHORIZED, json!("401 Unauthorized"));
    }
    if s.remaining == 0 {
        // Rack::Attack's throttled answer: plain text, and when to come back.
        let retry = reset_at().saturating_sub(now()).max(1);
        let mut r = (
            StatusCode::TOO_MANY_REQUESTS,
            [("content-type", "text/plain")],
            "Retry later\n",
        )
            .into_response();
        r.headers_mut()
            .insert("retry-after", HeaderValue::from(retry));
        r.headers_mut().insert(
            "ratelimit-name",
            HeaderValue::from_static("throttle_authenticated_api"),
        );
        return (StatusCode::TOO_MANY_REQUESTS, r);
    }
    let Some(rest) = uri.path().strip_prefix("/api/v4/") else {
        return route_missing();
    };
    let decoded: Vec<String> = rest.split('/').map(unescape).collect();
    let segments: Vec<&str> = decoded.iter().map(String::as_str).collect();
    let query: BTreeMap<String, String> = uri
        .query()
        .unwrap_or_default()
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), unescape(&v.replace('+', " "))))
        .collect();
    let input: Value = serde_json::from_slice(body).unwrap_or_else(|_| {
        // GitLab takes form parameters as well as JSON.
        Value::Object(
            String::from_utf8_lossy(body)
                .split('&')
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.to_string(), Value::String(unescape(&v.replace('+', " ")))))
                .collect(),
        )
    });
    if let Some(answered) = issues::answer_root(s, &segments, &query, headers) {
        return answered;
    }
    let ["projects", id, rest @ ..] = segments.as_slice() else {
        return route_missing();
    };
    let Some(p) = s
        .projects
        .iter()
        .find(|p| p.path == *id || p.id.to_string() == *id)
        .cloned()
    else {
        return message(StatusCode::NOT_FOUND, json!("404 Project Not Found"));
    };
    refresh(s, &p);
    if let Some(answered) = issues::answer(s, &p, method.as_str(), rest, &query, headers, &input) {
        return answered;
    }
    let get = |s: &State, v: Value| fresh(s, headers, StatusCode::OK, v, &[]);
    match (method.as_str(), rest) {
        ("GET", []) => get(s, project_json(&p)),
        ("GET", ["merge_requests"]) => {
            let state = query.get("state").map_or("all", String::as_str);
            let list: Vec<Value> = s
                .mrs
                .iter()
                .rev()
                .filter(|m| m.project == p.id)
                .filter(|m| state == "all" || m.state == state)
                .filter(|m| query.get("source_branch").is_none_or(|b| *b == m.source))
                .filter(|m| query.get("target_branch").is_none_or(|b| *b == m.target))
                .map(|m| mr_json(s, &p, m, false, false))
                .collect();
            paged(s, headers, &query, list)
        }
        ("POST", ["merge_requests"]) => create_mr(s, &p, &input),
        ("GET", ["merge_requests", iid]) => {
            let Some(i) = find_mr(s, &p, iid) else {
                return message(StatusCode::NOT_FOUND, json!("404 Not found"));
            };
            look(s, &p, i);
            let diverged = query
                .get("include_diverged_commits_count")
                .map(String::as_str)
                == Some("true");
            let v = mr_json(s, &p, &s.mrs[i], true, diverged);
            get(s, v)
        }
        ("GET", ["merge_requests", iid, what]) => {
            let Some(i) = find_mr(s, &p, iid) else {
                return message(StatusCode::NOT_FOUND, json!("404 Not found"));
            };
            let m = s.mrs[i].clone();
            match *what {
                "approvals" => get(s, approvals_json(&p, &m)),
                "reviewers" => {
                    let list = m
                        .reviewers
                        .iter()
                        .map(|(u, st)| {
                            json!({"user": user(u), "state": st,
                                   "created_at": stamp(m.id)})
                        })
                        .collect();
                    paged(s, headers, &query, list)
                }
                "discussions" => {
                    let list = discussions_json(s, &p, &m);
                    paged(s, headers, &query, list)
                }
                "pipelines" => {
                    let list = s
                        .pipelines
                        .iter()
                        .rev()
                        .filter(|x| x.project == p.id && x.reference == m.source)
                        .map(|x| pipeline_json(s, &p, x, false))
                        .collect();
                    paged(s, headers, &query, list)
                }
                _ => route_missing(),
            }
        }
        ("PUT", ["merge_requests", iid, "merge"]) => {
            let Some(i) = find_mr(s, &p, iid) else {
                return message(StatusCode::NOT_FOUND, json!("404 Not found"));
            };
            let iid = s.mrs[i].iid;
            let squash = matches!(&input["squash"], Value::Bool(true))
                || input["squash"].as_str() == Some("true");
            let sha = input["sha"].as_str().map(String::from);
            let login = s.login.clone();
            match merge(s, &p.path, iid, squash, sha.as_deref(), &login) {
                Ok(_) => {
                    let v = mr_json(s, &p, &s.mrs[i], true, false);
                    (StatusCode::OK, axum::Json(v).into_response())
                }
                Err((status, text)) => message(status, json!(text)),
            }
        }
        ("GET", ["pipelines"]) => {
            let list = s
                .pipelines
                .iter()
                .rev()
                .filter(|x| x.project == p.id)
                .filter(|x| query.get("sha").is_none_or(|v| *v == x.sha))
                .filter(|x| query.get("ref").is_none_or(|v| *v == x.reference))
                .filter(|x| {
                    query
                        .get("status")
                        .is_none_or(|v| *v == pipeline_status(s, x.id))
                })
                .map(|x| pipeline_json(s, &p, x, false))
                .collect();
            paged(s, headers, &query, list)
        }
        ("GET", ["pipelines", pid, rest @ ..]) => {
            let Some(x) = s
                .pipelines
                .iter()
                .find(|x| x.project == p.id && x.id.to_string() == *pid)
                .cloned()
            else {
                return message(StatusCode::NOT_FOUND, json!("404 Not found"));
            };
            match rest {
                [] => get(s, pipeline_json(s, &p, &x, true)),
                ["jobs"] => {
                    let retried = query.get("include_retried").map(String::as_str) == Some("true");
                    let list = s
                        .jobs
                        .iter()
                        .rev()
                        .filter(|j| j.pipeline == x.id && (retried || !j.retried))
                        .map(|j| job_json(s, &p, &x, j))
                        .collect();
                    paged(s, headers, &query, list)
                }
                _ => route_missing(),
            }
        }
        ("GET", ["jobs", jid, rest @ ..]) => {
            let Some(j) = s.jobs.iter().find(|j| j.id.to_string() == *jid).cloned() else {
                return message(StatusCode::NOT_FOUND, json!("404 Not found"));
            };
            let Some(x) = s
                .pipelines
                .iter()
                .find(|x| x.id == j.pipeline && x.project == p.id)
                .cloned()
            else {
                return message(StatusCode::NOT_FOUND, json!("404 Not found"));
            };
            match rest {
                [] => get(s, job_json(s, &p, &x, &j)),
                // The raw log, as the runner sent it: not JSON, and no ETag.
                ["trace"] => (
                    StatusCode::OK,
                    (
                        StatusCode::OK,
                        [("content-type", "text/plain")],
                        j.trace.clone(),
                    )
                        .into_response(),
                ),
                _ => route_missing(),
            }
        }
        (m @ ("GET" | "DELETE"), ["repository", "branches", branch]) => {
            let name = format!("refs/heads/{branch}");
            let Some(commit) = rev(&p.bare, &name) else {
                return message(StatusCode::NOT_FOUND, json!("404 Branch Not Found"));
            };
            if m == "GET" {
                return get(
                    s,
                    json!({"name": branch, "merged": false, "protected": false,
                           "default": *branch == default_branch(&p.bare),
                           "developers_can_push": false, "developers_can_merge": false,
                           "can_push": true,
                           "web_url": format!("https://gitlab.example/{}/-/tree/{branch}", p.path),
                           "commit": {"id": commit, "short_id": &commit[..8]}}),
                );
            }
            match git(&p.bare, &["update-ref", "-d", &name]) {
                Ok(_) => (
                    StatusCode::NO_CONTENT,
                    StatusCode::NO_CONTENT.into_response(),
                ),
                Err(e) => message(StatusCode::BAD_REQUEST, json!(e.trim())),
            }
        }
        _ => route_missing(),
    }
}

/// Grape's answer for a path no route matches.
fn route_missing() -> (StatusCode, Response) {
    (
        StatusCode::NOT_FOUND,
        (
            StatusCode::NOT_FOUND,
            axum::Json(json!({"error": "404 Not Found"})),
        )
            .into_response(),
    )
}

/// A path segment with its `%XX` escapes undone.
fn unescape(segment: &str) -> String {
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn find_mr(s: &State, p: &Project, iid: &str) -> Option<usize> {
    let iid: u64 = iid.parse().ok()?;
    s.mrs.iter().position(|m| m.project == p.id && m.iid == iid)
}

/// Notes what pushes moved: an open merge request's head, and its `updated_at` with it.
fn refresh(s: &mut State, p: &Project) {
    for m in s
        .mrs
        .iter_mut()
        .filter(|m| m.project == p.id && m.state == "opened")
    {
        if let Some(head) = rev(&p.bare, &m.source).filter(|h| *h != m.sha) {
            m.sha = head;
            m.updated += 1;
        }
    }
}

/// The (target, head) commits of an open merge request now; `None` once its branch is gone.
fn heads_now(p: &Project, m: &Mr) -> Option<(String, String)> {
    let head = rev(&p.bare, &m.source)?;
    Some((rev(&p.bare, &m.target).unwrap_or_default(), head))
}

/// A look at merge request `i`, as GitLab's single-request endpoint does it: a check queued
/// by an earlier look or by the creation has run by now; one for heads no check has seen is
/// queued, and this look says `checking`.
fn look(s: &mut State, p: &Project, i: usize) {
    let m = &s.mrs[i];
    let Some(now) = heads_now(p, m).filter(|_| m.state == "opened") else {
        return;
    };
    let next = match &m.check {
        Check::Queued(t, h) if (t, h) == (&now.0, &now.1) => {
            let clean = merge_tree(&p.bare, t, h).is_some();
            Check::Done(now.0, now.1, clean)
        }
        Check::Done(t, h, _) if (t, h) == (&now.0, &now.1) => return,
        _ => Check::Queued(now.0, now.1),
    };
    s.mrs[i].check = next;
}

/// Whether merge request `m` merges without a conflict, as far as GitLab's check has got:
/// `Some` only for a check done on the heads it has now.
fn merges(p: &Project, m: &Mr) -> Option<bool> {
    if m.state != "opened" {
        return Some(true);
    }
    match (&m.check, heads_now(p, m)) {
        (Check::Done(t, h, clean), Some((nt, nh))) if (t, h) == (&nt, &nh) => Some(*clean),
        _ => None,
    }
}

fn create_mr(s: &mut State, p: &Project, input: &Value) -> (StatusCode, Response) {
    let field = |k: &str| input[k].as_str().filter(|v| !v.is_empty());
    let missing: Vec<String> = ["title", "source_branch", "target_branch"]
        .iter()
        .filter(|k| field(k).is_none())
        .map(|k| format!("{k} is missing"))
        .collect();
    if !missing.is_empty() {
        // Grape's own validation: `error`, not `message`.
        return (
            StatusCode::BAD_REQUEST,
            (
                StatusCode::BAD_REQUEST,
                axum::Json(json!({"error": missing.join(", ")})),
            )
                .into_response(),
        );
    }
    let (title, source, target) = (
        field("title").unwrap(),
        field("source_branch").unwrap(),
        field("target_branch").unwrap(),
    );
    if source == target {
        return message(
            StatusCode::UNPROCESSABLE_ENTITY,
            json!(["You can't use same project/branch for source and target"]),
        );
    }
    for (k, b) in [("source_branch", source), ("target_branch", target)] {
        if rev(&p.bare, &format!("refs/heads/{b}")).is_none() {
            return message(StatusCode::BAD_REQUEST, json!({ k: ["does not exist"] }));
        }
    }
    if let Some(other) = s.mrs.iter().find(|m| {
        m.project == p.id && m.state == "opened" && m.source == source && m.target == target
    }) {
        return message(
            StatusCode::CONFLICT,
            json!([format!(
                "Another open merge request already exists for this source branch: !{}",
                other.iid
            )]),
        );
    }
    s.next_id += 1;
    let iid = s.mrs.iter().filter(|m| m.project == p.id).count() as u64 + 1;
    let truthy = |k: &str| input[k] == json!(true) || input[k].as_str() == Some("true");
    s.mrs.push(Mr {
        project: p.id,
        iid,
        id: s.next_id,
        title: title.into(),
        description: input["description"].as_str().unwrap_or_default().into(),
        source: source.into(),
        target: target.into(),
        author: s.login.clone(),
        state: "opened",
        merged_by: None,
        closed_by: None,
        merge_commit: None,
        squash_commit: None,
        remove_source_branch: truthy("remove_source_branch"),
        sha: rev(&p.bare, source).unwrap_or_default(),
        // Creating it queues the check; by the next look it has run.
        check: Check::Queued(
            rev(&p.bare, target).unwrap_or_default(),
            rev(&p.bare, source).unwrap_or_default(),
        ),
        approvals: Vec::new(),
        reviewers: Vec::new(),
        updated: 0,
    });
    let i = s.mrs.len() - 1;
    let out = mr_json(s, p, &s.mrs[i], true, false);
    (
        StatusCode::CREATED,
        (StatusCode::CREATED, axum::Json(out)).into_response(),
    )
}

/// A user as GitLab's `UserBasic` entity has it.
fn user(username: &str) -> Value {
    let id = username
        .bytes()
        .fold(7u64, |h, b| h.wrapping_mul(31) + u64::from(b))
        % 100_000;
    json!({"id": id, "username": username, "name": username, "state": "active",
           "locked": false,
           "avatar_url": format!("https://secure.gravatar.example/avatar/{id}?s=80&d=identicon"),
           "web_url": format!("https://gitlab.example/{username}")})
}

/// An ISO 8601 time that grows with `n`, GitLab's format.
fn stamp(n: u64) -> String {
    format!(
        "2026-11-29T{:02}:{:02}:{:02}.000Z",
        12 + n / 3600 % 12,
        n / 60 % 60,
        n % 60
    )
}

fn project_json(p: &Project) -> Value {
    let name = p.path.rsplit('/').next().unwrap_or_default();
    let namespace = p.path.rsplit_once('/').map_or("", |(n, _)| n);
    json!({
        "id": p.id, "description": null, "name": name,
        "name_with_namespace": p.path.replace('/', " / "),
        "path": name, "path_with_namespace": p.path,
        "created_at": stamp(0), "default_branch": default_branch(&p.bare),
        "ssh_url_to_repo": format!("git@gitlab.example:{}.git", p.path),
        "http_url_to_repo": format!("https://gitlab.example/{}.git", p.path),
        "web_url": format!("https://gitlab.example/{}", p.path),
        "namespace": {"full_path": namespace, "kind": "group"},
        "visibility": "private", "archived": false,
        "merge_method": p.merge_method, "squash_option": "default_off",
        "only_allow_merge_if_pipeline_succeeds": p.pipeline_must_succeed,
        "only_allow_merge_if_all_discussions_are_resolved": false,
        "remove_source_branch_after_merge": true,
        "permissions": {"project_access": {"access_level": 30, "notification_level": 3},
                        "group_access": null},
    })
}

/// The project's pipeline of `sha`: the newest.
fn head_pipeline<'a>(s: &'a State, p: &Project, sha: &str) -> Option<&'a Pipeline> {
    s.pipelines
        .iter()
        .rev()
        .find(|x| x.project == p.id && x.sha == sha)
}

/// A pipeline's status from its jobs' (retried runs left out), as GitLab composes it.
fn pipeline_status(s: &State, pipeline: u64) -> &'static str {
    let jobs: Vec<&Job> = s
        .jobs
        .iter()
        .filter(|j| j.pipeline == pipeline && !j.retried)
        .collect();
    let any = |st: &[&str]| jobs.iter().any(|j| st.contains(&j.status.as_str()));
    if jobs.is_empty() {
        "created"
    } else if any(&["running"]) {
        "running"
    } else if any(&["pending", "created", "preparing", "waiting_for_resource"]) {
        "pending"
    } else if jobs
        .iter()
        .any(|j| j.status == "failed" && !j.allow_failure)
    {
        "failed"
    } else if any(&["canceled"]) {
        "canceled"
    } else if jobs.iter().all(|j| j.status == "skipped") {
        "skipped"
    } else if jobs
        .iter()
        .any(|j| j.status == "manual" && !j.allow_failure)
    {
        "manual"
    } else {
        "success"
    }
}

fn pipeline_json(s: &State, p: &Project, x: &Pipeline, full: bool) -> Value {
    let status = pipeline_status(s, x.id);
    let mut v = json!({
        "id": x.id, "iid": x.iid, "project_id": p.id, "sha": x.sha, "ref": x.reference,
        "status": status, "source": "push",
        "created_at": stamp(x.id), "updated_at": stamp(x.id),
        "web_url": format!("https://gitlab.example/{}/-/pipelines/{}", p.path, x.id),
    });
    if full {
        let more = json!({
            "before_sha": "0000000000000000000000000000000000000000", "tag": false,
            "yaml_errors": null, "user": user("braids-bot"),
            "started_at": stamp(x.id), "finished_at": null, "committed_at": null,
            "duration": null, "queued_duration": null, "coverage": null,
            "detailed_status": {"icon": format!("status_{status}"), "text": status,
                                "label": status, "group": status, "tooltip": status,
                                "has_details": true,
                                "details_path": format!("/{}/-/pipelines/{}", p.path, x.id),
                                "illustration": null,
                                "favicon": format!("/assets/ci_favicons/favicon_status_{status}.png")},
        });
        v.as_object_mut()
            .unwrap()
            .extend(more.as_object().unwrap().clone());
    }
    v
}

fn job_json(s: &State, p: &Project, x: &Pipeline, j: &Job) -> Value {
    let done = !["pending", "running", "created", "manual"].contains(&j.status.as_str());
    json!({
        "id": j.id, "status": j.status, "stage": j.stage, "name": j.name,
        "ref": x.reference, "tag": false, "coverage": null,
        "allow_failure": j.allow_failure,
        "created_at": stamp(j.id), "started_at": stamp(j.id),
        "finished_at": if done { json!(stamp(j.id + 30)) } else { Value::Null },
        "erased_at": null, "duration": if done { json!(30.0) } else { Value::Null },
        "queued_duration": 1.5,
        "user": user("braids-bot"),
        "commit": {"id": x.sha, "short_id": &x.sha[..8.min(x.sha.len())],
                   "title": "change", "message": "change\n"},
        "pipeline": {"id": x.id, "project_id": p.id, "ref": x.reference, "sha": x.sha,
                     "status": pipeline_status(s, x.id)},
        "failure_reason": if j.status == "failed" { json!("script_failure") } else { Value::Null },
        "web_url": format!("https://gitlab.example/{}/-/jobs/{}", p.path, j.id),
        "project": {"ci_job_token_scope_enabled": false},
        "artifacts": [], "artifacts_expire_at": null, "runner": null,
        "tag_list": [], "archived": false,
    })
}

/// What GitLab's merge checks say, in the precedence its `detailed_merge_status` reports
/// them.
fn detailed_status(s: &State, p: &Project, m: &Mr, clean: Option<bool>) -> &'static str {
    if m.state != "opened" {
        return "not_open";
    }
    if rev(&p.bare, &m.source).is_none() {
        return "broken_status";
    }
    if p.pipeline_must_succeed {
        match head_pipeline(s, p, &m.sha).map(|x| pipeline_status(s, x.id)) {
            Some("success" | "skipped") => {}
            Some("running" | "pending" | "created") => return "ci_still_running",
            _ => return "ci_must_pass",
        }
    }
    if m.reviewers.iter().any(|r| r.1 == "requested_changes") {
        return "requested_changes";
    }
    match clean {
        None => "checking",
        Some(false) => "conflict",
        Some(true) if needs_rebase(p, m) => "need_rebase",
        Some(true) => "mergeable",
    }
}

/// Fast-forward and semi-linear projects merge only a head made on the target as it is.
fn needs_rebase(p: &Project, m: &Mr) -> bool {
    let target = rev(&p.bare, &m.target).unwrap_or_default();
    p.merge_method != "merge"
        && git(&p.bare, &["merge-base", "--is-ancestor", &target, &m.sha]).is_err()
}

/// A merge request as GitLab's `MergeRequest` entity has it (`full`: the single one, with its
/// head pipeline and diff refs; else `MergeRequestBasic`, a list's item).
fn mr_json(s: &State, p: &Project, m: &Mr, full: bool, diverged: bool) -> Value {
    let clean = merges(p, m);
    let (merge_status, has_conflicts) = match (clean, &m.check) {
        (Some(true), _) => ("can_be_merged", false),
        (Some(false), _) => ("cannot_be_merged", true),
        (None, Check::Queued(..)) => ("checking", false),
        (None, _) => ("unchecked", false),
    };
    let unresolved = s.notes.iter().any(|n| {
        n.project == p.id
            && n.iid == m.iid
            && !matches!(n.kind, Kind::Individual)
            && n.resolved_by.is_none()
    });
    let user_notes = s
        .notes
        .iter()
        .filter(|n| n.project == p.id && n.iid == m.iid && !n.system)
        .count();
    let done = |by: &Option<String>| by.as_deref().map(user);
    let stamp_if = |b: bool| {
        if b {
            json!(stamp(m.id + m.updated))
        } else {
            Value::Null
        }
    };
    let mut v = json!({
        "id": m.id, "iid": m.iid, "project_id": p.id,
        "title": m.title, "description": m.description, "state": m.state,
        "created_at": stamp(m.id), "updated_at": stamp(m.id + m.updated),
        "merged_by": done(&m.merged_by), "merge_user": done(&m.merged_by),
        "merged_at": stamp_if(m.merged_by.is_some()), "merge_after": null,
        "closed_by": done(&m.closed_by), "closed_at": stamp_if(m.closed_by.is_some()),
        "target_branch": m.target, "source_branch": m.source,
        "user_notes_count": user_notes, "upvotes": 0, "downvotes": 0,
        "author": user(&m.author), "assignees": [], "assignee": null,
        "reviewers": m.reviewers.iter().map(|r| user(&r.0)).collect::<Vec<_>>(),
    });
    // Two literals: one is past `json!`'s recursion limit.
    let rest = json!({
        "source_project_id": p.id, "target_project_id": p.id,
        "labels": [], "draft": false, "imported": false, "imported_from": "none",
        "work_in_progress": false, "milestone": null,
        "merge_when_pipeline_succeeds": false,
        "merge_status": merge_status,
        "detailed_merge_status": detailed_status(s, p, m, clean),
        "sha": m.sha,
        "merge_commit_sha": m.merge_commit, "squash_commit_sha": m.squash_commit,
        "discussion_locked": null,
        "should_remove_source_branch": null,
        "force_remove_source_branch": m.remove_source_branch,
        "prepared_at": stamp(m.id),
        "reference": format!("!{}", m.iid),
        "references": {"short": format!("!{}", m.iid), "relative": format!("!{}", m.iid),
                       "full": format!("{}!{}", p.path, m.iid)},
        "web_url": format!("https://gitlab.example/{}/-/merge_requests/{}", p.path, m.iid),
        "time_stats": {"time_estimate": 0, "total_time_spent": 0,
                       "human_time_estimate": null, "human_total_time_spent": null},
        "squash": false, "squash_on_merge": false,
        "task_completion_status": {"count": 0, "completed_count": 0},
        "has_conflicts": has_conflicts,
        "blocking_discussions_resolved": !unresolved,
    });
    let o = v.as_object_mut().unwrap();
    o.extend(rest.as_object().unwrap().clone());
    if full {
        let pipeline = head_pipeline(s, p, &m.sha).map(|x| pipeline_json(s, p, x, true));
        let target = rev(&p.bare, &m.target).unwrap_or_default();
        let base = git(&p.bare, &["merge-base", &target, &m.sha])
            .map(|b| b.trim().to_string())
            .unwrap_or_default();
        let more = json!({
            "subscribed": true, "changes_count": "1",
            "latest_build_started_at": null, "latest_build_finished_at": null,
            "first_deployed_to_production_at": null,
            "pipeline": pipeline.clone(), "head_pipeline": pipeline,
            "diff_refs": {"base_sha": base, "head_sha": m.sha, "start_sha": target},
            "merge_error": null, "first_contribution": false,
            "user": {"can_merge": true},
        });
        o.extend(more.as_object().unwrap().clone());
        if diverged {
            let behind = git(
                &p.bare,
                &["rev-list", "--count", &format!("{}..{target}", m.sha)],
            )
            .ok()
            .and_then(|n| n.trim().parse::<u64>().ok());
            o.insert(
                "diverged_commits_count".into(),
                json!(if m.state == "opened" { behind } else { Some(0) }),
            );
        }
    }
    v
}

fn approvals_json(p: &Project, m: &Mr) -> Value {
    json!({
        "id": m.id, "iid": m.iid, "project_id": p.id, "title": m.title,
        "description": m.description, "state": m.state,
        "created_at": stamp(m.id), "updated_at": stamp(m.id + m.updated),
        "merge_status": "can_be_merged",
        "approved": true,
        "approvals_required": 0, "approvals_left": 0,
        "require_password_to_approve": false,
        "approved_by": m.approvals.iter().map(|u| json!({"user": user(u)})).collect::<Vec<_>>(),
        "suggested_approvers": [], "approvers": [], "approver_groups": [],
        "user_has_approved": m.approvals.contains(&m.author),
        "user_can_approve": true,
        "approval_rules_left": [], "has_approval_rules": false,
        "merge_request_approvers_available": false,
        "multiple_approval_rules_available": false,
        "invalid_approvers_rules": [],
    })
}

/// The merge request's discussions, oldest first, system notes among them.
fn discussions_json(s: &State, p: &Project, m: &Mr) -> Vec<Value> {
    let mut order: Vec<&str> = Vec::new();
    let mine: Vec<&Note> = s
        .notes
        .iter()
        .filter(|n| n.project == p.id && n.iid == m.iid)
        .collect();
    for n in &mine {
        if !order.contains(&n.discussion.as_str()) {
            order.push(&n.discussion);
        }
    }
    order
        .into_iter()
        .map(|d| {
            let notes: Vec<&&Note> = mine.iter().filter(|n| n.discussion == d).collect();
            let individual = matches!(notes[0].kind, Kind::Individual);
            json!({
                "id": d,
                "individual_note": individual,
                "notes": notes.iter().map(|n| note_json(p, m, n)).collect::<Vec<_>>(),
            })
        })
        .collect()
}

fn note_json(p: &Project, m: &Mr, n: &Note) -> Value {
    let resolvable = !matches!(n.kind, Kind::Individual);
    let mut v = json!({
        "id": n.id,
        "type": match n.kind { Kind::Diff { .. } => json!("DiffNote"),
                               Kind::Thread => json!("DiscussionNote"),
                               Kind::Individual => Value::Null },
        "body": n.body, "attachment": null, "author": user(&n.author),
        "created_at": stamp(n.id), "updated_at": stamp(n.id),
        "system": n.system, "noteable_id": m.id, "noteable_type": "MergeRequest",
        "project_id": p.id, "commit_id": null,
        "resolvable": resolvable,
        "confidential": false, "internal": false, "imported": false,
        "imported_from": "none", "noteable_iid": m.iid,
        "commands_changes": {},
    });
    let o = v.as_object_mut().unwrap();
    if resolvable {
        o.insert("resolved".into(), json!(n.resolved_by.is_some()));
        o.insert(
            "resolved_by".into(),
            json!(n.resolved_by.as_deref().map(user)),
        );
        o.insert(
            "resolved_at".into(),
            json!(n.resolved_by.as_ref().map(|_| stamp(n.id + 1))),
        );
    }
    if let Kind::Diff {
        path,
        line,
        base,
        head,
    } = &n.kind
    {
        let code = format!("{:x}_{line}_{line}", path.len());
        let end = json!({"line_code": code, "type": "new", "old_line": null, "new_line": line});
        o.insert(
            "position".into(),
            json!({"base_sha": base, "start_sha": base, "head_sha": head,
                   "old_path": path, "new_path": path, "position_type": "text",
                   "old_line": null, "new_line": line,
                   "line_range": {"start": end, "end": end}}),
        );
    }
    v
}

/// Merges merge request `iid` as GitLab's merge endpoint does: its checks in its order (the
/// state first, 405; then git, 422; then `sha`, 409), then a merge commit, a squash commit
/// (merged, or fast-forwarded onto the target) or a fast-forward as the project says. The
/// target's new head.
fn merge(
    s: &mut State,
    project: &str,
    iid: u64,
    squash: bool,
    sha: Option<&str>,
    login: &str,
) -> Result<String, (StatusCode, String)> {
    let p = project_mut(s, project).clone();
    let i = s
        .mrs
        .iter()
        .position(|m| m.project == p.id && m.iid == iid)
        .ok_or((StatusCode::NOT_FOUND, "404 Not found".to_string()))?;
    let not_allowed = (
        StatusCode::METHOD_NOT_ALLOWED,
        "405 Method Not Allowed".to_string(),
    );
    let cannot = (
        StatusCode::UNPROCESSABLE_ENTITY,
        "Branch cannot be merged".to_string(),
    );
    if s.mrs[i].state != "opened" {
        return Err(not_allowed);
    }
    let head = rev(&p.bare, &s.mrs[i].source).ok_or(not_allowed.clone())?;
    let base = rev(&p.bare, &s.mrs[i].target).ok_or(not_allowed.clone())?;
    if p.pipeline_must_succeed
        && !matches!(
            head_pipeline(s, &p, &head).map(|x| pipeline_status(s, x.id)),
            Some("success" | "skipped")
        )
    {
        return Err(not_allowed);
    }
    // The merge endpoint checks there and then.
    let clean = merge_tree(&p.bare, &base, &head).is_some();
    s.mrs[i].check = Check::Done(base.clone(), head.clone(), clean);
    let m = s.mrs[i].clone();
    if !clean || needs_rebase(&p, &m) {
        return Err(cannot);
    }
    if sha.is_some_and(|x| x != head) {
        return Err((
            StatusCode::CONFLICT,
            format!("SHA does not match HEAD of source branch: {head}"),
        ));
    }
    let fail = |e: String| (StatusCode::UNPROCESSABLE_ENTITY, e);
    let merge_base = git(&p.bare, &["merge-base", &base, &head])
        .map(|b| b.trim().to_string())
        .map_err(fail)?;
    // The squash commit: the whole change on the merge base, titled as the merge request.
    let squashed = match squash {
        true => {
            let tree = git(&p.bare, &["rev-parse", &format!("{head}^{{tree}}")]).map_err(fail)?;
            Some(commit_tree(&p.bare, tree.trim(), &[&merge_base], &m.title, FORGE).map_err(fail)?)
        }
        false => None,
    };
    let tip = squashed.clone().unwrap_or_else(|| head.clone());
    let (new, merge_commit) = if p.merge_method == "ff" {
        (tip.clone(), None)
    } else {
        let tree = merge_tree(&p.bare, &base, &tip).ok_or(cannot.clone())?;
        let text = format!(
            "Merge branch '{}' into '{}'\n\n{}\n\nSee merge request {}!{}",
            m.source, m.target, m.title, p.path, m.iid
        );
        let c = commit_tree(&p.bare, &tree, &[&base, &tip], &text, FORGE).map_err(fail)?;
        (c.clone(), Some(c))
    };
    git(
        &p.bare,
        &[
            "update-ref",
            &format!("refs/heads/{}", m.target),
            &new,
            &base,
        ],
    )
    .map_err(fail)?;
    if m.remove_source_branch {
        let _ = git(
            &p.bare,
            &["update-ref", "-d", &format!("refs/heads/{}", m.source)],
        );
    }
    let m = &mut s.mrs[i];
    m.state = "merged";
    m.merged_by = Some(login.into());
    m.merge_commit = merge_commit;
    m.squash_commit = squashed;
    m.sha = head;
    m.updated += 1;
    let text = m.description.clone();
    issues::close_named(s, p.id, &text, login);
    Ok(new)
}
