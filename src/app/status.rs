//! `braids status` (and the dashboard to come): the STATUS.md picture computed now, through
//! the tick's own observe and render steps, changing nothing.

use anyhow::Result;
use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::config::installation::Installation;
use crate::tick::orchestrator_state::OrchestratorState;
use crate::tick::{observe, status_md};

/// The whole picture: what `status --json` prints, and the markdown it shows as text.
#[derive(Serialize)]
pub struct StatusView {
    pub projects: Vec<observe::ProjectReport>,
    /// The live sessions, with elapsed time, title, step and last output.
    pub sessions: Vec<super::sessions::Listed>,
    pub state: OrchestratorState,
    /// What STATUS.md lists under Problems: the same list, from the same function.
    pub problems: Vec<String>,
    #[serde(skip)]
    pub markdown: String,
}

pub fn status(inst: &Installation, now: DateTime<Utc>) -> Result<StatusView> {
    let state = OrchestratorState::load(&inst.paths.state())
        .unwrap_or_default()
        .unwrap_or_default();
    let mut observed = observe::observe_installation(inst, &state, true, true, now)?;
    crate::tick::preflight::check(&inst.config, &inst.paths, &mut observed);
    observe::see_pools(&mut observed.reports, &inst.config, &inst.paths);
    let sessions = observed.snapshot.sessions.clone();
    let problems = crate::tick::problems::standing(&observed, state.spawning_paused.as_ref());
    let markdown = status_md::render(&status_md::Dashboard {
        now,
        reports: &observed.reports,
        sessions: &sessions,
        summary: &last_run(&state),
        diagnostics: &observed.diagnostics,
        errors: &problems,
    });
    let live = sessions.into_iter().filter(|s| s.running).collect();
    Ok(StatusView {
        projects: observed.reports,
        sessions: super::sessions::detail(inst, live, now),
        state,
        problems,
        markdown,
    })
}

/// When the last run was and what it found, for the summary line.
fn last_run(state: &OrchestratorState) -> String {
    match (state.last_run_at, state.idle_reason) {
        (None, _) => "never".to_string(),
        (Some(t), Some(r)) => format!(
            "{} (idle: {r} since {})",
            t.format("%Y-%m-%d %H:%M:%S UTC"),
            state
                .idle_since
                .map_or("-".into(), |s| s.format("%H:%M:%S").to_string())
        ),
        (Some(t), None) => format!("{} (busy)", t.format("%Y-%m-%d %H:%M:%S UTC")),
    }
}
