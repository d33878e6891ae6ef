//! `cargo bench --bench tick`: what one `braids tick` costs, on installations of N projects with
//! 20 beads each, for the native WORKPLAN.md tracker and for `br`.
//!
//! The real `braids` binary runs as a child process, built by cargo with the bench profile
//! (release settings) — `CARGO_BIN_EXE_braids`, or `BRAIDS_BENCH_BIN` to time another build.
//!
//! Native tracker (`tick/native.rs`), for each installation:
//! - **skipped run**: `braids tick` inside the idle backoff (2.7), the run cron makes most often;
//! - **cold dry run**: `braids tick --dry-run --force` with no earlier full run recorded, which
//!   reads every project (registry, PROJECT.md, iterations, WORKPLAN.md) and decides, but acts
//!   on nothing;
//! - **unchanged dry run**: the same after a full run recorded the observation cache, nothing
//!   having changed since (the cron case): each project costs its stats (the full run spawns
//!   one `sleep` worker under a global cap of 1, so it claims one bead and changes one project,
//!   which is read again). The unchanged full run itself is timed too;
//! - **CPU**: user + system time of the dry run, all threads;
//! - **peak RSS** of the dry run: the most of three runs under GNU time (see `peak_rss_kb`).
//!
//! br: see `tick/br_world.rs` — the naive bash loop over the same world in the same run (the
//! ratio is printed), then braids cold and unchanged, with the whole tick's peak RSS (braids
//! and any `br` it ran), br processes per project and the read path each project took.
//!
//! Wall times are medians over several runs (the minimum is shown too). Targets: a skipped run
//! under 5 ms; a full dry run over 1,000 native projects under 100 ms, over 10,000 under
//! 0.25 s and 60 MB (checked cold and unchanged, each on its own line); over 1,000 br projects
//! under 1.5 s cold (and ≥ 90× the naive loop), 40 MB, and 0.3 s unchanged. The machine's
//! load average is printed with the tables: on a shared machine the wall times move with it.
//!
//! Environment:
//! - `BRAIDS_BENCH_N` — project counts for the native tracker (default `10,100,1000,10000`);
//! - `BRAIDS_BENCH_BR_N` — project counts for br (default `100,1000`; the naive loop over
//!   1,000 takes minutes); `0` or empty skips br;
//! - `BRAIDS_BENCH_RUNS` — timed runs per measurement (default 15 skipped, 7 dry, 5 br);
//! - `BRAIDS_BENCH_BIN` — the braids executable to measure;
//! - `BRAIDS_BENCH_KEEP=1` — keep the installations built (their paths are printed), to
//!   profile a run by hand.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::libc;

#[path = "tick/br_world.rs"]
mod br_world;
#[path = "tick/native.rs"]
mod native;

const BEADS_PER_PROJECT: usize = 20;
const MAX_WORKERS: usize = 2;

fn main() {
    // `cargo bench` passes `--bench`; a filter argument (anything else) is accepted and ignored.
    let bin = std::env::var_os("BRAIDS_BENCH_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_braids")));
    assert!(bin.is_file(), "no braids binary at {}", bin.display());
    let native = counts("BRAIDS_BENCH_N", &[10, 100, 1000, 10000]);
    let br_counts = counts("BRAIDS_BENCH_BR_N", &[100, 1000]);
    let br_program = (!br_counts.is_empty()).then(find_br);
    println!("braids: {}", bin.display());
    if let Some(p) = &br_program {
        println!("br:     {}", p.display());
    }

    let mut rows = Vec::new();
    for &n in &native {
        rows.push(native::measure(&bin, n));
    }
    let mut br_rows = Vec::new();
    if let Some(br) = &br_program {
        let template = BrTemplate::new(br);
        for &n in &br_counts {
            br_rows.push(br_world::measure(&bin, br, &template, n));
        }
    }

    println!();
    println!("load average at the end: {}", load_average());
    println!();
    println!("Native tracker (WORKPLAN.md, {BEADS_PER_PROJECT} items, MaxWorkers {MAX_WORKERS}):");
    println!();
    println!("| projects | skipped run (median / min) | cold dry run (median / min) | cold CPU | cold peak RSS | unchanged dry run (median / min) | unchanged CPU | unchanged peak RSS | unchanged full run | spawns |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in &rows {
        println!(
            "| {:>8} | {:>9} / {:<9} | {:>10} / {:<10} | {:>10} | {:>6.1} MB | {:>10} / {:<10} | {:>10} | {:>6.1} MB | {:>10} | {:>6} |",
            r.projects,
            ms(r.skipped.0),
            ms(r.skipped.1),
            ms(r.cold.wall.0),
            ms(r.cold.wall.1),
            ms(r.cold.cpu),
            r.cold.peak_kb as f64 / 1024.0,
            ms(r.unchanged.wall.0),
            ms(r.unchanged.wall.1),
            ms(r.unchanged.cpu),
            r.unchanged.peak_kb as f64 / 1024.0,
            ms(r.unchanged_full),
            r.spawns,
        );
    }
    for r in &rows {
        println!(
            "native × {}: unchanged dry run read {:?}",
            r.projects, r.unchanged_paths
        );
    }
    if !br_rows.is_empty() {
        println!();
        println!("br ({BEADS_PER_PROJECT} beads, MaxWorkers {MAX_WORKERS}), one world per row, measured in one run:");
        println!();
        println!("| projects | naive loop | braids cold (median / min) | cold ×naive | cold CPU | cold peak RSS: whole tick / largest br | br calls / project | unchanged dry run (median / min) | unchanged ×naive | unchanged full run | unchanged peak RSS: whole tick / largest br |");
        println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
        for r in &br_rows {
            println!(
                "| {:>8} | {:>8.2} s | {:>10} / {:<10} | {:>6.0}× | {:>10} | {:>5.1} / {:.1} MB | {:.2} cold, {:.2} unchanged | {:>10} / {:<10} | {:>6.0}× | {:>10} | {:>5.1} / {:.1} MB |",
                r.projects,
                r.naive.as_secs_f64(),
                ms(r.cold.0),
                ms(r.cold.1),
                r.naive.as_secs_f64() / r.cold.0.as_secs_f64(),
                ms(r.cold_cpu),
                r.cold_peak_kb.0 as f64 / 1024.0,
                r.cold_peak_kb.1 as f64 / 1024.0,
                r.cold_calls,
                r.unchanged_calls,
                ms(r.unchanged.0),
                ms(r.unchanged.1),
                r.naive.as_secs_f64() / r.unchanged.0.as_secs_f64(),
                ms(r.unchanged_full),
                r.unchanged_peak_kb.0 as f64 / 1024.0,
                r.unchanged_peak_kb.1 as f64 / 1024.0,
            );
        }
        println!();
        for r in &br_rows {
            println!(
                "br × {}: naive loop planned {} spawns, braids {}; read paths cold {:?}; unchanged {:?}",
                r.projects, r.naive_spawns, r.spawns, r.cold_paths, r.unchanged_paths
            );
        }
    }
    println!();
    let missed = missed_targets(&rows, &br_rows);
    if missed.is_empty() {
        println!("targets: all met");
    } else {
        println!("targets missed:");
        for m in missed {
            println!("  - {m}");
        }
    }
}

/// Every target the rows miss, in words.
fn missed_targets(rows: &[native::Row], br_rows: &[br_world::BrRow]) -> Vec<String> {
    let mut missed = Vec::new();
    let mb = |kb: i64| kb as f64 / 1024.0;
    for r in rows {
        if r.skipped.0 >= Duration::from_millis(5) {
            missed.push(format!(
                "native × {}: skipped run {} ≥ 5 ms",
                r.projects,
                ms(r.skipped.0)
            ));
        }
        let (limit, mem) = match r.projects {
            1000 => (Duration::from_millis(100), 30.0),
            10000 => (Duration::from_millis(250), 60.0),
            _ => continue,
        };
        for (which, m) in [("cold", &r.cold), ("unchanged", &r.unchanged)] {
            if m.wall.0 >= limit {
                missed.push(format!(
                    "native × {} {which}: dry run {} ≥ {}",
                    r.projects,
                    ms(m.wall.0),
                    ms(limit)
                ));
            }
            if mb(m.peak_kb) >= mem {
                missed.push(format!(
                    "native × {} {which}: peak RSS {:.1} MB ≥ {mem} MB",
                    r.projects,
                    mb(m.peak_kb)
                ));
            }
        }
    }
    for r in br_rows.iter().filter(|r| r.projects == 1000) {
        let ratio = r.naive.as_secs_f64() / r.cold.0.as_secs_f64();
        if r.cold.0 > Duration::from_millis(1500) {
            missed.push(format!("br × 1000: cold {} > 1.5 s", ms(r.cold.0)));
        }
        if ratio < 90.0 {
            missed.push(format!(
                "br × 1000: cold is {ratio:.0}× the naive loop, < 90×"
            ));
        }
        let whole = r.cold_peak_kb.0.max(r.cold_peak_kb.1);
        if mb(whole) > 40.0 {
            missed.push(format!(
                "br × 1000: cold peak RSS {:.1} MB > 40 MB",
                mb(whole)
            ));
        }
        if r.unchanged.0 > Duration::from_millis(300) {
            missed.push(format!(
                "br × 1000: unchanged {} > 0.3 s",
                ms(r.unchanged.0)
            ));
        }
    }
    missed
}

fn counts(var: &str, default: &[usize]) -> Vec<usize> {
    match std::env::var(var) {
        Ok(v) => v
            .split(',')
            .filter_map(|s| s.trim().parse().ok())
            .filter(|n| *n > 0)
            .collect(),
        Err(_) => default.to_vec(),
    }
}

fn runs(default: usize) -> usize {
    std::env::var("BRAIDS_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(default)
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

fn find_br() -> PathBuf {
    std::env::var_os("PATH")
        .and_then(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join("br"))
                .find(|p| p.is_file())
        })
        .or_else(|| Some(PathBuf::from("/root/.cargo/bin/br")).filter(|p| p.is_file()))
        .expect("br is not installed; set BRAIDS_BENCH_BR_N=0 to measure the native tracker only")
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tracker {
    Workplan,
    Br,
}

/// `/proc/loadavg`'s three averages.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

// ---------------------------------------------------------------------------------------------
// Building installations

/// One br database with 20 beads, copied into every br project (building each with
/// `br init` + 20 × `br create` would take seconds per project).
struct BrTemplate {
    _dir: tempfile::TempDir,
    beads: PathBuf,
    ids: Vec<String>,
}

impl BrTemplate {
    fn new(br: &Path) -> BrTemplate {
        let dir = tempfile::Builder::new()
            .prefix("braids-bench-br-")
            .tempdir()
            .unwrap();
        let run = |args: &[&str]| {
            let o = Command::new(br)
                .args(args)
                .current_dir(dir.path())
                .env("BEADS_DIR", dir.path().join(".beads"))
                .env("HOME", dir.path())
                .output()
                .unwrap();
            assert!(
                o.status.success(),
                "br {args:?}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            String::from_utf8(o.stdout).unwrap()
        };
        run(&["init", "--prefix", "bench"]);
        let ids = (1..=BEADS_PER_PROJECT)
            .map(|i| {
                let out = run(&["create", &format!("--title=bench bead {i}"), "--json"]);
                let v: serde_json::Value = serde_json::from_str(&out).unwrap();
                v["id"]
                    .as_str()
                    .or(v[0]["id"].as_str())
                    .unwrap()
                    .to_string()
            })
            .collect();
        BrTemplate {
            beads: dir.path().join(".beads"),
            _dir: dir,
            ids,
        }
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let name = e.file_name();
        if name.to_string_lossy().ends_with(".lock") {
            continue;
        }
        let target = to.join(&name);
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).unwrap();
            // As `cp -a` does: br's files keep the order br wrote them in, which the JSONL
            // read path looks at.
            let mtime = e.metadata().unwrap().modified().unwrap();
            let f = std::fs::OpenOptions::new()
                .write(true)
                .open(&target)
                .unwrap();
            f.set_modified(mtime).unwrap();
        }
    }
}

/// A throwaway HOME with `n` registered projects, each with an active iteration listing its
/// 20 beads, and a worker command that is never started (dry runs only).
fn build(tracker: Tracker, n: usize, br: Option<&BrTemplate>) -> tempfile::TempDir {
    let home = tempfile::Builder::new()
        .prefix("braids-bench-")
        .tempdir()
        .unwrap();
    let braids = home.path().join(".openclaw/braids");
    std::fs::create_dir_all(&braids).unwrap();
    std::fs::write(
        braids.join("config.toml"),
        "[worker]\ncommand = [\"/bin/false\"]\n\n[tracker]\ntimeout_secs = 60\n",
    )
    .unwrap();
    let mut registry = String::from(
        "# braids registry\n\n| Slug | Status | Priority | Path |\n|------|--------|----------|------|\n",
    );
    for p in 0..n {
        let slug = format!("p{p:04}");
        let root = home.path().join("Projects").join(&slug);
        let dot = root.join(".braids");
        std::fs::create_dir_all(dot.join("iterations/001")).unwrap();
        let priority = ["high", "normal", "low"][p % 3];
        // Absolute paths: the naive loop reads them too.
        registry.push_str(&format!(
            "| {slug} | active | {priority} | {} |\n",
            root.display()
        ));
        std::fs::write(
            dot.join("PROJECT.md"),
            format!(
                "# {slug}\n\n- **Status:** active\n- **Priority:** {priority}\n- **Autonomy:** full\n- **MaxWorkers:** {MAX_WORKERS}\n- **WorkerTimeout:** 3600\n- **Checkin:** on-demand\n- **Tracker:** {}\n- **Channel:** none\n\n## Goal\n\nBenchmark project {p}.\n\n## Guardrails\n\n- Keep changes scoped.\n\n## Notifications\n\n| Event | Enabled |\n|---|---|\n| bead-start | on |\n| bead-complete | on |\n",
                match tracker {
                    Tracker::Workplan => "workplan",
                    Tracker::Br => "br",
                }
            ),
        )
        .unwrap();
        let ids: Vec<String> = match (tracker, br) {
            (Tracker::Br, Some(t)) => {
                copy_dir(&t.beads, &root.join(".beads"));
                t.ids.clone()
            }
            _ => {
                let ids: Vec<String> = (1..=BEADS_PER_PROJECT)
                    .map(|i| format!("wp-{p:x}{i:02}"))
                    .collect();
                let mut wp = String::from("# Workplan\n\n## Backlog\n\n");
                for (i, id) in ids.iter().enumerate() {
                    wp.push_str(&format!(
                        "- [ ] Item {i} of project {p} <!-- id:{id}, slice:bench -->\n  A line of description.\n"
                    ));
                }
                std::fs::write(dot.join("WORKPLAN.md"), wp).unwrap();
                ids
            }
        };
        let mut it = String::from("# Iteration 1\n\n- **Status:** active\n\n## Stories\n\n");
        for id in &ids {
            it.push_str(&format!("- {id}: a story\n"));
        }
        it.push_str("\n## Notes\n\nNone.\n");
        std::fs::write(dot.join("iterations/001/ITERATION.md"), it).unwrap();
    }
    std::fs::write(braids.join("registry.md"), registry).unwrap();
    home
}

// ---------------------------------------------------------------------------------------------
// Running braids

struct Run {
    wall: Duration,
    /// User + system CPU time, all threads.
    cpu: Duration,
    stdout: String,
    stderr: String,
}

/// Runs `braids <args>` in `home` and waits for it with `wait4(2)`, which reports that one
/// child's CPU time.
/// Records what the next runs reuse: once the files are older than the window in which a
/// fingerprint is not trusted, a full run capped at one worker (a sleeper), then an unchanged
/// full run, timed. Returns the label to kill, that run, and its time.
fn record(bin: &Path, h: &Path, path_var: &str, built: Instant) -> (Vec<String>, Run, Duration) {
    if let Some(wait) = Duration::from_millis(2100).checked_sub(built.elapsed()) {
        std::thread::sleep(wait);
    }
    std::fs::write(
        h.join(".openclaw/braids/config.toml"),
        "[tick]\nmax_workers = 1\n\n[worker]\ncommand = [\"/bin/sleep\", \"600\"]\n\n[tracker]\ntimeout_secs = 60\n",
    )
    .unwrap();
    let recorded = run(bin, h, path_var, &["tick", "--force", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&recorded.stdout).unwrap();
    let labels: Vec<String> = v["spawns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["label"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        labels.len(),
        1,
        "the recording run spawns one worker: {v:#}"
    );
    let t = Instant::now();
    let again = run(bin, h, path_var, &["tick", "--force", "--json"]);
    (labels, again, t.elapsed())
}

fn run(bin: &Path, home: &Path, path_var: &str, args: &[&str]) -> Run {
    run_sampled(bin, home, path_var, args, false, &[]).0
}

/// [`run`] with more environment.
fn run_env(bin: &Path, home: &Path, path_var: &str, args: &[&str], env: &[(&str, &str)]) -> Run {
    run_sampled(bin, home, path_var, args, false, env).0
}

/// [`run`], optionally sampling the braids process's own `VmHWM` (peak RSS) from
/// `/proc/<pid>/status` every millisecond (see [`peak_rss_kb`]). The sampler costs CPU, so
/// timed runs do not sample.
#[allow(clippy::zombie_processes)] // reaped by wait4(2) below, which also reports its rusage
fn run_sampled(
    bin: &Path,
    home: &Path,
    path_var: &str,
    args: &[&str],
    sample: bool,
    env: &[(&str, &str)],
) -> (Run, Option<i64>) {
    let stderr_file = home.join("bench-stderr.log");
    let start = Instant::now();
    let mut child = Command::new(bin)
        .args(args)
        .env_clear()
        .env("HOME", home)
        .env("PATH", path_var)
        .env("BRAIDS_LOG", "error")
        .envs(env.iter().copied())
        .current_dir(home)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&stderr_file).unwrap())
        .spawn()
        .unwrap();
    let pid = child.id();
    let sampler = sample.then(|| {
        std::thread::spawn(move || {
            let mut peak = None;
            // Until the process has exited: a zombie's status has no Vm lines.
            while let Some(kb) = vm_hwm_kb(pid) {
                peak = Some(kb);
                std::thread::sleep(Duration::from_millis(1));
            }
            peak
        })
    });
    let mut stdout = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    let own_peak = sampler.and_then(|t| t.join().unwrap());
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value for wait4 to overwrite.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for our own child by pid, writing into the two locals.
    let waited = unsafe { libc::wait4(pid as libc::pid_t, &mut status, 0, &mut usage) };
    let wall = start.elapsed();
    assert_eq!(waited, pid as libc::pid_t, "wait4 failed");
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "braids {args:?} failed: {}",
        std::fs::read_to_string(&stderr_file).unwrap_or_default()
    );
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    let run = Run {
        wall,
        cpu: tv(usage.ru_utime) + tv(usage.ru_stime),
        stdout,
        stderr: std::fs::read_to_string(&stderr_file).unwrap_or_default(),
    };
    (run, own_peak)
}

/// The peak RSS of `braids <args>` and of every process it ran, in kB: the most of three runs
/// under GNU time, which starts braids with `fork` from its own small process. (The `wait4`
/// figure of a child this benchmark spawns is useless: Rust spawns with `vfork`, and exec hands
/// the benchmark's own peak to the child's accounting.) Without `/usr/bin/time`, braids' own
/// `VmHWM`, sampled.
fn peak_rss_kb(bin: &Path, home: &Path, path_var: &str, args: &[&str]) -> i64 {
    let time = Path::new("/usr/bin/time");
    (0..3)
        .filter_map(|_| {
            if !time.is_file() {
                return run_sampled(bin, home, path_var, args, true, &[]).1;
            }
            let out = home.join("bench-rss");
            let status = Command::new(time)
                .arg("-f")
                .arg("%M")
                .arg("-o")
                .arg(&out)
                .arg(bin)
                .args(args)
                .env_clear()
                .env("HOME", home)
                .env("PATH", path_var)
                .env("BRAIDS_LOG", "error")
                .current_dir(home)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .unwrap();
            assert!(status.success(), "braids {args:?} failed");
            std::fs::read_to_string(&out).ok()?.trim().parse().ok()
        })
        .max()
        .unwrap_or(0)
}

/// `VmHWM` of a live process, in kB.
fn vm_hwm_kb(pid: u32) -> Option<i64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}

fn median_min(mut v: Vec<Duration>) -> (Duration, Duration) {
    v.sort();
    (v[v.len() / 2], v[0])
}
