//! A stand-in GitHub: the part of the REST API v3 braids' pull-request landing uses, as
//! GitHub's published OpenAPI description defines it (paths, status codes, bodies, the
//! `ETag`/`If-None-Match` and `x-ratelimit-*` headers), with real bare repositories behind it
//! that it merges into the way GitHub would (`merge`, `squash`, `rebase`).
//!
//! The forge is the one part of these tests that cannot run here, so it is scripted; the tests
//! drive what a person or a CI would do on it through methods ([`GitHub::check`],
//! [`GitHub::review`], [`GitHub::merge_by`], [`GitHub::close_by`], ...), and read back what
//! braids asked of it ([`GitHub::requests`]).
//!
//! - `GET /repos/{owner}/{repo}`
//! - `GET|POST /repos/{owner}/{repo}/pulls`, `GET /repos/{owner}/{repo}/pulls/{n}`
//! - `GET /repos/{owner}/{repo}/pulls/{n}/reviews`, `.../pulls/{n}/comments`,
//!   `GET /repos/{owner}/{repo}/issues/{n}` (who closed it)
//! - `PUT /repos/{owner}/{repo}/pulls/{n}/merge`
//! - `GET /repos/{owner}/{repo}/commits/{ref}/check-runs`, `.../commits/{ref}/status`
//! - `DELETE /repos/{owner}/{repo}/git/refs/heads/{branch}`
//! - `GET /rate_limit` (never counted, as on GitHub)

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

#[path = "forge_github/issues.rs"]
mod issues;
#[allow(unused_imports)]
pub use issues::IssueView;

/// Who the forge's own commits are by.
const FORGE: (&str, &str) = ("GitHub", "noreply@github.example");

/// One request braids made, as the forge answered it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    pub path: String,
    pub status: u16,
}

#[derive(Debug, Clone)]
struct Pull {
    repo: String,
    number: u64,
    title: String,
    body: String,
    head: String,
    base: String,
    author: String,
    open: bool,
    merged_by: Option<String>,
    closed_by: Option<String>,
    merge_commit: Option<String>,
    /// Bumped by every review, comment, close and merge: GitHub's `updated_at`, so the pull
    /// request's ETag changes with them.
    updated: u64,
}

#[derive(Debug, Clone)]
struct Review {
    pull: u64,
    id: u64,
    author: String,
    state: &'static str,
    body: String,
    commit: String,
}

#[derive(Debug, Clone)]
struct Comment {
    pull: u64,
    id: u64,
    review: u64,
    author: String,
    path: String,
    line: u32,
    body: String,
    commit: String,
}

/// A check run: name, status, conclusion, summary.
type CheckRun = (String, String, Option<String>, String);

#[derive(Debug)]
struct State {
    token: String,
    login: String,
    repos: BTreeMap<String, PathBuf>,
    pulls: Vec<Pull>,
    /// Check runs by commit.
    checks: BTreeMap<String, Vec<CheckRun>>,
    /// Commit statuses by commit: context, state, description.
    statuses: BTreeMap<String, Vec<(String, String, String)>>,
    reviews: Vec<Review>,
    comments: Vec<Comment>,
    next_id: u64,
    limit: u32,
    remaining: u32,
    down: bool,
    requests: Vec<Request>,
    /// Each login's `author_association`, where not `MEMBER`.
    associations: BTreeMap<String, String>,
    issues: Vec<issues::IssueRec>,
    /// Each repository's labels.
    labels: BTreeMap<String, Vec<String>>,
    /// Each login's permission on every repository.
    permissions: BTreeMap<String, String>,
    /// Whether every issue path answers 403 (a token without the Issues permission).
    issues_forbidden: bool,
    /// Repositories whose issues are another's (a benchmark's many projects over one set).
    same_issues: BTreeMap<String, String>,
}

/// The running stand-in; it serves as long as the test process lives.
pub struct GitHub {
    pub port: u16,
    state: Arc<Mutex<State>>,
}

impl GitHub {
    /// Serves on a free loopback port, accepting `token` for the user `login`.
    pub fn start(token: &str, login: &str) -> GitHub {
        let state = Arc::new(Mutex::new(State {
            token: token.into(),
            login: login.into(),
            repos: BTreeMap::new(),
            pulls: Vec::new(),
            checks: BTreeMap::new(),
            statuses: BTreeMap::new(),
            reviews: Vec::new(),
            comments: Vec::new(),
            next_id: 1000,
            limit: 5000,
            remaining: 5000,
            down: false,
            requests: Vec::new(),
            associations: BTreeMap::new(),
            issues: Vec::new(),
            labels: BTreeMap::new(),
            permissions: BTreeMap::new(),
            same_issues: BTreeMap::new(),
            issues_forbidden: false,
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
        GitHub { port, state }
    }

    /// The API's root URL, what `[forges.<name>] api` names.
    pub fn api(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Serves `owner/name` from the bare repository `bare`.
    pub fn repo(&self, full_name: &str, bare: &Path) {
        self.with(|s| s.repos.insert(full_name.into(), bare.to_path_buf()));
    }

    /// Sets the check run `name` of `sha` to `status` (`queued`, `in_progress`, `completed`)
    /// with `conclusion` (`success`, `failure`, ...) and `summary`.
    pub fn check(
        &self,
        sha: &str,
        name: &str,
        status: &str,
        conclusion: Option<&str>,
        summary: &str,
    ) {
        self.with(|s| {
            let runs = s.checks.entry(sha.into()).or_default();
            runs.retain(|r| r.0 != name);
            runs.push((
                name.into(),
                status.into(),
                conclusion.map(String::from),
                summary.into(),
            ));
        });
    }

    /// Sets the commit status `context` of `sha` to `state` (`pending`, `success`, `failure`,
    /// `error`).
    pub fn status(&self, sha: &str, context: &str, state: &str, description: &str) {
        self.with(|s| {
            let all = s.statuses.entry(sha.into()).or_default();
            all.retain(|r| r.0 != context);
            all.push((context.into(), state.into(), description.into()));
        });
    }

    /// `author` reviews pull request `number` at its head: `APPROVED`, `CHANGES_REQUESTED` or
    /// `COMMENTED`, with line comments `(path, line, body)`. Returns the review's id.
    pub fn review(
        &self,
        repo: &str,
        number: u64,
        author: &str,
        state: &'static str,
        body: &str,
        lines: &[(&str, u32, &str)],
    ) -> u64 {
        let head = self.head_of(repo, number);
        self.with(|s| {
            touch(s, repo, number);
            s.next_id += 1;
            let id = s.next_id;
            s.reviews.push(Review {
                pull: number,
                id,
                author: author.into(),
                state,
                body: body.into(),
                commit: head.clone(),
            });
            for (path, line, text) in lines {
                s.next_id += 1;
                let cid = s.next_id;
                s.comments.push(Comment {
                    pull: number,
                    id: cid,
                    review: id,
                    author: author.into(),
                    path: (*path).into(),
                    line: *line,
                    body: (*text).into(),
                    commit: head.clone(),
                });
            }
            id
        })
    }

    /// Opens a pull request of `head` against `base` as braids' user would; its number.
    pub fn open(&self, repo: &str, head: &str, base: &str, title: &str) -> u64 {
        let mut s = self.state.lock().unwrap();
        let bare = s.repos[repo].clone();
        let input = json!({"title": title, "head": head, "base": base});
        let (status, _) = create_pull(&mut s, repo, &bare, &input);
        assert_eq!(
            status,
            StatusCode::CREATED,
            "cannot open {head} against {base}"
        );
        s.pulls.last().map_or(0, |p| p.number)
    }

    /// A person merges pull request `number` on the forge (a merge commit).
    pub fn merge_by(&self, repo: &str, number: u64, login: &str) -> Result<String, String> {
        let mut s = self.state.lock().unwrap();
        merge(&mut s, repo, number, "merge", None, login)
    }

    /// A person closes pull request `number` without merging it.
    pub fn close_by(&self, repo: &str, number: u64, login: &str) {
        self.with(|s| {
            if let Some(p) = s
                .pulls
                .iter_mut()
                .find(|p| p.repo == repo && p.number == number)
            {
                p.open = false;
                p.closed_by = Some(login.into());
                p.updated += 1;
            }
        });
    }

    /// The head commit of pull request `number` now.
    pub fn head_of(&self, repo: &str, number: u64) -> String {
        let s = self.state.lock().unwrap();
        let p = s
            .pulls
            .iter()
            .find(|p| p.repo == repo && p.number == number)
            .expect("no such pull request");
        rev(&s.repos[repo], &p.head).unwrap_or_default()
    }

    /// The numbers of `repo`'s pull requests, with their head branch and whether open.
    pub fn pulls(&self, repo: &str) -> Vec<(u64, String, bool)> {
        self.with(|s| {
            s.pulls
                .iter()
                .filter(|p| p.repo == repo)
                .map(|p| (p.number, p.head.clone(), p.open))
                .collect()
        })
    }

    /// The rate limit's size, all of it left.
    #[allow(dead_code)] // the review bench's
    pub fn set_limit(&self, n: u32) {
        self.with(|s| {
            s.limit = n;
            s.remaining = n;
        });
    }

    /// `login`'s standing in every repository (`NONE` for a stranger); `MEMBER` unless set.
    pub fn set_association(&self, login: &str, association: &str) {
        self.with(|s| s.associations.insert(login.into(), association.into()));
    }

    /// Requests left in the rate-limit window now.
    #[allow(dead_code)] // the review bench's
    pub fn remaining(&self) -> u32 {
        self.with(|s| s.remaining)
    }

    /// Requests left before the rate limit answers 403.
    pub fn set_remaining(&self, n: u32) {
        self.with(|s| s.remaining = n);
    }

    /// Whether every request gets 503, as during an outage.
    pub fn set_down(&self, down: bool) {
        self.with(|s| s.down = down);
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<Request> {
        self.with(|s| s.requests.clone())
    }

    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        f(&mut self.state.lock().unwrap())
    }
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
    let counted = status != StatusCode::NOT_MODIFIED && path != "/rate_limit";
    if counted && status != StatusCode::UNAUTHORIZED && !s.down {
        s.remaining = s.remaining.saturating_sub(1);
    }
    let h = response.headers_mut();
    let num = |n: u32| HeaderValue::from_str(&n.to_string()).unwrap();
    h.insert("x-ratelimit-limit", num(s.limit));
    h.insert("x-ratelimit-remaining", num(s.remaining));
    h.insert("x-ratelimit-used", num(s.limit - s.remaining));
    h.insert("x-ratelimit-reset", num(reset_at()));
    h.insert("x-ratelimit-resource", HeaderValue::from_static("core"));
    s.requests.push(Request {
        method: method.to_string(),
        path,
        status: status.as_u16(),
    });
    response
}

/// The epoch second the window resets at: the next full hour.
fn reset_at() -> u32 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    ((now / 3600 + 1) * 3600) as u32
}

fn message(status: StatusCode, text: &str) -> (StatusCode, Response) {
    let body = json!({
        "message": text,
        "documentation_url": "https://docs.github.com/rest",
        "status": status.as_u16().to_string(),
    });
    (status, (status, axum::Json(body)).into_response())
}

/// A JSON answer with its `ETag`, or 304 when the client already has it.
fn fresh(headers: &HeaderMap, status: StatusCode, body: Value) -> (StatusCode, Response) {
    let text = body.to_string();
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut hasher);
    let tag = format!("W/\"{:016x}\"", hasher.finish());
    let mut r = if headers
        .get("if-none-match")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == tag))
    {
        return (StatusCode::NOT_MODIFIED, {
            let mut r = StatusCode::NOT_MODIFIED.into_response();
            r.headers_mut()
                .insert("etag", HeaderValue::from_str(&tag).unwrap());
            r
        });
    } else {
        (
            status,
            [("content-type", "application/json; charset=utf-8")],
            text,
        )
            .into_response()
    };
    r.headers_mut()
        .insert("etag", HeaderValue::from_str(&tag).unwrap());
    (status, r)
}

fn answer(
    s: &mut State,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: &[u8],
) -> (StatusCode, Response) {
    if s.down {
        return message(StatusCode::SERVICE_UNAVAILABLE, "Service Unavailable");
    }
    let auth = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let given = auth
        .strip_prefix("Bearer ")
        .or_else(|| auth.strip_prefix("token "))
        .unwrap_or_default();
    if given != s.token {
        return message(StatusCode::UNAUTHORIZED, "Bad credentials");
    }
    let decoded: Vec<String> = uri
        .path()
        .trim_matches('/')
        .split('/')
        .map(unescape)
        .collect();
    let segments: Vec<&str> = decoded.iter().map(String::as_str).collect();
    if segments == ["rate_limit"] {
        let core = json!({"limit": s.limit, "remaining": s.remaining,
                          "used": s.limit - s.remaining, "reset": reset_at()});
        return fresh(
            headers,
            StatusCode::OK,
            json!({"resources": {"core": core}, "rate": core}),
        );
    }
    if s.remaining == 0 {
        return message(
            StatusCode::FORBIDDEN,
            "API rate limit exceeded for user ID 1. (But here's the good news: Authenticated requests get a higher rate limit.)",
        );
    }
    if segments == ["user"] {
        let login = s.login.clone();
        return fresh(headers, StatusCode::OK, user(&login));
    }
    let ["repos", owner, name, rest @ ..] = segments.as_slice() else {
        return message(StatusCode::NOT_FOUND, "Not Found");
    };
    let repo = format!("{owner}/{name}");
    let Some(bare) = s.repos.get(&repo).cloned() else {
        return message(StatusCode::NOT_FOUND, "Not Found");
    };
    let query: BTreeMap<String, String> = uri
        .query()
        .unwrap_or_default()
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_string(), v.replace("%3A", ":")))
        .collect();
    let input: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let of = s.same_issues.get(&repo).cloned().unwrap_or(repo.clone());
    if let Some(answered) = issues::answer(s, method.as_str(), &of, rest, &query, headers, &input) {
        return answered;
    }
    match (method.as_str(), rest) {
        ("GET", []) => {
            let branch = default_branch(&bare);
            fresh(
                headers,
                StatusCode::OK,
                json!({"id": 1, "name": name, "full_name": repo, "private": true,
                       "default_branch": branch, "owner": {"login": owner},
                       "permissions": {"admin": false, "push": true, "pull": true}}),
            )
        }
        ("GET", ["pulls"]) => {
            let state = query.get("state").map_or("open", String::as_str);
            let head = query.get("head").cloned();
            let base = query.get("base").cloned();
            let list: Vec<Value> = s
                .pulls
                .iter()
                .filter(|p| p.repo == repo)
                .filter(|p| match state {
                    "all" => true,
                    "closed" => !p.open,
                    _ => p.open,
                })
                .filter(|p| {
                    head.as_ref()
                        .is_none_or(|h| h == &format!("{owner}:{}", p.head))
                })
                .filter(|p| base.as_ref().is_none_or(|b| b == &p.base))
                .map(|p| pull_json(s, p, &bare))
                .collect();
            fresh(headers, StatusCode::OK, Value::Array(list))
        }
        ("POST", ["pulls"]) => create_pull(s, &repo, &bare, &input),
        ("GET", ["pulls", n]) => match find(s, &repo, n) {
            Some(p) => fresh(headers, StatusCode::OK, pull_json(s, &p, &bare)),
            None => message(StatusCode::NOT_FOUND, "Not Found"),
        },
        ("GET", ["issues", n]) => match find(s, &repo, n) {
            // A pull request is an issue too; only the issue says who closed it.
            Some(p) => fresh(
                headers,
                StatusCode::OK,
                json!({"id": 900 + p.number, "node_id": format!("I_{}", p.number),
                       "number": p.number, "title": p.title,
                       "state": if p.open { "open" } else { "closed" },
                       "user": user(&p.author),
                       "closed_by": p.closed_by.as_deref().or(p.merged_by.as_deref()).map(user),
                       "pull_request": {"url": format!("https://api.github.example/repos/{repo}/pulls/{}", p.number)}}),
            ),
            None => message(StatusCode::NOT_FOUND, "Not Found"),
        },
        ("GET", ["pulls", n, "reviews"]) => {
            let Some(p) = find(s, &repo, n) else {
                return message(StatusCode::NOT_FOUND, "Not Found");
            };
            let list: Vec<Value> = s
                .reviews
                .iter()
                .filter(|r| r.pull == p.number)
                .map(|r| {
                    json!({"id": r.id, "node_id": format!("PRR_{}", r.id),
                           "user": user(&r.author), "body": r.body,
                           "state": r.state, "commit_id": r.commit,
                           "html_url": format!("https://github.example/{repo}/pull/{}#pullrequestreview-{}", p.number, r.id),
                           "pull_request_url": format!("https://api.github.example/repos/{repo}/pulls/{}", p.number),
                           "submitted_at": "2026-11-29T12:00:00Z",
                           "author_association": s.associations.get(&r.author).map_or("MEMBER", String::as_str)})
                })
                .collect();
            fresh(headers, StatusCode::OK, Value::Array(list))
        }
        ("GET", ["pulls", n, "comments"]) => {
            let Some(p) = find(s, &repo, n) else {
                return message(StatusCode::NOT_FOUND, "Not Found");
            };
            let list: Vec<Value> = s
                .comments
                .iter()
                .filter(|c| c.pull == p.number)
                .map(|c| {
                    json!({"id": c.id, "node_id": format!("PRRC_{}", c.id),
                           "pull_request_review_id": c.review,
                           "user": user(&c.author), "path": c.path, "line": c.line,
                           "side": "RIGHT", "body": c.body, "commit_id": c.commit})
                })
                .collect();
            fresh(headers, StatusCode::OK, Value::Array(list))
        }
        ("PUT", ["pulls", n, "merge"]) => {
            let Some(p) = find(s, &repo, n) else {
                return message(StatusCode::NOT_FOUND, "Not Found");
            };
            let method = input["merge_method"]
                .as_str()
                .unwrap_or("merge")
                .to_string();
            let sha = input["sha"].as_str().map(String::from);
            let login = s.login.clone();
            match merge(s, &repo, p.number, &method, sha.as_deref(), &login) {
                Ok(commit) => (
                    StatusCode::OK,
                    axum::Json(json!({"sha": commit, "merged": true,
                                      "message": "Pull Request successfully merged"}))
                    .into_response(),
                ),
                Err(e) if e.starts_with("Head branch") => message(StatusCode::CONFLICT, &e),
                Err(e) => message(StatusCode::METHOD_NOT_ALLOWED, &e),
            }
        }
        ("GET", ["commits", r, "check-runs"]) => {
            let sha = rev(&bare, r).unwrap_or_else(|| r.to_string());
            let runs: Vec<Value> = s
                .checks
                .get(&sha)
                .into_iter()
                .flatten()
                .enumerate()
                .map(|(i, (name, status, conclusion, summary))| {
                    json!({"id": i + 1, "node_id": format!("CR_{}", i + 1), "name": name,
                           "head_sha": sha, "status": status, "conclusion": conclusion,
                           "url": format!("https://api.github.example/repos/{repo}/check-runs/{}", i + 1),
                           "html_url": format!("https://github.example/{repo}/runs/{}", i + 1),
                           "started_at": "2026-11-29T12:00:00Z", "pull_requests": [],
                           "output": {"title": name, "summary": summary, "text": null,
                                      "annotations_count": 0,
                                      "annotations_url": format!("https://api.github.example/repos/{repo}/check-runs/{}/annotations", i + 1)},
                           "details_url": format!("https://ci.example/{sha}/{name}")})
                })
                .collect();
            fresh(
                headers,
                StatusCode::OK,
                json!({"total_count": runs.len(), "check_runs": runs}),
            )
        }
        ("GET", ["commits", r, "status"]) => {
            let sha = rev(&bare, r).unwrap_or_else(|| r.to_string());
            let all = s.statuses.get(&sha).cloned().unwrap_or_default();
            let combined = if all.iter().any(|x| x.1 == "failure" || x.1 == "error") {
                "failure"
            } else if all.is_empty() || all.iter().any(|x| x.1 == "pending") {
                "pending"
            } else {
                "success"
            };
            let list: Vec<Value> = all
                .iter()
                .map(|(context, state, description)| {
                    json!({"context": context, "state": state, "description": description,
                           "target_url": null})
                })
                .collect();
            fresh(
                headers,
                StatusCode::OK,
                json!({"state": combined, "sha": sha, "total_count": list.len(),
                       "statuses": list}),
            )
        }
        ("DELETE", ["git", "refs", "heads", branch @ ..]) => {
            let name = format!("refs/heads/{}", branch.join("/"));
            let exists = rev(&bare, &name).is_some();
            match git(&bare, &["update-ref", "-d", &name]) {
                Ok(_) if exists => (
                    StatusCode::NO_CONTENT,
                    StatusCode::NO_CONTENT.into_response(),
                ),
                _ => message(StatusCode::UNPROCESSABLE_ENTITY, "Reference does not exist"),
            }
        }
        _ => message(StatusCode::NOT_FOUND, "Not Found"),
    }
}

/// A path segment with its `%XX` escapes undone (a branch in `{ref}` comes as `a%2Fb`).
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

/// Marks pull request `number` changed.
fn touch(s: &mut State, repo: &str, number: u64) {
    if let Some(p) = s
        .pulls
        .iter_mut()
        .find(|p| p.repo == repo && p.number == number)
    {
        p.updated += 1;
    }
}

fn find(s: &State, repo: &str, n: &str) -> Option<Pull> {
    let n: u64 = n.parse().ok()?;
    s.pulls
        .iter()
        .find(|p| p.repo == repo && p.number == n)
        .cloned()
}

fn create_pull(s: &mut State, repo: &str, bare: &Path, input: &Value) -> (StatusCode, Response) {
    let (Some(title), Some(head), Some(base)) = (
        input["title"].as_str(),
        input["head"].as_str(),
        input["base"].as_str(),
    ) else {
        return message(StatusCode::UNPROCESSABLE_ENTITY, "Validation Failed");
    };
    // `head` may name the owner too (`me:branch`).
    let head = head.rsplit(':').next().unwrap_or(head).to_string();
    let invalid = |field: &str, text: String| {
        let body = json!({"message": "Validation Failed",
            "errors": [{"resource": "PullRequest", "field": field, "code": "custom",
                        "message": text}],
            "documentation_url": "https://docs.github.com/rest/pulls/pulls#create-a-pull-request",
            "status": "422"});
        (
            StatusCode::UNPROCESSABLE_ENTITY,
            (StatusCode::UNPROCESSABLE_ENTITY, axum::Json(body)).into_response(),
        )
    };
    if rev(bare, &head).is_none() {
        return invalid("head", "head invalid".into());
    }
    if rev(bare, base).is_none() {
        return invalid("base", "base invalid".into());
    }
    if s.pulls
        .iter()
        .any(|p| p.repo == repo && p.open && p.head == head && p.base == base)
    {
        return invalid(
            "head",
            format!("A pull request already exists for {}:{head}.", s.login),
        );
    }
    let number = issues::next_number(s, repo);
    let pull = Pull {
        repo: repo.into(),
        number,
        title: title.into(),
        body: input["body"].as_str().unwrap_or_default().into(),
        head,
        base: base.into(),
        author: s.login.clone(),
        open: true,
        merged_by: None,
        closed_by: None,
        merge_commit: None,
        updated: 0,
    };
    let out = pull_json(s, &pull, bare);
    s.pulls.push(pull);
    (
        StatusCode::CREATED,
        (StatusCode::CREATED, axum::Json(out)).into_response(),
    )
}

/// A pull request's `updated_at`.
fn stamp(p: &Pull) -> String {
    format!(
        "2026-11-29T12:{:02}:{:02}Z",
        p.updated / 60 % 60,
        p.updated % 60
    )
}

/// A user as GitHub's `simple-user` schema has it.
fn user(login: &str) -> Value {
    let id = login.bytes().fold(7u64, |h, b| h * 31 + u64::from(b)) % 1_000_000;
    json!({"login": login, "id": id, "node_id": format!("U_{id}"),
           "avatar_url": format!("https://avatars.github.example/u/{id}"), "gravatar_id": "",
           "url": format!("https://api.github.example/users/{login}"),
           "html_url": format!("https://github.example/{login}"),
           "type": "User", "site_admin": false})
}

fn pull_json(s: &State, p: &Pull, bare: &Path) -> Value {
    let head = rev(bare, &p.head).unwrap_or_default();
    let base = rev(bare, &p.base).unwrap_or_default();
    let merged = p.merged_by.is_some();
    let (mergeable, state) = if !p.open || head.is_empty() {
        (Value::Null, "unknown")
    } else if merge_tree(bare, &base, &head).is_some() {
        let behind = git(bare, &["merge-base", "--is-ancestor", &base, &head]).is_err();
        (json!(true), if behind { "behind" } else { "clean" })
    } else {
        (json!(false), "dirty")
    };
    let _ = s;
    let url = format!(
        "https://api.github.example/repos/{}/pulls/{}",
        p.repo, p.number
    );
    json!({
        "url": url,
        "id": 500 + p.number,
        "node_id": format!("PR_{}", p.number),
        "locked": false,
        "maintainer_can_modify": false,
        "created_at": "2026-11-29T12:00:00Z",
        "updated_at": stamp(p),
        "number": p.number,
        "state": if p.open { "open" } else { "closed" },
        "title": p.title,
        "body": p.body,
        "html_url": format!("https://github.example/{}/pull/{}", p.repo, p.number),
        "user": user(&p.author),
        "head": {"ref": p.head, "sha": head, "repo": {"full_name": p.repo}},
        "base": {"ref": p.base, "sha": base, "repo": {"full_name": p.repo}},
        "merged": merged,
        "mergeable": mergeable,
        "mergeable_state": state,
        "merged_by": p.merged_by.as_deref().map(user),
        "merge_commit_sha": p.merge_commit,
        "draft": false,
    })
}

/// Merges pull request `number` the way GitHub does with `method`, refusing when `sha` is not
/// its head any more; the new base commit.
fn merge(
    s: &mut State,
    repo: &str,
    number: u64,
    method: &str,
    sha: Option<&str>,
    login: &str,
) -> Result<String, String> {
    let bare = s.repos[repo].clone();
    let p = s
        .pulls
        .iter()
        .find(|p| p.repo == repo && p.number == number)
        .cloned()
        .ok_or("Not Found")?;
    if !p.open {
        return Err("Pull Request is not mergeable".into());
    }
    let head = rev(&bare, &p.head).ok_or("Pull Request is not mergeable")?;
    let base = rev(&bare, &p.base).ok_or("Pull Request is not mergeable")?;
    if sha.is_some_and(|x| x != head) {
        return Err("Head branch was modified. Review and try the merge again.".into());
    }
    let tree = merge_tree(&bare, &base, &head).ok_or("Pull Request is not mergeable")?;
    let title = format!("{} (#{number})", p.title);
    let commit = match method {
        "squash" => commit_tree(&bare, &tree, &[&base], &title, FORGE)?,
        "rebase" => {
            let mut at = base.clone();
            let list = git(
                &bare,
                &["rev-list", "--reverse", &format!("{base}..{head}")],
            )?;
            for c in list.lines() {
                let parent = format!("{c}^");
                let t = git(
                    &bare,
                    &[
                        "merge-tree",
                        "--write-tree",
                        "--merge-base",
                        &parent,
                        &at,
                        c,
                    ],
                )
                .map_err(|_| "Pull Request is not mergeable".to_string())?;
                let msg = git(&bare, &["log", "-1", "--format=%B", c])?;
                at = commit_tree(
                    &bare,
                    t.lines().next().unwrap_or_default(),
                    &[&at],
                    &msg,
                    FORGE,
                )?;
            }
            at
        }
        _ => commit_tree(
            &bare,
            &tree,
            &[&base, &head],
            &format!(
                "Merge pull request #{number} from {}\n\n{}",
                p.head, p.title
            ),
            FORGE,
        )?,
    };
    git(
        &bare,
        &[
            "update-ref",
            &format!("refs/heads/{}", p.base),
            &commit,
            &base,
        ],
    )?;
    let p = s
        .pulls
        .iter_mut()
        .find(|p| p.repo == repo && p.number == number)
        .unwrap();
    p.open = false;
    p.merged_by = Some(login.into());
    p.merge_commit = Some(commit.clone());
    p.updated += 1;
    let body = p.body.clone();
    issues::close_named(s, repo, &body, login);
    Ok(commit)
}
