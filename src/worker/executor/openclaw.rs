//! The agent as an OpenClaw session (`Backend: openclaw`): the worker creates the session
//! through the gateway and waits for its run; everything after it (deliverable, close, commit,
//! push) stays the worker's, exactly as with an argv executor.
//!
//! Each attempt is a fresh session: the earlier attempt's session, kept so a person can read
//! it in OpenClaw, is deleted first (OpenClaw archives its transcript). The session's tools run
//! under the gateway, not under this worker, so the gateway's environment is theirs: `br` in a
//! worktree needs `BEADS_DIR` there, or the prompt's paths.

use std::time::Duration;

use anyhow::{anyhow, Result};
use serde_json::{json, Map, Value};

use super::{ExecRequest, ExecResult, Executor};
use crate::model::SessionLabel;
use crate::session::openclaw::{session_key, Gateway, OpenClawSettings, Started, Waited};
use crate::session::Placement;

/// Runs the agent as the gateway session of a label.
pub struct SessionAgent {
    gateway: Gateway,
    label: SessionLabel,
    agent: String,
    model: Option<String>,
    thinking: Option<String>,
}

impl SessionAgent {
    /// The project's `Agent:`, `Model:` and `Thinking:` win over `[openclaw]`'s.
    pub fn new(settings: &OpenClawSettings, placement: &Placement, label: SessionLabel) -> Self {
        let or_default = |own: &Option<String>, default: &str| {
            own.clone()
                .or_else(|| (!default.is_empty()).then(|| default.to_string()))
        };
        SessionAgent {
            gateway: Gateway::new(settings.clone()),
            label,
            agent: or_default(&placement.agent, &settings.agent).unwrap_or_else(|| "main".into()),
            model: or_default(&placement.model, &settings.model),
            thinking: or_default(&placement.thinking, &settings.thinking),
        }
    }

    /// What `sessions.create` gets: pure, so what reaches the session is tested without one.
    fn create_params(&self, key: &str, req: &ExecRequest, message: &str) -> Value {
        let mut p = Map::new();
        p.insert("key".into(), key.into());
        p.insert("label".into(), self.label.to_string().into());
        p.insert("cwd".into(), req.workspace.to_string_lossy().into());
        p.insert("message".into(), message.into());
        if let Some(m) = &self.model {
            p.insert("model".into(), m.as_str().into());
        }
        if let Some(t) = &self.thinking {
            p.insert("thinkingLevel".into(), t.as_str().into());
        }
        Value::Object(p)
    }
}

impl Executor for SessionAgent {
    fn run(&self, req: &ExecRequest) -> Result<ExecResult> {
        let key = session_key(&self.agent, &self.label, req.role.as_deref());
        let message = std::fs::read_to_string(&req.prompt_file)
            .map_err(|e| anyhow!("cannot read the prompt {}: {e}", req.prompt_file.display()))?;
        let wait = self.gateway.wait();
        self.gateway.delete(&key)?;
        let answer = self.gateway.call(
            "sessions.create",
            &self.create_params(&key, req, &message),
            wait,
        )?;
        let started = Started::from(&answer).map_err(|e| anyhow!("{e}"))?;
        eprintln!(
            "braids: OpenClaw session {key} runs {} (model {}, thinking {})",
            started.run_id,
            self.model.as_deref().unwrap_or("the agent's default"),
            self.thinking.as_deref().unwrap_or("the model's default"),
        );
        // The session's files are the agent's only sign of life here: watching the workspace
        // keeps the stall timer honest.
        let tee = super::tee::Tee::start(Vec::new(), req.activity.clone(), &req.workspace, false);
        let waited = self.gateway.call_watched(
            "agent.wait",
            &json!({ "runId": started.run_id, "timeoutMs": req.timeout.as_millis() as u64 }),
            req.timeout + Duration::from_secs(15),
            Some((super::stop::agent_started, super::stop::agent_gone)),
        );
        let _ = tee.finish();
        let waited = match waited {
            Ok(v) => Waited::from(&v),
            Err(e) => {
                self.abort(&key);
                return Err(e.into());
            }
        };
        Ok(match waited {
            Waited::Ok { reply } => {
                eprintln!("braids: OpenClaw session {key} finished: {reply}");
                ExecResult {
                    code: Some(0),
                    timed_out: false,
                    tail: reply,
                    ..ExecResult::default()
                }
            }
            Waited::TimedOut => {
                eprintln!(
                    "braids: OpenClaw session {key} ran past {}s; aborting its run",
                    req.timeout.as_secs()
                );
                self.abort(&key);
                ExecResult {
                    code: None,
                    timed_out: true,
                    tail: String::new(),
                    ..ExecResult::default()
                }
            }
            Waited::Failed { why } => {
                eprintln!("braids: OpenClaw session {key} failed: {why}");
                ExecResult {
                    code: Some(1),
                    timed_out: false,
                    tail: why,
                    ..ExecResult::default()
                }
            }
        })
    }
}

impl SessionAgent {
    /// Stops the run of `key`, keeping the session for a person to read; a failure is logged,
    /// since the tick's zombie rules still end a run that goes on.
    fn abort(&self, key: &str) {
        if let Err(e) = self.gateway.abort(key) {
            tracing::warn!("cannot abort OpenClaw session {key}: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn req() -> ExecRequest {
        ExecRequest {
            project: "/p/app".into(),
            workspace: "/p/.braids-ws/app-1".into(),
            bead: crate::model::BeadId::new("app-1").unwrap(),
            prompt_file: PathBuf::from("/tmp/prompt.md"),
            deliverable: "/p/app/d.md".into(),
            result_file: "/p/app/r".into(),
            timeout: Duration::from_secs(60),
            activity: "/tmp/a".into(),
            role: None,
        }
    }

    #[test]
    fn a_projects_fields_win_over_the_installations_and_reach_the_session() {
        let settings = OpenClawSettings {
            agent: "main".into(),
            model: "standin/m1".into(),
            thinking: String::new(),
            ..OpenClawSettings::default()
        };
        let label = SessionLabel::parse("project:app:app-1").unwrap();
        let plain = SessionAgent::new(&settings, &Placement::default(), label.clone());
        let p = plain.create_params("k", &req(), "do it");
        assert_eq!(
            p,
            json!({"key": "k", "label": "project:app:app-1", "cwd": "/p/.braids-ws/app-1",
                   "message": "do it", "model": "standin/m1"})
        );
        let own = Placement {
            agent: Some("ops".into()),
            model: Some("standin/m2".into()),
            thinking: Some("low".into()),
            ..Placement::default()
        };
        let agent = SessionAgent::new(&settings, &own, label);
        assert_eq!(agent.agent, "ops");
        let p = agent.create_params("k", &req(), "do it");
        assert_eq!(p["model"], "standin/m2");
        assert_eq!(p["thinkingLevel"], "low");
    }
}
