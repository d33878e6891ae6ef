//! `braids tick` and `braids status`.

use anyhow::Result;
use chrono::Utc;

use crate::config::installation;
use crate::system::paths::Paths;
use crate::tick::{TickOptions, TickReport};

use super::{Output, TickArgs, EXIT_OK};
use crate::app::status::StatusView;

impl Output for TickReport {
    fn text(&self) -> String {
        let mut o = format!("{}\n", self.summary());
        for s in &self.spawns {
            o.push_str(&format!(
                "  spawn  {}  (iteration {}, timeout {}s)\n",
                s.label, s.iteration, s.worker_timeout
            ));
        }
        for z in &self.zombies {
            o.push_str(&format!(
                "  kill   {}  ({})\n",
                z.label,
                serde_json::to_value(z.reason)
                    .ok()
                    .and_then(|v| v.as_str().map(String::from))
                    .unwrap_or_default()
            ));
        }
        for r in &self.released {
            o.push_str(&format!(
                "  release {}:{} (its worker is gone)\n",
                r.project, r.bead
            ));
        }
        for p in &self.pushed {
            o.push_str(&format!("  push   {p} (an earlier push had failed)\n"));
        }
        for e in &self.errors {
            o.push_str(&format!("  error  {e}\n"));
        }
        for w in &self.warnings {
            o.push_str(&format!("  warn   {w}\n"));
        }
        o
    }
}

pub fn run(paths: &Paths, args: TickArgs) -> Result<i32> {
    let inst = installation::open(paths)?;
    let report = crate::app::issue_replies::tick(
        &inst,
        TickOptions {
            dry_run: args.dry_run,
            force: args.force,
            allow_mass_kill: args.allow_mass_kill,
        },
        Utc::now(),
    )?;
    report.log();
    report.print(args.json);
    Ok(EXIT_OK)
}

impl Output for StatusView {
    fn text(&self) -> String {
        self.markdown.clone()
    }
}

/// `braids status`: the STATUS.md picture, computed now, changing nothing.
pub fn status(paths: &Paths, json: bool) -> Result<i32> {
    let inst = super::open_to_read(paths);
    crate::app::status::status(&inst, Utc::now())?.print(json);
    Ok(EXIT_OK)
}
