//! Ending a worker session by hand (`braids kill`): the same kill a tick uses for a zombie.

use std::time::Duration;

use anyhow::{bail, Result};

use crate::installation::Installation;
use crate::model::SessionLabel;
use crate::session::KillOutcome;

/// Kills the live session labelled `label` (SIGTERM, the grace period, SIGKILL) and forgets it.
pub fn kill(inst: &Installation, label: &str) -> Result<KillOutcome> {
    let wanted = SessionLabel::parse(label).map_err(|e| {
        anyhow::anyhow!("{e}; labels look like project:<slug>:<bead-id> (see `braids sessions`)")
    })?;
    let sessions = inst.backend.list()?;
    let Some(s) = sessions.iter().find(|s| s.label == wanted && s.running) else {
        bail!("no live session is labelled {label}; `braids sessions` lists them");
    };
    let grace = Duration::from_secs(inst.config.sessions.kill_grace_secs);
    let outcome = inst.backend.kill(s, grace)?;
    inst.backend.forget(s)?;
    Ok(outcome)
}
