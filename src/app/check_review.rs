//! `braids check` for a project landing through pull requests: its landing fields, its forge
//! and token (what the tick's preflight checks), then the forge itself asked once, so a token
//! it refuses (401) or a repository it does not show (404) is found before a bead's work is.

use std::path::Path;

use crate::config::Config;
use crate::forge::connect;
use crate::format::project::ProjectConfig;
use crate::review::{Landing, ReviewSettings};
use crate::system::diag::Diagnostic;

const CLAIMS_NOTHING: &str = "until it is fixed, ticks claim nothing for this project";

/// The findings for `project` at `root`.
pub fn check(
    root: &Path,
    project_md: &Path,
    project: &ProjectConfig,
    config: &Config,
    home: &Path,
) -> Vec<Diagnostic> {
    let (settings, problems) = ReviewSettings::of(project);
    let mut out: Vec<Diagnostic> = problems
        .iter()
        .map(|p| {
            Diagnostic::error(
                project_md,
                Some(p.line),
                "review",
                p.sentence.clone(),
                p.fix,
            )
        })
        .collect();
    if settings.landing != Landing::PullRequest || !out.is_empty() {
        return out;
    }
    let line = project
        .field("forge")
        .or(project.field("landing"))
        .map(|f| f.line);
    let base = match crate::workspace::base_branch(root) {
        Ok(b) => b,
        Err(e) => {
            out.push(Diagnostic::error(
                root,
                None,
                "review",
                format!("{e:#}"),
                CLAIMS_NOTHING,
            ));
            return out;
        }
    };
    let forge = connect::target(config, &settings, root, &base)
        .and_then(|t| Ok((connect::connect(&t, home)?, t)));
    let (forge, target) = match forge {
        Ok(f) => f,
        Err(why) => {
            out.push(Diagnostic::error(
                project_md,
                line,
                "review",
                why,
                CLAIMS_NOTHING,
            ));
            return out;
        }
    };
    if let Err(e) = forge.probe() {
        let fix = match e {
            crate::forge::ForgeError::Unauthorized(_) => format!(
                "give forge `{}` a valid token (its token_env or token_file in config.toml)",
                target.forge.name
            ),
            crate::forge::ForgeError::NotFound(_) => format!(
                "check `Forge:` in PROJECT.md names the repository, and that the token of forge `{}` may see it",
                target.forge.name
            ),
            _ => "check the forge's api in config.toml, or try again once it answers".into(),
        };
        out.push(Diagnostic::error(
            project_md,
            line,
            "review",
            format!(
                "{} answers for {}: {e}",
                target.forge.name, target.repository
            ),
            fix,
        ));
    }
    out
}
