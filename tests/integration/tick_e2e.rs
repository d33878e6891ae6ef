//! `braids tick` end to end: the real binary, a real `br` (and the native WORKPLAN.md tracker),
//! real worker processes, real signals. Each test builds its own installation in a throwaway
//! HOME ([`crate::support::Install`]) and proves one part of CONTRACTS 1.5, 1.6 and 2.x; tests
//! are named after the section they prove.
//!
//! Workers here are not agents: `[worker] command` is a shell script ([`SLEEPER`], [`QUITTER`])
//! that records the spawn message it got on stdin and then sleeps (or exits at once). The tests
//! poll with deadlines rather than sleeping for fixed times, except where the contract itself
//! is about elapsed time (WorkerTimeout, the claim grace period).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use braids::tick::decide::ZombieReason;
use braids::tick::orchestrator_state::IdleReason;
use braids::tick::{Action, RunType, SkipReason, TickReport};
use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::support::files::{snapshot, walk};
use crate::support::procs::{
    group_alive, proc_starttime, process_with_arg, stat, Bystander, KillGroup,
};
use crate::support::{label, wait_for, Install, ReportExt, Sandbox, QUITTER, SLEEPER};

// ---------------------------------------------------------------------------------------------
// Helpers

/// The keys `braids tick --json` prints, as docs/commands.md ("`braids tick --json`") documents them.
const REPORT_KEYS: &[&str] = &[
    "run",
    "action",
    "idle_reason",
    "spawns",
    "zombies",
    "errors",
    // documented additions
    "warnings",
    "released",
    "pushed",
    "checkins",
    "dry_run",
];
/// A skipped run adds these two.
const SKIPPED_KEYS: &[&str] = &["skip", "next_full_run"];
const SPAWN_KEYS: &[&str] = &[
    "project",
    "bead",
    "iteration",
    "channel",
    "path",
    "label",
    "worker_timeout",
];
const ZOMBIE_KEYS: &[&str] = &["label", "bead", "reason", "outcome"];
const RELEASED_KEYS: &[&str] = &["project", "bead"];

/// An installation whose workers run `worker` (a shell script body).
fn install(worker: &str) -> Sandbox {
    Install::new().worker(worker).build()
}

/// A br project with MaxWorkers `max` and `beads` beads, all listed in an active iteration 1.
/// Returns the bead ids in creation (= Stories) order.
fn br_project(sb: &Sandbox, slug: &str, max: u32, beads: usize) -> Vec<String> {
    sb.new_project(slug)
        .br()
        .max_workers(max)
        .beads(beads)
        .create()
        .beads
}

/// The same on the native tracker: WORKPLAN.md items with explicit ids `<slug>-w<i>`.
fn workplan_project(sb: &Sandbox, slug: &str, max: u32, beads: usize) -> Vec<String> {
    sb.new_project(slug)
        .max_workers(max)
        .beads(beads)
        .create()
        .beads
}

/// (bead, reason) of each zombie a report killed, by bead.
fn killed_sorted(report: &TickReport) -> Vec<(String, ZombieReason)> {
    let mut z = report.killed();
    z.sort_by(|a, b| a.0.cmp(&b.0));
    z
}

/// Sleeps until the wall clock has passed `t` (for contracts about elapsed time).
fn sleep_until(t: DateTime<Utc>) {
    let left = (t - Utc::now()).to_std().unwrap_or_default();
    std::thread::sleep(left + Duration::from_millis(50));
}

fn time(v: &Value) -> DateTime<Utc> {
    v.as_str()
        .unwrap_or_else(|| panic!("not a timestamp: {v}"))
        .parse()
        .unwrap()
}

fn keys(v: &Value) -> BTreeSet<&str> {
    v.as_object().unwrap().keys().map(String::as_str).collect()
}

fn set(k: &[&'static str]) -> BTreeSet<&'static str> {
    k.iter().copied().collect()
}

// ---------------------------------------------------------------------------------------------
// 2.2 Concurrency enforcement

#[test]
fn c2_2_spawns_up_to_max_workers_and_no_further() {
    let sb = install(SLEEPER);
    let ids = br_project(&sb, "app", 2, 5);

    let r1 = sb.tick().run();
    r1.assert_no_errors();
    assert_eq!((r1.run, r1.action), (RunType::Full, Action::Spawn));
    assert_eq!(r1.idle_reason, None);
    assert_eq!(r1.spawned_beads(), ids[..2], "Stories order, MaxWorkers 2");
    let expected: BTreeSet<String> = ids[..2].iter().map(|b| label("app", b)).collect();
    assert_eq!(sb.live_labels(), expected);
    for b in &ids[..2] {
        let bead = sb.br_show("app", b);
        assert_eq!(bead["status"], "in_progress", "{bead}");
        assert_eq!(bead["assignee"], "braids", "{bead}");
    }
    for b in &ids[2..] {
        assert_eq!(sb.br_status("app", b), "open");
    }
    let pids: Vec<u32> = expected.iter().map(|l| sb.pid_of(l)).collect();

    // Busy runs are never skipped; this one finds both slots taken.
    let r2 = sb.tick().run();
    r2.assert_no_errors();
    assert_eq!(r2.run, RunType::Full);
    assert_eq!(r2.action, Action::Idle);
    assert_eq!(r2.idle_reason, Some(IdleReason::AllAtCapacity), "{r2:#?}");
    assert!(r2.spawned().is_empty() && r2.zombies.is_empty(), "{r2:#?}");
    assert_eq!(sb.live_labels(), expected);
    let pids_now: Vec<u32> = expected.iter().map(|l| sb.pid_of(l)).collect();
    assert_eq!(pids, pids_now, "the same two workers");
    assert_eq!(sb.br_with_status("app", "in_progress").len(), 2);
    assert_eq!(sb.state().idle_reason, Some(IdleReason::AllAtCapacity));
}

#[test]
fn c2_10_an_old_state_file_then_a_slug_renamed_while_its_worker_runs_strands_nothing() {
    let sb = Install::new()
        .worker(SLEEPER)
        .config("[sessions]\nclaim_grace_secs = 0\n")
        .build();
    let ids = workplan_project(&sb, "app", 1, 2);
    let r1 = sb.tick().run();
    r1.assert_no_errors();
    assert_eq!(r1.spawned_beads(), ids[..1]);
    let old = label("app", &ids[0]);
    wait_for("the worker to run", Duration::from_secs(20), || {
        sb.spawn_message(&old)
    });

    // The state as the release before claims carried directories wrote it: matched by slug,
    // kept while its worker runs, and given the project's directory.
    let previous = format!(
        r#"{{
  "idleSince": null,
  "idleReason": null,
  "lastRunAt": "2026-01-01T00:00:00Z",
  "claims": [
    {{
      "project": "app",
      "bead": "{}",
      "claimedAt": "2026-01-01T00:00:00Z"
    }}
  ]
}}
"#,
        ids[0]
    );
    std::fs::write(sb.state_path(), previous).unwrap();
    let r2 = sb.tick().force().run();
    r2.assert_no_errors();
    assert!(
        r2.released_pairs().is_empty() && r2.spawns.is_empty(),
        "{r2:#?}"
    );
    let claims = sb.state().claims;
    assert_eq!(claims.len(), 1, "{claims:?}");
    assert_eq!(claims[0].path.as_deref(), Some(sb.project("app").as_path()));

    // A person renames the project; its worker runs on as project:app:<bead>.
    let registry = std::fs::read_to_string(sb.registry_path()).unwrap();
    let renamed = registry.replacen("| app ", "| site ", 1);
    assert_ne!(registry, renamed, "{registry}");
    std::fs::write(sb.registry_path(), renamed).unwrap();
    let r3 = sb.tick().force().run();
    r3.assert_no_errors();
    assert!(r3.released_pairs().is_empty(), "{r3:#?}");
    // it is still site's worker (its claim says so): site's one slot is taken
    assert!(r3.spawns.is_empty() && r3.zombies.is_empty(), "{r3:#?}");
    assert_eq!(sb.workplan("app")[&ids[0]].0, "in_progress");

    // The worker dies: its claim goes back through the new slug, and nothing stays in_progress
    // for a worker that is gone.
    let _ = nix::sys::signal::killpg(
        nix::unistd::Pid::from_raw(sb.pid_of(&old) as i32),
        nix::sys::signal::Signal::SIGKILL,
    );
    wait_for("the old worker to die", Duration::from_secs(20), || {
        (!sb.live_labels().contains(&old)).then_some(())
    });
    let r4 = sb.tick().force().run();
    r4.assert_no_errors();
    assert!(
        r4.released_pairs()
            .contains(&("site".to_string(), ids[0].clone())),
        "{r4:#?}"
    );
    assert_eq!(sb.workplan("app")[&ids[0]].0, "open");
    assert!(
        !sb.state().claims.iter().any(|c| c.bead.as_str() == ids[0]),
        "a released claim is forgotten"
    );
    sb.kill_workers();
}

#[test]
fn c2_2_an_ended_worker_is_not_counted_and_its_claim_is_released() {
    // The grace covers a worker not seen yet; an ended one's claim is released at once,
    // whatever the grace (here an hour).
    let grace = 3600;
    let sb = Install::new()
        .worker(QUITTER)
        .config(&format!("[sessions]\nclaim_grace_secs = {grace}\n"))
        .build();
    let ids = br_project(&sb, "app", 1, 3);

    let t0 = Instant::now();
    let r1 = sb.tick().run();
    r1.assert_no_errors();
    assert_eq!(r1.spawned_beads(), ids[..1]);
    let first = label("app", &ids[0]);
    wait_for("the first worker to run", Duration::from_secs(20), || {
        sb.spawn_message(&first)
    });
    wait_for("the first worker to exit", Duration::from_secs(20), || {
        sb.live_labels().is_empty().then_some(())
    });

    // Its slot is free again although its bead is still in_progress (nobody closed it).
    let r2 = sb.tick().run();
    let r2_done = t0.elapsed();
    r2.assert_no_errors();
    assert_eq!(r2.spawned_beads(), ids[1..2], "{r2:#?}");
    assert!(r2.zombies.is_empty(), "an ended session is not a zombie");
    assert!(r2_done < Duration::from_secs(grace));
    assert!(
        r2.released_pairs()
            .contains(&("app".to_string(), ids[0].clone())),
        "an ended worker's claim is released at once, inside the grace: {r2:#?}"
    );
    // Released: open, nobody's, and the claim forgotten.
    let bead = sb.br_show("app", &ids[0]);
    assert_eq!(bead["status"], "open", "{bead}");
    assert!(
        bead.get("assignee").is_none_or(|a| a.is_null() || a == ""),
        "{bead}"
    );
    let claims = sb.state().claims;
    assert!(
        !claims.iter().any(|c| c.bead.as_str() == ids[0]),
        "a released claim is forgotten: {claims:?}"
    );
    wait_for("the second worker to exit", Duration::from_secs(20), || {
        sb.live_labels().is_empty().then_some(())
    });

    // The second worker ended too: its claim goes, and a ready bead other than it takes the
    // slot (never the bead released in the same run).
    let r3 = sb.tick().run();
    r3.assert_no_errors();
    assert!(
        r3.released_pairs()
            .contains(&("app".to_string(), ids[1].clone())),
        "{r3:#?}"
    );
    for r in r3.released_pairs() {
        assert!(
            !r3.spawned().contains(&r),
            "a bead is not respawned in the run that released it"
        );
    }
    assert_eq!(r3.spawned_beads().len(), 1, "{r3:#?}");
}

#[test]
fn c2_2_concurrent_ticks_spawn_each_bead_once() {
    let sb = install(SLEEPER);
    let a = br_project(&sb, "alpha", 2, 5);
    let b = br_project(&sb, "beta", 2, 5);
    let mut seen: BTreeSet<(String, String)> = BTreeSet::new();

    let check = |reports: &[TickReport], seen: &mut BTreeSet<(String, String)>| {
        for r in reports {
            r.assert_no_errors();
            let locked = r.run == RunType::Skipped && r.skip == Some(SkipReason::Locked);
            assert!(r.run == RunType::Full || locked, "{r:#?}");
            for s in r.spawned() {
                assert!(seen.insert(s.clone()), "{s:?} spawned twice");
            }
        }
        let live = sb.live_labels();
        for (slug, ids) in [("alpha", &a), ("beta", &b)] {
            let mine: BTreeSet<String> = live
                .iter()
                .filter_map(|l| l.strip_prefix(&format!("project:{slug}:")))
                .map(String::from)
                .collect();
            assert!(
                mine.len() <= 2,
                "{slug} has {} workers: {mine:?}",
                mine.len()
            );
            assert_eq!(mine.len(), 2, "{slug} is kept at capacity");
            let claimed = sb.br_with_status(slug, "in_progress");
            assert_eq!(mine, claimed, "{slug}: one worker per claimed bead");
            assert!(mine.iter().all(|m| ids.contains(m)));
        }
    };

    let batch1 = sb.concurrent_ticks(2);
    check(&batch1, &mut seen);
    assert_eq!(seen.len(), 4, "{batch1:#?}");

    // Free one slot per project, then race ten ticks for them.
    sb.br("alpha", &["close", &a[0], "--json"]);
    sb.br("beta", &["close", &b[0], "--json"]);
    let batch2 = sb.concurrent_ticks(10);
    check(&batch2, &mut seen);
    assert_eq!(seen.len(), 6, "{batch2:#?}");
    let mut killed: Vec<(String, ZombieReason)> = batch2.iter().flat_map(|r| r.killed()).collect();
    let mut want: Vec<(String, ZombieReason)> = [&a[0], &b[0]]
        .into_iter()
        .map(|id| (id.clone(), ZombieReason::BeadClosed))
        .collect();
    assert_eq!(killed.len(), 2, "each zombie killed once: {killed:?}");
    killed.sort_by(|x, y| x.0.cmp(&y.0));
    want.sort_by(|x, y| x.0.cmp(&y.0));
    assert_eq!(killed, want);
    let full = batch2.iter().filter(|r| r.run == RunType::Full).count();
    assert!(full >= 1, "at least one of the ten ran");
}

#[test]
fn c2_2_an_unreadable_session_record_still_holds_its_slot() {
    let sb = install(SLEEPER);
    let ids = br_project(&sb, "app", 1, 2);
    let r1 = sb.tick().run();
    assert_eq!(r1.spawned_beads(), ids[..1]);
    let l0 = label("app", &ids[0]);
    let pid = sb.pid_of(&l0);
    // Sandbox's Drop cannot read the record once it is garbage: kill the worker here.
    let _group = KillGroup(pid);

    // The record of a live worker becomes unreadable (a disk error, a person's edit).
    let record = sb.sessions_dir().join(format!("app_{}.json", ids[0]));
    std::fs::write(&record, "{ this is not a session record").unwrap();

    // braids cannot tell whether that worker runs, so it assumes it does: the slot stays
    // taken, its bead is not handed out again, nothing is killed, and a person is told.
    let r2 = sb.tick().run();
    assert!(
        r2.spawned().is_empty(),
        "MaxWorkers 1 is not exceeded: {r2:#?}"
    );
    assert!(r2.zombies.is_empty());
    assert!(
        r2.errors.iter().any(|e| e.contains(&l0)),
        "the unreadable record is reported: {r2:#?}"
    );
    assert_eq!(r2.idle_reason, Some(IdleReason::AllAtCapacity));
    assert!(group_alive(pid), "not killed");
    assert_eq!(sb.br_status("app", &ids[1]), "open");
    let status = std::fs::read_to_string(sb.status_path()).unwrap();
    assert!(status.contains(&l0), "{status}");

    // Once the record is gone (a person removed it after checking), the slot is free.
    nix::sys::signal::killpg(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    std::fs::remove_file(&record).unwrap();
    let r3 = sb.tick().force().run();
    assert_eq!(r3.spawned_beads(), ids[1..2], "{r3:#?}");
}

#[test]
fn c2_2_a_worker_whose_leader_exited_leaves_an_agent_that_is_stopped_before_its_bead_goes_on() {
    // The agent outlives the process braids started (a worker that crashed, or backgrounded
    // its agent): it works for nobody, so the next run stops it and releases the bead.
    let orphaning = r#"cat > "$HOME/got-$BRAIDS_LABEL"
sleep 300 &
echo $! > "$HOME/child-$BRAIDS_LABEL"
exit 0"#;
    let sb = Install::new().worker(orphaning).build();
    let ids = br_project(&sb, "app", 1, 2);
    let r1 = sb.tick().run();
    assert_eq!(r1.spawned_beads(), ids[..1]);
    let l0 = label("app", &ids[0]);
    let record = sb.sessions_dir().join(format!("app_{}.json", ids[0]));
    let leader: Value = serde_json::from_slice(&std::fs::read(&record).unwrap()).unwrap();
    let leader = leader["pid"].as_u64().unwrap() as u32;
    let child: u32 = wait_for("the agent to start", Duration::from_secs(20), || {
        std::fs::read_to_string(sb.home().join(format!("child-{l0}")))
            .ok()
            .and_then(|t| t.trim().parse().ok())
    });
    let _group = KillGroup(leader);
    wait_for("the leader to exit", Duration::from_secs(20), || {
        stat(leader).is_none_or(|s| !s.runs()).then_some(())
    });
    assert!(stat(child).is_some_and(|s| s.state != 'Z' && s.pgrp == leader as i32));

    // Listed as running for nobody; the next run stops it, releases its claim, and hands the
    // slot to the next bead, not to the released one.
    let listed = sb.ok(&["sessions", "--json"]);
    assert!(listed.contains("\"worker_gone\": true"), "{listed}");
    let r2 = sb.tick().run();
    r2.assert_no_errors();
    assert_eq!(r2.killed(), [(ids[0].clone(), ZombieReason::WorkerGone)]);
    assert!(!group_alive(leader), "the agent was stopped with its group");
    assert_eq!(r2.released_pairs().len(), 1, "{r2:#?}");
    assert_eq!(r2.spawned_beads(), ids[1..2]);
    assert_eq!(sb.br_status("app", &ids[0]), "open");
}

// ---------------------------------------------------------------------------------------------
// 2.4 Spawn message, 2.5 session label

#[test]
fn c2_4_c2_5_spawn_message_is_four_lines_and_label_is_project_slug_bead() {
    let sb = install(SLEEPER);
    let with = sb
        .new_project("chat")
        .br()
        .max_workers(1)
        .channel("#dev-chat")
        .beads(1)
        .create()
        .beads[0]
        .clone();
    let without = br_project(&sb, "quiet", 1, 1)[0].clone();

    let r = sb.tick().run();
    r.assert_no_errors();
    assert_eq!(r.spawned().len(), 2, "{r:#?}");
    for (slug, bead, channel) in [("chat", &with, "#dev-chat"), ("quiet", &without, "")] {
        let l = label(slug, bead);
        let msg = wait_for(
            &format!("the spawn message of {l}"),
            Duration::from_secs(20),
            || sb.spawn_message(&l),
        );
        assert_eq!(
            msg,
            format!(
                "Project: {}\nBead: {bead}\nIteration: 001\nChannel: {channel}\n",
                sb.project(slug).display()
            ),
            "exactly the four fields (2.4)"
        );
        let s = r.spawns.iter().find(|s| s.bead.as_str() == bead).unwrap();
        assert_eq!(s.label, l);
        assert_eq!(s.project, slug);
        assert_eq!(s.iteration.as_str(), "001", "the directory name as written");
        assert_eq!(s.path, sb.project(slug).display().to_string());
        assert_eq!(s.worker_timeout, 3600);
        if channel.is_empty() {
            assert_eq!(s.channel, None);
        } else {
            assert_eq!(s.channel.as_deref(), Some(channel));
        }
    }
    // The backend knows them by label (2.5), and the label prefix counts per project.
    let live = sb.live();
    assert_eq!(
        live.keys().cloned().collect::<Vec<_>>(),
        vec![label("chat", &with), label("quiet", &without)]
    );
    for s in live.values() {
        assert_eq!(s["running"], true);
        assert!(s["pid"].as_u64().unwrap() > 1);
    }
    let status = std::fs::read_to_string(sb.status_path()).unwrap();
    assert!(status.contains(&format!("`{}` running", label("chat", &with))));
}

// ---------------------------------------------------------------------------------------------
// 2.6 Zombie cleanup priority

#[test]
fn c2_6_a_closed_bead_gets_its_worker_killed_and_the_next_bead_spawned() {
    let sb = install(SLEEPER);
    let ids = br_project(&sb, "app", 2, 3);
    let r1 = sb.tick().run();
    r1.assert_no_errors();
    assert_eq!(r1.spawned_beads(), ids[..2]);
    let (l0, l1) = (label("app", &ids[0]), label("app", &ids[1]));
    let (p0, p1) = (sb.pid_of(&l0), sb.pid_of(&l1));
    assert!(group_alive(p0) && group_alive(p1));

    sb.br(
        "app",
        &["close", &ids[0], "--reason=done by a person", "--json"],
    );
    let r2 = sb.tick().run();
    r2.assert_no_errors();
    assert_eq!(r2.killed(), [(ids[0].clone(), ZombieReason::BeadClosed)]);
    assert_eq!(r2.zombies[0].label, l0);
    assert!(
        !group_alive(p0),
        "the killed worker's process group is gone"
    );
    assert!(group_alive(p1), "the other worker is untouched");
    assert_eq!(
        r2.spawned_beads(),
        ids[2..3],
        "its slot goes to the next bead"
    );
    let now: BTreeSet<String> = [l1, label("app", &ids[2])].into();
    assert_eq!(sb.live_labels(), now);
    assert!(
        !sb.sessions_dir()
            .join(format!("app_{}.json", ids[0]))
            .exists(),
        "the killed session is forgotten"
    );
}

#[test]
fn c2_6_timeout_kills_and_bead_status_is_checked_before_runtime() {
    // About WorkerTimeout: 2 s, and the run comes 3 s after the last worker started, by the
    // wall clock (sleep_until), so no machine is too slow for it.
    let sb = install(SLEEPER);
    let ids = br_project(&sb, "app", 2, 3);
    sb.set_field("app", "WorkerTimeout", "2");
    let r1 = sb.tick().run();
    r1.assert_no_errors();
    assert_eq!(r1.spawned_beads(), ids[..2]);
    assert_eq!(r1.spawns[0].worker_timeout, 2);
    let sessions = sb.live();
    let (l0, l1) = (label("app", &ids[0]), label("app", &ids[1]));
    let (p0, p1) = (
        sessions[&l0]["pid"].as_u64().unwrap() as u32,
        sessions[&l1]["pid"].as_u64().unwrap() as u32,
    );
    let latest = sessions
        .values()
        .map(|s| time(&s["started_at"]))
        .max()
        .unwrap();

    // Both run past WorkerTimeout; one's bead is closed meanwhile.
    sb.br("app", &["close", &ids[0], "--json"]);
    sleep_until(latest + chrono::Duration::seconds(3));
    let r2 = sb.tick().run();
    r2.assert_no_errors();
    let z = killed_sorted(&r2);
    let mut want = vec![
        (ids[0].clone(), ZombieReason::BeadClosed),
        (ids[1].clone(), ZombieReason::Timeout),
    ];
    want.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(z, want, "bead status first, then runtime: {r2:#?}");
    assert!(!group_alive(p0) && !group_alive(p1), "both groups are gone");
    // The timed-out bead's claim is released once its worker is stopped (open again, after its
    // retry wait), but it is not handed to a new worker in the same run; the freed slots go to
    // the remaining ready bead.
    assert_eq!(sb.br_status("app", &ids[1]), "open");
    assert!(
        r2.released_pairs()
            .contains(&("app".to_string(), ids[1].clone())),
        "{r2:#?}"
    );
    assert_eq!(r2.spawned_beads(), ids[2..3], "{r2:#?}");
}

#[test]
fn c2_6_a_reused_pid_is_not_running_and_never_signalled() {
    let sb = install(SLEEPER);
    let ids = br_project(&sb, "app", 1, 2);
    sb.br("app", &["close", &ids[1], "--json"]);

    // Somebody else's process, leading its own process group (so a killpg on its pid would
    // reach it), with session records claiming its pid for two beads — but a different start
    // time, as when the kernel reuses the pid of a worker that exited long ago.
    let other = Bystander::start();
    let pid = other.pid();
    let start = wait_for(
        "/proc of the unrelated process",
        Duration::from_secs(30),
        || proc_starttime(pid),
    );
    let long_ago = (Utc::now() - chrono::Duration::hours(2)).to_rfc3339();
    let sessions = sb.sessions_dir();
    std::fs::create_dir_all(&sessions).unwrap();
    for id in &ids {
        let record = serde_json::json!({
            "label": label("app", id),
            "pid": pid,
            "starttime": start + 1,
            "started_at": long_ago,
            "log": sb.home().join("old.log"),
            "argv": ["/usr/bin/sleep", "300"],
            "cwd": sb.project("app"),
        });
        std::fs::write(
            sessions.join(format!("app_{id}.json")),
            serde_json::to_vec_pretty(&record).unwrap(),
        )
        .unwrap();
    }
    assert!(sb.live_labels().is_empty(), "not listed as running");

    // Were either record taken for a live worker, this run would kill it: ids[1] is closed
    // and ids[0] has run for two hours against a WorkerTimeout of one.
    let r = sb.tick().run();
    r.assert_no_errors();
    assert!(r.zombies.is_empty(), "nothing to kill: {r:#?}");
    assert_eq!(
        stat(pid).map(|s| (s.state != 'Z', s.starttime)),
        Some((true, start)),
        "the unrelated process still runs"
    );
    assert!(group_alive(pid));
    // Not counted either: the open bead gets a real worker of its own.
    assert_eq!(r.spawned_beads(), ids[..1], "{r:#?}");
    let now = sb.live();
    let worker = &now[&label("app", &ids[0])];
    assert_ne!(worker["pid"].as_u64().unwrap() as u32, pid);
    assert!(
        !sessions.join(format!("app_{}.json", ids[1])).exists(),
        "the ended session is forgotten"
    );
    // Still alive after a second run, and after `braids sessions` looked again.
    let r = sb.tick().force().run();
    assert!(r.zombies.is_empty(), "{r:#?}");
    assert!(group_alive(pid));
    drop(other);
}

// ---------------------------------------------------------------------------------------------
// 2.7 Frequency scaling, 1.6 state file, 2.8 / 1.5 STATUS.md

#[test]
fn c2_7_backoff_over_idle_idle_spawn_idle() {
    let sb = install(SLEEPER);
    br_project(&sb, "app", 1, 0);
    let state = sb.state_path();
    let status = sb.status_path();

    // idle
    let r1 = sb.tick().run();
    r1.assert_no_errors();
    assert_eq!((r1.run, r1.action), (RunType::Full, Action::Idle));
    assert_eq!(r1.idle_reason, Some(IdleReason::NoReadyBeads));
    let s1 = sb.state();
    let l1 = s1.last_run_at.unwrap();
    assert_eq!(s1.idle_since, Some(l1), "set on the transition into idle");
    assert_eq!(s1.idle_reason, Some(IdleReason::NoReadyBeads));

    // inside the 15-minute interval: skipped, and nothing is written
    let before = (snapshot(&state).unwrap(), snapshot(&status).unwrap());
    std::thread::sleep(Duration::from_millis(30));
    let skipped = sb.tick().run();
    assert_eq!(skipped.run, RunType::Skipped);
    assert_eq!(skipped.skip, Some(SkipReason::Backoff));
    assert_eq!(skipped.idle_reason, Some(IdleReason::NoReadyBeads));
    assert_eq!(
        skipped.next_full_run,
        Some(l1 + chrono::Duration::minutes(15))
    );
    assert!(skipped.spawned().is_empty());
    assert_eq!(
        (snapshot(&state).unwrap(), snapshot(&status).unwrap()),
        before,
        "a skipped run changes neither file, not even its mtime"
    );

    // idle again (--force overrides the backoff): idleSince preserved
    let r2 = sb.tick().force().run();
    assert_eq!((r2.run, r2.action), (RunType::Full, Action::Idle));
    let s2 = sb.state();
    let l2 = s2.last_run_at.unwrap();
    assert!(l2 > l1, "lastRunAt moves");
    assert_eq!(s2.idle_since, Some(l1), "preserved across idle runs");
    assert_ne!(snapshot(&status).unwrap(), before.1, "STATUS.md rewritten");

    // work arrives: the change ends the backoff, and the next run (not forced) spawns
    let id = sb.br_create("app", "new work");
    sb.iteration("app", 1, "active", &[(id.as_str(), "story")]);
    let r3 = sb.tick().run();
    assert_eq!(
        r3.run,
        RunType::Full,
        "a changed project ends the backoff: {r3:#?}"
    );
    r3.assert_no_errors();
    assert_eq!(r3.action, Action::Spawn);
    assert_eq!(r3.spawned_beads(), std::slice::from_ref(&id));
    let s3 = sb.state();
    assert_eq!(s3.idle_since, None, "cleared on spawn");
    assert_eq!(s3.idle_reason, None);
    let l3 = s3.last_run_at.unwrap();
    assert!(l3 > l2);

    // busy installations are not backed off; nothing more to do: idle from now
    let r4 = sb.tick().run();
    assert_eq!(
        r4.run,
        RunType::Full,
        "a run after a spawn is never skipped"
    );
    assert_eq!(r4.action, Action::Idle);
    assert_eq!(r4.idle_reason, Some(IdleReason::NoReadyBeads));
    let s4 = sb.state();
    let l4 = s4.last_run_at.unwrap();
    assert!(l4 > l3);
    assert_eq!(s4.idle_since, Some(l4), "a new transition into idle");

    // more work in the iteration, no room: all-at-capacity, idleSince still kept (the bead
    // is listed in Stories: with Stories, only they are in scope)
    let more = sb.br_create("app", "more work");
    sb.iteration(
        "app",
        1,
        "active",
        &[(id.as_str(), "story"), (more.as_str(), "story")],
    );
    let r5 = sb.tick().force().run();
    assert_eq!(r5.idle_reason, Some(IdleReason::AllAtCapacity), "{r5:#?}");
    let s5 = sb.state();
    assert_eq!(s5.idle_since, Some(l4));
    assert_eq!(s5.idle_reason, Some(IdleReason::AllAtCapacity));
    let skipped = sb.tick().run();
    assert_eq!(
        skipped.next_full_run,
        Some(s5.last_run_at.unwrap() + chrono::Duration::minutes(10))
    );
}

#[test]
fn c1_6_a_missing_or_corrupt_state_file_means_a_full_run_with_a_warning() {
    let sb = install(SLEEPER);
    br_project(&sb, "app", 1, 0);
    let state = sb.state_path();
    let corrupt: [&[u8]; 5] = [
        b"{\"idleSince\": \"2026-01-01T00:00:00Z\", \"idleReas",
        b"",
        &[0xff, 0xfe, 0x00, 0x42],
        b"{\"idleSince\": 5, \"idleReason\": \"sleepy\", \"lastRunAt\": []}",
        b"[1, 2, 3]",
    ];
    for bytes in corrupt {
        assert_eq!(sb.tick().force().run().action, Action::Idle);
        assert_eq!(sb.tick().run().run, RunType::Skipped, "idle state in place");
        std::fs::write(&state, bytes).unwrap();
        let o = sb.tick().output();
        let stderr = &o.stderr;
        assert_eq!(o.code, Some(0), "{bytes:?}: {stderr}");
        assert_eq!(o.report().run, RunType::Full, "{bytes:?}");
        assert!(
            stderr.contains("WARN") && stderr.contains(".orchestrator-state.json"),
            "{bytes:?}: a warning names the file: {stderr}"
        );
        let s = sb.state();
        assert!(s.last_run_at.is_some(), "rewritten as valid state: {s:?}");
        assert_eq!(s.idle_reason, Some(IdleReason::NoReadyBeads));
    }
    std::fs::remove_file(&state).unwrap();
    let r = sb.tick().run();
    assert_eq!(r.run, RunType::Full, "a missing state file is a first run");
    assert!(sb.state().last_run_at.is_some());
}

#[test]
fn c1_5_c2_8_status_md_on_full_runs_only_with_timestamp_iterations_and_counts() {
    let sb = install(SLEEPER);
    br_project(&sb, "app", 1, 3);
    // A project whose iteration is still being planned, and one with none at all.
    sb.new_project("later")
        .br()
        .max_workers(1)
        .beads(2)
        .iteration("planning")
        .create();
    sb.new_project("bare").no_iteration().create();

    let before = Utc::now();
    let r = sb.tick().run();
    r.assert_no_errors();
    let after = Utc::now();
    let text = std::fs::read_to_string(sb.status_path()).unwrap();
    let stamp = text
        .lines()
        .find_map(|l| l.strip_prefix("Updated: "))
        .unwrap_or_else(|| panic!("no timestamp:\n{text}"))
        .trim();
    let stamp = chrono::NaiveDateTime::parse_from_str(stamp, "%Y-%m-%d %H:%M:%S UTC")
        .unwrap()
        .and_utc();
    assert!(
        stamp >= before - chrono::Duration::seconds(1) && stamp <= after,
        "{stamp} not within the run"
    );
    let row = |slug: &str| {
        text.lines()
            .find(|l| l.starts_with(&format!("| {slug} |")))
            .unwrap_or_else(|| panic!("no row for {slug}:\n{text}"))
            .to_string()
    };
    let app = row("app");
    assert!(app.contains("| 001 (active) |"), "{app}");
    assert!(app.contains("| in_progress 1, open 2 |"), "{app}");
    assert!(app.contains("| 1/1 |"), "one worker of one: {app}");
    let later_row = row("later");
    assert!(later_row.contains("| 001 (planning) |"), "{later_row}");
    assert!(
        later_row.contains("| open 2 |"),
        "bead counts for every project: {later_row}"
    );
    let bare = row("bare");
    assert!(bare.contains("| none |"), "no iteration: {bare}");
    assert!(text.contains("## app — app"));
    assert!(text.contains("Last run: full run: spawned 1, killed 0"));

    // Full runs rewrite it; skipped runs do not touch it.
    sb.tick().run(); // idle (all-at-capacity)
    let written = snapshot(&sb.status_path()).unwrap();
    std::thread::sleep(Duration::from_millis(30));
    for _ in 0..3 {
        assert_eq!(sb.tick().run().run, RunType::Skipped);
    }
    assert_eq!(snapshot(&sb.status_path()).unwrap(), written);
    std::thread::sleep(Duration::from_millis(30));
    sb.tick().force().run();
    assert_ne!(snapshot(&sb.status_path()).unwrap().1, written.1);
}

// ---------------------------------------------------------------------------------------------
// Failure isolation, dry runs, the native tracker, the JSON report

#[test]
fn c2_2_a_failing_or_hanging_tracker_is_reported_and_only_its_project_skipped() {
    // About the tracker timeout: 5 s against a tracker that would answer in five minutes.
    let sb = Install::new()
        .worker(SLEEPER)
        .config("[tracker]\ntimeout_secs = 5\n")
        .build();
    // `bad` says `Tracker: br`, and the br on PATH is a stub; `good` is on the native tracker.
    sb.new_project("bad").stub_br().no_iteration().create();
    sb.iteration("bad", 1, "active", &[("bad-x1", "never seen")]);
    let good = workplan_project(&sb, "good", 1, 3);

    sb.script("bin/br", "echo 'database is on fire' >&2\nexit 1");
    let r = sb.tick().run();
    assert_eq!(r.spawned(), [("good".to_string(), good[0].clone())]);
    let errs = r.errors.clone();
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(
        errs[0].starts_with("bad: ") && errs[0].contains("database is on fire"),
        "{errs:?}"
    );
    let status = std::fs::read_to_string(sb.status_path()).unwrap();
    assert!(status.contains("database is on fire"), "{status}");

    // A tracker that never answers is cut off at `[tracker] timeout_secs`; meanwhile the
    // other project's first bead is done, and its next one is started.
    let wp = sb.project("good").join(".braids/WORKPLAN.md");
    let text = std::fs::read_to_string(&wp).unwrap();
    std::fs::write(
        &wp,
        text.replacen("- [ ] good item 1", "- [x] good item 1", 1),
    )
    .unwrap();
    sb.script("bin/br", "exec sleep 300.217");
    let t = Instant::now();
    let r = sb.tick().run();
    let took = t.elapsed();
    assert!(
        took < Duration::from_secs(60),
        "cut off at the 5 s timeout, not after the tracker's 300 s; took {took:?}"
    );
    assert_eq!(
        r.spawned(),
        [("good".to_string(), good[1].clone())],
        "{r:#?}"
    );
    assert_eq!(r.killed(), [(good[0].clone(), ZombieReason::BeadClosed)]);
    let errs = r.errors.clone();
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(
        errs[0].starts_with("bad: ") && errs[0].contains("timed out"),
        "{errs:?}"
    );
    assert!(
        !process_with_arg("300.217"),
        "the hung tracker's process is killed"
    );
    assert!(!sb.sessions_dir().join("bad_bad-x1.json").exists());
}

#[test]
fn c2_1_dry_run_kills_claims_spawns_and_writes_nothing() {
    let sb = install(SLEEPER);
    let ids = br_project(&sb, "app", 2, 3);
    let wp = workplan_project(&sb, "plan", 1, 2);
    // An item without an id: a real run would write one into the file.
    let wp_file = sb.project("plan").join(".braids/WORKPLAN.md");
    let mut text = std::fs::read_to_string(&wp_file).unwrap();
    text.push_str("- [ ] an item nobody has numbered\n");
    std::fs::write(&wp_file, &text).unwrap();

    let files = |sb: &Sandbox| {
        [
            sb.state_path(),
            sb.status_path(),
            sb.braids_dir().join(".tick.lock"),
            wp_file.clone(),
        ]
        .map(|p| snapshot(&p))
    };
    let tree = |dir: PathBuf| -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = walk(&dir).into_iter().map(|r| dir.join(r)).collect();
        out.sort();
        out
    };

    // A fresh installation: everything a run would do is reported, nothing happens.
    let before = (files(&sb), tree(sb.braids_dir()));
    assert!(before.0[0].is_none(), "no state yet");
    let r = sb.tick().dry_run().run();
    r.assert_no_errors();
    assert!(r.dry_run);
    assert_eq!(r.action, Action::Spawn);
    let mut want = vec![
        ("app".to_string(), ids[0].clone()),
        ("app".to_string(), ids[1].clone()),
        ("plan".to_string(), wp[0].clone()),
    ];
    want.sort();
    let mut got_spawns = r.spawned();
    got_spawns.sort();
    assert_eq!(got_spawns, want);
    assert_eq!(
        (files(&sb), tree(sb.braids_dir())),
        before,
        "nothing written"
    );
    assert!(sb.live_labels().is_empty(), "nothing spawned");
    assert!(
        sb.br_with_status("app", "in_progress").is_empty(),
        "nothing claimed"
    );
    assert_eq!(std::fs::read_to_string(&wp_file).unwrap(), text);

    // With workers running and one of them a zombie: reported, not killed.
    let real = sb.tick().run();
    real.assert_no_errors();
    assert_eq!(real.spawned().len(), 3);
    let p0 = sb.pid_of(&label("app", &ids[0]));
    sb.br("app", &["close", &ids[0], "--json"]);
    let before = (files(&sb), tree(sb.braids_dir()), sb.live_labels());
    std::thread::sleep(Duration::from_millis(30));
    let r = sb.tick().dry_run().run();
    r.assert_no_errors();
    assert_eq!(r.killed(), [(ids[0].clone(), ZombieReason::BeadClosed)]);
    assert_eq!(r.zombies[0].outcome, None, "not killed");
    assert_eq!(r.spawned_beads(), ids[2..3]);
    assert!(group_alive(p0), "the zombie still runs");
    assert_eq!(
        (files(&sb), tree(sb.braids_dir()), sb.live_labels()),
        before,
        "nothing written, killed or spawned"
    );
    assert_eq!(sb.br_status("app", &ids[2]), "open");
}

#[test]
fn c4_6_native_workplan_tracker_spawns_claims_and_kills_the_same_way() {
    let sb = install(SLEEPER);
    let ids = workplan_project(&sb, "wp", 2, 3);
    let file = sb.project("wp").join(".braids/WORKPLAN.md");

    let r1 = sb.tick().run();
    r1.assert_no_errors();
    assert_eq!(r1.spawned_beads(), ids[..2]);
    let text = std::fs::read_to_string(&file).unwrap();
    for id in &ids[..2] {
        let line = text
            .lines()
            .find(|l| l.contains(&format!("id:{id}")))
            .unwrap();
        assert!(
            line.starts_with("- [ ]")
                && line.contains("status:in_progress")
                && line.contains("assignee:braids"),
            "claimed (4.6): {line}"
        );
    }
    let l0 = label("wp", &ids[0]);
    let msg = wait_for("the spawn message", Duration::from_secs(20), || {
        sb.spawn_message(&l0)
    });
    assert_eq!(
        msg,
        format!(
            "Project: {}\nBead: {}\nIteration: 001\nChannel: \n",
            sb.project("wp").display(),
            ids[0]
        )
    );
    let p0 = sb.pid_of(&l0);

    let r2 = sb.tick().run();
    assert_eq!(r2.idle_reason, Some(IdleReason::AllAtCapacity), "{r2:#?}");

    // A person ticks the first item off.
    let closed =
        std::fs::read_to_string(&file)
            .unwrap()
            .replacen("- [ ] wp item 1", "- [x] wp item 1", 1);
    std::fs::write(&file, &closed).unwrap();
    let r3 = sb.tick().force().run(); // inside the all-at-capacity backoff
    r3.assert_no_errors();
    assert_eq!(
        r3.killed(),
        [(ids[0].clone(), ZombieReason::BeadClosed)],
        "{r3:#?}\n{closed}"
    );
    assert!(!group_alive(p0));
    assert_eq!(r3.spawned_beads(), ids[2..3]);
    assert_eq!(
        sb.live_labels(),
        [label("wp", &ids[1]), label("wp", &ids[2])].into()
    );
}

#[test]
fn tick_json_has_exactly_the_documented_keys() {
    let sb = install(SLEEPER);
    let ids = br_project(&sb, "app", 1, 2);
    sb.tick().run();
    sb.br("app", &["close", &ids[0], "--json"]);
    // The report as printed, key by key (the typed one would hide a stray key).
    let full = sb.tick().json();
    assert_eq!(full["errors"], serde_json::json!([]), "{full:#}");
    assert_eq!(keys(&full), set(REPORT_KEYS), "{full:#}");
    assert_eq!(keys(&full["spawns"][0]), set(SPAWN_KEYS));
    assert_eq!(keys(&full["zombies"][0]), set(ZOMBIE_KEYS));

    let idle = sb.tick().json();
    assert_eq!(idle["action"], "idle");
    assert_eq!(keys(&idle), set(REPORT_KEYS));
    let skipped = sb.tick().json();
    assert_eq!(skipped["run"], "skipped");
    let mut with_skip = set(REPORT_KEYS);
    with_skip.extend(SKIPPED_KEYS);
    assert_eq!(keys(&skipped), with_skip, "{skipped:#}");

    // docs/commands.md documents every key.
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/commands.md"))
            .unwrap();
    let section = readme
        .split("## `braids tick --json`")
        .nth(1)
        .expect("docs/commands.md has a `braids tick --json` section");
    let section = section.split("\n## ").next().unwrap();
    for k in REPORT_KEYS
        .iter()
        .chain(SKIPPED_KEYS)
        .chain(SPAWN_KEYS)
        .chain(ZOMBIE_KEYS)
        .chain(RELEASED_KEYS)
    {
        assert!(
            section.contains(&format!("`{k}`")),
            "docs/commands.md does not document `{k}`"
        );
    }
}

#[test]
fn c2_2_an_orphan_session_holds_a_global_slot_is_told_once_and_can_be_killed() {
    let sb = Install::new()
        .worker(SLEEPER)
        .config("[tick]\nmax_workers = 2\n")
        .build();
    let old = br_project(&sb, "old", 1, 1);
    let r1 = sb.tick().run();
    assert_eq!(r1.spawned_beads(), old, "{r1:#?}");
    let orphan = label("old", &old[0]);
    let _group = KillGroup(sb.pid_of(&orphan));

    // The project leaves the registry while its worker runs; another one has work.
    let without: String = sb
        .registry_text()
        .lines()
        .filter(|l| !l.contains("Projects/old"))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(sb.registry_path(), without).unwrap();
    let app = br_project(&sb, "app", 3, 3);

    // The orphan holds one of the two global slots, and the log says so, once.
    let run = sb.tick().force().output();
    let r2 = run.assert_ok().report();
    assert_eq!(r2.spawned_beads(), app[..1], "{r2:#?}");
    let told = |stderr: &str| {
        stderr
            .lines()
            .filter(|l| l.contains("orphan session") && l.contains(&orphan))
            .count()
    };
    assert_eq!(told(&run.stderr), 1, "{}", run.stderr);
    let again = sb.tick().force().output();
    again.assert_ok();
    assert_eq!(told(&again.stderr), 0, "told once: {}", again.stderr);
    let status = std::fs::read_to_string(sb.status_path()).unwrap();
    assert!(
        status.contains("Sessions of unregistered projects") && status.contains(&orphan),
        "{status}"
    );

    // `braids sessions` marks it, in text and JSON.
    let text = sb.ok(&["sessions"]);
    let line = text.lines().find(|l| l.starts_with(&orphan)).unwrap();
    assert!(line.contains("orphan"), "{text}");
    let other = text
        .lines()
        .find(|l| l.starts_with("project:app:"))
        .unwrap();
    assert!(!other.contains("orphan"), "{text}");
    assert_eq!(sb.live()[&orphan]["orphan"], true);
    assert_eq!(
        sb.live()[other.split_whitespace().next().unwrap()]["orphan"],
        false
    );

    // `braids kill` ends it, and its slot goes to the registered project.
    sb.ok(&["kill", &orphan]);
    let r3 = sb.tick().force().run();
    assert_eq!(r3.spawned_beads(), app[1..2], "{r3:#?}");
}

#[test]
fn c2_7_activating_an_iteration_ends_the_backoff() {
    let sb = install(SLEEPER);
    let ids = sb
        .new_project("app")
        .br()
        .beads(1)
        .iteration("planning")
        .create()
        .beads;
    let r1 = sb.tick().run();
    assert_eq!(
        r1.idle_reason,
        Some(IdleReason::NoActiveIterations),
        "{r1:#?}"
    );
    assert_eq!(
        sb.tick().run().run,
        RunType::Skipped,
        "30 minutes of backoff"
    );

    sb.ok(&["iteration", "activate", "app"]);
    let r2 = sb.tick().run();
    assert_eq!(
        r2.run,
        RunType::Full,
        "the backoff ended with the activation"
    );
    assert_eq!(r2.spawned_beads(), ids, "{r2:#?}");
}

#[test]
fn a_kill_storm_kills_nobody_is_told_once_and_can_be_overridden() {
    let sb = Install::new().worker(SLEEPER).build();
    let told = sb.home().join("told.txt");
    let notifier = sb.script(
        "bin/notify",
        &format!("printf '%s|%s\\n' \"$1\" \"$2\" >> {}", told.display()),
    );
    sb.config(&format!(
        "[notify]\ncommand = [{:?}, \"{{event}}\", \"{{message}}\"]\n",
        notifier.to_str().unwrap()
    ));
    let ids = sb
        .new_project("app")
        .max_workers(3)
        .beads(3)
        .channel("#app")
        .create()
        .beads;
    assert_eq!(sb.tick().run().spawned_beads(), ids);
    let pids: Vec<u32> = ids.iter().map(|b| sb.pid_of(&label("app", b))).collect();
    let _groups: Vec<KillGroup> = pids.iter().map(|p| KillGroup(*p)).collect();
    // Every bead reads closed at once (a person, or a tracker that misreports): all three
    // workers look like zombies.
    for b in &ids {
        sb.close_by_hand("app", b);
    }
    let lines = || {
        std::fs::read_to_string(&told)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("kill-storm"))
            .count()
    };
    for run in 1..=2 {
        let out = sb.tick().force().output();
        let r = out.assert_ok().report();
        assert!(r.zombies.is_empty(), "run {run}: {r:#?}");
        assert!(
            out.stderr.contains("ERROR") && out.stderr.contains("kill-storm guard"),
            "run {run}: {}",
            out.stderr
        );
        assert!(r.errors.iter().any(|e| e.contains("3 of 3")), "{r:#?}");
        assert!(
            pids.iter().all(|p| group_alive(*p)),
            "run {run}: nobody killed"
        );
        assert_eq!(lines(), 1, "told once, not every run");
    }
    let status = std::fs::read_to_string(sb.status_path()).unwrap();
    assert!(status.contains("kill-storm guard"), "{status}");

    // A person who checked says so: this run kills them.
    let r = sb.run_limited(
        &["tick", "--json", "--force", "--allow-mass-kill"],
        Duration::from_secs(60),
    );
    assert!(r.stdout.contains("bead-closed"), "{}", r.stdout);
    wait_for("the workers to die", Duration::from_secs(30), || {
        pids.iter().all(|p| !group_alive(*p)).then_some(())
    });
}

#[test]
fn a_missing_executor_claims_nothing_blocks_nothing_and_is_told_once() {
    let sb = Install::new()
        .config("[worker]\nexecutor = [\"no-such-agent\", \"-p\"]\n")
        .build();
    let told = sb.home().join("told.txt");
    let notifier = sb.script(
        "bin/notify",
        &format!("printf '%s|%s\\n' \"$1\" \"$2\" >> {}", told.display()),
    );
    sb.config(&format!(
        "[notify]\ncommand = [{:?}, \"{{event}}\", \"{{message}}\"]\n",
        notifier.to_str().unwrap()
    ));
    let ids = sb
        .new_project("app")
        .max_workers(2)
        .beads(3)
        .channel("#app")
        .create()
        .beads;
    let mut warned = 0;
    for _ in 0..10 {
        let out = sb.tick().force().output();
        let r = out.assert_ok().report();
        assert!(r.spawned().is_empty(), "{r:#?}");
        warned += out
            .stderr
            .lines()
            .filter(|l| {
                l.contains("WARN") && l.contains("`no-such-agent` is not a program on PATH")
            })
            .count();
    }
    assert_eq!(warned, 1, "told once in ten runs");
    let notes = std::fs::read_to_string(&told).unwrap_or_default();
    assert_eq!(
        notes
            .lines()
            .filter(|l| l.starts_with("blocker|") && l.contains("no-such-agent"))
            .count(),
        1,
        "{notes}"
    );
    let plan = sb.workplan("app");
    for id in &ids {
        assert_eq!(
            plan[id].0, "open",
            "nothing claimed, nothing blocked: {plan:?}"
        );
    }
    assert!(sb.live_labels().is_empty());
    let status = std::fs::read_to_string(sb.status_path()).unwrap();
    assert!(status.contains("no worker can start"), "{status}");

    // Fixed: the next run spawns.
    sb.config("[worker]\nexecutor = [\"sh\", \"-c\", \"sleep 30\"]\n");
    let r = sb.tick().force().run();
    assert_eq!(r.spawned().len(), 2, "{r:#?}");
    sb.kill_workers();
}
