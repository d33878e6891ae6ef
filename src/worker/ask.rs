//! `braids tools ask`: one run of the configured cheap agent over a question packet
//! ([`crate::claw::tools::ask`]), in an empty directory of its own, so it answers from the
//! packet and has nothing of the tree to change. It lives beside the worker because it runs an
//! agent exactly as a worker does (the preset's command, its sandbox, its stream reader).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Result};
use serde::Serialize;

use crate::agent::Preset;
use crate::config::Config;
use crate::model::BeadId;
use crate::system::paths::Paths;

use super::{ExecRequest, Executor, PresetExecutor};

/// What the agent answered.
#[derive(Debug, Clone, Serialize)]
pub struct Answer {
    pub answer: String,
    pub executor: Preset,
    pub model: Option<String>,
    #[serde(flatten)]
    pub usage: crate::cost::Usage,
    /// Bytes of the packet the agent was given.
    pub packet_bytes: usize,
}

/// The tree `braids tools ask` may send to a model: `dir` with every link resolved, when it
/// lies inside a registered project or a worktree braids made for one; from an agent
/// (`workspace`: its `BRAIDS_WORKSPACE`), inside that workspace only. The packet leaves the
/// machine, so a hostile bead must not be able to point it at the person's other files.
pub fn scope(
    paths: &Paths,
    config: &Config,
    dir: &Path,
    workspace: Option<&Path>,
) -> Result<PathBuf> {
    let real = |p: &Path| std::fs::canonicalize(p).ok();
    let Some(tree) = real(dir) else {
        bail!(
            "{} does not exist; --dir names a project's tree (or run braids tools ask inside it)",
            dir.display()
        );
    };
    let worktrees = config.workspaces(paths, None);
    let mut allowed = Vec::new();
    for e in crate::format::registry::read_registry(paths).value.entries {
        let canonical = real(&e.path);
        allowed.extend(real(&worktrees.project_dir(&e.path)));
        if let Some(c) = &canonical {
            allowed.extend(real(&worktrees.project_dir(c)));
        }
        allowed.extend(canonical);
    }
    let inside = |roots: &[PathBuf]| roots.iter().any(|r| tree.starts_with(r));
    if let Some(w) = workspace {
        let own: Vec<PathBuf> = real(w)
            .into_iter()
            .filter(|w| inside_any(w, &allowed))
            .collect();
        if !inside(&own) {
            bail!(
                "{} is outside this bead's workspace {}: an agent's braids tools ask reads only its own workspace, so give --dir inside it",
                dir.display(),
                w.display()
            );
        }
    } else if !inside(&allowed) {
        bail!(
            "{} is outside every registered project: braids tools ask reads only the projects in {} and their workspaces, so run it inside one or give --dir inside one",
            dir.display(),
            crate::format::layout::registry_file(paths).display()
        );
    }
    Ok(tree)
}

fn inside_any(p: &Path, roots: &[PathBuf]) -> bool {
    roots.iter().any(|r| p.starts_with(r))
}

/// Asks `question` over `files` of the tree at `root`; `None` when `[ask]` names no executor.
pub fn ask(
    config: &Config,
    root: &Path,
    question: &str,
    files: &[PathBuf],
) -> Result<Option<Answer>> {
    let Some(preset) = config.ask.executor else {
        return Ok(None);
    };
    if question.trim().is_empty() {
        bail!("the question is empty; write it as the argument: braids tools ask \"How does X reach Y?\"");
    }
    let sources = crate::claw::tools::ask::gather(root, files)?;
    let packet = crate::claw::tools::ask::packet(question, &sources, config.ask.max_bytes);
    let dir = tempfile::Builder::new().prefix("braids-ask-").tempdir()?;
    let work = dir.path().join("work");
    std::fs::create_dir_all(&work)?;
    let prompt_file = dir.path().join("prompt.md");
    crate::system::atomic::write(&prompt_file, packet.as_bytes())?;
    let model = (!config.ask.model.is_empty()).then(|| config.ask.model.clone());
    let exec = PresetExecutor {
        preset,
        settings: config.preset_settings(preset),
        model: model.clone(),
        grace: Duration::from_secs(config.sessions.kill_grace_secs),
        sandbox: config.preset_sandbox(preset, preset.state_dirs()),
    };
    let req = ExecRequest {
        project: work.clone(),
        workspace: work,
        bead: BeadId::new("tools-ask").expect("a valid id"),
        prompt_file,
        deliverable: dir.path().join("deliverable.md"),
        result_file: dir.path().join("executor-result"),
        timeout: Duration::from_secs(config.ask.timeout_secs),
        activity: dir.path().join("activity"),
        role: None,
    };
    let res = exec.run(&req)?;
    let outcome = res.agent.clone().unwrap_or_default();
    if res.timed_out {
        bail!(
            "{preset} did not answer within {} s; raise [ask] timeout_secs in config.toml or ask about fewer files",
            config.ask.timeout_secs
        );
    }
    let answer = outcome.final_text.clone().unwrap_or_default();
    if res.code != Some(0) || answer.trim().is_empty() {
        let why = outcome
            .failed
            .clone()
            .unwrap_or_else(|| super::clip(res.tail.trim(), 400));
        bail!(
            "{preset} gave no answer (exit {}): {why}; `braids check` tests the [executors.{preset}] setup",
            res.code.map_or("by a signal".into(), |c| c.to_string())
        );
    }
    let mut usage = outcome.usage;
    if usage.cost_usd.is_none() {
        if let (Some(m), Some(i), Some(o)) = (
            outcome.model.as_deref().or(model.as_deref()),
            usage.tokens_in,
            usage.tokens_out,
        ) {
            usage.cost_usd = crate::agent::priced(&config.prices, m, i, o);
        }
    }
    Ok(Some(Answer {
        answer: answer.trim().to_string(),
        executor: preset,
        model: outcome.model.or(model),
        usage,
        packet_bytes: packet.len(),
    }))
}
