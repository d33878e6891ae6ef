//! `braids sessions` and `braids kill`.

use anyhow::Result;
use chrono::Utc;
use serde::Serialize;

use crate::app::sessions::{AfterKill, Killed, Listed};
use crate::config::installation;
use crate::session::KillOutcome;
use crate::system::paths::Paths;
use crate::system::templates::{clip, elapsed};

use super::{KillArgs, Output, EXIT_OK};

#[derive(Serialize)]
#[serde(transparent)]
struct SessionList(Vec<Listed>);

impl Output for SessionList {
    fn text(&self) -> String {
        let live: Vec<&Listed> = self.0.iter().filter(|l| l.session.running).collect();
        if live.is_empty() {
            return "no live worker sessions\n".into();
        }
        let mut o = String::new();
        for l in live {
            let s = &l.session;
            let mut line = format!("{}  {}  {}", s.label, elapsed(l.elapsed_seconds), s.backend);
            if let Some(p) = s.pid {
                line.push_str(&format!("  pid {p}"));
            }
            if s.backend == crate::session::BackendKind::Slurm {
                line.push_str(&format!("  job {}", s.id));
            }
            if s.queued {
                line.push_str("  queued");
            }
            if let Some(step) = &l.step {
                line.push_str(&format!("  step {}", step.to_lowercase()));
            }
            if let Some(q) = l.last_output_seconds {
                line.push_str(&format!("  last output {} ago", elapsed(q)));
            }
            if l.session.worker_gone {
                line.push_str("  worker gone: what it left runs for nobody; the next run stops it");
            }
            if l.orphan {
                line.push_str("  orphan: its project is not in the registry");
            }
            o.push_str(&line);
            o.push('\n');
            if let Some(t) = &l.title {
                o.push_str(&format!("    {}\n", clip(t, 100)));
            }
            if let Some(w) = &l.workspace {
                o.push_str(&format!(
                    "    workspace {} (id {})\n",
                    w.path.display(),
                    w.id
                ));
            }
            if let Some(log) = &s.log {
                o.push_str(&format!("    log {}\n", log.display()));
            }
        }
        o
    }
}

pub fn list(paths: &Paths, json: bool) -> Result<i32> {
    let inst = super::open_to_read(paths);
    let mut sessions = crate::app::sessions::list(&inst, Utc::now())?;
    if json {
        sessions.retain(|l| l.session.running);
    }
    SessionList(sessions).print(json);
    Ok(EXIT_OK)
}

impl Output for Killed {
    fn text(&self) -> String {
        let how = match self.outcome {
            KillOutcome::Terminated => "terminated",
            KillOutcome::Killed => "killed (it ignored SIGTERM)",
            KillOutcome::AlreadyGone => "already gone",
        };
        let then = match (self.then, &self.reason) {
            ("blocked", Some(r)) => format!("bead blocked: {}", clip(r, 200)),
            ("requeued", _) => "bead open again; the next run spawns it".into(),
            ("closed", _) => "the worker had finished: bead closed".into(),
            (other, _) => other.to_string(),
        };
        format!("{}: {how}; {then}\n", self.session)
    }
}

pub fn kill(paths: &Paths, a: KillArgs) -> Result<i32> {
    let inst = installation::open(paths)?;
    let after = match a.block {
        Some(reason) => AfterKill::Block(reason),
        None => AfterKill::Requeue,
    };
    crate::app::sessions::kill(&inst, &a.target, after)?.print(a.json);
    Ok(EXIT_OK)
}
