//! `braids sessions` and `braids kill`.

use anyhow::Result;
use chrono::Utc;
use serde::Serialize;

use crate::app::sessions::Listed;
use crate::installation;
use crate::paths::Paths;
use crate::session::KillOutcome;

use super::{Output, EXIT_OK};

#[derive(Serialize)]
#[serde(transparent)]
struct SessionList(Vec<Listed>);

impl Output for SessionList {
    fn text(&self) -> String {
        let live: Vec<&Listed> = self.0.iter().filter(|l| l.session.running).collect();
        if live.is_empty() {
            return "no live worker sessions\n".into();
        }
        let now = Utc::now();
        let mut o = String::new();
        for l in live {
            let s = &l.session;
            let mins = (now - s.started_at).num_minutes();
            let pid = s.pid.map(|p| format!("pid {p}")).unwrap_or_default();
            let log = s
                .log
                .as_ref()
                .map(|l| format!("  log {}", l.display()))
                .unwrap_or_default();
            let orphan = if l.orphan {
                "  orphan: its project is not in the registry"
            } else {
                ""
            };
            o.push_str(&format!(
                "{}  {}m  {}  {pid}{log}{orphan}\n",
                s.label, mins, s.backend
            ));
        }
        o
    }
}

pub fn list(paths: &Paths, json: bool) -> Result<i32> {
    let inst = installation::open(paths)?;
    let mut sessions = crate::app::sessions::list(&inst)?;
    if json {
        sessions.retain(|l| l.session.running);
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
