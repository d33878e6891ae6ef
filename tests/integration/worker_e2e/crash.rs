//! Crash safety (CONTRACTS 7.1, 7.2): braids killed by SIGKILL at each named crash point
//! (`braids::system::failpoint::POINTS`), then real ticks until quiet, with real `br`, real git and a
//! bare upstream, real worker processes and a stand-in agent.
//!
//! The first tick runs with `FAILPOINTS=<point>=return`, which its workers inherit: the tick
//! dies at a `tick::`/`session::` point, each of its workers at a `worker::` point. Later ticks
//! run clean. Checked throughout and at the end: no bead ever has two live workers (the agent
//! holds a `flock` on its bead for as long as it runs, and `/proc` never shows two worker
//! processes of one label), no bead is lost (each ends closed with its work in the history or
//! kept on a branch, or blocked with a reason), no claim is left behind, the state and
//! STATUS.md are whole, and every commit reaches the upstream.
//!
//! `BRAIDS_CRASH_RUNS=20` repeats every point 20 times (the default is once, as CI runs it).

use std::collections::BTreeMap;

use super::*;
use braids::system::failpoint::POINTS;
use braids::tick::orchestrator_state::OrchestratorState;

use crate::support::checks::status_md_whole;
use crate::support::procs::pids;

/// The stand-in agent: it holds a lock on its bead while it works (a second agent on the
/// same bead writes `doubles`), waits for the test's go (so the workers started before the
/// crash are still working during the first ticks after it, whatever the machine's speed),
/// then writes a file of its own, a deliverable and a pass report.
fn agent(locks: &Path) -> String {
    format!(
        r#"exec 9>"{locks}/$BRAIDS_BEAD"
flock -n 9 || echo "$BRAIDS_BEAD" >> "{locks}/doubles"
while [ ! -e "{locks}/go" ]; do sleep 0.1; done
echo "work of $BRAIDS_BEAD" > "src/$BRAIDS_BEAD.txt"
cat > "$1" <<EOF
# Work on $BRAIDS_BEAD

## Summary

Did $BRAIDS_BEAD.
EOF
printf 'status: pass\nreason: null\nsummary: did the work\n' > "$BRAIDS_RESULT_FILE"
"#,
        locks = locks.display()
    )
}

/// Worker processes per session label, read from `/proc` (braids' own records are what is
/// under test): a worker runs `braids worker`, leads its own session (the agent gets a process
/// group of its own inside it) and carries `BRAIDS_LABEL`. (So does the `git maintenance` a
/// `git commit` detaches into a session of its own, which is why the command line is read.)
fn workers_by_label(home: &Path) -> BTreeMap<String, Vec<String>> {
    let mut by = BTreeMap::new();
    for pid in pids() {
        let Some(st) = crate::support::procs::stat(pid) else {
            continue;
        };
        if st.session != pid as i32 || !st.runs() {
            continue;
        }
        let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        let vars: Vec<&[u8]> = env.split(|b| *b == 0).collect();
        // Only this sandbox's workers: tests run side by side.
        let home_var = format!("HOME={}", home.display());
        if !vars.contains(&home_var.as_bytes()) {
            continue;
        }
        let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if cmd.split(|b| *b == 0).nth(1) != Some(b"worker") {
            continue;
        }
        if let Some(label) = vars.iter().find_map(|v| v.strip_prefix(b"BRAIDS_LABEL=")) {
            by.entry(String::from_utf8_lossy(label).into_owned())
                .or_insert_with(Vec::new)
                .push(format!(
                    "{pid} {st:?} {}",
                    String::from_utf8_lossy(&cmd).replace('\0', " ")
                ));
        }
    }
    by
}

/// Ticks run after the crash before the agents may finish.
const HELD_TICKS: usize = 3;

/// What one crash run found, for the summary line.
struct Crash {
    fired: usize,
    ticks: usize,
    kept: usize,
}

/// One run: crash at `point`, then tick until quiet and check everything.
fn crash_once(point: &str) -> Crash {
    let p = Project::new();
    // Three beads, three workers at once: at a worker's crash point every one of them dies,
    // the last story's included.
    p.set_field("MaxWorkers", "3");
    p.configure("[sessions]\nclaim_grace_secs = 0\nkill_grace_secs = 5\n");
    let locks = p.sb.home().join("locks");
    std::fs::create_dir_all(&locks).unwrap();
    p.agent(&agent(&locks));
    let ids = p.plan("active", &["One", "Two", "Three"]);

    let first =
        p.sb.tick()
            .force()
            .env("FAILPOINTS", &format!("{point}=return"))
            .output();
    // Killed by a signal: no exit code.
    let tick_died = first.code.is_none() && !first.timed_out;
    let check_doubles = |when: &str| {
        let doubles = std::fs::read_to_string(locks.join("doubles")).unwrap_or_default();
        assert!(
            doubles.is_empty(),
            "{point}: two agents on one bead ({when}): {doubles}"
        );
        let two: Vec<_> = workers_by_label(p.sb.home())
            .into_iter()
            .filter(|(_, n)| n.len() > 1)
            .collect();
        assert!(
            two.is_empty(),
            "{point}: two workers of one label ({when}): {two:?}"
        );
    };
    check_doubles("after the crash");
    if matches!(point, "session::after_spawn" | "session::after_record") {
        // The tick died at its first spawn, around the record: that one worker is found and
        // counted (its slot taken) by whoever looks next.
        let live = p.sb.live_labels();
        assert_eq!(
            live.len(),
            1,
            "{point}: the worker started before the crash: {live:?}"
        );
    }

    // Ticks until every bead is closed or blocked, no worker runs and no worktree is left (a
    // hang detector far above what the run takes).
    let start = Instant::now();
    let mut ticks = 1;
    let mut tick_log = first.stderr.clone();
    loop {
        let settled = ids
            .iter()
            .all(|id| matches!(p.status(id).as_str(), "closed" | "blocked"));
        // The workspaces folder, not `git worktree list`: a worker adding its worktree at that
        // moment (its records are written one file at a time) can make git's listing fail.
        let worktrees_left = !bead_worktree_files(&p.sb.braids_dir().join("workspaces")).is_empty();
        if settled
            && !worktrees_left
            && workers_by_label(p.sb.home()).is_empty()
            && p.sb.live_labels().is_empty()
        {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(300),
            "{point}: not quiet after 300 s: {:?}\n{}",
            ids.iter().map(|id| p.status(id)).collect::<Vec<_>>(),
            p.logs()
        );
        // Three ticks while every worker started before the crash still works: a run that
        // lost sight of one starts a second on its bead here.
        if ticks == HELD_TICKS + 1 {
            std::fs::write(locks.join("go"), "").unwrap();
        }
        let out = p.sb.tick().force().log("info").output();
        out.assert_ok();
        tick_log.push_str(&out.stderr);
        ticks += 1;
        check_doubles(&format!("after tick {ticks}"));
        std::thread::sleep(Duration::from_millis(300));
    }
    // The pushes a dead worker left undone are the next ticks' (4.4).
    let pushed = poll_until(Duration::from_secs(60), || {
        let out = p.sb.tick().force().log("info").output();
        out.assert_ok();
        tick_log.push_str(&out.stderr);
        ticks += 1;
        p.upstream_log() == p.log()
    });
    assert!(
        pushed,
        "{point}: commits never pushed: local {:?}, upstream {:?}",
        p.log(),
        p.upstream_log()
    );

    // The point fired: the tick was killed there, or a worker's log says it died there.
    let fired = if point.starts_with("worker::") {
        files_under(&p.sb.braids_dir().join("logs"))
            .iter()
            .filter(|f| {
                std::fs::read_to_string(f)
                    .unwrap_or_default()
                    .contains(&format!("crash point {point}:"))
            })
            .count()
    } else {
        assert!(
            tick_died,
            "{point}: the first tick was not killed: {first:?}"
        );
        1
    };
    assert!(
        fired > 0,
        "{point}: the crash point never fired\n{}",
        p.logs()
    );

    // No bead lost: closed with its work in the history or kept on a branch, or blocked
    // with a reason.
    let head_files = p.sb.git(&p.root, &["ls-tree", "-r", "--name-only", "HEAD"]);
    let kept_branches = lines(&p.sb.git(
        &p.root,
        &[
            "branch",
            "--list",
            "--format=%(refname:short)",
            "braids/kept/*",
        ],
    ));
    let mut kept = 0;
    for id in &ids {
        match p.status(id).as_str() {
            "closed" => {
                if !head_files.contains(&format!("src/{id}.txt")) {
                    assert!(
                        kept_branches.iter().any(|b| b.contains(id.as_str())),
                        "{point}: {id} is closed but its work is nowhere: branches {kept_branches:?}\n\
                         ticks said:\n{tick_log}\n{}",
                        p.sb.git(&p.root, &["log", "--all", "--oneline", "--graph", "--name-only", "--decorate"])
                    );
                    kept += 1;
                }
            }
            "blocked" => {
                let told = p.hook.messages("blocker");
                assert!(
                    told.iter().any(|m| m.contains(id.as_str())),
                    "{point}: {id} blocked and nobody told why: {told:?}"
                );
            }
            other => panic!("{point}: {id} ended {other}"),
        }
        // A worker killed after the close left its landing plan: the tick lands the work
        // instead of keeping it aside.
        assert!(
            point != "worker::after_close" || kept == 0,
            "{point}: {id}'s work was kept aside, not landed"
        );
    }

    // The iteration is complete once its last story is closed (3.7), however its worker ended,
    // unless a story's work waits on a kept branch for a person: then it stays active, and the
    // person was told.
    let iteration = std::fs::read_to_string(p.iteration_dir().join("ITERATION.md")).unwrap();
    if kept > 0 {
        assert!(
            !iteration.contains("complete"),
            "{point}: completed with work kept aside:\n{iteration}"
        );
        let told = p.hook.messages("blocker");
        assert!(
            told.iter()
                .filter(|m| m.contains("kept on branch braids/kept/"))
                .count()
                >= kept,
            "{point}: kept work and nobody told: {told:?}"
        );
    } else if ids.iter().all(|id| p.status(id) == "closed") {
        assert!(
            iteration.contains("complete"),
            "{point}: every story closed, the iteration not complete:\n{iteration}"
        );
    }

    // Nothing torn, no claim left behind.
    let state = OrchestratorState::load(&p.sb.state_path())
        .unwrap_or_else(|e| panic!("{point}: {e}"))
        .expect("a state file");
    assert!(
        state.claims.is_empty(),
        "{point}: claims left behind: {:?}",
        state.claims
    );
    let status = std::fs::read_to_string(p.sb.status_path()).unwrap();
    status_md_whole(&status, &[SLUG]).unwrap_or_else(|e| panic!("{point}: {e}"));
    Crash { fired, ticks, kept }
}

/// Runs `point` `BRAIDS_CRASH_RUNS` times (default once) and prints one summary line.
fn crash_matrix(point: &str) {
    let runs: usize = std::env::var("BRAIDS_CRASH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let (mut fired, mut ticks, mut kept) = (0, 0, 0);
    for _ in 0..runs {
        let c = crash_once(point);
        fired += c.fired;
        ticks += c.ticks;
        kept += c.kept;
    }
    eprintln!(
        "crash matrix: {point}: {runs} runs, fired {fired} times, {ticks} ticks, \
         {kept} closed beads' work kept on a branch, 0 violations"
    );
}

macro_rules! crash_tests {
    ($($test:ident => $point:literal,)*) => {
        $(
            #[test]
            fn $test() {
                crash_matrix($point);
            }
        )*

        #[test]
        fn c7_2_every_crash_point_has_its_test() {
            let tested = [$($point),*];
            assert_eq!(tested.as_slice(), POINTS, "a crash point without a test, or the reverse");
        }
    };
}

crash_tests! {
    c7_2_crash_tick_after_claim_recorded => "tick::after_claim_recorded",
    c7_2_crash_tick_after_claim => "tick::after_claim",
    c7_1_crash_session_after_pending_record => "session::after_pending_record",
    c7_1_crash_session_after_spawn_finds_the_running_worker => "session::after_spawn",
    c7_2_crash_session_after_record => "session::after_record",
    c7_2_crash_tick_after_act => "tick::after_act",
    c7_2_crash_worker_after_claim => "worker::after_claim",
    c7_2_crash_worker_after_agent => "worker::after_agent",
    c7_2_crash_worker_after_deliverable => "worker::after_deliverable",
    c7_2_crash_worker_after_close => "worker::after_close",
    c7_2_crash_worker_after_commit => "worker::after_commit",
    c7_2_crash_worker_after_iteration => "worker::after_iteration",
    c7_2_crash_worker_after_push => "worker::after_push",
}
