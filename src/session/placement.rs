//! Where a project's workers run and what they ask for: PROJECT.md `Backend:`, `Cpus:`,
//! `Memory:` and `Gpus:` (Slurm), `Agent:`, `Model:` and `Thinking:` (OpenClaw), read once for
//! the tick, the worker and `braids check` alike.

use super::BackendKind;
use crate::format::project::ProjectConfig;

/// A project's choice of backend and the resources its workers ask for. The local backends
/// ignore the resources; Slurm turns them into `sbatch` options and enforces `time_limit_secs`
/// itself too.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Placement {
    /// `None`: the installation's `[sessions] backend`.
    pub backend: Option<BackendKind>,
    pub cpus: Option<u32>,
    /// Slurm's memory syntax: a whole number with an optional K, M, G or T (`512M`, `4G`).
    pub memory: Option<String>,
    /// A count, or `type:count` (`2`, `a100:1`).
    pub gpus: Option<String>,
    /// The project's WorkerTimeout, seconds.
    pub time_limit_secs: u64,
    /// The OpenClaw agent, `provider/model` and thinking level; `None`: `[openclaw]`'s.
    pub agent: Option<String>,
    pub model: Option<String>,
    pub thinking: Option<String>,
}

/// A field of the placement that cannot be used; the project gets no new worker until it is
/// fixed, rather than one running somewhere it did not ask for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlacementProblem {
    pub line: usize,
    pub message: String,
    pub fix: String,
}

impl Placement {
    /// The backend the project's workers run on: its own `Backend:`, else `configured`.
    #[must_use]
    pub fn backend_or(&self, configured: BackendKind) -> BackendKind {
        self.backend.unwrap_or(configured)
    }

    /// Reads the fields; a value that cannot be used is a problem, and left out.
    pub fn of(config: &ProjectConfig) -> (Placement, Vec<PlacementProblem>) {
        let mut problems = Vec::new();
        let mut placement = Placement {
            time_limit_secs: config.worker_timeout,
            ..Placement::default()
        };
        let value = |key: &str| {
            config
                .field(key)
                .map(|f| {
                    (
                        f.line,
                        crate::format::fields::strip_decor(f.value.trim()).to_string(),
                    )
                })
                .filter(|(_, v)| !v.is_empty())
        };
        if let Some((line, v)) = value("backend") {
            match BackendKind::parse(&v) {
                Some(k) => placement.backend = Some(k),
                None => problems.push(PlacementProblem {
                    line,
                    message: format!(
                        "Backend `{v}` is not one of {}",
                        BackendKind::ALL.map(|k| k.name()).join(", ")
                    ),
                    fix: "write `Backend: slurm` (or process, tmux, openclaw), or remove the line to use config.toml's [sessions] backend".into(),
                }),
            }
        }
        if let Some((line, v)) = value("cpus") {
            match v.parse::<u32>() {
                Ok(n) if n > 0 => placement.cpus = Some(n),
                _ => problems.push(PlacementProblem {
                    line,
                    message: format!("Cpus `{v}` is not a whole number of 1 or more"),
                    fix: "write `Cpus: 4`, or remove the line".into(),
                }),
            }
        }
        if let Some((line, v)) = value("memory") {
            if is_memory(&v) {
                placement.memory = Some(v.to_ascii_uppercase());
            } else {
                problems.push(PlacementProblem {
                    line,
                    message: format!("Memory `{v}` is not a size Slurm reads"),
                    fix: "write a whole number with K, M, G or T, such as `Memory: 8G`".into(),
                });
            }
        }
        if let Some((line, v)) = value("gpus") {
            if is_gpus(&v) {
                placement.gpus = Some(v);
            } else {
                problems.push(PlacementProblem {
                    line,
                    message: format!("Gpus `{v}` is not a count or type:count"),
                    fix: "write `Gpus: 1` or `Gpus: a100:2`".into(),
                });
            }
        }
        let mut read = |key: &str, check: &dyn Fn(&str) -> Result<String, Invalid>| {
            let (line, v) = value(key)?;
            check(&v)
                .map_err(|(message, fix)| problems.push(PlacementProblem { line, message, fix }))
                .ok()
        };
        placement.agent = read("agent", &agent);
        let openclaw = placement.backend == Some(BackendKind::OpenClaw);
        placement.model = read("model", &|v| model(v, openclaw));
        placement.thinking = read("thinking", &thinking);
        (placement, problems)
    }
}

/// Why a value cannot be used, and what to write: a message and a fix.
pub type Invalid = (String, String);

/// An OpenClaw agent id, as PROJECT.md's `Agent:` and `[openclaw] agent` write it.
pub fn agent(v: &str) -> Result<String, Invalid> {
    if is_word(v) {
        return Ok(v.to_ascii_lowercase());
    }
    Err((
        format!("Agent `{v}` is not an OpenClaw agent id"),
        "write the agent's id, letters, digits, `-` and `_` (`Agent: main`)".into(),
    ))
}

/// A model name; OpenClaw names one by its provider (`anthropic/claude-sonnet-4-6`), the agent
/// CLI presets take their own names (`sonnet`, `gpt-5.5`, `openai/m1`).
pub fn model(v: &str, openclaw: bool) -> Result<String, Invalid> {
    let ok = match v.split_once('/') {
        Some((p, m)) => is_word(p) && !m.is_empty() && !m.contains(char::is_whitespace),
        None => !openclaw && !v.contains(char::is_whitespace),
    };
    match (ok, openclaw) {
        (true, _) => Ok(v.to_string()),
        (false, true) => Err((
            format!("Model `{v}` is not a provider/model name"),
            "write the provider and the model, such as `Model: anthropic/claude-sonnet-4-6`"
                .into(),
        )),
        (false, false) => Err((
            format!("Model `{v}` is not a model name"),
            "write the model as its agent CLI names it, one word such as `Model: sonnet` or `Model: openai/gpt-5.5`".into(),
        )),
    }
}

/// An OpenClaw thinking level.
pub fn thinking(v: &str) -> Result<String, Invalid> {
    let level = v.to_ascii_lowercase();
    if super::openclaw::THINKING_LEVELS.contains(&level.as_str()) {
        return Ok(level);
    }
    Err((
        format!("Thinking `{v}` is not a thinking level"),
        format!(
            "write one of {}",
            super::openclaw::THINKING_LEVELS.join(", ")
        ),
    ))
}

/// An id OpenClaw accepts for an agent or a provider.
fn is_word(v: &str) -> bool {
    !v.is_empty()
        && v.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.')
}

fn is_memory(v: &str) -> bool {
    let digits = v.trim_end_matches(|c: char| "kmgtKMGT".contains(c));
    v.len() - digits.len() <= 1
        && !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && digits.parse::<u64>().is_ok_and(|n| n > 0)
}

fn is_gpus(v: &str) -> bool {
    let (kind, count) = v.rsplit_once(':').unwrap_or(("", v));
    count.parse::<u32>().is_ok_and(|n| n > 0)
        && kind
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> (Placement, Vec<PlacementProblem>) {
        let cfg =
            crate::format::project::parse_project(text, std::path::Path::new("PROJECT.md")).value;
        Placement::of(&cfg)
    }

    #[test]
    fn fields_become_a_placement() {
        let (p, problems) = read("# A\nStatus: active\nPriority: normal\nAutonomy: full\nWorkerTimeout: 90s\nBackend: Slurm\nCpus: 4\nMemory: 8g\nGpus: a100:2\n");
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(
            p,
            Placement {
                backend: Some(BackendKind::Slurm),
                cpus: Some(4),
                memory: Some("8G".into()),
                gpus: Some("a100:2".into()),
                time_limit_secs: 90,
                ..Placement::default()
            }
        );
        let (p, problems) = read("# A\nStatus: active\nBackend: openclaw\nAgent: Ops\nModel: standin/m-2.5\nThinking: High\n");
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(
            (
                p.backend,
                p.agent.as_deref(),
                p.model.as_deref(),
                p.thinking.as_deref()
            ),
            (
                Some(BackendKind::OpenClaw),
                Some("ops"),
                Some("standin/m-2.5"),
                Some("high")
            )
        );
        assert_eq!(p.backend_or(BackendKind::Tmux), BackendKind::OpenClaw);
        let (p, _) = read("# A\nStatus: active\n");
        assert_eq!(p.backend, None);
        assert_eq!(p.backend_or(BackendKind::Slurm), BackendKind::Slurm);
    }

    #[test]
    fn unusable_values_name_their_line() {
        let (p, problems) = read(
            "# A\nStatus: active\nBackend: slurmm\nCpus: 0\nMemory: lots\nGpus: a b\nAgent: a b\nModel: gpt 5\nThinking: deep\n",
        );
        assert_eq!(p.backend, None);
        let lines: Vec<usize> = problems.iter().map(|p| p.line).collect();
        assert_eq!(lines, [3, 4, 5, 6, 7, 8, 9]);
        assert!(problems[5].message.contains("not a model name"));
        let (_, openclaw) = read("# A\nStatus: active\nBackend: openclaw\nModel: gpt\n");
        assert!(
            openclaw[0].message.contains("provider/model"),
            "{openclaw:?}"
        );
        let (preset, none) = read("# A\nStatus: active\nModel: claude-opus-5-5\n");
        assert!(none.is_empty(), "{none:?}");
        assert_eq!(preset.model.as_deref(), Some("claude-opus-5-5"));
        assert!(problems[6].fix.contains("xhigh"), "{}", problems[6].fix);
        assert!(
            problems[0]
                .message
                .contains("process, tmux, slurm, openclaw"),
            "{}",
            problems[0].message
        );
    }
}
