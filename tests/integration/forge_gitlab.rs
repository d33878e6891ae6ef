//! GitLab: the stand-in answers as GitLab's REST API v4 does (with a real bare repository
//! behind it and another clone pushing), and braids' GitLab client opens, watches and merges
//! merge requests on it, mapping each refusal onto the one error braids acts on.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use braids::forge::gitlab::GitLab as Client;
use braids::forge::{Conditional, Forge, ForgeError, MergeMethod, Merged, Opening};
use braids::review::{
    decide, CheckState, Handled, MergePolicy, Mergeable, PrState, ReviewState, Rework, Step,
};

use crate::support::bare_git::{push_branch, run_git as git, world};
use crate::support::forge_gitlab::GitLab;

const TOKEN: &str = "glpat-standin";
const PROJECT: &str = "group/sub/app";
const ENCODED: &str = "group%2Fsub%2Fapp";

/// Status, headers and body of one request.
struct Answer {
    status: u16,
    headers: http::HeaderMap,
    body: Value,
    text: String,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// A plain HTTP client for the stand-in, as `curl` would be.
struct Raw {
    agent: ureq::Agent,
    api: String,
}

impl Raw {
    fn new(api: String) -> Raw {
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(std::time::Duration::from_secs(30)))
            .build()
            .into();
        Raw { agent, api }
    }

    /// `method path` with `PRIVATE-TOKEN: token`, `If-None-Match: etag` and a JSON `body`.
    fn call(
        &self,
        method: &str,
        path: &str,
        token: &str,
        etag: Option<&str>,
        body: Option<Value>,
    ) -> Answer {
        let url = format!("{}{path}", self.api);
        let mut r = match method {
            "GET" => {
                let mut req = self.agent.get(&url).header("PRIVATE-TOKEN", token);
                if let Some(tag) = etag {
                    req = req.header("If-None-Match", tag);
                }
                req.call()
            }
            "DELETE" => self
                .agent
                .delete(&url)
                .header("PRIVATE-TOKEN", token)
                .call(),
            "POST" => self
                .agent
                .post(&url)
                .header("PRIVATE-TOKEN", token)
                .send_json(body.unwrap()),
            "PUT" => self
                .agent
                .put(&url)
                .header("PRIVATE-TOKEN", token)
                .send_json(body.unwrap()),
            _ => unreachable!(),
        }
        .unwrap();
        let status = r.status().as_u16();
        let headers = r.headers().clone();
        let text = r.body_mut().read_to_string().unwrap_or_default();
        Answer {
            status,
            headers,
            body: serde_json::from_str(&text).unwrap_or(Value::Null),
            text,
        }
    }

    fn get(&self, path: &str) -> Answer {
        self.call("GET", path, TOKEN, None, None)
    }

    fn post(&self, path: &str, body: Value) -> Answer {
        self.call("POST", path, TOKEN, None, Some(body))
    }

    fn put(&self, path: &str, body: Value) -> Answer {
        self.call("PUT", path, TOKEN, None, Some(body))
    }

    fn delete(&self, path: &str) -> Answer {
        self.call("DELETE", path, TOKEN, None, None)
    }
}

/// Pushes to `main` from the clone `work` a commit writing `text` to `file`, as somebody else.
fn push_main(work: &Path, file: &str, text: &str) {
    git(work, &["fetch", "-q", "origin"]);
    git(work, &["checkout", "-q", "-B", "other", "origin/main"]);
    std::fs::write(work.join(file), text).unwrap();
    git(work, &["add", "."]);
    git(work, &["commit", "-qm", &format!("someone else: {file}")]);
    git(work, &["push", "-q", "origin", "HEAD:main"]);
}

/// A bare repository behind `group/sub/app` with `main` and a pushed `braids/app-1`.
fn setup(tmp: &Path) -> (GitLab, PathBuf, PathBuf, String) {
    let (bare, work) = world(tmp);
    let head = push_branch(&work, "braids/app-1", "b.txt", "two\n");
    let gl = GitLab::start(TOKEN, "braids-bot");
    gl.project(PROJECT, &bare);
    (gl, bare, work, head)
}

fn mr_path(iid: u64) -> String {
    format!("/projects/{ENCODED}/merge_requests/{iid}")
}

#[test]
fn the_stand_in_gitlab_opens_watches_and_merges_merge_requests_as_gitlab_does() {
    let tmp = tempfile::tempdir().unwrap();
    let (gl, bare, work, head) = setup(tmp.path());
    let c = Raw::new(gl.api());

    // The project, by its encoded path or its id; with bare slashes, nothing is found.
    let a = c.get(&format!("/projects/{ENCODED}"));
    assert_eq!(
        (
            a.status,
            a.body["default_branch"].as_str(),
            a.body["id"].as_u64()
        ),
        (200, Some("main"), Some(1))
    );
    assert_eq!(c.get("/projects/1").body["path_with_namespace"], PROJECT);
    assert_eq!(c.get("/projects/group/sub/app").status, 404);
    let a = c.get("/projects/group%2Fother");
    assert_eq!(
        (a.status, a.body["message"].as_str()),
        (404, Some("404 Project Not Found"))
    );
    let a = c.call("GET", "/projects/1", "glpat-wrong", None, None);
    assert_eq!(
        (a.status, a.body["message"].as_str()),
        (401, Some("401 Unauthorized"))
    );

    // Opened; a second one for the same branches is GitLab's 409 with a list of messages.
    let open = json!({"source_branch": "braids/app-1", "target_branch": "main",
                      "title": "app-1: Do it", "description": "Did it."});
    let mrs = format!("/projects/{ENCODED}/merge_requests");
    let a = c.post(&mrs, open.clone());
    assert_eq!(a.status, 201, "{}", a.text);
    assert_eq!(
        (
            a.body["iid"].as_u64(),
            a.body["state"].as_str(),
            a.body["sha"].as_str()
        ),
        (Some(1), Some("opened"), Some(head.as_str()))
    );
    // Created, its mergeability is only queued.
    assert_eq!(a.body["merge_status"].as_str(), Some("checking"));
    assert_eq!(
        a.body["web_url"].as_str(),
        Some("https://gitlab.example/group/sub/app/-/merge_requests/1")
    );
    let a = c.post(&mrs, open);
    assert_eq!(a.status, 409);
    assert_eq!(
        a.body["message"],
        json!(["Another open merge request already exists for this source branch: !1"])
    );
    let a = c.post(
        &mrs,
        json!({"source_branch": "nope", "target_branch": "main", "title": "x"}),
    );
    assert_eq!(
        (a.status, &a.body["message"]),
        (400, &json!({"source_branch": ["does not exist"]}))
    );
    let a = c.post(&mrs, json!({"source_branch": "braids/app-1"}));
    assert_eq!(
        (a.status, a.body["error"].as_str()),
        (400, Some("title is missing, target_branch is missing"))
    );
    let a = c.get(&format!(
        "{mrs}?state=opened&source_branch=braids%2Fapp-1&target_branch=main"
    ));
    assert_eq!((a.status, a.body[0]["iid"].as_u64()), (200, Some(1)));
    assert_eq!(a.header("x-total"), Some("1"));
    assert_eq!(
        c.get(&format!("{mrs}?state=merged")).body,
        json!([]),
        "only open ones so far"
    );
    assert_eq!(
        gl.merge_requests(PROJECT),
        [(1, "braids/app-1".into(), "opened")]
    );

    // The check the creation queued has run; the count behind only when asked for.
    let a = c.get(&format!(
        "{}?include_diverged_commits_count=true",
        mr_path(1)
    ));
    assert_eq!(
        (
            a.body["merge_status"].as_str(),
            a.body["detailed_merge_status"].as_str(),
            a.body["has_conflicts"].as_bool(),
            a.body["diverged_commits_count"].as_u64()
        ),
        (
            Some("can_be_merged"),
            Some("mergeable"),
            Some(false),
            Some(0)
        )
    );
    assert!(c
        .get(&mr_path(1))
        .body
        .get("diverged_commits_count")
        .is_none());
    assert_eq!(a.body["head_pipeline"], Value::Null);

    // A failed job in the head's pipeline, with its log; a retry is a new job.
    let first = gl.job(
        PROJECT,
        &head,
        "test",
        "failed",
        "running tests\nFAILED: 2 tests\n",
    );
    let a = c.get(&format!("/projects/{ENCODED}/pipelines?sha={head}"));
    assert_eq!(a.body.as_array().map(Vec::len), Some(1));
    let pipeline = a.body[0]["id"].as_u64().unwrap();
    assert_eq!(
        (a.body[0]["status"].as_str(), a.body[0]["ref"].as_str()),
        (Some("failed"), Some("braids/app-1"))
    );
    let a = c.get(&mr_path(1));
    assert_eq!(a.body["head_pipeline"]["id"].as_u64(), Some(pipeline));
    assert_eq!(a.body["head_pipeline"]["status"].as_str(), Some("failed"));
    let jobs = format!("/projects/{ENCODED}/pipelines/{pipeline}/jobs");
    let a = c.get(&jobs);
    assert_eq!(
        (
            a.body[0]["id"].as_u64(),
            a.body[0]["name"].as_str(),
            a.body[0]["status"].as_str(),
            a.body[0]["allow_failure"].as_bool(),
            a.body[0]["failure_reason"].as_str()
        ),
        (
            Some(first),
            Some("test"),
            Some("failed"),
            Some(false),
            Some("script_failure")
        )
    );
    let a = c.get(&format!("/projects/{ENCODED}/jobs/{first}/trace"));
    assert_eq!(
        (a.status, a.text.as_str(), a.header("content-type")),
        (200, "running tests\nFAILED: 2 tests\n", Some("text/plain"))
    );
    let again = gl.job(PROJECT, &head, "test", "success", "ok\n");
    assert_ne!(again, first);
    let a = c.get(&jobs);
    assert_eq!(
        (a.body.as_array().map(Vec::len), a.body[0]["id"].as_u64()),
        (Some(1), Some(again))
    );
    assert_eq!(
        c.get(&format!("{jobs}?include_retried=true"))
            .body
            .as_array()
            .map(Vec::len),
        Some(2)
    );
    assert_eq!(
        c.get(&mr_path(1)).body["head_pipeline"]["status"].as_str(),
        Some("success")
    );

    // An approval, and a thread on a line; the approval is a system note too.
    gl.approve(PROJECT, 1, "ana");
    let a = c.get(&format!("{}/approvals", mr_path(1)));
    assert_eq!(
        a.body["approved_by"][0]["user"]["username"].as_str(),
        Some("ana")
    );
    let thread = gl.discuss(PROJECT, 1, "bo", Some(("b.txt", 1)), "call it three");
    gl.reply(PROJECT, 1, &thread, "ana", "agreed");
    let a = c.get(&format!("{}/discussions", mr_path(1)));
    let list = a.body.as_array().unwrap();
    assert_eq!(list.len(), 2, "{}", a.body);
    assert_eq!(
        (
            list[0]["individual_note"].as_bool(),
            list[0]["notes"][0]["system"].as_bool()
        ),
        (Some(true), Some(true))
    );
    assert_eq!(
        list[0]["notes"][0]["body"].as_str(),
        Some("approved this merge request")
    );
    let note = &list[1]["notes"][0];
    assert_eq!(list[1]["id"].as_str(), Some(thread.as_str()));
    assert_eq!(
        (
            note["type"].as_str(),
            note["position"]["new_path"].as_str(),
            note["position"]["new_line"].as_u64(),
            note["resolvable"].as_bool(),
            note["resolved"].as_bool()
        ),
        (
            Some("DiffNote"),
            Some("b.txt"),
            Some(1),
            Some(true),
            Some(false)
        )
    );
    assert_eq!(list[1]["notes"][1]["body"].as_str(), Some("agreed"));
    let a = c.get(&mr_path(1));
    assert_eq!(
        (
            a.body["blocking_discussions_resolved"].as_bool(),
            a.body["user_notes_count"].as_u64()
        ),
        (Some(false), Some(2))
    );
    gl.resolve(PROJECT, 1, &thread, "bo");
    let a = c.get(&format!("{}/discussions", mr_path(1)));
    assert_eq!(
        a.body[1]["notes"][0]["resolved_by"]["username"].as_str(),
        Some("bo")
    );
    assert_eq!(
        c.get(&mr_path(1)).body["blocking_discussions_resolved"].as_bool(),
        Some(true)
    );

    // The target moves under it: the first look only starts the check, the next has it.
    push_main(&work, "c.txt", "elsewhere\n");
    let look = || {
        c.get(&format!(
            "{}?include_diverged_commits_count=true",
            mr_path(1)
        ))
    };
    let a = look();
    assert_eq!(
        (
            a.body["merge_status"].as_str(),
            a.body["diverged_commits_count"].as_u64()
        ),
        (Some("checking"), Some(1))
    );
    assert_eq!(look().body["merge_status"].as_str(), Some("can_be_merged"));

    // A merge naming a head that is no longer the head is refused; the right one squashes.
    let stale = json!({"sha": "0000000000000000000000000000000000000000", "squash": true});
    let a = c.put(&format!("{}/merge", mr_path(1)), stale);
    assert_eq!(a.status, 409, "{}", a.text);
    assert_eq!(
        a.body["message"].as_str(),
        Some(format!("SHA does not match HEAD of source branch: {head}").as_str())
    );
    let a = c.put(
        &format!("{}/merge", mr_path(1)),
        json!({"sha": head, "squash": true}),
    );
    assert_eq!(
        (a.status, a.body["state"].as_str()),
        (200, Some("merged")),
        "{}",
        a.text
    );
    let main = git(&bare, &["rev-parse", "main"]);
    assert_eq!(a.body["merge_commit_sha"].as_str(), Some(main.as_str()));
    assert_eq!(
        a.body["merge_user"]["username"].as_str(),
        Some("braids-bot")
    );
    // A merge commit over a squash commit made on the merge base.
    let squash = a.body["squash_commit_sha"].as_str().unwrap().to_string();
    assert_eq!(git(&bare, &["rev-parse", "main^2"]), squash);
    assert_eq!(
        git(&bare, &["rev-list", "--count", "--first-parent", "main"]),
        "3"
    );
    assert_eq!(
        git(&bare, &["log", "-1", "--format=%s", &squash]),
        "app-1: Do it"
    );
    assert_eq!(
        git(&bare, &["log", "-1", "--format=%s", "main"]),
        "Merge branch 'braids/app-1' into 'main'"
    );
    assert_eq!(git(&bare, &["show", "main:b.txt"]), "two");
    assert_eq!(git(&bare, &["show", "main:c.txt"]), "elsewhere");
    let a = c.get(&mr_path(1));
    assert_eq!(
        (
            a.body["state"].as_str(),
            a.body["detailed_merge_status"].as_str()
        ),
        (Some("merged"), Some("not_open"))
    );

    // The branch deleted, by its encoded name; again, GitLab's 404 for the branch.
    let branch = format!("/projects/{ENCODED}/repository/branches/braids%2Fapp-1");
    assert_eq!(
        c.get(&branch).body["commit"]["id"].as_str(),
        Some(head.as_str())
    );
    assert_eq!(
        c.delete(&format!(
            "/projects/{ENCODED}/repository/branches/braids/app-1"
        ))
        .status,
        404
    );
    assert_eq!(c.delete(&branch).status, 204);
    let a = c.delete(&branch);
    assert_eq!(
        (a.status, a.body["message"].as_str()),
        (404, Some("404 Branch Not Found"))
    );
}

#[test]
fn the_stand_in_gitlab_refuses_a_conflict_closes_rate_limits_and_goes_down() {
    let tmp = tempfile::tempdir().unwrap();
    let (gl, _bare, work, _) = setup(tmp.path());
    let c = Raw::new(gl.api());
    push_branch(&work, "braids/app-2", "a.txt", "mine\n");
    let n = gl.open(PROJECT, "braids/app-2", "main", "app-2");
    // Another clone changes the same line on main: a conflict, once the check has run.
    push_main(&work, "a.txt", "theirs\n");
    assert_eq!(
        c.get(&mr_path(n)).body["merge_status"].as_str(),
        Some("checking")
    );
    let a = c.get(&mr_path(n));
    assert_eq!(
        (
            a.body["merge_status"].as_str(),
            a.body["detailed_merge_status"].as_str(),
            a.body["has_conflicts"].as_bool()
        ),
        (Some("cannot_be_merged"), Some("conflict"), Some(true))
    );
    let a = c.put(&format!("{}/merge", mr_path(n)), json!({"squash": false}));
    assert_eq!(
        (a.status, a.body["message"].as_str()),
        (422, Some("Branch cannot be merged"))
    );

    // A person closes it: who, in the merge request itself; a merge now is not allowed.
    gl.close_by(PROJECT, n, "bo");
    let a = c.get(&mr_path(n));
    assert_eq!(
        (
            a.body["state"].as_str(),
            a.body["closed_by"]["username"].as_str()
        ),
        (Some("closed"), Some("bo"))
    );
    let a = c.put(&format!("{}/merge", mr_path(n)), json!({"squash": false}));
    assert_eq!(
        (a.status, a.body["message"].as_str()),
        (405, Some("405 Method Not Allowed"))
    );

    // With ETags on, a matching If-None-Match is a 304, and it still costs quota.
    gl.set_etags(true);
    let a = c.get(&mr_path(n));
    let tag = a.header("etag").expect("an ETag").to_string();
    let left: u32 = a.header("ratelimit-remaining").unwrap().parse().unwrap();
    let a = c.call("GET", &mr_path(n), TOKEN, Some(&tag), None);
    assert_eq!(a.status, 304);
    assert_eq!(
        a.header("ratelimit-remaining"),
        Some((left - 1).to_string().as_str())
    );
    gl.set_etags(false);
    assert!(c.get(&mr_path(n)).header("etag").is_none());

    // The rate limit spent: 429, plain text, and when to come back.
    gl.set_remaining(0);
    let a = c.get(&mr_path(n));
    assert_eq!((a.status, a.text.as_str()), (429, "Retry later\n"));
    let retry: u64 = a.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=60).contains(&retry), "{retry}");
    let reset: u64 = a.header("ratelimit-reset").unwrap().parse().unwrap();
    assert_eq!(reset % 60, 0);
    assert!(a.header("ratelimit-resettime").unwrap().ends_with(" GMT"));
    gl.set_remaining(10);
    gl.set_down(true);
    assert_eq!(c.get(&mr_path(n)).status, 503);
    gl.set_down(false);
    assert_eq!(c.get(&mr_path(n)).status, 200);
}

#[test]
fn merging_on_the_stand_in_follows_the_projects_merge_method_and_its_pipeline_rule() {
    let tmp = tempfile::tempdir().unwrap();
    let (gl, bare, work, _) = setup(tmp.path());
    let c = Raw::new(gl.api());
    push_branch(&work, "one", "x.txt", "x\n");
    let two = push_branch(&work, "two", "y.txt", "y\n");
    let (one_n, two_n) = (
        gl.open(PROJECT, "one", "main", "one"),
        gl.open(PROJECT, "two", "main", "two"),
    );

    // A person merges `one` the default way: a merge commit, merged by them.
    let merged = gl.merge_by(PROJECT, one_n, "ana").unwrap();
    assert_eq!(git(&bare, &["rev-parse", "main"]), merged);
    assert_eq!(
        git(&bare, &["rev-list", "--count", "--merges", "main"]),
        "1"
    );
    let a = c.get(&mr_path(one_n));
    assert_eq!(a.body["merge_user"]["username"].as_str(), Some("ana"));
    assert_eq!(a.body["merged_by"]["username"].as_str(), Some("ana"));

    // Fast-forward only: `two` was made on the old main, so it needs a rebase first.
    gl.set_merge_method(PROJECT, "ff");
    assert_eq!(
        c.get(&mr_path(two_n)).body["merge_status"].as_str(),
        Some("checking")
    );
    assert_eq!(
        c.get(&mr_path(two_n)).body["detailed_merge_status"].as_str(),
        Some("need_rebase")
    );
    let a = c.put(&format!("{}/merge", mr_path(two_n)), json!({"sha": two}));
    assert_eq!(a.status, 422, "{}", a.text);
    git(&work, &["fetch", "-q", "origin"]);
    git(&work, &["checkout", "-q", "two"]);
    git(&work, &["rebase", "-q", "origin/main"]);
    git(&work, &["push", "-q", "-f", "origin", "two"]);
    let rebased = git(&work, &["rev-parse", "HEAD"]);

    // And its pipeline must pass: not while it runs.
    gl.set_pipeline_must_succeed(PROJECT, true);
    gl.job(PROJECT, &rebased, "test", "running", "");
    assert_eq!(
        c.get(&mr_path(two_n)).body["detailed_merge_status"].as_str(),
        Some("ci_still_running")
    );
    let a = c.put(
        &format!("{}/merge", mr_path(two_n)),
        json!({"sha": rebased}),
    );
    assert_eq!(a.status, 405, "{}", a.text);
    gl.job(PROJECT, &rebased, "test", "success", "ok\n");
    let a = c.put(
        &format!("{}/merge", mr_path(two_n)),
        json!({"sha": rebased}),
    );
    assert_eq!(a.status, 200, "{}", a.text);
    // Fast-forwarded: main is the head itself, and no merge commit was made.
    assert_eq!(git(&bare, &["rev-parse", "main"]), rebased);
    assert_eq!(a.body["merge_commit_sha"], Value::Null);
    assert_eq!(
        git(&bare, &["rev-list", "--count", "--merges", "main"]),
        "1"
    );

    // Squashed and fast-forwarded: one new commit on main, with the branch's two changes.
    gl.set_pipeline_must_succeed(PROJECT, false);
    git(&work, &["fetch", "-q", "origin"]);
    git(&work, &["checkout", "-q", "-B", "three", "origin/main"]);
    for f in ["p.txt", "q.txt"] {
        std::fs::write(work.join(f), "z\n").unwrap();
        git(&work, &["add", "."]);
        git(&work, &["commit", "-qm", f]);
    }
    git(&work, &["push", "-q", "origin", "three"]);
    let three = gl.open(PROJECT, "three", "main", "three: both");
    let a = c.put(
        &format!("{}/merge", mr_path(three)),
        json!({"squash": true}),
    );
    assert_eq!(a.status, 200, "{}", a.text);
    let main = git(&bare, &["rev-parse", "main"]);
    assert_eq!(a.body["squash_commit_sha"].as_str(), Some(main.as_str()));
    assert_eq!(git(&bare, &["rev-parse", "main^"]), rebased);
    assert_eq!(
        git(&bare, &["log", "-1", "--format=%s", "main"]),
        "three: both"
    );
    for f in ["p.txt", "q.txt", "x.txt", "y.txt"] {
        git(&bare, &["cat-file", "-e", &format!("main:{f}")]);
    }
}

/// A client for `group/sub/app` on the stand-in.
fn client(gl: &GitLab) -> Client {
    Client::new(&gl.api(), PROJECT, TOKEN).unwrap()
}

/// The requests for paths ending in `tail`.
fn asked(gl: &GitLab, tail: &str) -> usize {
    gl.requests()
        .iter()
        .filter(|r| r.path.ends_with(tail))
        .count()
}

#[test]
fn the_gitlab_client_sees_failed_jobs_approvals_and_line_discussions() {
    let tmp = tempfile::tempdir().unwrap();
    let (gl, _bare, _work, head) = setup(tmp.path());
    let n = gl.open(PROJECT, "braids/app-1", "main", "app-1: Do it");
    let client = client(&gl);
    let mut cache = Conditional::default();

    // No pipeline: the merge request, its approvals, its discussions.
    let first = client.observe(n, &mut cache).unwrap();
    assert_eq!(first.pr.state, PrState::Open);
    assert_eq!(
        (first.pr.number, first.pr.head.as_str()),
        (n, head.as_str())
    );
    assert_eq!(first.pr.mergeable, Mergeable::Clean);
    assert!(!first.pr.behind);
    assert!(first.pr.checks.is_empty() && first.pr.reviews.is_empty());
    assert_eq!((first.requests, first.not_modified), (3, 0));
    assert!(first.remaining.is_some());
    // Every path names the project by its encoded full path.
    assert!(gl
        .requests()
        .iter()
        .all(|r| r.path.starts_with(&format!("/api/v4/projects/{ENCODED}/"))));

    // A failed job, whose long log's tail is its summary, and one still running.
    let log: String = (1..=5000)
        .map(|i| format!("line {i}\n"))
        .collect::<String>()
        + "\u{1b}[31;1mERROR: Job failed: exit code 1\u{1b}[0;m\n";
    gl.job(PROJECT, &head, "test", "failed", &log);
    gl.job(PROJECT, &head, "lint", "running", "");
    gl.job_allowed_to_fail(PROJECT, &head, "flaky", "failed");
    let red = client.observe(n, &mut cache).unwrap();
    let states: Vec<(&str, CheckState)> = red
        .pr
        .checks
        .iter()
        .map(|c| (c.name.as_str(), c.state))
        .collect();
    assert_eq!(
        states,
        [
            ("test", CheckState::Failed),
            ("lint", CheckState::Pending),
            ("flaky", CheckState::Passed)
        ]
    );
    let summary = &red.pr.checks[0].summary;
    assert!(
        summary.ends_with("line 5000\nERROR: Job failed: exit code 1"),
        "{summary}"
    );
    assert!(
        summary.starts_with("line 4962\n") && summary.lines().count() == 40,
        "{summary}"
    );
    // The jobs and the failed job's log are read too.
    assert_eq!(red.requests, 5);
    assert_eq!(asked(&gl, "/trace"), 1);
    // What braids would do: the failing check first.
    assert!(matches!(
        decide(&red.pr, &Handled::default(), MergePolicy::Auto, 0, 3),
        Step::Rework(Rework::Checks(ref c)) if c.len() == 1
    ));
    // Looked at again: the log is not read again.
    let again = client.observe(n, &mut cache).unwrap();
    assert_eq!(again.requests, 4);
    assert_eq!(asked(&gl, "/trace"), 1);
    assert_eq!(again.pr.checks, red.pr.checks);

    // An approval, and a thread on a line with a reply.
    gl.approve(PROJECT, n, "ana");
    let thread = gl.discuss(PROJECT, n, "bo", Some(("b.txt", 1)), "call it three");
    gl.reply(PROJECT, n, &thread, "bo", "and below too");
    gl.comment(PROJECT, n, "cy", "nice");
    let seen = client.observe(n, &mut cache).unwrap();
    let reviews: Vec<(&str, ReviewState, bool)> = seen
        .pr
        .reviews
        .iter()
        .map(|r| (r.author.as_str(), r.state, r.inline))
        .collect();
    assert_eq!(
        reviews,
        [
            ("ana", ReviewState::Approved, false),
            ("bo", ReviewState::Commented, true),
            ("cy", ReviewState::Commented, false)
        ]
    );
    let line = &seen.pr.reviews[1];
    assert_eq!(line.body, "b.txt:1: call it three\nb.txt:1: and below too");
    assert!(line.id > seen.pr.reviews[0].id);
    // With the failing check handled, the line comment is what the agent is shown.
    let handled = Handled {
        checks_at: Some(head.clone()),
        ..Handled::default()
    };
    match decide(&seen.pr, &handled, MergePolicy::Auto, 0, 3) {
        Step::Rework(Rework::Changes(r)) => {
            assert!(r.iter().any(|r| r.inline && r.author == "bo"), "{r:?}")
        }
        other => panic!("{other:?}"),
    }

    // Resolved, the thread is nothing to act on.
    gl.resolve(PROJECT, n, &thread, "bo");
    let resolved = client.observe(n, &mut cache).unwrap();
    assert!(!resolved.pr.reviews.iter().any(|r| r.inline));

    // A request for changes stands until the reviewer approves; the reviewers are read only
    // once someone asked.
    assert_eq!(asked(&gl, "/reviewers"), 0);
    gl.request_changes(PROJECT, n, "dee");
    let changes = client.observe(n, &mut cache).unwrap();
    assert_eq!(changes.requests, 5);
    let dee: Vec<ReviewState> = changes
        .pr
        .reviews
        .iter()
        .filter(|r| r.author == "dee")
        .map(|r| r.state)
        .collect();
    assert_eq!(dee, [ReviewState::ChangesRequested]);
    gl.approve(PROJECT, n, "dee");
    let approved = client.observe(n, &mut cache).unwrap();
    let dee: Vec<ReviewState> = approved
        .pr
        .reviews
        .iter()
        .filter(|r| r.author == "dee")
        .map(|r| r.state)
        .collect();
    assert_eq!(dee, [ReviewState::Dismissed, ReviewState::Approved]);
    // Asked again to review, an unapproving reviewer's old request does not come back.
    gl.unapprove(PROJECT, n, "dee");
    gl.request_review(PROJECT, n, "dee");
    let again = client.observe(n, &mut cache).unwrap();
    let dee: Vec<ReviewState> = again
        .pr
        .reviews
        .iter()
        .filter(|r| r.author == "dee")
        .map(|r| r.state)
        .collect();
    assert_eq!(dee, [ReviewState::Dismissed]);
}

#[test]
fn with_etags_a_quiet_look_is_four_304s_and_gitlab_still_counts_them() {
    let tmp = tempfile::tempdir().unwrap();
    let (gl, _bare, _work, head) = setup(tmp.path());
    gl.set_etags(true);
    let n = gl.open(PROJECT, "braids/app-1", "main", "app-1");
    gl.job(PROJECT, &head, "test", "success", "ok\n");
    let client = client(&gl);
    let mut cache = Conditional::default();

    let first = client.observe(n, &mut cache).unwrap();
    assert_eq!((first.requests, first.not_modified), (4, 0));
    assert_eq!(first.pr.checks[0].state, CheckState::Passed);

    // Nothing changed: four requests, all 304, and four fewer left all the same.
    let quiet = client.observe(n, &mut cache).unwrap();
    assert_eq!((quiet.requests, quiet.not_modified), (4, 4));
    assert_eq!(quiet.pr, first.pr);
    assert_eq!(
        quiet.remaining.unwrap(),
        first.remaining.unwrap() - 4,
        "GitLab counts a 304 against the rate limit"
    );
    let sent = gl.requests();
    assert!(sent[sent.len() - 4..].iter().all(|r| r.status == 304));

    // A job added to the pipeline: its jobs (and the merge request, whose head pipeline
    // says so) are read again, the rest still 304.
    gl.job(PROJECT, &head, "lint", "pending", "");
    let busy = client.observe(n, &mut cache).unwrap();
    assert_eq!((busy.requests, busy.not_modified), (4, 2));
    assert_eq!(busy.pr.checks.len(), 2);

    // ETags gone (a GitLab that sends none): whole answers, and the same pull request.
    gl.set_etags(false);
    let plain = client.observe(n, &mut cache).unwrap();
    assert_eq!((plain.requests, plain.not_modified), (4, 0));
    assert_eq!(plain.pr, busy.pr);
}

#[test]
fn each_refusal_of_gitlab_is_the_one_error_braids_acts_on() {
    let tmp = tempfile::tempdir().unwrap();
    let (gl, _bare, _work, _) = setup(tmp.path());
    let n = gl.open(PROJECT, "braids/app-1", "main", "app-1");
    let mut cache = Conditional::default();

    let wrong = Client::new(&gl.api(), PROJECT, "glpat-revoked").unwrap();
    let e = wrong.observe(n, &mut cache).unwrap_err();
    assert!(
        matches!(e, ForgeError::Unauthorized(ref m) if m == "401 Unauthorized"),
        "{e}"
    );
    assert!(!e.is_outage());

    let elsewhere = Client::new(&gl.api(), "group/other", TOKEN).unwrap();
    let e = elsewhere.observe(n, &mut cache).unwrap_err();
    assert!(
        matches!(e, ForgeError::NotFound(ref p) if p.contains("group%2Fother")),
        "{e}"
    );
    // By id, the same project.
    let by_id = Client::new(&gl.api(), "1", TOKEN).unwrap();
    assert_eq!(by_id.observe(n, &mut cache).unwrap().pr.number, n);

    let client = client(&gl);
    assert!(matches!(
        client.observe(99, &mut cache).unwrap_err(),
        ForgeError::NotFound(_)
    ));

    gl.set_remaining(0);
    let e = client.observe(n, &mut cache).unwrap_err();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    assert!(
        matches!(e, ForgeError::RateLimited { reset: Some(r) } if r > now && r <= now + 61),
        "{e}"
    );
    assert!(e.is_outage());

    gl.set_remaining(100);
    gl.set_down(true);
    let e = client.observe(n, &mut cache).unwrap_err();
    assert!(
        matches!(e, ForgeError::Unavailable(ref m) if m.starts_with("503")),
        "{e}"
    );
    assert!(e.is_outage());
    gl.set_down(false);
    assert_eq!(client.observe(n, &mut cache).unwrap().pr.number, n);

    // Nobody listening: an outage too; not a URL: the settings' fault.
    let gone = Client::new("http://127.0.0.1:9/api/v4", PROJECT, TOKEN).unwrap();
    let e = gone.observe(n, &mut Conditional::default()).unwrap_err();
    assert!(e.is_outage(), "{e}");
    assert!(matches!(
        Client::new("gitlab.com/api/v4", PROJECT, TOKEN).err(),
        Some(ForgeError::Refused(_))
    ));
}

#[test]
fn the_gitlab_client_opens_once_merges_only_the_head_it_saw_and_deletes_the_branch() {
    let tmp = tempfile::tempdir().unwrap();
    let (gl, bare, work, head) = setup(tmp.path());
    let client = client(&gl);
    let opening = Opening {
        head: "braids/app-1".into(),
        base: "main".into(),
        title: "app-1: Do it".into(),
        body: "Did it.".into(),
    };
    let opened = client.open(&opening).unwrap();
    assert_eq!(opened.number, 1);
    assert!(
        opened.url.ends_with("/group/sub/app/-/merge_requests/1"),
        "{}",
        opened.url
    );
    // Opened again (a worker that died after opening it): the same one, not a second.
    assert_eq!(client.open(&opening).unwrap(), opened);
    assert_eq!(gl.merge_requests(PROJECT).len(), 1);
    // A branch the forge does not have: refused in its words.
    let missing = Opening {
        head: "nope".into(),
        ..opening.clone()
    };
    let e = client.open(&missing).unwrap_err();
    assert!(
        e.to_string().contains("source_branch does not exist"),
        "{e}"
    );

    // Somebody pushed since braids looked: no merge.
    assert_eq!(
        client
            .merge(
                1,
                "0000000000000000000000000000000000000000",
                MergeMethod::Squash
            )
            .unwrap(),
        Merged::HeadMoved
    );
    push_main(&work, "c.txt", "elsewhere\n");
    let merged = client.merge(1, &head, MergeMethod::Squash).unwrap();
    let main = git(&bare, &["rev-parse", "main"]);
    assert_eq!(merged, Merged::Merged { commit: main });
    assert_eq!(git(&bare, &["show", "main:b.txt"]), "two");
    // A merge commit over one squash commit, whose one parent is where the branch began.
    let base = git(&bare, &["merge-base", "main^1", "main^2"]);
    assert_eq!(git(&bare, &["log", "-1", "--format=%P", "main^2"]), base);
    // Merged already: the forge says why not.
    assert_eq!(
        client.merge(1, &head, MergeMethod::Squash).unwrap(),
        Merged::NotMergeable("405 Method Not Allowed".into())
    );
    client.delete_branch("braids/app-1").unwrap();
    client.delete_branch("braids/app-1").unwrap();
    assert!(git(&bare, &["branch", "--list", "braids/app-1"]).is_empty());
    assert_eq!(asked(&gl, "/repository/branches/braids%2Fapp-1"), 2);
}

#[test]
fn the_gitlab_client_sees_a_base_that_moved_a_conflict_and_who_merged_or_closed() {
    let tmp = tempfile::tempdir().unwrap();
    let (gl, bare, work, head) = setup(tmp.path());
    let n = gl.open(PROJECT, "braids/app-1", "main", "app-1");
    let client = client(&gl);
    let mut cache = Conditional::default();
    assert!(!client.observe(n, &mut cache).unwrap().pr.behind);

    // The base moved: behind at once, whether it merges only once GitLab checked.
    push_main(&work, "c.txt", "elsewhere\n");
    let moved = client.observe(n, &mut cache).unwrap();
    assert_eq!(
        (moved.pr.behind, moved.pr.mergeable),
        (true, Mergeable::Unknown)
    );
    assert!(matches!(
        decide(&moved.pr, &Handled::default(), MergePolicy::Auto, 0, 3),
        Step::Wait { .. }
    ));
    let checked = client.observe(n, &mut cache).unwrap();
    assert_eq!(
        (checked.pr.behind, checked.pr.mergeable),
        (true, Mergeable::Clean)
    );
    assert_eq!(
        decide(&checked.pr, &Handled::default(), MergePolicy::Auto, 0, 3),
        Step::Rebase
    );

    // Merged by a person: who, from the merge request alone.
    gl.merge_by(PROJECT, n, "ana").unwrap();
    let merged = client.observe(n, &mut cache).unwrap();
    assert_eq!(
        merged.pr.state,
        PrState::Merged {
            by: Some("ana".into())
        }
    );
    assert_eq!(merged.requests, 1);
    assert_eq!(
        decide(&merged.pr, &Handled::default(), MergePolicy::Auto, 0, 3),
        Step::Done {
            merged_by: Some("ana".into())
        }
    );
    assert_eq!(git(&bare, &["rev-parse", "main^2"]), head);

    // Another that conflicts with the base: a conflict, and no merge.
    push_branch(&work, "braids/app-2", "a.txt", "mine\n");
    let m = gl.open(PROJECT, "braids/app-2", "main", "app-2");
    push_main(&work, "a.txt", "theirs\n");
    client.observe(m, &mut cache).unwrap();
    let conflict = client.observe(m, &mut cache).unwrap();
    assert_eq!(conflict.pr.mergeable, Mergeable::Conflict);
    assert!(matches!(
        decide(&conflict.pr, &Handled::default(), MergePolicy::Auto, 0, 3),
        Step::Rework(Rework::Conflict)
    ));
    let at = conflict.pr.head.clone();
    assert_eq!(at, gl.head_of(PROJECT, m));
    assert_eq!(
        client.merge(m, &at, MergeMethod::Merge).unwrap(),
        Merged::NotMergeable("Branch cannot be merged".into())
    );

    // Closed by a person: who, from the merge request alone.
    gl.close_by(PROJECT, m, "bo");
    let closed = client.observe(m, &mut cache).unwrap();
    assert_eq!(
        closed.pr.state,
        PrState::Closed {
            by: Some("bo".into())
        }
    );
    assert_eq!(closed.requests, 1);
}
