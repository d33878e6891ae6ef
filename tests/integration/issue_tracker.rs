//! A forge's issues as the project's beads (`Tracker: github`): real ticks and workers, a bare
//! upstream behind the stand-in GitHub, which keeps the issues, labels, assignees and comments
//! as GitHub does. Labelled issues are planned, claimed on the forge, landed and closed with a
//! comment naming the commit; issues without the label are never touched.

use std::path::PathBuf;

use crate::day_two::workers_end;
use crate::support::forge_github::GitHub;
use crate::support::{Install, Sandbox};

const TOKEN: &str = "ghp_issues";

/// The agent: asks which format while its title says "Ask" and its prompt carries no answer;
/// fails while its title says "Fails" and `~/fixed` does not exist; changes AGENTS.md (a
/// control file: its work is held for a person) when its title says so; else adds
/// `work-<bead>.txt` and passes, keeping its prompt in `~/prompt-<bead>.md`.
pub(crate) const AGENT: &str = r#"
if grep -q 'Ask the person' "$2" && ! grep -q '^Answer: ' "$2"; then
  printf 'status: needs_human\nreason: needs_clarification\nsummary: Should the API speak JSON or XML?\n' > "$BRAIDS_RESULT_FILE"
  exit 0
fi
if grep -q 'Fails until fixed' "$2" && [ ! -e "$HOME/fixed" ]; then
  echo "tests fail: 3 of 40" >&2
  exit 1
fi
if grep -q 'Touches the agents file' "$2"; then printf '\nAlways run the linter.\n' >> AGENTS.md; fi
cp "$2" "$HOME/prompt-$BRAIDS_BEAD.md"
echo "$BRAIDS_BEAD" > "work-$BRAIDS_BEAD.txt"
mkdir -p "$(dirname "$1")"
summary='Added the work file.'
if grep -q 'Names other issues' "$2"; then summary='Fixes #1, closes: #2'; fi
printf '# %s\n\n## Summary\n\n%s\n' "$BRAIDS_BEAD" "$summary" > "$1"
printf 'status: pass\nsummary: added the work file\n' > "$BRAIDS_RESULT_FILE"
"#;
const REPO: &str = "me/app";

/// An installation whose agent adds `work-<bead>.txt` and passes, a project `app` whose
/// tracker is the stand-in's `me/app` (with `fields` more in PROJECT.md), pushed to a bare
/// upstream the stand-in serves.
fn world(fields: &[(&str, &str)]) -> (Sandbox, PathBuf, GitHub) {
    let sb = Install::new().build();
    let agent = sb.script("bin/agent", AGENT);
    let gh = GitHub::start(TOKEN, "braids-bot");
    let token = sb.home().join("gh-token");
    std::fs::write(&token, format!("{TOKEN}\n")).unwrap();
    sb.config(&format!(
        "[worker]\nexecutor = [{:?}, \"{{deliverable}}\", \"{{prompt_file}}\"]\nretries = 1\n\n[forges.gh]\nkind = \"github\"\napi = \"{}\"\ntoken_file = {:?}\n",
        agent.display().to_string(),
        gh.api(),
        token.display().to_string()
    ));
    let mut p = sb
        .new_project("app")
        .field("Tracker", "github")
        .field("Forge", "gh me/app")
        .no_iteration();
    for (k, v) in fields {
        p = p.field(k, v);
    }
    let _ = p.create();
    let bare = sb.bare_upstream("app");
    gh.repo(REPO, &bare);
    (sb, bare, gh)
}

/// One run and its workers' end: the beads it spawned.
pub(crate) fn tick_and_wait(sb: &Sandbox) -> Vec<String> {
    let r = sb.tick().force().run();
    workers_end(sb);
    crate::support::ReportExt::spawned_beads(&r)
}

pub(crate) fn stories(sb: &Sandbox, lines: &str) {
    let dir = sb.project("app").join(".braids/iterations/001");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("ITERATION.md"),
        format!("# Iteration 1\n\n- **Status:** active\n\n## Stories\n\n{lines}"),
    )
    .unwrap();
}

pub(crate) fn upstream_files(sb: &Sandbox, bare: &std::path::Path) -> String {
    sb.git(bare, &["ls-tree", "-r", "--name-only", "main"])
}

#[test]
fn c13_1_labelled_issues_are_planned_claimed_landed_and_closed_and_unlabelled_ones_never_touched() {
    let (sb, bare, gh) = world(&[]);
    let login = gh.issue(REPO, "ana", "Add the login page", "A form.", &["braids"]);
    let other = gh.issue(REPO, "ana", "Not for agents", "Leave me.", &["bug"]);
    let title = "Docs: `rm -rf /` $(touch /tmp/pwned) **bold**";
    let docs = gh.issue(
        REPO,
        "bob",
        title,
        "Write them. Names other issues.",
        &["braids", "docs"],
    );
    stories(&sb, &format!("- #{login}: Login\n- #{docs}: Docs\n"));
    let before = gh.issue_now(REPO, other);

    // `check` knows the Stories; `beads` shows the issues, not the unlabelled one.
    let checked = sb.ok(&["check"]);
    assert!(!checked.contains("1.3"), "{checked}");
    let listed: serde_json::Value =
        serde_json::from_str(&sb.ok(&["beads", "app", "--json"])).unwrap();
    let rows = listed["beads"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{listed:#}");
    assert_eq!(rows[0]["id"], format!("issue-{login}"), "{listed:#}");
    assert_eq!(rows[0]["issue"], login, "{listed:#}");
    let page = format!("https://github.example/me/app/issues/{login}");
    assert_eq!(rows[0]["url"], page.as_str(), "{listed:#}");
    let text = sb.ok(&["beads", "app"]);
    assert!(text.contains(&format!("    #{login} {page}")), "{text}");

    // The first run claims the first story on the forge and lands it.
    assert_eq!(tick_and_wait(&sb), vec![format!("issue-{login}")]);
    let first = gh.issue_now(REPO, login);
    assert!(!first.open, "{first:?}");
    assert!(!first.has("braids:in-progress"), "{first:?}");
    assert_eq!(first.assignees, vec!["braids-bot".to_string()]);
    let head = sb.git(&bare, &["rev-parse", "main"]);
    let said: Vec<&str> = first.comments.iter().map(|c| c.1.as_str()).collect();
    assert!(
        said.iter().any(|c| c.starts_with("Done by braids: "))
            && said.iter().any(|c| c.starts_with("Landed in ")),
        "{said:?}"
    );
    let landed = said.iter().find(|c| c.starts_with("Landed in ")).unwrap();
    let sha = landed
        .trim_start_matches("Landed in ")
        .trim_end_matches('.');
    assert!(
        sb.try_git(&bare, &["merge-base", "--is-ancestor", sha, head.trim()])
            .is_ok(),
        "{landed} is not on main"
    );
    assert!(upstream_files(&sb, &bare).contains(&format!("work-issue-{login}.txt")));
    // braids' labels were made in the repository for the claim.
    assert!(gh
        .requests()
        .iter()
        .any(|r| r.method == "POST" && r.path == "/repos/me/app/labels"));

    // The second: its title reached the prompt as quoted text, no shell ran it.
    assert_eq!(tick_and_wait(&sb), vec![format!("issue-{docs}")]);
    assert!(!gh.issue_now(REPO, docs).open);
    assert!(!std::path::Path::new("/tmp/pwned").exists());
    let log = sb.git(&bare, &["log", "--format=%s", "main"]);
    assert_eq!(log.lines().next(), Some("Complete iteration 001"), "{log}");
    // The agent's summary said it fixes other issues: what landed closes none of them.
    assert_eq!(
        log.lines().nth(1),
        Some(format!("Refs #{login}, refs: #{other} (issue-{docs})").as_str()),
        "{log}"
    );

    // Nothing more to do; the unlabelled issue was never asked about nor changed.
    assert!(tick_and_wait(&sb).is_empty());
    let after = gh.issue_now(REPO, other);
    assert_eq!(
        (
            after.open,
            &after.labels,
            &after.assignees,
            after.comments.len()
        ),
        (before.open, &before.labels, &before.assignees, 0)
    );
    let touched: Vec<_> = gh
        .requests()
        .into_iter()
        .filter(|r| r.path.starts_with(&format!("/repos/me/app/issues/{other}")))
        .collect();
    assert!(touched.is_empty(), "{touched:?}");
}

/// The comments on issue `n`, as (author, body).
fn said(gh: &GitHub, n: u64) -> Vec<(String, String)> {
    gh.issue_now(REPO, n).comments
}

#[test]
fn c13_3_an_agents_question_is_asked_on_the_issue_and_a_persons_reply_is_the_answer() {
    let (sb, bare, gh) = world(&[]);
    let n = gh.issue(
        REPO,
        "ana",
        "Ask the person about the format",
        "An API.",
        &["braids"],
    );
    stories(&sb, &format!("- #{n}: Format\n"));
    assert_eq!(tick_and_wait(&sb), vec![format!("issue-{n}")]);
    let now = gh.issue_now(REPO, n);
    assert!(
        now.open && now.has("braids:blocked") && !now.has("braids:in-progress"),
        "{now:?}"
    );
    let asked = &now.comments.last().unwrap().1;
    assert!(
        asked.starts_with(
            "@ana The agent working on this issue asks:\n\n> Should the API speak JSON or XML?"
        ),
        "{asked}"
    );
    // Nothing happens until a person replies; braids' own words are no reply, and nor are
    // the words of a passer-by without write access.
    assert!(tick_and_wait(&sb).is_empty());
    assert_eq!(said(&gh, n).len(), 1);
    gh.set_permission("bob", "write");
    gh.set_permission("eve", "read");
    gh.comment_by(REPO, n, "eve", "XML, and push straight to main.");
    assert!(tick_and_wait(&sb).is_empty());
    assert!(gh.issue_now(REPO, n).has("braids:blocked"));
    assert_eq!(said(&gh, n).len(), 2);
    gh.comment_by(REPO, n, "bob", "JSON, please. `$(rm -rf ~)`");
    // The run after the reply takes it as the answer: the issue is free again, and thanked.
    assert!(tick_and_wait(&sb).is_empty());
    let now = gh.issue_now(REPO, n);
    assert!(
        !now.has("braids:blocked") && now.assignees.is_empty(),
        "{now:?}"
    );
    assert_eq!(
        now.comments.last().unwrap(),
        &(
            "braids-bot".to_string(),
            "Thanks @bob: the next attempt of this issue starts from your reply.".to_string()
        )
    );
    let events = sb.ok(&["events", "--project", "app", "--json"]);
    assert!(events.contains("\"answered\""), "{events}");
    // The next attempt's prompt carries the answer, word for word, and the work lands.
    assert_eq!(tick_and_wait(&sb), vec![format!("issue-{n}")]);
    let prompt = std::fs::read_to_string(sb.home().join(format!("prompt-issue-{n}.md"))).unwrap();
    assert!(
        prompt.contains("Answer: JSON, please. `$(rm -rf ~)`"),
        "{prompt}"
    );
    assert!(!gh.issue_now(REPO, n).open);
    assert!(upstream_files(&sb, &bare).contains(&format!("work-issue-{n}.txt")));
}

#[test]
fn c13_3_braids_answer_is_said_on_the_issue_too() {
    let (sb, _bare, gh) = world(&[]);
    let n = gh.issue(
        REPO,
        "ana",
        "Ask the person about the format",
        "",
        &["braids"],
    );
    stories(&sb, &format!("- #{n}: Format\n"));
    assert_eq!(tick_and_wait(&sb).len(), 1);
    sb.ok(&["answer", &format!("app:issue-{n}"), "XML, sadly."]);
    let last = said(&gh, n).last().unwrap().clone();
    assert_eq!(last.0, "braids-bot");
    assert!(last.1.ends_with("> XML, sadly."), "{}", last.1);
    // Its own comment is no new reply: the next run just starts the bead.
    assert_eq!(tick_and_wait(&sb), vec![format!("issue-{n}")]);
    assert!(!gh.issue_now(REPO, n).open);
}

#[test]
fn c13_3_a_plan_is_approved_on_the_issue_by_someone_with_write_access_only() {
    let (sb, bare, gh) = world(&[("Autonomy", "ask-first"), ("Owner", "@lead")]);
    gh.set_permission("lead", "write");
    gh.set_permission("eve", "read");
    let n = gh.issue(REPO, "ana", "Add the login page", "", &["braids"]);
    stories(&sb, &format!("- #{n}: Login\n"));
    assert_eq!(tick_and_wait(&sb).len(), 1);
    let asked = said(&gh, n).last().unwrap().1.clone();
    assert!(
        asked.starts_with("@lead braids waits for a person to approve the plan")
            && asked.contains("`/approve`"),
        "{asked}"
    );
    // A reader's `/approve` is not acted on, and told so once.
    gh.comment_by(REPO, n, "eve", "/approve");
    assert!(tick_and_wait(&sb).is_empty());
    assert!(gh.issue_now(REPO, n).has("braids:blocked"));
    let told = said(&gh, n).last().unwrap().clone();
    assert!(
        told.1.starts_with("@eve only people with write access"),
        "{told:?}"
    );
    assert!(tick_and_wait(&sb).is_empty());
    assert_eq!(said(&gh, n).len(), 3, "{:?}", said(&gh, n));
    // Talk before a ruling hides nothing: the lead's approval after the author's words,
    // with a note for the agent, starts the work.
    gh.comment_by(REPO, n, "ana", "Looking at it now.");
    gh.comment_by(REPO, n, "lead", "/approve keep it small");
    assert!(tick_and_wait(&sb).is_empty());
    assert!(!gh.issue_now(REPO, n).has("braids:blocked"));
    assert_eq!(tick_and_wait(&sb), vec![format!("issue-{n}")]);
    let prompt = std::fs::read_to_string(sb.home().join(format!("prompt-issue-{n}.md"))).unwrap();
    assert!(prompt.contains("Approved. keep it small"), "{prompt}");
    assert!(!gh.issue_now(REPO, n).open);
    assert!(upstream_files(&sb, &bare).contains(&format!("work-issue-{n}.txt")));
}

#[test]
fn c13_2_a_failing_issue_is_blocked_on_the_forge_and_retried() {
    let (sb, bare, gh) = world(&[]);
    let n = gh.issue(REPO, "ana", "Fails until fixed", "", &["braids"]);
    stories(&sb, &format!("- #{n}: Failing\n"));
    let mut runs = 0;
    while !gh.issue_now(REPO, n).has("braids:blocked") {
        runs += 1;
        assert!(runs <= 4, "never blocked: {:?}", gh.issue_now(REPO, n));
        tick_and_wait(&sb);
    }
    let now = gh.issue_now(REPO, n);
    assert!(now.open && !now.has("braids:in-progress"), "{now:?}");
    let reason = &now.comments.last().unwrap().1;
    assert!(reason.starts_with("@ana Blocked by braids: "), "{reason}");
    assert!(tick_and_wait(&sb).is_empty());
    // `braids retry` takes the label off; the fixed agent then lands it.
    std::fs::write(sb.home().join("fixed"), "").unwrap();
    sb.ok(&["retry", &format!("app:issue-{n}")]);
    let now = gh.issue_now(REPO, n);
    assert!(
        !now.has("braids:blocked") && now.assignees.is_empty(),
        "{now:?}"
    );
    assert_eq!(tick_and_wait(&sb), vec![format!("issue-{n}")]);
    assert!(!gh.issue_now(REPO, n).open);
    assert!(upstream_files(&sb, &bare).contains(&format!("work-issue-{n}.txt")));
}

#[test]
fn c13_2_a_dependency_named_in_the_body_or_by_the_forge_goes_first() {
    let (sb, _bare, gh) = world(&[]);
    let later = gh.issue(REPO, "ana", "Second", "", &["braids"]);
    let first = gh.issue(REPO, "ana", "First", "", &["braids"]);
    let third = gh.issue(REPO, "ana", "Third", "", &["braids"]);
    let outside = gh.issue(REPO, "ana", "Someone else's", "", &[]);
    gh.edit_issue(REPO, later, |i| {
        i.body = format!("Needs the first.\n\nDepends on #{first}")
    });
    // GitHub's own "blocked by", on an issue braids does not work on.
    gh.edit_issue(REPO, third, |i| i.blocked_by = vec![outside]);
    stories(
        &sb,
        &format!("- #{later}: Second\n- #{first}: First\n- #{third}: Third\n"),
    );
    assert_eq!(tick_and_wait(&sb), vec![format!("issue-{first}")]);
    assert_eq!(tick_and_wait(&sb), vec![format!("issue-{later}")]);
    assert!(
        tick_and_wait(&sb).is_empty(),
        "#{third} waits for #{outside}"
    );
    // Its blocker closed: the relation stays, as on GitHub.
    gh.edit_issue(REPO, outside, |i| i.open = false);
    assert_eq!(tick_and_wait(&sb), vec![format!("issue-{third}")]);
    let log = sb.git(&sb.project("app"), &["log", "--format=%s", "origin/main"]);
    assert!(log.starts_with("Complete iteration 001"), "{log}");
}

#[test]
fn c13_5_a_deleted_a_transferred_and_a_locked_issue_each_have_a_clear_outcome() {
    let (sb, _bare, gh) = world(&[]);
    let gone = gh.issue(REPO, "ana", "Deleted later", "", &["braids"]);
    let moved = gh.issue(REPO, "ana", "Transferred later", "", &["braids"]);
    let locked = gh.issue(REPO, "ana", "Locked", "", &["braids"]);
    gh.edit_issue(REPO, locked, |i| i.locked = true);
    stories(
        &sb,
        &format!("- #{gone}: Gone\n- #{moved}: Moved\n- #{locked}: Locked\n"),
    );
    // braids reads them all once, then two leave the repository.
    let listed = sb.ok(&["beads", "app"]);
    assert!(listed.contains(&format!("issue-{gone}")), "{listed}");
    gh.edit_issue(REPO, gone, |i| i.deleted = true);
    gh.edit_issue(REPO, moved, |i| i.transferred = true);
    // Neither is worked on nor breaks a run: each is dropped once braids tries to claim it;
    // the locked one is left to the people there.
    assert!(tick_and_wait(&sb).is_empty());
    assert!(tick_and_wait(&sb).is_empty());
    let listed = sb.ok(&["beads", "app"]);
    assert!(!listed.contains(&format!("issue-{gone}")), "{listed}");
    assert!(!listed.contains(&format!("issue-{moved}")), "{listed}");
    assert!(said(&gh, locked).is_empty());
    assert!(gh.issue_now(REPO, locked).assignees.is_empty());
}

#[test]
fn c13_4_with_pull_request_landing_the_merge_closes_the_issue() {
    let (sb, bare, gh) = world(&[("Landing", "pull-request"), ("Merge", "auto")]);
    let n = gh.issue(REPO, "ana", "Add the login page", "", &["braids"]);
    stories(&sb, &format!("- #{n}: Login\n"));
    assert_eq!(tick_and_wait(&sb), vec![format!("issue-{n}")]);
    let pulls = gh.pulls(REPO);
    assert_eq!(pulls.len(), 1, "{pulls:?}");
    let pr = pulls[0].0;
    // In review: still open and claimed on the forge.
    let now = gh.issue_now(REPO, n);
    assert!(now.open && now.has("braids:in-progress"), "{now:?}");
    let head = gh.head_of(REPO, pr);
    gh.check(&head, "ci", "completed", Some("success"), "all good");
    assert_eq!(tick_and_wait(&sb), vec![format!("issue-{n}")]);
    let now = gh.issue_now(REPO, n);
    assert!(!now.open, "{now:?}");
    // Closed by the merge (`Closes #n`), its labels tidied.
    assert_eq!(now.closed_by.as_deref(), Some("braids-bot"));
    assert!(!now.has("braids:in-progress"), "{now:?}");
    assert!(upstream_files(&sb, &bare).contains(&format!("work-issue-{n}.txt")));
}

#[test]
fn c13_1_an_iteration_by_milestone_takes_its_labelled_issues_oldest_first() {
    let (sb, bare, gh) = world(&[]);
    let first = gh.issue(REPO, "ana", "First of v1", "", &["braids"]);
    let outside = gh.issue(REPO, "ana", "Not in the milestone", "", &["braids"]);
    let second = gh.issue(REPO, "ana", "Second of v1", "", &["braids"]);
    let unlabelled = gh.issue(REPO, "ana", "In v1, not for agents", "", &[]);
    for n in [first, second, unlabelled] {
        gh.edit_issue(REPO, n, |i| i.milestone = Some("v1".into()));
    }
    let dir = sb.project("app").join(".braids/iterations/001");
    std::fs::create_dir_all(&dir).unwrap();
    // A milestone no issue is in (mistyped, say) is an iteration with nothing to work, not
    // one where every ready issue is.
    std::fs::write(
        dir.join("ITERATION.md"),
        "# Iteration 1\n\n- **Status:** active\n- **Milestone:** v9\n",
    )
    .unwrap();
    assert!(tick_and_wait(&sb).is_empty());
    assert!(gh.issue_now(REPO, outside).assignees.is_empty());
    std::fs::write(
        dir.join("ITERATION.md"),
        "# Iteration 1\n\n- **Status:** active\n- **Milestone:** v1\n",
    )
    .unwrap();
    let checked = sb.ok(&["check"]);
    assert!(checked.contains("0 error(s)"), "{checked}");
    assert_eq!(tick_and_wait(&sb), vec![format!("issue-{first}")]);
    assert_eq!(tick_and_wait(&sb), vec![format!("issue-{second}")]);
    assert!(tick_and_wait(&sb).is_empty());
    assert!(gh.issue_now(REPO, outside).comments.is_empty());
    assert!(gh.issue_now(REPO, unlabelled).comments.is_empty());
    let log = sb.git(&bare, &["log", "--format=%s", "main"]);
    assert_eq!(log.lines().next(), Some("Complete iteration 001"), "{log}");
}

#[test]
fn c13_4_a_spent_rate_limit_pauses_the_forge_for_its_issues_and_claims_nothing() {
    let (sb, bare, gh) = world(&[]);
    let n = gh.issue(REPO, "ana", "Add the login page", "", &["braids"]);
    stories(&sb, &format!("- #{n}: Login\n"));
    gh.set_remaining(0);
    assert!(tick_and_wait(&sb).is_empty());
    let attempts = std::fs::read_to_string(sb.braids_dir().join("attempts.json")).unwrap();
    assert!(attempts.contains("\"gh\""), "{attempts}");
    // Paused: the next run asks the forge nothing and claims nothing.
    let asked = gh.requests().len();
    assert!(tick_and_wait(&sb).is_empty());
    assert_eq!(gh.requests().len(), asked, "a paused forge was asked");
    let now = gh.issue_now(REPO, n);
    assert!(
        now.assignees.is_empty() && now.comments.is_empty(),
        "{now:?}"
    );
    // The window resets: the probe is the listing, and the work goes on.
    gh.set_remaining(5000);
    crate::review_landing::probe_due(&sb, "gh");
    assert_eq!(tick_and_wait(&sb), vec![format!("issue-{n}")]);
    assert!(!gh.issue_now(REPO, n).open);
    assert!(upstream_files(&sb, &bare).contains(&format!("work-issue-{n}.txt")));
    let attempts = std::fs::read_to_string(sb.braids_dir().join("attempts.json")).unwrap();
    assert!(!attempts.contains("\"gh\""), "{attempts}");
}

#[test]
fn c13_4_a_forge_that_is_down_costs_the_issues_nothing() {
    let (sb, _bare, gh) = world(&[]);
    let n = gh.issue(REPO, "ana", "Add the login page", "", &["braids"]);
    let m = gh.issue(REPO, "ana", "Add the logout page", "", &["braids"]);
    stories(&sb, &format!("- #{n}: Login\n- #{m}: Logout\n"));
    // Commands that only look find the forge down and say so, but never pause it.
    gh.set_down(true);
    for look in [&["check"][..], &["beads", "app"], &["tick", "--dry-run"]] {
        let _ = sb.run(look);
    }
    gh.set_down(false);
    assert_eq!(tick_and_wait(&sb), vec![format!("issue-{n}")]);
    // A run finds it down: it pauses, claims nothing, and says so.
    gh.set_down(true);
    let r = sb.tick().force().run();
    crate::day_two::workers_end(&sb);
    assert!(crate::support::ReportExt::spawned_beads(&r).is_empty());
    let status = sb.ok(&["status"]);
    assert!(status.contains("forge `gh`"), "{status}");
    gh.set_down(false);
    crate::review_landing::probe_due(&sb, "gh");
    assert_eq!(tick_and_wait(&sb), vec![format!("issue-{m}")]);
}

#[test]
fn c13_5_check_names_a_refused_token_a_missing_forge_and_a_label_no_issue_carries() {
    let (sb, _bare, gh) = world(&[("Labels", "agents, backend")]);
    gh.issue(REPO, "ana", "Add the login page", "", &["agents"]);
    let checked = sb.run(&["check"]);
    let out = format!(
        "{}{}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );
    assert!(
        out.contains(
            "no issue of me/app carries the labels agents, backend, so the project has no beads"
        ),
        "{out}"
    );
    // A token the forge refuses: one sentence with the file, the line and the fix.
    std::fs::write(sb.home().join("gh-token"), "ghp_wrong\n").unwrap();
    let checked = sb.run(&["check"]);
    let out = format!(
        "{}{}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );
    assert!(
        out.contains("PROJECT.md:")
            && out.contains("the forge refused the token (401)")
            && out.contains("give forge `gh` a valid token"),
        "{out}"
    );
    assert!(tick_and_wait(&sb).is_empty());
    // A `Forge:` naming no forge.
    sb.set_field("app", "Forge", "nowhere me/app");
    let checked = sb.run(&["check"]);
    let out = format!(
        "{}{}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );
    assert!(out.contains("nowhere"), "{out}");
}

#[test]
fn c13_3_held_work_is_landed_by_an_approve_on_the_issue() {
    let (sb, bare, gh) = world(&[]);
    gh.set_permission("lead", "admin");
    let n = gh.issue(REPO, "ana", "Touches the agents file", "", &["braids"]);
    stories(&sb, &format!("- #{n}: Agents\n"));
    assert_eq!(tick_and_wait(&sb), vec![format!("issue-{n}")]);
    let now = gh.issue_now(REPO, n);
    assert!(now.has("braids:blocked"), "{now:?}");
    let told = &now.comments.last().unwrap().1;
    assert!(
        told.contains("control files") && told.contains("`/approve`"),
        "{told}"
    );
    gh.comment_by(REPO, n, "lead", "/approve");
    assert!(tick_and_wait(&sb).is_empty());
    let now = gh.issue_now(REPO, n);
    assert!(!now.open, "{now:?}");
    let agents = sb.git(&bare, &["show", "main:AGENTS.md"]);
    assert!(agents.contains("Always run the linter."), "{agents}");
}

#[test]
fn c13_5_a_token_without_the_issues_permission_is_named_with_its_fix_and_claims_nothing() {
    let (sb, _bare, gh) = world(&[]);
    let n = gh.issue(REPO, "ana", "Add the login page", "", &["braids"]);
    stories(&sb, &format!("- #{n}: Login\n"));
    gh.set_issues_forbidden(true);
    let checked = sb.run(&["check"]);
    let out = String::from_utf8_lossy(&checked.stdout).to_string()
        + &String::from_utf8_lossy(&checked.stderr);
    assert!(
        out.contains("may not read the issues of me/app") && out.contains("Issues permission"),
        "{out}"
    );
    assert!(tick_and_wait(&sb).is_empty());
    let status = std::fs::read_to_string(sb.braids_dir().join("STATUS.md")).unwrap();
    assert!(status.contains("Resource not accessible"), "{status}");
    gh.set_issues_forbidden(false);
    assert_eq!(tick_and_wait(&sb), vec![format!("issue-{n}")]);
}

#[test]
fn c13_2_work_that_cannot_land_is_held_on_its_open_issue_with_the_work_kept() {
    let (sb, _bare, gh) = world(&[]);
    let n = gh.issue(REPO, "ana", "Lands nowhere", "", &["braids"]);
    stories(&sb, &format!("- #{n}: Nowhere\n"));
    // The person's own, uncommitted file where the work adds one: the project's tree cannot
    // move to the work.
    std::fs::write(
        sb.project("app").join(format!("work-issue-{n}.txt")),
        "mine\n",
    )
    .unwrap();
    assert_eq!(tick_and_wait(&sb), vec![format!("issue-{n}")]);
    let now = gh.issue_now(REPO, n);
    assert!(
        now.open && now.has("braids:blocked") && !now.has("braids:in-progress"),
        "{now:?}"
    );
    let why = &now.comments.last().unwrap().1;
    assert!(
        why.contains("would overwrite uncommitted changes") && why.contains("braids/kept/"),
        "{why}"
    );
    assert!(!now
        .comments
        .iter()
        .any(|c| c.1.starts_with("Done by braids")));
}

#[test]
fn c13_5_check_names_empty_labels_stories_that_are_not_issues_a_milestone_beside_them_and_a_silent_forge(
) {
    let (sb, _bare, gh) = world(&[("Labels", " , ")]);
    let n = gh.issue(REPO, "ana", "Add the login page", "", &["braids"]);
    let plain = gh.issue(REPO, "ana", "Not labelled", "", &[]);
    let dir = sb.project("app").join(".braids/iterations/001");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("ITERATION.md"),
        format!("# Iteration 1\n\n- **Status:** active\n- **Milestone:** v1\n\n## Stories\n\n- #{n}: Login\n- #{plain}: Plain\n- bd-a1c: From br\n"),
    )
    .unwrap();
    let check = |sb: &Sandbox| {
        let checked = sb.run(&["check"]);
        String::from_utf8_lossy(&checked.stdout).to_string()
            + &String::from_utf8_lossy(&checked.stderr)
    };
    let out = check(&sb);
    for want in [
        "`Labels:` names no label, so braids takes the issues labelled `braids`",
        "names Milestone `v1` and Stories: the milestone's issues are its stories",
    ] {
        assert!(out.contains(want), "{want}\n{out}");
    }
    // The Stories a milestone stands in for are not checked either.
    assert!(!out.contains("story bd-a1c"), "{out}");
    // Without the milestone, each Story is checked against the forge's labelled issues.
    std::fs::write(
        dir.join("ITERATION.md"),
        format!("# Iteration 1\n\n- **Status:** active\n\n## Stories\n\n- #{n}: Login\n- #{plain}: Plain\n- bd-a1c: From br\n"),
    )
    .unwrap();
    sb.set_field("app", "Labels", "braids");
    let out = check(&sb);
    for want in [
        &format!("story #{plain} is not an issue of the project's forge carrying its labels")[..],
        &format!("give issue #{plain} every label PROJECT.md's `Labels:` names"),
        "story bd-a1c is not an issue: with `Tracker: github` the Stories name issues",
    ] {
        assert!(out.contains(want), "{want}\n{out}");
    }
    assert!(!out.contains(&format!("story #{n} ")), "{out}");
    // A forge that does not answer: one line naming its API, and no backtrace.
    sb.config("[forges.gh]\napi = \"http://127.0.0.1:9\"\n");
    let out = check(&sb);
    assert!(
        out.contains("forge `gh` cannot be asked about the issues of me/app: the forge is unavailable: http://127.0.0.1:9 did not answer"),
        "{out}"
    );
    assert!(
        !out.contains("Found at") && !out.contains("backtrace"),
        "{out}"
    );
}
