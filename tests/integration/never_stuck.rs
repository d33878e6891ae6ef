//! Never stuck, never doubled: a worker finishing its fixed steps is left to finish, a dead
//! worker's bead comes back fast, and its agent never outlives it. Real ticks, real `braids
//! worker` processes, real `br` and git with a bare upstream; the agent is an `sh` script.

use std::time::Duration;

use crate::support::{label, poll_until, wait_for, Install, ReportExt, Sandbox};

/// Writes its deliverable (`$1`) and a passing status report.
const AGENT: &str = r#"mkdir -p "$(dirname "$1")"
printf '# %s\n\n## Summary\n\nDid %s.\n' "$BRAIDS_BEAD" "$BRAIDS_BEAD" > "$1"
printf 'status: pass\nsummary: did it\n' > "$BRAIDS_RESULT_FILE"
"#;

/// Real workers running `agent` (see [`Install::agent`]), a kill grace of 5 s, and `extra`.
pub(crate) fn install(agent: &str, extra: &str) -> Sandbox {
    let mut i = Install::new()
        .config("[sessions]\nkill_grace_secs = 5\n")
        .agent(agent);
    if !extra.is_empty() {
        i = i.config(extra);
    }
    i.build()
}

/// A bare upstream for the project, whose pushes are received through `hook` (a
/// `pre-receive` body).
fn upstream(sb: &Sandbox, slug: &str, hook: &str) -> std::path::PathBuf {
    let root = sb.project(slug);
    let bare = sb.home().join(format!("{slug}.git"));
    sb.git(sb.home(), &["init", "-q", "--bare", bare.to_str().unwrap()]);
    sb.git(&root, &["remote", "add", "origin", bare.to_str().unwrap()]);
    sb.git(&root, &["push", "-q", "-u", "origin", "HEAD"]);
    if !hook.is_empty() {
        crate::support::files::write_script(&bare.join("hooks/pre-receive"), hook);
    }
    bare
}

#[test]
fn c2_6_a_worker_pushing_slowly_after_closing_its_bead_is_left_to_finish() {
    let sb = install(AGENT, "");
    let app = sb.new_project("app").br().beads(1).create();
    let bead = &app.beads[0];
    // The upstream takes 20 s to take a push: four times the kill grace.
    let bare = upstream(&sb, "app", "sleep 20\n");
    let r = sb.tick().force().run();
    assert_eq!(r.spawned_beads(), [bead.clone()], "{r:#?}");
    let l = label("app", bead);
    wait_for(
        "the bead closed by its worker",
        Duration::from_secs(120),
        || (sb.br_status("app", bead) == "closed").then_some(()),
    );
    // Closed, committed, pushing: every tick leaves the worker alone until its push is done.
    // Once its fixed steps are over its finishing mark goes, a moment before the process
    // ends: a tick then may take it for a closed bead's worker. Finding it already gone
    // stopped nothing, nor does a stop once its push had landed before the tick began.
    let landed = || {
        sb.git(&bare, &["log", "--format=%s", "main"])
            .contains(bead.as_str())
    };
    let mut ticks = 0;
    while sb.live_labels().contains(&l) {
        let done_before = landed();
        let r = sb.tick().force().run();
        assert!(
            r.zombies.iter().all(|z| z.label != l
                || done_before
                || z.outcome == Some(braids::session::KillOutcome::AlreadyGone)),
            "a finishing worker was stopped: {r:#?}"
        );
        ticks += 1;
        std::thread::sleep(Duration::from_secs(1));
        assert!(ticks < 120, "the worker never ended");
    }
    assert!(
        ticks >= 3,
        "the push was not slow enough to test anything ({ticks} ticks)"
    );
    let pushed = sb.git(&bare, &["log", "--format=%s", "main"]);
    assert!(
        pushed.contains(bead.as_str()),
        "the push was cut off: {pushed}"
    );
}

#[test]
fn c2_6_a_finishing_mark_left_by_a_dead_worker_protects_no_later_one() {
    // A worker that died finishing leaves its mark; the next worker of the bead is a new
    // session, and a closed bead makes it a zombie as before.
    let sb = install("sleep 600\n", "");
    let app = sb.new_project("app").beads(1).create();
    let bead = &app.beads[0];
    let mark = sb.braids_dir().join(format!("work/app/{bead}/finishing"));
    std::fs::create_dir_all(mark.parent().unwrap()).unwrap();
    std::fs::write(&mark, "1").unwrap();
    std::thread::sleep(Duration::from_millis(1100));
    let r = sb.tick().force().run();
    assert_eq!(r.spawned_beads(), [bead.clone()]);
    sb.wait_agent(bead);
    sb.close_by_hand("app", bead);
    let l = label("app", bead);
    assert!(
        poll_until(Duration::from_secs(60), || {
            let r = sb.tick().force().run();
            r.zombies.iter().any(|z| z.label == l)
        }),
        "the worker of a bead closed by hand was never stopped"
    );
}

#[test]
fn c2_7_a_stalled_worker_is_stopped_and_its_bead_done_under_plain_scheduled_ticks() {
    // The agent hangs silently the first time and works the second. About StallTimeout: 5 s.
    let agent = format!(
        "if [ ! -e \"$HOME/hung-once\" ]; then touch \"$HOME/hung-once\"; exec sleep 600; fi\n{AGENT}"
    );
    let sb = install(&agent, "");
    let app = sb
        .new_project("app")
        .beads(1)
        .field("StallTimeout", "5s")
        .create();
    let bead = &app.beads[0];
    // A scheduler's ticks, every 2 s: no --force, so the idle backoff applies.
    let started = std::time::Instant::now();
    let mut stalled = false;
    while sb.workplan("app")[bead].0 != "closed" {
        let r = sb.tick().run();
        stalled |= r
            .zombies
            .iter()
            .any(|z| z.reason == braids::tick::decide::ZombieReason::Stalled);
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "the bead is not done 90 s after its first spawn (stalled worker stopped: {stalled}): {r:#?}"
        );
        std::thread::sleep(Duration::from_secs(2));
    }
    assert!(stalled, "the first worker was never stopped as stalled");
    let events = sb.ok(&["events", "--json"]);
    assert!(
        events.contains("claim_released"),
        "the release is an event: {events}"
    );
}

/// The pid of a live `sleep 613`, the agent of the test below.
fn agent_pid() -> Option<u32> {
    crate::support::procs::pids().find(|pid| {
        std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == b"sleep\x00613\x00")
            && crate::support::procs::alive(*pid)
    })
}

#[test]
fn c2_6_a_sigkilled_workers_agent_dies_with_it() {
    // The agent is the process its executor starts (as an agent CLI is), hung.
    let sb = install("exec sleep 613\n", "");
    let app = sb.new_project("app").beads(1).create();
    let r = sb.tick().force().run();
    assert_eq!(r.spawned_beads(), [app.beads[0].clone()]);
    let agent = wait_for("the agent running", Duration::from_secs(60), agent_pid);
    let worker = sb.pid_of(&label("app", &app.beads[0]));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(worker as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    assert!(
        poll_until(Duration::from_secs(10), || !crate::support::procs::alive(
            agent
        )),
        "the agent of a SIGKILLed worker lives on"
    );
    // The worker is gone for sure: its claim comes back at the next run, not after the grace.
    wait_for("the worker gone", Duration::from_secs(30), || {
        sb.live_labels().is_empty().then_some(())
    });
    let r = sb.tick().force().run();
    assert_eq!(r.released.len(), 1, "{r:#?}");
}

/// The pid of a live `sleep 617`, the agent's child in the test below.
fn agent_child_pid() -> Option<u32> {
    crate::support::procs::pids().find(|pid| {
        std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == b"sleep\x00617\x00")
            && crate::support::procs::alive(*pid)
    })
}

#[test]
fn c2_6_the_children_of_a_sigkilled_workers_agent_are_stopped_before_its_bead_is_handed_on() {
    // The first time, the agent leaves a child working (in the agent's own group) and hangs;
    // the second time it does the work.
    let agent = format!(
        "if [ ! -e \"$HOME/hung-once\" ]; then touch \"$HOME/hung-once\"; sleep 617 & wait; fi\n{AGENT}"
    );
    let sb = install(&agent, "");
    let app = sb.new_project("app").beads(1).create();
    let bead = &app.beads[0];
    let r = sb.tick().force().run();
    assert_eq!(r.spawned_beads(), [bead.clone()]);
    let child = wait_for(
        "the agent's child",
        Duration::from_secs(60),
        agent_child_pid,
    );
    let worker = sb.pid_of(&label("app", bead));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(worker as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    wait_for("the worker gone", Duration::from_secs(30), || {
        (!crate::support::procs::alive(worker)).then_some(())
    });
    assert!(
        crate::support::procs::alive(child),
        "nothing to test: the child died with the agent"
    );
    // The next run stops what the worker left, releases the bead, and does not hand it on yet.
    let r = sb.tick().force().run();
    assert!(
        r.zombies
            .iter()
            .any(|z| z.reason == braids::tick::decide::ZombieReason::WorkerGone),
        "{r:#?}"
    );
    assert!(
        !crate::support::procs::alive(child),
        "the agent's child lives on"
    );
    assert_eq!(r.released.len(), 1, "{r:#?}");
    assert!(r.spawned_beads().is_empty(), "{r:#?}");
    // The run after hands it on, and it is done.
    let r = sb.tick().force().run();
    assert_eq!(r.spawned_beads(), [bead.clone()], "{r:#?}");
    wait_for("the bead closed", Duration::from_secs(120), || {
        (sb.workplan("app")[bead].0 == "closed").then_some(())
    });
    let events = sb.ok(&["events", "--json"]);
    assert!(events.contains("claim_released"), "{events}");
}

#[test]
fn c2_13_a_worker_that_waits_out_a_lock_hands_its_bead_back_uncounted() {
    let sb = install(AGENT, "");
    let app = sb.new_project("app").beads(1).create();
    let bead = &app.beads[0];
    // Another process holds git's worktree bookkeeping for longer than a worker waits (120 s).
    let lock = sb.project("app").join(".git/braids-worktrees.lock");
    let mut holder = std::process::Command::new("flock")
        .arg("-x")
        .arg(&lock)
        .args(["sleep", "150"])
        .spawn()
        .unwrap();
    assert!(poll_until(Duration::from_secs(10), || lock.exists()));
    let r = sb.tick().force().run();
    assert_eq!(r.spawned_beads(), [bead.clone()]);
    wait_for(
        "the worker to give up waiting",
        Duration::from_secs(200),
        || sb.live_labels().is_empty().then_some(()),
    );
    let _ = holder.kill();
    let _ = holder.wait();
    // Open again, no failure counted, nothing blocked.
    assert_eq!(sb.workplan("app")[bead].0, "open");
    let attempts =
        std::fs::read_to_string(sb.braids_dir().join("attempts.json")).unwrap_or_default();
    assert!(
        !attempts.contains(bead.as_str()),
        "a wait counted as a failure: {attempts}"
    );
    // And the next run does the work.
    let r = sb.tick().force().run();
    assert_eq!(r.spawned_beads(), [bead.clone()], "{r:#?}");
    wait_for("the bead closed", Duration::from_secs(120), || {
        (sb.workplan("app")[bead].0 == "closed").then_some(())
    });
}

/// The pid of a live `sleep 619`, the agent of the test below.
fn backoff_agent_pid() -> Option<u32> {
    crate::support::procs::pids().find(|pid| {
        std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == b"sleep\x00619\x00")
            && crate::support::procs::alive(*pid)
    })
}

#[test]
fn c2_7_a_worker_that_dies_while_runs_back_off_hands_its_bead_on_at_the_next_plain_run() {
    let sb = install("exec sleep 619\n", "");
    let app = sb.new_project("app").beads(1).create();
    let bead = &app.beads[0];
    let r = sb.tick().force().run();
    assert_eq!(r.spawned_beads(), [bead.clone()]);
    let agent = wait_for(
        "the agent running",
        Duration::from_secs(60),
        backoff_agent_pid,
    );
    // Every slot busy: the runs back off.
    let mut skipped = false;
    for _ in 0..3 {
        if sb.tick().run().skip.is_some() {
            skipped = true;
            break;
        }
    }
    assert!(skipped, "the plain runs never backed off");
    // The worker and its agent die; no file of the project changes.
    let worker = sb.pid_of(&label("app", bead));
    for pid in [worker, agent] {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    wait_for("the worker gone", Duration::from_secs(30), || {
        sb.live_labels().is_empty().then_some(())
    });
    // The next plain run is a full one and hands the bead on, not the end of the backoff.
    let r = sb.tick().run();
    assert_eq!(r.skip, None, "{r:#?}");
    assert_eq!(r.released.len(), 1, "{r:#?}");
    // The ended session was forgotten: no later run finds it again.
    let r = sb.tick().force().run();
    assert!(r.released.is_empty(), "{r:#?}");
}
