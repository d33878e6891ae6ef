//! `cargo bench --bench sandbox`: what the agent's sandbox and its process container add to
//! starting an agent, through spawned processes as a worker starts them. The agent is `true`, so
//! what is measured is braids' share:
//!
//! - plain: spawning `true` and waiting for it (the floor);
//! - landlock: the policy computed (its `stat`s and `/etc` listing) and `true` run through
//!   `braids sandbox-exec`, the re-exec that enters Landlock;
//! - bwrap: the same through bubblewrap (with Landlock's network layer inside where the kernel
//!   has it), when bubblewrap is installed;
//! - container: a cgroup made, joined before exec, emptied and removed, and the scan of the
//!   bead's folders, around the plain spawn;
//! - scan: the scan of the bead's folders alone, which also follows every commit hook and setup
//!   command of a landing.
//!
//! Median and 95th percentile of `RUNS` runs each; target: the sandbox and the container each
//! add at most 50 ms at the median.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use braids::system::container::{self, Container};
use braids::system::sandbox::{choose, Kind, Place, Settings};

const RUNS: usize = 60;

fn braids() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_braids"))
}

fn bwrap() -> Option<String> {
    ["bwrap", "/opt/bwrap/usr/bin/bwrap"]
        .into_iter()
        .find(|p| {
            Command::new(p)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .map(String::from)
}

fn stats(mut d: Vec<Duration>) -> (Duration, Duration) {
    d.sort();
    (d[d.len() / 2], d[(d.len() * 95 / 100).min(d.len() - 1)])
}

fn run(cmd: &mut Command) {
    let ok = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "{cmd:?} failed");
}

fn time(label: &str, floor: Option<Duration>, mut f: impl FnMut()) -> Duration {
    f();
    let times: Vec<Duration> = (0..RUNS)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .collect();
    let (p50, p95) = stats(times);
    let added = floor.map_or(String::new(), |fl| {
        format!(
            "  (adds {:>6.1} ms)",
            p50.saturating_sub(fl).as_secs_f64() * 1e3
        )
    });
    println!(
        "{label:<10} p50 {:>6.1} ms  p95 {:>6.1} ms{added}",
        p50.as_secs_f64() * 1e3,
        p95.as_secs_f64() * 1e3
    );
    p50
}

fn main() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let ws = tmp.path().join("ws");
    let work = tmp.path().join("work");
    for d in [&home, &ws, &work] {
        std::fs::create_dir_all(d).unwrap();
    }
    let place = Place {
        workspace: ws.clone(),
        project: ws.clone(),
        tmp: work.join("tmp"),
        own: vec![work.clone()],
        protect: vec![],
    };
    println!(
        "{RUNS} runs each; Landlock ABI {}; cgroup: {}",
        braids::system::sandbox::landlock_abi(),
        container::cgroup_root().map_or("none".into(), |p| p.display().to_string())
    );
    let floor = time("plain", None, || run(&mut Command::new("true")));
    for (label, kind, program) in [
        ("landlock", Kind::Landlock, "bwrap".to_string()),
        ("bwrap", Kind::Bwrap, bwrap().unwrap_or_default()),
    ] {
        let settings = Settings {
            kind,
            home: home.clone(),
            ports: vec![8080],
            bwrap: program,
            ..Settings::default()
        };
        let Ok(choice) = choose(kind, &settings.bwrap) else {
            println!(
                "{label:<10} skipped: {}",
                choose(kind, &settings.bwrap).unwrap_err()
            );
            continue;
        };
        time(label, Some(floor), || {
            let policy = settings.policy(&place);
            let inner = Command::new("true");
            let mut cmd = settings
                .wrap_as(&braids(), &choice, &inner, &policy, &place.tmp)
                .unwrap();
            run(cmd.current_dir(&ws));
        });
    }
    time("container", Some(floor), || {
        let c = Container::create(&work, "bench", vec![ws.clone(), work.clone()]);
        let mut cmd = Command::new("true");
        c.join_on_exec(&mut cmd);
        run(&mut cmd);
        let _ = c.end();
    });
    time("scan", None, || {
        let _ = container::holders(&[ws.clone(), work.clone()]);
    });
}
