//! `braids tick` end to end: the real binary, a real `br` (and the native WORKPLAN.md tracker),
//! real worker processes, real signals. Each test builds its own installation in a throwaway
//! HOME ([`common::Sandbox`]) and proves one part of CONTRACTS 1.5, 1.6 and 2.x; tests are named
//! after the section they prove.
//!
//! Workers here are not agents: `[worker] command` is a shell script that records the spawn
//! message it got on stdin in `$HOME/got-$BRAIDS_LABEL` and then sleeps (or exits at once). The
//! tests poll with deadlines rather than sleeping for fixed times, except where the contract
//! itself is about elapsed time (WorkerTimeout, the claim grace period).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use chrono::{DateTime, Utc};
use common::{proc_starttime, Sandbox};
use serde_json::Value;

// ---------------------------------------------------------------------------------------------
// Helpers

/// A worker that records its stdin (atomically, so a reader never sees half of it) and then
/// runs for five minutes, as a busy agent would.
const SLEEPER: &str = r#"cat > "$HOME/got-$BRAIDS_LABEL.part"
mv "$HOME/got-$BRAIDS_LABEL.part" "$HOME/got-$BRAIDS_LABEL"
exec sleep 300"#;

/// A worker that records its stdin and exits at once without touching its bead, as a crashed
/// agent would.
const QUITTER: &str = r#"cat > "$HOME/got-$BRAIDS_LABEL.part"
mv "$HOME/got-$BRAIDS_LABEL.part" "$HOME/got-$BRAIDS_LABEL"
exit 0"#;

/// The keys `braids tick --json` prints, as README.md ("`braids tick --json`") documents them.
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

/// An installation whose workers run `worker` (a shell script body), with `extra` appended to
/// config.toml (whole TOML tables; `[worker]` is taken).
fn install(worker: &str, extra: &str) -> Sandbox {
    let sb = Sandbox::new();
    let script = sb.script("worker.sh", worker);
    sb.config(&format!(
        "[worker]\ncommand = [{:?}]\n\n{extra}",
        script.display().to_string()
    ));
    sb.ok(&["init"]);
    sb
}

/// `braids new <slug> --tracker br --max-workers <max>` with `beads` beads created in br, all
/// listed in an active iteration 1. Returns the bead ids in creation (= Stories) order.
fn br_project(sb: &Sandbox, slug: &str, max: u32, beads: usize, extra: &[&str]) -> Vec<String> {
    let max = max.to_string();
    let mut args = vec!["new", slug, "--tracker", "br", "--max-workers", &max];
    args.extend_from_slice(extra);
    sb.ok(&args);
    let ids: Vec<String> = (1..=beads)
        .map(|i| sb.br_create(slug, &format!("{slug} bead {i}")))
        .collect();
    activate(sb, slug, &ids);
    ids
}

/// The same on the native tracker: WORKPLAN.md items with explicit ids `<slug>-w<i>`.
fn workplan_project(sb: &Sandbox, slug: &str, max: u32, beads: usize) -> Vec<String> {
    let max = max.to_string();
    sb.ok(&["new", slug, "--tracker", "workplan", "--max-workers", &max]);
    let ids: Vec<String> = (1..=beads).map(|i| format!("{slug}-w{i}")).collect();
    let wp = sb.project(slug).join(".braids/WORKPLAN.md");
    let mut text = std::fs::read_to_string(&wp).unwrap();
    for (i, id) in ids.iter().enumerate() {
        text.push_str(&format!("- [ ] {slug} item {} <!-- id:{id} -->\n", i + 1));
    }
    std::fs::write(&wp, text).unwrap();
    activate(sb, slug, &ids);
    ids
}

fn activate(sb: &Sandbox, slug: &str, ids: &[String]) {
    let stories: Vec<(&str, &str)> = ids.iter().map(|i| (i.as_str(), "a story")).collect();
    sb.iteration(slug, 1, "active", &stories);
}

fn label(slug: &str, bead: &str) -> String {
    format!("project:{slug}:{bead}")
}

/// The live sessions `braids sessions --json` lists, by label.
fn live(sb: &Sandbox) -> BTreeMap<String, Value> {
    let v: Value = serde_json::from_str(&sb.ok(&["sessions", "--json"])).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| (s["label"].as_str().unwrap().to_string(), s.clone()))
        .collect()
}

fn labels(sb: &Sandbox) -> BTreeSet<String> {
    live(sb).into_keys().collect()
}

fn pid_of(sb: &Sandbox, label: &str) -> u32 {
    live(sb)[label]["pid"].as_u64().unwrap() as u32
}

/// The (project, bead) pairs a report spawned, in order.
fn spawned(report: &Value) -> Vec<(String, String)> {
    report["spawns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["project"].as_str().unwrap().to_string(),
                s["bead"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn spawned_beads(report: &Value) -> Vec<String> {
    spawned(report).into_iter().map(|(_, b)| b).collect()
}

/// (bead, reason) of each zombie a report killed.
fn zombies(report: &Value) -> Vec<(String, String)> {
    report["zombies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|z| {
            (
                z["bead"].as_str().unwrap().to_string(),
                z["reason"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn released(report: &Value) -> Vec<(String, String)> {
    report["released"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["project"].as_str().unwrap().to_string(),
                r["bead"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn errors(report: &Value) -> Vec<String> {
    report["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap().to_string())
        .collect()
}

fn no_errors(report: &Value) {
    assert!(errors(report).is_empty(), "unexpected errors: {report:#}");
}

/// A bead as `br show` sees it.
fn br_bead(sb: &Sandbox, slug: &str, id: &str) -> Value {
    let v: Value = serde_json::from_str(&sb.br(slug, &["show", id, "--json"])).unwrap();
    v.as_array().map_or(v.clone(), |a| a[0].clone())
}

fn br_status(sb: &Sandbox, slug: &str, id: &str) -> String {
    br_bead(sb, slug, id)["status"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Ids of the beads br has in `status`.
fn br_with_status(sb: &Sandbox, slug: &str, status: &str) -> BTreeSet<String> {
    let v: Value =
        serde_json::from_str(&sb.br(slug, &["list", "--json", "--all", "--limit=0"])).unwrap();
    let issues = v.get("issues").unwrap_or(&v);
    issues
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["status"] == status)
        .map(|i| i["id"].as_str().unwrap().to_string())
        .collect()
}

/// What the worker for `label` received on stdin, once it has written it.
fn got(sb: &Sandbox, label: &str) -> Option<String> {
    std::fs::read_to_string(sb.home().join(format!("got-{label}"))).ok()
}

/// Polls `f` every 25 ms until it answers, failing the test after `limit`.
fn wait_for<T>(what: &str, limit: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "gave up after {limit:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// Sleeps until the wall clock has passed `t` (for contracts about elapsed time).
fn sleep_until(t: DateTime<Utc>) {
    let left = (t - Utc::now()).to_std().unwrap_or_default();
    std::thread::sleep(left + Duration::from_millis(50));
}

/// (state, pgrp, starttime) of a process from `/proc/<pid>/stat`.
fn stat(pid: u32) -> Option<(char, u32, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let f: Vec<&str> = text[text.rfind(')')? + 1..].split_whitespace().collect();
    Some((
        f[0].chars().next()?,
        f[2].parse().ok()?,
        f[19].parse().ok()?,
    ))
}

/// Whether any process of group `pgid` still runs (a zombie, exited but not yet reaped by
/// whoever inherited it, runs nothing).
fn group_alive(pgid: u32) -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
        e.file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
            .and_then(stat)
            .is_some_and(|(state, pgrp, _)| pgrp == pgid && !matches!(state, 'Z' | 'X'))
    })
}

/// Whether a process whose command line contains `needle` runs.
fn process_with_arg(needle: &str) -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            return false;
        };
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        String::from_utf8_lossy(&cmdline).contains(needle)
            && stat(pid).is_some_and(|(s, _, _)| !matches!(s, 'Z' | 'X'))
    })
}

/// A process a test started itself; killed and reaped when dropped.
struct Owned(Child);

impl Drop for Owned {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Kills a process group when dropped: for workers a test makes the Sandbox unable to find
/// (an unreadable record, an exited leader).
struct Group(u32);

impl Drop for Group {
    fn drop(&mut self) {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(self.0 as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

/// `braids <args>` in the sandbox as a plain std command, for running several at once.
fn braids_std(sb: &Sandbox, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_braids"));
    c.args(args)
        .env("HOME", sb.home())
        .env_remove("BRAIDS_HOME")
        .env("PATH", sb.path_var())
        .env("BRAIDS_LOG", "warn")
        .env("GIT_CONFIG_GLOBAL", sb.home().join(".gitconfig"))
        .current_dir(sb.home())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// Starts `n` `braids tick --json` at once and returns their reports.
fn concurrent_ticks(sb: &Sandbox, n: usize) -> Vec<Value> {
    let children: Vec<Child> = (0..n)
        .map(|_| braids_std(sb, &["tick", "--json"]).spawn().unwrap())
        .collect();
    children
        .into_iter()
        .map(|c| {
            let o = c.wait_with_output().unwrap();
            assert!(
                o.status.success(),
                "a concurrent tick failed: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            serde_json::from_slice(&o.stdout).unwrap()
        })
        .collect()
}

fn state_path(sb: &Sandbox) -> PathBuf {
    sb.braids_dir().join(".orchestrator-state.json")
}

fn status_path(sb: &Sandbox) -> PathBuf {
    sb.braids_dir().join("STATUS.md")
}

/// A file's bytes and mtime, or `None` when it does not exist.
fn snapshot(p: &Path) -> Option<(Vec<u8>, SystemTime)> {
    let bytes = std::fs::read(p).ok()?;
    Some((bytes, std::fs::metadata(p).unwrap().modified().unwrap()))
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
    let sb = install(SLEEPER, "");
    let ids = br_project(&sb, "app", 2, 5, &[]);

    let r1 = sb.tick(&[]);
    no_errors(&r1);
    assert_eq!(
        (&r1["run"], &r1["action"]),
        (&"full".into(), &"spawn".into())
    );
    assert_eq!(r1["idle_reason"], Value::Null);
    assert_eq!(spawned_beads(&r1), ids[..2], "Stories order, MaxWorkers 2");
    let expected: BTreeSet<String> = ids[..2].iter().map(|b| label("app", b)).collect();
    assert_eq!(labels(&sb), expected);
    for b in &ids[..2] {
        let bead = br_bead(&sb, "app", b);
        assert_eq!(bead["status"], "in_progress", "{bead}");
        assert_eq!(bead["assignee"], "braids", "{bead}");
    }
    for b in &ids[2..] {
        assert_eq!(br_status(&sb, "app", b), "open");
    }
    let pids: Vec<u32> = expected.iter().map(|l| pid_of(&sb, l)).collect();

    // Busy runs are never skipped; this one finds both slots taken.
    let r2 = sb.tick(&[]);
    no_errors(&r2);
    assert_eq!(r2["run"], "full");
    assert_eq!(r2["action"], "idle");
    assert_eq!(r2["idle_reason"], "all-at-capacity", "{r2:#}");
    assert!(spawned(&r2).is_empty() && zombies(&r2).is_empty(), "{r2:#}");
    assert_eq!(labels(&sb), expected);
    let pids_now: Vec<u32> = expected.iter().map(|l| pid_of(&sb, l)).collect();
    assert_eq!(pids, pids_now, "the same two workers");
    assert_eq!(br_with_status(&sb, "app", "in_progress").len(), 2);
    assert_eq!(sb.state()["idleReason"], "all-at-capacity");
}

#[test]
fn c2_2_an_ended_worker_is_not_counted_and_its_claim_is_released() {
    let grace = 3;
    let sb = install(
        QUITTER,
        &format!("[sessions]\nclaim_grace_secs = {grace}\n"),
    );
    let ids = br_project(&sb, "app", 1, 3, &[]);

    let t0 = Instant::now();
    let r1 = sb.tick(&[]);
    no_errors(&r1);
    assert_eq!(spawned_beads(&r1), ids[..1]);
    let first = label("app", &ids[0]);
    wait_for("the first worker to run", Duration::from_secs(20), || {
        got(&sb, &first)
    });
    wait_for("the first worker to exit", Duration::from_secs(20), || {
        labels(&sb).is_empty().then_some(())
    });

    // Its slot is free again although its bead is still in_progress (nobody closed it).
    let r2 = sb.tick(&[]);
    let r2_done = t0.elapsed();
    no_errors(&r2);
    assert_eq!(spawned_beads(&r2), ids[1..2], "{r2:#}");
    assert!(zombies(&r2).is_empty(), "an ended session is not a zombie");
    if r2_done < Duration::from_secs(grace) {
        assert!(released(&r2).is_empty(), "released within the grace period");
        assert_eq!(br_status(&sb, "app", &ids[0]), "in_progress");
    }

    let claims = sb.state()["claims"].clone();
    let claimed_at = claims
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["bead"] == ids[0].as_str())
        .map(|c| time(&c["claimedAt"]));
    if let Some(at) = claimed_at {
        sleep_until(at + chrono::Duration::seconds(grace as i64));
    }
    wait_for("the second worker to exit", Duration::from_secs(20), || {
        labels(&sb).is_empty().then_some(())
    });

    let r3 = sb.tick(&[]);
    no_errors(&r3);
    let rel = released(&r2)
        .into_iter()
        .chain(released(&r3))
        .collect::<Vec<_>>();
    assert!(
        rel.contains(&("app".to_string(), ids[0].clone())),
        "the stranded claim on {} is released: {r2:#} {r3:#}",
        ids[0]
    );
    for r in released(&r3) {
        assert!(
            !spawned(&r3).contains(&r),
            "a bead is not respawned in the run that released it"
        );
    }
    let bead = br_bead(&sb, "app", &ids[0]);
    assert_eq!(bead["status"], "open", "{bead}");
    assert!(
        bead.get("assignee").is_none_or(|a| a.is_null() || a == ""),
        "{bead}"
    );
    let claims = sb.state()["claims"].clone();
    assert!(
        !claims
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["bead"] == ids[0].as_str()),
        "a released claim is forgotten: {claims}"
    );
    // The third bead takes the slot the second worker left.
    assert_eq!(spawned_beads(&r3), ids[2..3], "{r3:#}");
}

#[test]
fn c2_2_concurrent_ticks_spawn_each_bead_once() {
    let sb = install(SLEEPER, "");
    let a = br_project(&sb, "alpha", 2, 5, &[]);
    let b = br_project(&sb, "beta", 2, 5, &[]);
    let mut seen: BTreeSet<(String, String)> = BTreeSet::new();

    let check = |reports: &[Value], seen: &mut BTreeSet<(String, String)>| {
        for r in reports {
            no_errors(r);
            let locked = r["run"] == "skipped" && r["skip"] == "locked";
            assert!(r["run"] == "full" || locked, "{r:#}");
            for s in spawned(r) {
                assert!(seen.insert(s.clone()), "{s:?} spawned twice");
            }
        }
        let live = labels(&sb);
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
            let claimed = br_with_status(&sb, slug, "in_progress");
            assert_eq!(mine, claimed, "{slug}: one worker per claimed bead");
            assert!(mine.iter().all(|m| ids.contains(m)));
        }
    };

    let batch1 = concurrent_ticks(&sb, 2);
    check(&batch1, &mut seen);
    assert_eq!(seen.len(), 4, "{batch1:#?}");

    // Free one slot per project, then race ten ticks for them.
    sb.br("alpha", &["close", &a[0], "--json"]);
    sb.br("beta", &["close", &b[0], "--json"]);
    let batch2 = concurrent_ticks(&sb, 10);
    check(&batch2, &mut seen);
    assert_eq!(seen.len(), 6, "{batch2:#?}");
    let killed: Vec<(String, String)> = batch2.iter().flat_map(zombies).collect();
    let want: BTreeSet<(String, String)> = [&a[0], &b[0]]
        .into_iter()
        .map(|id| (id.clone(), "bead-closed".to_string()))
        .collect();
    assert_eq!(killed.len(), 2, "each zombie killed once: {killed:?}");
    assert_eq!(killed.into_iter().collect::<BTreeSet<_>>(), want);
    let full = batch2.iter().filter(|r| r["run"] == "full").count();
    assert!(full >= 1, "at least one of the ten ran");
}

#[test]
fn c2_2_an_unreadable_session_record_still_holds_its_slot() {
    let sb = install(SLEEPER, "");
    let ids = br_project(&sb, "app", 1, 2, &[]);
    let r1 = sb.tick(&[]);
    assert_eq!(spawned_beads(&r1), ids[..1]);
    let l0 = label("app", &ids[0]);
    let pid = pid_of(&sb, &l0);
    // Sandbox's Drop cannot read the record once it is garbage: kill the worker here.
    let _group = Group(pid);

    // The record of a live worker becomes unreadable (a disk error, a person's edit).
    let record = sb
        .braids_dir()
        .join(format!("sessions/app_{}.json", ids[0]));
    std::fs::write(&record, "{ this is not a session record").unwrap();

    // braids cannot tell whether that worker runs, so it assumes it does: the slot stays
    // taken, its bead is not handed out again, nothing is killed, and a person is told.
    let r2 = sb.tick(&[]);
    assert!(
        spawned(&r2).is_empty(),
        "MaxWorkers 1 is not exceeded: {r2:#}"
    );
    assert!(zombies(&r2).is_empty());
    assert!(
        errors(&r2).iter().any(|e| e.contains(&l0)),
        "the unreadable record is reported: {r2:#}"
    );
    assert_eq!(r2["idle_reason"], "all-at-capacity");
    assert!(group_alive(pid), "not killed");
    assert_eq!(br_status(&sb, "app", &ids[1]), "open");
    let status = std::fs::read_to_string(status_path(&sb)).unwrap();
    assert!(status.contains(&l0), "{status}");

    // Once the record is gone (a person removed it after checking), the slot is free.
    nix::sys::signal::killpg(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    std::fs::remove_file(&record).unwrap();
    let r3 = sb.tick(&["--force"]);
    assert_eq!(spawned_beads(&r3), ids[1..2], "{r3:#}");
}

#[test]
fn c2_2_a_worker_whose_leader_exited_runs_while_its_process_group_does() {
    // The agent outlives the process braids started (a worker that crashed, or backgrounded
    // its agent): the session's process group still works on the bead.
    let orphaning = r#"cat > "$HOME/got-$BRAIDS_LABEL"
sleep 300 &
echo $! > "$HOME/child-$BRAIDS_LABEL"
exit 0"#;
    let sb = install(
        orphaning,
        "[sessions]\nclaim_grace_secs = 1\nkill_grace_secs = 2\n",
    );
    let ids = br_project(&sb, "app", 1, 2, &[]);
    let r1 = sb.tick(&[]);
    assert_eq!(spawned_beads(&r1), ids[..1]);
    let l0 = label("app", &ids[0]);
    let record = sb
        .braids_dir()
        .join(format!("sessions/app_{}.json", ids[0]));
    let leader: Value = serde_json::from_slice(&std::fs::read(&record).unwrap()).unwrap();
    let leader = leader["pid"].as_u64().unwrap() as u32;
    let child: u32 = wait_for("the agent to start", Duration::from_secs(20), || {
        std::fs::read_to_string(sb.home().join(format!("child-{l0}")))
            .ok()
            .and_then(|t| t.trim().parse().ok())
    });
    let _group = Group(leader);
    wait_for("the leader to exit", Duration::from_secs(20), || {
        stat(leader)
            .is_none_or(|(s, _, _)| matches!(s, 'Z' | 'X'))
            .then_some(())
    });
    assert!(stat(child).is_some_and(|(s, pgrp, _)| s != 'Z' && pgrp == leader));
    std::thread::sleep(Duration::from_millis(1100)); // past the claim grace

    // Still running: it holds its slot and its claim, and is listed.
    let r2 = sb.tick(&[]);
    no_errors(&r2);
    assert!(
        spawned(&r2).is_empty(),
        "MaxWorkers 1 is not exceeded: {r2:#}"
    );
    assert!(
        released(&r2).is_empty(),
        "its bead is still being worked on: {r2:#}"
    );
    assert_eq!(r2["idle_reason"], "all-at-capacity");
    assert_eq!(labels(&sb), [l0.clone()].into());
    assert_eq!(br_status(&sb, "app", &ids[0]), "in_progress");

    // And a kill reaches the agent: the bead is closed, the whole group goes.
    sb.br("app", &["close", &ids[0], "--json"]);
    let r3 = sb.tick(&["--force"]);
    assert_eq!(zombies(&r3), [(ids[0].clone(), "bead-closed".to_string())]);
    assert!(!group_alive(leader), "the agent was killed with its group");
    assert_eq!(spawned_beads(&r3), ids[1..2]);
}

// ---------------------------------------------------------------------------------------------
// 2.4 Spawn message, 2.5 session label

#[test]
fn c2_4_c2_5_spawn_message_is_four_lines_and_label_is_project_slug_bead() {
    let sb = install(SLEEPER, "");
    let with = br_project(&sb, "chat", 1, 1, &["--channel", "#dev-chat"])[0].clone();
    let without = br_project(&sb, "quiet", 1, 1, &[])[0].clone();

    let r = sb.tick(&[]);
    no_errors(&r);
    assert_eq!(spawned(&r).len(), 2, "{r:#}");
    for (slug, bead, channel) in [("chat", &with, "#dev-chat"), ("quiet", &without, "")] {
        let l = label(slug, bead);
        let msg = wait_for(
            &format!("the spawn message of {l}"),
            Duration::from_secs(20),
            || got(&sb, &l),
        );
        assert_eq!(
            msg,
            format!(
                "Project: {}\nBead: {bead}\nIteration: 001\nChannel: {channel}\n",
                sb.project(slug).display()
            ),
            "exactly the four fields (2.4)"
        );
        let s = r["spawns"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["bead"] == bead.as_str())
            .unwrap();
        assert_eq!(s["label"], l.as_str());
        assert_eq!(s["project"], slug);
        assert_eq!(s["iteration"], "001", "the directory name as written");
        assert_eq!(s["path"], sb.project(slug).display().to_string());
        assert_eq!(s["worker_timeout"], 3600);
        if channel.is_empty() {
            assert_eq!(s["channel"], Value::Null);
        } else {
            assert_eq!(s["channel"], channel);
        }
    }
    // The backend knows them by label (2.5), and the label prefix counts per project.
    let live = live(&sb);
    assert_eq!(
        live.keys().cloned().collect::<Vec<_>>(),
        vec![label("chat", &with), label("quiet", &without)]
    );
    for s in live.values() {
        assert_eq!(s["running"], true);
        assert!(s["pid"].as_u64().unwrap() > 1);
    }
    let status = std::fs::read_to_string(status_path(&sb)).unwrap();
    assert!(status.contains(&format!("`{}` running", label("chat", &with))));
}

// ---------------------------------------------------------------------------------------------
// 2.6 Zombie cleanup priority

#[test]
fn c2_6_a_closed_bead_gets_its_worker_killed_and_the_next_bead_spawned() {
    let sb = install(SLEEPER, "");
    let ids = br_project(&sb, "app", 2, 3, &[]);
    let r1 = sb.tick(&[]);
    no_errors(&r1);
    assert_eq!(spawned_beads(&r1), ids[..2]);
    let (l0, l1) = (label("app", &ids[0]), label("app", &ids[1]));
    let (p0, p1) = (pid_of(&sb, &l0), pid_of(&sb, &l1));
    assert!(group_alive(p0) && group_alive(p1));

    sb.br(
        "app",
        &["close", &ids[0], "--reason=done by a person", "--json"],
    );
    let r2 = sb.tick(&[]);
    no_errors(&r2);
    assert_eq!(zombies(&r2), [(ids[0].clone(), "bead-closed".to_string())]);
    assert_eq!(r2["zombies"][0]["label"], l0.as_str());
    assert!(
        !group_alive(p0),
        "the killed worker's process group is gone"
    );
    assert!(group_alive(p1), "the other worker is untouched");
    assert_eq!(
        spawned_beads(&r2),
        ids[2..3],
        "its slot goes to the next bead"
    );
    let now: BTreeSet<String> = [l1, label("app", &ids[2])].into();
    assert_eq!(labels(&sb), now);
    assert!(
        !sb.braids_dir()
            .join(format!("sessions/app_{}.json", ids[0]))
            .exists(),
        "the killed session is forgotten"
    );
}

#[test]
fn c2_6_timeout_kills_and_bead_status_is_checked_before_runtime() {
    let sb = install(SLEEPER, "[sessions]\nkill_grace_secs = 2\n");
    let ids = br_project(&sb, "app", 2, 3, &[]);
    sb.set_field("app", "WorkerTimeout", "2");
    let r1 = sb.tick(&[]);
    no_errors(&r1);
    assert_eq!(spawned_beads(&r1), ids[..2]);
    assert_eq!(r1["spawns"][0]["worker_timeout"], 2);
    let sessions = live(&sb);
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
    let r2 = sb.tick(&[]);
    no_errors(&r2);
    let mut z = zombies(&r2);
    z.sort();
    let mut want = vec![
        (ids[0].clone(), "bead-closed".to_string()),
        (ids[1].clone(), "timeout".to_string()),
    ];
    want.sort();
    assert_eq!(z, want, "bead status first, then runtime: {r2:#}");
    assert!(!group_alive(p0) && !group_alive(p1), "both groups are gone");
    // The timed-out bead stays claimed (in_progress) and is not handed to a new worker; the
    // freed slots go to the remaining ready bead.
    assert_eq!(br_status(&sb, "app", &ids[1]), "in_progress");
    assert_eq!(spawned_beads(&r2), ids[2..3], "{r2:#}");
}

#[test]
fn c2_6_a_reused_pid_is_not_running_and_never_signalled() {
    let sb = install(SLEEPER, "");
    let ids = br_project(&sb, "app", 1, 2, &[]);
    sb.br("app", &["close", &ids[1], "--json"]);

    // Somebody else's process, leading its own process group (so a killpg on its pid would
    // reach it), with session records claiming its pid for two beads — but a different start
    // time, as when the kernel reuses the pid of a worker that exited long ago.
    let mut cmd = Command::new("sleep");
    cmd.arg("300").process_group(0);
    let other = Owned(cmd.spawn().unwrap());
    let pid = other.0.id();
    let start = wait_for(
        "/proc of the unrelated process",
        Duration::from_secs(5),
        || proc_starttime(pid),
    );
    let long_ago = (Utc::now() - chrono::Duration::hours(2)).to_rfc3339();
    let sessions = sb.braids_dir().join("sessions");
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
    assert!(labels(&sb).is_empty(), "not listed as running");

    // Were either record taken for a live worker, this run would kill it: ids[1] is closed
    // and ids[0] has run for two hours against a WorkerTimeout of one.
    let r = sb.tick(&[]);
    no_errors(&r);
    assert!(zombies(&r).is_empty(), "nothing to kill: {r:#}");
    assert_eq!(
        stat(pid).map(|(s, _, st)| (s != 'Z', st)),
        Some((true, start)),
        "the unrelated process still runs"
    );
    assert!(group_alive(pid));
    // Not counted either: the open bead gets a real worker of its own.
    assert_eq!(spawned_beads(&r), ids[..1], "{r:#}");
    let now = live(&sb);
    let worker = &now[&label("app", &ids[0])];
    assert_ne!(worker["pid"].as_u64().unwrap() as u32, pid);
    assert!(
        !sessions.join(format!("app_{}.json", ids[1])).exists(),
        "the ended session is forgotten"
    );
    // Still alive after a second run, and after `braids sessions` looked again.
    let r = sb.tick(&["--force"]);
    assert!(zombies(&r).is_empty(), "{r:#}");
    assert!(group_alive(pid));
}

// ---------------------------------------------------------------------------------------------
// 2.7 Frequency scaling, 1.6 state file, 2.8 / 1.5 STATUS.md

#[test]
fn c2_7_backoff_over_idle_idle_spawn_idle() {
    let sb = install(SLEEPER, "");
    br_project(&sb, "app", 1, 0, &[]);
    let state = state_path(&sb);
    let status = status_path(&sb);

    // idle
    let r1 = sb.tick(&[]);
    no_errors(&r1);
    assert_eq!(
        (&r1["run"], &r1["action"]),
        (&"full".into(), &"idle".into())
    );
    assert_eq!(r1["idle_reason"], "no-ready-beads");
    let s1 = sb.state();
    let l1 = time(&s1["lastRunAt"]);
    assert_eq!(
        time(&s1["idleSince"]),
        l1,
        "set on the transition into idle"
    );
    assert_eq!(s1["idleReason"], "no-ready-beads");

    // inside the 15-minute interval: skipped, and nothing is written
    let before = (snapshot(&state).unwrap(), snapshot(&status).unwrap());
    std::thread::sleep(Duration::from_millis(30));
    let skipped = sb.tick(&[]);
    assert_eq!(skipped["run"], "skipped");
    assert_eq!(skipped["skip"], "backoff");
    assert_eq!(skipped["idle_reason"], "no-ready-beads");
    assert_eq!(
        time(&skipped["next_full_run"]),
        l1 + chrono::Duration::minutes(15)
    );
    assert!(spawned(&skipped).is_empty());
    assert_eq!(
        (snapshot(&state).unwrap(), snapshot(&status).unwrap()),
        before,
        "a skipped run changes neither file, not even its mtime"
    );

    // idle again (--force overrides the backoff): idleSince preserved
    let r2 = sb.tick(&["--force"]);
    assert_eq!(
        (&r2["run"], &r2["action"]),
        (&"full".into(), &"idle".into())
    );
    let s2 = sb.state();
    let l2 = time(&s2["lastRunAt"]);
    assert!(l2 > l1, "lastRunAt moves");
    assert_eq!(time(&s2["idleSince"]), l1, "preserved across idle runs");
    assert_ne!(snapshot(&status).unwrap(), before.1, "STATUS.md rewritten");

    // work arrives; the backoff still holds until forced
    let id = sb.br_create("app", "new work");
    activate(&sb, "app", std::slice::from_ref(&id));
    assert_eq!(sb.tick(&[])["run"], "skipped");
    let r3 = sb.tick(&["--force"]);
    no_errors(&r3);
    assert_eq!(r3["action"], "spawn");
    assert_eq!(spawned_beads(&r3), std::slice::from_ref(&id));
    let s3 = sb.state();
    assert_eq!(s3["idleSince"], Value::Null, "cleared on spawn");
    assert_eq!(s3["idleReason"], Value::Null);
    let l3 = time(&s3["lastRunAt"]);
    assert!(l3 > l2);

    // busy installations are not backed off; nothing more to do: idle from now
    let r4 = sb.tick(&[]);
    assert_eq!(r4["run"], "full", "a run after a spawn is never skipped");
    assert_eq!(r4["action"], "idle");
    assert_eq!(r4["idle_reason"], "no-ready-beads");
    let s4 = sb.state();
    let l4 = time(&s4["lastRunAt"]);
    assert!(l4 > l3);
    assert_eq!(time(&s4["idleSince"]), l4, "a new transition into idle");

    // more work in the iteration, no room: all-at-capacity, idleSince still kept
    let more = sb.br_create("app", "more work");
    activate(&sb, "app", &[id, more]);
    let r5 = sb.tick(&["--force"]);
    assert_eq!(r5["idle_reason"], "all-at-capacity", "{r5:#}");
    let s5 = sb.state();
    assert_eq!(time(&s5["idleSince"]), l4);
    assert_eq!(s5["idleReason"], "all-at-capacity");
    let skipped = sb.tick(&[]);
    assert_eq!(
        time(&skipped["next_full_run"]),
        time(&s5["lastRunAt"]) + chrono::Duration::minutes(10)
    );
}

#[test]
fn c1_6_a_missing_or_corrupt_state_file_means_a_full_run_with_a_warning() {
    let sb = install(SLEEPER, "");
    br_project(&sb, "app", 1, 0, &[]);
    let state = state_path(&sb);
    let corrupt: [&[u8]; 5] = [
        b"{\"idleSince\": \"2026-01-01T00:00:00Z\", \"idleReas",
        b"",
        &[0xff, 0xfe, 0x00, 0x42],
        b"{\"idleSince\": 5, \"idleReason\": \"sleepy\", \"lastRunAt\": []}",
        b"[1, 2, 3]",
    ];
    for bytes in corrupt {
        assert_eq!(sb.tick(&["--force"])["action"], "idle");
        assert_eq!(sb.tick(&[])["run"], "skipped", "idle state in place");
        std::fs::write(&state, bytes).unwrap();
        let o = sb.run(&["tick", "--json"]);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{bytes:?}: {stderr}");
        let r: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(r["run"], "full", "{bytes:?}");
        assert!(
            stderr.contains("WARN") && stderr.contains(".orchestrator-state.json"),
            "{bytes:?}: a warning names the file: {stderr}"
        );
        let s = sb.state();
        assert!(s["lastRunAt"].is_string(), "rewritten as valid state: {s}");
        assert_eq!(s["idleReason"], "no-ready-beads");
    }
    std::fs::remove_file(&state).unwrap();
    let o = sb.run(&["tick", "--json"]);
    assert!(o.status.success());
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["run"], "full", "a missing state file is a first run");
    assert!(sb.state()["lastRunAt"].is_string());
}

#[test]
fn c1_5_c2_8_status_md_on_full_runs_only_with_timestamp_iterations_and_counts() {
    let sb = install(SLEEPER, "");
    br_project(&sb, "app", 1, 3, &[]);
    // A project whose iteration is still being planned, and one with none at all.
    let later = br_project(&sb, "later", 1, 2, &[]);
    sb.iteration(
        "later",
        1,
        "planning",
        &[(later[0].as_str(), "x"), (later[1].as_str(), "y")],
    );
    sb.ok(&["new", "bare", "--tracker", "workplan"]);

    let before = Utc::now();
    let r = sb.tick(&[]);
    no_errors(&r);
    let after = Utc::now();
    let text = std::fs::read_to_string(status_path(&sb)).unwrap();
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
    sb.tick(&[]); // idle (all-at-capacity)
    let written = snapshot(&status_path(&sb)).unwrap();
    std::thread::sleep(Duration::from_millis(30));
    for _ in 0..3 {
        assert_eq!(sb.tick(&[])["run"], "skipped");
    }
    assert_eq!(snapshot(&status_path(&sb)).unwrap(), written);
    std::thread::sleep(Duration::from_millis(30));
    sb.tick(&["--force"]);
    assert_ne!(snapshot(&status_path(&sb)).unwrap().1, written.1);
}

// ---------------------------------------------------------------------------------------------
// Failure isolation, dry runs, the native tracker, the JSON report

#[test]
fn c2_2_a_failing_or_hanging_tracker_is_reported_and_only_its_project_skipped() {
    let sb = install(SLEEPER, "[tracker]\ntimeout_secs = 1\n");
    // `bad` says `Tracker: br`, and the br on PATH is a stub; `good` is on the native tracker.
    sb.ok(&["new", "bad", "--tracker", "workplan"]);
    sb.set_field("bad", "Tracker", "br");
    sb.iteration("bad", 1, "active", &[("bad-x1", "never seen")]);
    let good = workplan_project(&sb, "good", 1, 3);

    sb.script("bin/br", "echo 'database is on fire' >&2\nexit 1");
    let r = sb.tick(&[]);
    assert_eq!(spawned(&r), [("good".to_string(), good[0].clone())]);
    let errs = errors(&r);
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(
        errs[0].starts_with("bad: ") && errs[0].contains("database is on fire"),
        "{errs:?}"
    );
    let status = std::fs::read_to_string(status_path(&sb)).unwrap();
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
    sb.script("bin/br", "exec sleep 29.217");
    let t = Instant::now();
    let r = sb.tick(&[]);
    let took = t.elapsed();
    assert!(took < Duration::from_secs(10), "took {took:?}");
    assert_eq!(
        spawned(&r),
        [("good".to_string(), good[1].clone())],
        "{r:#}"
    );
    assert_eq!(zombies(&r), [(good[0].clone(), "bead-closed".to_string())]);
    let errs = errors(&r);
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(
        errs[0].starts_with("bad: ") && errs[0].contains("timed out"),
        "{errs:?}"
    );
    assert!(
        !process_with_arg("29.217"),
        "the hung tracker's process is killed"
    );
    assert!(!sb.braids_dir().join("sessions/bad_bad-x1.json").exists());
}

#[test]
fn c2_1_dry_run_kills_claims_spawns_and_writes_nothing() {
    let sb = install(SLEEPER, "");
    let ids = br_project(&sb, "app", 2, 3, &[]);
    let wp = workplan_project(&sb, "plan", 1, 2);
    // An item without an id: a real run would write one into the file.
    let wp_file = sb.project("plan").join(".braids/WORKPLAN.md");
    let mut text = std::fs::read_to_string(&wp_file).unwrap();
    text.push_str("- [ ] an item nobody has numbered\n");
    std::fs::write(&wp_file, &text).unwrap();

    let files = |sb: &Sandbox| {
        [
            state_path(sb),
            status_path(sb),
            sb.braids_dir().join(".tick.lock"),
            wp_file.clone(),
        ]
        .map(|p| snapshot(&p))
    };
    let tree = |dir: PathBuf| -> Vec<PathBuf> {
        let mut out = vec![];
        let mut stack = vec![dir];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                if e.path().is_dir() {
                    stack.push(e.path());
                }
                out.push(e.path());
            }
        }
        out.sort();
        out
    };

    // A fresh installation: everything a run would do is reported, nothing happens.
    let before = (files(&sb), tree(sb.braids_dir()));
    assert!(before.0[0].is_none(), "no state yet");
    let r = sb.tick(&["--dry-run"]);
    no_errors(&r);
    assert_eq!(r["dry_run"], true);
    assert_eq!(r["action"], "spawn");
    let mut want = vec![
        ("app".to_string(), ids[0].clone()),
        ("app".to_string(), ids[1].clone()),
        ("plan".to_string(), wp[0].clone()),
    ];
    want.sort();
    let mut got_spawns = spawned(&r);
    got_spawns.sort();
    assert_eq!(got_spawns, want);
    assert_eq!(
        (files(&sb), tree(sb.braids_dir())),
        before,
        "nothing written"
    );
    assert!(labels(&sb).is_empty(), "nothing spawned");
    assert!(
        br_with_status(&sb, "app", "in_progress").is_empty(),
        "nothing claimed"
    );
    assert_eq!(std::fs::read_to_string(&wp_file).unwrap(), text);

    // With workers running and one of them a zombie: reported, not killed.
    let real = sb.tick(&[]);
    no_errors(&real);
    assert_eq!(spawned(&real).len(), 3);
    let p0 = pid_of(&sb, &label("app", &ids[0]));
    sb.br("app", &["close", &ids[0], "--json"]);
    let before = (files(&sb), tree(sb.braids_dir()), labels(&sb));
    std::thread::sleep(Duration::from_millis(30));
    let r = sb.tick(&["--dry-run"]);
    no_errors(&r);
    assert_eq!(zombies(&r), [(ids[0].clone(), "bead-closed".to_string())]);
    assert_eq!(r["zombies"][0]["outcome"], Value::Null, "not killed");
    assert_eq!(spawned_beads(&r), ids[2..3]);
    assert!(group_alive(p0), "the zombie still runs");
    assert_eq!(
        (files(&sb), tree(sb.braids_dir()), labels(&sb)),
        before,
        "nothing written, killed or spawned"
    );
    assert_eq!(br_status(&sb, "app", &ids[2]), "open");
}

#[test]
fn c4_6_native_workplan_tracker_spawns_claims_and_kills_the_same_way() {
    let sb = install(SLEEPER, "");
    let ids = workplan_project(&sb, "wp", 2, 3);
    let file = sb.project("wp").join(".braids/WORKPLAN.md");

    let r1 = sb.tick(&[]);
    no_errors(&r1);
    assert_eq!(spawned_beads(&r1), ids[..2]);
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
        got(&sb, &l0)
    });
    assert_eq!(
        msg,
        format!(
            "Project: {}\nBead: {}\nIteration: 001\nChannel: \n",
            sb.project("wp").display(),
            ids[0]
        )
    );
    let p0 = pid_of(&sb, &l0);

    let r2 = sb.tick(&[]);
    assert_eq!(r2["idle_reason"], "all-at-capacity", "{r2:#}");

    // A person ticks the first item off.
    let closed =
        std::fs::read_to_string(&file)
            .unwrap()
            .replacen("- [ ] wp item 1", "- [x] wp item 1", 1);
    std::fs::write(&file, &closed).unwrap();
    let r3 = sb.tick(&["--force"]); // inside the all-at-capacity backoff
    no_errors(&r3);
    assert_eq!(
        zombies(&r3),
        [(ids[0].clone(), "bead-closed".to_string())],
        "{r3:#}\n{closed}"
    );
    assert!(!group_alive(p0));
    assert_eq!(spawned_beads(&r3), ids[2..3]);
    assert_eq!(
        labels(&sb),
        [label("wp", &ids[1]), label("wp", &ids[2])].into()
    );
}

#[test]
fn tick_json_has_exactly_the_documented_keys() {
    let sb = install(SLEEPER, "");
    let ids = br_project(&sb, "app", 1, 2, &[]);
    sb.tick(&[]);
    sb.br("app", &["close", &ids[0], "--json"]);
    let full = sb.tick(&[]);
    no_errors(&full);
    assert_eq!(keys(&full), set(REPORT_KEYS), "{full:#}");
    assert_eq!(keys(&full["spawns"][0]), set(SPAWN_KEYS));
    assert_eq!(keys(&full["zombies"][0]), set(ZOMBIE_KEYS));

    let idle = sb.tick(&[]);
    assert_eq!(idle["action"], "idle");
    assert_eq!(keys(&idle), set(REPORT_KEYS));
    let skipped = sb.tick(&[]);
    assert_eq!(skipped["run"], "skipped");
    let mut with_skip = set(REPORT_KEYS);
    with_skip.extend(SKIPPED_KEYS);
    assert_eq!(keys(&skipped), with_skip, "{skipped:#}");

    // The README documents every key.
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let section = readme
        .split("### `braids tick --json`")
        .nth(1)
        .expect("README.md has a `braids tick --json` section");
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
            "README does not document `{k}`"
        );
    }
}
