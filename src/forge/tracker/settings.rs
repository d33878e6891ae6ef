//! What PROJECT.md says of a project's issues (`Labels:`, `Progress label:`, `Blocked label:`),
//! and the forge client they are read through.

use crate::forge::connect;
use crate::forge::issues::IssueForge;
use crate::format::project::ProjectConfig;
use crate::review::ReviewSettings;
use crate::tracker::{TrackerKind, TrackerOptions};

use super::Labels;

/// The forge and labels of one project's issues.
pub struct Source {
    pub forge: Box<dyn IssueForge + Send + Sync>,
    pub forge_name: String,
    pub repository: String,
    pub labels: Labels,
    /// PROJECT.md's `Owner:`, who braids mentions when it asks.
    pub owner: Option<String>,
    /// braids' installation: where the forge's breaker is kept.
    pub paths: crate::system::paths::Paths,
    /// Where its [`super::Mirror`] is kept: braids' own folder, never a project's.
    pub file: std::path::PathBuf,
}

/// The labels of `project`: `Labels: braids, backend` (all must be on an issue), and the ones
/// braids sets.
pub fn labels(project: &ProjectConfig) -> Labels {
    let value = |key: &str, default: &str| {
        project
            .field(key)
            .map(|f| f.value.trim().trim_matches('`').to_string())
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| default.to_string())
    };
    let wanted: Vec<String> = value("labels", "braids")
        .split(',')
        .map(|l| l.trim().trim_matches('`').to_string())
        .filter(|l| !l.is_empty())
        .collect();
    // No label would make every issue of the repository a bead: `braids check` says so.
    let wanted = match wanted.is_empty() {
        true => vec!["braids".to_string()],
        false => wanted,
    };
    Labels {
        wanted,
        progress: value("progress label", "braids:in-progress"),
        blocked: value("blocked label", "braids:blocked"),
    }
}

/// The forge target of a project whose tracker is `kind`: its `Forge:` (or its remote's host),
/// which must be of that kind. Every failure is one sentence naming the fix.
pub fn target(
    config: &crate::config::Config,
    kind: TrackerKind,
    project: &ProjectConfig,
    root: &std::path::Path,
) -> Result<connect::Target, String> {
    let settings = ReviewSettings::of(project).0;
    let base = match settings.forge {
        Some(_) => String::new(),
        None => crate::workspace::base_branch_of(root, project).map_err(|e| format!("{e:#}"))?,
    };
    let target = connect::target(config, &settings, root, &base)?;
    let wanted = match kind {
        TrackerKind::Github => crate::config::forges::ForgeKind::Github,
        _ => crate::config::forges::ForgeKind::Gitlab,
    };
    if target.forge.kind != wanted {
        return Err(format!(
            "PROJECT.md says `Tracker: {}` but its forge `{}` is a {} forge: make them agree (`Tracker: {}`, or a `Forge:` of kind {})",
            kind.as_str(),
            target.forge.name,
            target.forge.kind.as_str(),
            target.forge.kind.as_str(),
            kind.as_str()
        ));
    }
    Ok(target)
}

/// The client and labels for `opts.project`'s issues.
pub fn source(kind: TrackerKind, opts: &TrackerOptions) -> Result<Source, String> {
    let Some(paths) = &opts.installation else {
        return Err(format!(
            "the {} tracker of {} needs braids' installation (its forges and tokens), and this command has none",
            kind.as_str(),
            opts.project.display()
        ));
    };
    let config = crate::config::Config::load(&paths.config())
        .map_err(|e| e.to_string())?
        .config;
    let project = crate::format::project::read_project(&opts.project).value;
    let target = target(&config, kind, &project, &opts.project)?;
    let forge = connect::connect_issues(&target, &paths.home)?;
    let labels = labels(&project);
    // Two projects may take different labels of one repository: each keeps its own mirror.
    let mut wanted = labels.wanted.clone();
    wanted.sort_by_key(|l| l.to_lowercase());
    let name: String = format!(
        "{}-{}-{}",
        target.forge.name,
        target.repository,
        wanted.join("+")
    )
    .chars()
    .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
    .collect();
    let file = paths
        .braids_dir
        .join("work/issues")
        .join(format!("{name}.json"));
    Ok(Source {
        forge,
        forge_name: target.forge.name.clone(),
        repository: target.repository.clone(),
        labels,
        owner: project
            .field("owner")
            .map(|f| f.value.trim().trim_start_matches('@').to_string())
            .filter(|o| !o.is_empty()),
        paths: paths.clone(),
        file,
    })
}
