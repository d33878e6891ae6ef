//! `braids events`: every project's events printed as lines or JSON, once or followed.

use std::io::Write;

use anyhow::Result;

use super::{EventsArgs, EXIT_OK};
use crate::events::Event;
use crate::system::paths::Paths;

pub fn run(paths: &Paths, a: EventsArgs) -> Result<i32> {
    // Only for its warning: a person learns of a broken config.toml whatever they run.
    let _ = super::open_to_read(paths);
    let sources = crate::app::event_feed::sources(paths, a.project.as_deref())?;
    let mut cursor = crate::app::event_feed::cursor(&sources, a.since);
    let mut out = std::io::stdout().lock();
    // A reader that went away (`braids events | head`) ends the command, quietly.
    let mut each = |e: &Event| {
        let line = if a.json {
            serde_json::to_string(e).unwrap_or_default()
        } else {
            text(e)
        };
        writeln!(out, "{line}").and_then(|()| out.flush()).is_ok()
    };
    if a.follow {
        crate::app::event_feed::follow(
            &sources,
            &mut cursor,
            super::stop_flag::stop_on_signals(),
            &mut each,
        );
    } else {
        crate::app::event_feed::list(&sources, &mut cursor, &mut each);
    }
    Ok(EXIT_OK)
}

/// One line: time, project and id, type, bead, then the fields.
pub fn text(e: &Event) -> String {
    // Every field is someone's text: one line, no control characters (no terminal escapes).
    let clip = crate::system::templates::clip;
    let mut line = format!(
        "{}  {}#{}  {}",
        e.timestamp.format("%Y-%m-%d %H:%M:%SZ"),
        clip(&e.project, 100),
        e.id,
        clip(&e.kind, 60)
    );
    if let Some(b) = &e.bead {
        line.push_str(&format!("  {}", clip(b, 100)));
    }
    for (k, v) in &e.fields {
        let v = match v {
            serde_json::Value::String(s) => clip(s, 200),
            other => clip(&other.to_string(), 200),
        };
        line.push_str(&format!("  {}={v}", clip(k, 60)));
    }
    line
}
