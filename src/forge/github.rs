//! GitHub's REST API v3 through octocrab (its client, token and base URL), with conditional
//! requests of braids' own: octocrab's typed calls send no `If-None-Match`, so reads go
//! through its raw `_get_with_headers` and braids reads the few fields it needs itself, which
//! also keeps a field GitHub adds or drops from failing a whole answer.
//!
//! One look at a pull request where nothing changed is three requests, each a `304`: the pull
//! request (whose ETag changes with any review, comment, push or close), its head's check runs
//! and its head's commit statuses. Reviews and their line comments are read again only when the
//! pull request changed, and who closed it (which only its issue says) only once it is closed.

use std::time::Duration;

use http::header::{HeaderMap, HeaderValue, IF_NONE_MATCH};
use serde::Deserialize;
use serde_json::Value;

use super::{Conditional, Forge, ForgeError, MergeMethod, Merged, Observed, Opened, Opening};
use crate::review::{Check, CheckState, Mergeable, PrState, PullRequest, Review, ReviewState};

/// One GitHub repository, as one token sees it.
pub struct GitHub {
    client: octocrab::Octocrab,
    rt: tokio::runtime::Runtime,
    api: String,
    /// `owner/name`.
    pub(super) repository: String,
}

/// One answer: its body, and whether it came from the cache (a `304`).
pub(super) struct Answer {
    pub(super) body: Value,
    pub(super) not_modified: bool,
}

impl GitHub {
    /// A client for `repository` (`owner/name`) at `api` with `token`.
    pub fn new(api: &str, repository: &str, token: &str) -> Result<GitHub, ForgeError> {
        // Several TLS providers are linked in: rustls wants the process told which (a second
        // call finds one chosen already, which is as good).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| ForgeError::Unavailable(format!("no runtime: {e}")))?;
        let client = {
            let _inside = rt.enter();
            octocrab::Octocrab::builder()
                .base_uri(api)
                .map_err(|e| ForgeError::Refused(format!("the api `{api}` is not a URL: {e}")))?
                .personal_token(token.to_string())
                .set_connect_timeout(Some(Duration::from_secs(10)))
                .set_read_timeout(Some(Duration::from_secs(30)))
                .build()
                .map_err(|e| ForgeError::Unavailable(e.to_string()))?
        };
        Ok(GitHub {
            client,
            rt,
            api: api.trim_end_matches('/').to_string(),
            repository: repository.to_string(),
        })
    }

    /// `GET path` (under the repository), conditional on what `cache` kept; counts the request
    /// in `seen`.
    pub(super) fn get(
        &self,
        path: &str,
        cache: &mut Conditional,
        seen: &mut Seen,
    ) -> Result<Answer, ForgeError> {
        self.get_at(&format!("/repos/{}{path}", self.repository), cache, seen)
    }

    /// As [`GitHub::get`], for a path from the API's root (`/user`).
    pub(super) fn get_at(
        &self,
        path: &str,
        cache: &mut Conditional,
        seen: &mut Seen,
    ) -> Result<Answer, ForgeError> {
        let path = path.to_string();
        let mut headers = HeaderMap::new();
        if let Some(tag) = cache
            .etag(&path)
            .and_then(|t| HeaderValue::from_str(t).ok())
        {
            headers.insert(IF_NONE_MATCH, tag);
        }
        let url = format!("{}{path}", self.api);
        let (status, head, text) =
            self.exchange(self.client._get_with_headers(url.as_str(), Some(headers)))?;
        seen.requests += 1;
        let header = |name: &str| head.get(name).and_then(|v| v.to_str().ok());
        if let Some(left) = header("x-ratelimit-remaining").and_then(|v| v.parse().ok()) {
            seen.remaining = Some(left);
        }
        match status.as_u16() {
            304 => {
                seen.not_modified += 1;
                let body = cache.body(&path).cloned().ok_or_else(|| {
                    ForgeError::Refused(format!("304 for {path}, which braids never read"))
                })?;
                Ok(Answer {
                    body,
                    not_modified: true,
                })
            }
            200..=299 => {
                let body: Value = serde_json::from_str(&text).map_err(|e| {
                    ForgeError::Refused(format!("{path} answered what is not JSON: {e}"))
                })?;
                if let Some(tag) = header("etag") {
                    cache.keep(&path, tag, body.clone());
                }
                Ok(Answer {
                    body,
                    not_modified: false,
                })
            }
            code => Err(refusal(code, &path, &text, &header)),
        }
    }
}

impl GitHub {
    /// `method path` (under the repository) with a JSON `body`: the status and what it said.
    pub(super) fn send(
        &self,
        method: http::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<(u16, Value), ForgeError> {
        let url = format!("{}/repos/{}{path}", self.api, self.repository);
        let (status, head, text) = match method {
            http::Method::POST => self.exchange(self.client._post(url.as_str(), body.as_ref())),
            http::Method::PATCH => self.exchange(self.client._patch(url.as_str(), body.as_ref())),
            http::Method::PUT => self.exchange(self.client._put(url.as_str(), body.as_ref())),
            http::Method::DELETE => self.exchange(self.client._delete(url.as_str(), body.as_ref())),
            _ => self.exchange(self.client._get(url.as_str())),
        }?;
        let code = status.as_u16();
        let value = serde_json::from_str(&text).unwrap_or(Value::Null);
        match code {
            200..=299 | 405 | 409 | 422 => Ok((code, value)),
            _ => {
                let header = |name: &str| head.get(name).and_then(|v| v.to_str().ok());
                Err(refusal(code, path, &text, &header))
            }
        }
    }

    /// Runs one request to its end: its status, headers and body. Not reaching the forge is
    /// an outage.
    fn exchange(
        &self,
        request: impl std::future::Future<
            Output = octocrab::Result<
                http::Response<http_body_util::combinators::BoxBody<bytes::Bytes, octocrab::Error>>,
            >,
        >,
    ) -> Result<(http::StatusCode, HeaderMap, String), ForgeError> {
        let down = |e: octocrab::Error| {
            ForgeError::Unavailable(format!(
                "{} did not answer: {}",
                self.api,
                super::words::one_line(&e)
            ))
        };
        self.rt.block_on(async {
            let resp = request.await.map_err(down)?;
            let status = resp.status();
            let head = resp.headers().clone();
            let text = self.client.body_to_string(resp).await.map_err(down)?;
            Ok((status, head, text))
        })
    }

    /// The owner part of `owner/name`.
    fn owner(&self) -> &str {
        self.repository.split('/').next().unwrap_or_default()
    }
}

/// GitHub's words for a refusal: its message and each error's.
pub(super) fn said(v: &Value) -> String {
    let mut out = v["message"].as_str().unwrap_or("refused").to_string();
    for e in v["errors"].as_array().into_iter().flatten() {
        if let Some(m) = e["message"].as_str().or(e["code"].as_str()) {
            out.push_str(": ");
            out.push_str(m);
        }
    }
    out
}

/// What the requests of one look cost.
#[derive(Default)]
pub(super) struct Seen {
    pub(super) requests: u32,
    pub(super) not_modified: u32,
    pub(super) remaining: Option<u32>,
}

/// The error a non-success status means, in the forge's words.
fn refusal<'a>(
    code: u16,
    path: &str,
    text: &str,
    header: &dyn Fn(&str) -> Option<&'a str>,
) -> ForgeError {
    let said = serde_json::from_str::<Value>(text)
        .ok()
        .and_then(|v| v["message"].as_str().map(String::from))
        .unwrap_or_else(|| super::words::body_text(text));
    let spent = header("x-ratelimit-remaining") == Some("0") || header("retry-after").is_some();
    match code {
        401 => ForgeError::Unauthorized(said),
        403 | 429 if spent || said.to_ascii_lowercase().contains("rate limit") => {
            ForgeError::RateLimited {
                reset: header("x-ratelimit-reset").and_then(|r| r.parse().ok()),
            }
        }
        404 => ForgeError::NotFound(path.to_string()),
        500..=599 => ForgeError::Unavailable(format!("{code}: {said}")),
        _ => ForgeError::Refused(format!("{code} for {path}: {said}")),
    }
}

impl Forge for GitHub {
    fn open(&self, o: &Opening) -> Result<Opened, ForgeError> {
        let body = serde_json::json!({
            "title": o.title, "head": o.head, "base": o.base, "body": o.body,
        });
        let opened = |v: &Value| -> Result<Opened, ForgeError> {
            Ok(Opened {
                number: v["number"].as_u64().ok_or_else(|| {
                    ForgeError::Refused(format!("a pull request without a number: {v}"))
                })?,
                url: v["html_url"].as_str().unwrap_or_default().to_string(),
            })
        };
        match self.send(http::Method::POST, "/pulls", Some(body))? {
            (201, v) | (200, v) => opened(&v),
            (422, v) if said(&v).contains("already exists") => {
                // Opened by an earlier attempt: the open one of this head and base.
                let path = format!(
                    "/pulls?state=open&head={}:{}&base={}",
                    self.owner(),
                    o.head,
                    o.base
                );
                let (_, list) = self.send(http::Method::GET, &path, None)?;
                list.as_array()
                    .and_then(|l| l.first())
                    .map(opened)
                    .unwrap_or_else(|| Err(ForgeError::Refused(said(&v))))
            }
            (code, v) => Err(ForgeError::Refused(format!(
                "{code} opening a pull request of {}: {}",
                o.head,
                said(&v)
            ))),
        }
    }

    fn merge(&self, number: u64, head: &str, method: MergeMethod) -> Result<Merged, ForgeError> {
        let body = serde_json::json!({"sha": head, "merge_method": method.as_str()});
        match self.send(
            http::Method::PUT,
            &format!("/pulls/{number}/merge"),
            Some(body),
        )? {
            (200, v) => Ok(Merged::Merged {
                commit: v["sha"].as_str().unwrap_or_default().to_string(),
            }),
            (409, _) => Ok(Merged::HeadMoved),
            (_, v) => Ok(Merged::NotMergeable(said(&v))),
        }
    }

    fn delete_branch(&self, name: &str) -> Result<(), ForgeError> {
        match self.send(
            http::Method::DELETE,
            &format!("/git/refs/heads/{name}"),
            None,
        )? {
            (204, _) | (200, _) => Ok(()),
            // Gone already (deleted on merge by the repository's setting, or by a person).
            (422, v) if said(&v).contains("does not exist") => Ok(()),
            (code, v) => Err(ForgeError::Refused(format!(
                "{code} deleting {name}: {}",
                said(&v)
            ))),
        }
    }

    fn probe(&self) -> Result<(), ForgeError> {
        let (code, v) = self.send(http::Method::GET, "", None)?;
        if !(200..300).contains(&code) {
            return Err(ForgeError::Refused(format!("{code}: {}", said(&v))));
        }
        // Present for an authenticated caller: what this token may do there.
        match v["permissions"]["push"].as_bool() {
            Some(false) => Err(ForgeError::Refused(format!(
                "the token may read {} but not push to it",
                self.repository
            ))),
            _ => Ok(()),
        }
    }

    fn observe(&self, number: u64, cache: &mut Conditional) -> Result<Observed, ForgeError> {
        let mut seen = Seen::default();
        let pull = self.get(&format!("/pulls/{number}"), cache, &mut seen)?;
        let pr: PullJson = parse(&pull.body, "a pull request")?;
        let head = pr.head.sha.clone();
        let runs: RunsJson = parse(
            &self
                .get(
                    &format!("/commits/{head}/check-runs?per_page=100"),
                    cache,
                    &mut seen,
                )?
                .body,
            "check runs",
        )?;
        let status: StatusJson = parse(
            &self
                .get(
                    &format!("/commits/{head}/status?per_page=100"),
                    cache,
                    &mut seen,
                )?
                .body,
            "a combined status",
        )?;
        // Reviews and comments change the pull request's ETag: unchanged, they are as kept.
        let mut kept_or_get = |path: String| -> Result<Value, ForgeError> {
            let key = format!("/repos/{}{path}", self.repository);
            match (pull.not_modified, cache.body(&key)) {
                (true, Some(body)) => Ok(body.clone()),
                _ => Ok(self.get(&path, cache, &mut seen)?.body),
            }
        };
        let reviews: Vec<ReviewJson> = parse(
            &kept_or_get(format!("/pulls/{number}/reviews?per_page=100"))?,
            "reviews",
        )?;
        let comments: Vec<CommentJson> = parse(
            &kept_or_get(format!("/pulls/{number}/comments?per_page=100"))?,
            "review comments",
        )?;
        let closed_by = match (pr.state.as_str(), pr.merged) {
            ("closed", false) => {
                let issue: IssueJson =
                    parse(&kept_or_get(format!("/issues/{number}"))?, "an issue")?;
                issue.closed_by.map(|u| u.login)
            }
            _ => None,
        };
        Ok(Observed {
            pr: pull_request(&pr, &runs, &status, &reviews, &comments, closed_by),
            requests: seen.requests,
            not_modified: seen.not_modified,
            remaining: seen.remaining,
        })
    }
}

fn parse<T: for<'de> Deserialize<'de>>(v: &Value, what: &str) -> Result<T, ForgeError> {
    T::deserialize(v)
        .map_err(|e| ForgeError::Refused(format!("GitHub sent {what} braids cannot read: {e}")))
}

#[derive(Deserialize)]
struct User {
    login: String,
}

#[derive(Deserialize)]
struct Sha {
    sha: String,
}

#[derive(Deserialize)]
struct PullJson {
    number: u64,
    state: String,
    #[serde(default)]
    merged: bool,
    merged_by: Option<User>,
    mergeable: Option<bool>,
    mergeable_state: Option<String>,
    head: Sha,
}

#[derive(Deserialize)]
struct RunsJson {
    check_runs: Vec<RunJson>,
}

#[derive(Deserialize)]
struct RunJson {
    name: String,
    status: Option<String>,
    conclusion: Option<String>,
    output: Option<OutputJson>,
}

#[derive(Deserialize)]
struct OutputJson {
    title: Option<String>,
    summary: Option<String>,
    text: Option<String>,
}

#[derive(Deserialize)]
struct StatusJson {
    statuses: Vec<ContextJson>,
}

#[derive(Deserialize)]
struct ContextJson {
    context: String,
    state: String,
    description: Option<String>,
}

#[derive(Deserialize)]
struct ReviewJson {
    id: u64,
    user: Option<User>,
    /// The author's standing in the repository (`OWNER`, `MEMBER`, `COLLABORATOR`, …).
    #[serde(default)]
    author_association: Option<String>,
    state: String,
    body: Option<String>,
}

#[derive(Deserialize)]
struct CommentJson {
    pull_request_review_id: Option<u64>,
    path: String,
    line: Option<u32>,
    body: String,
}

#[derive(Deserialize)]
struct IssueJson {
    closed_by: Option<User>,
}

/// The forge-neutral pull request GitHub's answers make.
fn pull_request(
    pr: &PullJson,
    runs: &RunsJson,
    status: &StatusJson,
    reviews: &[ReviewJson],
    comments: &[CommentJson],
    closed_by: Option<String>,
) -> PullRequest {
    let state = match (pr.state.as_str(), pr.merged) {
        (_, true) => PrState::Merged {
            by: pr.merged_by.as_ref().map(|u| u.login.clone()),
        },
        ("closed", false) => PrState::Closed { by: closed_by },
        _ => PrState::Open,
    };
    let mut checks: Vec<Check> = runs
        .check_runs
        .iter()
        .map(|r| Check {
            name: r.name.clone(),
            state: match (r.status.as_deref(), r.conclusion.as_deref()) {
                (Some("completed"), Some("success" | "neutral" | "skipped")) => CheckState::Passed,
                (Some("completed"), _) => CheckState::Failed,
                (None, Some("success" | "neutral" | "skipped")) => CheckState::Passed,
                (None, Some(_)) => CheckState::Failed,
                _ => CheckState::Pending,
            },
            summary: r
                .output
                .as_ref()
                .map(|o| {
                    [&o.title, &o.summary, &o.text]
                        .into_iter()
                        .flatten()
                        .filter(|t| !t.trim().is_empty())
                        .cloned()
                        .collect::<Vec<_>>()
                        .join("\n")
                })
                .unwrap_or_default(),
        })
        .collect();
    checks.extend(status.statuses.iter().map(|s| Check {
        name: s.context.clone(),
        state: match s.state.as_str() {
            "success" => CheckState::Passed,
            "failure" | "error" => CheckState::Failed,
            _ => CheckState::Pending,
        },
        summary: s.description.clone().unwrap_or_default(),
    }));
    // Only people who may write to the repository review its requests for braids: on a public
    // repository anyone may submit a review, and a stranger's approval must not merge, nor
    // their words start an agent's attempt.
    let reviews = reviews
        .iter()
        .filter(|r| {
            matches!(
                r.author_association.as_deref(),
                Some("OWNER" | "MEMBER" | "COLLABORATOR")
            )
        })
        .map(|r| {
            let lines: Vec<String> = comments
                .iter()
                .filter(|c| c.pull_request_review_id == Some(r.id))
                .map(|c| match c.line {
                    Some(l) => format!("{}:{l}: {}", c.path, c.body),
                    None => format!("{}: {}", c.path, c.body),
                })
                .collect();
            let mut body = r.body.clone().unwrap_or_default();
            for l in &lines {
                body.push('\n');
                body.push_str(l);
            }
            Review {
                id: r.id,
                author: r.user.as_ref().map(|u| u.login.clone()).unwrap_or_default(),
                state: match r.state.as_str() {
                    "APPROVED" => ReviewState::Approved,
                    "CHANGES_REQUESTED" => ReviewState::ChangesRequested,
                    "DISMISSED" => ReviewState::Dismissed,
                    _ => ReviewState::Commented,
                },
                body: body.trim().to_string(),
                inline: !lines.is_empty(),
            }
        })
        .collect();
    PullRequest {
        number: pr.number,
        state,
        head: pr.head.sha.clone(),
        behind: pr.mergeable_state.as_deref() == Some("behind"),
        mergeable: match pr.mergeable {
            Some(true) => Mergeable::Clean,
            Some(false) => Mergeable::Conflict,
            None => Mergeable::Unknown,
        },
        checks,
        reviews,
    }
}
