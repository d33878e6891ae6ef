//! GitLab's issues for the issue tracker. An issue is named by its `iid` (what `#<n>` means in
//! the project); labels come as names, changed with `add_labels`/`remove_labels` so a
//! person's own labels stay; assignees are user ids, so assigning reads the issue's and adds
//! or takes one. Comments are notes that are not system notes. A moved issue stays behind,
//! closed, with `moved_to_id`. What blocks an issue is in its links (`is_blocked_by`), which
//! no listing carries: they are read with the issue alone, as before a claim.

use serde::Deserialize;
use serde_json::{json, Value};

use super::super::issues::{Found, Issue, IssueComment, IssueForge, Listing};
use super::super::{Conditional, ForgeError};
use super::{encode, said, GitLab, Seen};

#[derive(Deserialize)]
struct User {
    #[serde(default)]
    id: u64,
    #[serde(default)]
    username: String,
}

#[derive(Deserialize)]
struct Titled {
    #[serde(default)]
    title: String,
}

#[derive(Deserialize)]
struct IssueJson {
    iid: u64,
    #[serde(default)]
    project_id: u64,
    #[serde(default)]
    title: String,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    state: String,
    #[serde(default)]
    labels: Vec<String>,
    #[serde(default)]
    assignees: Vec<User>,
    #[serde(default)]
    author: Option<User>,
    #[serde(default)]
    web_url: String,
    #[serde(default)]
    milestone: Option<Titled>,
    #[serde(default)]
    created_at: String,
    #[serde(default)]
    updated_at: String,
    #[serde(default)]
    discussion_locked: Option<bool>,
    #[serde(default)]
    moved_to_id: Option<u64>,
    #[serde(default)]
    user_notes_count: u64,
}

/// An issue linked to another, as the other's links list it.
#[derive(Deserialize)]
struct LinkJson {
    iid: u64,
    #[serde(default)]
    project_id: u64,
    /// `relates_to`, `blocks` or `is_blocked_by`, seen from the issue whose links these are.
    #[serde(default)]
    link_type: String,
}

#[derive(Deserialize)]
struct NoteJson {
    id: u64,
    #[serde(default)]
    body: String,
    #[serde(default)]
    author: Option<User>,
    #[serde(default)]
    created_at: String,
    #[serde(default)]
    system: bool,
}

fn issue_of(j: IssueJson) -> Issue {
    Issue {
        number: j.iid,
        title: j.title,
        body: j.description.unwrap_or_default(),
        open: j.state == "opened",
        labels: j.labels,
        assignees: j.assignees.into_iter().map(|a| a.username).collect(),
        author: j.author.map(|a| a.username).unwrap_or_default(),
        url: j.web_url,
        milestone: j.milestone.map(|m| m.title),
        created: j.created_at,
        updated: j.updated_at,
        comments: j.user_notes_count,
        locked: j.discussion_locked.unwrap_or(false),
        blocked_by: Vec::new(),
    }
}

fn parse<T: for<'de> Deserialize<'de>>(v: &Value, what: &str) -> Result<T, ForgeError> {
    serde_json::from_value(v.clone())
        .map_err(|e| ForgeError::Refused(format!("GitLab answered {what} braids cannot read: {e}")))
}

impl GitLab {
    /// `GET path` from the API's root (`/user`), unconditional.
    fn get_root(&self, path: &str) -> Result<Value, ForgeError> {
        let reply = self.exchange("GET", path, None, None, None)?;
        match reply.status {
            200..=299 => serde_json::from_str(&reply.text)
                .map_err(|e| ForgeError::Refused(format!("{path} answered what is not JSON: {e}"))),
            code => Err(super::refusal(code, path, &reply)),
        }
    }

    /// The id of the user `username`.
    fn user_id(&self, username: &str) -> Result<Option<u64>, ForgeError> {
        let found = self.get_root(&format!("/users?username={}", encode(username)))?;
        let users: Vec<User> = parse(&found, "a list of users")?;
        Ok(users.first().map(|u| u.id))
    }

    /// The issues of the same project linked as blocking `number` (open or closed). One in
    /// another project is not followed: its iid means another issue here.
    fn blockers(
        &self,
        number: u64,
        project: u64,
        cache: &mut Conditional,
        seen: &mut Seen,
    ) -> Result<Vec<u64>, ForgeError> {
        let all = match self.get_all(&format!("/issues/{number}/links?per_page=100"), cache, seen) {
            Ok(all) => all,
            // A GitLab without issue links: the description's lines are all there is.
            Err(ForgeError::NotFound(_)) => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let mut out = Vec::new();
        for v in &all {
            let l: LinkJson = parse(v, "an issue's links")?;
            if l.link_type == "is_blocked_by" && l.project_id == project && !out.contains(&l.iid) {
                out.push(l.iid);
            }
        }
        Ok(out)
    }

    fn put_issue(&self, number: u64, body: Value, what: &str) -> Result<(), ForgeError> {
        match self.send("PUT", &format!("/issues/{number}"), Some(body), &[]) {
            Ok(_) => Ok(()),
            Err(ForgeError::Refused(why)) => Err(ForgeError::Refused(format!("{what}: {why}"))),
            Err(e) => Err(e),
        }
    }
}

impl IssueForge for GitLab {
    fn me(&self) -> Result<String, ForgeError> {
        let me: User = parse(&self.get_root("/user")?, "the token's user")?;
        Ok(me.username)
    }

    fn issues(
        &self,
        labels: &[String],
        since: Option<&str>,
        cache: &mut Conditional,
    ) -> Result<Listing, ForgeError> {
        let mut seen = Seen::default();
        let mut path = String::from("/issues?state=all&order_by=updated_at&sort=asc&per_page=100");
        match since {
            Some(t) => path.push_str(&format!("&updated_after={}", encode(t))),
            None => path.push_str(&format!("&labels={}", encode(&labels.join(",")))),
        }
        let all = self.get_all(&path, cache, &mut seen)?;
        let issues = all
            .iter()
            .map(|v| parse::<IssueJson>(v, "an issue").map(issue_of))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Listing {
            issues,
            // Every page comes whole, from GitLab or from the cache.
            unchanged: Vec::new(),
            requests: seen.requests,
            not_modified: seen.not_modified,
            blockers_unread: true,
        })
    }

    fn issue(&self, number: u64, cache: &mut Conditional) -> Result<Found, ForgeError> {
        let mut seen = Seen::default();
        match self.get(&format!("/issues/{number}"), cache, &mut seen) {
            Ok(a) => {
                let j: IssueJson = parse(&a.body, "an issue")?;
                if j.moved_to_id.is_some() {
                    return Ok(Found::Moved);
                }
                let project = j.project_id;
                let mut issue = issue_of(j);
                if issue.open {
                    issue.blocked_by = self.blockers(number, project, cache, &mut seen)?;
                }
                Ok(Found::Issue(issue))
            }
            Err(ForgeError::NotFound(_)) => Ok(Found::Gone),
            Err(e) => Err(e),
        }
    }

    fn comments(
        &self,
        number: u64,
        cache: &mut Conditional,
    ) -> Result<Vec<IssueComment>, ForgeError> {
        let mut seen = Seen::default();
        let path = format!("/issues/{number}/notes?sort=asc&order_by=created_at&per_page=100");
        let all = self.get_all(&path, cache, &mut seen)?;
        let mut out = Vec::new();
        for v in &all {
            let n: NoteJson = parse(v, "a note")?;
            if !n.system {
                out.push(IssueComment {
                    id: n.id,
                    author: n.author.map(|a| a.username).unwrap_or_default(),
                    body: n.body,
                    created: n.created_at,
                });
            }
        }
        Ok(out)
    }

    fn comment(&self, number: u64, body: &str) -> Result<(), ForgeError> {
        self.send(
            "POST",
            &format!("/issues/{number}/notes"),
            Some(json!({ "body": body })),
            &[],
        )
        .map(drop)
    }

    fn relabel(&self, number: u64, add: &[String], remove: &[String]) -> Result<(), ForgeError> {
        if add.is_empty() && remove.is_empty() {
            return Ok(());
        }
        self.put_issue(
            number,
            json!({"add_labels": add.join(","), "remove_labels": remove.join(",")}),
            &format!("labelling #{number}"),
        )
    }

    fn assign(&self, number: u64, login: &str, on: bool) -> Result<(), ForgeError> {
        let Some(id) = self.user_id(login)? else {
            return Err(ForgeError::Refused(format!("no GitLab user {login}")));
        };
        let (_, now) = self.send("GET", &format!("/issues/{number}"), None, &[])?;
        let mut ids: Vec<u64> = now["assignees"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|a| a["id"].as_u64())
            .filter(|a| *a != id)
            .collect();
        if on {
            ids.push(id);
        }
        self.put_issue(
            number,
            json!({ "assignee_ids": ids }),
            &format!("assigning #{number}"),
        )
    }

    fn set_open(&self, number: u64, open: bool) -> Result<(), ForgeError> {
        let event = if open { "reopen" } else { "close" };
        self.put_issue(
            number,
            json!({ "state_event": event }),
            &format!("changing the state of #{number}"),
        )
    }

    fn create(&self, title: &str, body: &str, labels: &[String]) -> Result<u64, ForgeError> {
        let (_, v) = self.send(
            "POST",
            "/issues",
            Some(json!({"title": title, "description": body, "labels": labels.join(",")})),
            &[],
        )?;
        v["iid"]
            .as_u64()
            .ok_or_else(|| ForgeError::Refused(format!("an issue without an iid: {v}")))
    }

    fn edit_body(&self, number: u64, body: &str) -> Result<(), ForgeError> {
        self.put_issue(
            number,
            json!({ "description": body }),
            &format!("editing #{number}"),
        )
    }

    fn ensure_label(&self, name: &str, color: &str) -> Result<(), ForgeError> {
        match self.send("GET", &format!("/labels/{}", encode(name)), None, &[404]) {
            Ok((200, _)) => return Ok(()),
            Ok(_) => {}
            Err(e) => return Err(e),
        }
        match self.send(
            "POST",
            "/labels",
            Some(json!({"name": name, "color": format!("#{color}"), "description": "braids"})),
            &[409],
        )? {
            // 409: made meanwhile by another run.
            (201 | 200 | 409, _) => Ok(()),
            (code, v) => Err(ForgeError::Refused(format!(
                "{code} making the label {name}: {}",
                said(&v)
            ))),
        }
    }

    fn can_write(&self, login: &str) -> Result<bool, ForgeError> {
        let Some(id) = self.user_id(login)? else {
            return Ok(false);
        };
        match self.send("GET", &format!("/members/all/{id}"), None, &[404]) {
            // Developer (30) and above may push.
            Ok((200, v)) => Ok(v["access_level"].as_u64().unwrap_or(0) >= 30),
            Ok(_) => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn any_labelled(&self, labels: &[String]) -> Result<bool, ForgeError> {
        let path = format!(
            "/issues?state=all&per_page=1&labels={}",
            encode(&labels.join(","))
        );
        let (_, v) = self.send("GET", &path, None, &[])?;
        Ok(v.as_array().is_some_and(|l| !l.is_empty()))
    }

    fn probe_issues(&self) -> Result<(), ForgeError> {
        match self.send("GET", "/issues?per_page=1", None, &[]) {
            Ok(_) => Ok(()),
            Err(ForgeError::Refused(why)) if why.starts_with("403") => Err(ForgeError::Refused(format!(
                "the token may not read this project's issues ({why}): give it the `api` scope and the Reporter role or above"
            ))),
            Err(e) => Err(e),
        }
    }
}
