//! Opening an installation: config, warnings and the session backend, from resolved paths.

use anyhow::Result;

use crate::config::Config;
use crate::session::SessionBackend;
use crate::system::paths::Paths;

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
    Ok(with(paths, Config::load(&paths.config())?))
}

/// For the commands that only read (`status`, `sessions`, `beads`, `logs`): a config.toml that
/// does not load gives the defaults and a warning for the caller to show, so a person can still
/// see what runs while they fix it.
pub fn open_to_read(paths: &Paths) -> (Installation, Option<String>) {
    match Config::load(&paths.config()) {
        Ok(loaded) => (with(paths, loaded), None),
        Err(e) => (
            with(paths, crate::config::Loaded::default()),
            Some(format!(
                "{e}; until it is fixed this shows what the defaults see"
            )),
        ),
    }
}

fn with(paths: &Paths, loaded: crate::config::Loaded) -> Installation {
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
    Installation {
        paths: paths.clone(),
        config: loaded.config,
        config_warnings: loaded.warnings,
        backend,
    }
}
