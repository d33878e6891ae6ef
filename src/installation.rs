//! Opening an installation: config, warnings and the session backend, from resolved paths.

use anyhow::Result;

use crate::config::Config;
use crate::paths::Paths;
use crate::tick::Installation;

pub fn open(paths: &Paths) -> Result<Installation> {
    let loaded = Config::load(&paths.config())?;
    for w in &loaded.warnings {
        tracing::warn!("{w}");
    }
    let backend = crate::session::backend(loaded.config.sessions.backend, paths.sessions_dir());
    Ok(Installation {
        paths: paths.clone(),
        config: loaded.config,
        config_warnings: loaded.warnings,
        backend,
    })
}
