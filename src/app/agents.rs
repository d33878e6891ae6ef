//! `braids executors` and `braids check` of the presets: each agent CLI preset as this installation would run it — the settings
//! it reads, the command it builds, the version braids was tested with. docs/agents.md's
//! section is this output, so the recipes people copy are the ones braids runs.

use std::path::Path;

use serde::Serialize;

use crate::agent::{Launch, Preset};
use crate::config::Config;
use crate::system::diag::Diagnostic;

/// One preset, as configured here.
#[derive(Debug, Clone, Serialize)]
pub struct Recipe {
    pub preset: Preset,
    pub tested_version: &'static str,
    /// The command line a run starts, with `PROMPT_FILE` and `WORKSPACE` for the bead's own.
    pub command: String,
    /// What to put in config.toml to use it.
    pub config: String,
}

/// Every preset, with this installation's settings.
pub fn recipes(config: &Config) -> Vec<Recipe> {
    Preset::ALL
        .into_iter()
        .map(|preset| {
            let settings = config.preset_settings(preset);
            let launch = Launch {
                prompt_file: Path::new("PROMPT_FILE"),
                workspace: Path::new("WORKSPACE"),
                model: None,
                resume: None,
                timeout_secs: 3600,
                title: "BEAD",
                provider: None,
                contained: false,
            };
            Recipe {
                preset,
                tested_version: preset.tested_version(),
                command: preset.command(&settings, &launch).display(),
                config: config_snippet(preset),
            }
        })
        .collect()
}

/// The config.toml lines that choose `preset`, with its settings at their defaults.
fn config_snippet(preset: Preset) -> String {
    let env = match preset {
        Preset::ClaudeCode => "env = {}                    # e.g. { ANTHROPIC_BASE_URL = \"https://…\" }; your login or ANTHROPIC_API_KEY is used as is",
        Preset::Codex => "env = {}                    # Codex reads its provider from ~/.codex/config.toml (CODEX_HOME)",
        Preset::Opencode => "env = {}                    # opencode reads its providers from its own config (OPENCODE_CONFIG_CONTENT)",
        Preset::Aider => "env = {}                    # e.g. { OPENAI_API_BASE = \"https://…\" }",
        Preset::OpenClaw => "env = {}                    # the gateway comes from the openclaw CLI's own configuration",
    };
    format!(
        "[worker]\nexecutor = \"{name}\"\n\n[executors.{name}]\nprogram = \"\"                # empty: `{program}` on PATH\nmodel = \"\"                  # empty: the CLI's default; a project's `Model:` wins\nargs = []                   # extra arguments, after braids' own\n{env}\npermission = \"workspace\"    # workspace | ask | bypass\nretries = {retries}                 # the CLI's own retries of a failing provider\n",
        name = preset.name(),
        program = preset.default_program(),
        retries = crate::agent::DEFAULT_RETRIES,
    )
}

/// The recipes as docs/agents.md shows them (a test keeps that page equal to this).
pub fn markdown(recipes: &[Recipe]) -> String {
    let mut out = String::new();
    for r in recipes {
        out.push_str(&format!(
            "#### `{}` (tested with {})\n\n```toml\n{}```\n\nRuns:\n\n```sh\n{}\n```\n\n",
            r.preset, r.tested_version, r.config, r.command
        ));
    }
    out
}

/// `braids check` of each preset in use: its program runs (`--version`, within 30 s), and its version is one
/// braids was tested with (a newer or older one is a warning). A program that is missing is
/// the preflight's finding already.
pub(super) fn check(
    file: &Path,
    config: &Config,
    presets: &std::collections::BTreeSet<crate::agent::Preset>,
) -> Vec<Diagnostic> {
    use crate::agent::VersionCheck;
    let text = crate::system::atomic::read(file)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    let mut out = Vec::new();
    for &preset in presets {
        let settings = config.preset_settings(preset);
        let table = format!("executors.{preset}");
        let line = super::check_config::key_line(&text, &table, "program");
        let program = if settings.program.trim().is_empty() {
            preset.default_program().to_string()
        } else {
            settings.program.clone()
        };
        if crate::config::missing_program(&program).is_some() {
            continue;
        }
        let mut run = crate::system::proc::Invocation::new([program.as_str(), "--version"])
            .timeout(std::time::Duration::from_secs(30));
        for (k, v) in &settings.env {
            run = run.env(k, v);
        }
        let printed = match run.run() {
            Ok(o) if o.success() => format!("{}{}", o.stdout, o.stderr),
            Ok(o) => {
                out.push(Diagnostic::error(
                    file,
                    line,
                    "agents",
                    format!(
                        "`{program} --version` ended with {} ({}): the {preset} preset cannot run it",
                        o.status_text(),
                        crate::system::templates::clip(&format!("{}{}", o.stderr, o.stdout), 120)
                    ),
                    format!("reinstall {preset} (tested: {}) or fix program under [{table}]", preset.tested_version()),
                ));
                continue;
            }
            Err(e) => {
                out.push(Diagnostic::error(
                    file,
                    line,
                    "agents",
                    format!("`{program} --version` could not run: {e}"),
                    format!("reinstall {preset} or fix program under [{table}]"),
                ));
                continue;
            }
        };
        let tested = preset.tested_version();
        match crate::agent::version_check(preset, &printed) {
            VersionCheck::Tested(_) => {}
            VersionCheck::Newer(v) => out.push(Diagnostic::warning(
                file,
                line,
                "agents",
                format!("{preset} {v} is newer than the {tested} braids was tested with"),
                "it probably works; if its runs fail oddly, compare `braids logs --raw` with docs/agents.md",
            )),
            VersionCheck::Older(v) => out.push(Diagnostic::warning(
                file,
                line,
                "agents",
                format!("{preset} {v} is older than the {tested} braids was tested with"),
                format!("upgrade it to {tested} or later"),
            )),
            VersionCheck::Unreadable(said) => out.push(Diagnostic::error(
                file,
                line,
                "agents",
                format!("`{program} --version` printed no version ({said}): it does not look like {preset}"),
                format!("point program under [{table}] at {preset}"),
            )),
        }
    }
    out
}
