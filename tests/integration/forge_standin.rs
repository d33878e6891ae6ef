//! The stand-in GitHub answers as GitHub's REST API v3 does for everything pull-request landing
//! will ask of it, over HTTP, with a real bare repository behind it and another clone pushing:
//! the forge braids is tested against must itself be right.

use serde_json::{json, Value};

use crate::support::bare_git::{push_branch, run_git as git, world};
use crate::support::forge_github::GitHub;

const TOKEN: &str = "ghp_standin";

struct Client {
    agent: ureq::Agent,
    api: String,
}

/// Status, ETag and body of one request.
type Answer = (u16, Option<String>, Value);

impl Client {
    fn new(api: String) -> Client {
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(std::time::Duration::from_secs(30)))
            .build()
            .into();
        Client { agent, api }
    }

    fn call(
        &self,
        method: &str,
        path: &str,
        token: &str,
        etag: Option<&str>,
        body: Option<Value>,
    ) -> Answer {
        let url = format!("{}{path}", self.api);
        let auth = format!("Bearer {token}");
        let mut r = match method {
            "GET" => {
                let mut req = self.agent.get(&url).header("Authorization", &auth);
                if let Some(tag) = etag {
                    req = req.header("If-None-Match", tag);
                }
                req.call()
            }
            "DELETE" => self
                .agent
                .delete(&url)
                .header("Authorization", &auth)
                .call(),
            "POST" => self
                .agent
                .post(&url)
                .header("Authorization", &auth)
                .send_json(body.unwrap()),
            "PUT" => self
                .agent
                .put(&url)
                .header("Authorization", &auth)
                .send_json(body.unwrap()),
            _ => unreachable!(),
        }
        .unwrap();
        let tag = r
            .headers()
            .get("etag")
            .and_then(|v| v.to_str().ok())
            .map(String::from);
        let status = r.status().as_u16();
        let text = r.body_mut().read_to_string().unwrap_or_default();
        (
            status,
            tag,
            serde_json::from_str(&text).unwrap_or(Value::Null),
        )
    }

    fn get(&self, path: &str) -> Answer {
        self.call("GET", path, TOKEN, None, None)
    }
}

#[test]
fn the_stand_in_github_opens_watches_and_merges_pull_requests_as_github_does() {
    let tmp = tempfile::tempdir().unwrap();
    let (bare, work) = world(tmp.path());
    let gh = GitHub::start(TOKEN, "braids-bot");
    gh.repo("me/app", &bare);
    let c = Client::new(gh.api());

    // The repository, and who may push.
    let (st, _, repo) = c.get("/repos/me/app");
    assert_eq!((st, repo["default_branch"].as_str()), (200, Some("main")));
    assert_eq!(c.get("/repos/me/other").0, 404);
    let (st, _, body) = c.call("GET", "/repos/me/app", "wrong", None, None);
    assert_eq!(
        (st, body["message"].as_str()),
        (401, Some("Bad credentials"))
    );

    // Opened against main; a second one for the same branch is refused with GitHub's words.
    let head = push_branch(&work, "braids/app-1", "b.txt", "two\n");
    let open = json!({"title": "app-1: Do it", "head": "braids/app-1", "base": "main",
                      "body": "Did it."});
    let (st, _, pr) = c.call(
        "POST",
        "/repos/me/app/pulls",
        TOKEN,
        None,
        Some(open.clone()),
    );
    assert_eq!(st, 201, "{pr}");
    assert_eq!(pr["number"], 1);
    assert_eq!(pr["head"]["sha"].as_str(), Some(head.as_str()));
    assert_eq!(pr["mergeable_state"].as_str(), Some("clean"));
    assert_eq!(gh.pulls("me/app"), [(1, "braids/app-1".to_string(), true)]);
    let (st, _, again) = c.call("POST", "/repos/me/app/pulls", TOKEN, None, Some(open));
    assert_eq!(st, 422);
    assert!(again["errors"][0]["message"]
        .as_str()
        .unwrap()
        .contains("already exists"));
    let bad = json!({"title": "x", "head": "nope", "base": "main"});
    assert_eq!(
        c.call("POST", "/repos/me/app/pulls", TOKEN, None, Some(bad))
            .0,
        422
    );

    // A conditional request that finds nothing new is a 304 and costs no quota.
    let (_, tag, _) = c.get("/repos/me/app/pulls/1");
    let tag = tag.expect("an ETag");
    let before = gh.requests().len();
    let (_, _, rate) = c.get("/rate_limit");
    let left = rate["resources"]["core"]["remaining"].as_u64().unwrap();
    let (st, _, _) = c.call("GET", "/repos/me/app/pulls/1", TOKEN, Some(&tag), None);
    assert_eq!(st, 304);
    let (_, _, rate) = c.get("/rate_limit");
    assert_eq!(rate["resources"]["core"]["remaining"].as_u64(), Some(left));
    assert_eq!(gh.requests().len(), before + 3);

    // Checks: a red check run and a pending status, then the ETag no longer matches.
    gh.check(
        &head,
        "test",
        "completed",
        Some("failure"),
        "2 tests failed",
    );
    gh.status(&head, "ci/lint", "pending", "running");
    let (st, _, runs) = c.get("/repos/me/app/commits/braids%2Fapp-1/check-runs");
    assert_eq!(st, 200);
    assert_eq!(
        runs["check_runs"][0]["conclusion"].as_str(),
        Some("failure")
    );
    assert_eq!(
        runs["check_runs"][0]["output"]["summary"].as_str(),
        Some("2 tests failed")
    );
    let (_, _, status) = c.get(&format!("/repos/me/app/commits/{head}/status"));
    assert_eq!(status["state"].as_str(), Some("pending"));

    // A review asking for changes on a line.
    let id = gh.review(
        "me/app",
        1,
        "ana",
        "CHANGES_REQUESTED",
        "Please rename.",
        &[("b.txt", 1, "call it three")],
    );
    let (_, _, reviews) = c.get("/repos/me/app/pulls/1/reviews");
    assert_eq!(reviews[0]["id"].as_u64(), Some(id));
    assert_eq!(reviews[0]["state"].as_str(), Some("CHANGES_REQUESTED"));
    let (_, _, comments) = c.get("/repos/me/app/pulls/1/comments");
    assert_eq!(comments[0]["path"].as_str(), Some("b.txt"));
    assert_eq!(comments[0]["pull_request_review_id"].as_u64(), Some(id));

    // The base moves under it (another clone pushes): behind, still clean.
    git(&work, &["checkout", "-q", "-B", "other", "origin/main"]);
    std::fs::write(work.join("c.txt"), "elsewhere\n").unwrap();
    git(&work, &["add", "."]);
    git(&work, &["commit", "-qm", "someone else"]);
    git(&work, &["push", "-q", "origin", "HEAD:main"]);
    let (st, _, pr) = c.call("GET", "/repos/me/app/pulls/1", TOKEN, Some(&tag), None);
    assert_eq!(st, 200, "the base moved: not a 304");
    assert_eq!(pr["mergeable_state"].as_str(), Some("behind"));

    // A merge naming a head that is no longer the head is refused; the right one squashes.
    let stale =
        json!({"sha": "0000000000000000000000000000000000000000", "merge_method": "squash"});
    let (st, _, body) = c.call(
        "PUT",
        "/repos/me/app/pulls/1/merge",
        TOKEN,
        None,
        Some(stale),
    );
    assert_eq!(st, 409, "{body}");
    let good = json!({"sha": head, "merge_method": "squash"});
    let (st, _, body) = c.call(
        "PUT",
        "/repos/me/app/pulls/1/merge",
        TOKEN,
        None,
        Some(good),
    );
    assert_eq!((st, body["merged"].as_bool()), (200, Some(true)), "{body}");
    let main = git(&bare, &["rev-parse", "main"]);
    assert_eq!(body["sha"].as_str(), Some(main.as_str()));
    assert_eq!(
        git(&bare, &["rev-list", "--count", "--first-parent", "main"]),
        "3"
    );
    assert_eq!(git(&bare, &["show", "main:b.txt"]), "two");
    assert_eq!(git(&bare, &["show", "main:c.txt"]), "elsewhere");
    let (_, _, pr) = c.get("/repos/me/app/pulls/1");
    assert_eq!(
        (pr["state"].as_str(), pr["merged"].as_bool()),
        (Some("closed"), Some(true))
    );
    assert_eq!(pr["merged_by"]["login"].as_str(), Some("braids-bot"));
    // The branch deleted; deleting it again is GitHub's 422.
    assert_eq!(
        c.call(
            "DELETE",
            "/repos/me/app/git/refs/heads/braids/app-1",
            TOKEN,
            None,
            None
        )
        .0,
        204
    );
    assert_eq!(
        c.call(
            "DELETE",
            "/repos/me/app/git/refs/heads/braids/app-1",
            TOKEN,
            None,
            None
        )
        .0,
        422
    );
}

#[test]
fn the_stand_in_github_conflicts_closes_rate_limits_and_goes_down() {
    let tmp = tempfile::tempdir().unwrap();
    let (bare, work) = world(tmp.path());
    let gh = GitHub::start(TOKEN, "braids-bot");
    gh.repo("me/app", &bare);
    let c = Client::new(gh.api());
    push_branch(&work, "braids/app-2", "a.txt", "mine\n");
    let open = json!({"title": "app-2", "head": "braids/app-2", "base": "main"});
    assert_eq!(
        c.call("POST", "/repos/me/app/pulls", TOKEN, None, Some(open))
            .0,
        201
    );
    // Another clone changes the same line on main: a conflict, and no merge.
    push_branch(&work, "theirs", "a.txt", "theirs\n");
    git(&work, &["push", "-q", "origin", "theirs:main"]);
    let (_, _, pr) = c.get("/repos/me/app/pulls/1");
    assert_eq!(
        (pr["mergeable"].as_bool(), pr["mergeable_state"].as_str()),
        (Some(false), Some("dirty"))
    );
    let merge = json!({"merge_method": "merge"});
    assert_eq!(
        c.call(
            "PUT",
            "/repos/me/app/pulls/1/merge",
            TOKEN,
            None,
            Some(merge)
        )
        .0,
        405
    );
    // A person closes it.
    gh.close_by("me/app", 1, "bo");
    let (_, _, pr) = c.get("/repos/me/app/pulls/1");
    assert_eq!(
        (pr["state"].as_str(), pr["merged"].as_bool()),
        (Some("closed"), Some(false))
    );
    let (_, _, issue) = c.get("/repos/me/app/issues/1");
    assert_eq!(issue["closed_by"]["login"].as_str(), Some("bo"));
    // The rate limit spent: 403 with the headers saying when it resets.
    gh.set_remaining(0);
    let (st, _, body) = c.get("/repos/me/app/pulls/1");
    assert_eq!(st, 403);
    assert!(
        body["message"].as_str().unwrap().contains("rate limit"),
        "{body}"
    );
    gh.set_remaining(10);
    gh.set_down(true);
    assert_eq!(c.get("/repos/me/app/pulls/1").0, 503);
    gh.set_down(false);
    assert_eq!(c.get("/repos/me/app/pulls/1").0, 200);
}

#[test]
fn a_person_merging_on_the_stand_in_makes_a_merge_commit_and_rebase_replays_each_commit() {
    let tmp = tempfile::tempdir().unwrap();
    let (bare, work) = world(tmp.path());
    let gh = GitHub::start(TOKEN, "braids-bot");
    gh.repo("me/app", &bare);
    let c = Client::new(gh.api());
    push_branch(&work, "one", "x.txt", "x\n");
    push_branch(&work, "two", "y.txt", "y\n");
    std::fs::write(work.join("z.txt"), "z\n").unwrap();
    git(&work, &["add", "."]);
    git(&work, &["commit", "-qm", "second on two"]);
    git(&work, &["push", "-q", "-f", "origin", "two"]);
    for head in ["one", "two"] {
        let open = json!({"title": head, "head": head, "base": "main"});
        assert_eq!(
            c.call("POST", "/repos/me/app/pulls", TOKEN, None, Some(open))
                .0,
            201
        );
    }
    gh.merge_by("me/app", 1, "ana").unwrap();
    assert_eq!(
        git(
            &bare,
            &["rev-list", "--count", "--parents", "-1", "--merges", "main"]
        ),
        "1"
    );
    let (_, _, pr) = c.get("/repos/me/app/pulls/1");
    assert_eq!(pr["merged_by"]["login"].as_str(), Some("ana"));
    let rebase = json!({"merge_method": "rebase"});
    let (st, _, body) = c.call(
        "PUT",
        "/repos/me/app/pulls/2/merge",
        TOKEN,
        None,
        Some(rebase),
    );
    assert_eq!(st, 200, "{body}");
    // Both of two's commits, replayed one by one on top of the merge, no merge commit added.
    assert_eq!(
        git(&bare, &["log", "-2", "--format=%s", "main"]),
        "second on two\nchange y.txt"
    );
    assert_eq!(
        git(&bare, &["rev-list", "--count", "--merges", "main"]),
        "1"
    );
    for f in ["x.txt", "y.txt", "z.txt"] {
        git(&bare, &["cat-file", "-e", &format!("main:{f}")]);
    }
}
