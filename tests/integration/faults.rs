//! Faults, with the real binary and real processes: a tracker that hangs, talks garbage, fails
//! or disappears mid-run; a project directory that vanishes mid-run; a state file or STATUS.md
//! that is truncated, a directory or a FIFO; a full disk; SIGKILL at random points; fifty ticks
//! at once; a worker that ignores SIGTERM; a pid reused by an unrelated process.
//!
//! Every test checks the same two things besides its own: the run went on for the other
//! projects, and nothing braids owns was corrupted (state and STATUS.md whole and parseable,
//! registry untouched, tracker files intact, no bead stranded).

use std::time::Duration;

use braids::session::KillOutcome;
use braids::tick::{RunType, TickReport};

use crate::support::checks::{assert_intact, assert_no_stranded_beads, status_md_whole};
use crate::support::files::copy_tree;
use crate::support::procs::{alive, proc_starttime, Bystander};
use crate::support::{br_path, wait_for, Install, ReportExt, Run, Sandbox, SLEEPER};

/// An installation for faults: its runs see no `br` but the test's stubs, its workers record
/// their spawn message and sleep, and its registry is a bare table of hand-written projects.
fn install() -> Install {
    Install::new()
        .isolated_path()
        .worker(SLEEPER)
        .plain_registry()
}

/// Two healthy projects on the native tracker: `ok-a` (MaxWorkers 2, three beads) and `ok-b`
/// (MaxWorkers 1, two beads). A good run spawns ok-a:oka-1, ok-a:oka-2 and ok-b:okb-1.
fn base() -> Sandbox {
    let s = install().build();
    s.new_project("ok-a")
        .by_hand()
        .max_workers(2)
        .ids(&["oka-1", "oka-2", "oka-3"])
        .create();
    s.new_project("ok-b")
        .by_hand()
        .ids(&["okb-1", "okb-2"])
        .create();
    s
}

/// `braids tick --json --force`, whatever happens (a hang is killed after a minute).
fn tick(s: &Sandbox) -> Run {
    s.tick().force().limit(Duration::from_secs(60)).output()
}

const HEALTHY: [&str; 3] = [
    "project:ok-a:oka-1",
    "project:ok-a:oka-2",
    "project:ok-b:okb-1",
];
const ITEMS: [(&str, usize); 2] = [("ok-a", 3), ("ok-b", 2)];

/// The healthy projects got their workers, and each worker got a four-line spawn message.
#[track_caller]
fn assert_healthy_spawned(s: &Sandbox, r: &TickReport) {
    let mut got = r.labels();
    got.sort();
    assert_eq!(
        got, HEALTHY,
        "the run did not go on for the healthy projects: {r:#?}"
    );
    wait_for_messages(s, &HEALTHY);
}

#[track_caller]
fn wait_for_messages(s: &Sandbox, labels: &[&str]) {
    for label in labels {
        let msg = wait_for(
            &format!("the worker for {label} to get its message"),
            Duration::from_secs(20),
            || s.spawn_message(label).filter(|m| m.lines().count() >= 4),
        );
        let keys: Vec<&str> = msg
            .lines()
            .map(|l| l.split_once(':').map_or(l, |(k, _)| k))
            .collect();
        assert_eq!(
            keys,
            ["Project", "Bead", "Iteration", "Channel"],
            "2.4 violated: {msg:?}"
        );
    }
}

// ---- the tracker ----------------------------------------------------------------------------

/// A project whose `br` is the stub `script` (with `config` for the tick): the tick still
/// exits 0, the healthy projects still spawn, the error names the broken project and every
/// `expect` fragment, and nothing of the others is touched. Returns the run for further checks.
fn tracker_fault_costs_only_its_project(
    slug: &str,
    config: &str,
    script: &str,
    expect: &[&str],
) -> (Sandbox, Run) {
    let s = base();
    if !config.is_empty() {
        s.config(config);
    }
    s.new_project(slug).by_hand().stub_br().create();
    s.script("bin/br", script);
    let reg = s.registry_text();
    let r = s.tick().force().output();
    assert!(!r.timed_out, "the tick hung behind a broken tracker");
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let v = r.report();
    assert_healthy_spawned(&s, &v);
    let text = v.errors_text();
    assert!(
        text.contains(slug) && expect.iter().all(|e| text.contains(e)),
        "{text}"
    );
    assert_intact(&s, &reg, &["ok-a", "ok-b", slug], &ITEMS);
    (s, r)
}

#[test]
fn c2_2_fault_a_hung_tracker_costs_only_its_project() {
    // About the tracker timeout: 5 s against a tracker that would answer in ten minutes.
    let (s, r) = tracker_fault_costs_only_its_project(
        "stuck",
        "[tracker]\ntimeout_secs = 5\n",
        "echo $$ >> \"$HOME/br-pids\"\nexec sleep 600",
        &["timed out"],
    );
    assert!(
        r.elapsed < Duration::from_secs(60),
        "[tracker] timeout_secs = 5 cuts off a tracker hung for 600 s, yet the tick took {:?}",
        r.elapsed
    );
    for pid in s.read("br-pids").lines() {
        assert!(
            !alive(pid.parse().unwrap()),
            "the hung tracker {pid} was left running"
        );
    }
}

#[test]
fn c2_2_fault_a_tracker_talking_garbage_costs_only_its_project() {
    tracker_fault_costs_only_its_project(
        "babble",
        "",
        "printf '{\"issues\": [{\"id\": \"x-1\", \"status\": \\377\\376 garbage'\nexit 0",
        &["cannot read"],
    );
}

#[test]
fn c2_2_fault_a_failing_tracker_costs_only_its_project() {
    tracker_fault_costs_only_its_project(
        "broken",
        "",
        "echo 'database disk image is malformed' >&2\nexit 7",
        &["malformed", "exit 7"],
    );
}

#[test]
fn c2_1_fault_a_tracker_that_vanishes_mid_run_leaves_its_bead_unclaimed() {
    let s = base();
    s.new_project("vanish")
        .by_hand()
        .br()
        .titled(&["Only bead"])
        .create();
    let real = br_path();
    // answers through the real br, and deletes itself during `ready` (or, when `list` and
    // `ready` were read from br's JSONL, 5.1, during the claim's first read): the claim that
    // follows finds no `br` on PATH
    s.script(
        "bin/br",
        &format!(
            "echo \"$*\" >> \"$HOME/br-calls\"\ncase \"$1\" in ready|show) rm -f \"$0\";; esac\nexec {} \"$@\"",
            real.display()
        ),
    );
    let reg = s.registry_text();
    let v = tick(&s).assert_ok().report();
    assert_healthy_spawned(&s, &v);
    assert!(
        !s.bin().join("br").exists(),
        "the stub never ran `ready` or `show`"
    );
    assert!(
        v.errors_text().contains("vanish") && v.errors_text().contains("cannot claim"),
        "{}",
        v.errors_text()
    );
    let list = s.br("vanish", &["list", "--json"]);
    assert!(
        list.contains("\"open\"") && !list.contains("in_progress"),
        "the bead must stay open when its claim could not be made: {list}"
    );
    assert_intact(&s, &reg, &["ok-a", "ok-b", "vanish"], &ITEMS);
    assert_no_stranded_beads(&s, &["ok-a", "ok-b"]);
}

#[test]
fn c2_1_fault_a_project_directory_vanishing_mid_run() {
    let s = base();
    let root = s
        .new_project("doomed")
        .by_hand()
        .br()
        .titled(&["Doomed bead"])
        .create()
        .root;
    let real = br_path();
    // the claim goes through, then the directory is gone before the worker can start in it
    s.script(
        "bin/br",
        &format!(
            "echo \"$*\" >> \"$HOME/br-calls\"\n{real} \"$@\"\nrc=$?\ncase \"$1 $3\" in 'update --claim') rm -rf '{root}';; esac\nexit $rc",
            real = real.display(),
            root = root.display()
        ),
    );
    let reg = s.registry_text();
    let v = tick(&s).assert_ok().report();
    assert!(
        !root.exists(),
        "the stub never claimed: {}",
        s.read("br-calls")
    );
    assert_healthy_spawned(&s, &v);
    let e = v.errors_text();
    assert!(e.contains("cannot start a worker"), "{e}");
    // the claim could not be undone (its database went with the directory): it is remembered,
    // so a later run releases it when the tracker answers again (2.1)
    let claims = s.state().claims;
    assert!(claims.iter().any(|c| c.project == "doomed"), "{claims:?}");
    assert!(
        !s.session_records()
            .iter()
            .any(|r| r["label"].as_str().unwrap().contains("doomed")),
        "a session was recorded for a worker that never started"
    );
    // and the next run does not fall over the missing directory
    let r2 = tick(&s).assert_ok().report();
    assert!(r2.errors_text().contains("doomed"));
    assert_intact(&s, &reg, &["ok-a", "ok-b", "doomed"], &ITEMS);
}

// ---- the state file and STATUS.md -----------------------------------------------------------

#[test]
fn c1_6_fault_a_truncated_state_file_means_a_full_run_and_a_whole_rewrite() {
    for junk in [
        &b"{\"idleSince\": \"2026-03-01T09:00:00Z\", \"idleReason\": \"no-rea"[..],
        b"",
        b"\xff\xfe\x00garbage",
        b"null",
        b"[]",
    ] {
        let s = base();
        std::fs::write(s.state_path(), junk).unwrap();
        let reg = s.registry_text();
        let r = tick(&s);
        assert_eq!(r.code, Some(0), "{junk:?}: {}", r.stderr);
        assert_healthy_spawned(&s, &r.report());
        assert_intact(&s, &reg, &["ok-a", "ok-b"], &ITEMS);
    }
}

#[test]
fn c1_6_fault_a_state_file_that_is_a_directory() {
    let s = base();
    // a first, normal run starts workers
    assert_eq!(tick(&s).code, Some(0));
    assert_eq!(s.session_records().len(), 3);
    // then the state file becomes a directory, and a person closes okb-1 under its worker
    std::fs::remove_file(s.state_path()).unwrap();
    std::fs::create_dir(s.state_path()).unwrap();
    std::fs::write(s.state_path().join("keep"), "x").unwrap();
    s.close_by_hand("ok-b", "okb-1");
    let r = tick(&s);
    assert!(!r.timed_out);
    // the run went on: the zombie was killed ...
    assert!(
        !s.session_records()
            .iter()
            .any(|r| r["label"] == "project:ok-b:okb-1"),
        "the zombie of okb-1 was not killed: {}",
        r.stdout
    );
    // ... but nothing was claimed that could not be remembered: a claim braids cannot record
    // would strand its bead if the worker died (2.1)
    let wp = s.workplan("ok-b");
    assert_eq!(
        wp["okb-2"].0, "open",
        "okb-2 claimed without a record: {wp:?}"
    );
    // ... and it said so, naming the file, instead of losing the record silently
    assert_ne!(r.code, Some(0));
    assert!(
        r.stderr.contains(".orchestrator-state.json"),
        "{}",
        r.stderr
    );
    assert!(
        s.state_path().join("keep").is_file(),
        "the directory was touched"
    );
    // the dashboard still tells people what happened
    let status = std::fs::read_to_string(s.status_path()).unwrap();
    status_md_whole(&status, &["ok-a", "ok-b"]).unwrap();
    assert!(status.contains(".orchestrator-state.json"), "{status}");
    assert_no_stranded_beads(&s, &["ok-a"]);
}

#[test]
fn c1_6_fault_a_state_file_that_is_a_fifo_does_not_hang_the_tick() {
    let s = base();
    nix::unistd::mkfifo(
        &s.state_path(),
        nix::sys::stat::Mode::from_bits_truncate(0o600),
    )
    .unwrap();
    let r = tick(&s);
    assert!(
        !r.timed_out,
        "1.6 violated: a FIFO in place of the state file hangs the tick (and with it the lock)"
    );
    assert_healthy_spawned(&s, &r.report());
}

#[test]
fn c2_8_fault_a_truncated_status_md_is_rewritten_whole() {
    let s = base();
    assert_eq!(tick(&s).code, Some(0));
    let full = std::fs::read(s.status_path()).unwrap();
    std::fs::write(s.status_path(), &full[..full.len() / 2]).unwrap();
    let reg = s.registry_text();
    let r = tick(&s);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_intact(&s, &reg, &["ok-a", "ok-b"], &ITEMS);
}

#[test]
fn c2_8_fault_status_md_that_is_a_directory_or_a_fifo() {
    for kind in ["dir", "fifo"] {
        let s = base();
        std::fs::remove_file(s.status_path()).unwrap();
        match kind {
            "dir" => std::fs::create_dir(s.status_path()).unwrap(),
            _ => nix::unistd::mkfifo(
                &s.status_path(),
                nix::sys::stat::Mode::from_bits_truncate(0o600),
            )
            .unwrap(),
        }
        let r = tick(&s);
        assert!(!r.timed_out, "{kind}: the tick hung");
        // the run happened and was recorded ...
        assert!(s.try_state().is_some(), "{kind}: the state was not written");
        assert_eq!(
            s.session_records().len(),
            3,
            "{kind}: the run did not go on"
        );
        if kind == "dir" {
            // ... and the dashboard that could not be written is an error naming it
            assert_ne!(r.code, Some(0));
            assert!(r.stderr.contains("STATUS.md"), "{}", r.stderr);
            assert!(s.status_path().is_dir());
        } else {
            assert_eq!(r.code, Some(0), "{}", r.stderr);
            status_md_whole(
                &std::fs::read_to_string(s.status_path()).unwrap(),
                &["ok-a", "ok-b"],
            )
            .unwrap();
        }
    }
}

#[test]
fn c1_1_fault_fifos_where_braids_reads_its_own_files_never_hang_a_tick() {
    for (what, rel) in [
        ("registry.md", "registry.md"),
        ("config.toml", "config.toml"),
        ("a session record", "sessions/ok-a_oka-9.json"),
        ("PROJECT.md", "../../Projects/ok-b/.braids/PROJECT.md"),
        (
            "ITERATION.md",
            "../../Projects/ok-b/.braids/iterations/001/ITERATION.md",
        ),
        ("WORKPLAN.md", "../../Projects/ok-b/.braids/WORKPLAN.md"),
    ] {
        let s = base();
        let p = s.braids_dir().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        let _ = std::fs::remove_file(&p);
        nix::unistd::mkfifo(&p, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let r = tick(&s);
        assert!(
            !r.timed_out,
            "a FIFO in place of {what} hangs `braids tick` (and every later tick behind its lock)"
        );
        match what {
            // without a registry there is nothing to run; a config that cannot be read stops
            // the command with the file and the fix
            "registry.md" => assert_eq!(r.code, Some(0), "{}", r.stderr),
            "config.toml" => {
                assert_eq!(r.code, Some(2));
                assert!(r.stderr.contains("config.toml") && r.stderr.contains("FIFO"));
            }
            // one project's file costs that project, or that one slot, and nothing else
            _ => {
                let got = r.report().labels();
                assert!(
                    got.contains(&"project:ok-a:oka-1".to_string()),
                    "{what}: the run did not go on: {got:?} {}",
                    r.stderr
                );
            }
        }
        let r = s.run_limited(&["check", "--json"], Duration::from_secs(60));
        assert!(
            !r.timed_out,
            "a FIFO in place of {what} hangs `braids check`"
        );
        // (the Sandbox's own cleanup reads session records)
        let _ = std::fs::remove_file(&p);
    }
}

// ---- the disk -------------------------------------------------------------------------------

/// A tmpfs of `size` mounted on `dir` for the life of the guard.
struct Mount(std::path::PathBuf);

impl Mount {
    fn tmpfs(dir: &std::path::Path, size: &str) -> Option<Mount> {
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| Mount(dir.to_path_buf()))
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

#[test]
fn c1_6_fault_a_full_disk_loses_nothing_and_strands_nothing() {
    let s = base();
    // a first run, so there is an old state and dashboard to keep; then room for more workers
    assert_eq!(tick(&s).code, Some(0));
    s.set_field("ok-a", "MaxWorkers", "4");
    for slug in ["ok-a", "ok-b"] {
        let _ = std::fs::OpenOptions::new()
            .append(true)
            .open(s.project(slug).join(".braids/WORKPLAN.md"))
            .map(|mut f| {
                use std::io::Write;
                writeln!(f, "- [ ] Later work <!-- id:{slug}-late -->").unwrap()
            });
    }
    // move braids' directory onto a tiny tmpfs and fill it up
    let dir = s.braids_dir();
    let keep = s.home().join("braids-copy");
    copy_tree(&dir, &keep);
    let Some(mount) = Mount::tmpfs(&dir, "512k") else {
        eprintln!("skipped: cannot mount a tmpfs here (needs CAP_SYS_ADMIN)");
        return;
    };
    copy_tree(&keep, &dir);
    let old_state = std::fs::read(s.state_path()).unwrap();
    let old_status = std::fs::read(s.status_path()).unwrap();
    let filler = dir.join("filler");
    let mut f = std::fs::File::create(&filler).unwrap();
    let chunk = vec![0u8; 4096];
    use std::io::Write;
    while f.write_all(&chunk).is_ok() {}
    drop(f);

    let r = tick(&s);
    assert!(!r.timed_out);
    assert_ne!(
        r.code,
        Some(0),
        "a run that could not write its state must say so"
    );
    assert!(
        r.stderr.contains("No space left") || r.stderr.contains("cannot"),
        "{}",
        r.stderr
    );
    // the old files are whole: a failed write never leaves half of one
    assert_eq!(std::fs::read(s.state_path()).unwrap(), old_state);
    assert_eq!(std::fs::read(s.status_path()).unwrap(), old_status);
    // workers that could not be recorded were stopped and their claims undone, or remembered
    assert_no_stranded_beads(&s, &["ok-a", "ok-b"]);

    // space again: the next run works and leaves everything whole
    std::fs::remove_file(&filler).unwrap();
    let reg = s.registry_text();
    let r = tick(&s);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_intact(&s, &reg, &["ok-a", "ok-b"], &[("ok-a", 4), ("ok-b", 3)]);
    assert_no_stranded_beads(&s, &["ok-a", "ok-b"]);
    // the records of this run's workers live on the tmpfs: stop them before it goes
    s.kill_workers();
    drop(mount);
}

// ---- signals and concurrency ----------------------------------------------------------------

/// A small deterministic PRNG for kill delays.
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[test]
fn c1_6_fault_sigkill_at_random_points_never_leaves_half_a_file_or_a_stranded_bead() {
    // workers that exit at once and leave their bead in_progress, and no claim grace: every run
    // forgets ended sessions, releases claims, claims and spawns again — every write of a tick
    // happens in every run, and a kill can land anywhere in them
    // (a claim grace of 0 s is a wait, not a deadline: load cannot make it fire early)
    let s = install()
        .worker("cat >/dev/null\nexit 0")
        .config("[sessions]\nclaim_grace_secs = 0\n")
        .build();
    s.new_project("ka")
        .by_hand()
        .max_workers(2)
        .ids(&["ka-1", "ka-2", "ka-3"])
        .create();
    s.new_project("kb")
        .by_hand()
        .max_workers(2)
        .ids(&["kb-1", "kb-2"])
        .create();
    let reg = s.registry_text();
    let iterations: u64 = std::env::var("BRAIDS_KILL_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(60);
    let mut rng = 0x5EED_u64;
    let mut prev_state: Option<Vec<u8>> = None;
    let mut prev_status: Option<Vec<u8>> = None;
    let mut changed = 0;
    for i in 0..iterations {
        let delay = Duration::from_micros(splitmix(&mut rng) % 60_000);
        let mut child = s
            .command(&["tick", "--force"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(delay);
        let _ = child.kill(); // SIGKILL
        let _ = child.wait();
        // each file is the old version or a whole new one, never a mix
        if let Ok(now) = std::fs::read(s.state_path()) {
            if prev_state.as_ref() != Some(&now) {
                let v: serde_json::Value = serde_json::from_slice(&now).unwrap_or_else(|e| {
                    panic!(
                        "1.6 violated after a kill at {delay:?} (iteration {i}): the state is not whole ({e}): {:?}",
                        String::from_utf8_lossy(&now)
                    )
                });
                assert!(v.get("lastRunAt").is_some(), "{v}");
                changed += 1;
            }
            prev_state = Some(now);
        }
        if let Ok(now) = std::fs::read(s.status_path()) {
            if prev_status.as_ref() != Some(&now) {
                let text = String::from_utf8(now.clone()).expect("STATUS.md is UTF-8");
                // the first dashboard is `braids init`'s placeholder
                if text.starts_with("# braids status\n") && text.contains("\nUpdated: ") {
                    if let Err(e) = status_md_whole(&text, &["ka", "kb"]) {
                        panic!("1.5 violated after a kill at {delay:?}: {e}:\n{text}");
                    }
                }
            }
            prev_status = Some(now);
        }
        for slug in ["ka", "kb"] {
            let n = s.workplan(slug).len();
            assert!(n >= 2, "WORKPLAN.md of {slug} lost items after a kill: {n}");
        }
    }
    assert!(
        changed > 0,
        "no kill ever let a run finish writing its state"
    );
    // runs that are not killed pick up after every kill: no bead stays stranded
    for _ in 0..3 {
        let r = tick(&s);
        assert_eq!(r.code, Some(0), "{}", r.stderr);
    }
    assert_no_stranded_beads(&s, &["ka", "kb"]);
    assert!(s.state().last_run_at.is_some());
    status_md_whole(
        &std::fs::read_to_string(s.status_path()).unwrap(),
        &["ka", "kb"],
    )
    .unwrap();
    assert_eq!(s.registry_text(), reg);
    let temps = |s: &Sandbox| -> Vec<std::path::PathBuf> {
        [s.braids_dir(), s.braids_dir().join("sessions")]
            .iter()
            .flat_map(|d| std::fs::read_dir(d).unwrap().flatten())
            .filter(|e| e.file_name().to_string_lossy().starts_with(".braids-tmp-"))
            .map(|e| e.path())
            .collect()
    };
    let left = temps(&s);
    eprintln!(
        "{iterations} kills, state rewritten {changed} times, {} temp files left by killed writes",
        left.len()
    );
    // an hour later, the next run sweeps them away
    for p in &left {
        let ok = std::process::Command::new("touch")
            .args(["-d", "2 hours ago"])
            .arg(p)
            .status()
            .unwrap();
        assert!(ok.success());
    }
    assert_eq!(tick(&s).code, Some(0));
    assert_eq!(
        temps(&s),
        Vec::<std::path::PathBuf>::new(),
        "half-written temp files pile up"
    );
}

#[test]
fn c2_2_fault_fifty_ticks_at_once_spawn_each_bead_once() {
    let s = install().build();
    let beads: Vec<Vec<String>> = (0..3)
        .map(|p| (1..=6).map(|b| format!("f{p}-{b}")).collect())
        .collect();
    for (p, ids) in beads.iter().enumerate() {
        let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
        s.new_project(&format!("fifty-{p}"))
            .by_hand()
            .max_workers(2)
            .ids(&refs)
            .create();
    }
    let reg = s.registry_text();
    let mut all = Vec::new();
    let mut full = 0;
    for v in s.concurrent_ticks(50) {
        if v.run == RunType::Full {
            full += 1;
        }
        all.extend(v.labels());
    }
    let mut uniq = all.clone();
    uniq.sort();
    uniq.dedup();
    assert_eq!(
        uniq.len(),
        all.len(),
        "2.2 violated: a bead was spawned twice: {all:?}"
    );
    assert_eq!(
        all.len(),
        6,
        "three projects with MaxWorkers 2 get six workers: {all:?}"
    );
    assert!(full >= 1);
    let records = s.session_records();
    assert_eq!(records.len(), 6, "{records:?}");
    let mut in_progress = 0;
    for p in 0..3 {
        in_progress += s
            .workplan(&format!("fifty-{p}"))
            .values()
            .filter(|(st, _)| st == "in_progress")
            .count();
    }
    assert_eq!(in_progress, 6, "claims and workers disagree");
    let claims = s.state().claims.len();
    assert_eq!(claims, 6);
    assert_intact(
        &s,
        &reg,
        &["fifty-0", "fifty-1", "fifty-2"],
        &[("fifty-0", 6), ("fifty-1", 6), ("fifty-2", 6)],
    );
}

#[test]
fn c2_6_fault_a_worker_ignoring_sigterm_is_sigkilled_after_the_grace() {
    let s = base();
    let stubborn = s.script(
        "bin/stubborn-worker",
        "trap '' TERM\necho $$ > \"$HOME/stubborn-$BRAIDS_LABEL.pid\"\ncat >/dev/null\nexec sleep 300",
    );
    s.new_project("mule")
        .by_hand()
        .ids(&["mule-1", "mule-2"])
        .create();
    let reg = s.registry_text();
    // mule's workers ignore SIGTERM: a project-level Worker command is not a thing, so the
    // stubborn worker is the installation's, and every worker of this run ignores SIGTERM.
    // This test is about the grace: 5 s, and the kill comes no sooner.
    let grace = 5;
    s.config(&format!(
        "[worker]\ncommand = [\"{}\"]\n[sessions]\nkill_grace_secs = {grace}\n",
        stubborn.display()
    ));
    tick(&s).assert_ok();
    let pidfile = s.home().join("stubborn-project:mule:mule-1.pid");
    let pid: u32 = wait_for("mule-1 to start", Duration::from_secs(20), || {
        std::fs::read_to_string(&pidfile)
            .ok()
            .and_then(|t| t.trim().parse().ok())
    });
    assert!(alive(pid));
    // a person closes the bead: the worker is a zombie (2.6 rule 2)
    s.close_by_hand("mule", "mule-1");
    std::fs::write(
        s.project("ok-b").join(".braids/WORKPLAN.md"),
        std::fs::read_to_string(s.project("ok-b").join(".braids/WORKPLAN.md")).unwrap()
            + "- [ ] More <!-- id:okb-9 -->\n",
    )
    .unwrap();
    s.close_by_hand("ok-b", "okb-1");
    let r = tick(&s);
    r.assert_ok();
    let v = r.report();
    let kills: Vec<(String, Option<KillOutcome>)> = v
        .zombies
        .iter()
        .map(|z| (z.label.clone(), z.outcome))
        .collect();
    assert!(
        kills.contains(&("project:mule:mule-1".into(), Some(KillOutcome::Killed))),
        "2.6 violated: SIGTERM was ignored, so SIGKILL after kill_grace_secs must end it: {kills:?}"
    );
    assert!(
        r.elapsed >= Duration::from_secs(grace),
        "killed before the grace period: {:?}",
        r.elapsed
    );
    std::thread::sleep(Duration::from_millis(200));
    assert!(!alive(pid), "the stubborn worker survived");
    // the run went on: okb-1's worker was killed too, and ok-b and mule got new work
    let got = v.labels();
    assert!(
        got.contains(&"project:mule:mule-2".to_string())
            && got.iter().any(|l| l.starts_with("project:ok-b:")),
        "{got:?}"
    );
    assert_intact(
        &s,
        &reg,
        &["ok-a", "ok-b", "mule"],
        &[("ok-a", 3), ("ok-b", 3), ("mule", 2)],
    );
}

#[test]
fn c2_6_fault_a_reused_pid_is_never_killed() {
    let s = base();
    // an unrelated long-running process, in its own process group
    let mut bystander = Bystander::start();
    let pid = bystander.pid();
    let start = proc_starttime(pid).expect("the bystander runs");
    // a record of a worker that ran as this pid long ago (another start time), for a bead that
    // is closed and a runtime far over WorkerTimeout: every rule says kill — if it were ours
    s.close_by_hand("ok-a", "oka-3");
    let sessions = s.braids_dir().join("sessions");
    std::fs::create_dir_all(&sessions).unwrap();
    for (bead, started) in [
        ("oka-3", "2026-01-01T00:00:00Z"),
        ("oka-9", "2020-01-01T00:00:00Z"),
    ] {
        std::fs::write(
            sessions.join(format!("ok-a_{bead}.json")),
            serde_json::json!({
                "label": format!("project:ok-a:{bead}"),
                "pid": pid,
                "starttime": start.saturating_sub(12345),
                "started_at": started,
                "log": s.home().join("old.log"),
            })
            .to_string(),
        )
        .unwrap();
    }
    let reg = s.registry_text();
    let v = tick(&s).assert_ok().report();
    assert!(
        v.zombies.is_empty(),
        "2.6 violated: a session whose pid now belongs to another process was treated as a worker: {v:#?}"
    );
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        alive(pid),
        "2.6 violated: braids killed an unrelated process that reused a worker's pid"
    );
    assert_eq!(bystander.0.try_wait().unwrap(), None);
    // the stale records were forgotten, and the run went on
    assert!(!sessions.join("ok-a_oka-3.json").exists());
    assert_healthy_spawned(&s, &v);
    assert_intact(&s, &reg, &["ok-a", "ok-b"], &ITEMS);
}
