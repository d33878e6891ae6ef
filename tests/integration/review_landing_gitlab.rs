//! Landing through review on GitLab, end to end: the life of `review_landing.rs`, with real
//! ticks and workers, real `br` and a bare upstream, against the stand-in GitLab (REST v4),
//! which merges on that upstream as GitLab would. The project lives under a nested group
//! (`group/sub/app`), so every request braids makes names it URL-encoded whole; its checks
//! are the jobs of the head's pipeline, and a failed job's log is what the agent is told.

use std::path::{Path, PathBuf};

use crate::day_two::workers_end;
use crate::support::forge_gitlab::GitLab;
use crate::support::{Install, ReportExt, Sandbox};

const TOKEN: &str = "glpat-review";
const PROJECT: &str = "group/sub/app";
/// The project as it appears in a request's path.
const ENCODED: &str = "group%2Fsub%2Fapp";

/// An installation whose agent adds `work-<bead>.txt` and passes (told of a failing job
/// `test`, it also writes the quoted log it read to `fix.txt`); a project `app` with one bead
/// landing through merge requests on the stand-in (`merge`: `auto` or `person`), pushed to a
/// bare upstream the stand-in serves as `group/sub/app`.
fn world(merge: &str) -> (Sandbox, String, PathBuf, GitLab) {
    let sb = Install::new().build();
    let agent = sb.script(
        "bin/agent",
        "echo \"$BRAIDS_BEAD\" > \"work-$BRAIDS_BEAD.txt\"\n# Told of a failing job: the fix, and the job's words kept to show what it read.\nif grep -q 'Check `test`' \"$2\"; then grep '^> ' \"$2\" > fix.txt; echo 'Fixed what the job said.' > answer; fi\nmkdir -p \"$(dirname \"$1\")\"\nprintf '# %s\\n\\n## Summary\\n\\nAdded the work file. %s\\n' \"$BRAIDS_BEAD\" \"$(cat answer 2>/dev/null; rm -f answer)\" > \"$1\"\nprintf 'status: pass\\nsummary: added the work file\\n' > \"$BRAIDS_RESULT_FILE\"\n",
    );
    let gl = GitLab::start(TOKEN, "braids-bot");
    let token = sb.home().join("gl-token");
    std::fs::write(&token, format!("{TOKEN}\n")).unwrap();
    sb.config(&format!(
        "[worker]\nexecutor = [{:?}, \"{{deliverable}}\", \"{{prompt_file}}\"]\nretries = 1\n\n[forges.gl]\nkind = \"gitlab\"\napi = \"{}\"\ntoken_file = {:?}\n",
        agent.display().to_string(),
        gl.api(),
        token.display().to_string()
    ));
    let app = sb
        .new_project("app")
        .br()
        .beads(1)
        .field("Landing", "pull-request")
        .field("Merge", merge)
        .field("Forge", &format!("gl {PROJECT}"))
        .create();
    let bare = sb.bare_upstream("app");
    gl.project(PROJECT, &bare);
    (sb, app.beads[0].to_string(), bare, gl)
}

/// One run and its workers' end.
fn tick_and_wait(sb: &Sandbox) -> usize {
    let r = sb.tick().force().run();
    workers_end(sb);
    r.spawned_beads().len()
}

fn upstream_files(sb: &Sandbox, bare: &Path) -> String {
    sb.git(bare, &["ls-tree", "-r", "--name-only", "main"])
}

/// The state of merge request `!1`.
fn state(gl: &GitLab) -> &'static str {
    gl.merge_requests(PROJECT)[0].2
}

/// One run that starts no worker, having looked at merge request `!1` and the jobs of its
/// head's pipeline, every request answered.
fn tick_looks_and_waits(sb: &Sandbox, gl: &GitLab) {
    let from = gl.requests().len();
    assert_eq!(tick_and_wait(sb), 0);
    let looked = gl.requests().split_off(from);
    let at = format!("/api/v4/projects/{ENCODED}");
    assert!(
        looked
            .iter()
            .any(|r| r.method == "GET" && r.path == format!("{at}/merge_requests/1")),
        "{looked:?}"
    );
    assert!(
        looked.iter().any(|r| r.method == "GET"
            && r.path.starts_with(&format!("{at}/pipelines/"))
            && r.path.ends_with("/jobs")),
        "{looked:?}"
    );
    assert!(looked.iter().all(|r| r.status == 200), "{looked:?}");
}

/// The first run opens the merge request: the work is on `braids/<bead>` and nowhere on
/// `main`, the bead in review. The request's head.
fn opened(sb: &Sandbox, bead: &str, bare: &Path, gl: &GitLab) -> String {
    assert_eq!(tick_and_wait(sb), 1);
    assert_eq!(
        gl.merge_requests(PROJECT),
        vec![(1, format!("braids/{bead}"), "opened")],
        "{}",
        sb.ok(&["logs", &format!("app:{bead}")])
    );
    // Opened on the nested group's project, addressed by its encoded path.
    assert!(
        gl.requests().iter().any(|r| r.method == "POST"
            && r.path == format!("/api/v4/projects/{ENCODED}/merge_requests")
            && r.status == 201),
        "{:?}",
        gl.requests()
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
    let head = gl.head_of(PROJECT, 1);
    assert_eq!(
        head,
        sb.git(bare, &["rev-parse", &format!("braids/{bead}")])
            .trim()
    );
    head
}

#[test]
fn a_bead_is_opened_as_a_merge_request_and_merged_by_braids_once_its_pipeline_passes() {
    let (sb, bead, bare, gl) = world("auto");
    let head = opened(&sb, &bead, &bare, &gl);
    // The pipeline runs: nothing to do, and no worker for it.
    gl.job(PROJECT, &head, "test", "running", "");
    tick_looks_and_waits(&sb, &gl);
    assert_eq!(sb.br_status("app", &bead), "in_progress");
    assert_eq!(state(&gl), "opened");
    // Passed: the next run starts a worker, which merges the head it saw pass and closes.
    gl.job(PROJECT, &head, "test", "success", "all good");
    assert_eq!(tick_and_wait(&sb), 1);
    assert_eq!(
        sb.br_status("app", &bead),
        "closed",
        "{}",
        sb.ok(&["logs", &format!("app:{bead}")])
    );
    assert_eq!(state(&gl), "merged");
    let requests = gl.requests();
    let merges: Vec<_> = requests
        .iter()
        .filter(|r| r.method == "PUT")
        .map(|r| (r.path.as_str(), r.status))
        .collect();
    let merge_path = format!("/api/v4/projects/{ENCODED}/merge_requests/1/merge");
    assert_eq!(merges, vec![(merge_path.as_str(), 200)], "{requests:?}");
    assert!(upstream_files(&sb, &bare).contains(&format!("work-{bead}.txt")));
    // The branch is gone (deleted by braids through the API, its name encoded whole), and the
    // close is recorded on the merged base and pushed.
    assert!(
        requests.iter().any(|r| r.method == "DELETE"
            && r.path == format!("/api/v4/projects/{ENCODED}/repository/branches/braids%2F{bead}")
            && r.status == 204),
        "{requests:?}"
    );
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
    // GitLab's own merge commit is under it.
    assert!(
        log.lines()
            .any(|l| l == format!("Merge branch 'braids/{bead}' into 'main'")),
        "{log}"
    );
    // One bead, so its merge completed the iteration.
    assert_eq!(log.lines().next(), Some("Complete iteration 001"), "{log}");
    let events = sb.ok(&["events", "--project", "app", "--json"]);
    for kind in ["pr_opened", "pr_merged"] {
        assert!(events.contains(kind), "{kind} not in {events}");
    }
    assert!(events.contains("\"merged_by\":\"braids\""), "{events}");
    // The merge's commit is GitLab's merge commit, read from its answer to the merge.
    let merge_commit = sb.git(
        &bare,
        &[
            "log",
            "--format=%H",
            "--grep",
            &format!("^Merge branch 'braids/{bead}'"),
            "main",
        ],
    );
    assert_eq!(merge_commit.trim().len(), 40, "{log}");
    assert!(
        events.contains(&format!("\"commit\":\"{}\"", merge_commit.trim())),
        "{merge_commit} not in {events}"
    );
    // Nothing more is watched.
    assert_eq!(tick_and_wait(&sb), 0);
}

#[test]
fn a_person_merging_the_merge_request_closes_its_bead_and_braids_never_merges_itself() {
    let (sb, bead, bare, gl) = world("person");
    let head = opened(&sb, &bead, &bare, &gl);
    gl.job(PROJECT, &head, "test", "success", "all good");
    // Passed, but a person merges: nothing to do.
    tick_looks_and_waits(&sb, &gl);
    assert_eq!(state(&gl), "opened");
    gl.merge_by(PROJECT, 1, "ana").unwrap();
    assert_eq!(tick_and_wait(&sb), 1);
    assert_eq!(
        sb.br_status("app", &bead),
        "closed",
        "{}",
        sb.ok(&["logs", &format!("app:{bead}")])
    );
    let events = sb.ok(&["events", "--project", "app", "--json"]);
    assert!(events.contains("pr_merged"), "{events}");
    assert!(events.contains("\"merged_by\":\"ana\""), "{events}");
    assert!(upstream_files(&sb, &bare).contains(&format!("work-{bead}.txt")));
    let log = sb.git(&bare, &["log", "--format=%s", "main"]);
    assert!(
        log.lines()
            .any(|l| l == format!("braids: {bead} merged as #1")),
        "{log}"
    );
    assert!(
        !gl.requests().iter().any(|r| r.method == "PUT"),
        "{:?}",
        gl.requests()
    );
}

#[test]
fn a_merge_request_closed_unmerged_blocks_its_bead_naming_it_and_who_closed_it() {
    let (sb, bead, bare, gl) = world("auto");
    let _ = opened(&sb, &bead, &bare, &gl);
    gl.close_by(PROJECT, 1, "ana");
    assert_eq!(tick_and_wait(&sb), 1);
    assert_eq!(sb.br_status("app", &bead), "blocked");
    let shown = sb.ok(&["beads", "app", "--json"]);
    assert!(
        shown.contains("#1 was closed without a merge by ana"),
        "{shown}"
    );
    let events = sb.ok(&["events", "--project", "app", "--json"]);
    assert!(events.contains("pr_closed"), "{events}");
    assert!(events.contains("\"closed_by\":\"ana\""), "{events}");
    assert!(!upstream_files(&sb, &bare).contains(&format!("work-{bead}.txt")));
    assert_eq!(state(&gl), "closed");
    // Nothing more is watched.
    assert_eq!(tick_and_wait(&sb), 0);
}

/// A runner's log of a failed job: set-up well past the forty lines of a tail, colours, a
/// collapsible section, and at its end what failed.
fn failed_log() -> String {
    let mut log = String::from(
        "\u{1b}[0KRunning with gitlab-runner 17.5.0\nsetup line that stays out of the tail\n",
    );
    for i in 0..60 {
        log.push_str(&format!("Downloading crate {i}\n"));
    }
    log.push_str("section_start:1700000000:step_script\r\u{1b}[0K\u{1b}[32;1mExecuting step_script\u{1b}[0;m\n");
    log.push_str("$ cargo test\n");
    log.push_str("\u{1b}[31mtest_login failed: expected 200, got 500\u{1b}[0m\n");
    log.push_str("section_end:1700000060:step_script\r\u{1b}[0K\n");
    log.push_str("\u{1b}[31;1mERROR: Job failed: exit code 101\u{1b}[0;m\n");
    log
}

#[test]
fn a_failed_job_starts_an_attempt_told_its_log_tail_whose_fix_is_pushed_to_the_same_merge_request()
{
    let (sb, bead, bare, gl) = world("auto");
    let head = opened(&sb, &bead, &bare, &gl);
    gl.job(PROJECT, &head, "lint", "success", "");
    gl.job(PROJECT, &head, "test", "failed", &failed_log());
    // The run starts an attempt at the request's head; its agent reads the job's log tail and
    // fixes; the fix goes to the same branch, and the merge request stays the one.
    assert_eq!(tick_and_wait(&sb), 1);
    assert_eq!(sb.br_status("app", &bead), "in_progress");
    let fixed = gl.head_of(PROJECT, 1);
    assert_ne!(fixed, head, "{}", session_logs(&sb));
    assert_eq!(
        gl.merge_requests(PROJECT),
        vec![(1, format!("braids/{bead}"), "opened")]
    );
    // On top of the head it answered, the branch's history kept.
    assert_eq!(
        sb.git(&bare, &["rev-parse", &format!("{fixed}^")]).trim(),
        head
    );
    // The new head carries the earlier work as well as the fix.
    let tree = sb.git(&bare, &["ls-tree", "-r", "--name-only", &fixed]);
    assert!(
        tree.contains(&format!("work-{bead}.txt")) && tree.contains("fix.txt"),
        "{tree}"
    );
    let fix = sb.git(&bare, &["show", &format!("{fixed}:fix.txt")]);
    assert!(
        fix.contains("> test_login failed: expected 200, got 500"),
        "{fix}"
    );
    assert!(fix.contains("ERROR: Job failed: exit code 101"), "{fix}");
    assert!(fix.contains("Executing step_script"), "{fix}");
    // The tail only, cleaned: no set-up from the log's start, no colours, no section markers.
    assert!(!fix.contains("setup line that stays out"), "{fix}");
    assert!(fix.contains("> Downloading crate 59\n"), "{fix}");
    assert!(!fix.contains("> Downloading crate 5\n"), "{fix}");
    assert!(!fix.contains("[31m") && !fix.contains("section_"), "{fix}");
    // The passing job is not what it was told of.
    assert!(!fix.contains("Check `lint`"), "{fix}");
    let events = sb.ok(&["events", "--project", "app", "--json"]);
    assert!(events.contains("checks_failed"), "{events}");
    // The old head's failure is answered: no new attempt while the new head's pipeline runs.
    gl.job(PROJECT, &fixed, "test", "running", "");
    tick_looks_and_waits(&sb, &gl);
    assert_eq!(state(&gl), "opened");
    gl.job(PROJECT, &fixed, "test", "success", "");
    assert_eq!(tick_and_wait(&sb), 1);
    assert_eq!(
        sb.br_status("app", &bead),
        "closed",
        "{}",
        sb.ok(&["logs", &format!("app:{bead}")])
    );
    assert_eq!(state(&gl), "merged");
    let files = upstream_files(&sb, &bare);
    assert!(
        files.contains("fix.txt") && files.contains(&format!("work-{bead}.txt")),
        "{files}"
    );
}

/// Every worker log of `app`, for a failure's message.
fn session_logs(sb: &Sandbox) -> String {
    let mut out = String::new();
    for file in walk(sb.home()) {
        if file.to_string_lossy().contains("/braids/work/") {
            out.push_str(&format!(
                "== {}\n{}\n",
                file.display(),
                std::fs::read_to_string(&file).unwrap_or_default()
            ));
        }
    }
    out
}

fn walk(dir: &Path) -> Vec<PathBuf> {
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
