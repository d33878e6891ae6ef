//! Running `braids tick` on a schedule: a crontab line, a systemd user timer, or the built-in
//! daemon for machines with neither.
//!
//! One schedule syntax serves all three ([`Schedule`]): a crontab(5) expression or `@` macro, or
//! a plain interval (`5m`, `30s`, `2h`). Each backend gets it in its own form — five numeric
//! fields for cron, `OnCalendar=` for systemd, a next-run time for the daemon — from pure
//! functions tested against each other and against `systemd-analyze calendar`.
//!
//! The scheduled command is the same everywhere ([`TickCommand`]): this executable's absolute
//! path, `tick`, the installation's HOME, and a PATH that finds the tracker and the agent, since
//! cron and systemd start programs with a bare PATH.

pub mod cronexpr;
pub mod crontab;
pub mod daemon;
pub mod systemd;

use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};

use crate::config::Config;
use crate::system::paths::Paths;

pub use cronexpr::{CronError, CronExpr};

/// When to run: a crontab expression or a fixed interval.
#[derive(Debug, Clone, PartialEq)]
pub enum Schedule {
    Cron(Box<CronExpr>),
    Every(Interval),
}

/// A positive whole number of seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interval(u64);

impl Interval {
    pub fn from_secs(secs: u64) -> Option<Interval> {
        (secs > 0).then_some(Interval(secs))
    }

    pub fn secs(self) -> u64 {
        self.0
    }

    pub fn duration(self) -> Duration {
        Duration::from_secs(self.0)
    }

    /// Reads `30s`, `5m`, `2h`, `1d`, `1h30m`, `10 min`; a unit is required.
    pub fn parse(text: &str) -> Result<Interval, String> {
        let s: String = text.chars().filter(|c| !c.is_whitespace()).collect();
        let bad = || {
            format!(
                "`{text}` is not an interval; write a number and a unit, like 30s, 5m, 2h or 1d"
            )
        };
        if s.is_empty() {
            return Err(bad());
        }
        let mut total: u64 = 0;
        let mut rest = s.as_str();
        while !rest.is_empty() {
            let digits = rest
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(rest.len());
            if digits == 0 {
                return Err(bad());
            }
            let n: u64 = rest[..digits].parse().map_err(|_| bad())?;
            rest = &rest[digits..];
            let unit_len = rest
                .find(|c: char| c.is_ascii_digit())
                .unwrap_or(rest.len());
            let unit = rest[..unit_len].to_ascii_lowercase();
            rest = &rest[unit_len..];
            let mult = match unit.as_str() {
                "s" | "sec" | "secs" | "second" | "seconds" => 1,
                "m" | "min" | "mins" | "minute" | "minutes" => 60,
                "h" | "hr" | "hrs" | "hour" | "hours" => 3600,
                "d" | "day" | "days" => 86_400,
                _ => return Err(bad()),
            };
            total = n
                .checked_mul(mult)
                .and_then(|v| total.checked_add(v))
                .ok_or_else(bad)?;
        }
        Interval::from_secs(total)
            .ok_or_else(|| format!("`{text}` is zero; an interval must be positive"))
    }
}

impl fmt::Display for Interval {
    /// The shortest exact form: `30s`, `5m`, `2h`, `1d`, `90s`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.0;
        if s % 86_400 == 0 {
            write!(f, "{}d", s / 86_400)
        } else if s % 3600 == 0 {
            write!(f, "{}h", s / 3600)
        } else if s % 60 == 0 {
            write!(f, "{}m", s / 60)
        } else {
            write!(f, "{s}s")
        }
    }
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Schedule::Cron(e) => write!(f, "{e}"),
            Schedule::Every(i) => write!(f, "every {i}"),
        }
    }
}

impl Schedule {
    /// The default: every five minutes.
    pub fn default_every() -> Schedule {
        Schedule::Every(Interval(300))
    }

    /// An interval (`5m`) or a crontab expression (`*/5 * * * *`, `@hourly`).
    pub fn parse(text: &str) -> Result<Schedule, String> {
        let t = text.trim();
        if t.starts_with(|c: char| c.is_ascii_digit()) && !t.contains(char::is_whitespace) {
            // `5m` is an interval; a lone number is neither.
            return Interval::parse(t).map(Schedule::Every);
        }
        CronExpr::parse(t)
            .map(|e| Schedule::Cron(Box::new(e)))
            .map_err(|e| e.to_string())
    }

    /// The five crontab fields. Cron runs at most once a minute and knows no intervals, so an
    /// interval must be a whole number of minutes dividing an hour, or of hours dividing a day.
    pub fn crontab_expr(&self) -> Result<String, String> {
        match self {
            Schedule::Cron(e) => Ok(e.crontab()),
            Schedule::Every(i) => {
                let s = i.secs();
                if s % 60 != 0 {
                    return Err(format!(
                        "cron runs jobs at most once a minute, so it cannot run every {i}; use a whole number of minutes, a systemd timer (--systemd), or `braids daemon --every {i}`"
                    ));
                }
                let m = s / 60;
                if m < 60 && 60 % m == 0 {
                    return Ok(if m == 1 {
                        "* * * * *".into()
                    } else {
                        format!("*/{m} * * * *")
                    });
                }
                if m % 60 == 0 {
                    let h = m / 60;
                    if h < 24 && 24 % h == 0 {
                        return Ok(if h == 1 {
                            "0 * * * *".into()
                        } else {
                            format!("0 */{h} * * *")
                        });
                    }
                    if h == 24 {
                        return Ok("0 0 * * *".into());
                    }
                }
                Err(uneven(*i))
            }
        }
    }

    /// systemd `OnCalendar=` values (one or more lines, ORed).
    pub fn on_calendar(&self) -> Result<Vec<String>, String> {
        match self {
            Schedule::Cron(e) => Ok(e.on_calendar()),
            Schedule::Every(i) => {
                let s = i.secs();
                if s < 60 {
                    return if 60 % s == 0 {
                        Ok(vec![format!("*-*-* *:*:00/{s}")])
                    } else {
                        Err(uneven(*i))
                    };
                }
                if s % 60 != 0 {
                    return Err(uneven(*i));
                }
                let m = s / 60;
                if m < 60 && 60 % m == 0 {
                    return Ok(vec![if m == 1 {
                        "*-*-* *:*:00".into()
                    } else {
                        format!("*-*-* *:00/{m}:00")
                    }]);
                }
                if m % 60 == 0 {
                    let h = m / 60;
                    if h < 24 && 24 % h == 0 {
                        return Ok(vec![if h == 1 {
                            "*-*-* *:00:00".into()
                        } else {
                            format!("*-*-* 00/{h}:00:00")
                        }]);
                    }
                    if h == 24 {
                        return Ok(vec!["*-*-* 00:00:00".into()]);
                    }
                }
                Err(uneven(*i))
            }
        }
    }
}

fn uneven(i: Interval) -> String {
    format!(
        "every {i} cannot be written as a calendar schedule that fires at even intervals (it must divide a minute, an hour or a day: 30s, 5m, 15m, 2h, 1d …); pick one of those, give a crontab expression with --at, or use `braids daemon --every {i}`"
    )
}

/// The program a schedule runs, and the environment it needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TickCommand {
    /// Absolute path of this braids executable, then `tick` and its flags.
    pub argv: Vec<String>,
    /// `HOME`, `PATH` and, when set, `BRAIDS_HOME`.
    pub env: Vec<(String, String)>,
    /// Where output is appended: `~/.openclaw/braids/logs/tick.log`.
    pub log: PathBuf,
}

/// Directories every scheduled run gets on its PATH, after the ones found for the tools.
pub const SYSTEM_PATH: &[&str] = &[
    "/usr/local/sbin",
    "/usr/local/bin",
    "/usr/sbin",
    "/usr/bin",
    "/sbin",
    "/bin",
];

/// The programs whose directories a scheduled run needs on PATH: the trackers, git, tmux, node
/// (for agents written in it), and the first word of the configured executor, worker command
/// and notifier when they are bare names.
pub fn tools(config: &Config) -> Vec<String> {
    let mut v: Vec<String> = ["br", "bd", "git", "tmux", "node"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    for argv in [
        config.worker.executor.argv(),
        &config.worker.command,
        &config.notify.command,
    ] {
        if let Some(p) = argv.first().filter(|p| !p.contains('/') && !p.is_empty()) {
            v.push(p.clone());
        }
    }
    // Every preset in use or configured: a project may name one in PROJECT.md.
    let presets = config
        .worker
        .executor
        .preset()
        .into_iter()
        .chain(config.executors.keys().copied());
    for preset in presets {
        let program = config.preset_settings(preset).program;
        let program = if program.trim().is_empty() {
            preset.default_program().to_string()
        } else {
            program
        };
        if !program.contains('/') && !v.contains(&program) {
            v.push(program);
        }
    }
    v
}

/// PATH for a scheduled run: the directory of each tool found on `current` (in the order of
/// `tools`), then [`SYSTEM_PATH`]; no duplicates, nothing relative, nothing containing `:`.
pub fn scheduled_path(current: Option<&OsString>, tools: &[String]) -> String {
    use std::os::unix::fs::PermissionsExt;
    let dirs: Vec<PathBuf> = current
        .map(|p| std::env::split_paths(p).collect())
        .unwrap_or_default();
    let mut out: Vec<String> = Vec::new();
    let mut push = |d: &str| {
        if d.starts_with('/') && !d.contains(':') && !out.iter().any(|o| o == d) {
            out.push(d.to_string());
        }
    };
    for tool in tools {
        let found = dirs.iter().find(|d| {
            std::fs::metadata(d.join(tool))
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        });
        if let Some(d) = found {
            push(&d.to_string_lossy());
        }
    }
    for d in SYSTEM_PATH {
        push(d);
    }
    out.join(":")
}

/// The absolute path of the running braids executable.
pub fn current_exe() -> Result<PathBuf> {
    let exe = std::env::current_exe().context("cannot find the path of this braids executable")?;
    let exe = exe.canonicalize().unwrap_or(exe);
    let shown = exe.to_string_lossy();
    if shown.ends_with(" (deleted)") {
        bail!(
            "this braids executable ({shown}) was deleted or replaced while running; run the installed one"
        );
    }
    Ok(exe)
}

impl TickCommand {
    /// What a schedule for this installation runs. `json_logs` adds `--log-format json`.
    pub fn new(paths: &Paths, config: &Config, exe: &Path, json_logs: bool) -> Result<TickCommand> {
        let mut argv = vec![path_str(exe, "the braids executable")?];
        if json_logs {
            argv.extend(["--log-format".to_string(), "json".to_string()]);
        }
        argv.push("tick".into());
        let mut env = vec![
            ("HOME".to_string(), path_str(&paths.home, "HOME")?),
            (
                "PATH".to_string(),
                scheduled_path(std::env::var_os("PATH").as_ref(), &tools(config)),
            ),
        ];
        // Only when set: the resolved value, so a schedule means what this shell meant.
        if std::env::var_os("BRAIDS_HOME").is_some_and(|v| !v.is_empty()) {
            env.push((
                "BRAIDS_HOME".to_string(),
                path_str(&paths.braids_home, "BRAIDS_HOME")?,
            ));
        }
        let log = paths.logs_dir().join("tick.log");
        path_str(&log, "the log path")?;
        Ok(TickCommand { argv, env, log })
    }
}

impl TickCommand {
    /// The same installation's `braids supervise` (`--once` for cron, which starts it each
    /// time), logging to `logs/supervise.log`.
    pub fn supervise(&self, once: bool, exec: &[String]) -> Result<TickCommand> {
        let mut argv: Vec<String> = self
            .argv
            .iter()
            .take_while(|a| *a != "tick")
            .cloned()
            .collect();
        argv.push("supervise".into());
        if once {
            argv.push("--once".into());
        }
        argv.push("--exec".into());
        for a in exec {
            if a.contains('\n') || a.contains('\0') {
                bail!("a --supervise argument contains a line break or NUL, which no schedule can hold");
            }
            argv.push(a.clone());
        }
        let log = self.log.with_file_name("supervise.log");
        Ok(TickCommand {
            argv,
            env: self.env.clone(),
            log,
        })
    }
}

/// A path as UTF-8 text without newlines: what crontab lines and unit files can hold.
pub fn path_str(p: &Path, what: &str) -> Result<String> {
    let Some(s) = p.to_str() else {
        bail!(
            "{what} `{}` is not valid UTF-8, so it cannot go into a schedule",
            p.display()
        );
    };
    if s.contains(['\n', '\r', '\0']) {
        bail!(
            "{what} `{}` contains a line break, so it cannot go into a schedule",
            p.display()
        );
    }
    Ok(s.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals() {
        let p = |s: &str| Interval::parse(s).map(|i| i.secs());
        assert_eq!(p("30s"), Ok(30));
        assert_eq!(p("5m"), Ok(300));
        assert_eq!(p("5 min"), Ok(300));
        assert_eq!(p("2h"), Ok(7200));
        assert_eq!(p("1h30m"), Ok(5400));
        assert_eq!(p("1d"), Ok(86_400));
        assert_eq!(p("10Minutes"), Ok(600));
        for bad in [
            "",
            "5",
            "m",
            "5x",
            "-5m",
            "5m3",
            "0s",
            "99999999999999999999d",
        ] {
            assert!(p(bad).is_err(), "{bad}");
        }
        assert_eq!(Interval(5400).to_string(), "90m");
        assert_eq!(Interval(90).to_string(), "90s");
        assert_eq!(Interval(7200).to_string(), "2h");
    }

    #[test]
    fn schedules_parse_either_form() {
        assert_eq!(Schedule::parse("5m"), Ok(Schedule::Every(Interval(300))));
        assert!(matches!(
            Schedule::parse("*/5 * * * *"),
            Ok(Schedule::Cron(_))
        ));
        assert!(matches!(Schedule::parse("@daily"), Ok(Schedule::Cron(_))));
        assert!(Schedule::parse("5").is_err());
        assert!(Schedule::parse("5 * * *").is_err());
    }

    #[test]
    fn intervals_as_crontab_and_on_calendar() {
        let cases: &[(&str, Option<&str>, Option<&str>)] = &[
            ("30s", None, Some("*-*-* *:*:00/30")),
            ("1m", Some("* * * * *"), Some("*-*-* *:*:00")),
            ("5m", Some("*/5 * * * *"), Some("*-*-* *:00/5:00")),
            ("15m", Some("*/15 * * * *"), Some("*-*-* *:00/15:00")),
            ("60m", Some("0 * * * *"), Some("*-*-* *:00:00")),
            ("2h", Some("0 */2 * * *"), Some("*-*-* 00/2:00:00")),
            ("24h", Some("0 0 * * *"), Some("*-*-* 00:00:00")),
            ("7m", None, None),
            ("90m", None, None),
            ("45s", None, None),
            ("5h", None, None),
            ("2d", None, None),
        ];
        for (i, cron, cal) in cases {
            let s = Schedule::parse(i).unwrap();
            assert_eq!(s.crontab_expr().ok().as_deref(), *cron, "{i} cron");
            assert_eq!(
                s.on_calendar().ok().map(|v| v.join("|")).as_deref(),
                *cal,
                "{i} systemd"
            );
        }
        assert!(Schedule::parse("45s")
            .unwrap()
            .crontab_expr()
            .unwrap_err()
            .contains("braids daemon --every 45s"));
    }

    #[test]
    fn scheduled_path_finds_tools_then_system_dirs() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        let b = dir.path().join("b");
        std::fs::create_dir_all(&a).unwrap();
        std::fs::create_dir_all(&b).unwrap();
        for (d, name, mode) in [(&a, "br", 0o755), (&b, "bd", 0o755), (&a, "notexec", 0o644)] {
            let p = d.join(name);
            std::fs::write(&p, "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        }
        let current = std::env::join_paths([
            PathBuf::from("relative/bin"),
            b.clone(),
            a.clone(),
            PathBuf::from("/usr/bin"),
        ])
        .unwrap();
        let tools: Vec<String> = ["br", "bd", "notexec", "missing"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let p = scheduled_path(Some(&current), &tools);
        let want = format!(
            "{}:{}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            a.display(),
            b.display()
        );
        assert_eq!(p, want);
        assert_eq!(
            scheduled_path(None, &tools),
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
        );
    }
}
