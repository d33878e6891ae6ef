//! The four agent CLIs where `.ci/run` installs them, and the config.toml that points each at a
//! stand-in model ([`super::agent_model`]) offline, as a person would set it up: shared by the
//! agent tests and `cargo bench --bench agents`.

use std::path::{Path, PathBuf};

use serde_json::json;

/// One of the four CLIs, installed where `.ci/run` puts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cli {
    Claude,
    Codex,
    Opencode,
    Aider,
}

const NODE_BIN: &str = "/opt/openclaw/bin";

impl Cli {
    pub fn preset(self) -> &'static str {
        match self {
            Cli::Claude => "claude-code",
            Cli::Codex => "codex",
            Cli::Opencode => "opencode",
            Cli::Aider => "aider",
        }
    }

    pub fn program(self) -> PathBuf {
        match self {
            Cli::Claude => Path::new(NODE_BIN).join("claude"),
            Cli::Codex => Path::new(NODE_BIN).join("codex"),
            Cli::Opencode => Path::new(NODE_BIN).join("opencode"),
            Cli::Aider => PathBuf::from("/opt/aider/bin/aider"),
        }
    }

    /// Whether it is installed.
    pub fn present(self) -> bool {
        self.program().is_file()
    }

    /// The CLI, or `None` (with the reason on stderr) where it is not installed.
    pub fn installed(self) -> Option<Cli> {
        let program = self.program();
        if self.present() {
            return Some(self);
        }
        let why = format!(
            "{} is not installed at {}",
            self.preset(),
            program.display()
        );
        assert!(
            std::env::var("BRAIDS_REQUIRE_AGENTS").as_deref() != Ok("1"),
            "BRAIDS_REQUIRE_AGENTS=1 but {why}"
        );
        eprintln!("SKIPPED: {why}");
        None
    }

    pub const ALL: [Cli; 4] = [Cli::Claude, Cli::Codex, Cli::Opencode, Cli::Aider];

    /// config.toml for this CLI against the stand-in model at `url`, offline: the CLI's own
    /// settings as a person would make them (a base URL, a key), in `[executors.<preset>]` or
    /// the CLI's own files under `home`. `path` is the PATH the person has.
    pub fn config(self, home: &Path, url: &str, path: &str) -> String {
        let url = url.to_string();
        let path = format!("{NODE_BIN}:{path}");
        let name = self.preset();
        let mut env: Vec<(&str, String)> = vec![("PATH", path.clone())];
        let mut extra = String::new();
        match self {
            Cli::Claude => env.extend([
                ("ANTHROPIC_BASE_URL", url.clone()),
                ("ANTHROPIC_API_KEY", "sk-test".into()),
                ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".into()),
                ("DISABLE_TELEMETRY", "1".into()),
                ("DISABLE_ERROR_REPORTING", "1".into()),
            ]),
            Cli::Codex => {
                let home = home.join("codex");
                std::fs::create_dir_all(&home).unwrap();
                std::fs::write(
                    home.join("config.toml"),
                    format!(
                        "model = \"gpt-5.5\"\nmodel_provider = \"standin\"\ncheck_for_update_on_startup = false\n\n[analytics]\nenabled = false\n\n[model_providers.standin]\nname = \"standin\"\nbase_url = \"{url}/v1\"\nwire_api = \"responses\"\nenv_key = \"STANDIN_KEY\"\n"
                    ),
                )
                .unwrap();
                env.extend([
                    ("CODEX_HOME", home.display().to_string()),
                    ("STANDIN_KEY", "sk-test".into()),
                ]);
                extra.push_str("[prices.\"gpt-5.5\"]\ninput = 1.25\noutput = 10\n");
            }
            Cli::Opencode => {
                let cfg = json!({
                    "$schema": "https://opencode.ai/config.json",
                    "autoupdate": false,
                    "share": "disabled",
                    "provider": {"standin": {
                        "npm": "@ai-sdk/openai-compatible",
                        "name": "standin",
                        "options": {"baseURL": format!("{url}/v1"), "apiKey": "sk-test"},
                        "models": {"standin": {"name": "standin", "cost": {"input": 3, "output": 15},
                                               "limit": {"context": 200000, "output": 8192}}}
                    }},
                    "model": "standin/standin"
                });
                // Its first start creates its database; two first starts at once race and
                // one fails ("Failed query: CREATE TABLE …"). A person's machine has run it
                // before, so the tests do too.
                let warm = std::process::Command::new(self.program())
                    .args(["session", "list"])
                    .env("HOME", home)
                    .env("PATH", &path)
                    .env("OPENCODE_DISABLE_AUTOUPDATE", "1")
                    .env("OPENCODE_DISABLE_MODELS_FETCH", "1")
                    .env("npm_config_registry", "http://127.0.0.1:9/")
                    .stdin(std::process::Stdio::null())
                    .output();
                assert!(
                    warm.as_ref().is_ok_and(|o| o.status.success()),
                    "opencode session list: {warm:?}"
                );
                env.extend([
                    ("OPENCODE_CONFIG_CONTENT", cfg.to_string()),
                    ("OPENCODE_DISABLE_MODELS_FETCH", "1".into()),
                    ("OPENCODE_DISABLE_LSP_DOWNLOAD", "1".into()),
                    ("OPENCODE_DISABLE_DEFAULT_PLUGINS", "1".into()),
                    // It asks the npm registry at start; there is none here.
                    ("npm_config_registry", "http://127.0.0.1:9/".into()),
                ]);
            }
            Cli::Aider => {
                let meta = home.join("aider-models.json");
                std::fs::write(
                    &meta,
                    json!({"openai/standin": {"max_input_tokens": 200000, "max_output_tokens": 8192,
                        "input_cost_per_token": 0.000003, "output_cost_per_token": 0.000015,
                        "litellm_provider": "openai", "mode": "chat"}})
                    .to_string(),
                )
                .unwrap();
                env.extend([
                    ("OPENAI_API_BASE", format!("{url}/v1")),
                    ("OPENAI_API_KEY", "sk-test".into()),
                    ("LITELLM_LOCAL_MODEL_COST_MAP", "True".into()),
                ]);
                extra.push_str(&format!(
                    "[executors.aider]\nargs = [\"--edit-format\", \"whole\", \"--model-metadata-file\", {:?}]\n",
                    meta.display().to_string()
                ));
            }
        }
        let model_name = match self {
            Cli::Claude => "",
            Cli::Codex => "gpt-5.5",
            Cli::Opencode => "standin/standin",
            Cli::Aider => "openai/standin",
        };
        let env_toml: Vec<String> = env
            .iter()
            .map(|(k, v)| format!("{k} = {}", toml_string(v)))
            .collect();
        let mut table = format!(
            "[worker]\nexecutor = \"{name}\"\n\n[executors.{name}]\nprogram = {:?}\nmodel = {model_name:?}\nenv = {{ {} }}\n",
            self.program().display().to_string(),
            env_toml.join(", ")
        );
        // `args` belongs to the same table.
        if let Some(args) = extra.strip_prefix(&format!("[executors.{name}]\n")) {
            table.push_str(args);
        } else {
            table.push_str(&extra);
        }
        table
    }
}

fn toml_string(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}
