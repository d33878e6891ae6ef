//! `braids daemon`: see [`crate::schedule::daemon`].

use anyhow::Result;

use crate::schedule::{self, Schedule};
use crate::system::paths::Paths;

use super::DaemonArgs;

pub fn run(paths: &Paths, a: DaemonArgs) -> Result<i32> {
    let schedule = match (a.cron, a.every) {
        (Some(e), _) => Schedule::Cron(e),
        (None, Some(i)) => Schedule::Every(i),
        (None, None) => Schedule::default_every(),
    };
    schedule::daemon::run(paths, schedule, crate::app::issue_replies::scheduled_run)
}
