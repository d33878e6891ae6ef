//! `braids check` for a project whose beads are a forge's issues (`Tracker: github` or
//! `gitlab`): its forge and token, then the forge asked once whether the token may read the
//! issues, and whether any issue carries the project's labels.

use std::path::Path;

use crate::config::Config;
use crate::forge::tracker::settings;
use crate::forge::ForgeError;
use crate::format::project::ProjectConfig;
use crate::system::diag::Diagnostic;
use crate::system::paths::Paths;
use crate::tracker::TrackerKind;

const CLAIMS_NOTHING: &str =
    "do what the sentence says, then run `braids check` again (until then, ticks claim nothing for this project)";

/// The findings for `project` at `root`.
pub fn check(
    root: &Path,
    project_md: &Path,
    project: &ProjectConfig,
    config: &Config,
    paths: &Paths,
) -> Vec<Diagnostic> {
    let kind = crate::tick::observe::tracker_kind(project, config.tracker.kind, root);
    if !matches!(kind, TrackerKind::Github | TrackerKind::Gitlab) {
        return Vec::new();
    }
    let line = project
        .field("forge")
        .or(project.field("tracker"))
        .map(|f| f.line);
    let error =
        |why: String, fix: String| vec![Diagnostic::error(project_md, line, "issues", why, fix)];
    if let Some(f) = project.field("labels").filter(|f| {
        f.value
            .split(',')
            .all(|l| l.trim().trim_matches('`').trim().is_empty())
    }) {
        if !f.value.trim().is_empty() {
            return vec![Diagnostic::error(
                project_md,
                Some(f.line),
                "issues",
                "`Labels:` names no label, so braids takes the issues labelled `braids`",
                "name the labels an issue must carry, comma-separated (`Labels: braids, backend`), or delete the line",
            )];
        }
    }
    let target = match settings::target(config, kind, project, root) {
        Ok(t) => t,
        Err(why) => return error(why, CLAIMS_NOTHING.into()),
    };
    let forge = match crate::forge::connect::connect_issues(&target, &paths.home) {
        Ok(f) => f,
        Err(why) => return error(why, CLAIMS_NOTHING.into()),
    };
    let name = &target.forge.name;
    if let Err(e) = forge.probe_issues() {
        let fix = match &e {
            ForgeError::Unauthorized(_) => format!(
                "give forge `{name}` a valid token (its token_env or token_file in config.toml's [forges.{name}])"
            ),
            ForgeError::NotFound(_) => format!(
                "check `Forge:` in PROJECT.md names the repository, and that the token of forge `{name}` may see it"
            ),
            ForgeError::Refused(_) => format!(
                "give the token of forge `{name}` what the sentence names, then run `braids check` again"
            ),
            _ => format!(
                "check the `api` of forge `{name}` ({}) in config.toml's [forges.{name}], or run `braids check` again once it answers",
                target.forge.api
            ),
        };
        let what = match &e {
            ForgeError::Unavailable(_) | ForgeError::RateLimited { .. } => "cannot be asked about",
            _ => "refuses to show",
        };
        return error(
            format!(
                "forge `{name}` {what} the issues of {}: {e}",
                target.repository
            ),
            fix,
        );
    }
    let labels = settings::labels(project).wanted;
    match forge.any_labelled(&labels) {
        Ok(true) => Vec::new(),
        Ok(false) => vec![Diagnostic::warning(
            project_md,
            project.field("labels").map(|f| f.line).or(line),
            "issues",
            format!(
                "no issue of {} carries the label{} {}, so the project has no beads",
                target.repository,
                if labels.len() == 1 { "" } else { "s" },
                labels.join(", ")
            ),
            "label the issues braids should work on, or name their labels in `Labels:`",
        )],
        Err(e) => error(
            format!(
                "{name} answers for the issues of {}: {e}",
                target.repository
            ),
            "try again once it answers".into(),
        ),
    }
}
