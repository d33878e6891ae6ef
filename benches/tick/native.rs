//! The native half of `cargo bench --bench tick`: N projects on the WORKPLAN.md tracker,
//! measured cold (no full run recorded yet), unchanged (a full run recorded the observation
//! cache and nothing changed since: the cron case), and skipped (inside the idle backoff).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use super::{build, median_min, ms, peak_rss_kb, record, run, run_env, runs, Tracker, MAX_WORKERS};

pub struct Row {
    pub projects: usize,
    /// (median, min)
    pub skipped: (Duration, Duration),
    /// The dry run with no cache recorded, and with one recorded and nothing changed.
    pub cold: DryRuns,
    pub unchanged: DryRuns,
    /// The unchanged full run (it writes, so it is timed once).
    pub unchanged_full: Duration,
    /// How the unchanged dry run read each project (`files=… reads=…` of `-v`, counted).
    pub unchanged_paths: BTreeMap<String, usize>,
    pub spawns: usize,
}

/// One kind of dry run, measured.
pub struct DryRuns {
    /// (median, min)
    pub wall: (Duration, Duration),
    /// Median CPU time (user + system).
    pub cpu: Duration,
    /// The whole dry run's peak RSS ([`peak_rss_kb`]).
    pub peak_kb: i64,
}

pub fn measure(bin: &Path, n: usize) -> Row {
    eprint!("native × {n}: building… ");
    let t = Instant::now();
    let home = build(Tracker::Workplan, n, None);
    let built = Instant::now();
    eprint!("{:.1}s; ", t.elapsed().as_secs_f64());
    let h = home.path();
    let path = "/usr/local/bin:/usr/bin:/bin";
    let dry = ["tick", "--dry-run", "--force", "--json"];

    // Cold: nothing recorded (a dry run records nothing).
    let warm = run(bin, h, path, &dry);
    let report: serde_json::Value = serde_json::from_str(&warm.stdout).unwrap();
    let spawns = report["spawns"].as_array().map_or(0, Vec::len);
    let errors = report["errors"].as_array().map_or(0, Vec::len);
    assert_eq!(errors, 0, "the dry run reported errors: {report:#}");
    assert_eq!(spawns, n * MAX_WORKERS, "every project fills its slots");
    let cold = dry_runs(bin, h, path);

    let config = h.join(".openclaw/braids/config.toml");
    let original = std::fs::read_to_string(&config).unwrap();
    let (labels, again, unchanged_full) = record(bin, h, path, built);
    assert!(again.stdout.contains("\"spawns\": []"), "{}", again.stdout);
    // The dry runs plan as the cold ones did: no global cap, and the worker gone.
    std::fs::write(&config, original).unwrap();
    for l in &labels {
        run(bin, h, path, &["kill", l]);
    }
    let same = run(bin, h, path, &dry);
    let report: serde_json::Value = serde_json::from_str(&same.stdout).unwrap();
    assert_eq!(
        report["spawns"].as_array().map_or(0, Vec::len),
        spawns,
        "the unchanged dry run plans as the cold one: {report:#}"
    );
    let log = run_env(
        bin,
        h,
        path,
        &["-v", "tick", "--dry-run", "--force"],
        &[("BRAIDS_LOG", "debug")],
    )
    .stderr;
    let mut unchanged_paths = BTreeMap::new();
    for l in log.lines().filter(|l| l.contains("tracker read")) {
        let files = l
            .split("files=")
            .nth(1)
            .and_then(|f| f.split_whitespace().next());
        let key = format!(
            "files={} reads={}",
            files.unwrap_or("?").trim_matches('"'),
            l.split("reads=").nth(1).unwrap_or("?").trim()
        );
        *unchanged_paths.entry(key).or_insert(0) += 1;
    }
    let unchanged = dry_runs(bin, h, path);

    // Skipped runs: an idle state whose backoff has not passed.
    let now = chrono::Utc::now().to_rfc3339();
    std::fs::write(
        h.join(".openclaw/braids/.orchestrator-state.json"),
        format!("{{\"idleSince\":\"{now}\",\"idleReason\":\"no-ready-beads\",\"lastRunAt\":\"{now}\"}}\n"),
    )
    .unwrap();
    let check = run(bin, h, path, &["tick", "--json"]);
    assert!(
        check.stdout.contains("\"run\": \"skipped\""),
        "not skipped: {}",
        check.stdout
    );
    let walls = (0..runs(15))
        .map(|_| run(bin, h, path, &["tick"]).wall)
        .collect();
    let skipped = median_min(walls);
    eprintln!(
        "skipped {}, cold {}, unchanged {}",
        ms(skipped.0),
        ms(cold.wall.0),
        ms(unchanged.wall.0)
    );
    if std::env::var_os("BRAIDS_BENCH_KEEP").is_some() {
        eprintln!("  kept: HOME={}", home.keep().display());
    }
    Row {
        projects: n,
        skipped,
        cold,
        unchanged,
        unchanged_full,
        unchanged_paths,
        spawns,
    }
}

/// Timed dry runs (median and min of wall, median CPU) and the peak RSS of three more.
fn dry_runs(bin: &Path, h: &Path, path: &str) -> DryRuns {
    let mut walls = Vec::new();
    let mut cpus = Vec::new();
    for _ in 0..runs(7) {
        let r = run(bin, h, path, &["tick", "--dry-run", "--force"]);
        walls.push(r.wall);
        cpus.push(r.cpu);
    }
    DryRuns {
        wall: median_min(walls),
        cpu: median_min(cpus).0,
        peak_kb: peak_rss_kb(bin, h, path, &["tick", "--dry-run", "--force"]),
    }
}
