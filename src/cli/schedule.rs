//! `braids schedule install|show|remove`: arguments in, [`crate::app::schedule`] does the work,
//! the result printed as text or JSON.

use anyhow::Result;

use crate::app::schedule::{self, InstallRequest, Installed, Removed, Shown, Which};
use crate::schedule::systemd;
use crate::schedule::Schedule;
use crate::system::paths::Paths;

use super::{LogFormat, Output, ScheduleCommand, ScheduleInstallArgs, ScheduleRemoveArgs, EXIT_OK};

pub fn run(paths: &Paths, c: ScheduleCommand, log_format: LogFormat) -> Result<i32> {
    match c {
        ScheduleCommand::Install(a) => install(paths, a, log_format),
        ScheduleCommand::Show(a) => {
            let which = Which {
                cron: a.cron,
                systemd: a.systemd,
            };
            schedule::show(paths, which)?.print(a.json);
            Ok(EXIT_OK)
        }
        ScheduleCommand::Remove(a) => remove(paths, a),
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
    let request = InstallRequest {
        schedule,
        cron: a.cron,
        dry_run: a.dry_run,
        enable: a.enable,
        journal: a.journal,
        json_logs: log_format == LogFormat::Json,
        supervise: a.supervise,
    };
    schedule::install(paths, &request)?.print(a.json);
    Ok(EXIT_OK)
}

fn remove(paths: &Paths, a: ScheduleRemoveArgs) -> Result<i32> {
    let which = Which {
        cron: a.cron,
        systemd: a.systemd,
    };
    schedule::remove(paths, which, a.dry_run, a.disable)?.print(a.json);
    Ok(EXIT_OK)
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
                if let Some(l) = &self.supervise_line {
                    o.push_str(&format!("  {l}\n"));
                }
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
