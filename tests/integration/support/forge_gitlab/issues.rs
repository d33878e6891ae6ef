//! The stand-in GitLab's issues, as the REST API v4 documentation gives them, under `/api/v4`:
//!
//! - `GET /user`, `GET /users?username=`
//! - `GET|POST /projects/:id/issues` (`labels` must all match, `updated_after` on or after,
//!   `state` `opened`/`closed`/`all`, paged with `x-next-page`)
//! - `GET|PUT /projects/:id/issues/:iid` (`add_labels`, `remove_labels`, `assignee_ids`,
//!   `state_event`, `description`); a moved issue stays, closed, with `moved_to_id`
//! - `GET|POST /projects/:id/issues/:iid/notes` (system notes among them, as GitLab lists)
//! - `GET|POST /projects/:id/issues/:iid/links` (`relates_to`, `blocks`, `is_blocked_by`; an
//!   issue's `blocking_issues_count` counts the open issues it blocks)
//! - `GET /projects/:id/labels/:name`, `POST /projects/:id/labels`
//! - `GET /projects/:id/members/all/:user_id`
//!
//! A merged merge request closes the issues its description names with `Closes #n`, as
//! GitLab does for the default branch.

use std::collections::BTreeMap;

use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

use super::{fresh, message, paged, user, GitLab, Project, State};

/// One issue of the stand-in.
#[derive(Debug, Clone)]
pub(super) struct IssueRec {
    pub project: u64,
    pub iid: u64,
    pub title: String,
    pub description: String,
    pub open: bool,
    pub labels: Vec<String>,
    pub assignees: Vec<String>,
    pub author: String,
    pub created: String,
    pub updated: String,
    pub locked: bool,
    pub deleted: bool,
    pub moved: bool,
    pub closed_by: Option<String>,
    /// (id, author, body, system).
    pub notes: Vec<(u64, String, String, bool)>,
}

impl IssueRec {
    /// An open issue of project `project` by `author`, made now.
    fn new(
        project: u64,
        iid: u64,
        title: &str,
        description: &str,
        labels: Vec<String>,
        author: &str,
    ) -> IssueRec {
        IssueRec {
            project,
            iid,
            title: title.into(),
            description: description.into(),
            open: true,
            labels,
            assignees: Vec::new(),
            author: author.into(),
            created: now(),
            updated: now(),
            locked: false,
            deleted: false,
            moved: false,
            closed_by: None,
            notes: Vec::new(),
        }
    }
}

/// A link between two issues (project id, iid): `blocks` means `source` blocks `target`.
#[derive(Debug, Clone)]
pub(super) struct Link {
    pub id: u64,
    pub source: (u64, u64),
    pub target: (u64, u64),
    pub blocks: bool,
}

/// Links `source` to `target` as `link_type` says, with the system note GitLab adds on each
/// side (which touches both); the link's id, or why it cannot be.
fn link(
    s: &mut State,
    source: (u64, u64),
    target: (u64, u64),
    link_type: &str,
    by: &str,
) -> Result<u64, &'static str> {
    let (source, target, blocks) = match link_type {
        "relates_to" => (source, target, false),
        "blocks" => (source, target, true),
        "is_blocked_by" => (target, source, true),
        _ => return Err("link_type does not have a valid value"),
    };
    let at = |s: &State, (pid, iid): (u64, u64)| {
        s.issues
            .iter()
            .position(|i| i.project == pid && i.iid == iid && !i.deleted)
    };
    let (Some(a), Some(b)) = (at(s, source), at(s, target)) else {
        return Err("404 Not found");
    };
    if a == b {
        return Err("Issue cannot be related to itself");
    }
    s.next_id += 1;
    let id = s.next_id;
    s.links.push(Link {
        id,
        source,
        target,
        blocks,
    });
    for (k, other, says) in [
        (
            a,
            target.1,
            if blocks {
                "marked this issue as blocking"
            } else {
                "marked this issue as related to"
            },
        ),
        (
            b,
            source.1,
            if blocks {
                "marked this issue as blocked by"
            } else {
                "marked this issue as related to"
            },
        ),
    ] {
        s.next_id += 1;
        let note = s.next_id;
        s.issues[k]
            .notes
            .push((note, by.into(), format!("{says} #{other}"), true));
        s.issues[k].updated = now();
    }
    Ok(id)
}

/// The links of issue `(pid, iid)` as its links list gives them: each other issue, with the
/// link seen from this side.
fn links_of(s: &State, p: &Project, me: (u64, u64)) -> Vec<Value> {
    s.links
        .iter()
        .filter_map(|l| {
            let (other, link_type) = match (l.source == me, l.target == me, l.blocks) {
                (true, _, true) => (l.target, "blocks"),
                (_, true, true) => (l.source, "is_blocked_by"),
                (true, _, false) => (l.target, "relates_to"),
                (_, true, false) => (l.source, "relates_to"),
                _ => return None,
            };
            let i = s
                .issues
                .iter()
                .find(|i| (i.project, i.iid) == other && !i.deleted)?;
            let mut v = issue_json(s, p, i);
            v["issue_link_id"] = json!(l.id);
            v["link_type"] = json!(link_type);
            v["link_created_at"] = json!(i.created);
            v["link_updated_at"] = json!(i.created);
            Some(v)
        })
        .collect()
}

/// The id of the project at `path`.
fn project_id(s: &State, path: &str) -> u64 {
    s.projects
        .iter()
        .find(|p| p.path == path)
        .expect("no such project")
        .id
}

/// Issue `iid` of the project at `path`.
fn issue_mut<'a>(s: &'a mut State, path: &str, iid: u64) -> &'a mut IssueRec {
    let pid = project_id(s, path);
    s.issues
        .iter_mut()
        .find(|i| i.project == pid && i.iid == iid)
        .expect("no such issue")
}

/// Now, as GitLab writes times (milliseconds, `Z`).
pub(super) fn now() -> String {
    chrono::Utc::now()
        .format("%Y-%m-%dT%H:%M:%S%.3fZ")
        .to_string()
}

fn instant(t: &str) -> Option<chrono::DateTime<chrono::Utc>> {
    chrono::DateTime::parse_from_rfc3339(t)
        .ok()
        .map(|t| t.with_timezone(&chrono::Utc))
}

fn user_id(username: &str) -> u64 {
    user(username)["id"].as_u64().unwrap_or_default()
}

fn issue_json(s: &State, p: &Project, i: &IssueRec) -> Value {
    let user_notes = i.notes.iter().filter(|n| !n.3).count();
    let me = (i.project, i.iid);
    let blocking = s
        .links
        .iter()
        .filter(|l| l.blocks && l.source == me && i.open)
        .filter(|l| {
            s.issues
                .iter()
                .any(|t| (t.project, t.iid) == l.target && t.open && !t.deleted)
        })
        .count();
    json!({
        "id": 90_000 + i.iid, "iid": i.iid, "project_id": p.id,
        "title": i.title, "description": i.description,
        "state": if i.open { "opened" } else { "closed" },
        "created_at": i.created, "updated_at": i.updated,
        "closed_at": if i.open { Value::Null } else { json!(i.updated) },
        "closed_by": i.closed_by.as_deref().map(user),
        "labels": i.labels, "milestone": null,
        "assignees": i.assignees.iter().map(|a| user(a)).collect::<Vec<_>>(),
        "assignee": i.assignees.first().map(|a| user(a)),
        "author": user(&i.author), "type": "ISSUE", "issue_type": "issue",
        "user_notes_count": user_notes, "discussion_locked": i.locked,
        "moved_to_id": if i.moved { json!(777_777) } else { Value::Null },
        "web_url": format!("https://gitlab.example/{}/-/issues/{}", p.path, i.iid),
        "confidential": false, "blocking_issues_count": blocking,
    })
}

fn has_all(i: &IssueRec, labels: &str) -> bool {
    labels
        .split(',')
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .all(|w| i.labels.iter().any(|l| l.eq_ignore_ascii_case(w)))
}

fn list_of(v: &Value) -> Vec<String> {
    match v {
        Value::String(s) => s
            .split(',')
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(String::from)
            .collect(),
        Value::Array(a) => a
            .iter()
            .filter_map(|l| l.as_str().map(String::from))
            .collect(),
        _ => Vec::new(),
    }
}

fn created(status: StatusCode, body: Value) -> (StatusCode, Response) {
    (status, (status, axum::Json(body)).into_response())
}

/// An answer for `/user` and `/users`, or `None`.
pub(super) fn answer_root(
    s: &mut State,
    segments: &[&str],
    query: &BTreeMap<String, String>,
    headers: &HeaderMap,
) -> Option<(StatusCode, Response)> {
    match segments {
        ["user"] => {
            let me = user(&s.login.clone());
            Some(fresh(s, headers, StatusCode::OK, me, &[]))
        }
        ["users"] => {
            let name = query.get("username").cloned().unwrap_or_default();
            if !name.is_empty() {
                s.users.insert(user_id(&name), name.clone());
            }
            let list = if name.is_empty() {
                vec![]
            } else {
                vec![user(&name)]
            };
            Some(fresh(s, headers, StatusCode::OK, Value::Array(list), &[]))
        }
        _ => None,
    }
}

/// An answer for a project's issue, label and member paths, or `None` for any other.
pub(super) fn answer(
    s: &mut State,
    p: &Project,
    method: &str,
    rest: &[&str],
    query: &BTreeMap<String, String>,
    headers: &HeaderMap,
    input: &Value,
) -> Option<(StatusCode, Response)> {
    let login = s.login.clone();
    let idx = |s: &State, n: &str| {
        let n: u64 = n.parse().ok()?;
        s.issues
            .iter()
            .position(|i| i.project == p.id && i.iid == n)
    };
    Some(match (method, rest) {
        ("GET", ["issues"]) => {
            let state = query.get("state").map_or("all", String::as_str);
            let labels = query.get("labels").cloned().unwrap_or_default();
            let after = query.get("updated_after").and_then(|t| instant(t));
            let mut all: Vec<&IssueRec> = s
                .issues
                .iter()
                .filter(|i| i.project == p.id && !i.deleted)
                .filter(|i| has_all(i, &labels))
                .filter(|i| match state {
                    "opened" => i.open,
                    "closed" => !i.open,
                    _ => true,
                })
                .filter(|i| after.is_none_or(|a| instant(&i.updated).is_some_and(|u| u >= a)))
                .collect();
            all.sort_by(|a, b| (instant(&a.updated), a.iid).cmp(&(instant(&b.updated), b.iid)));
            if query.get("sort").map(String::as_str) != Some("asc") {
                all.reverse();
            }
            let list = all.into_iter().map(|i| issue_json(s, p, i)).collect();
            paged(s, headers, query, list)
        }
        ("POST", ["issues"]) => {
            let Some(title) = input["title"].as_str() else {
                return Some(message(
                    StatusCode::BAD_REQUEST,
                    json!({"title": ["can't be blank"]}),
                ));
            };
            let iid = s.issues.iter().filter(|i| i.project == p.id).count() as u64 + 1;
            let rec = IssueRec::new(
                p.id,
                iid,
                title,
                input["description"].as_str().unwrap_or_default(),
                list_of(&input["labels"]),
                &login,
            );
            let out = issue_json(s, p, &rec);
            s.issues.push(rec);
            created(StatusCode::CREATED, out)
        }
        (_, ["issues", n, tail @ ..]) => {
            let Some(k) = idx(s, n).filter(|k| !s.issues[*k].deleted) else {
                return Some(message(StatusCode::NOT_FOUND, json!("404 Not found")));
            };
            let answer = match (method, tail) {
                ("GET", []) => fresh(
                    s,
                    headers,
                    StatusCode::OK,
                    issue_json(s, p, &s.issues[k]),
                    &[],
                ),
                ("PUT", []) => {
                    let assignees: Option<Vec<String>> =
                        input["assignee_ids"].as_array().map(|ids| {
                            ids.iter()
                                .filter_map(|id| id.as_u64())
                                .filter_map(|id| s.users.get(&id).cloned())
                                .collect()
                        });
                    let i = &mut s.issues[k];
                    let mut system = Vec::new();
                    for l in list_of(&input["add_labels"]) {
                        if !i.labels.iter().any(|x| x.eq_ignore_ascii_case(&l)) {
                            system.push(format!("added ~{l} label"));
                            i.labels.push(l);
                        }
                    }
                    for l in list_of(&input["remove_labels"]) {
                        if i.labels.iter().any(|x| x.eq_ignore_ascii_case(&l)) {
                            system.push(format!("removed ~{l} label"));
                        }
                        i.labels.retain(|x| !x.eq_ignore_ascii_case(&l));
                    }
                    if let Some(a) = assignees {
                        system.push("changed the assignees".into());
                        i.assignees = a;
                    }
                    if let Some(d) = input["description"].as_str() {
                        i.description = d.into();
                    }
                    match input["state_event"].as_str() {
                        Some("close") => {
                            i.open = false;
                            i.closed_by = Some(login.clone());
                            system.push("closed".into());
                        }
                        Some("reopen") => {
                            i.open = true;
                            i.closed_by = None;
                            system.push("reopened".into());
                        }
                        _ => {}
                    }
                    for body in system {
                        s.next_id += 1;
                        let id = s.next_id;
                        s.issues[k].notes.push((id, login.clone(), body, true));
                    }
                    created(StatusCode::OK, issue_json(s, p, &s.issues[k]))
                }
                ("GET", ["notes"]) => {
                    let i = &s.issues[k];
                    let list = i
                        .notes
                        .iter()
                        .map(|(id, author, body, system)| {
                            json!({"id": id, "type": null, "body": body, "author": user(author),
                                   "created_at": i.updated, "updated_at": i.updated,
                                   "system": system, "noteable_id": 90_000 + i.iid,
                                   "noteable_type": "Issue", "noteable_iid": i.iid,
                                   "resolvable": false, "confidential": false, "internal": false})
                        })
                        .collect();
                    paged(s, headers, query, list)
                }
                ("GET", ["links"]) => {
                    let i = &s.issues[k];
                    fresh(
                        s,
                        headers,
                        StatusCode::OK,
                        Value::Array(links_of(s, p, (i.project, i.iid))),
                        &[],
                    )
                }
                ("POST", ["links"]) => {
                    let field = |name: &str| {
                        input[name]
                            .as_u64()
                            .or_else(|| input[name].as_str().and_then(|v| v.parse().ok()))
                            .or_else(|| query.get(name).and_then(|v| v.parse().ok()))
                    };
                    let (Some(tp), Some(ti)) =
                        (field("target_project_id"), field("target_issue_iid"))
                    else {
                        return Some(message(
                            StatusCode::BAD_REQUEST,
                            json!("target_project_id, target_issue_iid are missing"),
                        ));
                    };
                    let kind = input["link_type"]
                        .as_str()
                        .or(query.get("link_type").map(String::as_str))
                        .unwrap_or("relates_to")
                        .to_string();
                    let me = (s.issues[k].project, s.issues[k].iid);
                    match link(s, me, (tp, ti), &kind, &login) {
                        Ok(id) => {
                            created(StatusCode::CREATED, json!({"id": id, "link_type": kind}))
                        }
                        Err(why) if why.starts_with("404") => {
                            message(StatusCode::NOT_FOUND, json!(why))
                        }
                        Err(why) => message(StatusCode::BAD_REQUEST, json!(why)),
                    }
                }
                ("POST", ["notes"]) => {
                    let Some(body) = input["body"].as_str() else {
                        return Some(message(
                            StatusCode::BAD_REQUEST,
                            json!({"body": ["can't be blank"]}),
                        ));
                    };
                    s.next_id += 1;
                    let id = s.next_id;
                    s.issues[k]
                        .notes
                        .push((id, login.clone(), body.into(), false));
                    created(
                        StatusCode::CREATED,
                        json!({"id": id, "body": body, "author": user(&login), "system": false}),
                    )
                }
                _ => return Some(message(StatusCode::NOT_FOUND, json!("404 Not found"))),
            };
            if method != "GET" && answer.0.is_success() {
                s.issues[k].updated = now();
            }
            answer
        }
        ("GET", ["labels", name]) => {
            let known = s
                .labels
                .get(&p.id)
                .is_some_and(|l| l.iter().any(|x| x.eq_ignore_ascii_case(name)));
            match known {
                true => fresh(
                    s,
                    headers,
                    StatusCode::OK,
                    json!({"id": 1, "name": name, "color": "#ededed"}),
                    &[],
                ),
                false => message(StatusCode::NOT_FOUND, json!("404 Label Not Found")),
            }
        }
        ("POST", ["labels"]) => {
            let name = input["name"].as_str().unwrap_or_default().to_string();
            let all = s.labels.entry(p.id).or_default();
            if all.iter().any(|x| x.eq_ignore_ascii_case(&name)) {
                message(StatusCode::CONFLICT, json!("Label already exists"))
            } else {
                all.push(name.clone());
                created(
                    StatusCode::CREATED,
                    json!({"id": 1, "name": name, "color": input["color"]}),
                )
            }
        }
        ("GET", ["members", "all", id]) => {
            let who = id
                .parse()
                .ok()
                .and_then(|id: u64| s.users.get(&id).cloned());
            match who.and_then(|u| s.access.get(&u).map(|a| (u, *a))) {
                Some((u, level)) => {
                    let mut m = user(&u);
                    m["access_level"] = json!(level);
                    fresh(s, headers, StatusCode::OK, m, &[])
                }
                None => message(StatusCode::NOT_FOUND, json!("404 Not found")),
            }
        }
        _ => return None,
    })
}

/// Closes the issues a merged merge request's description names with `Closes #n` (GitLab's
/// default closing pattern: close, fix, resolve, implement, in their forms).
pub(super) fn close_named(s: &mut State, project: u64, text: &str, by: &str) {
    const KEYWORDS: &[&str] = &[
        "close",
        "closes",
        "closed",
        "closing",
        "fix",
        "fixes",
        "fixed",
        "fixing",
        "resolve",
        "resolves",
        "resolved",
        "resolving",
        "implement",
        "implements",
        "implemented",
        "implementing",
    ];
    let named = super::super::bare_git::closing_refs(text, KEYWORDS);
    for i in s
        .issues
        .iter_mut()
        .filter(|i| i.project == project && named.contains(&i.iid))
    {
        if i.open {
            i.open = false;
            i.closed_by = Some(by.into());
            i.updated = now();
        }
    }
}

impl GitLab {
    /// `author` opens an issue in `project` with `labels`; its iid.
    pub fn issue(
        &self,
        project: &str,
        author: &str,
        title: &str,
        body: &str,
        labels: &[&str],
    ) -> u64 {
        self.with(|s| {
            let id = project_id(s, project);
            let iid = s.issues.iter().filter(|i| i.project == id).count() as u64 + 1;
            s.issues.push(IssueRec::new(
                id,
                iid,
                title,
                body,
                labels.iter().map(|l| l.to_string()).collect(),
                author,
            ));
            iid
        })
    }

    /// `author` links issue `iid` of `project` to `other` there, as `link_type` (`blocks`,
    /// `is_blocked_by` or `relates_to`) says, as `POST .../links` would.
    pub fn link_issues(&self, project: &str, iid: u64, link_type: &str, other: u64, author: &str) {
        self.with(|s| {
            let pid = project_id(s, project);
            link(s, (pid, iid), (pid, other), link_type, author).expect("the link is made");
        });
    }

    /// `by` closes issue `iid` of `project`.
    pub fn close_issue(&self, project: &str, iid: u64, by: &str) {
        self.with(|s| {
            s.next_id += 1;
            let id = s.next_id;
            let i = issue_mut(s, project, iid);
            i.open = false;
            i.closed_by = Some(by.into());
            i.notes.push((id, by.into(), "closed".into(), true));
            i.updated = now();
        });
    }

    /// `author` comments on issue `iid` of `project`.
    pub fn note_by(&self, project: &str, iid: u64, author: &str, body: &str) {
        self.with(|s| {
            s.next_id += 1;
            let id = s.next_id;
            let i = issue_mut(s, project, iid);
            i.notes.push((id, author.into(), body.into(), false));
            i.updated = now();
        });
    }

    /// `username`'s access level on every project (30 Developer, 20 Reporter, ...).
    pub fn set_access(&self, username: &str, level: u64) {
        self.with(|s| {
            s.users.insert(user_id(username), username.into());
            s.access.insert(username.into(), level);
        });
    }

    /// Issue `iid` of `project` now: (open, labels, assignees, notes as (author, body, system)).
    pub fn issue_now(&self, project: &str, iid: u64) -> GlIssue {
        self.with(|s| {
            let i = issue_mut(s, project, iid);
            GlIssue {
                open: i.open,
                labels: i.labels.clone(),
                assignees: i.assignees.clone(),
                closed_by: i.closed_by.clone(),
                notes: i
                    .notes
                    .iter()
                    .filter(|n| !n.3)
                    .map(|n| (n.1.clone(), n.2.clone()))
                    .collect(),
            }
        })
    }
}

/// What a test reads of a GitLab issue.
#[derive(Debug, Clone)]
pub struct GlIssue {
    pub open: bool,
    pub labels: Vec<String>,
    pub assignees: Vec<String>,
    pub closed_by: Option<String>,
    /// Comments (not system notes): (author, body).
    pub notes: Vec<(String, String)>,
}

impl GlIssue {
    pub fn has(&self, label: &str) -> bool {
        self.labels.iter().any(|l| l.eq_ignore_ascii_case(label))
    }
}
