//! GitLab's REST API v4 through `ureq`, the blocking HTTP client braids already links (rustls
//! on ring), with braids' own conditional requests and serde structs of the few fields it
//! reads.
//!
//! Why not the `gitlab` crate (Kitware's): it builds its URL from a host (`https://<host>/api/v4`)
//! rather than taking the configured `api`, checks the token with a request of its own when
//! built, answers statuses as errors without their headers (no ETag, no `304`, no
//! `RateLimit-*`), and brings reqwest, aws-lc-sys (a second TLS provider, built from C),
//! graphql_client and cron: some 25 crates more, for ten endpoints.
//!
//! GitLab is not GitHub in the ways that matter here:
//! - ETags: GitLab documents none for REST v4. A weak `ETag` from Rails' Rack stack may come
//!   over a rendered body, and then `If-None-Match` is sent and a `304` is read from the
//!   [`Conditional`] cache; without one every read is whole. Either way GitLab counts the
//!   request against its rate limit, so a quiet look costs what a busy one does and the
//!   saving is in what crosses the wire.
//! - An approval, a resolved thread or a request for changes does not change the merge
//!   request's own answer, so approvals and discussions are read on every look: a quiet look
//!   at an open merge request is four requests (the request, its head pipeline's jobs, its
//!   approvals, its discussions), three when it has no pipeline, one more (its reviewers)
//!   once somebody requested changes. One that ended is one.
//! - Whether it merges is computed in the background: a look soon after a push to either
//!   branch may say `checking`, which is [`Mergeable::Unknown`] until a later look.
//!
//! Reviews, in [`Review`]'s terms (GitLab has no review objects, so they are read from what
//! it has):
//! - each user in the approvals' `approved_by` is an [`ReviewState::Approved`] review under
//!   the id of their latest "approved this merge request" system note (0 without one);
//! - a "requested changes" system note (GitLab 17's request-changes review) is
//!   [`ReviewState::ChangesRequested`] while the reviewers list still says
//!   `requested_changes` for its author, and [`ReviewState::Dismissed`] once an approval, an
//!   unapproval or a new review request has cleared it;
//! - an unresolved thread on a line (a `DiffNote` with a `position`) is a
//!   [`ReviewState::Commented`] review with `inline`, its notes as `path:line: body`, under its
//!   newest note's id (a reply makes it new again); an unresolved thread on the whole request,
//!   and a comment outside any thread, is one without `inline`; a resolved thread is nothing.
//!
//! Checks are the jobs of the head's pipeline (the newest run of each): a failed job that is
//! not allowed to fail is [`CheckState::Failed`] with the tail of its log as summary, read
//! once per job (a finished job's log does not change) and kept in the cache.

use std::io::Read;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use super::{Conditional, Forge, ForgeError, MergeMethod, Merged, Observed, Opened, Opening};
use crate::review::{Check, CheckState, Mergeable, PrState, PullRequest, Review, ReviewState};

pub mod issues;
mod read;
use read::*;

/// Lines of a failed job's log kept as its check's summary.
const TAIL_LINES: usize = 40;
/// Bytes of a job's log read for its tail: the rest streams past.
const TAIL_BYTES: usize = 16 * 1024;

/// One GitLab project, as one token sees it.
pub struct GitLab {
    agent: ureq::Agent,
    api: String,
    /// The project's id, or its full path URL-encoded (`group%2Fsub%2Fapp`).
    project: String,
    token: String,
}

/// One answer: its body, and whether it came from the cache (a `304`).
struct Answer {
    body: Value,
    not_modified: bool,
    /// `x-next-page`, when sent: the next page, or `None` on the last.
    next: Option<Option<u32>>,
}

/// What the requests of one look cost.
#[derive(Default)]
struct Seen {
    requests: u32,
    not_modified: u32,
    remaining: Option<u32>,
}

impl Seen {
    /// Counts `reply`, and what it says is left of the rate limit.
    fn count(&mut self, reply: &Reply) {
        self.requests += 1;
        if let Some(left) = reply
            .header("ratelimit-remaining")
            .and_then(|v| v.parse().ok())
        {
            self.remaining = Some(left);
        }
    }
}

/// One response: status, headers and body (or its tail).
struct Reply {
    status: u16,
    headers: http::HeaderMap,
    text: String,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

impl GitLab {
    /// A client for `project` (its id, or its full path `group/sub/app`) at `api` (such as
    /// `https://gitlab.com/api/v4`) with `token`.
    pub fn new(api: &str, project: &str, token: &str) -> Result<GitLab, ForgeError> {
        if !(api.starts_with("https://") || api.starts_with("http://")) {
            return Err(ForgeError::Refused(format!(
                "the api `{api}` is not an http or https URL"
            )));
        }
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            // A redirect is answered as what it is: a write is never replayed elsewhere.
            .max_redirects(0)
            .timeout_connect(Some(Duration::from_secs(10)))
            .timeout_global(Some(Duration::from_secs(30)))
            .user_agent(concat!("braids/", env!("CARGO_PKG_VERSION")))
            .build()
            .into();
        Ok(GitLab {
            agent,
            api: api.trim_end_matches('/').to_string(),
            project: encode(project),
            token: token.to_string(),
        })
    }

    /// `/projects/<project>` followed by `path`: a request's path and the cache's key.
    fn under(&self, path: &str) -> String {
        format!("/projects/{}{path}", self.project)
    }

    /// Runs one request to its end. With `tail`, only the body's last `tail` bytes are kept.
    /// Not reaching the forge is an outage.
    fn exchange(
        &self,
        method: &str,
        path: &str,
        etag: Option<&str>,
        body: Option<&Value>,
        tail: Option<usize>,
    ) -> Result<Reply, ForgeError> {
        let url = format!("{}{path}", self.api);
        let auth = format!("Bearer {}", self.token);
        let down = |e: ureq::Error| {
            ForgeError::Unavailable(format!(
                "{} did not answer: {}",
                self.api,
                crate::forge::words::one_line(&e)
            ))
        };
        let empty = Value::Object(Default::default());
        let body = body.unwrap_or(&empty);
        let sent = match method {
            "POST" => self
                .agent
                .post(&url)
                .header("Authorization", &auth)
                .send_json(body),
            "PUT" => self
                .agent
                .put(&url)
                .header("Authorization", &auth)
                .send_json(body),
            "DELETE" => self
                .agent
                .delete(&url)
                .header("Authorization", &auth)
                .call(),
            _ => {
                let mut r = self.agent.get(&url).header("Authorization", &auth);
                if let Some(tag) = etag {
                    r = r.header("If-None-Match", tag);
                }
                r.call()
            }
        };
        let mut resp = sent.map_err(down)?;
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let text = match tail {
            Some(n) => {
                let mut reader = resp.body_mut().as_reader();
                let mut kept: Vec<u8> = Vec::new();
                let mut chunk = vec![0u8; 8192];
                let mut cut = false;
                loop {
                    let got = reader
                        .read(&mut chunk)
                        .map_err(|e| ForgeError::Unavailable(e.to_string()))?;
                    if got == 0 {
                        break;
                    }
                    kept.extend_from_slice(&chunk[..got]);
                    if kept.len() > 2 * n {
                        kept.drain(..kept.len() - n);
                        cut = true;
                    }
                }
                let from = kept.len().saturating_sub(n);
                let mut kept = &kept[from..];
                if cut || from > 0 {
                    // Cut mid-line: the partial first line goes.
                    let nl = kept.iter().position(|b| *b == b'\n').map_or(0, |i| i + 1);
                    kept = &kept[nl..];
                }
                String::from_utf8_lossy(kept).into_owned()
            }
            None => resp
                .body_mut()
                .with_config()
                .limit(64 * 1024 * 1024)
                .lossy_utf8(true)
                .read_to_string()
                .map_err(down)?,
        };
        Ok(Reply {
            status,
            headers,
            text,
        })
    }

    /// `GET path` (under the project), conditional on what `cache` kept; counts the request
    /// in `seen`.
    fn get(
        &self,
        path: &str,
        cache: &mut Conditional,
        seen: &mut Seen,
    ) -> Result<Answer, ForgeError> {
        let path = self.under(path);
        let reply = self.exchange("GET", &path, cache.etag(&path), None, None)?;
        seen.count(&reply);
        let next = reply.header("x-next-page").map(|v| v.trim().parse().ok());
        match reply.status {
            304 => {
                seen.not_modified += 1;
                let body = cache.body(&path).cloned().ok_or_else(|| {
                    ForgeError::Refused(format!("304 for {path}, which braids never read"))
                })?;
                Ok(Answer {
                    body,
                    not_modified: true,
                    next,
                })
            }
            200..=299 => {
                let body: Value = serde_json::from_str(&reply.text).map_err(|e| {
                    ForgeError::Refused(format!("{path} answered what is not JSON: {e}"))
                })?;
                if let Some(tag) = reply.header("etag") {
                    cache.keep(&path, tag, body.clone());
                }
                Ok(Answer {
                    body,
                    not_modified: false,
                    next,
                })
            }
            code => Err(refusal(code, &path, &reply)),
        }
    }

    /// Every page of the list at `path` (which asks `per_page`), each page conditional.
    fn get_all(
        &self,
        path: &str,
        cache: &mut Conditional,
        seen: &mut Seen,
    ) -> Result<Vec<Value>, ForgeError> {
        let mut all = Vec::new();
        let mut page = 1;
        loop {
            if page > super::issues::MOST_PAGES {
                return Err(super::issues::endless(path));
            }
            let at = match page {
                1 => path.to_string(),
                n => format!("{path}&page={n}"),
            };
            let answer = self.get(&at, cache, seen)?;
            let Value::Array(items) = answer.body else {
                return Err(ForgeError::Refused(format!(
                    "{at} answered what is not a list"
                )));
            };
            let full = items.len() >= 100;
            all.extend(items);
            // GitLab names the next page; a 304 may come without the header.
            match (answer.next, answer.not_modified && full) {
                (Some(Some(n)), _) if n > page => page = n,
                (None, true) => page += 1,
                _ => return Ok(all),
            }
        }
    }

    /// `method path` (under the project) with a JSON `body`: the status and what it said, for
    /// a success or one of the statuses in `expected`; any other is the error it means.
    fn send(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
        expected: &[u16],
    ) -> Result<(u16, Value), ForgeError> {
        let path = self.under(path);
        let reply = self.exchange(method, &path, None, body.as_ref(), None)?;
        let value = serde_json::from_str(&reply.text).unwrap_or(Value::Null);
        match reply.status {
            code @ 200..=299 => Ok((code, value)),
            code if expected.contains(&code) => Ok((code, value)),
            code => Err(refusal(code, &path, &reply)),
        }
    }

    /// The tail of job `job`'s log, cleaned of terminal escapes and section markers; read
    /// once and kept under `key`.
    fn job_log(
        &self,
        job: &JobJson,
        key: &str,
        cache: &mut Conditional,
        seen: &mut Seen,
    ) -> Result<String, ForgeError> {
        if let Some(Value::String(kept)) = cache.body(key) {
            return Ok(kept.clone());
        }
        let path = self.under(&format!("/jobs/{}/trace", job.id));
        let reply = self.exchange("GET", &path, None, None, Some(TAIL_BYTES))?;
        seen.count(&reply);
        let reason = job
            .failure_reason
            .as_deref()
            .filter(|r| *r != "script_failure");
        let summary = match reply.status {
            200 => {
                let tail = tail(&reply.text, TAIL_LINES);
                match reason {
                    Some(r) => format!("{r}\n{tail}"),
                    None => tail,
                }
            }
            // A log this token may not read, or one erased: what the job says of itself.
            403 | 404 => reason.unwrap_or("failed").to_string(),
            code => return Err(refusal(code, &path, &reply)),
        };
        cache.keep_final(key, Value::String(summary.clone()));
        Ok(summary)
    }
}

/// `s` with everything but unreserved characters percent-encoded, as GitLab wants a project's
/// path, a branch and a query's value.
pub(crate) fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                out.push(char::from(b))
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// The error a non-success status means, in the forge's words.
fn refusal(code: u16, path: &str, reply: &Reply) -> ForgeError {
    let said = serde_json::from_str::<Value>(&reply.text)
        .ok()
        .map(|v| said(&v))
        .unwrap_or_else(|| crate::forge::words::body_text(&reply.text));
    match code {
        401 => ForgeError::Unauthorized(said),
        429 => {
            let now = chrono::Utc::now().timestamp();
            let reset = reply
                .header("ratelimit-reset")
                .and_then(|r| r.parse().ok())
                .or_else(|| {
                    reply
                        .header("retry-after")
                        .and_then(|r| r.parse::<i64>().ok())
                        .map(|s| now + s)
                });
            ForgeError::RateLimited { reset }
        }
        404 => ForgeError::NotFound(path.to_string()),
        500..=599 => ForgeError::Unavailable(format!("{code}: {said}")),
        _ => ForgeError::Refused(format!("{code} for {path}: {said}")),
    }
}

impl Forge for GitLab {
    fn open(&self, o: &Opening) -> Result<Opened, ForgeError> {
        let body = serde_json::json!({
            "source_branch": o.head, "target_branch": o.base,
            "title": o.title, "description": o.body,
        });
        let opened = |v: &Value| -> Result<Opened, ForgeError> {
            Ok(Opened {
                number: v["iid"].as_u64().ok_or_else(|| {
                    ForgeError::Refused(format!("a merge request without an iid: {v}"))
                })?,
                url: v["web_url"].as_str().unwrap_or_default().to_string(),
            })
        };
        match self.send("POST", "/merge_requests", Some(body), &[400, 409, 422])? {
            (201, v) | (200, v) => opened(&v),
            (409, v) if said(&v).contains("already exists") => {
                // Opened by an earlier attempt: the open one of this source and target.
                let path = format!(
                    "/merge_requests?state=opened&source_branch={}&target_branch={}",
                    encode(&o.head),
                    encode(&o.base)
                );
                let (_, list) = self.send("GET", &path, None, &[])?;
                list.as_array()
                    .and_then(|l| l.first())
                    .map(opened)
                    .unwrap_or_else(|| Err(ForgeError::Refused(said(&v))))
            }
            (code, v) => Err(ForgeError::Refused(format!(
                "{code} opening a merge request of {}: {}",
                o.head,
                said(&v)
            ))),
        }
    }

    /// GitLab merges the way the project is set to (a merge commit, semi-linear or
    /// fast-forward): `squash` is the one choice a merge makes, so [`MergeMethod::Rebase`]
    /// and [`MergeMethod::Merge`] both merge unsquashed. A 401 here is GitLab's "you may not
    /// merge this", as well as a bad token.
    fn merge(&self, number: u64, head: &str, method: MergeMethod) -> Result<Merged, ForgeError> {
        let body = serde_json::json!({"sha": head, "squash": method == MergeMethod::Squash});
        let path = format!("/merge_requests/{number}/merge");
        match self.send("PUT", &path, Some(body), &[405, 406, 409, 422])? {
            (409, _) => Ok(Merged::HeadMoved),
            (200..=299, v) => {
                // The target's new head: the merge commit, else the squash commit a
                // fast-forward put there, else the head fast-forwarded to.
                let commit = ["merge_commit_sha", "squash_commit_sha", "sha"]
                    .iter()
                    .find_map(|k| v[k].as_str())
                    .unwrap_or_default();
                Ok(Merged::Merged {
                    commit: commit.to_string(),
                })
            }
            (_, v) => Ok(Merged::NotMergeable(said(&v))),
        }
    }

    fn delete_branch(&self, name: &str) -> Result<(), ForgeError> {
        let path = format!("/repository/branches/{}", encode(name));
        match self.send("DELETE", &path, None, &[404])? {
            // Gone already (removed on merge, or by a person).
            (404, v) if said(&v).contains("Branch Not Found") => Ok(()),
            (404, _) => Err(ForgeError::NotFound(self.under(&path))),
            _ => Ok(()),
        }
    }

    fn probe(&self) -> Result<(), ForgeError> {
        self.send("GET", "", None, &[]).map(|_| ())
    }

    fn observe(&self, number: u64, cache: &mut Conditional) -> Result<Observed, ForgeError> {
        let mut seen = Seen::default();
        let at = format!("/merge_requests/{number}");
        let mr: MrJson = parse(
            &self
                .get(
                    &format!("{at}?include_diverged_commits_count=true"),
                    cache,
                    &mut seen,
                )?
                .body,
            "a merge request",
        )?;
        let open = matches!(mr.state.as_str(), "opened" | "locked");
        let head = mr.sha.clone().unwrap_or_default();
        let mut checks = Vec::new();
        let mut reviews = Vec::new();
        // An ended merge request is done with: only who ended it matters, and it says.
        if open {
            if let Some(p) = mr
                .head_pipeline
                .as_ref()
                .filter(|p| p.sha.as_deref() == Some(head.as_str()))
            {
                checks = self.checks(p, &self.under(&at), cache, &mut seen)?;
            }
            let approvals: ApprovalsJson = parse(
                &self.get(&format!("{at}/approvals"), cache, &mut seen)?.body,
                "approvals",
            )?;
            let discussions: Vec<DiscussionJson> = parse(
                &Value::Array(self.get_all(
                    &format!("{at}/discussions?per_page=100"),
                    cache,
                    &mut seen,
                )?),
                "discussions",
            )?;
            let asked = discussions
                .iter()
                .flat_map(|d| &d.notes)
                .any(|n| n.system && n.body == REQUESTED_CHANGES);
            // Whose request for changes still stands: only the reviewers list says.
            let reviewers: Vec<ReviewerJson> = match asked {
                true => parse(
                    &Value::Array(self.get_all(
                        &format!("{at}/reviewers?per_page=100"),
                        cache,
                        &mut seen,
                    )?),
                    "reviewers",
                )?,
                false => Vec::new(),
            };
            reviews = reviews_of(&approvals, &discussions, &reviewers);
        }
        Ok(Observed {
            pr: pull_request(&mr, checks, reviews),
            requests: seen.requests,
            not_modified: seen.not_modified,
            remaining: seen.remaining,
        })
    }
}

impl GitLab {
    /// The checks of the head's pipeline: its jobs, or the pipeline itself when it has none
    /// (a pipeline that failed to start).
    fn checks(
        &self,
        pipeline: &PipelineJson,
        mr_key: &str,
        cache: &mut Conditional,
        seen: &mut Seen,
    ) -> Result<Vec<Check>, ForgeError> {
        let jobs: Vec<JobJson> = parse(
            &Value::Array(self.get_all(
                &format!("/pipelines/{}/jobs?per_page=100", pipeline.id),
                cache,
                seen,
            )?),
            "a pipeline's jobs",
        )?;
        if jobs.is_empty() {
            return Ok(vec![Check {
                name: "pipeline".into(),
                state: pipeline_state(&pipeline.status),
                summary: format!(
                    "the pipeline is {} with no jobs{}",
                    pipeline.status,
                    pipeline
                        .web_url
                        .as_deref()
                        .map(|u| format!(": {u}"))
                        .unwrap_or_default()
                ),
            }]);
        }
        // GitLab lists the newest first; braids reads a pipeline in its order.
        let mut checks = Vec::new();
        for job in jobs.iter().rev() {
            let state = job_state(job);
            let summary = match state {
                CheckState::Failed => {
                    let key = format!("{mr_key}/jobs/{}/trace", job.id);
                    self.job_log(job, &key, cache, seen)?
                }
                _ => String::new(),
            };
            checks.push(Check {
                name: job.name.clone(),
                state,
                summary,
            });
        }
        Ok(checks)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_project_path_and_a_branch_are_encoded_whole() {
        assert_eq!(encode("group/sub/app"), "group%2Fsub%2Fapp");
        assert_eq!(encode("braids/app-1"), "braids%2Fapp-1");
        assert_eq!(encode("42"), "42");
        assert_eq!(encode("a b&c"), "a%20b%26c");
    }

    #[test]
    fn a_log_tail_drops_escapes_section_markers_and_overwritten_progress() {
        let log = "section_start:1700000000:step_script\r\u{1b}[0K\u{1b}[32;1mRunning\u{1b}[0;m\n\
                   10%\r50%\r100%\n\
                   \u{1b}[31mtest cart::coupon ... FAILED\u{1b}[0m\n\
                   section_end:1700000001:step_script\r\u{1b}[0K\n\
                   \u{1b}[31;1mERROR: Job failed: exit code 101\u{1b}[0;m\n\n";
        assert_eq!(
            tail(log, 40),
            "Running\n100%\ntest cart::coupon ... FAILED\nERROR: Job failed: exit code 101"
        );
        assert_eq!(tail(log, 1), "ERROR: Job failed: exit code 101");
    }

    #[test]
    fn gitlab_words_a_refusal_as_a_string_a_list_or_fields() {
        let v = serde_json::json!({"message": "401 Unauthorized"});
        assert_eq!(said(&v), "401 Unauthorized");
        let v = serde_json::json!({"message": ["Another open merge request already exists for this source branch: !1"]});
        assert!(said(&v).starts_with("Another open merge request already exists"));
        let v = serde_json::json!({"message": {"source_branch": ["does not exist"]}});
        assert_eq!(said(&v), "source_branch does not exist");
        let v = serde_json::json!({"error": "title is missing"});
        assert_eq!(said(&v), "title is missing");
    }

    fn mr(merge_status: Option<&str>, detailed: Option<&str>, conflicts: bool) -> MrJson {
        MrJson {
            iid: 1,
            state: "opened".into(),
            sha: Some("abc".into()),
            merge_status: merge_status.map(String::from),
            detailed_merge_status: detailed.map(String::from),
            has_conflicts: conflicts,
            diverged_commits_count: None,
            merge_user: None,
            merged_by: None,
            closed_by: None,
            head_pipeline: None,
        }
    }

    #[test]
    fn mergeable_is_unknown_until_the_background_check_ran() {
        let cases = [
            (
                Some("checking"),
                Some("checking"),
                false,
                Mergeable::Unknown,
            ),
            (
                Some("unchecked"),
                Some("unchecked"),
                false,
                Mergeable::Unknown,
            ),
            (
                Some("cannot_be_merged_recheck"),
                Some("checking"),
                false,
                Mergeable::Unknown,
            ),
            (
                Some("can_be_merged"),
                Some("ci_must_pass"),
                false,
                Mergeable::Clean,
            ),
            (
                Some("cannot_be_merged"),
                Some("conflict"),
                true,
                Mergeable::Conflict,
            ),
            (None, Some("conflict"), false, Mergeable::Conflict),
            (None, Some("mergeable"), false, Mergeable::Clean),
            (None, None, false, Mergeable::Unknown),
            (
                Some("cannot_be_merged"),
                Some("broken_status"),
                false,
                Mergeable::Unknown,
            ),
        ];
        for (status, detailed, conflicts, want) in cases {
            assert_eq!(
                mergeable(&mr(status, detailed, conflicts)),
                want,
                "{status:?} {detailed:?}"
            );
        }
    }

    #[test]
    fn a_job_allowed_to_fail_or_a_skippable_manual_one_blocks_nothing() {
        let job = |status: &str, allow_failure: bool| JobJson {
            id: 1,
            name: "t".into(),
            status: status.into(),
            allow_failure,
            failure_reason: None,
        };
        assert_eq!(job_state(&job("failed", false)), CheckState::Failed);
        assert_eq!(job_state(&job("failed", true)), CheckState::Passed);
        assert_eq!(job_state(&job("canceled", false)), CheckState::Failed);
        assert_eq!(job_state(&job("manual", true)), CheckState::Passed);
        assert_eq!(job_state(&job("manual", false)), CheckState::Pending);
        assert_eq!(job_state(&job("running", false)), CheckState::Pending);
        assert_eq!(job_state(&job("skipped", false)), CheckState::Passed);
    }
}
