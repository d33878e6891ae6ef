//! `braids schedule install|show|remove`: the crontab line (against a stub `crontab` that keeps
//! the table in a file), the systemd units (checked by `systemd-analyze verify`), and the
//! schedule conversions (checked against `systemd-analyze calendar`).

use std::path::Path;
use std::process::Command;

use braids::schedule::Schedule;
use chrono::{DateTime, Duration, TimeZone, Utc};

use crate::support::Sandbox;

/// A `crontab` on the sandbox PATH that keeps the table in `$HOME/crontab.txt` and counts
/// writes in `$HOME/crontab.writes`, like the real one: `-l` fails with "no crontab" when
/// there is none, and `-` refuses a table without a final newline.
fn stub_crontab(sb: &Sandbox) {
    sb.script(
        "bin/crontab",
        r#"f="$HOME/crontab.txt"
case "$1" in
  -l) if [ -f "$f" ]; then cat "$f"; else echo "no crontab for $(id -un)" >&2; exit 1; fi ;;
  -) cat > "$f.new"
     if [ -s "$f.new" ] && [ "$(tail -c1 "$f.new" | od -An -c | tr -d ' ')" != '\n' ]; then
       echo "new crontab file is missing newline before EOF, can't install." >&2; rm "$f.new"; exit 1
     fi
     mv "$f.new" "$f"; echo write >> "$HOME/crontab.writes" ;;
  *) echo "unexpected crontab $*" >&2; exit 2 ;;
esac"#,
    );
}

fn crontab(sb: &Sandbox) -> String {
    sb.read("crontab.txt")
}

fn writes(sb: &Sandbox) -> usize {
    sb.read("crontab.writes").lines().count()
}

fn tag(sb: &Sandbox) -> String {
    format!("# braids:tick {}", sb.braids_dir().display())
}

/// A crontab as people have them, with an older braids line of this installation (another
/// schedule, another binary path, the old redirection) and no final newline.
fn messy(sb: &Sandbox) -> String {
    format!(
        "# Edit this file to introduce tasks to be run by cron.\n# m h  dom mon dow   command\nMAILTO=ops@example.com\nPATH=/usr/bin:/bin\n\n0 3 * * * /usr/bin/backup --all > /dev/null 2>&1\n*/10 * * * * HOME=/srv/other /opt/braids tick >/dev/null 2>>/srv/other/log # braids:tick /srv/other/.openclaw/braids\n*/15 * * * * /old/bin/braids tick >> /tmp/old.log 2>&1 {}\n@reboot /usr/bin/say-hello\t# hello\r\n30 4 1,15 * 5 echo 50\\% done",
        tag(sb)
    )
}

fn lines(s: &str) -> Vec<&str> {
    s.split_inclusive('\n').collect()
}

#[test]
fn cron_install_replaces_only_its_own_line_and_is_idempotent() {
    let sb = Sandbox::new();
    stub_crontab(&sb);
    sb.ok(&["init"]);
    let before = messy(&sb);
    sb.write("crontab.txt", &before);

    let out = sb.ok(&["schedule", "install", "--cron", "--every", "5m"]);
    assert!(out.contains("crontab: installed"), "{out}");
    let after = crontab(&sb);
    let (b, a) = (lines(&before), lines(&after));
    assert_eq!(b.len(), a.len(), "{after}");
    let ours = 7;
    for (i, (x, y)) in b.iter().zip(&a).enumerate() {
        if i == ours {
            assert!(y.starts_with("*/5 * * * * "), "{y}");
            assert!(y.ends_with(&format!("{}\n", tag(&sb))), "{y}");
        } else if i == b.len() - 1 {
            assert_eq!(
                *y,
                format!("{x}\n"),
                "only the missing final newline is added"
            );
        } else {
            assert_eq!(x, y, "line {i} must be untouched");
        }
    }
    assert_eq!(writes(&sb), 1);

    // Again: the same text, and nothing written.
    let out = sb.ok(&["schedule", "install", "--cron", "--every", "5m"]);
    assert!(out.contains("unchanged"), "{out}");
    assert_eq!(crontab(&sb), after);
    assert_eq!(writes(&sb), 1);

    // Another schedule replaces the line in place.
    sb.ok(&[
        "schedule",
        "install",
        "--cron",
        "--at",
        "0 9-17 * * mon-fri",
    ]);
    let again = crontab(&sb);
    assert_eq!(lines(&again).len(), a.len());
    assert!(lines(&again)[ours].starts_with("0 9-17 * * 1-5 "));
    assert_eq!(again.matches(&tag(&sb)).count(), 1);

    // Remove takes our line and nothing else.
    let out = sb.ok(&["schedule", "remove", "--cron"]);
    assert!(out.contains("cron: removed"), "{out}");
    let removed = crontab(&sb);
    let expected: String = lines(&after)
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != ours)
        .map(|(_, l)| *l)
        .collect();
    assert_eq!(removed, expected);
    let out = sb.ok(&["schedule", "remove", "--cron"]);
    assert!(out.contains("nothing to remove"), "{out}");
}

#[test]
fn cron_line_runs_tick_as_cron_would() {
    let sb = Sandbox::new();
    stub_crontab(&sb);
    sb.script("bin/bd", "exit 0");
    sb.ok(&["init"]);
    sb.ok(&["schedule", "install", "--cron"]);
    let table = crontab(&sb);
    let line = table.lines().next().expect("one line");
    let exe = assert_cmd::cargo::cargo_bin("braids");
    assert!(line.starts_with("*/5 * * * * "), "{line}");
    assert!(
        line.contains(&format!("HOME={} ", sb.home().display())),
        "{line}"
    );
    assert!(
        line.contains(&format!(" {} tick ", exe.display())),
        "{line}"
    );
    let path = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("PATH="))
        .expect("PATH=");
    let dirs: Vec<&str> = path.split(':').collect();
    let bin = sb.bin().display().to_string();
    let at = |d: &str| dirs.iter().position(|x| *x == d);
    assert!(
        at(&bin).is_some() && at(&bin) < at("/usr/bin"),
        "bd's directory comes before the system's: {path}"
    );
    for d in braids::schedule::SYSTEM_PATH {
        assert!(at(d).is_some(), "{d} in {path}");
    }
    let log = sb.braids_dir().join("logs/tick.log");
    assert!(line.contains(&format!("2>>{} ", log.display())), "{line}");
    assert!(log.parent().unwrap().is_dir(), "the log directory exists");

    // Run the command the way cron does: `sh -c`, with an empty environment.
    let command: String = line.splitn(6, ' ').nth(5).unwrap().to_string();
    let command = command.replace("\\%", "%");
    for _ in 0..2 {
        let st = Command::new("/usr/bin/env")
            .args(["-i", "/bin/sh", "-c", &command])
            .status()
            .unwrap();
        assert!(st.success());
    }
    let text = std::fs::read_to_string(&log).unwrap();
    let runs: Vec<&str> = text.lines().collect();
    assert_eq!(runs.len(), 2, "one line per run:\n{text}");
    assert!(
        runs[0].contains("INFO") && runs[0].contains("full run"),
        "{text}"
    );
    assert!(runs[1].contains("skipped"), "{text}");
    assert!(sb.state().last_run_at.is_some());
}

#[test]
fn dry_runs_write_nothing() {
    let sb = Sandbox::new();
    stub_crontab(&sb);
    sb.write("crontab.txt", "0 1 * * * job\n");
    let out = sb.ok(&[
        "schedule",
        "install",
        "--cron",
        "--dry-run",
        "--at",
        "@hourly",
    ]);
    assert!(
        out.starts_with("dry run: would install this crontab:\n0 1 * * * job\n0 * * * * "),
        "{out}"
    );
    assert_eq!(writes(&sb), 0);
    assert!(!sb.braids_dir().join("logs").exists());

    let out = sb.ok(&["schedule", "install", "--systemd", "--dry-run"]);
    assert!(out.contains("braids-tick.service:\n"), "{out}");
    assert!(out.contains("OnCalendar=*-*-* *:00/5:00"), "{out}");
    assert!(!sb.home().join(".config").exists());

    sb.ok(&["schedule", "install", "--cron"]);
    let installed = crontab(&sb);
    let out = sb.ok(&["schedule", "remove", "--dry-run"]);
    assert!(out.contains("cron: would remove"), "{out}");
    assert_eq!(crontab(&sb), installed);
}

#[test]
fn usage_errors_say_what_to_do() {
    let sb = Sandbox::new();
    stub_crontab(&sb);
    for (args, want) in [
        (vec!["schedule", "install"], "--cron|--systemd"),
        (
            vec!["schedule", "install", "--cron", "--systemd"],
            "cannot be used with",
        ),
        (
            vec!["schedule", "install", "--cron", "--every", "30s"],
            "at most once a minute",
        ),
        (
            vec!["schedule", "install", "--cron", "--every", "7m"],
            "even intervals",
        ),
        (
            vec!["schedule", "install", "--cron", "--at", "* * * *"],
            "five",
        ),
        (
            vec!["schedule", "install", "--cron", "--at", "0 0 30 2 *"],
            "no selected month",
        ),
        (
            vec!["schedule", "install", "--cron", "--enable"],
            "--systemd",
        ),
        (vec!["daemon", "--every", "5"], "unit"),
        (vec!["daemon", "--cron", "5m"], "five"),
    ] {
        let o = sb.run(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(want), "{args:?}: {err}");
    }
    assert_eq!(writes(&sb), 0);
}

#[test]
fn untagged_braids_lines_are_left_and_pointed_out() {
    let sb = Sandbox::new();
    stub_crontab(&sb);
    let hand = "*/5 * * * * /usr/local/bin/braids tick\n";
    sb.write("crontab.txt", hand);
    let out = sb.ok(&["schedule", "install", "--cron"]);
    assert!(
        out.contains("warning: another crontab line also runs braids tick"),
        "{out}"
    );
    assert!(crontab(&sb).starts_with(hand));
    let out = sb.ok(&["schedule", "show", "--cron"]);
    assert!(out.contains("cron: installed"), "{out}");
    assert!(out.contains("not managed by braids"), "{out}");
}

#[test]
fn show_and_remove_cover_both_kinds_by_default() {
    let sb = Sandbox::new();
    stub_crontab(&sb);
    let out = sb.ok(&["schedule", "show"]);
    assert!(out.contains("cron: not installed"), "{out}");
    assert!(out.contains("systemd: not installed"), "{out}");
    sb.ok(&["schedule", "install", "--cron"]);
    sb.ok(&["schedule", "install", "--systemd", "--at", "@hourly"]);
    let v: serde_json::Value =
        serde_json::from_str(&sb.ok(&["schedule", "show", "--json"])).unwrap();
    assert!(v["cron"]["line"].as_str().unwrap().ends_with(&tag(&sb)));
    assert_eq!(v["systemd"]["files"].as_array().unwrap().len(), 2);
    let out = sb.ok(&["schedule", "remove"]);
    assert!(out.contains("cron: removed"), "{out}");
    assert!(out.contains("systemd: removed"), "{out}");
    assert!(
        out.contains("systemctl --user stop braids-tick.timer"),
        "{out}"
    );
    let unit_dir = sb.home().join(".config/systemd/user");
    assert!(!unit_dir.join("braids-tick.service").exists());
    assert!(!unit_dir.join("braids-tick.timer").exists());
    assert_eq!(crontab(&sb), "");
}

#[test]
fn systemd_enable_and_disable_run_systemctl_in_order() {
    let sb = Sandbox::new();
    sb.script("bin/systemctl", r#"echo "$*" >> "$HOME/systemctl.calls""#);
    let out = sb.ok(&["schedule", "install", "--systemd", "--enable"]);
    assert!(out.contains("ran: systemctl --user daemon-reload && systemctl --user enable --now braids-tick.timer"), "{out}");
    assert_eq!(
        sb.read("systemctl.calls"),
        "--user daemon-reload\n--user enable --now braids-tick.timer\n"
    );
    // What `enable` would have linked; remove takes it too.
    let wants = sb.home().join(".config/systemd/user/timers.target.wants");
    std::fs::create_dir_all(&wants).unwrap();
    std::os::unix::fs::symlink("../braids-tick.timer", wants.join("braids-tick.timer")).unwrap();
    sb.ok(&["schedule", "remove", "--systemd", "--disable"]);
    assert_eq!(
        sb.read("systemctl.calls"),
        "--user daemon-reload\n--user enable --now braids-tick.timer\n--user disable --now braids-tick.timer\n--user daemon-reload\n"
    );
    assert!(wants.join("braids-tick.timer").symlink_metadata().is_err());

    // A failing systemctl fails `--enable` with its message, after writing the files.
    sb.script(
        "bin/systemctl",
        "echo 'Failed to connect to bus: No medium found' >&2; exit 1",
    );
    let o = sb.run(&["schedule", "install", "--systemd", "--enable"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("No medium found"));
    assert!(sb
        .home()
        .join(".config/systemd/user/braids-tick.timer")
        .is_file());
}

fn systemd_analyze() -> &'static str {
    let p = "/usr/bin/systemd-analyze";
    assert!(
        Path::new(p).is_file(),
        "systemd-analyze is missing; .ci/run installs it (apt-get install systemd)"
    );
    p
}

/// `systemd-analyze verify` on the generated units, in system and in user mode: it must
/// succeed and say nothing about our units.
fn verify(sb: &Sandbox) {
    let dir = sb.home().join(".config/systemd/user");
    let units = [
        dir.join("braids-tick.service"),
        dir.join("braids-tick.timer"),
    ];
    let runtime = sb.home().join("run");
    std::fs::create_dir_all(&runtime).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o700)).unwrap();
    for user in [false, true] {
        let mut c = Command::new(systemd_analyze());
        if user {
            c.arg("--user").env("XDG_RUNTIME_DIR", &runtime);
        }
        let o = c.arg("verify").args(&units).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "verify (user: {user}) failed: {err}");
        let ours: Vec<&str> = err
            .lines()
            .filter(|l| l.contains("braids-tick") || l.contains(&*sb.home().to_string_lossy()))
            .collect();
        assert!(ours.is_empty(), "verify (user: {user}) complained:\n{err}");
    }
}

#[test]
fn systemd_units_pass_systemd_analyze_verify() {
    let sb = Sandbox::new();
    sb.ok(&["init"]);
    for args in [
        vec!["--every", "5m"],
        vec!["--every", "30s", "--journal"],
        vec!["--at", "30 4 1,15 * 5"],
        vec!["--at", "@daily"],
    ] {
        let mut a = vec!["schedule", "install", "--systemd"];
        a.extend(args.iter());
        sb.ok(&a);
        verify(&sb);
    }
    let service = sb.read(".config/systemd/user/braids-tick.service");
    let exe = assert_cmd::cargo::cargo_bin("braids");
    for want in [
        "Type=oneshot\n".to_string(),
        "KillMode=process\n".to_string(),
        format!("Environment=\"HOME={}\"\n", sb.home().display()),
        "Environment=\"PATH=".to_string(),
        format!("ExecStart={} tick\n", exe.display()),
    ] {
        assert!(service.contains(&want), "{want}\n{service}");
    }
    sb.ok(&["schedule", "install", "--systemd", "--journal"]);
    let service = sb.read(".config/systemd/user/braids-tick.service");
    assert!(service.contains("StandardError=journal\n"), "{service}");
    // `--log-format json` before `schedule` carries into the scheduled command.
    sb.ok(&["--log-format", "json", "schedule", "install", "--systemd"]);
    let service = sb.read(".config/systemd/user/braids-tick.service");
    assert!(service.contains(&format!(
        "ExecStart={} --log-format json tick\n",
        exe.display()
    )));
    assert!(service.contains(&format!(
        "StandardError=append:{}\n",
        sb.braids_dir().join("logs/tick.log").display()
    )));
    let timer = sb.read(".config/systemd/user/braids-tick.timer");
    assert!(
        timer.contains("OnCalendar=*-*-* *:00/5:00\nPersistent=true\n"),
        "{timer}"
    );
    verify(&sb);
}

/// The next `n` elapses of a set of OnCalendar expressions (ORed, as in one timer), from
/// `systemd-analyze calendar` in UTC.
fn systemd_elapses(exprs: &[String], base: DateTime<Utc>, n: usize) -> Vec<String> {
    let mut all = Vec::new();
    for e in exprs {
        let o = Command::new(systemd_analyze())
            .env("TZ", "UTC")
            .arg("calendar")
            .arg(format!("--iterations={n}"))
            .arg(format!(
                "--base-time={}",
                base.format("%Y-%m-%d %H:%M:%S UTC")
            ))
            .arg(e)
            .output()
            .unwrap();
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success(),
            "{e}: {}{out}",
            String::from_utf8_lossy(&o.stderr)
        );
        for l in out.lines() {
            let l = l.trim();
            if l.starts_with("Next elapse:") || l.starts_with("Iter. #") {
                // "Next elapse: Thu 2026-01-01 00:05:00 UTC"
                let ts: Vec<&str> = l.split_whitespace().collect();
                let date = ts[ts.len() - 3];
                let time = ts[ts.len() - 2];
                all.push(format!("{date} {time}"));
            }
        }
    }
    all.sort();
    all.dedup();
    all.truncate(n);
    all
}

fn croner_elapses(s: &Schedule, base: DateTime<Utc>, n: usize) -> Vec<String> {
    let mut out = Vec::new();
    match s {
        Schedule::Cron(e) => {
            let mut t = base;
            for _ in 0..n {
                t = e.next_after(&t).unwrap();
                out.push(t.format("%Y-%m-%d %H:%M:%S").to_string());
            }
        }
        Schedule::Every(i) => {
            // Calendar intervals count from midnight; the base is midnight.
            for k in 1..=n as i64 {
                let t = base + Duration::seconds(i.secs() as i64 * k);
                out.push(t.format("%Y-%m-%d %H:%M:%S").to_string());
            }
        }
    }
    out
}

#[test]
fn on_calendar_fires_when_cron_would_per_systemd_analyze_calendar() {
    let base = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
    for text in [
        "*/5 * * * *",
        "* * * * *",
        "0 9 * * 1-5",
        "30 4 1,15 * 5",
        "0 0 */2 * 5",
        "0 0 13 * fri",
        "0 12 * * sun,sat",
        "0 12 * * 0,7",
        "0 0 * * 7",
        "15,45 8-18 1 1,4,7,10 *",
        "5,6,7,20 1,2 * 2,3,5 *",
        "0 1-23/2 * * *",
        "59 23 31 * *",
        "0 0 29 2 *",
        "@weekly",
        "@monthly",
        "@yearly",
        "30s",
        "1m",
        "5m",
        "2h",
        "1d",
    ] {
        let s = Schedule::parse(text).unwrap();
        let cal = s.on_calendar().unwrap();
        let n = if text == "0 0 29 2 *" { 3 } else { 25 };
        assert_eq!(
            systemd_elapses(&cal, base, n),
            croner_elapses(&s, base, n),
            "{text} as {cal:?}"
        );
        // Intervals that cron can run agree with their crontab form too.
        if let (Schedule::Every(_), Ok(expr)) = (&s, s.crontab_expr()) {
            let as_cron = Schedule::parse(&expr).unwrap();
            assert_eq!(
                croner_elapses(&as_cron, base, n),
                croner_elapses(&s, base, n),
                "{text}"
            );
        }
    }
}

#[test]
fn a_cron_dry_run_works_without_crontab_and_the_install_says_what_to_do() {
    let sb = Sandbox::new();
    // A machine without cron: nothing on PATH but the sandbox's empty bin.
    let run = |args: &[&str]| {
        sb.command(args)
            .env("PATH", sb.bin())
            .output()
            .expect("braids runs")
    };
    let dry = run(&[
        "schedule",
        "install",
        "--cron",
        "--dry-run",
        "--at",
        "@hourly",
    ]);
    let out = String::from_utf8_lossy(&dry.stdout);
    assert!(dry.status.success(), "{dry:?}");
    assert!(
        out.starts_with("dry run: would install this crontab:\n0 * * * * "),
        "{out}"
    );
    assert!(out.contains("`crontab` is not installed"), "{out}");
    let real = run(&["schedule", "install", "--cron", "--at", "@hourly"]);
    assert!(!real.status.success());
    let err = String::from_utf8_lossy(&real.stderr);
    assert!(err.contains("install cron"), "{err}");
    assert!(!sb.home().join("crontab.txt").exists());
}

#[test]
fn c8_6_supervise_is_installed_beside_the_tick_and_removed_with_it() {
    let sb = Sandbox::new();
    sb.ok(&["init"]);
    sb.ok(&[
        "schedule",
        "install",
        "--systemd",
        "--supervise",
        "/usr/local/bin/page-me",
        "--to",
        "ops",
    ]);
    let dir = sb.home().join(".config/systemd/user");
    let unit = sb.read(".config/systemd/user/braids-supervise.service");
    let exe = assert_cmd::cargo::cargo_bin("braids");
    for want in [
        "Type=simple\n".to_string(),
        "Restart=on-failure\n".to_string(),
        "KillMode=mixed\n".to_string(),
        format!(
            "ExecStart={} supervise --exec /usr/local/bin/page-me --to ops\n",
            exe.display()
        ),
        format!(
            "StandardError=append:{}\n",
            sb.braids_dir().join("logs/supervise.log").display()
        ),
        "WantedBy=default.target\n".to_string(),
    ] {
        assert!(unit.contains(&want), "{want}\n{unit}");
    }
    // systemd itself accepts the unit.
    let runtime = sb.home().join("run");
    std::fs::create_dir_all(&runtime).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o700)).unwrap();
    let o = Command::new(systemd_analyze())
        .arg("--user")
        .env("XDG_RUNTIME_DIR", &runtime)
        .arg("verify")
        .arg(dir.join("braids-supervise.service"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(!err.contains("braids-supervise"), "{err}");
    sb.ok(&["schedule", "remove", "--systemd"]);
    assert!(!dir.join("braids-supervise.service").exists());
    // cron: a second line, `--once` on the tick's schedule, shown by a dry run.
    let out = sb.ok(&[
        "schedule",
        "install",
        "--cron",
        "--dry-run",
        "--supervise",
        "/usr/local/bin/page-me",
    ]);
    assert!(
        out.contains("supervise --once --exec /usr/local/bin/page-me"),
        "{out}"
    );
    assert!(out.contains("# braids:supervise "), "{out}");
    assert!(out.contains("# braids:tick "), "{out}");
}
