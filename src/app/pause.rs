//! `braids pause|resume <project>`: the registry row's Status, changed in place (every other
//! byte of the table kept), and for a claw-loop project the loop itself resumed too, so
//! "let this project go on" is one command.

use anyhow::{anyhow, bail, Result};

use crate::model::{Priority, ProjectStatus};
use crate::system::paths::Paths;

/// What a pause or a resume changed.
#[derive(Debug, serde::Serialize)]
pub struct Changed {
    pub project: String,
    /// The registry row's Status before and after; equal when nothing changed there.
    pub from: Option<ProjectStatus>,
    pub to: ProjectStatus,
    /// A claw loop resumed with it, and why it had been paused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub claw: Option<super::claw::Resumed>,
}

/// Sets the registry row of `slug` to `to`, keeping every other byte of the file.
pub fn set_status(paths: &Paths, slug: &str, to: ProjectStatus) -> Result<Changed> {
    let file = crate::format::layout::registry_file(paths);
    let text = std::fs::read_to_string(&file).map_err(|e| {
        anyhow!(
            "cannot read {}: {e}; run `braids init` first",
            file.display()
        )
    })?;
    let parsed = crate::format::layout::parse_registry(&text, &file, paths).value;
    let Some(row) = parsed.get(slug) else {
        bail!(
            "no project named {slug} in {}; `braids status` lists them",
            file.display()
        );
    };
    let from = row.status;
    if from != Some(to) {
        let updated = crate::format::layout::upsert_project(
            &text,
            &file,
            slug,
            to,
            row.priority.unwrap_or(Priority::Normal),
            &row.raw_path,
        )
        .map_err(|e| anyhow!("{}: {e}", file.display()))?;
        crate::system::atomic::write(&file, updated.as_bytes())?;
    }
    if to == ProjectStatus::Active {
        crate::tick::orchestrator_state::wake(paths, crate::tick::orchestrator_state::WAKE_WAIT);
    }
    Ok(Changed {
        project: slug.to_string(),
        from,
        to,
        claw: None,
    })
}

/// `braids resume`: the row active again and, for a claw project, its loop too (with `note`
/// for the next task's coder).
pub fn resume(paths: &Paths, slug: &str, note: Option<String>) -> Result<Changed> {
    let mut changed = set_status(paths, slug, ProjectStatus::Active)?;
    changed.claw = super::claw::resume_if_claw(paths, slug, note)?;
    Ok(changed)
}
