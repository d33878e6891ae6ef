//! The process a preset starts: an argv (never a shell string), the environment on top of the
//! person's own, and where the prompt goes.

use std::path::Path;

use super::{Permission, Preset, PresetSettings};

/// What one run of a preset needs to know.
#[derive(Debug, Clone, Copy)]
pub struct Launch<'a> {
    pub prompt_file: &'a Path,
    pub workspace: &'a Path,
    /// The project's `Model:`, over the settings' model.
    pub model: Option<&'a str>,
    /// The CLI session to continue.
    pub resume: Option<&'a str>,
    /// Seconds the run may take (passed to CLIs that take it).
    pub timeout_secs: u64,
    /// A title for the CLI's session (the bead).
    pub title: &'a str,
    /// The provider the CLI's own configuration names, where bounding its retries needs the
    /// name (Codex's `model_provider`).
    pub provider: Option<&'a str>,
    /// braids' own sandbox holds the run ([`crate::system::sandbox`]): a CLI whose sandbox cannot
    /// nest inside another (Codex's) leaves the containment to it.
    pub contained: bool,
}

/// Where the prompt goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Prompt {
    /// The prompt file is the CLI's standard input.
    Stdin,
    /// The prompt is in the argv (or named there); standard input is closed so the CLI never
    /// waits on it.
    Argv,
}

/// A ready-to-start agent process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentCommand {
    pub program: String,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub prompt: Prompt,
}

impl AgentCommand {
    /// The command line as a person would type it, for logs and `braids executors`.
    pub fn display(&self) -> String {
        let mut words: Vec<String> = self
            .env
            .iter()
            .map(|(k, v)| format!("{k}={}", quote(v)))
            .collect();
        words.push(quote(&self.program));
        words.extend(self.args.iter().map(|a| quote(a)));
        let line = words.join(" ");
        match self.prompt {
            Prompt::Stdin => format!("{line} < PROMPT_FILE"),
            Prompt::Argv => format!("{line} < /dev/null"),
        }
    }
}

fn quote(s: &str) -> String {
    shlex::try_quote(s).map_or_else(|_| format!("{s:?}"), |q| q.into_owned())
}

/// The model a run asks for: the project's, else the settings', else none.
fn model<'a>(settings: &'a PresetSettings, launch: &Launch<'a>) -> Option<&'a str> {
    launch
        .model
        .or(Some(settings.model.as_str()))
        .map(str::trim)
        .filter(|m| !m.is_empty())
}

impl Preset {
    /// The process for one run. The preset's own flags come first, then `args`; `env` is laid
    /// over the preset's variables.
    #[must_use]
    pub fn command(self, settings: &PresetSettings, launch: &Launch<'_>) -> AgentCommand {
        let program = if settings.program.trim().is_empty() {
            self.default_program().to_string()
        } else {
            settings.program.clone()
        };
        let model = model(settings, launch);
        let retries = settings.retries().to_string();
        let prompt_file = launch.prompt_file.to_string_lossy().into_owned();
        let mut tail: Vec<String> = Vec::new();
        let (mut args, mut env, prompt): (Vec<String>, Vec<(&str, String)>, Prompt) = match self {
            Preset::ClaudeCode => {
                let mut a = vec!["-p", "--output-format", "stream-json", "--verbose"];
                match settings.permission {
                    // Edits are accepted inside the working directory only; commands run there.
                    Permission::Workspace => {
                        a.extend(["--permission-mode", "acceptEdits", "--allowedTools", "Bash"])
                    }
                    Permission::Ask => a.extend(["--permission-mode", "default"]),
                    Permission::Bypass => a.push("--dangerously-skip-permissions"),
                }
                let mut a: Vec<String> = a.into_iter().map(String::from).collect();
                if let Some(m) = model {
                    a.extend(["--model".into(), m.into()]);
                }
                if let Some(id) = launch.resume {
                    a.extend(["--resume".into(), id.into()]);
                }
                let env = vec![
                    ("CLAUDE_CODE_MAX_RETRIES", retries),
                    ("DISABLE_AUTOUPDATER", "1".into()),
                ];
                (a, env, Prompt::Stdin)
            }
            Preset::Codex => {
                let mut a: Vec<String> = vec!["exec".into(), "--json".into()];
                match settings.permission {
                    Permission::Workspace if launch.contained => {
                        a.extend(["-s".into(), "danger-full-access".into()])
                    }
                    Permission::Workspace => a.extend(["-s".into(), "workspace-write".into()]),
                    Permission::Ask => a.extend(["-s".into(), "read-only".into()]),
                    Permission::Bypass => {
                        a.push("--dangerously-bypass-approvals-and-sandbox".into())
                    }
                }
                if let Some(m) = model {
                    a.extend(["-m".into(), m.into()]);
                }
                if let Some(p) = launch.provider {
                    a.extend(codex_retries(p, &retries));
                }
                // Its options go before `resume`, which takes only the thread and the prompt.
                if let Some(id) = launch.resume {
                    tail.extend(["resume".into(), id.into()]);
                }
                tail.push("-".into());
                (a, Vec::new(), Prompt::Stdin)
            }
            Preset::Opencode => {
                // The prompt on stdin: as an argument it would be capped at 128 KiB.
                let mut a: Vec<String> = vec!["run".into(), "--format".into(), "json".into()];
                if let Some(m) = model {
                    a.extend(["-m".into(), m.into()]);
                }
                match launch.resume {
                    Some(id) => a.extend(["--session".into(), id.into()]),
                    // A title of its own spares the model call that would make one.
                    None => a.extend(["--title".into(), launch.title.into()]),
                }
                let env = vec![
                    ("OPENCODE_DISABLE_AUTOUPDATE", "1".into()),
                    ("OPENCODE_DISABLE_SHARE", "1".into()),
                ];
                (a, env, Prompt::Stdin)
            }
            Preset::Aider => {
                let mut a: Vec<String> = [
                    "--message-file",
                    &prompt_file,
                    "--yes-always",
                    "--no-auto-commits",
                    "--no-dirty-commits",
                    // It would add `.aider*` to .gitignore, a change of the project's.
                    "--no-gitignore",
                    "--no-check-update",
                    "--analytics-disable",
                    "--no-pretty",
                    "--no-stream",
                    "--no-show-model-warnings",
                    "--no-detect-urls",
                ]
                .into_iter()
                .map(String::from)
                .collect();
                if let Some(m) = model {
                    a.extend(["--model".into(), m.into()]);
                }
                (a, Vec::new(), Prompt::Argv)
            }
            Preset::OpenClaw => {
                let mut a: Vec<String> = vec![
                    "agent".into(),
                    "exec".into(),
                    "--message-file".into(),
                    prompt_file.clone(),
                    "--cwd".into(),
                    launch.workspace.to_string_lossy().into_owned(),
                    "--timeout".into(),
                    launch.timeout_secs.to_string(),
                    "--json".into(),
                ];
                if let Some(m) = model {
                    a.extend(["--model".into(), m.into()]);
                }
                // Otherwise it re-spawns itself into a process group of its own, which stopping
                // the worker would miss.
                (a, vec![("OPENCLAW_NO_RESPAWN", "1".into())], Prompt::Argv)
            }
        };
        args.extend(settings.args.iter().cloned());
        args.extend(tail);
        for (k, v) in &settings.env {
            env.retain(|(key, _)| key != k);
            env.push((k.as_str(), v.clone()));
        }
        AgentCommand {
            program,
            args,
            env: env.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
            prompt,
        }
    }
}

/// Codex's own retries, bounded for the provider its configuration names (it has no setting
/// that covers every provider).
fn codex_retries(provider: &str, retries: &str) -> Vec<String> {
    vec![
        "-c".into(),
        format!("model_providers.{provider}.request_max_retries={retries}"),
        "-c".into(),
        format!("model_providers.{provider}.stream_max_retries={retries}"),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn launch<'a>(p: &'a Path, w: &'a Path) -> Launch<'a> {
        Launch {
            prompt_file: p,
            workspace: w,
            model: None,
            resume: None,
            timeout_secs: 600,
            title: "app-1",
            provider: None,
            contained: false,
        }
    }

    #[test]
    fn every_preset_builds_an_argv_with_its_machine_output() {
        let (p, w) = (PathBuf::from("/w/prompt.md"), PathBuf::from("/ws"));
        let s = PresetSettings::default();
        let claude = Preset::ClaudeCode.command(&s, &launch(&p, &w));
        assert_eq!(claude.program, "claude");
        assert!(claude
            .args
            .windows(2)
            .any(|x| x == ["--output-format", "stream-json"]));
        assert!(claude.args.contains(&"--verbose".to_string()));
        assert_eq!(claude.prompt, Prompt::Stdin);
        assert!(claude
            .env
            .contains(&("CLAUDE_CODE_MAX_RETRIES".into(), "2".into())));
        let codex = Preset::Codex.command(&s, &launch(&p, &w));
        assert_eq!(codex.args[..2], ["exec", "--json"]);
        assert!(codex
            .args
            .windows(2)
            .any(|x| x == ["-s", "workspace-write"]));
        assert_eq!(codex.args.last().map(String::as_str), Some("-"));
        assert!(
            !codex.args.iter().any(|a| a.contains("max_retries")),
            "no provider named"
        );
        let oc = Preset::Opencode.command(&s, &launch(&p, &w));
        assert!(oc.args.windows(2).any(|x| x == ["--format", "json"]));
        assert!(oc.args.windows(2).any(|x| x == ["--title", "app-1"]));
        assert_eq!(oc.prompt, Prompt::Stdin);
        let aider = Preset::Aider.command(&s, &launch(&p, &w));
        assert_eq!(aider.args[..2], ["--message-file", "/w/prompt.md"]);
        assert!(aider.args.contains(&"--no-auto-commits".to_string()));
        let claw = Preset::OpenClaw.command(&s, &launch(&p, &w));
        assert!(claw.args.windows(2).any(|x| x == ["--cwd", "/ws"]));
        assert!(claw
            .env
            .contains(&("OPENCLAW_NO_RESPAWN".into(), "1".into())));
    }

    #[test]
    fn settings_and_the_project_shape_the_command() {
        let (p, w) = (PathBuf::from("/w/prompt.md"), PathBuf::from("/ws"));
        let s = PresetSettings {
            program: "/opt/bin/claude".into(),
            model: "sonnet".into(),
            args: vec!["--max-turns".into(), "40".into()],
            env: [
                (
                    "ANTHROPIC_BASE_URL".to_string(),
                    "http://127.0.0.1:9".to_string(),
                ),
                ("CLAUDE_CODE_MAX_RETRIES".to_string(), "0".to_string()),
            ]
            .into(),
            permission: Permission::Bypass,
            retries: None,
        };
        let mut l = launch(&p, &w);
        let c = Preset::ClaudeCode.command(&s, &l);
        assert_eq!(c.program, "/opt/bin/claude");
        assert!(c.args.windows(2).any(|x| x == ["--model", "sonnet"]));
        assert!(c
            .args
            .contains(&"--dangerously-skip-permissions".to_string()));
        assert_eq!(
            c.args[c.args.len() - 2..],
            ["--max-turns", "40"],
            "args come last"
        );
        assert_eq!(
            c.env
                .iter()
                .filter(|(k, _)| k == "CLAUDE_CODE_MAX_RETRIES")
                .count(),
            1
        );
        assert!(
            c.env
                .contains(&("CLAUDE_CODE_MAX_RETRIES".into(), "0".into())),
            "env wins"
        );
        l.model = Some("opus");
        l.resume = Some("abc-123");
        let c = Preset::ClaudeCode.command(&s, &l);
        assert!(
            c.args.windows(2).any(|x| x == ["--model", "opus"]),
            "the project's Model: wins"
        );
        assert!(c.args.windows(2).any(|x| x == ["--resume", "abc-123"]));
        l.provider = Some("standin");
        let codex = PresetSettings {
            args: vec!["--skip-git-repo-check".into()],
            ..PresetSettings::default()
        };
        let c = Preset::Codex.command(&codex, &l);
        assert!(
            c.display().starts_with("codex exec --json -s workspace-write -m opus -c 'model_providers.standin.request_max_retries=2'"),
            "{}",
            c.display()
        );
        assert_eq!(
            c.args[c.args.len() - 4..],
            ["--skip-git-repo-check", "resume", "abc-123", "-"],
            "options before resume"
        );
        let c = Preset::Opencode.command(&PresetSettings::default(), &l);
        assert!(c.args.windows(2).any(|x| x == ["--session", "abc-123"]));
    }
}
