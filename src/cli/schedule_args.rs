//! The arguments of `braids schedule` and `braids daemon`: when the tick runs.

use clap::{ArgGroup, Args, Subcommand};

use crate::schedule::{CronExpr, Interval, Schedule};

fn interval_arg(s: &str) -> Result<Interval, String> {
    Interval::parse(s)
}

fn schedule_arg(s: &str) -> Result<Schedule, String> {
    Schedule::parse(s)
}

fn cron_arg(s: &str) -> Result<Box<CronExpr>, String> {
    CronExpr::parse(s).map(Box::new).map_err(|e| e.to_string())
}

#[derive(Debug, Subcommand)]
pub enum ScheduleCommand {
    /// Add or replace this installation's crontab line (--cron), or write the systemd user
    /// units (--systemd). Other crontab lines are never touched.
    Install(ScheduleInstallArgs),
    /// Show what is installed (both kinds unless one is named).
    Show(ScheduleShowArgs),
    /// Remove this installation's crontab line and/or systemd units (both unless one is named).
    Remove(ScheduleRemoveArgs),
}

#[derive(Debug, Args)]
#[command(group(ArgGroup::new("backend").required(true).args(["cron", "systemd"])))]
pub struct ScheduleInstallArgs {
    /// A line in the user's crontab.
    #[arg(long)]
    pub cron: bool,
    /// A systemd user timer in ~/.config/systemd/user/.
    #[arg(long)]
    pub systemd: bool,
    /// How often: 5m, 30s (systemd only), 2h, 1d. The default is 5m.
    #[arg(long, value_name = "INTERVAL", value_parser = interval_arg, conflicts_with = "at")]
    pub every: Option<Interval>,
    /// When, as a crontab expression: "*/5 * * * *", "0 9-17 * * mon-fri", @hourly.
    #[arg(long, value_name = "CRONTAB_EXPR", value_parser = schedule_arg)]
    pub at: Option<Schedule>,
    /// Print what would be written and write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// With --systemd: also run `systemctl --user daemon-reload` and `enable --now` the timer.
    #[arg(long)]
    pub enable: bool,
    /// With --systemd: log to the journal instead of ~/.openclaw/braids/logs/tick.log.
    #[arg(long)]
    pub journal: bool,
    #[arg(long)]
    pub json: bool,
    /// Also run `braids supervise --exec <ARGV…>` beside the tick (a systemd service, or a
    /// crontab line with --once on the same schedule). Put it last: it takes the rest of the
    /// line as the command.
    #[arg(long, num_args = 1.., allow_hyphen_values = true, value_name = "ARGV")]
    pub supervise: Option<Vec<String>>,
}

#[derive(Debug, Args)]
pub struct ScheduleShowArgs {
    #[arg(long)]
    pub cron: bool,
    #[arg(long)]
    pub systemd: bool,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ScheduleRemoveArgs {
    #[arg(long)]
    pub cron: bool,
    #[arg(long)]
    pub systemd: bool,
    /// Print what would change and change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// With systemd units: also run `systemctl --user disable --now` first and
    /// `daemon-reload` after.
    #[arg(long)]
    pub disable: bool,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct DaemonArgs {
    /// Run now, then every INTERVAL (5m, 30s, 2h). The default is 5m.
    #[arg(long, value_name = "INTERVAL", value_parser = interval_arg, conflicts_with = "cron")]
    pub every: Option<Interval>,
    /// Run at the times of a crontab expression ("*/5 * * * *", @hourly), local time.
    #[arg(long, value_name = "CRONTAB_EXPR", value_parser = cron_arg)]
    pub cron: Option<Box<CronExpr>>,
}
