//! Upstreams other people push to (CONTRACTS 4.4): braids replays its landings onto what they
//! pushed (never a merge commit, never a force push), keeps work that conflicts with it for a
//! person, and never overwrites an upstream that was rewritten. Real ticks, real workers, real
//! `br`, a bare upstream refusing any non-fast-forward update, and another clone pushing.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::day_two::workers_end;
use crate::support::{wait_for, Install, ReportExt, Sandbox};

/// An installation whose agent runs `body` in its workspace and then passes, and a project
/// `app` with `beads` beads and MaxWorkers `workers`, pushed to a bare upstream that refuses
/// force pushes; with a clone of the upstream at `<home>/other` for somebody else.
/// `{home}` in `body` is the sandbox's home.
fn world(body: &str, beads: usize, workers: u32) -> (Sandbox, Vec<String>, PathBuf, PathBuf) {
    let sb = Install::new().build();
    let body = body.replace("{home}", &sb.home().display().to_string());
    let agent = sb.script(
        "bin/agent",
        &format!(
            "{body}\nmkdir -p \"$(dirname \"$1\")\"\nprintf '# %s\\n\\n## Summary\\n\\nDid it.\\n' \"$BRAIDS_BEAD\" > \"$1\"\nprintf 'status: pass\\nsummary: did it\\n' > \"$BRAIDS_RESULT_FILE\"\n"
        ),
    );
    sb.config(&format!(
        "[worker]\nexecutor = [{:?}, \"{{deliverable}}\"]\nretries = 0\n",
        agent.display().to_string()
    ));
    let app = sb
        .new_project("app")
        .br()
        .beads(beads)
        .max_workers(workers)
        .create();
    let bare = sb.bare_upstream("app");
    sb.git(&bare, &["config", "receive.denyNonFastForwards", "true"]);
    let other = sb.home().join("other");
    sb.git(
        sb.home(),
        &[
            "clone",
            "-q",
            bare.to_str().unwrap(),
            other.to_str().unwrap(),
        ],
    );
    let beads = app.beads.iter().map(|b| b.to_string()).collect();
    (sb, beads, bare, other)
}

fn git_in(dir: &Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new("git")
        .args([
            "-c",
            "user.name=Other",
            "-c",
            "user.email=other@example.com",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

/// Somebody else's commit of `file`, pushed, catching up with the upstream first as long as
/// it takes.
fn push_from(other: &Path, file: &str, text: &str, subject: &str) {
    std::fs::write(other.join(file), text).unwrap();
    assert!(git_in(other, &["add", file]).status.success());
    assert!(git_in(other, &["commit", "-q", "-m", subject])
        .status
        .success());
    for _ in 0..50 {
        if git_in(other, &["push", "-q", "origin", "HEAD:main"])
            .status
            .success()
        {
            return;
        }
        let pulled = git_in(other, &["pull", "-q", "--rebase", "origin", "main"]);
        assert!(pulled.status.success(), "{pulled:?}");
    }
    panic!("the other clone could not push {subject}");
}

fn waiting_text(sb: &Sandbox, bead: &str) -> String {
    let v: serde_json::Value = serde_json::from_str(&sb.ok(&["beads", "app", "--json"])).unwrap();
    let row = v["beads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["id"] == bead)
        .cloned()
        .unwrap_or_else(|| panic!("{bead} not in {v:#}"));
    row.to_string()
}

#[test]
fn c4_4_three_workers_land_while_another_clone_pushes_every_second_for_a_minute() {
    // Each bead adds a file of its own after a moment's work.
    let (sb, beads, bare, other) = world(
        "sleep $(( $(date +%N | sed 's/^0*//;s/^$/0/') % 3 + 1 ))\necho \"$BRAIDS_BEAD\" > \"work-$BRAIDS_BEAD.txt\"",
        12,
        3,
    );
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let pusher = {
        let (stop, other) = (stop.clone(), other.clone());
        std::thread::spawn(move || {
            let started = Instant::now();
            let mut n = 0;
            while started.elapsed() < Duration::from_secs(60)
                && !stop.load(std::sync::atomic::Ordering::Relaxed)
            {
                n += 1;
                push_from(
                    &other,
                    &format!("theirs-{n}.txt"),
                    "theirs\n",
                    &format!("theirs {n}"),
                );
                std::thread::sleep(Duration::from_secs(1));
            }
            n
        })
    };
    let started = Instant::now();
    while !beads.iter().all(|b| sb.br_status("app", b) == "closed") {
        assert!(
            started.elapsed() < Duration::from_secs(600),
            "beads left: {:?}",
            beads
                .iter()
                .map(|b| (b, sb.br_status("app", b)))
                .collect::<Vec<_>>()
        );
        let r = sb.tick().force().run();
        assert!(r.errors.iter().all(|e| !e.contains("conflict")), "{r:#?}");
        std::thread::sleep(Duration::from_secs(2));
    }
    workers_end(&sb);
    let foreign = pusher.join().unwrap();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    // Whatever a worker could not push yet, the next run pushes.
    let root = sb.project("app");
    wait_for("everything pushed", Duration::from_secs(120), || {
        sb.tick().force().run();
        (!braids::git::push_pending(&root)).then_some(())
    });
    let log = sb.git(&bare, &["log", "--format=%s", "main"]);
    for b in &beads {
        assert!(
            log.contains(&format!("({b})")),
            "{b} is not on the upstream:\n{log}"
        );
    }
    for n in 1..=foreign {
        assert!(
            log.lines().any(|l| l == format!("theirs {n}")),
            "theirs {n} lost:\n{log}"
        );
    }
    let merges = sb.git(&bare, &["rev-list", "--merges", "main"]);
    assert!(merges.trim().is_empty(), "merge commits: {merges}");
    // Nothing of the project's branch is missing from the upstream (which others moved on).
    let ours = sb.git(&root, &["rev-parse", "main"]);
    sb.git(&bare, &["merge-base", "--is-ancestor", ours.trim(), "main"]);
    assert!(foreign >= 30, "the other clone pushed {foreign} times");
    eprintln!(
        "{} beads and {foreign} foreign commits on the upstream, no merge commit",
        beads.len()
    );
}

#[test]
fn c4_4_work_that_conflicts_with_the_upstream_is_kept_and_its_bead_blocked_with_the_paths() {
    // While the agent works, somebody else pushes their own shared.txt.
    let (sb, beads, bare, other) = world(
        "(cd \"{home}/other\" && printf 'theirs\\n' > shared.txt && git add shared.txt && git -c user.name=O -c user.email=o@o commit -qm theirs && git push -q origin HEAD:main) >>\"{home}/other.log\" 2>&1\nprintf 'ours\\n' > shared.txt",
        1,
        1,
    );
    let _ = other;
    let bead = &beads[0];
    let r = sb.tick().force().run();
    assert_eq!(r.spawned_beads().len(), 1, "{r:#?}");
    workers_end(&sb);
    let shown = waiting_text(&sb, bead);
    assert_eq!(
        sb.br_status("app", bead),
        "blocked",
        "{shown}\n{}\nupstream: {}\nproject: {}\n{}",
        std::fs::read_to_string(sb.home().join("other.log")).unwrap_or_default(),
        sb.git(&bare, &["log", "--format=%s", "main"]),
        sb.git(&sb.project("app"), &["log", "--all", "--format=%s %D"]),
        sb.ok(&["logs", &format!("app:{bead}")])
    );
    assert!(shown.contains("shared.txt"), "{shown}");
    let root = sb.project("app");
    let kept = sb.git(
        &root,
        &["branch", "--list", &format!("braids/kept/{bead}-*")],
    );
    assert!(!kept.trim().is_empty(), "the work is kept");
    let kept = kept.trim().trim_start_matches("* ").to_string();
    assert_eq!(
        sb.git(&root, &["show", &format!("{kept}:shared.txt")]),
        "ours\n"
    );
    assert_eq!(
        sb.git(&root, &["rev-parse", "main"]),
        sb.git(&bare, &["rev-parse", "main"]),
        "the base branch is the upstream's, nothing half-done"
    );
    assert_eq!(sb.git(&bare, &["show", "main:shared.txt"]), "theirs\n");
    // Clean but for the tracker's own file (the block is written there, and committed with
    // the next landing).
    let status = sb.git(&root, &["status", "--porcelain", "--untracked-files=no"]);
    assert!(
        status.lines().all(|l| l.ends_with(".beads/issues.jsonl")),
        "{status}"
    );
}

#[test]
fn c4_4_an_upstream_rewritten_by_a_force_push_is_never_overwritten() {
    // While the agent works, somebody rewrites the upstream's last commit and force-pushes it
    // (the upstream allows it for them this once).
    let (sb, beads, bare, _other) = world(
        "(cd \"{home}/other\" && git -C \"{home}/app.git\" config receive.denyNonFastForwards false && git -c user.name=O -c user.email=o@o commit -q --amend -m rewritten && git push -q -f origin HEAD:main && git -C \"{home}/app.git\" config receive.denyNonFastForwards true) >>\"{home}/other.log\" 2>&1\necho mine > mine.txt",
        1,
        1,
    );
    let bead = &beads[0];
    let rewritten = || sb.git(&bare, &["log", "-1", "--format=%s", "main"]);
    let r = sb.tick().force().run();
    assert_eq!(r.spawned_beads().len(), 1, "{r:#?}");
    workers_end(&sb);
    wait_for("the bead closed", Duration::from_secs(60), || {
        (sb.br_status("app", bead) == "closed").then_some(())
    });
    assert_eq!(
        rewritten().trim(),
        "rewritten",
        "the person's rewrite stands"
    );
    let shown = waiting_text(&sb, bead);
    assert!(
        shown.contains("not pushed") && shown.contains("force-pushed"),
        "{shown}"
    );
    let root = sb.project("app");
    let local = sb.git(&root, &["log", "--format=%s", "main"]);
    assert!(
        local.contains(&format!("({bead})")),
        "the work is kept: {local}"
    );
    // Later runs do not overwrite it either.
    sb.tick().force().run();
    assert_eq!(rewritten().trim(), "rewritten");
}
