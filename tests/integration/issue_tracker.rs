//! A forge's issues as the project's beads (`Tracker: github`): real ticks and workers, a bare
//! upstream behind the stand-in GitHub, which keeps the issues, labels, assignees and comments
//! as GitHub does. Labelled issues are planned, claimed on the forge, landed and closed with a
//! comment naming the commit; issues without the label are never touched.

use std::path::PathBuf;

use crate::day_two::workers_end;
use crate::support::forge_github::GitHub;
use crate::support::{Install, Sandbox};

const TOKEN: &str = "ghp_issues";
const REPO: &str = "me/app";

/// An installation whose agent adds `work-<bead>.txt` and passes, a project `app` whose
/// tracker is the stand-in's `me/app` (with `fields` more in PROJECT.md), pushed to a bare
/// upstream the stand-in serves.
fn world(fields: &[(&str, &str)]) -> (Sandbox, PathBuf, GitHub) {
    let sb = Install::new().build();
    let agent = sb.script(
        "bin/agent",
        "echo \"$BRAIDS_BEAD\" > \"work-$BRAIDS_BEAD.txt\"\ncp \"$2\" \"prompt-$BRAIDS_BEAD.md\"\nmkdir -p \"$(dirname \"$1\")\"\nprintf '# %s\\n\\n## Summary\\n\\nAdded the work file.\\n' \"$BRAIDS_BEAD\" > \"$1\"\nprintf 'status: pass\\nsummary: added the work file\\n' > \"$BRAIDS_RESULT_FILE\"\n",
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
fn tick_and_wait(sb: &Sandbox) -> Vec<String> {
    let r = sb.tick().force().run();
    workers_end(sb);
    crate::support::ReportExt::spawned_beads(&r)
}

fn stories(sb: &Sandbox, lines: &str) {
    let dir = sb.project("app").join(".braids/iterations/001");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("ITERATION.md"),
        format!("# Iteration 1\n\n- **Status:** active\n\n## Stories\n\n{lines}"),
    )
    .unwrap();
}

fn upstream_files(sb: &Sandbox, bare: &std::path::Path) -> String {
    sb.git(bare, &["ls-tree", "-r", "--name-only", "main"])
}

#[test]
fn c13_1_labelled_issues_are_planned_claimed_landed_and_closed_and_unlabelled_ones_never_touched() {
    let (sb, bare, gh) = world(&[]);
    let login = gh.issue(REPO, "ana", "Add the login page", "A form.", &["braids"]);
    let other = gh.issue(REPO, "ana", "Not for agents", "Leave me.", &["bug"]);
    let title = "Docs: `rm -rf /` $(touch /tmp/pwned) **bold**";
    let docs = gh.issue(REPO, "bob", title, "Write them.", &["braids", "docs"]);
    stories(&sb, &format!("- #{login}: Login\n- #{docs}: Docs\n"));
    let before = gh.issue_now(REPO, other);

    // `check` knows the Stories; `beads` shows the issues, not the unlabelled one.
    let checked = sb.ok(&["check"]);
    assert!(!checked.contains("1.3"), "{checked}");
    let listed = sb.ok(&["beads", "app", "--json"]);
    assert!(listed.contains(&format!("issue-{login}")), "{listed}");
    assert!(!listed.contains(&format!("issue-{other}")), "{listed}");

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
