//! From a project to its forge: which forge and repository its pull requests go to (its
//! `Forge:` field, else its base branch's remote URL matched to a forge's host), and a client
//! for it with its token. Every way this fails is one sentence naming what to fix, for the
//! worker's block reason, the tick's preflight and `braids check` alike.

use std::path::Path;

use super::github::GitHub;
use super::gitlab::GitLab;
use super::issues::IssueForge;
use super::Forge;
use crate::config::forges::{self, ForgeKind};
use crate::config::Config;
use crate::review::{remote, ReviewSettings};

/// Where a project's pull requests go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub forge: forges::Forge,
    /// `owner/name`, or `group/sub/name` on GitLab.
    pub repository: String,
}

/// The forge and repository of `project`, whose work lands on `base`.
pub fn target(
    config: &Config,
    settings: &ReviewSettings,
    project: &Path,
    base: &str,
) -> Result<Target, String> {
    if let Some(f) = &settings.forge {
        return Ok(Target {
            forge: forges::resolve(&config.forges, &f.name)?,
            repository: f.repository.clone(),
        });
    }
    let Some((name, _)) = crate::git::upstream_of(project, base) else {
        return Err(format!(
            "the branch {base} of {} has no upstream, so no forge can be found for its pull requests: set one (git push -u), or add `Forge: <forge> <owner/name>` to PROJECT.md",
            project.display()
        ));
    };
    let url = crate::git::remote_url(project, &name).unwrap_or_default();
    let Some(r) = remote::parse(&url) else {
        return Err(format!(
            "the remote {name} of {} (`{url}`) names no forge host: add `Forge: <forge> <owner/name>` to PROJECT.md",
            project.display()
        ));
    };
    let Some(forge) = forges::for_host(&config.forges, &r.host) else {
        return Err(format!(
            "no forge serves {}, the host of remote {name}: add `Forge: <forge> <owner/name>` to PROJECT.md, or host = \"{}\" under a [forges.<name>] entry of config.toml",
            r.host, r.host
        ));
    };
    Ok(Target {
        forge: forges::resolve(&config.forges, &forge)?,
        repository: r.repository,
    })
}

/// A client for `target`, with the token its forge names (read from `home`'s files or the
/// process environment).
pub fn connect(target: &Target, home: &Path) -> Result<Box<dyn Forge>, String> {
    let token = target.forge.token(home, |v| std::env::var(v).ok())?;
    match target.forge.kind {
        ForgeKind::Github => GitHub::new(&target.forge.api, &target.repository, &token)
            .map(|c| Box::new(c) as Box<dyn Forge>)
            .map_err(|e| format!("cannot reach forge `{}`: {e}", target.forge.name)),
        ForgeKind::Gitlab => GitLab::new(&target.forge.api, &target.repository, &token)
            .map(|c| Box::new(c) as Box<dyn Forge>)
            .map_err(|e| format!("cannot reach forge `{}`: {e}", target.forge.name)),
    }
}

/// As [`connect`], for the issues of `target`'s repository.
pub fn connect_issues(
    target: &Target,
    home: &Path,
) -> Result<Box<dyn IssueForge + Send + Sync>, String> {
    let token = target.forge.token(home, |v| std::env::var(v).ok())?;
    let failed = |e: super::ForgeError| format!("cannot reach forge `{}`: {e}", target.forge.name);
    match target.forge.kind {
        ForgeKind::Github => GitHub::new(&target.forge.api, &target.repository, &token)
            .map(|c| Box::new(c) as Box<dyn IssueForge + Send + Sync>)
            .map_err(failed),
        ForgeKind::Gitlab => GitLab::new(&target.forge.api, &target.repository, &token)
            .map(|c| Box::new(c) as Box<dyn IssueForge + Send + Sync>)
            .map_err(failed),
    }
}
