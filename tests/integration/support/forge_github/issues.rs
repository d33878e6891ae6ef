//! The stand-in GitHub's issues, as the REST API v3's OpenAPI description defines them:
//!
//! - `GET|POST /repos/{owner}/{repo}/issues` (the listing holds pull requests too, with a
//!   `pull_request` field; `labels` must all match; `since` by `updated_at`; 100 a page)
//! - `GET|PATCH /repos/{owner}/{repo}/issues/{n}` (`410` once deleted, `301` once transferred)
//! - `GET|POST /repos/{owner}/{repo}/issues/{n}/comments`
//! - `POST /repos/{owner}/{repo}/issues/{n}/labels`, `DELETE .../labels/{name}`
//! - `POST|DELETE /repos/{owner}/{repo}/issues/{n}/assignees`
//! - `GET /repos/{owner}/{repo}/issues/{n}/dependencies/blocked_by`
//! - `GET /repos/{owner}/{repo}/labels/{name}`, `POST /repos/{owner}/{repo}/labels`
//! - `GET /repos/{owner}/{repo}/collaborators/{username}/permission`, `GET /user`
//!
//! A merged pull request closes the issues its body names with `Closes #n` (and GitHub's other
//! closing keywords), as GitHub does for the default branch.

use std::collections::BTreeMap;

use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

use super::{fresh, message, user, GitHub, State};

/// One issue of the stand-in.
#[derive(Debug, Clone)]
pub(super) struct IssueRec {
    pub repo: String,
    pub number: u64,
    pub title: String,
    pub body: String,
    pub open: bool,
    pub labels: Vec<String>,
    pub assignees: Vec<String>,
    pub author: String,
    pub milestone: Option<String>,
    pub created: String,
    pub updated: String,
    pub locked: bool,
    pub closed_by: Option<String>,
    pub blocked_by: Vec<u64>,
    pub deleted: bool,
    pub transferred: bool,
    pub comments: Vec<(u64, String, String, String)>,
}

impl IssueRec {
    /// An open issue of `repo` by `author`, made and last changed at `at`.
    fn new(
        repo: &str,
        number: u64,
        title: &str,
        body: &str,
        labels: Vec<String>,
        author: &str,
        at: &str,
    ) -> IssueRec {
        IssueRec {
            repo: repo.into(),
            number,
            title: title.into(),
            body: body.into(),
            open: true,
            labels,
            assignees: Vec::new(),
            author: author.into(),
            milestone: None,
            created: at.into(),
            updated: at.into(),
            locked: false,
            closed_by: None,
            blocked_by: Vec::new(),
            deleted: false,
            transferred: false,
            comments: Vec::new(),
        }
    }
}

fn instant(t: &str) -> Option<chrono::DateTime<chrono::Utc>> {
    chrono::DateTime::parse_from_rfc3339(t)
        .ok()
        .map(|t| t.with_timezone(&chrono::Utc))
}

/// Now, to the second, as GitHub writes times.
pub(super) fn now() -> String {
    chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// The next number of `repo`: issues and pull requests share them.
pub(super) fn next_number(s: &State, repo: &str) -> u64 {
    let pulls = s.pulls.iter().filter(|p| p.repo == repo).count();
    let issues = s.issues.iter().filter(|i| i.repo == repo).count();
    (pulls + issues) as u64 + 1
}

fn issue_json(i: &IssueRec) -> Value {
    let total = i.blocked_by.len();
    json!({
        "id": 700_000 + i.number, "node_id": format!("I_{}", i.number),
        "url": format!("https://api.github.example/repos/{}/issues/{}", i.repo, i.number),
        "repository_url": format!("https://api.github.example/repos/{}", i.repo),
        "html_url": format!("https://github.example/{}/issues/{}", i.repo, i.number),
        "number": i.number, "title": i.title, "body": i.body,
        "state": if i.open { "open" } else { "closed" },
        "state_reason": if i.open { Value::Null } else { json!("completed") },
        "locked": i.locked,
        "user": user(&i.author),
        "labels": i.labels.iter().map(|l| json!({"id": 1, "name": l, "color": "ededed", "default": false})).collect::<Vec<_>>(),
        "assignee": i.assignees.first().map(|a| user(a)),
        "assignees": i.assignees.iter().map(|a| user(a)).collect::<Vec<_>>(),
        "milestone": i.milestone.as_ref().map(|m| json!({"id": 1, "number": 1, "title": m, "state": "open"})),
        "comments": i.comments.len(),
        "created_at": i.created, "updated_at": i.updated,
        "closed_at": if i.open { Value::Null } else { json!(i.updated) },
        "closed_by": i.closed_by.as_deref().map(user),
        "author_association": "MEMBER",
        "issue_dependencies_summary": {"blocked_by": total, "total_blocked_by": total,
                                       "blocking": 0, "total_blocking": 0},
    })
}

fn has_all(i: &IssueRec, labels: &str) -> bool {
    labels
        .split(',')
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .all(|w| i.labels.iter().any(|l| l.eq_ignore_ascii_case(w)))
}

fn json_answer(status: StatusCode, body: Value) -> (StatusCode, Response) {
    (status, (status, axum::Json(body)).into_response())
}

/// An answer for the issue paths, or `None` for any other.
pub(super) fn answer(
    s: &mut State,
    method: &str,
    repo: &str,
    rest: &[&str],
    query: &BTreeMap<String, String>,
    headers: &HeaderMap,
    input: &Value,
) -> Option<(StatusCode, Response)> {
    let login = s.login.clone();
    if s.issues_forbidden && rest.first() == Some(&"issues") {
        return Some(message(
            StatusCode::FORBIDDEN,
            "Resource not accessible by personal access token",
        ));
    }
    let idx = |s: &State, n: &str| {
        let n: u64 = n.parse().ok()?;
        s.issues
            .iter()
            .position(|i| i.repo == repo && i.number == n)
    };
    Some(match (method, rest) {
        ("GET", ["issues"]) => {
            let state = query.get("state").map_or("open", String::as_str);
            let labels = query.get("labels").cloned().unwrap_or_default();
            let since = query.get("since").cloned();
            let per_page: usize = query
                .get("per_page")
                .and_then(|p| p.parse().ok())
                .unwrap_or(30)
                .min(100);
            let page: usize = query
                .get("page")
                .and_then(|p| p.parse().ok())
                .unwrap_or(1)
                .max(1);
            let since = since.as_deref().and_then(instant);
            let wanted = |open: bool, updated: &str| {
                let state_ok = match state {
                    "all" => true,
                    "closed" => !open,
                    _ => open,
                };
                state_ok && since.is_none_or(|t| instant(updated).is_some_and(|u| u >= t))
            };
            // What matches, sorted and paged first: JSON is made for one page only.
            let mut all: Vec<(String, u64, Option<usize>)> = s
                .issues
                .iter()
                .enumerate()
                .filter(|(_, i)| i.repo == repo && !i.deleted && !i.transferred)
                .filter(|(_, i)| has_all(i, &labels) && wanted(i.open, &i.updated))
                .map(|(k, i)| (i.updated.clone(), i.number, Some(k)))
                .collect();
            if labels.is_empty() {
                // Pull requests are issues too, in this listing.
                for p in s.pulls.iter().filter(|p| p.repo == repo) {
                    if wanted(p.open, &super::stamp(p)) {
                        all.push((super::stamp(p), p.number, None));
                    }
                }
            }
            all.sort_by(|a, b| (instant(&a.0), a.1).cmp(&(instant(&b.0), b.1)));
            if query.get("direction").map(String::as_str) != Some("asc") {
                all.reverse();
            }
            let list: Vec<Value> = all
                .into_iter()
                .skip((page - 1) * per_page)
                .take(per_page)
                .map(|(_, number, k)| match k {
                    Some(k) => issue_json(&s.issues[k]),
                    None => {
                        let p = s.pulls.iter().find(|p| p.repo == repo && p.number == number).unwrap();
                        json!({"number": p.number, "title": p.title, "body": p.body,
                            "state": if p.open { "open" } else { "closed" }, "labels": [], "assignees": [],
                            "user": user(&p.author), "locked": false,
                            "created_at": "2026-11-29T12:00:00Z", "updated_at": super::stamp(p),
                            "html_url": format!("https://github.example/{}/pull/{}", p.repo, p.number),
                            "pull_request": {"url": format!("https://api.github.example/repos/{}/pulls/{}", p.repo, p.number)}})
                    }
                })
                .collect();
            fresh(headers, StatusCode::OK, Value::Array(list))
        }
        ("POST", ["issues"]) => {
            let Some(title) = input["title"].as_str() else {
                return Some(message(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "Validation Failed",
                ));
            };
            let number = next_number(s, repo);
            let labels = input["labels"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|l| l.as_str().map(String::from))
                .collect();
            let rec = IssueRec::new(
                repo,
                number,
                title,
                input["body"].as_str().unwrap_or_default(),
                labels,
                &login,
                &now(),
            );
            let out = issue_json(&rec);
            s.issues.push(rec);
            json_answer(StatusCode::CREATED, out)
        }
        (_, ["issues", n, tail @ ..]) => {
            let Some(k) = idx(s, n) else {
                return match s
                    .pulls
                    .iter()
                    .any(|p| p.repo == repo && Some(p.number) == n.parse().ok())
                {
                    // A pull request's issue: the PR stand-in answers it.
                    true => None,
                    false => Some(message(StatusCode::NOT_FOUND, "Not Found")),
                };
            };
            if s.issues[k].deleted {
                return Some(message(StatusCode::GONE, "This issue was deleted"));
            }
            if s.issues[k].transferred {
                let mut r = json_answer(
                    StatusCode::MOVED_PERMANENTLY,
                    json!({"message": "Moved Permanently",
                           "url": "https://api.github.example/repositories/2/issues/1",
                           "documentation_url": "https://docs.github.com/v3/#http-redirects"}),
                );
                r.1.headers_mut().insert(
                    "location",
                    HeaderValue::from_static("https://api.github.example/repositories/2/issues/1"),
                );
                return Some(r);
            }
            let mut touched = true;
            let answer = match (method, tail) {
                ("GET", []) => {
                    touched = false;
                    fresh(headers, StatusCode::OK, issue_json(&s.issues[k]))
                }
                ("PATCH", []) => {
                    let i = &mut s.issues[k];
                    if let Some(t) = input["title"].as_str() {
                        i.title = t.into();
                    }
                    if let Some(b) = input["body"].as_str() {
                        i.body = b.into();
                    }
                    match input["state"].as_str() {
                        Some("closed") => {
                            i.open = false;
                            i.closed_by = Some(login.clone());
                        }
                        Some("open") => {
                            i.open = true;
                            i.closed_by = None;
                        }
                        _ => {}
                    }
                    json_answer(StatusCode::OK, issue_json(i))
                }
                ("GET", ["comments"]) => {
                    touched = false;
                    let per_page: usize = query
                        .get("per_page")
                        .and_then(|p| p.parse().ok())
                        .unwrap_or(30);
                    let page: usize = query
                        .get("page")
                        .and_then(|p| p.parse().ok())
                        .unwrap_or(1)
                        .max(1);
                    let i = &s.issues[k];
                    let list: Vec<Value> = i
                        .comments
                        .iter()
                        .skip((page - 1) * per_page)
                        .take(per_page)
                        .map(|(id, author, body, at)| {
                            json!({"id": id, "node_id": format!("IC_{id}"), "user": user(author),
                                   "body": body, "created_at": at, "updated_at": at,
                                   "author_association": "MEMBER",
                                   "html_url": format!("https://github.example/{}/issues/{}#issuecomment-{id}", i.repo, i.number)})
                        })
                        .collect();
                    fresh(headers, StatusCode::OK, Value::Array(list))
                }
                ("POST", ["comments"]) => {
                    let Some(body) = input["body"].as_str() else {
                        return Some(message(
                            StatusCode::UNPROCESSABLE_ENTITY,
                            "Validation Failed",
                        ));
                    };
                    s.next_id += 1;
                    let id = s.next_id;
                    let i = &mut s.issues[k];
                    i.comments.push((id, login.clone(), body.into(), now()));
                    json_answer(
                        StatusCode::CREATED,
                        json!({"id": id, "body": body, "user": user(&login)}),
                    )
                }
                ("POST", ["labels"]) => {
                    let i = &mut s.issues[k];
                    for l in input["labels"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|l| l.as_str())
                    {
                        if !i.labels.iter().any(|x| x.eq_ignore_ascii_case(l)) {
                            i.labels.push(l.into());
                        }
                    }
                    let list: Vec<Value> = i.labels.iter().map(|l| json!({"name": l})).collect();
                    json_answer(StatusCode::OK, Value::Array(list))
                }
                ("DELETE", ["labels", name]) => {
                    let i = &mut s.issues[k];
                    let before = i.labels.len();
                    i.labels.retain(|l| !l.eq_ignore_ascii_case(name));
                    if before == i.labels.len() {
                        return Some(message(StatusCode::NOT_FOUND, "Label does not exist"));
                    }
                    let list: Vec<Value> = i.labels.iter().map(|l| json!({"name": l})).collect();
                    json_answer(StatusCode::OK, Value::Array(list))
                }
                ("POST" | "DELETE", ["assignees"]) => {
                    let i = &mut s.issues[k];
                    for a in input["assignees"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|a| a.as_str())
                    {
                        i.assignees.retain(|x| !x.eq_ignore_ascii_case(a));
                        if method == "POST" {
                            i.assignees.push(a.into());
                        }
                    }
                    let status = if method == "POST" {
                        StatusCode::CREATED
                    } else {
                        StatusCode::OK
                    };
                    json_answer(status, issue_json(i))
                }
                ("GET", ["dependencies", "blocked_by"]) => {
                    touched = false;
                    let blockers: Vec<Value> = s.issues[k]
                        .blocked_by
                        .iter()
                        .filter_map(|b| s.issues.iter().find(|i| i.repo == repo && i.number == *b))
                        .map(issue_json)
                        .collect();
                    fresh(headers, StatusCode::OK, Value::Array(blockers))
                }
                _ => return Some(message(StatusCode::NOT_FOUND, "Not Found")),
            };
            if touched && answer.0.is_success() {
                s.issues[k].updated = now();
            }
            answer
        }
        ("GET", ["labels", name]) => match s
            .labels
            .get(repo)
            .filter(|l| l.iter().any(|x| x.eq_ignore_ascii_case(name)))
        {
            Some(_) => fresh(
                headers,
                StatusCode::OK,
                json!({"id": 1, "name": name, "color": "ededed"}),
            ),
            None => message(StatusCode::NOT_FOUND, "Not Found"),
        },
        ("POST", ["labels"]) => {
            let name = input["name"].as_str().unwrap_or_default().to_string();
            let all = s.labels.entry(repo.into()).or_default();
            if all.iter().any(|x| x.eq_ignore_ascii_case(&name)) {
                json_answer(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    json!({"message": "Validation Failed",
                           "errors": [{"resource": "Label", "code": "already_exists", "field": "name"}]}),
                )
            } else {
                all.push(name.clone());
                json_answer(
                    StatusCode::CREATED,
                    json!({"id": 1, "name": name, "color": input["color"]}),
                )
            }
        }
        ("GET", ["collaborators", who, "permission"]) => {
            let permission = s
                .permissions
                .get(*who)
                .cloned()
                .unwrap_or_else(|| "none".into());
            fresh(
                headers,
                StatusCode::OK,
                json!({"permission": permission, "role_name": permission, "user": user(who)}),
            )
        }
        _ => return None,
    })
}

/// Closes the issues a merged pull request's `body` names with a closing keyword.
pub(super) fn close_named(s: &mut State, repo: &str, body: &str, by: &str) {
    const KEYWORDS: &[&str] = &[
        "close", "closes", "closed", "fix", "fixes", "fixed", "resolve", "resolves", "resolved",
    ];
    let named = super::super::bare_git::closing_refs(body, KEYWORDS);
    for i in s
        .issues
        .iter_mut()
        .filter(|i| i.repo == repo && named.contains(&i.number))
    {
        if i.open {
            i.open = false;
            i.closed_by = Some(by.into());
            i.updated = now();
        }
    }
}

impl GitHub {
    /// A person (`author`) opens an issue with `labels`; its number.
    pub fn issue(&self, repo: &str, author: &str, title: &str, body: &str, labels: &[&str]) -> u64 {
        self.with(|s| {
            let number = next_number(s, repo);
            s.issues.push(IssueRec::new(
                repo,
                number,
                title,
                body,
                labels.iter().map(|l| l.to_string()).collect(),
                author,
                &now(),
            ));
            number
        })
    }

    /// `n` issues in `repo` last changed at `at`, the first `labelled` of them carrying
    /// `label` and assigned to `holder`; the repositories `also` show the same issues.
    #[allow(clippy::too_many_arguments, dead_code)] // the issues bench's
    pub fn many_issues(
        &self,
        repo: &str,
        also: &[String],
        n: u64,
        labelled: u64,
        label: &str,
        holder: &str,
        at: &str,
    ) {
        self.with(|s| {
            for k in 1..=n {
                let ours = k <= labelled;
                let mut rec = IssueRec::new(
                    repo,
                    k,
                    &format!("Issue {k}"),
                    "",
                    if ours {
                        vec![label.to_string()]
                    } else {
                        Vec::new()
                    },
                    "ana",
                    at,
                );
                if ours {
                    rec.assignees = vec![holder.to_string()];
                }
                s.issues.push(rec);
            }
            for a in also {
                s.same_issues.insert(a.clone(), repo.into());
            }
        });
    }

    /// Changes issue `number` as a person would on the forge (its `updated_at` moves).
    pub fn edit_issue(&self, repo: &str, number: u64, f: impl FnOnce(&mut IssueView)) {
        self.with(|s| {
            let i = s
                .issues
                .iter_mut()
                .find(|i| i.repo == repo && i.number == number)
                .expect("no such issue");
            let mut v = IssueView::of(i);
            f(&mut v);
            i.open = v.open;
            i.labels = v.labels;
            i.assignees = v.assignees;
            i.milestone = v.milestone;
            i.locked = v.locked;
            i.blocked_by = v.blocked_by;
            i.deleted = v.deleted;
            i.transferred = v.transferred;
            i.body = v.body;
            i.updated = now();
        });
    }

    /// Issue `number` as it is now.
    pub fn issue_now(&self, repo: &str, number: u64) -> IssueView {
        self.with(|s| {
            IssueView::of(
                s.issues
                    .iter()
                    .find(|i| i.repo == repo && i.number == number)
                    .expect("no such issue"),
            )
        })
    }

    /// `author` comments on issue `number`.
    pub fn comment_by(&self, repo: &str, number: u64, author: &str, body: &str) {
        self.with(|s| {
            s.next_id += 1;
            let id = s.next_id;
            let i = s
                .issues
                .iter_mut()
                .find(|i| i.repo == repo && i.number == number)
                .expect("no such issue");
            i.comments.push((id, author.into(), body.into(), now()));
            i.updated = now();
        });
    }

    /// Whether the token may not read issues (a fine-grained token without *Issues*): every
    /// issue path answers 403.
    pub fn set_issues_forbidden(&self, on: bool) {
        self.with(|s| s.issues_forbidden = on);
    }

    /// `login`'s permission on every repository (`admin`, `write`, `read`, `none`).
    pub fn set_permission(&self, login: &str, permission: &str) {
        self.with(|s| s.permissions.insert(login.into(), permission.into()));
    }
}

/// What a test reads and changes of an issue.
#[derive(Debug, Clone)]
pub struct IssueView {
    pub open: bool,
    pub labels: Vec<String>,
    pub assignees: Vec<String>,
    pub milestone: Option<String>,
    pub locked: bool,
    pub blocked_by: Vec<u64>,
    pub deleted: bool,
    pub transferred: bool,
    pub body: String,
    pub closed_by: Option<String>,
    /// (author, body), oldest first.
    pub comments: Vec<(String, String)>,
}

impl IssueView {
    fn of(i: &IssueRec) -> IssueView {
        IssueView {
            open: i.open,
            labels: i.labels.clone(),
            assignees: i.assignees.clone(),
            milestone: i.milestone.clone(),
            locked: i.locked,
            blocked_by: i.blocked_by.clone(),
            deleted: i.deleted,
            transferred: i.transferred,
            body: i.body.clone(),
            closed_by: i.closed_by.clone(),
            comments: i
                .comments
                .iter()
                .map(|c| (c.1.clone(), c.2.clone()))
                .collect(),
        }
    }

    pub fn has(&self, label: &str) -> bool {
        self.labels.iter().any(|l| l.eq_ignore_ascii_case(label))
    }
}
