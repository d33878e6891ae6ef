//! `cargo bench --bench events`: what the supervisor's stream costs.
//!
//! - **write**: one event appended through the journal as braids writes it (the folder's
//!   lock, the counter, the event, status.json; each by temp + fsync + rename), one at a time
//!   and ten at a time; the cost per event, median and minimum over `BRAIDS_BENCH_EVENTS`
//!   appends (default 500).
//! - **list**: the real `braids events --json` over one project holding
//!   `BRAIDS_BENCH_LIST` events (default 100,000; the files are laid down directly, as a
//!   long-lived installation would have them), printing every one to /dev/null: wall time and
//!   peak RSS, and the same with 10 projects of a tenth as many each. Target: under 1 s, and a
//!   memory that does not grow with the events' contents (only their names are held).
//! - **follow**: how long after an append returns the real `braids events --follow --json`
//!   prints it, over `BRAIDS_BENCH_FOLLOW` events (default 200) spread over two projects, the
//!   second of which has no events folder when the follower starts: median, 99th percentile
//!   and worst. Target: a median under 100 ms (inotify wakes the follower; the 5 s rescan
//!   would show as seconds). The home is under /dev/shm when it exists, so the disk's moods
//!   are not measured.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use braids::events::{Draft, Journal, Kind};

fn main() {
    let n: usize = env("BRAIDS_BENCH_EVENTS", 500);
    let list: usize = env("BRAIDS_BENCH_LIST", 100_000);
    println!("load average: {}", load_average());
    write_cost(n);
    for projects in [1, 10] {
        list_cost(list, projects);
    }
    follow_latency(env("BRAIDS_BENCH_FOLLOW", 200));
}

fn follow_latency(n: usize) {
    use std::io::{BufRead, BufReader};
    let shm = Path::new("/dev/shm");
    let home = if shm.is_dir() {
        tempfile::tempdir_in(shm).unwrap()
    } else {
        tempfile::tempdir().unwrap()
    };
    let h = home.path();
    let bin = Path::new(env!("CARGO_BIN_EXE_braids"));
    init(bin, h);
    let roots: Vec<_> = ["a", "b"]
        .iter()
        .map(|s| h.join("Projects").join(s))
        .collect();
    let mut rows = String::from("| Slug | Status | Priority | Path |\n|---|---|---|---|\n");
    for (slug, root) in ["a", "b"].iter().zip(&roots) {
        std::fs::create_dir_all(root).unwrap();
        rows.push_str(&format!(
            "| {slug} | active | normal | {} |\n",
            root.display()
        ));
    }
    std::fs::write(h.join(".openclaw/braids/registry.md"), rows).unwrap();
    let journals: Vec<_> = roots.iter().map(|r| Journal::of_project(r)).collect();
    journals[0]
        .append("a", vec![Draft::new(Kind::Error)], chrono::Utc::now())
        .unwrap();
    let mut child = spawn_braids(bin, h, &["events", "--follow", "--json"]);
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    lines.next().unwrap().unwrap();
    let mut took = Vec::new();
    for i in 0..n {
        let (slug, j) = if i % 2 == 0 {
            ("b", &journals[1])
        } else {
            ("a", &journals[0])
        };
        j.append(slug, vec![Draft::new(Kind::Error)], chrono::Utc::now())
            .unwrap();
        let written = Instant::now();
        lines.next().unwrap().unwrap();
        took.push(written.elapsed());
    }
    let _ = child.kill();
    let _ = child.wait();
    took.sort();
    let median = took[took.len() / 2];
    println!(
        "follow, {n} events over 2 projects: {:.1} ms median, {:.1} ms p99, {:.1} ms worst{}",
        median.as_secs_f64() * 1000.0,
        took[took.len() * 99 / 100].as_secs_f64() * 1000.0,
        took[took.len() - 1].as_secs_f64() * 1000.0,
        if median < Duration::from_millis(100) {
            ""
        } else {
            "  ** over the 100 ms target **"
        }
    );
}

fn init(bin: &Path, home: &Path) {
    let status = Command::new(bin)
        .arg("init")
        .env("HOME", home)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
}

fn env(var: &str, default: usize) -> usize {
    std::env::var(var)
        .ok()
        .and_then(|v| v.replace(',', "").parse().ok())
        .unwrap_or(default)
}

fn write_cost(n: usize) {
    for batch in [1usize, 10] {
        let dir = tempfile::tempdir().unwrap();
        let j = Journal::of_project(dir.path());
        let mut per_event = Vec::new();
        for i in 0..n / batch {
            let drafts: Vec<Draft> = (0..batch)
                .map(|k| {
                    Draft::new(Kind::TaskComplete)
                        .bead(format!("p-{i}-{k}"))
                        .with("duration_seconds", 42)
                        .with("tests_passed", true)
                })
                .collect();
            let t = Instant::now();
            j.append("p", drafts, chrono::Utc::now()).unwrap();
            per_event.push(t.elapsed() / batch as u32);
        }
        let (median, min) = median_min(per_event);
        println!(
            "write, {batch} per append: {} µs per event (min {} µs), {} events",
            median.as_micros(),
            min.as_micros(),
            n
        );
    }
}

fn list_cost(total: usize, projects: usize) {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let bin = Path::new(env!("CARGO_BIN_EXE_braids"));
    init(bin, h);
    let mut rows = String::from("| Slug | Status | Priority | Path |\n|---|---|---|---|\n");
    let per = total / projects;
    let t0 = Instant::now();
    for p in 0..projects {
        let slug = format!("p{p}");
        let root = h.join("Projects").join(&slug);
        lay_down(&root, &slug, per);
        rows.push_str(&format!(
            "| {slug} | active | normal | {} |\n",
            root.display()
        ));
    }
    std::fs::write(h.join(".openclaw/braids/registry.md"), rows).unwrap();
    let laid = t0.elapsed();
    let mut walls = Vec::new();
    let mut rss = 0;
    for _ in 0..3 {
        let (wall, kb, lines) = timed(bin, h, &["events", "--json"]);
        assert_eq!(lines, total, "braids events printed {lines} of {total}");
        walls.push(wall);
        rss = rss.max(kb);
    }
    let (median, min) = median_min(walls);
    println!(
        "list {total} events over {projects} project(s): {} ms (min {} ms), peak RSS {:.1} MB{} (laid down in {:.1} s)",
        median.as_millis(),
        min.as_millis(),
        rss as f64 / 1024.0,
        if median < Duration::from_secs(1) { "" } else { "  ** over the 1 s target **" },
        laid.as_secs_f64()
    );
}

/// `n` events of one project, written as the journal writes them but without its fsyncs.
fn lay_down(root: &Path, slug: &str, n: usize) {
    let dir = Journal::of_project(root).dir;
    std::fs::create_dir_all(&dir).unwrap();
    let t = chrono::Utc::now();
    for id in 1..=n as u64 {
        let kind = Kind::ALL[id as usize % Kind::ALL.len()];
        let e = braids::events::Event {
            id,
            kind: kind.as_str().into(),
            timestamp: t + chrono::Duration::milliseconds(id as i64),
            project: slug.into(),
            bead: Some(format!("{slug}-{}", id % 97)),
            fields: serde_json::json!({"message": "a line of text of ordinary length for an event", "duration_seconds": 12})
                .as_object()
                .unwrap()
                .clone(),
        };
        let name = format!("{id:06}-{}.event", kind.file_part());
        std::fs::write(dir.join(name), serde_json::to_vec_pretty(&e).unwrap()).unwrap();
    }
    std::fs::write(dir.join(".seq"), format!("{n}\n")).unwrap();
}

/// `braids <args>` in `home`, its output piped to the bench, its log quiet.
fn spawn_braids(bin: &Path, home: &Path, args: &[&str]) -> std::process::Child {
    Command::new(bin)
        .args(args)
        .env("HOME", home)
        .env("BRAIDS_LOG", "error")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Runs braids, counting the lines it prints; (wall, peak RSS in KB, lines).
fn timed(bin: &Path, home: &Path, args: &[&str]) -> (Duration, i64, usize) {
    use std::io::{BufRead, BufReader};
    let t = Instant::now();
    let mut child = spawn_braids(bin, home, args);
    let lines = BufReader::new(child.stdout.take().unwrap()).lines().count();
    let mut status = 0;
    // SAFETY: an all-zero rusage is valid, and the pid is our own child's.
    let mut usage: nix::libc::rusage = unsafe { std::mem::zeroed() };
    let pid = child.id() as nix::libc::pid_t;
    let r = unsafe { nix::libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(r, pid, "wait4");
    (t.elapsed(), usage.ru_maxrss, lines)
}

fn median_min(mut v: Vec<Duration>) -> (Duration, Duration) {
    v.sort();
    (v[v.len() / 2], v[0])
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}
