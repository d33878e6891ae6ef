//! `cargo bench --bench sessions`: what each session backend adds to a tick with 100 live
//! workers, that is one survey (the tick's observe step asks each backend once).
//!
//! - process: 100 `sleep` workers, each a session record and a `/proc` check;
//! - slurm: 100 jobs on a real single-node cluster (`scripts/slurm-cluster`, 128 CPUs declared
//!   so every job runs), one `squeue`; skipped with the reason where no cluster can start (it
//!   needs root and Debian's Slurm packages).
//!
//! Median and minimum of 30 surveys each, and the machine's load.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use braids::model::{SessionLabel, SpawnMessage};
use braids::session::{BackendKind, Placement, SessionBackend, SpawnSpec};

const SESSIONS: usize = 100;
const RUNS: usize = 30;

fn spec(dir: &Path, i: usize, argv: &[&str]) -> SpawnSpec {
    let label = SessionLabel::parse(&format!("project:bench:bench-{i}")).unwrap();
    SpawnSpec {
        message: SpawnMessage::new(dir.to_path_buf(), label.bead().clone(), 1, "").unwrap(),
        label,
        argv: argv.iter().map(Into::into).collect(),
        cwd: dir.to_path_buf(),
        env: vec![],
        log: dir.join(format!("logs/{i}.log")),
        placement: Placement {
            backend: None,
            time_limit_secs: 3600,
            ..Placement::default()
        },
    }
}

fn measure(name: &str, backend: &dyn SessionBackend) {
    let mut times = Vec::with_capacity(RUNS);
    let mut live = 0;
    for _ in 0..RUNS {
        let t = Instant::now();
        let survey = backend.survey().expect("survey");
        times.push(t.elapsed());
        live = survey.sessions.iter().filter(|s| s.running).count();
    }
    times.sort();
    println!(
        "{name:8} {live:3} live sessions: one survey median {:.2} ms, min {:.2} ms",
        ms(times[RUNS / 2]),
        ms(times[0])
    );
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn main() {
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "{SESSIONS} sessions a backend; load average {}",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path();

    let process = braids::session::process::ProcessBackend::new(work.join("process"));
    for i in 0..SESSIONS {
        process.spawn(&spec(work, i, &["sleep", "600"])).unwrap();
    }
    measure("process", &process);
    for s in process.list().unwrap() {
        let _ = process.kill(&s, Duration::from_secs(5));
    }

    match Cluster::start(work) {
        Err(why) => println!("slurm    skipped: {why}"),
        Ok(cluster) => {
            let settings = braids::session::slurm::SlurmSettings {
                conf: cluster.conf.display().to_string(),
                ..Default::default()
            };
            let slurm = braids::session::slurm::SlurmBackend::new(work.join("slurm"), settings);
            for i in 0..SESSIONS {
                let mut s = spec(work, i, &["sleep", "600"]);
                s.placement.backend = Some(BackendKind::Slurm);
                slurm.spawn(&s).unwrap();
            }
            measure("slurm", &slurm);
            for s in slurm.list().unwrap() {
                let _ = slurm.kill(&s, Duration::from_secs(5));
            }
        }
    }
}

struct Cluster {
    dir: PathBuf,
    conf: PathBuf,
}

impl Cluster {
    fn start(work: &Path) -> Result<Cluster, String> {
        if !nix::unistd::getuid().is_root() {
            return Err("starting slurmd needs root".into());
        }
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/slurm-cluster");
        let dir = work.join("cluster");
        let out = Command::new(&script)
            .args(["start", dir.to_str().unwrap(), "128"])
            .output()
            .map_err(|e| e.to_string())?;
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
        }
        let conf = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        Ok(Cluster { dir, conf })
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/slurm-cluster");
        let _ = Command::new(script)
            .args(["stop", self.dir.to_str().unwrap()])
            .output();
    }
}
