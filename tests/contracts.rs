//! Orchestrator contracts end to end, with the real binary, the real `br` and real processes:
//! 2.1 (the tick never does bead work) and 4.3 (what to work on comes from the tracker, and
//! braids keeps no copy that could disagree).

mod common;
mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{br_path, Sandbox};
use support::*;

/// Every file of a project except the tracker's own (which claims legitimately change) and git.
fn project_files(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            let r = p.strip_prefix(root).unwrap().to_path_buf();
            let rs = r.to_string_lossy();
            if rs == ".git"
                || rs == ".beads"
                || rs == ".braids/WORKPLAN.md"
                || rs == ".braids/.workplan.lock"
            {
                continue;
            }
            if p.is_dir() {
                stack.push(p);
            } else {
                out.insert(r, std::fs::read(&p).unwrap());
            }
        }
    }
    out
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

/// A project on the real br (through the logging stub), a git repository with a commit.
fn br_project(s: &Sandbox, slug: &str, max: u32) -> PathBuf {
    s.ok(&[
        "new",
        slug,
        "--tracker",
        "br",
        "--max-workers",
        &max.to_string(),
    ]);
    s.project(slug)
}

fn tick(s: &Sandbox) -> support::Run {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_braids"));
    c.args(["tick", "--json", "--force"])
        .env("HOME", s.home())
        .env_remove("BRAIDS_HOME")
        .env("PATH", sys_path(s))
        .env("BRAIDS_LOG", "warn")
        .env("GIT_CONFIG_GLOBAL", s.home().join(".gitconfig"))
        .current_dir(s.home());
    run_limited(c, Duration::from_secs(60))
}

fn br_status(s: &Sandbox, slug: &str, id: &str) -> String {
    let out = s.br(slug, &["show", id, "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let v = if v.is_array() { v[0].clone() } else { v };
    v["status"].as_str().unwrap().to_string()
}

#[test]
fn c2_1_tick_never_does_bead_work() {
    let s = Sandbox::new();
    s.ok(&["init"]);
    // workers that start and end at once, leaving their bead claimed: every later run has a
    // stranded claim to release, and there is a run whose worker cannot start at all
    let quick = s.script("bin/quick-worker", "cat >/dev/null\nexit 0");
    s.config(&format!(
        "[worker]\ncommand = [\"{}\"]\n[sessions]\nclaim_grace_secs = 0\n",
        quick.display()
    ));
    let brp = br_project(&s, "brp", 2);
    let ids: Vec<String> = ["First", "Second", "Third"]
        .iter()
        .map(|t| s.br_create("brp", t))
        .collect();
    s.iteration(
        "brp",
        1,
        "active",
        &ids.iter()
            .map(|i| (i.as_str(), "story"))
            .collect::<Vec<_>>(),
    );
    s.ok(&["new", "wp", "--tracker", "workplan", "--max-workers", "2"]);
    let wp = s.project("wp");
    std::fs::write(
        wp.join(".braids/WORKPLAN.md"),
        "# Workplan\n\n- [ ] One <!-- id:wp-o1 -->\n- [ ] Two <!-- id:wp-t2 -->\n- [ ] Three <!-- id:wp-t3 -->\n",
    )
    .unwrap();
    s.iteration(
        "wp",
        1,
        "active",
        &[("wp-o1", "one"), ("wp-t2", "two"), ("wp-t3", "three")],
    );
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
        let r = tick(&s);
        assert_eq!(r.code, Some(0), "run {run}: {}", r.stderr);
        spawned_total += spawned(&r.json()).len();
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
        let st = br_status(&s, "brp", id);
        assert!(
            st == "open" || st == "in_progress",
            "2.1 violated: {id} is {st}"
        );
    }
    for (id, (st, _)) in workplan(&s, "wp") {
        assert!(
            st == "open" || st == "in_progress",
            "2.1 violated: {id} is {st}"
        );
    }
    assert_eq!(workplan(&s, "wp").len(), 3);
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
    let s = Sandbox::new();
    install(&s, "[tracker]\ntimeout_secs = 30\n");
    let root = br_project(&s, "src", 10);
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
    let label = |id: &str| format!("project:src:{id}");

    let r = tick(&s);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(
        spawned(&r.json()),
        [label(&a), label(&f)],
        "4.3 violated: what to work on must be the tracker's ready list (Stories only order it)"
    );
    // (br's ready list: asked of br, or read from br's own export when that is the database's;
    // 5.1 proves the two agree.)

    // the tracker changes; braids kept no copy: B becomes ready the moment A closes
    s.br("src", &["close", &a, "--actor=test"]);
    let r = tick(&s);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(spawned(&r.json()), [label(&b)], "4.3 violated");

    // the state file holds idle tracking and claims, never beads or settings
    let st = state(&s).unwrap();
    let keys: Vec<&String> = st.as_object().unwrap().keys().collect();
    for k in &keys {
        assert!(
            [
                "idleSince",
                "idleReason",
                "lastRunAt",
                "claims",
                "checkins",
                "dry",
                // fingerprints of files, vouching for answers kept beside the state (5.2)
                "trackerFingerprints"
            ]
            .contains(&k.as_str()),
            "4.3 violated: the state keeps `{k}`: {st}"
        );
    }

    // settings come from PROJECT.md on every run (A's worker was killed when A closed, so F
    // and B run) ...
    let e = s.br_create("src", "E, new");
    s.set_field("src", "MaxWorkers", "2");
    let r = tick(&s);
    assert!(
        spawned(&r.json()).is_empty(),
        "4.3 violated: two workers run and MaxWorkers is now 2, yet a run spawned: {}",
        r.stdout
    );
    s.set_field("src", "MaxWorkers", "3");
    assert_eq!(spawned(&tick(&s).json()), [label(&e)]);
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
    let v = r.json();
    assert!(spawned(&v).is_empty(), "4.3 violated: {v:#}");
    assert_eq!(v["idle_reason"], "no-active-iterations");
    let _ = g;
}
