//! The crontab line under the real cron daemon: `braids schedule install --cron --every 1m`
//! for a throwaway HOME, then ticks appear in its log, one a minute.
//!
//! It needs root (it edits root's crontab and starts `cron`), installs Debian's cron when it is
//! missing, and takes two to three minutes, so it is ignored by default; `scripts/test` runs it
//! with `cargo test --test integration -- --ignored --exact
//! schedule_cron::real_cron_runs_the_installed_line_every_minute`. Root's crontab is restored
//! and the cron daemon it started is stopped at the end, pass or fail.

use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use crate::support::Install;

fn crontab_l() -> Option<String> {
    let o = Command::new("crontab").arg("-l").output().expect("crontab");
    o.status
        .success()
        .then(|| String::from_utf8_lossy(&o.stdout).into_owned())
}

fn ensure_cron() {
    if Path::new("/usr/sbin/cron").is_file() && Path::new("/usr/bin/crontab").is_file() {
        return;
    }
    for args in [
        vec!["update", "-qq"],
        vec!["install", "-y", "-qq", "--no-install-recommends", "cron"],
    ] {
        let st = Command::new("apt-get")
            .args(&args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status()
            .expect("apt-get");
        assert!(
            st.success(),
            "apt-get {args:?} failed; this test needs root"
        );
    }
}

/// Whether a cron daemon is already running (a live process, not a zombie).
fn cron_running() -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
        let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        // "<pid> (cron) S ..."
        stat.contains(" (cron) ") && !stat.contains(" (cron) Z")
    })
}

/// Puts root's crontab back and stops the cron daemon this test started, however it ends.
struct Restore {
    backup: Option<String>,
    cron: Option<Child>,
}

impl Drop for Restore {
    fn drop(&mut self) {
        match &self.backup {
            Some(text) => {
                let mut c = Command::new("crontab")
                    .arg("-")
                    .stdin(std::process::Stdio::piped())
                    .spawn()
                    .expect("crontab -");
                use std::io::Write;
                c.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
                if !c.wait().is_ok_and(|s| s.success()) {
                    eprintln!("could not restore root's crontab; it was:\n{text}");
                }
            }
            None => {
                let _ = Command::new("crontab").arg("-r").output();
            }
        }
        if let Some(mut child) = self.cron.take() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(child.id() as i32),
                nix::sys::signal::Signal::SIGTERM,
            );
            let _ = child.wait();
        }
    }
}

fn ticks(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains(" INFO ") && (l.contains("full run") || l.contains("skipped")))
        .map(String::from)
        .collect()
}

fn wait_for_ticks(log: &Path, n: usize, limit: Duration) -> Duration {
    let start = Instant::now();
    while ticks(log).len() < n {
        assert!(
            start.elapsed() < limit,
            "only {} tick(s) in {} after {:?}:\n{}",
            ticks(log).len(),
            log.display(),
            limit,
            std::fs::read_to_string(log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    start.elapsed()
}

#[test]
#[ignore = "slow (2-3 minutes) and needs root: installs cron, edits root's crontab, starts the cron daemon; scripts/test runs it with --ignored"]
fn real_cron_runs_the_installed_line_every_minute() {
    let began = Instant::now();
    ensure_cron();
    let mut restore = Restore {
        backup: crontab_l(),
        cron: None,
    };
    if !cron_running() {
        restore.cron = Some(
            Command::new("/usr/sbin/cron")
                .arg("-f")
                .spawn()
                .expect("starting cron -f"),
        );
    }

    let sb = Install::new().build();
    let out = sb.ok(&["schedule", "install", "--cron", "--every", "1m"]);
    assert!(out.contains("crontab: installed"), "{out}");
    let table = crontab_l().expect("a crontab now");
    let ours = format!("# braids:tick {}", sb.braids_dir().display());
    let line = table
        .lines()
        .find(|l| l.ends_with(&ours))
        .unwrap_or_else(|| panic!("our line in\n{table}"));
    assert!(line.starts_with("* * * * * "), "{line}");
    if let Some(b) = &restore.backup {
        assert!(
            table.starts_with(b.as_str()),
            "the rest of root's crontab is kept"
        );
    }

    let log = sb.braids_dir().join("logs/tick.log");
    let first = wait_for_ticks(&log, 1, Duration::from_secs(125));
    let second = wait_for_ticks(&log, 2, Duration::from_secs(70));
    let t = ticks(&log);
    assert!(t[0].contains("full run"), "{t:?}");
    assert!(
        t[1].contains("skipped") || t[1].contains("full run"),
        "{t:?}"
    );
    // The run used the throwaway HOME, not root's.
    assert!(sb.state().last_run_at.is_some());
    eprintln!(
        "cron: first tick {:.0}s after install, second {:.0}s later; {:.0}s in all",
        first.as_secs_f64(),
        second.as_secs_f64(),
        began.elapsed().as_secs_f64()
    );

    let out = sb.ok(&["schedule", "remove", "--cron"]);
    assert!(out.contains("cron: removed"), "{out}");
    assert_eq!(
        crontab_l().unwrap_or_default(),
        restore.backup.clone().unwrap_or_default()
    );
}
