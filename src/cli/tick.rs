//! `braids tick` and `braids status`.

use anyhow::Result;
use chrono::Utc;
use serde::Serialize;

use crate::installation;
use crate::paths::Paths;
use crate::state::OrchestratorState;
use crate::tick::{self, observe, status_md, TickOptions, TickReport};

use super::{Output, TickArgs, EXIT_OK};

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
        o
    }
}

pub fn run(paths: &Paths, args: TickArgs) -> Result<i32> {
    let inst = installation::open(paths)?;
    let report = tick::run(
        &inst,
        TickOptions {
            dry_run: args.dry_run,
            force: args.force,
        },
        Utc::now(),
    )?;
    report.log();
    report.print(args.json);
    Ok(EXIT_OK)
}

/// `braids status`: the STATUS.md picture, computed now, changing nothing.
#[derive(Serialize)]
struct StatusView {
    projects: Vec<observe::ProjectReport>,
    sessions: Vec<crate::session::Session>,
    state: OrchestratorState,
    #[serde(skip)]
    markdown: String,
}

impl Output for StatusView {
    fn text(&self) -> String {
        self.markdown.clone()
    }
}

pub fn status(paths: &Paths, json: bool) -> Result<i32> {
    let inst = installation::open(paths)?;
    let now = Utc::now();
    let state = OrchestratorState::load(&paths.state())
        .unwrap_or_default()
        .unwrap_or_default();
    let survey = inst.backend.survey()?;
    let sessions = survey.sessions;
    let ctx = observe::Context {
        paths,
        config: &inst.config,
        config_warnings: &inst.config_warnings,
        read_only: true,
    };
    let observed = observe::observe(&ctx, sessions.clone(), state.claims.clone());
    let summary = match (state.last_run_at, state.idle_reason) {
        (None, _) => "never".to_string(),
        (Some(t), Some(r)) => format!(
            "{} (idle: {r} since {})",
            t.format("%Y-%m-%d %H:%M:%S UTC"),
            state
                .idle_since
                .map_or("-".into(), |s| s.format("%H:%M:%S").to_string())
        ),
        (Some(t), None) => format!("{} (busy)", t.format("%Y-%m-%d %H:%M:%S UTC")),
    };
    let errors: Vec<String> = survey
        .problems
        .iter()
        .map(|p| {
            format!(
                "{}: session record {} cannot be read ({}); a tick counts it as running",
                p.label.as_deref().unwrap_or("?"),
                p.location,
                p.detail
            )
        })
        .collect();
    let markdown = status_md::render(&status_md::Dashboard {
        now,
        reports: &observed.reports,
        sessions: &sessions,
        summary: &summary,
        diagnostics: &observed.diagnostics,
        errors: &errors,
    });
    StatusView {
        projects: observed.reports,
        sessions,
        state,
        markdown,
    }
    .print(json);
    Ok(EXIT_OK)
}
