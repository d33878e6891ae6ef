//! `braids sessions` and `braids kill`.

use anyhow::Result;
use chrono::Utc;
use serde::Serialize;

use crate::installation;
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
            o.push_str(&format!(
                "{}  {}m  {}  {pid}{log}\n",
                s.label, mins, s.backend
            ));
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
    let inst = installation::open(paths)?;
    let how = match crate::app::sessions::kill(&inst, label)? {
        KillOutcome::Terminated => "terminated",
        KillOutcome::Killed => "killed (it ignored SIGTERM)",
        KillOutcome::AlreadyGone => "already gone",
    };
    println!("{label}: {how}");
    Ok(EXIT_OK)
}
