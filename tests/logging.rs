//! Logs: a tick says what it did in exactly one INFO line; `--log-format json` gives one JSON
//! object per line.

mod common;

use common::Sandbox;

/// An installation whose tick has things to do: one project with two ready beads on the
/// native tracker, MaxWorkers 2, a worker that just sleeps, a daily check-in due at midnight.
fn busy(sb: &Sandbox) {
    sb.ok(&["init"]);
    sb.ok(&[
        "new",
        "app",
        "--tracker",
        "workplan",
        "--max-workers",
        "2",
        "--channel",
        "#app",
    ]);
    sb.set_field("app", "Checkin", "daily");
    sb.write(
        "Projects/app/.braids/WORKPLAN.md",
        "# WORKPLAN\n\n- [ ] First <!-- id:wp-aaa -->\n- [ ] Second <!-- id:wp-bbb -->\n",
    );
    sb.iteration(
        "app",
        1,
        "active",
        &[("wp-aaa", "First"), ("wp-bbb", "Second")],
    );
    let notify = sb.script("bin/notify", r#"printf '%s\n' "$*" >> "$HOME/notified""#);
    // A stray key too, so the run also logs a warning.
    sb.write(
        ".openclaw/braids/config.toml",
        &format!(
            "[tick]\nmax_wrokers = 1\n[worker]\ncommand = [\"/bin/sh\", \"-c\", \"sleep 20\"]\n[notify]\ncommand = [\"{}\", \"{{event}}\"]\n[checkin]\ntime = \"00:00\"\n",
            notify.display()
        ),
    );
}

fn tick(sb: &Sandbox, args: &[&str]) -> (String, String) {
    let o = sb
        .braids()
        .env("BRAIDS_LOG", "info")
        .env("TZ", "UTC")
        .args(args)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn info_lines(stderr: &str) -> Vec<&str> {
    stderr.lines().filter(|l| l.contains(" INFO ")).collect()
}

#[test]
fn a_tick_logs_exactly_one_info_line_saying_what_it_did() {
    let sb = Sandbox::new();
    busy(&sb);

    // Spawns two workers, sends a check-in, warns about the config: one INFO line.
    let (_, err) = tick(&sb, &["tick"]);
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
    let (_, err) = tick(&sb, &["tick"]);
    let info = info_lines(&err);
    assert_eq!(info.len(), 1, "{err}");
    assert!(
        info[0].contains("full run: spawned 0, killed 0, idle: "),
        "{err}"
    );
    assert_eq!(sb.read("notified"), "checkin\n");

    // Backing off: skipped, until when.
    let (_, err) = tick(&sb, &["tick"]);
    let info = info_lines(&err);
    assert_eq!(info.len(), 1, "{err}");
    assert!(info[0].contains("skipped: idle ("), "{err}");
    assert!(info[0].contains(" until "), "{err}");

    // Locked: skipped, and why.
    let _lock = braids::lock::TickLock::try_acquire(&sb.braids_dir().join(".tick.lock"))
        .unwrap()
        .unwrap();
    let (_, err) = tick(&sb, &["tick", "--force"]);
    let info = info_lines(&err);
    assert_eq!(info.len(), 1, "{err}");
    assert!(
        info[0].ends_with("skipped: another tick holds the lock"),
        "{err}"
    );
}

#[test]
fn json_logs_are_one_object_per_line() {
    let sb = Sandbox::new();
    busy(&sb);
    let (stdout, err) = tick(&sb, &["--log-format", "json", "tick", "--json"]);
    // stdout is the report, stderr the log: they never mix.
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["spawns"].as_array().unwrap().len(), 2);
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

    tick(&sb, &["tick"]);
    let (_, err) = tick(&sb, &["--log-format", "json", "tick"]);
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
    let sb = Sandbox::new();
    sb.ok(&["init"]);
    sb.ok(&["new", "app", "--tracker", "workplan"]);
    sb.set_field("app", "Tracker", "br");
    std::fs::create_dir_all(sb.project("app").join(".beads")).unwrap();
    sb.iteration("app", 1, "active", &[]);
    sb.script("bin/br", "echo 'database is locked' >&2; exit 1");
    let (_, err) = tick(&sb, &["tick"]);
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
