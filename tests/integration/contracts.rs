//! Orchestrator contracts end to end, with the real binary, the real `br` and real processes:
//! 2.1 (the tick never does bead work) and 4.3 (what to work on comes from the tracker, and
//! braids keeps no copy that could disagree).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use braids::tick::orchestrator_state::IdleReason;
use braids::tick::TickReport;

use crate::support::files::walk;
use crate::support::{br_path, label, Install, ReportExt, Sandbox, SLEEPER};

/// Every file of a project except the tracker's own (which claims legitimately change) and git.
fn project_files(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    walk(root)
        .into_iter()
        .filter(|r| {
            !(r.starts_with(".git")
                || r.starts_with(".beads")
                || r == Path::new(".braids/WORKPLAN.md")
                || r == Path::new(".braids/.workplan.lock")
                // The supervisor's stream: what braids did, not bead work (CONTRACTS 8).
                || r.starts_with(".claw"))
        })
        .filter(|r| root.join(r).is_file())
        .map(|r| {
            let bytes = std::fs::read(root.join(&r)).unwrap();
            (r, bytes)
        })
        .collect()
}

/// A `br` and a `git` that log every call (argv, one line) and then run the real program.
fn logging_stubs(s: &Sandbox) {
    let git = ["/usr/local/bin/git", "/usr/bin/git"]
        .into_iter()
        .find(|p| Path::new(p).is_file())
        .unwrap();
    s.script(
        "bin/br",
        &format!(
            "echo \"$*\" >> \"$HOME/calls-br\"\nexec {} \"$@\"",
            br_path().display()
        ),
    );
    s.script(
        "bin/git",
        &format!("echo \"$*\" >> \"$HOME/calls-git\"\nexec {git} \"$@\""),
    );
}

/// `braids tick --json --force`, within a minute.
#[track_caller]
fn tick(s: &Sandbox) -> TickReport {
    s.tick().force().limit(Duration::from_secs(60)).run()
}

#[test]
fn c2_1_tick_never_does_bead_work() {
    // workers that start and end at once, leaving their bead claimed: every later run has a
    // stranded claim to release, and there is a run whose worker cannot start at all. A claim
    // grace of 0 s makes each later run release them (a wait, not a deadline: load cannot
    // make it fire early)
    let s = Install::new()
        .isolated_path()
        .worker("cat >/dev/null\nexit 0")
        .config("[sessions]\nclaim_grace_secs = 0\n")
        .build();
    let brp = s
        .new_project("brp")
        .br()
        .max_workers(2)
        .titled(&["First", "Second", "Third"])
        .create();
    let ids = brp.beads.clone();
    let brp = brp.root;
    let wp = s
        .new_project("wp")
        .max_workers(2)
        .ids(&["wp-o1", "wp-t2", "wp-t3"])
        .create()
        .root;
    for root in [&brp, &wp] {
        s.git(root, &["add", "-A"]);
        s.git(root, &["commit", "-qm", "plan"]);
    }
    logging_stubs(&s);
    let files_before = [project_files(&brp), project_files(&wp)];
    let heads_before = [
        s.git(&brp, &["rev-parse", "HEAD"]),
        s.git(&wp, &["rev-parse", "HEAD"]),
    ];

    // run 1: claims and spawns; run 2: releases stranded claims, claims again; run 3: the
    // worker program is gone, so every claim is undone
    let mut spawned_total = 0;
    for run in 0..3 {
        if run == 2 {
            s.config("[worker]\ncommand = [\"/nonexistent/braids-worker\"]\n");
        }
        std::thread::sleep(Duration::from_millis(300));
        spawned_total += tick(&s).spawns.len();
    }
    assert!(spawned_total >= 4, "the runs did not exercise claims");

    // the only tracker writes: claim, release (back to open), undo a claim (back to open)
    let calls = s.read("calls-br");
    let mut writes = 0;
    for line in calls.lines() {
        let verb = line.split_whitespace().next().unwrap_or("");
        match verb {
            "list" | "ready" | "show" => {}
            "update" => {
                writes += 1;
                let claim = line.contains("--claim");
                let reopen = line.contains("--status=open") && line.contains("--assignee=");
                assert!(
                    claim || reopen,
                    "2.1 violated: the tick made a tracker write that is neither a claim nor a release: br {line}"
                );
                assert!(
                    !line.contains("closed") && !line.contains("blocked"),
                    "2.1 violated: br {line}"
                );
            }
            other => panic!("2.1 violated: the tick ran `br {other}`: br {line}"),
        }
    }
    assert!(writes >= 3, "{calls}");
    assert!(
        calls.lines().any(|l| l.contains("--status=open")),
        "no claim was released or undone: {calls}"
    );
    // no bead was closed, blocked or created by the tick
    for id in &ids {
        let st = s.br_status("brp", id);
        assert!(
            st == "open" || st == "in_progress",
            "2.1 violated: {id} is {st}"
        );
    }
    for (id, (st, _)) in s.workplan("wp") {
        assert!(
            st == "open" || st == "in_progress",
            "2.1 violated: {id} is {st}"
        );
    }
    assert_eq!(s.workplan("wp").len(), 3);
    // no file of either project changed, nothing was committed, git never ran
    assert_eq!(
        [project_files(&brp), project_files(&wp)],
        files_before,
        "2.1 violated: the tick changed project files (a deliverable? ITERATION.md?)"
    );
    assert_eq!(
        [
            s.git(&brp, &["rev-parse", "HEAD"]),
            s.git(&wp, &["rev-parse", "HEAD"])
        ],
        heads_before,
        "2.1 violated: the tick committed"
    );
    let git_calls: Vec<String> = s.read("calls-git").lines().map(String::from).collect();
    assert!(
        git_calls.is_empty(),
        "2.1 violated: the tick ran git: {git_calls:?}"
    );
}

#[test]
fn c4_3_ready_comes_from_the_tracker() {
    let s = Install::new()
        .isolated_path()
        .worker(SLEEPER)
        .plain_registry()
        .build();
    let root = s
        .new_project("src")
        .br()
        .max_workers(10)
        .no_iteration()
        .create()
        .root;
    let a = s.br_create("src", "A, ready");
    let b = s.br_create("src", "B, waits for A");
    s.br("src", &["dep", "add", &b, &a, "--actor=test"]);
    let c = s.br_create("src", "C, closed");
    s.br("src", &["close", &c, "--actor=test"]);
    let d = s.br_create("src", "D, taken by alice");
    s.br("src", &["update", &d, "--claim", "--actor=alice"]);
    let f = s.br_create("src", "F, ready but not a Story");
    // the Stories list names beads that are closed, blocked, taken or do not exist
    s.iteration(
        "src",
        1,
        "active",
        &[
            (&c, "closed"),
            (&b, "blocked"),
            (&d, "alice's"),
            ("src-gone9", "never existed"),
            (&a, "ready"),
        ],
    );
    logging_stubs(&s);
    let label = |id: &str| label("src", id);

    assert_eq!(
        tick(&s).labels(),
        [label(&a)],
        "4.3 violated: what to work on must be the tracker's ready list, within the iteration's Stories"
    );
    // (br's ready list: asked of br, or read from br's own export when that is the database's;
    // 5.1 proves the two agree.)

    // the tracker changes; braids kept no copy: B becomes ready the moment A closes
    s.br("src", &["close", &a, "--actor=test"]);
    assert_eq!(tick(&s).labels(), [label(&b)], "4.3 violated");

    // the state file holds idle tracking, claims and what was already told, never beads or settings
    let st = s.state_json();
    let keys: Vec<&String> = st.as_object().unwrap().keys().collect();
    for k in &keys {
        assert!(
            [
                "idleSince",
                "idleReason",
                "lastRunAt",
                "claims",
                "checkins",
                "toldNoReady",
                "unknownStories",
                // the generation of the observation cache kept beside the state, which holds
                // what the files said with their fingerprints (5.2)
                "observeCache",
                // problems already logged, when retention last ran, when the next run is due,
                // claims held by the release-storm guard, the provider breaker's status line
                "told",
                "retentionAt",
                "nextRunBy",
                "heldClaims",
                "spawningPaused"
            ]
            .contains(&k.as_str()),
            "4.3 violated: the state keeps `{k}`: {st}"
        );
    }

    // with no Stories every ready bead is in scope: F, then E in the tracker's order; and
    // settings come from PROJECT.md on every run (B's worker runs, so MaxWorkers 1 is full) ...
    s.iteration("src", 1, "active", &[]);
    let e = s.br_create("src", "E, new");
    s.set_field("src", "MaxWorkers", "1");
    let r = tick(&s);
    assert!(
        r.spawns.is_empty(),
        "4.3 violated: one worker runs and MaxWorkers is now 1, yet a run spawned: {r:#?}"
    );
    s.set_field("src", "MaxWorkers", "3");
    assert_eq!(tick(&s).labels(), [label(&f), label(&e)]);
    // ... and iteration state from ITERATION.md
    let g = s.br_create("src", "G, newer");
    s.set_field("src", "MaxWorkers", "10");
    let it = root.join(".braids/iterations/001/ITERATION.md");
    let text = std::fs::read_to_string(&it).unwrap();
    std::fs::write(
        &it,
        text.replace("**Status:** active", "**Status:** planning"),
    )
    .unwrap();
    let r = tick(&s);
    assert!(r.spawns.is_empty(), "4.3 violated: {r:#?}");
    assert_eq!(r.idle_reason, Some(IdleReason::NoActiveIterations));
    let _ = g;
}
