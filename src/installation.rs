//! Opening an installation: config, warnings and the session backend, from resolved paths.

use anyhow::Result;

use crate::config::Config;
use crate::paths::Paths;
use crate::session::SessionBackend;

/// An installation as a tick sees it: where things are, the settings, and the session backend
/// (a [`crate::session::Composite`]: spawns go to the configured backend, the sessions of every
/// backend are seen and stopped).
pub struct Installation {
    pub paths: Paths,
    pub config: Config,
    pub config_warnings: Vec<String>,
    pub backend: Box<dyn SessionBackend>,
}

pub fn open(paths: &Paths) -> Result<Installation> {
    let loaded = Config::load(&paths.config())?;
    for w in &loaded.warnings {
        tracing::warn!("{w}");
    }
    // Every backend, so workers started before a change of `[sessions] backend` stay seen.
    let backend = Box::new(crate::session::installed(
        loaded.config.sessions.backend,
        paths.sessions_dir(),
        &loaded.config.slurm,
        &loaded.config.openclaw,
    ));
    Ok(Installation {
        paths: paths.clone(),
        config: loaded.config,
        config_warnings: loaded.warnings,
        backend,
    })
}
