//! The problems every view lists: STATUS.md, `braids status` (text and JSON), the dashboard and
//! `/api/v1/state`. One function of what was observed and of the state, so a person sees the
//! same list wherever they look; a full run adds what only it met while acting (a failed
//! spawn, a push that failed).

use super::observe::Observed;

/// What is wrong now, in the order the views list it: spawning paused by the provider
/// breaker, the problems of config.toml that stop every project using it (each once), worker
/// session records that cannot be read, then each project's tracker error and file problems.
#[must_use]
pub fn standing(observed: &Observed, spawning_paused: Option<&String>) -> Vec<String> {
    let mut out: Vec<String> = spawning_paused.cloned().into_iter().collect();
    out.extend(observed.installation.iter().cloned());
    out.extend(observed.snapshot.unreadable.iter().map(|p| p.sentence()));
    for r in &observed.reports {
        out.extend(r.error.as_ref().map(|e| format!("{}: {e}", r.slug)));
        out.extend(r.problems.iter().cloned());
    }
    out
}
