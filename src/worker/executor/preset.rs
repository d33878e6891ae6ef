//! Running an agent CLI preset ([`crate::agent`]): the command the preset builds, its stdout
//! read as the CLI's own events while it runs, and a session the bead's last question left
//! continued when the CLI can, or started afresh when that session is gone.

use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::agent::{session, AgentOutcome, Launch, Preset, PresetSettings, Prompt};

use super::{run_agent, ExecRequest, ExecResult, Executor};

/// A preset, its settings and the project's model.
pub struct PresetExecutor {
    pub preset: Preset,
    pub settings: PresetSettings,
    /// The project's `Model:`, over the settings'.
    pub model: Option<String>,
    /// Between SIGTERM and SIGKILL on timeout.
    pub grace: Duration,
    pub sandbox: crate::system::sandbox::Settings,
}

impl PresetExecutor {
    fn once(
        &self,
        req: &ExecRequest,
        resume: Option<&str>,
    ) -> anyhow::Result<(ExecResult, String)> {
        let provider = (self.preset == Preset::Codex)
            .then(|| codex_provider(&self.settings))
            .flatten();
        let launch = Launch {
            prompt_file: &req.prompt_file,
            workspace: &req.workspace,
            model: self.model.as_deref(),
            resume,
            timeout_secs: req.timeout.as_secs(),
            title: req.bead.as_str(),
            provider: provider.as_deref(),
            contained: self.sandbox.is_on(),
        };
        let command = self.preset.command(&self.settings, &launch);
        tracing::info!(bead = %req.bead, "agent: {}", command.display());
        let mut cmd = Command::new(&command.program);
        cmd.args(&command.args);
        for (k, v) in &command.env {
            cmd.env(k, v);
        }
        let reader = Arc::new(Mutex::new(self.preset.reader()));
        let (mut res, stderr) = run_agent(
            &mut cmd,
            req,
            command.prompt == Prompt::Stdin,
            (self.grace, &self.sandbox),
            Some(reader.clone()),
        )?;
        // A process that escaped the agent's group may still hold its stdout, and the thread
        // reading it this reader: what it prints from now on is not the run's.
        let reader = std::mem::replace(
            &mut *reader.lock().unwrap_or_else(|p| p.into_inner()),
            Box::new(Ignored),
        );
        let mut outcome = reader.finish(res.code, &stderr);
        outcome.session_usage = outcome.usage;
        res.agent = Some(outcome);
        Ok((res, stderr))
    }
}

impl Executor for PresetExecutor {
    fn run(&self, req: &ExecRequest) -> anyhow::Result<ExecResult> {
        // A session is kept only while a question waits or the bead is in review (see
        // `keep_session`); it is used once.
        let work_dir = req.prompt_file.parent().map(std::path::Path::to_path_buf);
        let kept = work_dir
            .as_deref()
            .filter(|_| self.preset.resumes() && req.role.is_none())
            .and_then(|d| session::load(d, self.preset));
        if let Some(d) = &work_dir {
            session::forget(d);
        }
        let Some(kept) = kept else {
            return self.once(req, None).map(|(r, _)| r);
        };
        let (mut res, stderr) = self.once(req, Some(&kept.id))?;
        let outcome = res.agent.take().unwrap_or_default();
        let failed = res.timed_out || res.code != Some(0);
        if failed && !res.timed_out && self.preset.session_gone(&outcome, &stderr) {
            tracing::warn!(bead = %req.bead, "the {} session {} to resume is gone; starting a fresh one with the answer in the prompt", self.preset, kept.id);
            return self.once(req, None).map(|(r, _)| r);
        }
        res.agent = Some(outcome.less(&kept.usage));
        Ok(res)
    }
}

/// Takes the lines printed after the run ended.
struct Ignored;

impl crate::agent::StreamReader for Ignored {
    fn line(&mut self, _: &str) {}
    fn finish(self: Box<Self>, _: Option<i32>, _: &str) -> AgentOutcome {
        AgentOutcome::default()
    }
}

/// The provider Codex's own configuration defines and uses (`model_provider` with a
/// `[model_providers.<name>]` table in `$CODEX_HOME/config.toml`), whose retries the preset
/// bounds; `None` for its built-in providers, whose retries stay Codex's.
fn codex_provider(settings: &PresetSettings) -> Option<String> {
    let home = settings
        .env
        .get("CODEX_HOME")
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("CODEX_HOME").map(std::path::PathBuf::from))
        .or_else(|| std::env::var_os("HOME").map(|h| std::path::Path::new(&h).join(".codex")))?;
    let bytes = crate::system::atomic::read(&home.join("config.toml")).ok()?;
    let text = String::from_utf8_lossy(&bytes);
    let config: toml::Value = toml::from_str(&text).ok()?;
    let name = config.get("model_provider")?.as_str()?;
    config
        .get("model_providers")?
        .get(name)
        .is_some()
        .then(|| name.to_string())
        .filter(|n| {
            n.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        })
}

/// The session to keep when an attempt ends with a question, or passes into review: the CLI's
/// id and its totals, for the attempt the answer (or the forge's) starts.
pub(in crate::worker) fn keep_session(work_dir: &std::path::Path, outcome: &AgentOutcome) {
    let Some(id) = outcome.session.clone() else {
        return;
    };
    let Some(preset) = outcome.preset.filter(|p| p.resumes()) else {
        return;
    };
    let record = session::SessionRecord {
        preset: preset.name().to_string(),
        id,
        usage: outcome.session_usage,
    };
    if let Err(e) = session::save(work_dir, &record) {
        tracing::warn!("cannot keep the agent's session for the next attempt: {e:#}");
    }
}
