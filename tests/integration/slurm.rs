//! Workers as jobs of a real single-node Slurm: munged, slurmctld and slurmd started
//! for each test by `scripts/slurm-cluster` under the test's own directory, the real `braids`
//! binary, a real `br` and git, and stand-in agents.
//!
//! The cluster needs Debian's slurmd, slurmctld, slurm-client and munge, and root (`.ci/run`
//! installs them and runs as root). Without them each test says it is skipped and why on
//! stderr; with `BRAIDS_REQUIRE_SLURM=1` (set by `.ci/run`) a missing cluster fails instead, so
//! CI never passes these silently. The tests take the cluster lock one at a time: each starts
//! its own daemons, and two slurmd on one machine would share its cgroups.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use crate::support::{label, wait_for, Install, ReportExt, Sandbox, SLEEPER};

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// The stand-in agent: waits for the test's go-ahead (`$HOME/go`), then writes the deliverable
/// and a passing result.
const AGENT: &str = r#"
while [ ! -e "$HOME/go" ]; do sleep 0.2; done
mkdir -p "$(dirname "$1")"
printf '# %s\n\n## Summary\n\nDid %s on %s.\n' "$BRAIDS_BEAD" "$BRAIDS_BEAD" "$(hostname)" > "$1"
printf 'status: pass\nsummary: did it\n' > "$BRAIDS_RESULT_FILE"
"#;

struct Cluster {
    dir: tempfile::TempDir,
    conf: PathBuf,
    _lock: MutexGuard<'static, ()>,
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/slurm-cluster")
}

impl Cluster {
    /// A cluster of one node with `cpus` CPUs, or `None` (with the reason on stderr) where this
    /// machine cannot run one.
    fn start(cpus: u32) -> Option<Cluster> {
        let lock = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
        let missing = ["slurmctld", "slurmd", "munged", "sbatch"]
            .into_iter()
            .find(|p| {
                !Command::new("sh")
                    .args(["-c", &format!("command -v {p}")])
                    .output()
                    .is_ok_and(|o| o.status.success())
            });
        let why = match missing {
            Some(p) => Some(format!("`{p}` is not installed")),
            None if !nix::unistd::getuid().is_root() => Some("starting slurmd needs root".into()),
            None => None,
        };
        if let Some(why) = why {
            assert!(
                std::env::var("BRAIDS_REQUIRE_SLURM").as_deref() != Ok("1"),
                "BRAIDS_REQUIRE_SLURM=1 but no Slurm cluster can start here: {why}"
            );
            eprintln!("SKIPPED: no Slurm cluster: {why} (.ci/run installs one)");
            return None;
        }
        let dir = tempfile::Builder::new()
            .prefix("braids-slurm-")
            .tempdir()
            .unwrap();
        let out = Command::new(script())
            .args(["start", dir.path().to_str().unwrap(), &cpus.to_string()])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "slurm-cluster start: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let conf = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        Some(Cluster {
            dir,
            conf,
            _lock: lock,
        })
    }

    fn ctl(&self, what: &str) {
        let out = Command::new(script())
            .args([what, self.dir.path().to_str().unwrap()])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "slurm-cluster {what}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// `[slurm]` for an installation that submits here.
    fn config(&self) -> String {
        format!("[slurm]\nconf = {:?}\n", self.conf.display().to_string())
    }

    /// Every job the cluster remembers: (id, state, name).
    fn jobs(&self) -> Vec<(String, String, String)> {
        let out = Command::new("squeue")
            .env("SLURM_CONF", &self.conf)
            .args(["--noheader", "--states=all", "--format=%i|%T|%j"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "squeue: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| {
                let mut p = l.splitn(3, '|');
                Some((
                    p.next()?.to_string(),
                    p.next()?.to_string(),
                    p.next()?.to_string(),
                ))
            })
            .collect()
    }

    /// Whether a job named `name` is still queued or running.
    fn in_queue(&self, name: &str) -> bool {
        self.states_of(name)
            .iter()
            .any(|s| LIVE.contains(&s.as_str()))
    }

    fn states_of(&self, name: &str) -> Vec<String> {
        self.jobs()
            .into_iter()
            .filter(|j| j.2 == name)
            .map(|j| j.1)
            .collect()
    }

    /// Waits until the job named `name` is in `state`.
    fn wait_state(&self, name: &str, state: &str, limit: Duration) {
        wait_for(&format!("job {name} to be {state}"), limit, || {
            self.states_of(name)
                .iter()
                .any(|s| s == state)
                .then_some(())
        });
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new(script())
            .args(["stop", self.dir.path().to_str().unwrap()])
            .output();
    }
}

const LIVE: [&str; 4] = ["PENDING", "RUNNING", "CONFIGURING", "COMPLETING"];

fn sleeper_install(cluster: &Cluster, extra: &str) -> Sandbox {
    Install::new()
        .worker(SLEEPER)
        .config(&cluster.config())
        .config("[sessions]\nkill_grace_secs = 5\n")
        .config(extra)
        .build()
}

#[test]
fn three_beads_over_two_projects_run_as_slurm_jobs_and_are_done() {
    let Some(cluster) = Cluster::start(8) else {
        return;
    };
    let sb = Install::new().config(&cluster.config()).build();
    let agent = sb.script("bin/agent", AGENT);
    sb.config(&format!(
        "[worker]\nexecutor = [{:?}, \"{{deliverable}}\"]\n",
        agent.display().to_string()
    ));
    let app = sb
        .new_project("app")
        .br()
        .beads(2)
        .max_workers(2)
        .field("Backend", "slurm")
        .field("Cpus", "1")
        .field("Memory", "128M")
        .create();
    let lib = sb
        .new_project("lib")
        .br()
        .beads(1)
        .field("Backend", "slurm")
        .create();

    let report = sb.tick().force().run();
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    let mut want: Vec<String> = app
        .beads
        .iter()
        .map(|b| label("app", b))
        .chain([label("lib", &lib.beads[0])])
        .collect();
    want.sort();
    let mut got = report.labels();
    got.sort();
    assert_eq!(got, want);
    // Submitted as jobs named by their labels; `braids sessions` names the backend and job.
    let names: Vec<String> = cluster.jobs().into_iter().map(|j| j.2).collect();
    for l in &want {
        assert!(names.contains(l), "{l} in {names:?}");
    }
    let live = sb.live();
    for l in &want {
        assert_eq!(live[l]["backend"], "slurm", "{live:?}");
        assert!(live[l]["id"]
            .as_str()
            .unwrap()
            .bytes()
            .all(|b| b.is_ascii_digit()));
    }

    // The worker inside each job runs the agent, closes the bead and commits.
    sb.write("go", "");
    for (slug, bead) in app
        .beads
        .iter()
        .map(|b| ("app", b))
        .chain([("lib", &lib.beads[0])])
    {
        wait_for(
            &format!("{slug} {bead} closed"),
            Duration::from_secs(120),
            || (sb.br_status(slug, bead) == "closed").then_some(()),
        );
    }
    for l in &want {
        wait_for(
            &format!("{l} to leave the queue"),
            Duration::from_secs(60),
            || (!cluster.in_queue(l)).then_some(()),
        );
        assert_eq!(cluster.states_of(l), ["COMPLETED"], "{l}");
    }
    let log = sb.git(&sb.project("app"), &["log", "--format=%s", "main"]);
    for b in &app.beads {
        assert!(log.contains(b.as_str()), "{b} committed: {log}");
    }
    assert!(sb
        .git(&sb.project("lib"), &["log", "--format=%s", "main"])
        .contains(lib.beads[0].as_str()));

    // The next run forgets the ended jobs quietly: they ended on their own.
    let report = sb.tick().force().run();
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert!(sb.live_labels().is_empty());
    let left: Vec<_> = std::fs::read_dir(sb.sessions_dir())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| n.to_string_lossy().ends_with(".slurm"))
        .collect();
    assert!(left.is_empty(), "records forgotten: {left:?}");
}

#[test]
fn a_job_past_its_time_is_ended_by_slurm_and_reported_with_the_reason() {
    let Some(cluster) = Cluster::start(4) else {
        return;
    };
    let notes = PathBuf::from("notes.txt");
    let sb = sleeper_install(&cluster, "");
    let notifier = sb.script(
        "bin/notify",
        "printf '%s %s\\n' \"$1\" \"$2\" >> \"$HOME/notes.txt\"",
    );
    sb.config(&format!(
        "[notify]\ncommand = [{:?}, \"{{event}}\", \"{{message}}\"]\n",
        notifier.display().to_string()
    ));
    // WorkerTimeout 60 s: `--time=1`, which Slurm enforces between 1:06 and 1:25 of run time.
    let app = sb
        .new_project("app")
        .br()
        .beads(1)
        .field("Backend", "slurm")
        .field("WorkerTimeout", "60")
        .channel("#dev")
        .create();
    let l = label("app", &app.beads[0]);
    sb.tick().force().run();
    cluster.wait_state(&l, "TIMEOUT", Duration::from_secs(180));

    let report = sb.tick().force().run();
    let err = report
        .errors
        .iter()
        .find(|e| e.starts_with(&l))
        .unwrap_or_else(|| panic!("{:?}", report.errors));
    assert!(
        err.contains("Slurm ended the job: it reached its time limit") && err.contains("TIMEOUT"),
        "{err}"
    );
    let told = std::fs::read_to_string(sb.home().join(&notes)).unwrap_or_default();
    assert!(
        told.lines()
            .any(|n| n.starts_with("blocker ") && n.contains("TIMEOUT")),
        "{told}"
    );
    // Told once: the session is forgotten.
    let report = sb.tick().force().run();
    assert!(
        !report.errors.iter().any(|e| e.contains("Slurm ended")),
        "{:?}",
        report.errors
    );
}

#[test]
fn a_zombie_job_is_cancelled_and_leaves_the_queue() {
    let Some(cluster) = Cluster::start(4) else {
        return;
    };
    let sb = sleeper_install(&cluster, "");
    let app = sb
        .new_project("app")
        .br()
        .beads(1)
        .field("Backend", "slurm")
        .create();
    let l = label("app", &app.beads[0]);
    sb.tick().force().run();
    cluster.wait_state(&l, "RUNNING", Duration::from_secs(30));
    wait_for("the worker to start", Duration::from_secs(30), || {
        sb.spawn_message(&l)
    });

    sb.br("app", &["close", &app.beads[0]]);
    let report = sb.tick().force().run();
    let killed: Vec<&str> = report.zombies.iter().map(|z| z.label.as_str()).collect();
    assert_eq!(killed, [l.as_str()], "{:?}", report.errors);
    assert!(!cluster.in_queue(&l), "{:?}", cluster.states_of(&l));
    assert!(sb.live_labels().is_empty());
    // braids cancelled it itself: no "cancelled outside braids" news.
    let report = sb.tick().force().run();
    assert!(report.errors.is_empty(), "{:?}", report.errors);
}

#[test]
fn pending_jobs_hold_their_beads_and_sessions_and_kill_work_on_them() {
    // Two CPUs: two jobs run, two wait.
    let Some(cluster) = Cluster::start(2) else {
        return;
    };
    let sb = sleeper_install(&cluster, "");
    let app = sb
        .new_project("app")
        .br()
        .beads(5)
        .max_workers(4)
        .field("Backend", "slurm")
        .create();
    let first = sb.tick().force().run();
    assert_eq!(first.labels().len(), 4);
    wait_for(
        "two running and two pending",
        Duration::from_secs(30),
        || {
            let states: Vec<String> = cluster.jobs().into_iter().map(|j| j.1).collect();
            (states.iter().filter(|s| *s == "RUNNING").count() == 2
                && states.iter().filter(|s| *s == "PENDING").count() == 2)
                .then_some(())
        },
    );

    // The queued jobs count against MaxWorkers and are never submitted twice.
    for _ in 0..2 {
        let report = sb.tick().force().run();
        assert!(report.labels().is_empty(), "{:?}", report.labels());
        assert!(report.errors.is_empty(), "{:?}", report.errors);
    }
    assert_eq!(cluster.jobs().len(), 4, "{:?}", cluster.jobs());
    let live = sb.live();
    assert_eq!(live.len(), 4);
    let queued: Vec<&String> = live
        .iter()
        .filter(|(_, s)| s["queued"] == true)
        .map(|(l, _)| l)
        .collect();
    assert_eq!(queued.len(), 2, "{live:?}");
    let status = std::fs::read_to_string(sb.status_path()).unwrap();
    assert_eq!(
        status.matches("queued (waiting for the cluster)").count(),
        2,
        "{status}"
    );
    let text = sb.ok(&["sessions"]);
    assert_eq!(text.matches("  queued").count(), 2, "{text}");
    assert!(text.contains("  slurm  job "), "{text}");

    // `braids kill` of a queued job and of a running one: both leave the queue.
    let running = live.keys().find(|l| !queued.contains(l)).unwrap().clone();
    for l in [queued[0].clone(), running] {
        sb.ok(&["kill", &l]);
        assert!(!cluster.in_queue(&l), "{l}: {:?}", cluster.states_of(&l));
    }
    assert_eq!(sb.live().len(), 2);
    let _ = app;
}

#[test]
fn with_slurmctld_down_the_slurm_project_is_untouched_and_the_others_go_on() {
    let Some(cluster) = Cluster::start(4) else {
        return;
    };
    let sb = sleeper_install(&cluster, "[sessions]\nclaim_grace_secs = 5\n");
    let hpc = sb
        .new_project("hpc")
        .br()
        .beads(2)
        .max_workers(2)
        .field("Backend", "slurm")
        .create();
    let l = label("hpc", &hpc.beads[0]);
    sb.set_field("hpc", "MaxWorkers", "1");
    sb.tick().force().run();
    cluster.wait_state(&l, "RUNNING", Duration::from_secs(30));
    let local = sb.new_project("local").br().beads(1).create();

    cluster.ctl("stop-ctld");
    sb.set_field("hpc", "MaxWorkers", "2");
    std::thread::sleep(Duration::from_secs(6)); // past the claim grace: nothing may be released
    let report = sb.tick().force().run();
    let err = report
        .errors
        .iter()
        .find(|e| e.starts_with("hpc:"))
        .unwrap_or_else(|| panic!("{:?}", report.errors));
    assert!(
        err.contains("the slurm backend cannot say which workers run") && err.contains("squeue"),
        "{err}"
    );
    assert_eq!(
        report.labels(),
        [label("local", &local.beads[0])],
        "the local project goes on"
    );
    assert!(
        report.released.is_empty() && report.zombies.is_empty(),
        "{report:?}"
    );
    assert_eq!(sb.br_status("hpc", &hpc.beads[0]), "in_progress");
    assert_eq!(sb.br_status("hpc", &hpc.beads[1]), "open");
    let status = std::fs::read_to_string(sb.status_path()).unwrap();
    assert!(
        status.contains("the slurm backend cannot say which workers run"),
        "{status}"
    );

    // Back up: the job ran all along, and the project goes on from where it was.
    cluster.ctl("start-ctld");
    assert_eq!(cluster.states_of(&l), ["RUNNING"]);
    let report = sb.tick().force().run();
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert_eq!(report.labels(), [label("hpc", &hpc.beads[1])]);
}

#[test]
fn check_names_a_placement_it_cannot_use() {
    let sb = Install::new().build();
    sb.new_project("app")
        .br()
        .beads(1)
        .field("Backend", "slurmm")
        .field("Memory", "lots")
        .create();
    let out = sb.run(&["check"]);
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        text.contains("Backend `slurmm` is not one of process, tmux, slurm"),
        "{text}"
    );
    assert!(
        text.contains("Memory `lots` is not a size Slurm reads"),
        "{text}"
    );
    let report = sb.tick().force().run();
    assert!(report.labels().is_empty());
    assert!(
        report
            .errors
            .iter()
            .any(|e| e.contains("PROJECT.md line")
                && e.contains("no worker starts until it is fixed")),
        "{:?}",
        report.errors
    );
}
