//! A systemd user timer: `braids-tick.service` (one tick) and `braids-tick.timer` (when), in
//! `~/.config/systemd/user/`.
//!
//! The service is `Type=oneshot` with `KillMode=process`: when the tick exits, systemd stops
//! the unit but leaves the workers it started running (they are detached sessions, not part of
//! the run). The timer is `Persistent=true`, so a run missed while the machine was off happens
//! at the next boot.

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};

use crate::system::paths::Paths;

use super::TickCommand;

pub const SERVICE: &str = "braids-tick.service";
pub const TIMER: &str = "braids-tick.timer";
pub const SUPERVISE: &str = "braids-supervise.service";

/// Where user units live for this HOME.
pub fn unit_dir(paths: &Paths) -> PathBuf {
    paths.home.join(".config/systemd/user")
}

/// Where the run's output goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogTarget {
    /// Appended to `~/.openclaw/braids/logs/tick.log`.
    File,
    /// The journal (`journalctl --user -u braids-tick`).
    Journal,
}

/// Escapes `%` (specifiers) for any unit file value.
fn specifiers(s: &str) -> String {
    s.replace('%', "%%")
}

/// One word of `ExecStart=`: quoted when it holds anything but plain characters; `%` and `$`
/// doubled so systemd expands neither.
pub fn exec_word(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+:,=@".contains(c));
    let s = specifiers(s).replace('$', "$$");
    if plain {
        return s;
    }
    let mut out = String::from("\"");
    for c in s.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

/// `Environment="KEY=value"`, quoted and escaped.
pub fn environment_line(key: &str, value: &str) -> String {
    let mut out = format!("Environment=\"{key}=");
    for c in specifiers(value).chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

/// The command's environment and `ExecStart=` lines.
fn push_exec(s: &mut String, cmd: &TickCommand) {
    for (k, v) in &cmd.env {
        s.push_str(&environment_line(k, v));
        s.push('\n');
    }
    let words: Vec<String> = cmd.argv.iter().map(|a| exec_word(a)).collect();
    s.push_str(&format!("ExecStart={}\n", words.join(" ")));
}

/// The service unit's text.
pub fn service_unit(cmd: &TickCommand, log: LogTarget) -> String {
    let mut s = String::new();
    s.push_str(
        "# Written by `braids schedule install --systemd`; `braids schedule remove` deletes it.\n",
    );
    s.push_str("[Unit]\n");
    s.push_str("Description=braids tick: one orchestrator run over every registered project\n");
    s.push('\n');
    s.push_str("[Service]\n");
    s.push_str("Type=oneshot\n");
    s.push_str(
        "# Workers are detached sessions that outlive the run: stop only the tick itself.\n",
    );
    s.push_str("KillMode=process\n");
    push_exec(&mut s, cmd);
    match log {
        LogTarget::File => {
            let log = specifiers(&cmd.log.to_string_lossy());
            // The run's log line is on stderr; stdout would repeat it.
            s.push_str("StandardOutput=null\n");
            s.push_str(&format!("StandardError=append:{log}\n"));
        }
        LogTarget::Journal => {
            s.push_str("StandardOutput=null\n");
            s.push_str("StandardError=journal\n");
        }
    }
    s
}

/// The supervisor's unit: `braids supervise` kept running, restarted when it fails. A stop
/// sends SIGTERM to braids alone (`KillMode=mixed`), which lets the running command finish and
/// be acknowledged.
pub fn supervise_unit(cmd: &TickCommand, log: LogTarget) -> String {
    let mut s = String::new();
    s.push_str("# Written by `braids schedule install --supervise`; `braids schedule remove` deletes it.\n");
    s.push_str("[Unit]\n");
    s.push_str("Description=braids supervise: a command for every event braids writes\n\n");
    s.push_str("[Service]\n");
    s.push_str("Type=simple\n");
    s.push_str("Restart=on-failure\n");
    s.push_str("RestartSec=10\n");
    s.push_str("KillMode=mixed\n");
    s.push_str("TimeoutStopSec=15min\n");
    push_exec(&mut s, cmd);
    match log {
        LogTarget::File => {
            let log = specifiers(&cmd.log.to_string_lossy());
            s.push_str(&format!("StandardOutput=append:{log}\n"));
            s.push_str(&format!("StandardError=append:{log}\n"));
        }
        LogTarget::Journal => {
            s.push_str("StandardOutput=journal\n");
            s.push_str("StandardError=journal\n");
        }
    }
    s.push_str("\n[Install]\nWantedBy=default.target\n");
    s
}

/// The timer unit's text: one `OnCalendar=` per expression (they are ORed).
pub fn timer_unit(on_calendar: &[String], shown: &str) -> String {
    let mut s = String::new();
    s.push_str(
        "# Written by `braids schedule install --systemd`; `braids schedule remove` deletes it.\n",
    );
    s.push_str("[Unit]\n");
    s.push_str(&format!(
        "Description=Run braids tick ({})\n\n",
        specifiers(shown)
    ));
    s.push_str("[Timer]\n");
    for c in on_calendar {
        s.push_str(&format!("OnCalendar={c}\n"));
    }
    s.push_str("Persistent=true\n");
    s.push_str("AccuracySec=1s\n");
    s.push_str(&format!("Unit={SERVICE}\n\n"));
    s.push_str("[Install]\n");
    s.push_str("WantedBy=timers.target\n");
    s
}

/// The commands that load and start the timer.
pub fn enable_commands() -> Vec<Vec<String>> {
    vec![
        argv(&["systemctl", "--user", "daemon-reload"]),
        argv(&["systemctl", "--user", "enable", "--now", TIMER]),
    ]
}

/// The commands that stop the timer (before its files are deleted).
pub fn disable_commands() -> Vec<Vec<String>> {
    vec![argv(&["systemctl", "--user", "disable", "--now", TIMER])]
}

/// The commands that stop and disable the supervisor's service.
pub fn disable_supervise_commands() -> Vec<Vec<String>> {
    vec![argv(&[
        "systemctl",
        "--user",
        "disable",
        "--now",
        SUPERVISE,
    ])]
}

/// After the files are deleted.
pub fn reload_command() -> Vec<String> {
    argv(&["systemctl", "--user", "daemon-reload"])
}

fn argv(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

/// Runs systemctl commands in order, stopping at the first failure.
pub fn run_all(cmds: &[Vec<String>]) -> Result<()> {
    for c in cmds {
        let out = crate::system::proc::Invocation::new(c.clone())
            .timeout(std::time::Duration::from_secs(60))
            .run()
            .map_err(|e| anyhow::anyhow!("cannot run `{}`: {e}", c.join(" ")))?;
        if !out.success() {
            bail!(
                "`{}` failed ({}): {}; is a user systemd instance running (`loginctl enable-linger $USER` keeps it up without a login)?",
                c.join(" "),
                out.status_text(),
                format!("{}{}", out.stdout, out.stderr).trim()
            );
        }
    }
    Ok(())
}

/// The unit files as they are now, if present.
pub fn read_units(dir: &Path) -> Vec<(PathBuf, String)> {
    [SERVICE, TIMER]
        .iter()
        .filter_map(|n| {
            let p = dir.join(n);
            std::fs::read_to_string(&p).ok().map(|t| (p, t))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd() -> TickCommand {
        TickCommand {
            argv: vec!["/opt/braids 2/braids".into(), "tick".into()],
            env: vec![
                ("HOME".into(), "/home/u".into()),
                ("PATH".into(), "/home/u/.cargo/bin:/usr/bin:/bin".into()),
            ],
            log: PathBuf::from("/home/u/.openclaw/braids/logs/tick.log"),
        }
    }

    #[test]
    fn service_is_oneshot_keeps_workers_and_logs() {
        let s = service_unit(&cmd(), LogTarget::File);
        for want in [
            "Type=oneshot\n",
            "KillMode=process\n",
            "Environment=\"HOME=/home/u\"\n",
            "Environment=\"PATH=/home/u/.cargo/bin:/usr/bin:/bin\"\n",
            "ExecStart=\"/opt/braids 2/braids\" tick\n",
            "StandardError=append:/home/u/.openclaw/braids/logs/tick.log\n",
        ] {
            assert!(s.contains(want), "{want} in\n{s}");
        }
        let j = service_unit(&cmd(), LogTarget::Journal);
        assert!(j.contains("StandardError=journal\n"));
    }

    #[test]
    fn timer_has_each_calendar_and_is_persistent() {
        let t = timer_unit(
            &["Fri *-*-* 04:30:00".into(), "*-*-01,15 04:30:00".into()],
            "30 4 1,15 * 5",
        );
        assert!(t.contains("OnCalendar=Fri *-*-* 04:30:00\nOnCalendar=*-*-01,15 04:30:00\n"));
        assert!(t.contains("Persistent=true\n"));
        assert!(t.contains("Unit=braids-tick.service\n"));
        assert!(t.contains("WantedBy=timers.target\n"));
    }

    #[test]
    fn escaping() {
        assert_eq!(exec_word("/usr/bin/braids"), "/usr/bin/braids");
        assert_eq!(exec_word("a b"), "\"a b\"");
        assert_eq!(exec_word("100%$x\"\\"), "\"100%%$$x\\\"\\\\\"");
        assert_eq!(exec_word(""), "\"\"");
        assert_eq!(
            environment_line("PATH", "/a b:/c%d"),
            "Environment=\"PATH=/a b:/c%%d\""
        );
    }
}
