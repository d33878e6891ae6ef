//! Listing worker sessions (`braids sessions`) and ending one by hand (`braids kill`, the same
//! kill a tick uses for a zombie).

use std::time::Duration;

use anyhow::{bail, Result};

use crate::installation::Installation;
use crate::model::SessionLabel;
use crate::session::{KillOutcome, Session};

/// A session as `braids sessions` shows it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Listed {
    #[serde(flatten)]
    pub session: Session,
    /// Its project is not in the registry (removed, renamed, or its row unreadable): the
    /// session still counts against `[tick] max_workers` and ends by `orphan_timeout_secs` or
    /// `braids kill` (CONTRACTS 2.2).
    pub orphan: bool,
}

/// Every session the backend knows, each marked orphan or not against the registry as it
/// reads now (an unreadable registry marks none: nothing says they are orphans).
pub fn list(inst: &Installation) -> Result<Vec<Listed>> {
    let sessions = inst.backend.list()?;
    let registry = crate::format::registry::read_registry(&inst.paths).value;
    let known = |slug: &str| registry.entries.iter().any(|e| e.slug == slug);
    let readable = inst.paths.registry().is_file();
    Ok(sessions
        .into_iter()
        .map(|session| Listed {
            orphan: readable && !known(session.label.slug()),
            session,
        })
        .collect())
}

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
