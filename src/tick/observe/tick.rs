//! A tick's observe: the installation as `observe_installation` sees it, and everything else
//! decide looks at: the preflight's findings (2.11) and the retry inputs (the provider
//! breaker, beads waiting out a backoff, workers' activity, claims a protocol story counts).

use chrono::{DateTime, Utc};

use super::{observe_installation, Observed};
use crate::tick::attempts::RetryEdge;
use crate::tick::orchestrator_state::OrchestratorState;
use crate::tick::{Installation, TickOptions};

/// Everything a tick's decide needs. A dry run writes nothing here either: no cache, no
/// breaker record.
pub fn tick(
    inst: &Installation,
    state: &OrchestratorState,
    opts: TickOptions,
    now: DateTime<Utc>,
) -> anyhow::Result<Observed> {
    let mut observed = observe_installation(inst, state, opts.dry_run, !opts.dry_run, now)?;
    observed.snapshot.allow_mass_kill = opts.allow_mass_kill;
    crate::tick::preflight::check(&inst.config, &inst.paths, &mut observed);
    let retry = RetryEdge::new(&inst.paths, &inst.config);
    let (change, paused) = retry.observe(&inst.paths, &mut observed, state, now, opts.dry_run);
    if let Some(t) = &change {
        tracing::warn!("{}", t.message(now));
    }
    observed.breaker_change = change;
    observed.paused = paused;
    Ok(observed)
}
