//! `braids daemon`: the tick on an internal schedule, stopped cleanly by SIGTERM/SIGINT and
//! never overlapping another tick.

use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::support::{wait_for, Install, Sandbox};

/// A running `braids daemon` with its stderr going to a file.
struct Daemon {
    child: Child,
    log: PathBuf,
}

impl Daemon {
    fn start(sb: &Sandbox, args: &[&str]) -> Daemon {
        let log = sb.home().join("daemon.log");
        let child = sb
            .command(&[&["daemon"][..], args].concat())
            .env("BRAIDS_LOG", "info")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        Daemon { child, log }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn signal(&self, s: Signal) {
        kill(Pid::from_raw(self.child.id() as i32), s).unwrap();
    }

    /// Waits for the exit code, at most `limit`.
    fn wait(&mut self, limit: Duration) -> Option<i32> {
        let end = Instant::now() + limit;
        while Instant::now() < end {
            if let Some(st) = self.child.try_wait().unwrap() {
                return st.code();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An installation whose tick takes a few seconds: one active project on a `br` that takes
/// two seconds per call (the tick makes two), and records each call's start and end.
fn slow_installation() -> Sandbox {
    let sb = Install::new().build();
    sb.new_project("app").stub_br().create();
    sb.script(
        "bin/br",
        r#"echo "start $1" >> "$HOME/br.calls"; sleep 2; echo "end $1" >> "$HOME/br.calls"; echo '[]'"#,
    );
    sb
}

#[test]
fn sigterm_during_a_run_lets_the_run_finish_then_exits_0() {
    let sb = slow_installation();
    let state = sb.braids_dir().join(".orchestrator-state.json");
    let status = sb.braids_dir().join("STATUS.md");
    let status_before = std::fs::read_to_string(&status).unwrap();
    let mut d = Daemon::start(&sb, &["--every", "1s"]);

    // The first run is under way: br was called, nothing persisted yet.
    wait_for("the first tracker call", Duration::from_secs(20), || {
        sb.read("br.calls").contains("start").then_some(())
    });
    assert!(!state.exists(), "the run is still in progress");
    d.signal(Signal::SIGTERM);
    let code = d.wait(Duration::from_secs(30));
    let log = d.log();
    assert_eq!(code, Some(0), "exit code; log:\n{log}");

    // The run finished: every tracker call ended, the state is whole, STATUS.md rewritten.
    let calls = sb.read("br.calls");
    assert_eq!(
        calls.matches("start").count(),
        calls.matches("end").count(),
        "{calls}"
    );
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&state).unwrap())
        .expect("the state file is valid JSON");
    assert!(v["lastRunAt"].is_string(), "{v}");
    assert_eq!(v["idleReason"], "no-ready-beads", "{v}");
    assert_ne!(std::fs::read_to_string(&status).unwrap(), status_before);

    // The log says it: the signal, the run's one line after it, the stop.
    let sig = log.find("SIGTERM received").expect(&log);
    let run = log.find("full run").expect(&log);
    let stop = log.find("daemon stopped (SIGTERM)").expect(&log);
    assert!(sig < run && run < stop, "{log}");
    assert_eq!(log.matches("full run").count(), 1, "no second run:\n{log}");
}

#[test]
fn c2_8_a_locked_run_is_skipped_and_writes_nothing_sighup_is_ignored_sigint_stops() {
    let sb = Install::new().build();
    // A cron-started tick holding the lock.
    let lock = braids::system::lock::TickLock::try_acquire(&sb.braids_dir().join(".tick.lock"))
        .unwrap()
        .expect("free");
    let mut d = Daemon::start(&sb, &["--every", "1s"]);
    wait_for("two skipped runs", Duration::from_secs(20), || {
        (d.log()
            .matches("skipped: another tick holds the lock")
            .count()
            >= 2)
            .then_some(())
    });
    assert!(!sb.braids_dir().join(".orchestrator-state.json").exists());
    drop(lock);
    wait_for("a full run", Duration::from_secs(20), || {
        d.log().contains("full run").then_some(())
    });

    // SIGHUP does not stop it.
    d.signal(Signal::SIGHUP);
    wait_for("the SIGHUP note", Duration::from_secs(30), || {
        d.log().contains("SIGHUP ignored").then_some(())
    });
    assert_eq!(d.wait(Duration::from_millis(300)), None, "still running");

    // Between runs: SIGINT stops it at once.
    let start = Instant::now();
    d.signal(Signal::SIGINT);
    assert_eq!(d.wait(Duration::from_secs(30)), Some(0), "{}", d.log());
    assert!(start.elapsed() < Duration::from_secs(5));
    assert!(d.log().contains("daemon stopped (SIGINT)"));
}

#[test]
fn cron_schedule_waits_for_the_next_minute() {
    let sb = Install::new().build();
    let mut d = Daemon::start(&sb, &["--cron", "0 0 1 1 *"]);
    wait_for("the start line", Duration::from_secs(20), || {
        d.log().contains("daemon started").then_some(())
    });
    let log = d.log();
    assert!(log.contains("first run at "), "{log}");
    assert!(log.contains("-01-01 00:00:00"), "{log}");
    d.signal(Signal::SIGTERM);
    assert_eq!(d.wait(Duration::from_secs(30)), Some(0));
    assert!(!d.log().contains("full run"), "no run before its time");
}
