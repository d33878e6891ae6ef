//! `braids schedule install|show|remove`: the crontab line or systemd user timer that runs
//! `braids tick`. The pieces are in [`crate::schedule`]; this file reads and writes.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context, Result};
use serde::Serialize;

use crate::config::Config;
use crate::paths::Paths;
use crate::schedule::systemd::{self, LogTarget};
use crate::schedule::{self, crontab, Schedule, TickCommand};

use super::{
    LogFormat, Output, ScheduleCommand, ScheduleInstallArgs, ScheduleRemoveArgs, ScheduleShowArgs,
    EXIT_OK,
};

pub fn run(paths: &Paths, c: ScheduleCommand, log_format: LogFormat) -> Result<i32> {
    match c {
        ScheduleCommand::Install(a) => install(paths, a, log_format),
        ScheduleCommand::Show(a) => show(paths, a),
        ScheduleCommand::Remove(a) => remove(paths, a),
    }
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

impl Output for Installed {
    fn text(&self) -> String {
        let mut o = String::new();
        match (self.backend, self.dry_run) {
            ("cron", true) => {
                o.push_str("dry run: would install this crontab:\n");
                o.push_str(self.crontab.as_deref().unwrap_or_default());
            }
            ("cron", false) => {
                o.push_str(if self.changed {
                    "crontab: installed\n"
                } else {
                    "crontab: already installed, unchanged\n"
                });
                o.push_str(&format!(
                    "  {}\n",
                    self.crontab_line.as_deref().unwrap_or_default()
                ));
            }
            (_, true) => {
                for f in &self.files {
                    o.push_str(&format!(
                        "dry run: would write {}:\n{}\n",
                        f.path.display(),
                        f.text
                    ));
                }
                o.push_str(&format!("then: {}\n", self.commands.join(" && ")));
            }
            (_, false) => {
                for f in &self.files {
                    o.push_str(&format!("wrote {}\n", f.path.display()));
                }
                if self.commands_ran {
                    o.push_str(&format!("ran: {}\n", self.commands.join(" && ")));
                } else {
                    o.push_str(&format!(
                        "now load and start it:\n  {}\n",
                        self.commands.join(" && ")
                    ));
                }
            }
        }
        if !self.dry_run {
            o.push_str(&format!("braids tick runs {}", self.schedule));
            match &self.log {
                Some(l) => o.push_str(&format!("; log: {}\n", l.display())),
                None => o.push_str("; log: journalctl --user -u braids-tick\n"),
            }
        }
        for w in &self.warnings {
            o.push_str(&format!("warning: {w}\n"));
        }
        o
    }
}

fn described(s: &Schedule) -> String {
    match s {
        Schedule::Every(i) => format!("every {i}"),
        Schedule::Cron(e) => format!("at `{e}`"),
    }
}

fn install(paths: &Paths, a: ScheduleInstallArgs, log_format: LogFormat) -> Result<i32> {
    if (a.enable || a.journal) && !a.systemd {
        anyhow::bail!("--enable and --journal go with --systemd");
    }
    let schedule = match (a.at, a.every) {
        (Some(s), _) => s,
        (None, Some(i)) => Schedule::Every(i),
        (None, None) => Schedule::default_every(),
    };
    let loaded = Config::load(&paths.config())?;
    let exe = schedule::current_exe()?;
    let cmd = TickCommand::new(paths, &loaded.config, &exe, log_format == LogFormat::Json)?;
    let mut warnings = Vec::new();
    if !paths.registry().is_file() {
        warnings.push(format!(
            "{} does not exist yet: run `braids init` (each tick does nothing until then)",
            paths.registry().display()
        ));
    }
    let report = if a.cron {
        install_cron(paths, &schedule, &cmd, a.dry_run, warnings)?
    } else {
        install_systemd(
            paths,
            &schedule,
            &cmd,
            a.dry_run,
            a.enable,
            if a.journal {
                LogTarget::Journal
            } else {
                LogTarget::File
            },
            warnings,
        )?
    };
    report.print(a.json);
    Ok(EXIT_OK)
}

fn braids_dir_str(paths: &Paths) -> Result<String> {
    schedule::path_str(&paths.braids_dir, "the braids directory")
}

fn install_cron(
    paths: &Paths,
    schedule: &Schedule,
    cmd: &TickCommand,
    dry_run: bool,
    mut warnings: Vec<String>,
) -> Result<Installed> {
    let expr = schedule.crontab_expr().map_err(|e| anyhow!(e))?;
    let tag = crontab::tag(&braids_dir_str(paths)?);
    let line = crontab::entry_line(&expr, cmd, &tag)?;
    let current = crontab::read()?;
    let new = crontab::upsert(&current, &line, &tag);
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
        crontab: dry_run.then_some(new),
        on_calendar: vec![],
        files: vec![],
        commands: vec![],
        commands_ran: false,
        log: Some(cmd.log.clone()),
        warnings,
    })
}

#[allow(clippy::too_many_arguments)]
fn install_systemd(
    paths: &Paths,
    schedule: &Schedule,
    cmd: &TickCommand,
    dry_run: bool,
    enable: bool,
    log: LogTarget,
    warnings: Vec<String>,
) -> Result<Installed> {
    let on_calendar = schedule.on_calendar().map_err(|e| anyhow!(e))?;
    let dir = systemd::unit_dir(paths);
    let files = vec![
        UnitFile {
            path: dir.join(systemd::SERVICE),
            text: systemd::service_unit(cmd, log),
        },
        UnitFile {
            path: dir.join(systemd::TIMER),
            text: systemd::timer_unit(&on_calendar, &schedule.to_string()),
        },
    ];
    let changed = files
        .iter()
        .any(|f| std::fs::read_to_string(&f.path).ok().as_deref() != Some(f.text.as_str()));
    let cmds = systemd::enable_commands();
    let mut ran = false;
    if !dry_run {
        if log == LogTarget::File {
            std::fs::create_dir_all(paths.logs_dir())
                .with_context(|| format!("cannot create {}", paths.logs_dir().display()))?;
        }
        for f in &files {
            crate::atomic::write(&f.path, f.text.as_bytes())?;
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
fn both_unless_named(cron: bool, systemd: bool) -> (bool, bool) {
    if cron || systemd {
        (cron, systemd)
    } else {
        (true, true)
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

impl Output for Shown {
    fn text(&self) -> String {
        let mut o = String::new();
        if let Some(c) = &self.cron {
            match (&c.line, &c.error) {
                (_, Some(e)) => o.push_str(&format!("cron: cannot read the crontab: {e}\n")),
                (Some(l), None) => o.push_str(&format!("cron: installed\n  {l}\n")),
                (None, None) => o.push_str("cron: not installed\n"),
            }
            for l in &c.untagged {
                o.push_str(&format!(
                    "  also runs braids tick (not managed by braids): {l}\n"
                ));
            }
        }
        if let Some(s) = &self.systemd {
            if s.files.is_empty() {
                o.push_str(&format!(
                    "systemd: not installed (no units in {})\n",
                    s.dir.display()
                ));
            } else {
                o.push_str("systemd: installed\n");
                for f in &s.files {
                    o.push_str(&format!("  {}\n", f.path.display()));
                    for l in f.text.lines().filter(|l| l.starts_with("OnCalendar=")) {
                        o.push_str(&format!("    {l}\n"));
                    }
                }
                o.push_str(&format!(
                    "  state: systemctl --user list-timers {}\n",
                    systemd::TIMER
                ));
            }
        }
        o
    }
}

fn show(paths: &Paths, a: ScheduleShowArgs) -> Result<i32> {
    let (cron, sd) = both_unless_named(a.cron, a.systemd);
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
            Err(e) if a.cron => return Err(e),
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
    Shown {
        cron: cron_state,
        systemd: systemd_state,
    }
    .print(a.json);
    Ok(EXIT_OK)
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

impl Output for Removed {
    fn text(&self) -> String {
        let mut o = String::new();
        let verb = if self.dry_run {
            "would remove"
        } else {
            "removed"
        };
        if let Some(lines) = &self.cron_lines {
            if lines.is_empty() {
                o.push_str("cron: nothing to remove\n");
            }
            for l in lines {
                o.push_str(&format!("cron: {verb} {l}\n"));
            }
        }
        for f in &self.files {
            o.push_str(&format!("systemd: {verb} {}\n", f.display()));
        }
        if !self.commands.is_empty() {
            if self.commands_ran {
                o.push_str(&format!("ran: {}\n", self.commands.join(" && ")));
            } else if !self.dry_run {
                o.push_str(&format!(
                    "stop the loaded timer with:\n  {}\n",
                    self.commands.join(" && ")
                ));
            }
        }
        for n in &self.notes {
            o.push_str(&format!("{n}\n"));
        }
        o
    }
}

fn remove(paths: &Paths, a: ScheduleRemoveArgs) -> Result<i32> {
    let (cron, sd) = both_unless_named(a.cron, a.systemd);
    let mut out = Removed {
        dry_run: a.dry_run,
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
                let lines: Vec<String> = crontab::find(&text, &tag)
                    .iter()
                    .map(|l| l.to_string())
                    .collect();
                let (new, n) = crontab::remove(&text, &tag);
                if n > 0 && !a.dry_run {
                    crontab::write(&new)?;
                }
                out.cron_lines = Some(lines);
            }
            Err(e) if a.cron => return Err(e),
            Err(e) => out.notes.push(format!("cron: skipped ({e:#})")),
        }
    }
    if sd {
        remove_systemd(paths, a.dry_run, a.disable, &mut out)?;
    }
    out.print(a.json);
    Ok(EXIT_OK)
}

fn remove_systemd(paths: &Paths, dry_run: bool, disable: bool, out: &mut Removed) -> Result<()> {
    let dir = systemd::unit_dir(paths);
    let wants = dir.join("timers.target.wants").join(systemd::TIMER);
    let present: Vec<PathBuf> = [dir.join(systemd::SERVICE), dir.join(systemd::TIMER)]
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
    if disable {
        if let Err(e) = systemd::run_all(&systemd::disable_commands()) {
            out.notes.push(format!("warning: {e:#}"));
        }
    }
    // What `systemctl disable` would remove, in case it was not run.
    if wants.symlink_metadata().is_ok() {
        remove_file(&wants)?;
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
        out.commands = vec![
            format!("systemctl --user stop {}", systemd::TIMER),
            "systemctl --user daemon-reload".into(),
        ];
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
