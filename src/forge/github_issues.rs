//! GitHub's issues for the issue tracker: the repository's issues endpoint (which lists pull
//! requests too, told apart by their `pull_request` field), labels, assignees and comments.
//!
//! A listing asks 100 a page, oldest change first, each page conditional; GitHub does not
//! count a `304` against the rate limit, so a run where nothing changed costs no quota.
//! A deleted issue answers `410 Gone`; a transferred one `301` to its new home.

use serde::Deserialize;
use serde_json::{json, Value};

use super::github::{said, GitHub, Seen};
use super::gitlab::encode;
use super::issues::{endless, Found, Issue, IssueComment, IssueForge, Listing, MOST_PAGES};
use super::{Conditional, ForgeError};

#[derive(Deserialize)]
struct Named {
    #[serde(default)]
    name: String,
}

#[derive(Deserialize)]
struct Login {
    #[serde(default)]
    login: String,
}

#[derive(Deserialize)]
struct Titled {
    #[serde(default)]
    title: String,
}

#[derive(Deserialize, Default)]
struct Dependencies {
    /// Issues blocking this one, open or closed.
    #[serde(default)]
    total_blocked_by: u64,
}

#[derive(Deserialize)]
struct IssueJson {
    number: u64,
    /// `https://api.github.com/repos/<owner>/<repo>`: where the issue lives.
    #[serde(default)]
    repository_url: String,
    #[serde(default)]
    title: String,
    #[serde(default)]
    body: Option<String>,
    #[serde(default)]
    state: String,
    #[serde(default)]
    labels: Vec<Named>,
    #[serde(default)]
    assignees: Vec<Login>,
    #[serde(default)]
    user: Option<Login>,
    #[serde(default)]
    html_url: String,
    #[serde(default)]
    milestone: Option<Titled>,
    #[serde(default)]
    created_at: String,
    #[serde(default)]
    updated_at: String,
    #[serde(default)]
    locked: bool,
    #[serde(default)]
    comments: u64,
    #[serde(default)]
    pull_request: Option<Value>,
    #[serde(default)]
    issue_dependencies_summary: Option<Dependencies>,
}

#[derive(Deserialize)]
struct CommentJson {
    id: u64,
    #[serde(default)]
    user: Option<Login>,
    #[serde(default)]
    body: Option<String>,
    #[serde(default)]
    created_at: String,
}

fn issue_of(j: IssueJson) -> Issue {
    Issue {
        number: j.number,
        title: j.title,
        body: j.body.unwrap_or_default(),
        open: j.state == "open",
        labels: j.labels.into_iter().map(|l| l.name).collect(),
        assignees: j.assignees.into_iter().map(|a| a.login).collect(),
        author: j.user.map(|u| u.login).unwrap_or_default(),
        url: j.html_url,
        milestone: j.milestone.map(|m| m.title),
        created: j.created_at,
        updated: j.updated_at,
        comments: j.comments,
        locked: j.locked,
        // Filled in by `issue` when the summary says something blocks it.
        blocked_by: Vec::new(),
    }
}

/// Whether GitHub says some issue blocks `j`: only then are its blockers asked for.
fn has_blockers(j: &IssueJson) -> bool {
    j.issue_dependencies_summary
        .as_ref()
        .is_some_and(|d| d.total_blocked_by > 0)
}

fn parse<T: for<'de> Deserialize<'de>>(v: &Value, what: &str) -> Result<T, ForgeError> {
    serde_json::from_value(v.clone())
        .map_err(|e| ForgeError::Refused(format!("GitHub answered {what} braids cannot read: {e}")))
}

/// `s` as a query value: percent-encoded where it must be.
fn q(s: &str) -> String {
    encode(s)
}

impl GitHub {
    /// The issues of this repository blocking `number` (open or closed), by GitHub's issue
    /// dependencies. One in another repository is not followed: its number means another
    /// issue here, and braids does not watch that repository for its closing.
    fn blockers(
        &self,
        number: u64,
        cache: &mut Conditional,
        seen: &mut Seen,
    ) -> Result<Vec<u64>, ForgeError> {
        let path = format!("/issues/{number}/dependencies/blocked_by?per_page=100");
        match self.get(&path, cache, seen) {
            Ok(a) => {
                let list: Vec<IssueJson> = parse(&a.body, "an issue's blockers")?;
                let here = format!("/repos/{}", self.repository).to_ascii_lowercase();
                Ok(list
                    .into_iter()
                    .filter(|i| i.repository_url.to_ascii_lowercase().ends_with(&here))
                    .map(|i| i.number)
                    .collect())
            }
            // A GitHub without issue dependencies: the body's lines are all there is.
            Err(ForgeError::NotFound(_)) => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    }

    fn expect(&self, what: &str, answer: (u16, Value)) -> Result<Value, ForgeError> {
        match answer {
            (200..=299, v) => Ok(v),
            (code, v) => Err(ForgeError::Refused(format!("{code} {what}: {}", said(&v)))),
        }
    }
}

impl IssueForge for GitHub {
    fn me(&self) -> Result<String, ForgeError> {
        let mut seen = Seen::default();
        let a = self.get_at("/user", &mut Conditional::default(), &mut seen)?;
        let me: Login = parse(&a.body, "the token's user")?;
        Ok(me.login)
    }

    fn issues(
        &self,
        labels: &[String],
        since: Option<&str>,
        cache: &mut Conditional,
    ) -> Result<Listing, ForgeError> {
        let mut seen = Seen::default();
        let mut path = String::from("/issues?state=all&sort=updated&direction=asc&per_page=100");
        match since {
            Some(t) => path.push_str(&format!("&since={}", q(t))),
            None => path.push_str(&format!("&labels={}", q(&labels.join(",")))),
        }
        let (mut issues, mut unchanged) = (Vec::new(), Vec::new());
        for page in 1.. {
            if page > MOST_PAGES {
                return Err(endless(&path));
            }
            let at = match page {
                1 => path.clone(),
                n => format!("{path}&page={n}"),
            };
            let a = self.get(&at, cache, &mut seen)?;
            // A page kept as its numbers (below), answered 304: as braids last read it.
            if let (true, Some(Value::Array(numbers))) = (a.not_modified, a.body.get("numbers")) {
                unchanged.extend(numbers.iter().filter_map(Value::as_u64));
                if a.body["count"].as_u64().unwrap_or(0) < 100 {
                    break;
                }
                continue;
            }
            let list: Vec<IssueJson> = parse(&a.body, "a list of issues")?;
            let count = list.len();
            let before = issues.len();
            for j in list.into_iter().filter(|i| i.pull_request.is_none()) {
                let blocked = has_blockers(&j);
                let mut issue = issue_of(j);
                if blocked && issue.open {
                    issue.blocked_by = self.blockers(issue.number, cache, &mut seen)?;
                }
                issues.push(issue);
            }
            // The page's issues are the mirror's now: all a 304 needs is which they were, not
            // GitHub's whole answer (some kilobytes an issue).
            let key = format!("/repos/{}{at}", self.repository);
            if let Some(tag) = cache.etag(&key).map(String::from) {
                let numbers: Vec<u64> = issues[before..].iter().map(|i| i.number).collect();
                cache.keep(&key, &tag, json!({"numbers": numbers, "count": count}));
            }
            if count < 100 {
                break;
            }
        }
        Ok(Listing {
            issues,
            unchanged,
            requests: seen.requests,
            not_modified: seen.not_modified,
            blockers_unread: false,
        })
    }

    fn issue(&self, number: u64, cache: &mut Conditional) -> Result<Found, ForgeError> {
        let mut seen = Seen::default();
        let a = match self.get(&format!("/issues/{number}"), cache, &mut seen) {
            Ok(a) => a,
            Err(ForgeError::NotFound(_)) => return Ok(Found::Gone),
            Err(ForgeError::Refused(why)) if why.starts_with("410") => return Ok(Found::Gone),
            Err(ForgeError::Refused(why)) if why.starts_with("301") => return Ok(Found::Moved),
            Err(e) => return Err(e),
        };
        let j: IssueJson = parse(&a.body, "an issue")?;
        if j.pull_request.is_some() {
            return Ok(Found::Gone);
        }
        let blocked = has_blockers(&j);
        let mut issue = issue_of(j);
        if blocked {
            issue.blocked_by = self.blockers(number, cache, &mut seen)?;
        }
        Ok(Found::Issue(issue))
    }

    fn comments(
        &self,
        number: u64,
        cache: &mut Conditional,
    ) -> Result<Vec<IssueComment>, ForgeError> {
        let mut seen = Seen::default();
        let mut out = Vec::new();
        for page in 1.. {
            if page > MOST_PAGES {
                return Err(endless(&format!("/issues/{number}/comments")));
            }
            let path = format!("/issues/{number}/comments?per_page=100&page={page}");
            let a = self.get(&path, cache, &mut seen)?;
            let list: Vec<CommentJson> = parse(&a.body, "an issue's comments")?;
            let full = list.len() >= 100;
            out.extend(list.into_iter().map(|c| IssueComment {
                id: c.id,
                author: c.user.map(|u| u.login).unwrap_or_default(),
                body: c.body.unwrap_or_default(),
                created: c.created_at,
            }));
            if !full {
                break;
            }
        }
        Ok(out)
    }

    fn comment(&self, number: u64, body: &str) -> Result<(), ForgeError> {
        let sent = self.send(
            http::Method::POST,
            &format!("/issues/{number}/comments"),
            Some(json!({ "body": body })),
        )?;
        self.expect(&format!("commenting on #{number}"), sent)
            .map(drop)
    }

    fn relabel(&self, number: u64, add: &[String], remove: &[String]) -> Result<(), ForgeError> {
        if !add.is_empty() {
            let sent = self.send(
                http::Method::POST,
                &format!("/issues/{number}/labels"),
                Some(json!({ "labels": add })),
            )?;
            self.expect(&format!("labelling #{number}"), sent)?;
        }
        for label in remove {
            let path = format!("/issues/{number}/labels/{}", encode(label));
            match self.send(http::Method::DELETE, &path, None) {
                Ok(_) | Err(ForgeError::NotFound(_)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    fn assign(&self, number: u64, login: &str, on: bool) -> Result<(), ForgeError> {
        let method = if on {
            http::Method::POST
        } else {
            http::Method::DELETE
        };
        let sent = self.send(
            method,
            &format!("/issues/{number}/assignees"),
            Some(json!({ "assignees": [login] })),
        )?;
        self.expect(&format!("assigning #{number}"), sent).map(drop)
    }

    fn set_open(&self, number: u64, open: bool) -> Result<(), ForgeError> {
        let body = match open {
            true => json!({"state": "open"}),
            false => json!({"state": "closed", "state_reason": "completed"}),
        };
        let sent = self.send(
            http::Method::PATCH,
            &format!("/issues/{number}"),
            Some(body),
        )?;
        self.expect(&format!("changing the state of #{number}"), sent)
            .map(drop)
    }

    fn create(&self, title: &str, body: &str, labels: &[String]) -> Result<u64, ForgeError> {
        let sent = self.send(
            http::Method::POST,
            "/issues",
            Some(json!({"title": title, "body": body, "labels": labels})),
        )?;
        let v = self.expect("opening an issue", sent)?;
        v["number"]
            .as_u64()
            .ok_or_else(|| ForgeError::Refused(format!("an issue without a number: {v}")))
    }

    fn edit_body(&self, number: u64, body: &str) -> Result<(), ForgeError> {
        let sent = self.send(
            http::Method::PATCH,
            &format!("/issues/{number}"),
            Some(json!({ "body": body })),
        )?;
        self.expect(&format!("editing #{number}"), sent).map(drop)
    }

    fn ensure_label(&self, name: &str, color: &str) -> Result<(), ForgeError> {
        match self.send(
            http::Method::GET,
            &format!("/labels/{}", encode(name)),
            None,
        ) {
            Ok((200, _)) => return Ok(()),
            Ok(_) | Err(ForgeError::NotFound(_)) => {}
            Err(e) => return Err(e),
        }
        match self.send(
            http::Method::POST,
            "/labels",
            Some(json!({"name": name, "color": color, "description": "braids"})),
        )? {
            (201, _) | (200, _) => Ok(()),
            // Made meanwhile by another run.
            (422, v) if said(&v).contains("already_exists") => Ok(()),
            (code, v) => Err(ForgeError::Refused(format!(
                "{code} making the label {name}: {}",
                said(&v)
            ))),
        }
    }

    fn can_write(&self, login: &str) -> Result<bool, ForgeError> {
        let path = format!("/collaborators/{}/permission", encode(login));
        match self.send(http::Method::GET, &path, None) {
            Ok((200, v)) => Ok(matches!(
                v["permission"].as_str(),
                Some("admin" | "maintain" | "write")
            )),
            Ok(_) | Err(ForgeError::NotFound(_)) => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn any_labelled(&self, labels: &[String]) -> Result<bool, ForgeError> {
        let path = format!(
            "/issues?state=all&per_page=1&labels={}",
            q(&labels.join(","))
        );
        let (_, v) = self.send(http::Method::GET, &path, None)?;
        Ok(v.as_array().is_some_and(|l| !l.is_empty()))
    }

    fn probe_issues(&self) -> Result<(), ForgeError> {
        match self.send(http::Method::GET, "/issues?per_page=1", None) {
            Ok((200..=299, _)) => Ok(()),
            Ok((code, v)) => Err(ForgeError::Refused(format!("{code}: {}", said(&v)))),
            Err(ForgeError::Refused(why)) if why.starts_with("403") => Err(ForgeError::Refused(format!(
                "the token may not read the issues of {} ({why}): give it the Issues permission (read and write), or the `repo` scope",
                self.repository
            ))),
            Err(e) => Err(e),
        }
    }
}
