//! Logs: a tick says what it did in exactly one INFO line; `--log-format json` gives one JSON
//! object per line.

use braids::tick::TickReport;

use crate::support::{Install, Sandbox, Tick};

/// An installation whose tick has things to do: one project with two ready beads on the
/// native tracker, MaxWorkers 2, a worker that just sleeps, a daily check-in due at midnight.
fn busy() -> Sandbox {
    let sb = Install::new().build();
    sb.new_project("app")
        .max_workers(2)
        .channel("#app")
        .field("Checkin", "daily")
        .ids(&["wp-aaa", "wp-bbb"])
        .create();
    let notify = sb.script("bin/notify", r#"printf '%s\n' "$*" >> "$HOME/notified""#);
    // A stray key too, so the run also logs a warning.
    sb.write(
        ".openclaw/braids/config.toml",
        &format!(
            "[tick]\nmax_wrokers = 1\n[worker]\ncommand = [\"/bin/sh\", \"-c\", \"sleep 20\"]\n[notify]\ncommand = [\"{}\", \"{{event}}\"]\n[checkin]\ntime = \"00:00\"\n",
            notify.display()
        ),
    );
    sb
}

/// Runs a tick with INFO logs and check-in times in UTC, asserting success: (stdout, stderr).
#[track_caller]
fn logged(tick: Tick<'_>) -> (String, String) {
    let r = tick.log("info").utc().output();
    r.assert_ok();
    (r.stdout, r.stderr)
}

fn info_lines(stderr: &str) -> Vec<&str> {
    stderr.lines().filter(|l| l.contains(" INFO ")).collect()
}

#[test]
fn a_tick_logs_exactly_one_info_line_saying_what_it_did() {
    let sb = busy();

    // Spawns two workers, sends a check-in, warns about the config: one INFO line.
    let (_, err) = logged(sb.tick().human());
    let info = info_lines(&err);
    assert_eq!(info.len(), 1, "{err}");
    assert!(
        info[0].ends_with(
            "full run: spawned 2, killed 0, checked in: app [spawned: project:app:wp-aaa project:app:wp-bbb]"
        ),
        "{err}"
    );
    assert!(
        err.contains(" WARN ") && err.contains("max_wrokers"),
        "{err}"
    );
    assert_eq!(sb.read("notified"), "checkin\n");

    // Nothing more to start: idle, with its reason; the check-in is not repeated.
    let (_, err) = logged(sb.tick().human());
    let info = info_lines(&err);
    assert_eq!(info.len(), 1, "{err}");
    assert!(
        info[0].contains("full run: spawned 0, killed 0, idle: "),
        "{err}"
    );
    assert_eq!(sb.read("notified"), "checkin\n");

    // Backing off: skipped, until when.
    let (_, err) = logged(sb.tick().human());
    let info = info_lines(&err);
    assert_eq!(info.len(), 1, "{err}");
    assert!(info[0].contains("skipped: idle ("), "{err}");
    assert!(info[0].contains(" until "), "{err}");

    // Locked: skipped, and why.
    let _lock = braids::system::lock::TickLock::try_acquire(&sb.braids_dir().join(".tick.lock"))
        .unwrap()
        .unwrap();
    let (_, err) = logged(sb.tick().human().force());
    let info = info_lines(&err);
    assert_eq!(info.len(), 1, "{err}");
    assert!(
        info[0].ends_with("skipped: another tick holds the lock"),
        "{err}"
    );
}

#[test]
fn json_logs_are_one_object_per_line() {
    let sb = busy();
    let (stdout, err) = logged(sb.tick().log_json());
    // stdout is the report, stderr the log: they never mix.
    let report: TickReport = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report.spawns.len(), 2);
    let events: Vec<serde_json::Value> = err
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    assert!(events.iter().all(|e| e.is_object()
        && e["timestamp"].is_string()
        && e["level"].is_string()
        && e["message"].is_string()));
    let info: Vec<&serde_json::Value> = events.iter().filter(|e| e["level"] == "INFO").collect();
    assert_eq!(info.len(), 1, "{err}");
    let run = info[0];
    assert_eq!(
        run["message"],
        "full run: spawned 2, killed 0, checked in: app"
    );
    assert_eq!(run["run"], "full");
    assert_eq!(run["spawned"], 2);
    assert_eq!(run["killed"], 0);
    assert_eq!(run["checkins"], 1);
    assert_eq!(
        run["spawned_labels"],
        "project:app:wp-aaa project:app:wp-bbb"
    );
    assert_eq!(run["killed_labels"], "");
    assert!(events.iter().any(|e| e["level"] == "WARN"), "{err}");

    logged(sb.tick().human());
    let (_, err) = logged(sb.tick().log_json().human());
    let events: Vec<serde_json::Value> = err
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let info: Vec<&serde_json::Value> = events.iter().filter(|e| e["level"] == "INFO").collect();
    assert_eq!(info.len(), 1, "{err}");
    assert_eq!(info[0]["run"], "skipped");
    assert_eq!(info[0]["skip"], "backoff");
    assert!(info[0]["idle_reason"].is_string(), "{err}");
}

#[test]
fn errors_are_counted_in_the_info_line_and_spelled_out_at_warn() {
    let sb = Install::new()
        .config("[worker]\nexecutor = [\"true\"]\n")
        .build();
    sb.new_project("app").stub_br().create();
    sb.script("bin/br", "echo 'database is locked' >&2; exit 1");
    let (_, err) = logged(sb.tick().human());
    let info = info_lines(&err);
    assert_eq!(info.len(), 1, "{err}");
    assert!(info[0].ends_with("1 error(s)"), "{err}");
    let warn: Vec<&str> = err.lines().filter(|l| l.contains(" WARN ")).collect();
    assert!(
        warn.iter()
            .any(|l| l.contains("app: ") && l.contains("database is locked")),
        "{err}"
    );
}
