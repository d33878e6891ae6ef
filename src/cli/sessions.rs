//! `braids sessions` and `braids kill`.

use std::time::Duration;

use anyhow::{bail, Result};
use chrono::Utc;
use serde::Serialize;

use crate::installation;
use crate::model::SessionLabel;
use crate::paths::Paths;
use crate::session::{KillOutcome, Session};

use super::{Output, EXIT_OK};

#[derive(Serialize)]
#[serde(transparent)]
struct SessionList(Vec<Session>);

impl Output for SessionList {
    fn text(&self) -> String {
        let live: Vec<&Session> = self.0.iter().filter(|s| s.running).collect();
        if live.is_empty() {
            return "no live worker sessions\n".into();
        }
        let now = Utc::now();
        let mut o = String::new();
        for s in live {
            let mins = (now - s.started_at).num_minutes();
            let pid = s.pid.map(|p| format!("pid {p}")).unwrap_or_default();
            let log = s
                .log
                .as_ref()
                .map(|l| format!("  log {}", l.display()))
                .unwrap_or_default();
            o.push_str(&format!("{}  {}m  {pid}{log}\n", s.label, mins));
        }
        o
    }
}

pub fn list(paths: &Paths, json: bool) -> Result<i32> {
    let inst = installation::open(paths)?;
    let mut sessions = inst.backend.list()?;
    if json {
        sessions.retain(|s| s.running);
    }
    SessionList(sessions).print(json);
    Ok(EXIT_OK)
}

pub fn kill(paths: &Paths, label: &str) -> Result<i32> {
    let wanted = SessionLabel::parse(label).map_err(|e| {
        anyhow::anyhow!("{e}; labels look like project:<slug>:<bead-id> (see `braids sessions`)")
    })?;
    let inst = installation::open(paths)?;
    let sessions = inst.backend.list()?;
    let Some(s) = sessions.iter().find(|s| s.label == wanted && s.running) else {
        bail!("no live session is labelled {label}; `braids sessions` lists them");
    };
    let grace = Duration::from_secs(inst.config.sessions.kill_grace_secs);
    let outcome = inst.backend.kill(s, grace)?;
    inst.backend.forget(s)?;
    let how = match outcome {
        KillOutcome::Terminated => "terminated",
        KillOutcome::Killed => "killed (it ignored SIGTERM)",
        KillOutcome::AlreadyGone => "already gone",
    };
    println!("{label}: {how}");
    Ok(EXIT_OK)
}
