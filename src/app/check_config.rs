//! `braids check` of config.toml: a file that does not load, keys braids does not read, and
//! the values it can validate there (the sandbox, `[openclaw]`, workspace patterns, check-in
//! times), each with its line.

use std::path::Path;

use crate::system::diag::Diagnostic;

/// Which sandbox holds the agents here, why, and what it and the process container confine:
/// what `braids check` says first.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SandboxSummary {
    /// `landlock`, `bwrap`, or `none`.
    pub runs: String,
    pub why: String,
    pub confines: String,
    pub processes: String,
}

/// The [`SandboxSummary`] of the installation's config.toml (its defaults when it cannot be
/// read: that is a finding of its own).
pub fn sandbox_summary(paths: &crate::system::paths::Paths) -> SandboxSummary {
    let worker = crate::config::Config::load(&paths.config())
        .map(|l| l.config.worker)
        .unwrap_or_default();
    let processes = crate::system::container::describe(&paths.braids_dir);
    match crate::system::sandbox::choose(worker.sandbox, &worker.bwrap) {
        Ok(c) => SandboxSummary {
            runs: match c.kind {
                crate::system::sandbox::Kind::Off => "none".into(),
                k => k.as_str().into(),
            },
            why: c.why.clone(),
            confines: c.confines(),
            processes,
        },
        Err(why) => SandboxSummary {
            runs: "none".into(),
            why: format!("{why}; no agent starts until it is fixed"),
            confines: "nothing, since no agent runs".into(),
            processes,
        },
    }
}

/// Findings in config.toml: a file that does not parse, and `[checkin]` values a tick would
/// replace with its defaults (each run would warn about them).
pub fn check_config(file: &Path) -> Vec<Diagnostic> {
    let loaded = match crate::config::Config::load(file) {
        Ok(l) => l,
        Err(e) => return vec![unreadable(file, &e)],
    };
    let text = std::fs::read_to_string(file).unwrap_or_default();
    // Keys braids does not know: a tick ignores them, so a misspelling changes nothing.
    let unknown = loaded.warnings.iter().map(|w| {
        let key = w.split('`').nth(1).unwrap_or_default();
        let line = key
            .rsplit_once('.')
            .and_then(|(table, k)| key_line(&text, table, k));
        Diagnostic::warning(
            file,
            line,
            "config",
            w.split_once(": ").map_or(w.as_str(), |(_, m)| m).to_string(),
            "remove the key or correct its spelling (config.toml as `braids init` writes it lists every key)",
        )
    });
    let (_, warnings) =
        crate::tick::tell::checkin::CheckinTime::from_config(&loaded.config.checkin);
    let mut out: Vec<Diagnostic> = unknown.collect();
    // A sandbox that cannot run is an error before any agent runs without it.
    let worker = &loaded.config.worker;
    let line = key_line(&text, "worker", "sandbox");
    match crate::system::sandbox::choose(worker.sandbox, &worker.bwrap) {
        Err(why) => out.push(Diagnostic::error(
            file,
            line,
            "11.6",
            why,
            "choose a sandbox this machine has, or \"auto\"",
        )),
        Ok(c) if c.fell_back => out.push(Diagnostic::warning(
            file,
            line,
            "11.6",
            format!("agents run without a sandbox: {}", c.why),
            "install bubblewrap, or use a kernel with Landlock (ABI 3 or later; 4 confines connections too)",
        )),
        Ok(c) if !c.is_on() => out.push(Diagnostic::warning(
            file,
            line,
            "11.6",
            "[worker] sandbox = \"off\": agents run unconfined, able to read the person's keys and braids' own folder and to reach every local service".to_string(),
            "set sandbox = \"auto\", which takes Landlock or bubblewrap",
        )),
        Ok(_) => {}
    }
    for (i, entry) in worker.sandbox_connect.iter().enumerate() {
        if entry.port() == 0 {
            out.push(Diagnostic::error(
                file,
                key_line(&text, "worker", "sandbox_connect"),
                "11.6",
                format!("[worker] sandbox_connect entry {} names no port", i + 1),
                "write a port (8080) or \"host:port\"",
            ));
        }
    }
    // What `Backend: openclaw` sessions would be started with: caught here, not at a spawn.
    let oc = &loaded.config.openclaw;
    use crate::session::placement::{agent, model, thinking};
    for (key, value, check) in [
        (
            "agent",
            &oc.agent,
            &agent as &dyn Fn(&str) -> Result<String, _>,
        ),
        ("model", &oc.model, &|v: &str| model(v, true)),
        ("thinking", &oc.thinking, &thinking),
    ] {
        if let Err((message, fix)) = Some(value.trim())
            .filter(|v| !v.is_empty())
            .map_or(Ok(String::new()), check)
        {
            let fix = toml_form(&fix, key);
            out.push(Diagnostic::error(
                file,
                key_line(&text, "openclaw", key),
                "openclaw",
                format!("[openclaw] {message}"),
                fix,
            ));
        }
    }
    // A pattern that reaches outside the workspace is never acted on; say which line.
    for e in loaded.config.workspace.escaping(None) {
        let quoted = [format!("\"{}\"", e.entry), format!("'{}'", e.entry)];
        let line = text
            .lines()
            .position(|l| quoted.iter().any(|q| l.contains(q.as_str())))
            .map(|i| i + 1)
            .or_else(|| key_line(&text, "workspace", e.key));
        out.push(Diagnostic::error(
            file,
            line,
            "workspace",
            e.sentence(),
            crate::config::Escaping::FIX,
        ));
    }
    out.extend(warnings.into_iter().map(|w| {
        let key = if w.contains("weekday") {
            "weekday"
        } else {
            "time"
        };
        Diagnostic::error(
            file,
            key_line(&text, "checkin", key),
            "1.2",
            w,
            match key {
                "weekday" => "write weekday = \"mon\" (mon, tue, wed, thu, fri, sat or sun)",
                _ => "write time = \"09:00\" (24-hour HH:MM, local time)",
            },
        )
    }));
    out
}

/// The one finding for a config.toml that does not load: where, what, and the form wanted.
pub(super) fn unreadable(file: &Path, e: &crate::config::ConfigError) -> Diagnostic {
    Diagnostic::error(
        file,
        e.line.trim_start_matches(':').parse().ok(),
        "config",
        e.message.clone(),
        e.fix.clone(),
    )
}

/// The line of config.toml a preflight problem is about: the `program` of the
/// `[executors.<name>]` it names, else `[worker] executor`.
pub(super) fn line_named(text: &str, why: &str) -> Option<usize> {
    if let Some(rest) = why.split("[executors.").nth(1) {
        let name = rest.split(']').next().unwrap_or_default();
        let table = format!("executors.{name}");
        return key_line(text, &table, "program").or_else(|| key_line(text, &table, "permission"));
    }
    if why.contains("[openclaw] program") {
        return key_line(text, "openclaw", "program");
    }
    if why.contains("[worker] command") {
        return key_line(text, "worker", "command");
    }
    key_line(text, "worker", "executor")
}

/// A PROJECT.md fix (`` `Model: a/b` ``) as config.toml writes it (`` `model = "a/b"` ``).
fn toml_form(fix: &str, key: &str) -> String {
    let field = format!("`{}: ", capitalised(key));
    let mut out = String::new();
    let mut rest = fix;
    while let Some(at) = rest.find(&field) {
        let after = &rest[at + field.len()..];
        let Some(end) = after.find('`') else { break };
        out.push_str(&rest[..at]);
        out.push_str(&format!("`{key} = \"{}\"`", &after[..end]));
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    out
}

/// `copy` → `Copy`, as PROJECT.md spells its fields.
pub(super) fn capitalised(key: &str) -> String {
    let mut c = key.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

/// The line of `key = …` inside the TOML table `[table]`.
pub(super) fn key_line(text: &str, table: &str, key: &str) -> Option<usize> {
    let mut inside = false;
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        if t.starts_with('[') {
            inside = t.trim_start_matches('[').trim_end_matches(']').trim() == table;
        } else if inside && t.split('=').next().map(str::trim) == Some(key) {
            return Some(i + 1);
        }
    }
    None
}
