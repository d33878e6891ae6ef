//! The br half of `cargo bench --bench tick`: one world of N br projects, measured three ways
//! in one process run, so the ratios compare like with like on a shared, noisy machine.
//!
//! - **naive**: the bash loop a user would cron instead of braids (`NAIVE_TICK`, the baseline
//!   from the shared benchmark kit: registry, PROJECT.md and ITERATION.md by grep, then
//!   `br ready --json` in every active project), run once over the same world;
//! - **cold**: `braids tick --dry-run --force` with no earlier run recorded: every project's
//!   tracker is read (from br's JSONL where it is trusted, else through br);
//! - **unchanged**: the same dry run after a full run recorded the fingerprints (the full run
//!   spawns one `sleep` worker under a global cap of 1, so it claims one bead and changes
//!   nothing else; a second full run then re-reads that one project), and the full run itself.
//!
//! For each it reports wall time (median / min), the peak RSS of the whole tick (braids and any
//! `br` it ran, see `peak_rss_kb`) and of the largest `br` alone (the counting wrapper on PATH
//! runs each under `/usr/bin/time`), how many `br` processes it started per project, and which
//! read path each project took (`-v`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::{build, median_min, ms, peak_rss_kb, record, run, run_env, runs, BrTemplate, Tracker};

/// `naive-tick.sh` from the shared benchmark kit, verbatim: what a user would cron instead.
const NAIVE_TICK: &str = r#"#!/usr/bin/env bash
# naive-tick.sh HOME: what a user would write instead of braids — a cron'd bash loop that reads the
# registry, greps PROJECT.md and ITERATION.md, and asks br for ready beads in every active project.
# It prints the spawn plan (no spawning), so it does the same observing work as `braids tick --dry-run`.
H=$1
grep '^| ' "$H/.openclaw/braids/registry.md" | tail -n +2 | grep -v '^|--' | while IFS='|' read -r _ slug st pr path _; do
  slug=$(echo $slug); st=$(echo $st); path=$(echo $path)
  [ "$st" = active ] || continue
  cfg=$path/.braids/PROJECT.md
  grep -qiE 'status:?\**:? *active' "$cfg" || continue
  max=$(grep -ioE 'maxworkers:?\**:? *[0-9]+' "$cfg" | grep -oE '[0-9]+$'); max=${max:-1}
  it=$(grep -liE '^(- )?\**status:?\**:? *active' "$path"/.braids/iterations/*/ITERATION.md 2>/dev/null | head -n 1)
  [ -n "$it" ] || continue
  (cd "$path" && br ready --json 2>/dev/null) | python3 -c "import json,sys; d=json.load(sys.stdin); [print('spawn $slug', x['id']) for x in d[:$max]]"
done
"#;

pub struct BrRow {
    pub projects: usize,
    pub naive: Duration,
    pub naive_spawns: usize,
    pub cold: (Duration, Duration),
    pub cold_cpu: Duration,
    /// The whole tick's peak, and the largest br it ran.
    pub cold_peak_kb: (i64, i64),
    pub cold_calls: f64,
    pub cold_paths: BTreeMap<String, usize>,
    pub spawns: usize,
    pub unchanged: (Duration, Duration),
    pub unchanged_peak_kb: (i64, i64),
    pub unchanged_calls: f64,
    pub unchanged_paths: BTreeMap<String, usize>,
    pub unchanged_full: Duration,
}

/// How many projects each read path answered, from a `-v` log.
fn read_paths(log: &str) -> BTreeMap<String, usize> {
    let mut paths = BTreeMap::new();
    for l in log.lines().filter(|l| l.contains("tracker read")) {
        let path = l.split("reads=").nth(1).unwrap_or("?").trim();
        // "br (why)" keeps its why; the rest by name
        *paths.entry(path.to_string()).or_insert(0) += 1;
    }
    paths
}

pub fn measure(bin: &Path, br: &Path, template: &BrTemplate, n: usize) -> BrRow {
    eprint!("br × {n}: building… ");
    let t = Instant::now();
    let home = build(Tracker::Br, n, Some(template));
    let built = Instant::now();
    eprint!("{:.1}s; ", t.elapsed().as_secs_f64());
    let h = home.path();

    let (plain, counting, calls_file, rss_file) = paths(h, br);

    // The naive loop, once.
    let script = h.join("naive-tick.sh");
    std::fs::write(&script, NAIVE_TICK).unwrap();
    let t = Instant::now();
    let out = std::process::Command::new("bash")
        .arg(&script)
        .arg(h)
        .env_clear()
        .env("HOME", h)
        .env("PATH", &plain)
        .output()
        .unwrap();
    let naive = t.elapsed();
    let naive_spawns = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with("spawn "))
        .count();
    eprint!("naive {:.1}s; ", naive.as_secs_f64());

    // Cold dry runs: nothing recorded yet.
    let dry = ["tick", "--dry-run", "--force", "--json"];
    let first = run(bin, h, &plain, &dry);
    let report: serde_json::Value = serde_json::from_str(&first.stdout).unwrap();
    assert_eq!(
        report["errors"].as_array().map_or(0, Vec::len),
        0,
        "{report:#}"
    );
    let spawns = report["spawns"].as_array().map_or(0, Vec::len);
    let (cold_calls, cold_log, cold_br_kb) = counted(bin, h, &counting, &calls_file, &rss_file, n);
    let mut walls = Vec::new();
    let mut cpus = Vec::new();
    for _ in 0..runs(5) {
        let r = run(bin, h, &plain, &dry);
        walls.push(r.wall);
        cpus.push(r.cpu);
    }
    let cold = median_min(walls);
    let cold_cpu = median_min(cpus).0;
    let cold_peak_kb = (peak_rss_kb(bin, h, &plain, &dry), cold_br_kb);

    let (labels, again, unchanged_full) = record(bin, h, &plain, built);
    assert!(again.stdout.contains("\"spawns\": []"), "{}", again.stdout);

    let (unchanged_calls, unchanged_log, unchanged_br_kb) =
        counted(bin, h, &counting, &calls_file, &rss_file, n);
    let walls = (0..runs(5))
        .map(|_| run(bin, h, &plain, &dry).wall)
        .collect();
    let unchanged = median_min(walls);
    let unchanged_peak_kb = (peak_rss_kb(bin, h, &plain, &dry), unchanged_br_kb);
    for l in &labels {
        run(bin, h, &plain, &["kill", l]);
    }
    eprintln!("cold {}, unchanged {}", ms(cold.0), ms(unchanged.0));
    if std::env::var_os("BRAIDS_BENCH_KEEP").is_some() {
        eprintln!("  kept: HOME={}", home.keep().display());
    }
    BrRow {
        projects: n,
        naive,
        naive_spawns,
        cold,
        cold_cpu,
        cold_peak_kb,
        cold_calls,
        cold_paths: read_paths(&cold_log),
        spawns,
        unchanged,
        unchanged_peak_kb,
        unchanged_calls,
        unchanged_paths: read_paths(&unchanged_log),
        unchanged_full,
    }
}

/// PATH without and with a `br` that counts its calls (and records each one's peak RSS), and
/// the two files it writes.
fn paths(h: &Path, br: &Path) -> (String, String, PathBuf, PathBuf) {
    let wrap_dir = h.join("bin-counting");
    let real_dir = h.join("bin");
    std::fs::create_dir_all(&wrap_dir).unwrap();
    std::fs::create_dir_all(&real_dir).unwrap();
    std::os::unix::fs::symlink(br, real_dir.join("br")).unwrap();
    let calls = h.join("br-calls");
    let rss = h.join("br-rss");
    let wrapper = wrap_dir.join("br");
    let timed = if Path::new("/usr/bin/time").is_file() {
        format!("/usr/bin/time -a -o '{}' -f %M ", rss.display())
    } else {
        String::new()
    };
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\necho \"$*\" >> '{}'\nexec {timed}'{}' \"$@\"\n",
            calls.display(),
            br.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    let system = "/usr/local/bin:/usr/bin:/bin";
    (
        format!("{}:{system}", real_dir.display()),
        format!("{}:{system}", wrap_dir.display()),
        calls,
        rss,
    )
}

/// One dry run with the counting `br` and `-v`: br calls per project, the log, and the
/// largest br's peak RSS.
fn counted(
    bin: &Path,
    h: &Path,
    counting: &str,
    calls: &Path,
    rss: &Path,
    n: usize,
) -> (f64, String, i64) {
    let _ = std::fs::remove_file(calls);
    let _ = std::fs::remove_file(rss);
    let r = run_env(
        bin,
        h,
        counting,
        &["-v", "tick", "--dry-run", "--force"],
        &[("BRAIDS_LOG", "debug")],
    );
    let text = std::fs::read_to_string(calls).unwrap_or_default();
    let largest = std::fs::read_to_string(rss)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .max()
        .unwrap_or(0);
    (text.lines().count() as f64 / n as f64, r.stderr, largest)
}
