//! Repositories as people have them, not as braids would make them: no commit yet, and a
//! person's unsaved edit while braids commits; with real ticks, real workers, real `br`, real
//! git.

use std::time::Duration;

use crate::day_two::{install, workers_end};
use crate::support::{wait_for, ReportExt, Sandbox};

/// An installation whose agent does the work, and a project `app` with one bead.
fn one_bead() -> (Sandbox, crate::support::project::Project) {
    let sb = install(0);
    sb.write("fixed", "");
    let app = sb.new_project("app").br().beads(1).create();
    (sb, app)
}

/// Waits for `bead` of `app` to close, its workers gone.
fn closed(sb: &Sandbox, bead: &str) {
    workers_end(sb);
    wait_for("the bead closed", Duration::from_secs(120), || {
        (sb.br_status("app", bead) == "closed").then_some(())
    });
}

#[test]
fn a_repository_with_no_commit_claims_nothing_until_it_has_one() {
    let (sb, app) = one_bead();
    let bead = &app.beads[0];
    // The person's `git init`, and no commit yet.
    std::fs::remove_dir_all(app.root.join(".git")).unwrap();
    sb.git(&app.root, &["init", "-q", "-b", "trunk"]);

    let r = sb.tick().force().run();
    assert!(r.spawned_beads().is_empty(), "{r:#?}");
    assert_eq!(
        sb.br_status("app", bead),
        "open",
        "nothing claimed or blocked"
    );
    let status = std::fs::read_to_string(sb.braids_dir().join("STATUS.md")).unwrap();
    assert!(status.contains("no commit yet"), "{status}");
    let check = sb.run(&["check"]);
    let said = String::from_utf8_lossy(&check.stdout);
    assert!(said.contains("add -A"), "{said}");

    // A first commit, and the bead runs on `trunk`.
    sb.git(&app.root, &["add", "-A"]);
    sb.git(&app.root, &["commit", "-q", "-m", "Start"]);
    let r = sb.tick().force().run();
    assert_eq!(r.spawned_beads(), [bead.clone()], "{r:#?}");
    closed(&sb, bead);
    let log = sb.git(&app.root, &["log", "--format=%s", "trunk"]);
    assert!(log.contains(bead.as_str()), "{log}");
}

#[test]
fn a_machine_where_git_knows_nobody_still_lands_the_work() {
    let (sb, app) = one_bead();
    let bead = &app.beads[0];
    // Nobody told git who they are, and this host's name gives it no email to guess.
    std::fs::write(
        sb.home().join(".gitconfig"),
        "[init]\n\tdefaultBranch = main\n",
    )
    .unwrap();
    let r = sb.tick().force().run();
    assert_eq!(r.spawned_beads(), [bead.clone()], "{r:#?}");
    closed(&sb, bead);
    let log = sb.git(&app.root, &["log", "--format=%s <%ae>", "-3"]);
    assert!(log.contains(bead.as_str()), "{log}");
}
