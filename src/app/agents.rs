//! `braids executors`: each agent CLI preset as this installation would run it — the settings
//! it reads, the command it builds, the version braids was tested with. The README's Agents
//! section is this output, so the recipes people copy are the ones braids runs.

use std::path::Path;

use serde::Serialize;

use crate::agent::{Launch, Preset};
use crate::config::Config;

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

/// The recipes as the README shows them (a test keeps the README equal to this).
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
