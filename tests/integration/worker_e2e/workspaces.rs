//! Workspaces end to end (CONTRACTS 5.x): real ticks spawning real workers, each in a git
//! worktree of its own, real `br`, a bare upstream, stand-in agents.

use super::*;

/// Ticks until every bead in `ids` is closed or blocked and nothing runs, or panics with the
/// session logs after `limit` (a hang detector, far above what the run takes).
fn tick_until_settled(p: &Project, ids: &[String], limit: Duration) -> usize {
    let start = Instant::now();
    let mut most = 0;
    loop {
        let done = ids
            .iter()
            .all(|id| matches!(p.status(id).as_str(), "closed" | "blocked"));
        if done && p.sb.live_labels().is_empty() {
            return most;
        }
        if start.elapsed() > limit {
            let statuses: Vec<String> = ids.iter().map(|id| p.status(id)).collect();
            panic!("not settled after {limit:?}: {statuses:?}\n{}", p.logs());
        }
        let report = p.sb.tick().force().log("info").run();
        most = most.max(p.sb.live_labels().len().max(report.spawns.len()));
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// The worktrees git knows for the project, but the pooled ones of finished beads. A worker
/// adding its worktree at that moment can make git's listing fail (its records are written one
/// file at a time): asked again then.
fn worktrees(p: &Project) -> Vec<String> {
    let listed = wait_for("git worktree list", Duration::from_secs(30), || {
        p.sb.try_git(&p.root, &["worktree", "list", "--porcelain"])
            .ok()
    });
    lines(&listed)
        .into_iter()
        .filter_map(|l| l.strip_prefix("worktree ").map(String::from))
        .filter(|w| !w.contains("/.pool/"))
        .collect()
}

fn branches(p: &Project, pattern: &str) -> Vec<String> {
    lines(&p.sb.git(
        &p.root,
        &["branch", "--list", "--format=%(refname:short)", pattern],
    ))
}

/// The files of the commit whose subject is the bead's success subject, sorted.
fn commit_files(p: &Project, id: &str) -> Vec<String> {
    let mut f = p.files_of(&format!(":/^{}", regex_escape(&success_subject(id))));
    f.sort();
    f
}

/// Where a line of `shared.txt` belongs to one bead: far apart, so edits never touch.
fn shared_text(ids: &[String]) -> String {
    ids.iter()
        .map(|id| format!("slot {id}\n\n\n\n\n\n"))
        .collect()
}

#[test]
fn c6_2_three_workers_at_once_land_only_their_own_files_and_never_a_persons() {
    let p = Project::new();
    p.set_field("MaxWorkers", "3");
    let ids = p.plan("active", &["One", "Two", "Three"]);
    p.sb.write(p.root.join("shared.txt"), &shared_text(&ids));
    p.commit_setup("Add shared.txt");
    // A person's uncommitted edit and an untracked file, left in the project.
    p.sb.write(p.root.join("src/main.txt"), "fn main() { /* mine */ }\n");
    p.sb.write(p.root.join("notes-by-user.txt"), "my notes\n");
    // Each agent: a file of its own, its own line of shared.txt, and a pause so all three
    // work at the same time.
    p.agent(&format!(
        "sleep 1\necho \"work of $BRAIDS_BEAD\" > \"src/$BRAIDS_BEAD.txt\"\n\
         sed -i \"s/^slot $BRAIDS_BEAD\\$/done $BRAIDS_BEAD/\" shared.txt\n{}",
        GOOD_AGENT.replace("echo \"// work for $BRAIDS_BEAD\" >> src/main.txt\n", "")
    ));
    let most = tick_until_settled(&p, &ids, Duration::from_secs(300));
    assert_eq!(most, 3, "the three ran at once");
    for id in &ids {
        assert_eq!(p.status(id), "closed", "{id}");
        let deliverable = p.deliverables(id);
        assert_eq!(deliverable.len(), 1, "{id}");
        let mut want = vec![
            ".beads/issues.jsonl".to_string(),
            deliverable[0].clone(),
            "shared.txt".to_string(),
            format!("src/{id}.txt"),
        ];
        want.sort();
        assert_eq!(commit_files(&p, id), want, "{id}: exactly its own files");
    }
    let shared = p.sb.git(&p.root, &["show", "HEAD:shared.txt"]);
    for id in &ids {
        assert!(shared.contains(&format!("done {id}\n")), "{shared}");
    }
    // The person's files: never committed, never overwritten.
    let everything =
        p.sb.git(&p.root, &["log", "--all", "--name-only", "--format="]);
    assert!(!everything.contains("notes-by-user.txt"), "{everything}");
    assert_eq!(
        std::fs::read_to_string(p.root.join("src/main.txt")).unwrap(),
        "fn main() { /* mine */ }\n"
    );
    assert_eq!(
        std::fs::read_to_string(p.root.join("notes-by-user.txt")).unwrap(),
        "my notes\n"
    );
    assert_eq!(p.dirty(), [" M src/main.txt", "?? notes-by-user.txt"]);
    // The landed files are in the person's work tree too.
    for id in &ids {
        assert!(p.root.join(format!("src/{id}.txt")).is_file(), "{id}");
    }
    assert_eq!(worktrees(&p), [p.root.display().to_string()]);
    assert!(branches(&p, "braids/*").is_empty());
    assert!(poll_until(Duration::from_secs(60), || p.upstream_log() == p.log()));
}

#[test]
fn c6_4_a_conflict_blocks_the_bead_names_the_paths_and_keeps_the_work() {
    let p = Project::new();
    p.set_field("MaxWorkers", "2");
    let ids = p.plan("active", &["Left", "Right"]);
    p.sb.write(p.root.join("shared.txt"), "top\nmiddle\nbottom\n");
    p.commit_setup("Add shared.txt");
    p.agent(&format!(
        "sleep 1\nsed -i \"s/^middle\\$/middle by $BRAIDS_BEAD/\" shared.txt\n{GOOD_AGENT}"
    ));
    tick_until_settled(&p, &ids, Duration::from_secs(300));
    let statuses: Vec<String> = ids.iter().map(|id| p.status(id)).collect();
    let mut sorted = statuses.clone();
    sorted.sort();
    assert_eq!(sorted, ["blocked", "closed"], "{statuses:?}");
    let loser = &ids[statuses.iter().position(|s| s == "blocked").unwrap()];
    let winner = &ids[statuses.iter().position(|s| s == "closed").unwrap()];
    // The reason names the path and the branch that keeps the work.
    let shown = p.br(&["show", loser, "--json"]);
    assert!(shown.contains("shared.txt"), "{shown}");
    assert!(shown.contains("braids/kept/"), "{shown}");
    let blockers = p.hook.messages("blocker");
    assert!(
        blockers
            .iter()
            .any(|m| m.contains(loser.as_str()) && m.contains("shared.txt")),
        "{blockers:?}"
    );
    let kept = branches(&p, "braids/kept/*");
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert!(
        kept[0].starts_with(&format!("braids/kept/{loser}-")),
        "{kept:?}"
    );
    let on_kept =
        p.sb.git(&p.root, &["show", &format!("{}:shared.txt", kept[0])]);
    assert!(on_kept.contains(&format!("middle by {loser}")), "{on_kept}");
    // Nothing half-merged: the project has the winner's line, no markers, no loser commit.
    let head = std::fs::read_to_string(p.root.join("shared.txt")).unwrap();
    assert_eq!(head, format!("top\nmiddle by {winner}\nbottom\n"));
    assert!(
        p.log()
            .iter()
            .all(|s| !s.contains(loser.as_str()) || s.starts_with("braids: ")),
        "{:?}",
        p.log()
    );
    // (the tracker's own file records the block; br keeps it uncommitted until the next commit)
    let dirty: Vec<String> = p
        .dirty()
        .into_iter()
        .filter(|l| !l.ends_with(".beads/issues.jsonl"))
        .collect();
    assert_eq!(dirty, Vec::<String>::new());
    assert_eq!(worktrees(&p), [p.root.display().to_string()]);
}

#[test]
fn c6_5_a_worker_killed_mid_work_leaves_no_worktree_behind() {
    let p = Project::new();
    p.configure("[sessions]\nclaim_grace_secs = 5\n");
    let ids = p.plan("active", &["Interrupted"]);
    p.agent("sleep 600\n");
    let report = p.sb.tick().force().run();
    assert_eq!(report.spawns.len(), 1);
    let dir = braids::workspace::GitWorktrees {
        root: p.sb.braids_dir().join("workspaces"),
        sandbox: Default::default(),
        pooling: Default::default(),
    }
    .project_dir(&p.root)
    .join(&ids[0]);
    // The folder appears before git has recorded the worktree: wait for both.
    wait_for("the worker's worktree", Duration::from_secs(60), || {
        (dir.is_dir() && worktrees(&p).len() == 2).then_some(())
    });
    // SIGKILL: the worker gets no chance to clean up. A person then closes the bead, so
    // nothing respawns it and only the tick can remove the worktree.
    p.sb.kill_workers();
    p.br(&["close", &ids[0], "--actor=person"]);
    let gone = poll_until(Duration::from_secs(60), || {
        p.sb.tick().force().run();
        !dir.exists() && worktrees(&p).len() == 1
    });
    assert!(gone, "worktrees left: {:?}", worktrees(&p));
    assert!(
        branches(&p, "braids/*").is_empty(),
        "{:?}",
        branches(&p, "braids/*")
    );
    // and once clean, ticks do nothing more to it
    p.sb.tick().force().run();
    assert_eq!(worktrees(&p), [p.root.display().to_string()]);
}

#[test]
fn c6_2_br_create_in_a_workspace_reaches_the_projects_database() {
    let p = Project::new();
    let ids = p.plan("active", &["Find more work"]);
    p.agent(&format!(
        "br create \"Found while working on $BRAIDS_BEAD\" --json >/dev/null\n{GOOD_AGENT}"
    ));
    tick_until_settled(&p, &ids, Duration::from_secs(120));
    assert_eq!(p.status(&ids[0]), "closed");
    let all = p.br(&["list", "--all", "--json"]);
    assert!(
        all.contains(&format!("Found while working on {}", ids[0])),
        "{all}"
    );
}

#[test]
fn c6_5_fifty_beads_through_max_workers_3_leave_git_clean_and_one_commit_each() {
    let p = Project::new();
    p.set_field("MaxWorkers", "3");
    let titles: Vec<String> = (1..=50).map(|i| format!("Bead number {i}")).collect();
    let refs: Vec<&str> = titles.iter().map(String::as_str).collect();
    let ids = p.plan("active", &refs);
    p.agent(&GOOD_AGENT.replace("src/main.txt", "src/$BRAIDS_BEAD.txt"));
    let most = tick_until_settled(&p, &ids, Duration::from_secs(1500));
    assert!(most <= 3, "MaxWorkers 3, saw {most}");
    for id in &ids {
        if p.status(id) != "closed" {
            panic!(
                "{id} is {}: {}\n{}",
                p.status(id),
                p.br(&["show", id, "--json"]),
                p.logs()
                    .split("--- ")
                    .filter(|l| l.contains(id.as_str()))
                    .collect::<Vec<_>>()
                    .join("--- ")
            );
        }
        let deliverable = p.deliverables(id);
        let mut want = vec![
            ".beads/issues.jsonl".to_string(),
            deliverable[0].clone(),
            format!("src/{id}.txt"),
        ];
        want.sort();
        assert_eq!(commit_files(&p, id), want, "{id}");
    }
    assert_eq!(worktrees(&p), [p.root.display().to_string()]);
    assert!(branches(&p, "braids/*").is_empty());
    assert!(
        bead_worktree_files(&p.sb.braids_dir().join("workspaces")).is_empty(),
        "only pooled worktrees are left"
    );
    // The pool holds at most MaxWorkers + 1, each scrubbed clean.
    let pooled = braids::workspace::pool::members(
        &braids::workspace::GitWorktrees {
            root: p.sb.braids_dir().join("workspaces"),
            sandbox: Default::default(),
            pooling: Default::default(),
        }
        .pool_dir(&p.root),
    );
    assert!((1..=4).contains(&pooled.len()), "{pooled:?}");
    for m in &pooled {
        assert_eq!(
            p.sb.git(&m.path, &["status", "--porcelain", "--untracked-files=all"]),
            ""
        );
    }
}
