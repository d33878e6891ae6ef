//! `braids resume <project>`: a paused claw loop goes on (the seed's "PAUSED ──[intervention]──▶
//! TASK_SELECTION"), with an optional note that the next task's context packet shows once.

use anyhow::{bail, Result};

use crate::claw::loopstate::{self, LoopState};
use crate::system::paths::Paths;

/// What resuming found and left.
#[derive(Debug, serde::Serialize)]
pub struct Resumed {
    pub project: String,
    /// Why it was paused; `None` when it was not.
    pub was_paused: Option<String>,
    pub note: Option<String>,
}

/// [`resume`] for a claw project; `None` (and nothing done) for any other.
pub fn resume_if_claw(paths: &Paths, slug: &str, note: Option<String>) -> Result<Option<Resumed>> {
    let registry = crate::format::registry::read_registry(paths).value;
    let Some(entry) = registry.get(slug) else {
        return Ok(None);
    };
    let project_md = crate::format::layout::project_file(&entry.path);
    let config = std::fs::read(&project_md)
        .map(|b| {
            crate::format::layout::parse_project(&crate::format::decode(&b), &project_md).value
        })
        .unwrap_or_default();
    if !crate::claw::is_claw(&config, &entry.path) {
        return Ok(None);
    }
    resume(paths, slug, note).map(Some)
}

pub fn resume(paths: &Paths, slug: &str, note: Option<String>) -> Result<Resumed> {
    let registry = crate::format::registry::read_registry(paths).value;
    let Some(entry) = registry.get(slug) else {
        bail!(
            "no project named {slug} in {}; `braids status` lists them",
            paths.registry().display()
        );
    };
    let root = &entry.path;
    let project_md = crate::format::layout::project_file(root);
    let config = std::fs::read(&project_md)
        .map(|b| {
            crate::format::layout::parse_project(&crate::format::decode(&b), &project_md).value
        })
        .unwrap_or_default();
    if !crate::claw::is_claw(&config, root) {
        bail!("{slug} does not run the claw loop (no `Pipeline: claw` in PROJECT.md and no .claw/WORKPLAN.md); there is nothing to resume");
    }
    let before: LoopState = loopstate::load(root);
    let after = before.resumed(note.clone());
    loopstate::store(root, &after)?;
    crate::tick::orchestrator_state::wake(paths, crate::tick::orchestrator_state::WAKE_WAIT);
    Ok(Resumed {
        project: slug.to_string(),
        was_paused: before.paused.map(|p| p.reason),
        note: after.note,
    })
}
