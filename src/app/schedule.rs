//! `braids schedule install|show|remove` as use cases: the crontab line or systemd user
//! timer that runs `braids tick`. The pieces (crontab editing, unit text, the schedule
//! grammar) are in `schedule/`; this file decides what to write, reads and writes it, and
//! returns what it did for the CLI to print.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use serde::Serialize;

use crate::config::Config;
use crate::schedule::systemd::{self, LogTarget};
use crate::schedule::{self, crontab, Schedule, TickCommand};
use crate::system::paths::Paths;

/// What `schedule install` is asked to do.
#[derive(Debug, Clone)]
pub struct InstallRequest {
    pub schedule: Schedule,
    /// A crontab line; otherwise systemd user units.
    pub cron: bool,
    pub dry_run: bool,
    /// Run systemctl (systemd only).
    pub enable: bool,
    /// Log to the journal instead of a file (systemd only).
    pub journal: bool,
    /// Ticks log JSON lines.
    pub json_logs: bool,
    /// Also run `braids supervise --exec <these>` beside the tick: a systemd service, or a
    /// crontab line with `--once` on the tick's schedule.
    pub supervise: Option<Vec<String>>,
}

/// Which of the two schedulers `show` and `remove` look at; neither named means both.
#[derive(Debug, Clone, Copy)]
pub struct Which {
    pub cron: bool,
    pub systemd: bool,
}

#[derive(Debug, Serialize)]
pub struct UnitFile {
    pub path: PathBuf,
    pub text: String,
}

/// What `install` did or, on a dry run, would do.
#[derive(Debug, Serialize)]
pub struct Installed {
    pub backend: &'static str,
    /// The schedule as given.
    pub schedule: String,
    pub dry_run: bool,
    /// Whether anything was (or would be) different afterwards.
    pub changed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub crontab_line: Option<String>,
    /// The supervisor's crontab line, with `--supervise`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub supervise_line: Option<String>,
    /// The whole new crontab, on a dry run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub crontab: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub on_calendar: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<UnitFile>,
    /// systemctl commands: run (with --enable) or for the user to run.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub commands: Vec<String>,
    pub commands_ran: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log: Option<PathBuf>,
    pub warnings: Vec<String>,
}

/// The schedule in words, as reports show it.
fn described(s: &Schedule) -> String {
    match s {
        Schedule::Every(i) => format!("every {i}"),
        Schedule::Cron(e) => format!("at `{e}`"),
    }
}

/// Installs (or, on a dry run, shows) the schedule.
pub fn install(paths: &Paths, r: &InstallRequest) -> Result<Installed> {
    let loaded = Config::load(&paths.config())?;
    let exe = schedule::current_exe()?;
    let cmd = TickCommand::new(paths, &loaded.config, &exe, r.json_logs)?;
    let mut warnings = Vec::new();
    if !crate::format::layout::registry_file(paths).is_file() {
        warnings.push(format!(
            "{} does not exist yet: run `braids init` (each tick does nothing until then)",
            paths.registry().display()
        ));
    }
    let supervise = match &r.supervise {
        Some(exec) => Some(cmd.supervise(r.cron, exec)?),
        None => None,
    };
    if r.cron {
        install_cron(
            paths,
            &r.schedule,
            &cmd,
            supervise.as_ref(),
            r.dry_run,
            warnings,
        )
    } else {
        let log = if r.journal {
            LogTarget::Journal
        } else {
            LogTarget::File
        };
        let units = Units {
            tick: &cmd,
            supervise: supervise.as_ref(),
            log,
        };
        install_systemd(paths, &r.schedule, &units, r.dry_run, r.enable, warnings)
    }
}

fn braids_dir_str(paths: &Paths) -> Result<String> {
    schedule::path_str(&paths.braids_dir, "the braids directory")
}

fn install_cron(
    paths: &Paths,
    schedule: &Schedule,
    cmd: &TickCommand,
    supervise: Option<&TickCommand>,
    dry_run: bool,
    mut warnings: Vec<String>,
) -> Result<Installed> {
    let expr = schedule.crontab_expr().map_err(|e| anyhow!(e))?;
    let dir = braids_dir_str(paths)?;
    let tag = crontab::tag(&dir);
    let line = crontab::entry_line(&expr, cmd, &tag)?;
    let supervise_line = match supervise {
        Some(s) => Some(crontab::entry_line(
            &expr,
            s,
            &crontab::supervise_tag(&dir),
        )?),
        None => None,
    };
    let current = match crontab::read_if_installed()? {
        Some(text) => text,
        // A dry run shows the line it would write wherever it runs.
        None if dry_run => {
            warnings.push(crontab::NOT_INSTALLED.to_string());
            String::new()
        }
        None => bail!("{}", crontab::NOT_INSTALLED),
    };
    let mut new = crontab::upsert(&current, &line, &tag);
    if let Some(l) = &supervise_line {
        new = crontab::upsert(&new, l, &crontab::supervise_tag(&dir));
    }
    for l in crontab::untagged_ticks(&current) {
        warnings.push(format!(
            "another crontab line also runs braids tick and was left alone (ticks cannot overlap, but remove it if it is a leftover): {l}"
        ));
    }
    let changed = new != current;
    if !dry_run {
        std::fs::create_dir_all(paths.logs_dir())
            .with_context(|| format!("cannot create {}", paths.logs_dir().display()))?;
        if changed {
            crontab::write(&new)?;
        }
        tracing::debug!(schedule = %expr, "crontab line installed");
    }
    Ok(Installed {
        backend: "cron",
        schedule: described(schedule),
        dry_run,
        changed,
        crontab_line: Some(line),
        supervise_line,
        crontab: dry_run.then_some(new),
        on_calendar: vec![],
        files: vec![],
        commands: vec![],
        commands_ran: false,
        log: Some(cmd.log.clone()),
        warnings,
    })
}

/// The systemd units' commands and where they log.
struct Units<'a> {
    tick: &'a TickCommand,
    supervise: Option<&'a TickCommand>,
    log: LogTarget,
}

fn install_systemd(
    paths: &Paths,
    schedule: &Schedule,
    units: &Units<'_>,
    dry_run: bool,
    enable: bool,
    warnings: Vec<String>,
) -> Result<Installed> {
    let (cmd, log) = (units.tick, units.log);
    let on_calendar = schedule.on_calendar().map_err(|e| anyhow!(e))?;
    let dir = systemd::unit_dir(paths);
    let mut files = vec![
        UnitFile {
            path: dir.join(systemd::SERVICE),
            text: systemd::service_unit(cmd, log),
        },
        UnitFile {
            path: dir.join(systemd::TIMER),
            text: systemd::timer_unit(&on_calendar, &schedule.to_string()),
        },
    ];
    let mut cmds = systemd::enable_commands();
    if let Some(s) = units.supervise {
        files.push(UnitFile {
            path: dir.join(systemd::SUPERVISE),
            text: systemd::supervise_unit(s, log),
        });
        cmds.push(
            ["systemctl", "--user", "enable", "--now", systemd::SUPERVISE]
                .map(String::from)
                .to_vec(),
        );
    }
    let changed = files
        .iter()
        .any(|f| std::fs::read_to_string(&f.path).ok().as_deref() != Some(f.text.as_str()));
    let mut ran = false;
    if !dry_run {
        if log == LogTarget::File {
            std::fs::create_dir_all(paths.logs_dir())
                .with_context(|| format!("cannot create {}", paths.logs_dir().display()))?;
        }
        for f in &files {
            crate::system::atomic::write(&f.path, f.text.as_bytes())?;
        }
        if enable {
            systemd::run_all(&cmds)?;
            ran = true;
        }
        tracing::debug!(on_calendar = %on_calendar.join(" | "), "systemd units written");
    }
    Ok(Installed {
        backend: "systemd",
        schedule: described(schedule),
        dry_run,
        changed,
        crontab_line: None,
        supervise_line: None,
        crontab: None,
        on_calendar,
        files,
        commands: cmds.iter().map(|c| c.join(" ")).collect(),
        commands_ran: ran,
        log: (log == LogTarget::File).then(|| cmd.log.clone()),
        warnings,
    })
}

/// Which backends a show/remove covers: the named ones, or both.
impl Which {
    fn both_unless_named(self) -> (bool, bool) {
        if self.cron || self.systemd {
            (self.cron, self.systemd)
        } else {
            (true, true)
        }
    }
}

#[derive(Debug, Serialize)]
pub struct CronState {
    /// This installation's line, if installed.
    pub line: Option<String>,
    /// Other lines that run braids tick.
    pub untagged: Vec<String>,
    /// Why the crontab could not be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct SystemdState {
    pub dir: PathBuf,
    pub files: Vec<UnitFile>,
}

#[derive(Debug, Serialize)]
pub struct Shown {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cron: Option<CronState>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub systemd: Option<SystemdState>,
}

/// What is installed now.
pub fn show(paths: &Paths, which: Which) -> Result<Shown> {
    let (cron, sd) = which.both_unless_named();
    let cron_state = if cron {
        let tag = crontab::tag(&braids_dir_str(paths)?);
        Some(match crontab::read() {
            Ok(text) => CronState {
                line: crontab::find(&text, &tag).first().map(|l| l.to_string()),
                untagged: crontab::untagged_ticks(&text)
                    .iter()
                    .map(|l| l.to_string())
                    .collect(),
                error: None,
            },
            Err(e) if which.cron => return Err(e),
            Err(e) => CronState {
                line: None,
                untagged: vec![],
                error: Some(format!("{e:#}")),
            },
        })
    } else {
        None
    };
    let systemd_state = sd.then(|| {
        let dir = systemd::unit_dir(paths);
        SystemdState {
            files: systemd::read_units(&dir)
                .into_iter()
                .map(|(path, text)| UnitFile { path, text })
                .collect(),
            dir,
        }
    });
    Ok(Shown {
        cron: cron_state,
        systemd: systemd_state,
    })
}

#[derive(Debug, Serialize)]
pub struct Removed {
    pub dry_run: bool,
    /// Crontab lines removed (or that would be).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cron_lines: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<PathBuf>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub commands: Vec<String>,
    pub commands_ran: bool,
    pub notes: Vec<String>,
}

/// Removes (or, on a dry run, lists) what is installed.
pub fn remove(paths: &Paths, which: Which, dry_run: bool, disable: bool) -> Result<Removed> {
    let (cron, sd) = which.both_unless_named();
    let mut out = Removed {
        dry_run,
        cron_lines: None,
        files: vec![],
        commands: vec![],
        commands_ran: false,
        notes: vec![],
    };
    if cron {
        match crontab::read() {
            Ok(text) => {
                let tag = crontab::tag(&braids_dir_str(paths)?);
                let mut lines: Vec<String> = crontab::find(&text, &tag)
                    .iter()
                    .map(|l| l.to_string())
                    .collect();
                let stag = crontab::supervise_tag(&braids_dir_str(paths)?);
                lines.extend(crontab::find(&text, &stag).iter().map(|l| l.to_string()));
                let (new, n) = crontab::remove(&text, &tag);
                let (new, m) = crontab::remove(&new, &stag);
                let n = n + m;
                if n > 0 && !dry_run {
                    crontab::write(&new)?;
                }
                out.cron_lines = Some(lines);
            }
            Err(e) if which.cron => return Err(e),
            Err(e) => out.notes.push(format!("cron: skipped ({e:#})")),
        }
    }
    if sd {
        remove_systemd(paths, dry_run, disable, &mut out)?;
    }
    Ok(out)
}

fn remove_systemd(paths: &Paths, dry_run: bool, disable: bool, out: &mut Removed) -> Result<()> {
    let dir = systemd::unit_dir(paths);
    let wants = dir.join("timers.target.wants").join(systemd::TIMER);
    let supervise_wants = dir.join("default.target.wants").join(systemd::SUPERVISE);
    let present: Vec<PathBuf> = [
        dir.join(systemd::SERVICE),
        dir.join(systemd::TIMER),
        dir.join(systemd::SUPERVISE),
    ]
    .into_iter()
    .filter(|p| p.exists())
    .collect();
    if present.is_empty() && wants.symlink_metadata().is_err() {
        return Ok(());
    }
    if dry_run {
        out.files = present;
        return Ok(());
    }
    let supervised = dir.join(systemd::SUPERVISE).exists();
    if disable {
        if let Err(e) = systemd::run_all(&systemd::disable_commands()) {
            out.notes.push(format!("warning: {e:#}"));
        }
        if supervised {
            if let Err(e) = systemd::run_all(&systemd::disable_supervise_commands()) {
                out.notes.push(format!("warning: {e:#}"));
            }
        }
    }
    // What `systemctl disable` would remove, in case it was not run.
    for link in [&wants, &supervise_wants] {
        if link.symlink_metadata().is_ok() {
            remove_file(link)?;
        }
    }
    for p in &present {
        remove_file(p)?;
    }
    out.files = present;
    if disable {
        let reload = systemd::reload_command();
        out.commands = systemd::disable_commands()
            .iter()
            .chain(std::iter::once(&reload))
            .map(|c| c.join(" "))
            .collect();
        match systemd::run_all(&[reload]) {
            Ok(()) => out.commands_ran = true,
            Err(e) => out.notes.push(format!("warning: {e:#}")),
        }
    } else {
        out.commands = vec![format!("systemctl --user stop {}", systemd::TIMER)];
        if supervised {
            out.commands
                .push(format!("systemctl --user stop {}", systemd::SUPERVISE));
        }
        out.commands.push("systemctl --user daemon-reload".into());
    }
    Ok(())
}

fn remove_file(p: &Path) -> Result<()> {
    match std::fs::remove_file(p) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).with_context(|| format!("cannot remove {}", p.display())),
    }
}
