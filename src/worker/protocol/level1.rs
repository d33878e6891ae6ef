//! Level 1 of the protocol (seed 002, "Progressive Adoption"): a person dispatches a story's
//! next step by hand, in the foreground, as the tick's worker would run it.

use anyhow::{bail, Result};

use crate::app::beads;
use crate::installation::Installation;

/// Level 1: runs the story's next step now, in the foreground, as the tick's worker would
/// (claim, workspace, step, report, state), holding the tick lock so no tick races it; the
/// story is then handed back to the tick.
pub fn dispatch_one(
    inst: &Installation,
    project: &str,
    bead: &str,
) -> Result<crate::worker::WorkerRun> {
    let _held = beads::hold_ticks(&inst.paths)?;
    let found = crate::app::story::find(inst, project, bead, true)?;
    let p = &found.project;
    let sessions = inst.backend.list()?;
    if let Some(s) = beads::live_session(&sessions, &p.entry.slug, &found.bead.id) {
        bail!(
            "{} is running now in {}; wait for its step to end",
            found.bead.id,
            s.label
        );
    }
    let iterations = crate::format::iteration::read_iterations(&p.entry.path).value;
    let crate::tick::decide::Eligibility::Eligible { iteration } =
        crate::tick::decide::eligibility_of(&p.entry, &p.config, &iterations)
    else {
        bail!(
            "{} has no active iteration to work in; `braids iteration activate` one first",
            p.entry.slug
        );
    };
    let msg = crate::model::SpawnMessage::new(
        p.entry.path.clone(),
        found.bead.id.clone(),
        iteration,
        p.config.channel.clone().unwrap_or_default(),
    )
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    let notifier = crate::notify::from_config(&inst.config.notify);
    let executor =
        crate::worker::executor_for(&inst.config, &p.config, &p.entry.slug, &found.bead.id);
    let worker = crate::worker::Worker {
        paths: &inst.paths,
        config: &inst.config,
        tracker: p.tracker.as_ref(),
        notifier: &notifier,
        executor: executor.as_ref(),
    };
    worker.run_steps(&msg, Some(1))
}
