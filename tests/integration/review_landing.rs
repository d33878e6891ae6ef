//! Landing through review (`Landing: pull-request`) end to end: real ticks and workers, real
//! `br`, a bare upstream behind the stand-in GitHub, which merges on it as GitHub would. The
//! bead's work goes to a pull request, never straight to the base branch; the bead stays in
//! review, holding no worker, until its request is merged (by braids once its checks pass,
//! or by a person) or closed.

use std::path::PathBuf;

use crate::day_two::workers_end;
use crate::support::forge_github::GitHub;
use crate::support::{Install, ReportExt, Sandbox};

const TOKEN: &str = "ghp_review";

/// An installation whose agent adds `work-<bead>.txt` and passes; a project `app` with one
/// bead landing through pull requests on the stand-in (`merge`: `auto` or `person`), pushed to
/// a bare upstream the stand-in serves as `me/app`.
fn world(merge: &str) -> (Sandbox, String, PathBuf, GitHub) {
    let sb = Install::new().build();
    let agent = sb.script(
        "bin/agent",
        "echo \"$BRAIDS_BEAD\" > \"work-$BRAIDS_BEAD.txt\"\n# Told of a failing check: the fix, and the check's words kept to show what it read.\nif grep -q 'Check `ci`' \"$2\"; then grep '^> ' \"$2\" > fix.txt; echo 'Fixed what the check said.' > answer; fi\n# Told of a review: the words it answered, kept.\nif grep -q '^## From ' \"$2\"; then grep '^> ' \"$2\" > reviewed.txt; echo 'Did what the review asked.' > answer; fi\nmkdir -p \"$(dirname \"$1\")\"\nprintf '# %s\\n\\n## Summary\\n\\nAdded the work file. %s\\n' \"$BRAIDS_BEAD\" \"$(cat answer 2>/dev/null; rm -f answer)\" > \"$1\"\nprintf 'status: pass\\nsummary: added the work file\\n' > \"$BRAIDS_RESULT_FILE\"\n",
    );
    let gh = GitHub::start(TOKEN, "braids-bot");
    let token = sb.home().join("gh-token");
    std::fs::write(&token, format!("{TOKEN}\n")).unwrap();
    sb.config(&format!(
        "[worker]\nexecutor = [{:?}, \"{{deliverable}}\", \"{{prompt_file}}\"]\nretries = 1\n\n[forges.gh]\nkind = \"github\"\napi = \"{}\"\ntoken_file = {:?}\n",
        agent.display().to_string(),
        gh.api(),
        token.display().to_string()
    ));
    let app = sb
        .new_project("app")
        .br()
        .beads(1)
        .field("Landing", "pull-request")
        .field("Merge", merge)
        .field("Forge", "gh me/app")
        .create();
    let bare = sb.bare_upstream("app");
    gh.repo("me/app", &bare);
    (sb, app.beads[0].to_string(), bare, gh)
}

/// One run and its workers' end.
fn tick_and_wait(sb: &Sandbox) -> usize {
    let r = sb.tick().force().run();
    workers_end(sb);
    r.spawned_beads().len()
}

fn upstream_files(sb: &Sandbox, bare: &std::path::Path) -> String {
    sb.git(bare, &["ls-tree", "-r", "--name-only", "main"])
}

/// The first run opens the request: the work is on `braids/<bead>` and nowhere on `main`, the
/// bead in review.
fn opened(sb: &Sandbox, bead: &str, bare: &std::path::Path, gh: &GitHub) -> String {
    assert_eq!(tick_and_wait(sb), 1);
    let pulls = gh.pulls("me/app");
    assert_eq!(
        pulls,
        vec![(1, format!("braids/{bead}"), true)],
        "{}",
        sb.ok(&["logs", &format!("app:{bead}")])
    );
    assert_eq!(sb.br_status("app", bead), "in_progress");
    let work = format!("work-{bead}.txt");
    assert!(!upstream_files(sb, bare).contains(&work));
    let branch = sb.git(
        bare,
        &["ls-tree", "-r", "--name-only", &format!("braids/{bead}")],
    );
    assert!(branch.contains(&work), "{branch}");
    // The bead's state travels with the merge's own record, not in the request.
    assert!(!sb
        .git(
            bare,
            &["diff", "--name-only", &format!("main...braids/{bead}")]
        )
        .contains(".beads"));
    gh.head_of("me/app", 1)
}

#[test]
fn a_bead_is_opened_as_a_pull_request_and_merged_by_braids_once_its_checks_pass() {
    let (sb, bead, bare, gh) = world("auto");
    let head = opened(&sb, &bead, &bare, &gh);
    // Checks running: nothing to do, and no worker for it.
    gh.check(&head, "ci", "in_progress", None, "");
    assert_eq!(tick_and_wait(&sb), 0);
    assert_eq!(sb.br_status("app", &bead), "in_progress");
    // Shown as in review everywhere a person looks.
    let status = std::fs::read_to_string(sb.braids_dir().join("STATUS.md")).unwrap();
    assert!(
        status.contains(&format!("  - {bead}: pull request #1 https://github.example/me/app/pull/1 (#1's checks are running)")),
        "{status}"
    );
    let listed = sb.ok(&["beads", "app"]);
    assert!(
        listed.contains("in review") && listed.contains("pull request #1"),
        "{listed}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&sb.ok(&["beads", "app", "--json"])).unwrap();
    let review = &json["beads"][0]["review"];
    assert_eq!(review["number"], 1, "{json:#}");
    assert_eq!(review["branch"], format!("braids/{bead}"), "{json:#}");
    // The dashboard's pages: the project's requests, and the bead's own.
    let served = sb.serve();
    let home = served.get("/");
    assert!(
        home.body.contains(r#"<h3>In review</h3>"#)
            && home
                .body
                .contains(r#"<a href="https://github.example/me/app/pull/1">#1</a>"#)
            && home.body.contains("checks are running"),
        "{}",
        home.body
    );
    let page = served.get(&format!("/beads/app:{bead}"));
    assert!(
        page.body.contains("In review: ")
            && page.body.contains(&format!("<code>braids/{bead}</code>")),
        "{}",
        page.body
    );
    drop(served);
    // Green: the next run starts a worker, which merges the head it saw pass and closes.
    gh.check(&head, "ci", "completed", Some("success"), "all good");
    assert_eq!(tick_and_wait(&sb), 1);
    assert_eq!(
        sb.br_status("app", &bead),
        "closed",
        "{}",
        sb.ok(&["logs", &format!("app:{bead}")])
    );
    assert_eq!(gh.pulls("me/app")[0].2, false);
    assert!(upstream_files(&sb, &bare).contains(&format!("work-{bead}.txt")));
    // The branch is gone, and the close is recorded on the merged base and pushed.
    assert!(sb
        .try_git(
            &bare,
            &[
                "rev-parse",
                "--verify",
                &format!("refs/heads/braids/{bead}")
            ]
        )
        .is_err());
    let log = sb.git(&bare, &["log", "--format=%s", "main"]);
    assert!(
        log.lines()
            .any(|l| l == format!("braids: {bead} merged as #1")),
        "{log}"
    );
    // One bead, so its merge completed the iteration.
    assert_eq!(log.lines().next(), Some("Complete iteration 001"), "{log}");
    let events = sb.ok(&["events", "--project", "app", "--json"]);
    for kind in ["pr_opened", "pr_merged"] {
        assert!(events.contains(kind), "{kind} not in {events}");
    }
    // Nothing more is watched: the record is gone.
    assert!(!sb
        .braids_dir()
        .join("work/app")
        .join(&bead)
        .join("review.json")
        .exists());
    assert_eq!(tick_and_wait(&sb), 0);
}

#[test]
fn a_person_merging_the_pull_request_closes_its_bead_and_braids_never_merges_itself() {
    let (sb, bead, bare, gh) = world("person");
    let head = opened(&sb, &bead, &bare, &gh);
    gh.check(&head, "ci", "completed", Some("success"), "all good");
    // Green, but a person merges: nothing to do.
    assert_eq!(tick_and_wait(&sb), 0);
    assert_eq!(gh.pulls("me/app")[0].2, true);
    gh.merge_by("me/app", 1, "ana").unwrap();
    assert_eq!(tick_and_wait(&sb), 1);
    assert_eq!(sb.br_status("app", &bead), "closed");
    let events = sb.ok(&["events", "--project", "app", "--json"]);
    assert!(events.contains("\"merged_by\":\"ana\""), "{events}");
    assert!(upstream_files(&sb, &bare).contains(&format!("work-{bead}.txt")));
}

#[test]
fn a_pull_request_closed_unmerged_blocks_its_bead_naming_it_and_who_closed_it() {
    let (sb, bead, bare, gh) = world("auto");
    let _ = opened(&sb, &bead, &bare, &gh);
    gh.close_by("me/app", 1, "ana");
    assert_eq!(tick_and_wait(&sb), 1);
    assert_eq!(sb.br_status("app", &bead), "blocked");
    let shown = sb.ok(&["beads", "app", "--json"]);
    assert!(
        shown.contains("#1 was closed without a merge by ana"),
        "{shown}"
    );
    assert!(!upstream_files(&sb, &bare).contains(&format!("work-{bead}.txt")));
    // A person's retry starts the bead afresh: a new request, from the same branch name,
    // which braids' leftover branch gives way to under a lease.
    sb.ok(&["retry", &format!("app:{bead}")]);
    assert_eq!(tick_and_wait(&sb), 1);
    assert_eq!(
        gh.pulls("me/app"),
        vec![
            (1, format!("braids/{bead}"), false),
            (2, format!("braids/{bead}"), true)
        ],
        "{}",
        session_logs(&sb)
    );
    assert_eq!(sb.br_status("app", &bead), "in_progress");
}

#[test]
fn a_landing_field_braids_cannot_read_claims_nothing_rather_than_push_to_the_branch() {
    let (sb, bead, bare, _gh) = world("auto");
    let md = sb.project("app").join(".braids/PROJECT.md");
    let text = std::fs::read_to_string(&md).unwrap();
    std::fs::write(&md, text.replace("pull-request", "pul-request")).unwrap();
    let r = sb.tick().force().run();
    assert!(r.spawned_beads().is_empty(), "{r:#?}");
    assert_eq!(sb.br_status("app", &bead), "open");
    let status = std::fs::read_to_string(sb.braids_dir().join("STATUS.md")).unwrap();
    assert!(
        status.contains("no worker can start") && status.contains("pul-request"),
        "{status}"
    );
    assert!(!upstream_files(&sb, &bare).contains(&format!("work-{bead}.txt")));
}

#[test]
fn a_red_check_starts_an_attempt_told_its_words_whose_fix_is_pushed_to_the_same_request() {
    let (sb, bead, bare, gh) = world("auto");
    let head = opened(&sb, &bead, &bare, &gh);
    gh.check(
        &head,
        "ci",
        "completed",
        Some("failure"),
        "test_login failed: expected 200, got 500",
    );
    // The run starts an attempt at the request's head; its agent reads the check's words and
    // fixes; the fix goes to the same branch, and the request stays the one.
    assert_eq!(tick_and_wait(&sb), 1);
    assert_eq!(sb.br_status("app", &bead), "in_progress");
    let fixed = gh.head_of("me/app", 1);
    assert_ne!(fixed, head, "{}", session_logs(&sb));
    assert_eq!(gh.pulls("me/app").len(), 1);
    // On top of the head it answered: the request's history is kept, never rewritten.
    assert_eq!(
        sb.git(&bare, &["rev-parse", &format!("{fixed}^")]).trim(),
        head
    );
    let fix = sb.git(&bare, &["show", &format!("{fixed}:fix.txt")]);
    assert!(
        fix.contains("test_login failed: expected 200, got 500"),
        "{fix}"
    );
    let events = sb.ok(&["events", "--project", "app", "--json"]);
    assert!(events.contains("checks_failed"), "{events}");
    // The old head's failure is answered: no new attempt while the new head's checks run.
    gh.check(&fixed, "ci", "in_progress", None, "");
    assert_eq!(tick_and_wait(&sb), 0);
    gh.check(&fixed, "ci", "completed", Some("success"), "");
    assert_eq!(tick_and_wait(&sb), 1);
    assert_eq!(sb.br_status("app", &bead), "closed");
    let files = upstream_files(&sb, &bare);
    assert!(
        files.contains("fix.txt") && files.contains(&format!("work-{bead}.txt")),
        "{files}"
    );
}

#[test]
fn a_check_that_stays_red_blocks_the_bead_with_its_last_failure_once_its_attempts_are_spent() {
    let (sb, bead, bare, gh) = world("auto");
    let mut head = opened(&sb, &bead, &bare, &gh);
    let first = head.clone();
    // retries = 1: two attempts answer the forge, then the bead is blocked.
    for _ in 0..2 {
        gh.check(&head, "ci", "completed", Some("failure"), "still broken");
        assert_eq!(tick_and_wait(&sb), 1);
        head = gh.head_of("me/app", 1);
    }
    gh.check(&head, "ci", "completed", Some("failure"), "still broken");
    assert_eq!(tick_and_wait(&sb), 1);
    assert_eq!(sb.br_status("app", &bead), "blocked");
    let shown = sb.ok(&["beads", "app", "--json"]);
    assert!(
        shown.contains("checks failed: ci, after 2 attempts; last: ci: still broken"),
        "{shown}"
    );
    // The first attempt's fix was pushed; the second changed nothing more and counted all
    // the same.
    assert_ne!(head, first);
    assert_eq!(gh.pulls("me/app").len(), 1);
}

/// Every worker log of `app`, for a failure's message.
fn session_logs(sb: &Sandbox) -> String {
    let mut out = String::new();
    for dir in walk(sb.home()) {
        if dir.to_string_lossy().contains("/braids/work/") {
            out.push_str(&format!(
                "== {}\n{}\n",
                dir.display(),
                std::fs::read_to_string(&dir).unwrap_or_default()
            ));
        }
    }
    out
}

fn walk(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() && !p.is_symlink() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn a_refused_token_an_unseen_repository_and_a_missing_token_are_named_and_claim_nothing() {
    let (sb, bead, _bare, _gh) = world("auto");
    let token = sb.home().join("gh-token");
    let check = |sb: &Sandbox| {
        let out = sb.run(&["check"]);
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
    };
    // 401: `braids check` asks the forge and says which token to fix.
    std::fs::write(&token, "ghp_wrong\n").unwrap();
    let said = check(&sb);
    assert!(
        said.contains("the forge refused the token (401)")
            && said.contains("give forge `gh` a valid token"),
        "{said}"
    );
    // 404: a repository the token does not see.
    std::fs::write(&token, format!("{TOKEN}\n")).unwrap();
    let md = sb.project("app").join(".braids/PROJECT.md");
    let text = std::fs::read_to_string(&md).unwrap();
    std::fs::write(&md, text.replace("gh me/app", "gh me/other")).unwrap();
    let said = check(&sb);
    assert!(
        said.contains("does not show") && said.contains("PROJECT.md"),
        "{said}"
    );
    std::fs::write(&md, text).unwrap();
    // No token at all: the tick's preflight claims nothing for the project and says why.
    std::fs::remove_file(&token).unwrap();
    let r = sb.tick().force().run();
    assert!(r.spawned_beads().is_empty(), "{r:#?}");
    assert_eq!(sb.br_status("app", &bead), "open");
    let status = std::fs::read_to_string(sb.braids_dir().join("STATUS.md")).unwrap();
    assert!(
        status.contains("no worker can start") && status.contains("the token file"),
        "{status}"
    );
    let said = check(&sb);
    assert!(
        said.contains("the token file") && said.contains("cannot be read"),
        "{said}"
    );
}

/// Somebody else's commit of `file` on the upstream's main, from a clone of their own; the
/// new tip.
fn pushed_to_main(sb: &Sandbox, bare: &std::path::Path, file: &str, text: &str) -> String {
    let other = sb.home().join("other");
    if !other.exists() {
        sb.git(
            sb.home(),
            &[
                "clone",
                "-q",
                bare.to_str().unwrap(),
                other.to_str().unwrap(),
            ],
        );
    }
    std::fs::write(other.join(file), text).unwrap();
    sb.git(&other, &["add", file]);
    sb.git(
        &other,
        &[
            "-c",
            "user.name=Other",
            "-c",
            "user.email=o@example.com",
            "commit",
            "-qm",
            "theirs",
        ],
    );
    sb.git(&other, &["push", "-q", "origin", "HEAD:main"]);
    sb.git(bare, &["rev-parse", "main"]).trim().to_string()
}

#[test]
fn a_pull_request_whose_base_moved_is_rebased_by_braids_its_commits_kept_under_a_lease() {
    let (sb, bead, bare, gh) = world("person");
    let head = opened(&sb, &bead, &bare, &gh);
    let tip = pushed_to_main(&sb, &bare, "theirs.txt", "theirs\n");
    assert_eq!(tick_and_wait(&sb), 1);
    let rebased = gh.head_of("me/app", 1);
    assert_ne!(rebased, head, "{}", session_logs(&sb));
    assert_eq!(
        sb.git(&bare, &["rev-parse", &format!("{rebased}^")]).trim(),
        tip
    );
    let subject = |c: &str| sb.git(&bare, &["show", "-s", "--format=%s%n%an", c]);
    assert_eq!(subject(&rebased), subject(&head));
    // Up to date now: nothing to do until a person merges.
    assert_eq!(tick_and_wait(&sb), 0);
    assert_eq!(sb.br_status("app", &bead), "in_progress");
}

#[test]
fn a_pull_request_that_conflicts_with_its_base_starts_an_attempt_told_of_the_conflict() {
    let (sb, bead, bare, gh) = world("person");
    let _ = opened(&sb, &bead, &bare, &gh);
    pushed_to_main(&sb, &bare, &format!("work-{bead}.txt"), "theirs\n");
    assert_eq!(tick_and_wait(&sb), 1);
    let events = sb.ok(&["events", "--project", "app", "--json"]);
    assert!(
        events.contains("changes_requested") && events.contains("a conflict with the base"),
        "{events}"
    );
    let prompt = std::fs::read_to_string(
        sb.braids_dir()
            .join("work/app")
            .join(&bead)
            .join("prompt.md"),
    )
    .unwrap();
    assert!(
        prompt.contains("no longer merges into it cleanly"),
        "{prompt}"
    );
    // The agent changed nothing that resolves it: the attempt counted, the bead still in
    // review, and the same conflict is answered again by a later run.
    assert_eq!(sb.br_status("app", &bead), "in_progress");
    let shown = sb.ok(&["beads", "app"]);
    assert!(shown.contains("1 attempt(s) answered the forge"), "{shown}");
}

#[test]
fn a_head_braids_just_pushed_is_not_merged_before_its_checks_have_had_time_to_appear() {
    let (sb, bead, bare, gh) = world("auto");
    let _ = opened(&sb, &bead, &bare, &gh);
    // No check reported yet: green by the letter, but CI has not registered its checks.
    assert_eq!(tick_and_wait(&sb), 0);
    assert_eq!(gh.pulls("me/app")[0].2, true);
    let status = std::fs::read_to_string(sb.braids_dir().join("STATUS.md")).unwrap();
    assert!(status.contains("#1's head has no checks yet"), "{status}");
}

/// Moves forge `name`'s next probe into the past, as the minutes a breaker waits would.
pub(crate) fn probe_due(sb: &Sandbox, name: &str) {
    let file = sb.braids_dir().join("attempts.json");
    let mut a: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let b = &mut a["forges"][name];
    assert!(b.is_object(), "forge {name} is not paused: {a:#}");
    b["nextProbe"] = serde_json::json!("2000-01-01T00:00:00Z");
    std::fs::write(&file, serde_json::to_vec_pretty(&a).unwrap()).unwrap();
}

#[test]
fn c12_6_a_forge_outage_pauses_it_costs_the_bead_nothing_and_its_request_opens_once_it_answers() {
    let (sb, bead, bare, gh) = world("auto");
    gh.set_down(true);
    // The work is done and its branch pushed; the forge cannot open the request.
    assert_eq!(tick_and_wait(&sb), 1);
    assert!(gh.pulls("me/app").is_empty());
    assert_eq!(sb.br_status("app", &bead), "in_progress");
    let branch = sb.git(
        &bare,
        &["ls-tree", "-r", "--name-only", &format!("braids/{bead}")],
    );
    assert!(branch.contains(&format!("work-{bead}.txt")), "{branch}");
    let listed = sb.ok(&["beads", "app"]);
    assert!(listed.contains("in review"), "{listed}");
    // Paused: the runs that follow ask the forge nothing and claim nothing.
    let asked = gh.requests().len();
    for _ in 0..2 {
        assert_eq!(tick_and_wait(&sb), 0);
    }
    assert_eq!(gh.requests().len(), asked, "{:#?}", gh.requests());
    let status = std::fs::read_to_string(sb.braids_dir().join("STATUS.md")).unwrap();
    assert!(status.contains("forge `gh` is paused"), "{status}");
    // Its probe is due and the forge is back: one worker opens the request, once.
    gh.set_down(false);
    probe_due(&sb, "gh");
    assert_eq!(tick_and_wait(&sb), 1);
    assert_eq!(
        gh.pulls("me/app"),
        vec![(1, format!("braids/{bead}"), true)],
        "{}",
        sb.ok(&["logs", &format!("app:{bead}")])
    );
    let attempts: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(sb.braids_dir().join("attempts.json")).unwrap(),
    )
    .unwrap();
    assert!(attempts.get("forges").is_none(), "{attempts:#}");
    // The outage cost the bead no attempt.
    let json: serde_json::Value =
        serde_json::from_str(&sb.ok(&["beads", "app", "--json"])).unwrap();
    assert_eq!(json["beads"][0]["attempts"], 0, "{json:#}");
    // Green: merged, closed; its request was opened once, and told once.
    let head = gh.head_of("me/app", 1);
    gh.check(&head, "ci", "completed", Some("success"), "all good");
    assert_eq!(tick_and_wait(&sb), 1);
    assert_eq!(sb.br_status("app", &bead), "closed");
    assert!(upstream_files(&sb, &bare).contains(&format!("work-{bead}.txt")));
    let events = sb.ok(&["events", "--project", "app", "--json"]);
    assert_eq!(events.matches("\"pr_opened\"").count(), 1, "{events}");
}

/// The real Claude Code, its model a stand-in: the request it opened goes red, and the attempt
/// that answers resumes the very session that wrote the work, whose next turn writes the fix;
/// the fix is pushed to the request, which merges once green.
#[test]
fn c12_3_claude_code_fixes_a_red_check_in_the_session_it_opened_the_request_from() {
    use crate::support::agent_cli::Cli;
    use crate::support::agent_model::{AgentModel, Script};
    let Some(cli) = Cli::Claude.installed() else {
        return;
    };
    let model = AgentModel::start(Script::Write {
        files: vec![("hello.txt".into(), "hi\n".into())],
        final_text: "Created hello.txt.".into(),
    });
    let sb = Install::new()
        .sandboxed()
        .config("[sessions]\nkill_grace_secs = 5\n")
        .build();
    sb.config(&cli.config(sb.home(), &model.url(), &sb.path_var()));
    let gh = GitHub::start(TOKEN, "braids-bot");
    let token = sb.home().join("gh-token");
    std::fs::write(&token, format!("{TOKEN}\n")).unwrap();
    sb.config(&format!(
        "[worker]\nretries = 1\n\n[forges.gh]\nkind = \"github\"\napi = \"{}\"\ntoken_file = {:?}\n",
        gh.api(),
        token.display().to_string()
    ));
    let app = sb
        .new_project("app")
        .br()
        .beads(1)
        .field("Landing", "pull-request")
        .field("Merge", "auto")
        .field("Forge", "gh me/app")
        .create();
    let bead = app.beads[0].to_string();
    let bare = sb.bare_upstream("app");
    gh.repo("me/app", &bare);
    assert_eq!(tick_and_wait(&sb), 1);
    assert_eq!(
        gh.pulls("me/app"),
        vec![(1, format!("braids/{bead}"), true)],
        "{}",
        sb.ok(&["logs", &format!("app:{bead}")])
    );
    let opened_by = model
        .seen()
        .iter()
        .find_map(|s| s.session.clone())
        .expect("Claude Code sent its session id");
    let asked = model.seen().len();
    // The conversation's next turn (its third: the work and its closing words are behind it)
    // writes the fix.
    model.script(
        &bead,
        Script::Write {
            files: vec![
                ("hello.txt".into(), "hi\n".into()),
                ("unused.txt".into(), String::new()),
                ("fix.txt".into(), "fixed\n".into()),
            ],
            final_text: "Fixed what the check said.".into(),
        },
    );
    let head = gh.head_of("me/app", 1);
    gh.check(
        &head,
        "ci",
        "completed",
        Some("failure"),
        "greeting: expected hello",
    );
    assert_eq!(tick_and_wait(&sb), 1);
    let fixed = gh.head_of("me/app", 1);
    assert_ne!(fixed, head, "{}", sb.ok(&["logs", &format!("app:{bead}")]));
    let files = sb.git(&bare, &["ls-tree", "-r", "--name-only", &fixed]);
    assert!(
        files.contains("fix.txt") && files.contains("hello.txt"),
        "{files}"
    );
    let later: Vec<_> = model.seen().into_iter().skip(asked).collect();
    assert!(!later.is_empty());
    assert!(
        later
            .iter()
            .all(|s| s.session.as_deref() == Some(opened_by.as_str()) && s.turns >= 2),
        "resumed {opened_by}: {:?}",
        later
            .iter()
            .map(|s| (s.session.clone(), s.turns))
            .collect::<Vec<_>>()
    );
    gh.check(&fixed, "ci", "completed", Some("success"), "all good");
    assert_eq!(tick_and_wait(&sb), 1);
    assert_eq!(sb.br_status("app", &bead), "closed");
    assert!(upstream_files(&sb, &bare).contains("fix.txt"));
}

#[test]
fn c12_6_a_spent_rate_limit_pauses_the_forge_until_its_reset_and_costs_the_bead_nothing() {
    let (sb, bead, bare, gh) = world("auto");
    let head = opened(&sb, &bead, &bare, &gh);
    gh.check(&head, "ci", "in_progress", None, "");
    gh.set_remaining(0);
    // Commands that only look see the spent limit but never pause the forge: only a run does.
    sb.ok(&["status"]);
    sb.ok(&["tick", "--dry-run"]);
    let attempts =
        std::fs::read_to_string(sb.braids_dir().join("attempts.json")).unwrap_or_default();
    assert!(!attempts.contains("\"gh\""), "{attempts}");
    let before = chrono::Utc::now().timestamp();
    assert_eq!(tick_and_wait(&sb), 0);
    // Paused until the reset GitHub gave (the top of the next hour), not a minute.
    let attempts: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(sb.braids_dir().join("attempts.json")).unwrap(),
    )
    .unwrap();
    let until: chrono::DateTime<chrono::Utc> = attempts["forges"]["gh"]["nextProbe"]
        .as_str()
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("{attempts:#}"));
    let reset = chrono::DateTime::from_timestamp((before / 3600 + 1) * 3600, 0).unwrap();
    assert!(until >= reset, "{until} before {reset}");
    let asked = gh.requests().len();
    assert_eq!(tick_and_wait(&sb), 0);
    assert_eq!(gh.requests().len(), asked, "a paused forge was asked");
    // The window resets; green meanwhile: one probe, then the merge.
    gh.set_remaining(5000);
    gh.check(&head, "ci", "completed", Some("success"), "all good");
    probe_due(&sb, "gh");
    assert_eq!(tick_and_wait(&sb), 1);
    assert_eq!(sb.br_status("app", &bead), "closed");
    let json: serde_json::Value =
        serde_json::from_str(&sb.ok(&["beads", "app", "--json"])).unwrap();
    assert_eq!(json["beads"][0]["attempts"], 0, "{json:#}");
}

#[test]
fn changes_requested_start_an_attempt_and_the_request_merges_once_the_reviewer_approves() {
    let (sb, bead, bare, gh) = world("auto");
    sb.set_field("app", "Approvals", "1");
    let head = opened(&sb, &bead, &bare, &gh);
    gh.check(&head, "ci", "completed", Some("success"), "");
    // Green, but nobody approved: nothing to do.
    assert_eq!(tick_and_wait(&sb), 0);
    assert_eq!(sb.br_status("app", &bead), "in_progress");
    gh.review(
        "me/app",
        1,
        "ana",
        "CHANGES_REQUESTED",
        "Please say hello in the work file too.",
        &[(&format!("work-{bead}.txt"), 1, "greet here")],
    );
    assert_eq!(tick_and_wait(&sb), 1);
    let answered = gh.head_of("me/app", 1);
    assert_ne!(answered, head, "{}", session_logs(&sb));
    let words = sb.git(&bare, &["show", &format!("{answered}:reviewed.txt")]);
    assert!(
        words.contains("Please say hello in the work file too.") && words.contains("greet here"),
        "{words}"
    );
    let events = sb.ok(&["events", "--project", "app", "--json"]);
    assert!(events.contains("changes_requested"), "{events}");
    // Green again, but ana's request for changes stands until she reviews again.
    gh.check(&answered, "ci", "completed", Some("success"), "");
    assert_eq!(tick_and_wait(&sb), 0);
    assert_eq!(sb.br_status("app", &bead), "in_progress");
    gh.review("me/app", 1, "ana", "APPROVED", "Thanks.", &[]);
    assert_eq!(tick_and_wait(&sb), 1);
    assert_eq!(sb.br_status("app", &bead), "closed");
    assert!(upstream_files(&sb, &bare).contains("reviewed.txt"));
}
