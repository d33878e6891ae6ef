//! `~/.openclaw/braids/config.toml`: installation-wide settings.
//!
//! Every key has a default, so a missing file is a valid configuration. Unknown keys produce a
//! warning naming the key (a typo should be visible, not fatal); a file that is not TOML is the
//! one case that stops a command, with the line and the fix, because guessing settings for
//! people's machines is worse than asking.

use std::path::{Path, PathBuf};

use serde::Deserialize;

mod ask;
pub mod forges;
pub mod installation;
pub mod sandbox;
mod workspace;

pub use ask::AskConfig;
pub use workspace::{escapes, Escaping, KeepSetting, WorkspaceConfig};

use crate::session::BackendKind;
use crate::tracker::TrackerKind;

#[derive(Debug, Clone, PartialEq, Deserialize, Default)]
#[serde(default)]
pub struct Config {
    pub tick: TickConfig,
    pub tracker: TrackerConfig,
    pub sessions: SessionsConfig,
    pub worker: WorkerConfig,
    pub notify: NotifyConfig,
    pub checkin: CheckinConfig,
    pub breaker: BreakerConfig,
    pub retention: RetentionConfig,
    /// `[workspace]`: where workspaces live, the pool, what each workspace gets.
    pub workspace: WorkspaceConfig,
    /// `[serve]`: the dashboard server's limits.
    pub serve: ServeConfig,
    /// `[slurm]`: how workers of `Backend: slurm` projects are submitted.
    pub slurm: crate::session::slurm::SlurmSettings,
    /// `[openclaw]`: the gateway and defaults for workers of `Backend: openclaw` projects.
    pub openclaw: crate::session::openclaw::OpenClawSettings,
    /// `[executors.<preset>]`: how each agent CLI preset is run.
    pub executors: std::collections::BTreeMap<crate::agent::Preset, crate::agent::PresetSettings>,
    /// `[prices]`: dollars per million tokens by model, for CLIs that report no cost.
    pub prices: crate::agent::Prices,
    /// `[ask]`: the cheap agent of `braids tools ask`.
    pub ask: AskConfig,
    /// `[forges.<name>]`: where pull requests are opened, beside the built-in `github` and
    /// `gitlab`.
    pub forges: std::collections::BTreeMap<String, forges::ForgeEntry>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default)]
pub struct TickConfig {
    /// Healthy workers across all projects; 0 means no global cap.
    pub max_workers: u32,
    /// How many projects are observed at once.
    pub concurrency: usize,
}

impl Default for TickConfig {
    fn default() -> Self {
        TickConfig {
            max_workers: 0,
            concurrency: 8,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default)]
pub struct TrackerConfig {
    pub kind: TrackerKind,
    /// Per tracker call.
    pub timeout_secs: u64,
    /// The assignee braids claims beads as.
    pub actor: String,
}

impl Default for TrackerConfig {
    fn default() -> Self {
        TrackerConfig {
            kind: TrackerKind::Auto,
            timeout_secs: 30,
            actor: "braids".into(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default)]
pub struct SessionsConfig {
    pub backend: BackendKind,
    /// Between SIGTERM and SIGKILL when killing a worker.
    pub kill_grace_secs: u64,
    /// How long a claimed bead may stay in_progress with no live worker before it is released.
    pub claim_grace_secs: u64,
}

impl Default for SessionsConfig {
    fn default() -> Self {
        SessionsConfig {
            backend: BackendKind::Process,
            kill_grace_secs: 10,
            claim_grace_secs: 120,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default)]
pub struct WorkerConfig {
    /// The argv a worker session runs; it reads the spawn message on stdin. Empty means this
    /// braids executable with `worker`.
    pub command: Vec<String>,
    /// The agent the worker runs: a preset's name (`"claude-code"`), or an argv template with
    /// `{prompt_file}`, `{project}`, `{bead}`, `{timeout}` placeholders.
    pub executor: crate::agent::Choice,
    /// Extra attempts after a failed one: a bead is blocked after `1 + retries` consecutive
    /// failures (the per-bead breaker, [`crate::retry`]). One by default, CONTRACTS 3.10's
    /// "retry once".
    pub retries: u32,
    /// The wait after a bead's first failure, doubled after each further one (`"1m"`, `"30s"`).
    #[serde(deserialize_with = "span")]
    pub retry_backoff: std::time::Duration,
    /// The longest wait between two attempts of a bead.
    #[serde(deserialize_with = "span")]
    pub retry_backoff_max: std::time::Duration,
    /// The agent's sandbox (`auto`, `off`, `landlock`, `bwrap`): see [`crate::system::sandbox`].
    pub sandbox: crate::system::sandbox::Kind,
    /// More paths a sandboxed agent may write (`~/…` or absolute).
    pub sandbox_write: Vec<String>,
    /// More paths a sandboxed agent may read (`~/…` or absolute).
    pub sandbox_read: Vec<String>,
    /// More TCP ports a sandboxed agent may connect to (`8080`, or `"host:8080"` for the
    /// reader's sake: Landlock confines ports, not hosts).
    pub sandbox_connect: Vec<sandbox::SandboxPort>,
    /// The bubblewrap program for `sandbox = "bwrap"`: found on PATH unless a path is given.
    pub bwrap: String,
}

impl Default for WorkerConfig {
    fn default() -> Self {
        WorkerConfig {
            command: Vec::new(),
            executor: crate::agent::Choice::default(),
            retries: 1,
            retry_backoff: std::time::Duration::from_secs(60),
            retry_backoff_max: std::time::Duration::from_secs(3600),
            sandbox: crate::system::sandbox::Kind::Auto,
            sandbox_write: Vec::new(),
            sandbox_read: Vec::new(),
            sandbox_connect: Vec::new(),
            bwrap: "bwrap".into(),
        }
    }
}

impl WorkerConfig {
    /// The per-bead retry rules.
    pub fn retry_policy(&self) -> crate::retry::Policy {
        crate::retry::Policy {
            retries: self.retries,
            base: chrono_span(self.retry_backoff),
            cap: chrono_span(self.retry_backoff_max),
        }
    }
}

/// `[breaker]`: the provider breaker ([`crate::retry::breaker`]).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default)]
pub struct BreakerConfig {
    /// Consecutive failed spawns sharing a signature that pause spawning; 0 turns it off.
    pub window: usize,
    /// The first wait before a probe spawn, doubled after each failed probe.
    #[serde(deserialize_with = "span")]
    pub probe: std::time::Duration,
    #[serde(deserialize_with = "span")]
    pub probe_max: std::time::Duration,
    /// Fragments of an agent's output (any case) meaning the provider is failing.
    pub patterns: Vec<String>,
}

impl Default for BreakerConfig {
    fn default() -> Self {
        let p = crate::retry::BreakerPolicy::default();
        BreakerConfig {
            window: p.window,
            probe: std::time::Duration::from_secs(60),
            probe_max: std::time::Duration::from_secs(1800),
            patterns: p.patterns,
        }
    }
}

impl BreakerConfig {
    pub fn policy(&self) -> crate::retry::BreakerPolicy {
        crate::retry::BreakerPolicy {
            window: self.window.min(crate::retry::RECENT),
            probe_base: chrono_span(self.probe),
            probe_cap: chrono_span(self.probe_max),
            patterns: self.patterns.iter().map(|p| p.to_lowercase()).collect(),
        }
    }
}

/// `[retention]`: how much of the worker logs and prompts the tick keeps.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default)]
pub struct RetentionConfig {
    /// Older files go.
    #[serde(deserialize_with = "span")]
    pub max_age: std::time::Duration,
    /// Beyond this total the oldest go first.
    pub max_total_mb: u64,
    /// Events a supervisor marked `.processed` are removed this long after they were written;
    /// unprocessed events are never removed.
    #[serde(deserialize_with = "span")]
    pub processed_events: std::time::Duration,
}

impl Default for RetentionConfig {
    fn default() -> Self {
        RetentionConfig {
            max_age: std::time::Duration::from_secs(30 * 24 * 3600),
            max_total_mb: 500,
            processed_events: std::time::Duration::from_secs(14 * 24 * 3600),
        }
    }
}

/// `[serve]`: what one client may hold of `braids serve`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default)]
pub struct ServeConfig {
    /// A request's headers must arrive within this, counted from when the server starts
    /// reading them: also the longest wait for the next request on a kept-alive connection.
    #[serde(deserialize_with = "span")]
    pub header_timeout: std::time::Duration,
    /// A connection with no byte either way for this long is closed, such as a request whose
    /// body stalls (event streams send a keep-alive comment every 15 s, so they stay).
    #[serde(deserialize_with = "span")]
    pub idle_timeout: std::time::Duration,
    /// Connections open at once; one more gets a 503 and is closed.
    pub max_connections: usize,
    /// Event-stream clients at once; one more gets a 503.
    pub max_event_streams: usize,
}

impl Default for ServeConfig {
    fn default() -> Self {
        ServeConfig {
            header_timeout: std::time::Duration::from_secs(10),
            idle_timeout: std::time::Duration::from_secs(120),
            max_connections: 256,
            max_event_streams: 64,
        }
    }
}

fn chrono_span(d: std::time::Duration) -> chrono::Duration {
    chrono::Duration::from_std(d).unwrap_or(chrono::Duration::MAX)
}

/// A duration written as humantime text (`"90s"`, `"1h 30min"`) or a number of seconds.
pub(crate) fn span<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<std::time::Duration, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Secs(u64),
        Text(String),
    }
    match Raw::deserialize(d)? {
        Raw::Secs(s) => Ok(std::time::Duration::from_secs(s)),
        Raw::Text(t) => humantime::parse_duration(t.trim()).map_err(|e| {
            serde::de::Error::custom(format!(
                "`{t}` is not a duration ({e}); write it like \"90s\", \"5m\" or \"1h 30min\""
            ))
        }),
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize, Default)]
#[serde(default)]
pub struct NotifyConfig {
    /// An argv template with `{channel}`, `{event}`, `{message}`, `{project}`, `{bead}`.
    pub command: Vec<String>,
    /// A URL receiving a Discord/Slack-style JSON POST.
    pub webhook: Option<String>,
    pub timeout_secs: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default)]
pub struct CheckinConfig {
    /// Local time of day (`HH:MM`) at which daily and weekly check-ins become due.
    pub time: String,
    /// Day of the week for weekly check-ins (`mon` … `sun`).
    pub weekday: String,
}

impl Default for CheckinConfig {
    fn default() -> Self {
        CheckinConfig {
            time: "09:00".into(),
            weekday: "mon".into(),
        }
    }
}

/// A loaded configuration and what was odd about it.
#[derive(Debug, Clone, Default)]
pub struct Loaded {
    pub config: Config,
    pub warnings: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
#[error("{path}{line}: {message}; {fix}")]
pub struct ConfigError {
    pub path: PathBuf,
    pub line: String,
    pub message: String,
    /// What to write instead, for the key on that line.
    pub fix: String,
}

/// The fix for a config.toml error `message` at the line `at` of `text`: the form the key
/// wants, from the type serde expected. Never "delete the file": it holds the executor.
fn fix_for(message: &str, text: &str, at: Option<usize>) -> String {
    let line = at
        .and_then(|n| text.lines().nth(n.saturating_sub(1)))
        .unwrap_or("");
    let key = line
        .split_once('=')
        .map(|(k, _)| k.trim())
        .filter(|k| !k.is_empty() && !k.starts_with('['))
        .unwrap_or("the key");
    let expected = message.rsplit_once("expected ").map_or("", |(_, e)| e);
    let form = if message.starts_with("invalid type") || message.starts_with("invalid value") {
        match expected.trim() {
            e if e.starts_with('u') || e.starts_with('i') || e.contains("integer") => {
                format!("a whole number without quotes, such as `{key} = 3`")
            }
            e if e.contains("boolean") => format!("true or false without quotes: `{key} = true`"),
            e if e.contains("sequence") => format!("a list, such as `{key} = [\"a\", \"b\"]`"),
            e if e.contains("string") => format!("a string in quotes, such as `{key} = \"…\"`"),
            e if !e.is_empty() => e.to_string(),
            _ => String::new(),
        }
    } else {
        String::new()
    };
    if !form.is_empty() {
        format!("write {form} (docs/configuration.md gives every key's form)")
    } else if message.contains("unknown variant") {
        format!("write one of the values listed for `{key}`")
    } else {
        "correct that line (docs/configuration.md gives every key's form); the other settings in the file are kept".into()
    }
}

impl Config {
    /// Reads the file; missing means defaults.
    pub fn load(path: &Path) -> Result<Loaded, ConfigError> {
        match crate::system::atomic::read(path) {
            Ok(bytes) => Config::parse(&String::from_utf8_lossy(&bytes), path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Loaded::default()),
            Err(e) => Err(ConfigError {
                path: path.into(),
                line: String::new(),
                message: format!("cannot read: {e}"),
                fix: "make the file readable by this user".into(),
            }),
        }
    }

    pub fn parse(text: &str, path: &Path) -> Result<Loaded, ConfigError> {
        let mut warnings = Vec::new();
        let err = |e: toml::de::Error| {
            let at = e
                .span()
                .map(|s| text[..s.start.min(text.len())].lines().count().max(1));
            let message = e
                .message()
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .collect::<Vec<_>>()
                .join(": ");
            ConfigError {
                path: path.into(),
                line: at.map(|n| format!(":{n}")).unwrap_or_default(),
                fix: fix_for(&message, text, at),
                message,
            }
        };
        let de = toml::Deserializer::new(text);
        let config: Config = serde_ignored::deserialize(de, |p| {
            warnings.push(format!("{}: unknown key `{p}` ignored", path.display()));
        })
        .map_err(err)?;
        Ok(Loaded { config, warnings })
    }

    /// The worker argv: the configured one, or this executable plus `worker`.
    pub fn worker_command(&self) -> Vec<String> {
        if !self.worker.command.is_empty() {
            return self.worker.command.clone();
        }
        let exe = std::env::current_exe()
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_else(|_| "braids".into());
        vec![exe, "worker".into()]
    }
}

impl Config {
    /// The workspaces of `project`: where they live, its pool, what each gets.
    pub fn workspaces(
        &self,
        paths: &crate::system::paths::Paths,
        project: Option<&crate::format::project::ProjectConfig>,
    ) -> crate::workspace::GitWorktrees {
        crate::workspace::GitWorktrees {
            root: self.workspace.root(paths.workspaces_dir(), &paths.home),
            sandbox: self.sandbox_settings(&[]),
            pooling: match project {
                Some(p) => self.workspace.pooling(p),
                None => crate::workspace::Pooling {
                    idle_max: self.workspace.idle_max,
                    ..Default::default()
                },
            },
        }
    }

    /// The agent for `project`: PROJECT.md's `Executor:` (a preset's name, or a command line
    /// split as a shell would, never run by one) over `[worker] executor`. Err names the file
    /// and line of an `Executor:` that is neither.
    pub fn agent_for(
        &self,
        project: &crate::format::project::ProjectConfig,
        project_md: &Path,
    ) -> Result<crate::agent::Choice, String> {
        match project.field("executor").filter(|f| !f.value.trim().is_empty()) {
            Some(f) => crate::agent::Choice::from_field(&f.value).ok_or_else(|| {
                format!(
                    "{}:{}: Executor `{}` is neither a preset ({}) nor a command line (an unclosed quote?); write a preset's name or the command as you would in a shell",
                    project_md.display(),
                    f.line,
                    f.value,
                    crate::agent::Preset::names()
                )
            }),
            None => Ok(self.worker.executor.clone()),
        }
    }

    /// A preset's settings: `[executors.<name>]`, else the defaults.
    pub fn preset_settings(&self, preset: crate::agent::Preset) -> crate::agent::PresetSettings {
        self.executors.get(&preset).cloned().unwrap_or_default()
    }

    /// Preflight: why no worker of `project` could do its work, found before anything is
    /// claimed, or `None`. A custom `[worker] command` must be a program that exists; braids'
    /// own worker needs an executor that exists.
    pub fn preflight(
        &self,
        project: &crate::format::project::ProjectConfig,
        project_md: &Path,
    ) -> Option<String> {
        self.preflight_at(project, project_md).map(|(why, _)| why)
    }

    /// [`Config::preflight`], with the line of PROJECT.md's `Executor:` when the problem is
    /// there (`None`: it is config.toml's, the same for every project that uses it).
    pub fn preflight_at(
        &self,
        project: &crate::format::project::ProjectConfig,
        project_md: &Path,
    ) -> Option<(String, Option<usize>)> {
        let line = project
            .field("executor")
            .filter(|f| !f.value.trim().is_empty())
            .map(|f| f.line);
        self.preflight_why(project, project_md)
            .map(|why| (why, line))
    }

    fn preflight_why(
        &self,
        project: &crate::format::project::ProjectConfig,
        project_md: &Path,
    ) -> Option<String> {
        if let Some(program) = self.worker.command.first() {
            return missing_program(program)
                .map(|why| format!("the [worker] command of config.toml {why}; fix the command"));
        }
        let (placement, _) = crate::session::Placement::of(project);
        if placement.backend_or(self.sessions.backend) == crate::session::BackendKind::OpenClaw {
            // The agent is a gateway session; no executor runs.
            return missing_program(&self.openclaw.program).map(|why| {
                format!("its agents are OpenClaw sessions, but the [openclaw] program of config.toml {why}; install OpenClaw or fix the program")
            });
        }
        let choice = match self.agent_for(project, project_md) {
            Err(e) => return Some(e),
            Ok(c) => c,
        };
        let from = || {
            if project
                .field("executor")
                .is_some_and(|f| !f.value.trim().is_empty())
            {
                format!("`Executor:` of {}", project_md.display())
            } else {
                "[worker] executor of config.toml".into()
            }
        };
        if let crate::agent::Choice::Preset(preset) = choice {
            let settings = self.preset_settings(preset);
            let program = preset
                .command(
                    &settings,
                    &crate::agent::Launch {
                        prompt_file: Path::new("prompt.md"),
                        workspace: Path::new("."),
                        model: None,
                        resume: None,
                        timeout_secs: 0,
                        title: "",
                        provider: None,
                        contained: false,
                    },
                )
                .program;
            if let Some(why) = missing_program(&program) {
                let fix = if settings.program.trim().is_empty() {
                    format!(
                        "install {preset} or set program under [executors.{preset}] in config.toml"
                    )
                } else {
                    format!("fix program under [executors.{preset}] in config.toml")
                };
                return Some(format!(
                    "the {preset} preset's program {why}; {fix} (chosen by the {})",
                    from()
                ));
            }
            return crate::agent::preflight(preset, &settings, crate::agent::running_as_root());
        }
        match choice.argv().first() {
            None => Some(
                "no executor is configured: set [worker] executor in config.toml to a preset (claude-code, codex, opencode, aider, openclaw; see docs/agents.md) or `Executor:` in PROJECT.md".into(),
            ),
            Some(program) => missing_program(program).map(|why| {
                let like = (choice.argv().len() == 1)
                    .then(|| crate::agent::Preset::like(program))
                    .flatten()
                    .map_or(String::new(), |p| format!(" (did you mean the preset `{p}`?)"));
                format!("the executor {why}{like}; install it or fix the {}", from())
            }),
        }
    }
}

/// Why `program` cannot be run (`None` when it can): found on PATH, or the file it names.
pub fn missing_program(program: &str) -> Option<String> {
    match which::which(program) {
        Ok(_) => None,
        Err(_) if program.contains('/') => Some(format!("`{program}` is not an executable file")),
        Err(_) => Some(format!("`{program}` is not a program on PATH")),
    }
}

/// The commented file `braids init` writes: every key, at its default.
pub const TEMPLATE: &str = crate::system::templates::CONFIG;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_file_means_defaults() {
        let l = Config::load(Path::new("/nonexistent/braids/config.toml")).unwrap();
        assert_eq!(l.config, Config::default());
        assert!(l.warnings.is_empty());
    }

    #[test]
    fn template_parses_to_defaults() {
        let l = Config::parse(TEMPLATE, Path::new("config.toml")).unwrap();
        assert!(l.warnings.is_empty(), "{:?}", l.warnings);
        assert_eq!(l.config, Config::default());
    }

    #[test]
    fn unknown_keys_warn_and_values_apply() {
        let text = "[tick]\nmax_workers = 4\nmax_wrokers = 5\n[sessions]\nbackend = \"tmux\"\n[bogus]\nx = 1\n";
        let l = Config::parse(text, Path::new("c.toml")).unwrap();
        assert_eq!(l.config.tick.max_workers, 4);
        assert_eq!(l.config.sessions.backend, BackendKind::Tmux);
        assert_eq!(l.warnings.len(), 2, "{:?}", l.warnings);
        assert!(l.warnings[0].contains("tick.max_wrokers"));
    }

    /// CONTRACTS 3.10, "retry once": with the default configuration a bead's first failure is
    /// retried and its second blocks it.
    #[test]
    fn c3_10_the_default_is_to_retry_once() {
        use crate::retry::{AfterFailure, Attempts, Failure};
        let p = WorkerConfig::default().retry_policy();
        assert_eq!(p.retries, 1);
        let mut a = Attempts::default();
        let (dir, b) = (
            Path::new("/p/app"),
            crate::model::BeadId::new("app-1").unwrap(),
        );
        let now = chrono::Utc::now();
        assert!(matches!(
            a.fail(dir, &b, Failure::new(now, "exit 1"), &p, true),
            AfterFailure::Retry { failures: 1, .. }
        ));
        let later = now + chrono::Duration::minutes(5);
        match a.fail(dir, &b, Failure::new(later, "exit 1"), &p, true) {
            AfterFailure::Block { reason, failures } => {
                assert_eq!(failures.len(), 2);
                assert!(reason.starts_with("failed 2 times in a row"), "{reason}");
            }
            other => panic!("the second failure blocks: {other:?}"),
        }
    }

    #[test]
    fn broken_toml_names_line() {
        let e = Config::parse("[tick]\nmax_workers = \"four\"\n", Path::new("c.toml")).unwrap_err();
        assert!(e.to_string().starts_with("c.toml:2:"), "{e}");
    }
}
#[cfg(test)]
mod template_tests;
