//! Opening an installation: config, warnings and the session backend, from resolved paths.

use anyhow::Result;

use crate::config::Config;
use crate::paths::Paths;
use crate::session::{process::ProcessBackend, tmux::TmuxBackend, BackendKind, SessionBackend};
use crate::tick::Installation;

pub fn open(paths: &Paths) -> Result<Installation> {
    let loaded = Config::load(&paths.config())?;
    for w in &loaded.warnings {
        tracing::warn!("{w}");
    }
    let backend: Box<dyn SessionBackend> = match loaded.config.sessions.backend {
        BackendKind::Process => Box::new(ProcessBackend::new(paths.sessions_dir())),
        BackendKind::Tmux => Box::new(TmuxBackend::new(paths.sessions_dir())),
    };
    Ok(Installation {
        paths: paths.clone(),
        config: loaded.config,
        config_warnings: loaded.warnings,
        backend,
    })
}
