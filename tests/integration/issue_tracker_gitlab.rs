//! A GitLab project's issues as the project's beads (`Tracker: gitlab`), against the stand-in
//! GitLab: the same life as on GitHub, in GitLab's terms (iids, label names, assignee ids,
//! notes among system notes, Developer access for `/approve`, `Closes #n` on a merge).

use std::path::PathBuf;

use crate::issue_tracker::{stories, tick_and_wait, upstream_files, AGENT};
use crate::support::forge_gitlab::GitLab;
use crate::support::{Install, Sandbox};

const TOKEN: &str = "glpat-issues";
const PROJECT: &str = "group/sub/app";

fn world(fields: &[(&str, &str)]) -> (Sandbox, PathBuf, GitLab) {
    let sb = Install::new().build();
    let agent = sb.script("bin/agent", AGENT);
    let gl = GitLab::start(TOKEN, "braids-bot");
    let token = sb.home().join("gl-token");
    std::fs::write(&token, format!("{TOKEN}\n")).unwrap();
    sb.config(&format!(
        "[worker]\nexecutor = [{:?}, \"{{deliverable}}\", \"{{prompt_file}}\"]\nretries = 1\n\n[forges.gl]\nkind = \"gitlab\"\napi = \"{}\"\ntoken_file = {:?}\n",
        agent.display().to_string(),
        gl.api(),
        token.display().to_string()
    ));
    let mut p = sb
        .new_project("app")
        .field("Tracker", "gitlab")
        .field("Forge", &format!("gl {PROJECT}"))
        .no_iteration();
    for (k, v) in fields {
        p = p.field(k, v);
    }
    let _ = p.create();
    let bare = sb.bare_upstream("app");
    gl.project(PROJECT, &bare);
    (sb, bare, gl)
}

#[test]
fn c13_1_gitlab_labelled_issues_land_and_close_and_a_question_is_answered_by_a_note() {
    let (sb, bare, gl) = world(&[]);
    let ask = gl.issue(
        PROJECT,
        "ana",
        "Ask the person about the format",
        "",
        &["braids"],
    );
    let plain = gl.issue(PROJECT, "ana", "Add the login page", "", &["braids", "ui"]);
    let other = gl.issue(PROJECT, "ana", "Not for agents", "", &["bug"]);
    stories(&sb, &format!("- #{ask}: Format\n- #{plain}: Login\n"));
    // The question is a note mentioning the author; the issue is labelled blocked.
    assert_eq!(tick_and_wait(&sb), vec![format!("issue-{ask}")]);
    let now = gl.issue_now(PROJECT, ask);
    assert!(
        now.has("braids:blocked") && !now.has("braids:in-progress"),
        "{now:?}"
    );
    assert!(
        now.notes
            .last()
            .unwrap()
            .1
            .starts_with("@ana The agent working on this issue asks:"),
        "{now:?}"
    );
    // The next story goes on meanwhile, and is closed with the commit named.
    assert_eq!(tick_and_wait(&sb), vec![format!("issue-{plain}")]);
    let done = gl.issue_now(PROJECT, plain);
    assert!(!done.open && !done.has("braids:in-progress"), "{done:?}");
    assert_eq!(done.assignees, vec!["braids-bot".to_string()]);
    assert!(
        done.notes.iter().any(|n| n.1.starts_with("Landed in ")),
        "{done:?}"
    );
    // A Reporter's note is no answer; a Developer's is, and the next attempt lands it.
    gl.set_access("eve", 20);
    gl.note_by(PROJECT, ask, "eve", "XML.");
    assert!(tick_and_wait(&sb).is_empty());
    assert!(gl.issue_now(PROJECT, ask).has("braids:blocked"));
    gl.set_access("bob", 30);
    gl.note_by(PROJECT, ask, "bob", "JSON.");
    assert!(tick_and_wait(&sb).is_empty());
    assert!(!gl.issue_now(PROJECT, ask).has("braids:blocked"));
    assert_eq!(tick_and_wait(&sb), vec![format!("issue-{ask}")]);
    let prompt = std::fs::read_to_string(sb.home().join(format!("prompt-issue-{ask}.md"))).unwrap();
    assert!(prompt.contains("Answer: JSON."), "{prompt}");
    assert!(!gl.issue_now(PROJECT, ask).open);
    let files = upstream_files(&sb, &bare);
    assert!(
        files.contains(&format!("work-issue-{ask}.txt"))
            && files.contains(&format!("work-issue-{plain}.txt"))
    );
    // The unlabelled issue was never asked about.
    let untouched = gl.issue_now(PROJECT, other);
    assert!(untouched.open && untouched.notes.is_empty() && untouched.assignees.is_empty());
    assert!(!gl
        .requests()
        .iter()
        .any(|r| r.path.contains(&format!("/issues/{other}"))));
}

#[test]
fn c13_3_gitlab_a_plan_needs_a_developer_and_the_merge_request_closes_the_issue() {
    let (sb, bare, gl) = world(&[
        ("Autonomy", "ask-first"),
        ("Landing", "pull-request"),
        ("Merge", "auto"),
    ]);
    gl.set_access("rita", 20);
    gl.set_access("dev", 30);
    let n = gl.issue(PROJECT, "ana", "Add the login page", "", &["braids"]);
    stories(&sb, &format!("- #{n}: Login\n"));
    assert_eq!(tick_and_wait(&sb).len(), 1);
    assert!(gl.issue_now(PROJECT, n).has("braids:blocked"));
    // A Reporter may not approve; a Developer may.
    gl.note_by(PROJECT, n, "rita", "/approve");
    assert!(tick_and_wait(&sb).is_empty());
    let now = gl.issue_now(PROJECT, n);
    assert!(now.has("braids:blocked"), "{now:?}");
    assert!(
        now.notes
            .last()
            .unwrap()
            .1
            .starts_with("@rita only people with write access"),
        "{now:?}"
    );
    gl.note_by(PROJECT, n, "dev", "/approve");
    assert!(tick_and_wait(&sb).is_empty());
    assert!(!gl.issue_now(PROJECT, n).has("braids:blocked"));
    // The work opens a merge request naming the issue; its merge closes it.
    assert_eq!(tick_and_wait(&sb), vec![format!("issue-{n}")]);
    let mrs = gl.merge_requests(PROJECT);
    assert_eq!(mrs.len(), 1, "{mrs:?}");
    assert!(gl.issue_now(PROJECT, n).open);
    let head = gl.head_of(PROJECT, mrs[0].0);
    gl.job(PROJECT, &head, "test", "success", "ok");
    let mut runs = 0;
    while gl.issue_now(PROJECT, n).open {
        runs += 1;
        assert!(runs <= 3, "{:?}", gl.merge_requests(PROJECT));
        tick_and_wait(&sb);
    }
    let now = gl.issue_now(PROJECT, n);
    assert_eq!(now.closed_by.as_deref(), Some("braids-bot"));
    assert!(!now.has("braids:in-progress"), "{now:?}");
    assert!(upstream_files(&sb, &bare).contains(&format!("work-issue-{n}.txt")));
}

#[test]
fn c13_2_gitlab_a_blocking_link_is_respected_and_a_related_one_is_not() {
    let (sb, _bare, gl) = world(&[]);
    let later = gl.issue(PROJECT, "ana", "Second", "", &["braids"]);
    let first = gl.issue(PROJECT, "ana", "First", "", &["braids"]);
    let third = gl.issue(PROJECT, "ana", "Third", "", &["braids"]);
    let related = gl.issue(PROJECT, "ana", "Fourth", "", &["braids"]);
    let outside = gl.issue(PROJECT, "ana", "Someone else's", "", &[]);
    // Both directions GitLab offers: this one is blocked by that one, and that one blocks this.
    gl.link_issues(PROJECT, later, "is_blocked_by", first, "ana");
    gl.link_issues(PROJECT, outside, "blocks", third, "ana");
    gl.link_issues(PROJECT, related, "relates_to", outside, "ana");
    stories(
        &sb,
        &format!(
            "- #{later}: Second\n- #{first}: First\n- #{third}: Third\n- #{related}: Fourth\n"
        ),
    );
    // No listing says what blocks an issue: the read before a claim finds #later's link.
    assert_eq!(tick_and_wait(&sb), vec![format!("issue-{first}")]);
    assert!(gl.issue_now(PROJECT, later).assignees.is_empty());
    let listed = sb.ok(&["beads", "app"]);
    assert!(listed.contains(&format!("issue-{later}")), "{listed}");
    assert_eq!(tick_and_wait(&sb), vec![format!("issue-{later}")]);
    // #third waits for an unlabelled issue braids never works on; a related one does not.
    assert_eq!(tick_and_wait(&sb), vec![format!("issue-{related}")]);
    assert!(
        tick_and_wait(&sb).is_empty(),
        "#{third} waits for #{outside}"
    );
    let waiting = gl.issue_now(PROJECT, third);
    assert!(waiting.open && waiting.assignees.is_empty(), "{waiting:?}");
    assert!(gl.issue_now(PROJECT, outside).notes.is_empty());
    gl.close_issue(PROJECT, outside, "ana");
    assert_eq!(tick_and_wait(&sb), vec![format!("issue-{third}")]);
    for n in [first, later, third, related] {
        assert!(!gl.issue_now(PROJECT, n).open, "#{n}");
    }
    let log = sb.git(&sb.project("app"), &["log", "--format=%s", "origin/main"]);
    assert!(log.starts_with("Complete iteration 001"), "{log}");
}
