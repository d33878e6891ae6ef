//! Creating the installation (`braids init`, and implicitly `braids new`): idempotent, never
//! overwriting a file.

use std::path::PathBuf;

use anyhow::{Context, Result};
use serde::Serialize;

use crate::system::atomic;
use crate::system::paths::Paths;
use crate::system::templates;

#[derive(Debug, Serialize)]
pub struct InitReport {
    pub created: Vec<PathBuf>,
    pub kept: Vec<PathBuf>,
}

/// Creates what is missing; used by `init` and, implicitly, by `new`.
pub fn ensure(paths: &Paths) -> Result<InitReport> {
    let mut r = InitReport {
        created: vec![],
        kept: vec![],
    };
    for dir in [&paths.braids_dir, &paths.logs_dir(), &paths.braids_home] {
        if dir.is_dir() {
            r.kept.push(dir.clone());
        } else {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            r.created.push(dir.clone());
        }
    }
    // An installation of the EDN layout keeps its registry.edn (CONTRACTS 1.7).
    let registry = crate::format::layout::registry_file(paths);
    for (path, text) in [
        (registry, templates::REGISTRY),
        (paths.config(), templates::CONFIG),
        (paths.status(), templates::STATUS),
    ] {
        if atomic::write_new(&path, text.as_bytes())? {
            r.created.push(path);
        } else {
            r.kept.push(path);
        }
    }
    paths
        .make_private()
        .with_context(|| format!("cannot make {} private", paths.braids_dir.display()))?;
    crate::tick::orchestrator_state::wake(paths, crate::tick::orchestrator_state::WAKE_WAIT);
    Ok(r)
}
