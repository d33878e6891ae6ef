//! `cargo bench --bench sessions`: what each session backend adds to a tick with 100 live
//! workers, that is one survey (the tick's observe step asks each backend once).
//!
//! - process: 100 `sleep` workers, each a session record and a `/proc` check;
//! - slurm: 100 jobs on a real single-node cluster (`scripts/slurm-cluster`, 128 CPUs declared
//!   so every job runs), one `squeue`; skipped with the reason where no cluster can start (it
//!   needs root and Debian's Slurm packages);
//! - openclaw: 100 local workers and 100 live sessions on a real gateway (the stand-in model
//!   holds every run open), one `sessions.list`; skipped with the reason where OpenClaw is not
//!   installed in /opt/openclaw.
//!
//! Median and minimum of 30 surveys each, and the machine's load.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use braids::model::{SessionLabel, SpawnMessage};
use braids::session::{BackendKind, Placement, SessionBackend, SpawnSpec};

#[path = "../tests/integration/support/standin_model.rs"]
#[allow(dead_code)]
mod standin_model;

#[path = "../tests/integration/support/claw.rs"]
#[allow(dead_code)]
mod claw;

#[path = "../tests/integration/support/procs.rs"]
#[allow(dead_code)]
mod procs;

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
    measure_n(name, backend, RUNS)
}

fn measure_n(name: &str, backend: &dyn SessionBackend, runs: usize) {
    let mut times = Vec::with_capacity(runs);
    let mut live = 0;
    for _ in 0..runs {
        let t = Instant::now();
        let survey = backend.survey().expect("survey");
        times.push(t.elapsed());
        live = survey.sessions.iter().filter(|s| s.running).count();
    }
    times.sort();
    println!(
        "{name:8} {live:3} live sessions: one survey median {:.2} ms, min {:.2} ms",
        ms(times[runs / 2]),
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

    match claw::Claw::start() {
        Err(why) => println!("openclaw skipped: {why}"),
        Ok(claw) => openclaw(work, &claw),
    }
}

/// 100 workers whose sessions are live at a real gateway, surveyed 10 times (each survey is
/// one `openclaw` command, a second or two).
fn openclaw(work: &Path, claw: &claw::Claw) {
    use braids::session::openclaw::{Gateway, OpenClawBackend};
    let backend = OpenClawBackend::new(&work.join("openclaw"), claw.settings());
    let mut workers = Vec::new();
    for i in 0..SESSIONS {
        let mut s = spec(work, i, &["sleep", "600"]);
        s.placement.backend = Some(BackendKind::OpenClaw);
        workers.push(backend.spawn(&s).unwrap());
    }
    // What those workers would create: a session each, its run held open by the model.
    let gateway = Gateway::new(claw.settings());
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..8 {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                if i >= SESSIONS {
                    break;
                }
                let label = format!("project:bench:bench-{i}");
                let params = serde_json::json!({
                    "key": format!("agent:main:{label}"), "label": label,
                    "cwd": work.display().to_string(),
                    "message": "Write the deliverable at `d.md`. Report your status in `r`.",
                });
                gateway
                    .call("sessions.create", &params, Duration::from_secs(60))
                    .unwrap();
            });
        }
    });
    let deadline = Instant::now() + Duration::from_secs(300);
    while gateway.live().map_or(0, |l| l.len()) < SESSIONS {
        assert!(Instant::now() < deadline, "100 live gateway sessions");
        std::thread::sleep(Duration::from_secs(2));
    }
    measure_n("openclaw", &backend, 10);
    // The gateway goes with `claw`; the local workers are stopped here.
    for w in workers {
        if let Some(pid) = w.pid {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
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
