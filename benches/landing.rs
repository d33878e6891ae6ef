//! `cargo bench --bench landing`: pushing a bead's landing commit onto an upstream others
//! moved 100 commits ahead (`BRAIDS_BENCH_AHEAD`), as a worker does it: one fetch and the
//! replay of braids' unpushed commit (`git::catch_up`), then one push. Beside it, the same
//! push onto an upstream nobody moved, and a push left to find out by being refused (the
//! catch-up then happens inside `git::push`: one refused push more). Wall time, median and
//! minimum of five runs each, with real git and a bare upstream on the local disk.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const TIMEOUT: Duration = Duration::from_secs(120);

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=bench",
            "-c",
            "user.email=bench@example.com",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

/// A bare upstream with a few files, braids' clone with one unpushed landing commit, and the
/// upstream `ahead` commits further on from somebody else's clone.
fn world(tmp: &Path, ahead: usize) -> PathBuf {
    let bare = tmp.join("up.git");
    let seed = tmp.join("seed");
    std::fs::create_dir_all(&seed).unwrap();
    git(&seed, &["init", "-q", "-b", "main"]);
    for i in 0..50 {
        std::fs::write(seed.join(format!("f{i}.txt")), format!("file {i}\n")).unwrap();
    }
    git(&seed, &["add", "-A"]);
    git(&seed, &["commit", "-q", "-m", "start"]);
    git(
        tmp,
        &[
            "clone",
            "-q",
            "--bare",
            seed.to_str().unwrap(),
            bare.to_str().unwrap(),
        ],
    );
    let ours = tmp.join("ours");
    let theirs = tmp.join("theirs");
    for c in [&ours, &theirs] {
        git(
            tmp,
            &["clone", "-q", bare.to_str().unwrap(), c.to_str().unwrap()],
        );
    }
    std::fs::write(ours.join("work.txt"), "the bead's work\n").unwrap();
    git(&ours, &["add", "work.txt"]);
    git(&ours, &["commit", "-q", "-m", "Work (app-1)"]);
    for i in 0..ahead {
        std::fs::write(
            theirs.join(format!("f{}.txt", i % 50)),
            format!("theirs {i}\n"),
        )
        .unwrap();
        git(&theirs, &["commit", "-q", "-am", &format!("theirs {i}")]);
    }
    if ahead > 0 {
        git(&theirs, &["push", "-q", "origin", "main"]);
    }
    ours
}

fn measure(name: &str, ahead: usize, land: impl Fn(&Path)) {
    let mut times = Vec::new();
    for _ in 0..5 {
        let tmp = tempfile::tempdir().unwrap();
        let ours = world(tmp.path(), ahead);
        let started = Instant::now();
        land(&ours);
        times.push(started.elapsed());
    }
    times.sort();
    println!(
        "{name:<48} median {:>7.1} ms   min {:>7.1} ms",
        times[2].as_secs_f64() * 1000.0,
        times[0].as_secs_f64() * 1000.0
    );
}

fn main() {
    let ahead: usize = std::env::var("BRAIDS_BENCH_AHEAD")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    println!("landing one commit with real git (load {:?})", load());
    measure("push, upstream not moved", 0, |ours| {
        let _ = braids::git::push(ours, "main", TIMEOUT).unwrap();
    });
    measure(
        &format!("catch up + push, upstream {ahead} ahead"),
        ahead,
        |ours| {
            let c = braids::git::catch_up(ours, "main", TIMEOUT).unwrap();
            assert_eq!(c.replayed, 1);
            let p = braids::git::push(ours, "main", TIMEOUT).unwrap();
            assert_eq!(p.replayed, 0, "one push, not refused");
        },
    );
    measure(
        &format!("push refused, caught up, pushed ({ahead} ahead)"),
        ahead,
        |ours| {
            let p = braids::git::push(ours, "main", TIMEOUT).unwrap();
            assert_eq!(p.replayed, 1);
        },
    );
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}
