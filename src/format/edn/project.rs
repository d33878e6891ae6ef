//! A project's `config.edn` (`.braids/config.edn` or `.project/config.edn`), read by the
//! PROJECT.md reader over the same settings.

use std::path::Path;

use clojure_reader::parse::{Node, NodeKind};

use crate::format::project::{self as md, ProjectConfig, FIELDS};
use crate::system::diag::Parsed;

use super::{pairs, text_of, Synth};

const SHAPE: &str = "`{:name \"My app\" :status :active :priority :normal :max-workers 1}`";

/// Keys that are sections of PROJECT.md rather than fields.
const SECTIONS: &[&str] = &[
    "name",
    "notifications",
    "notification-mentions",
    "goal",
    "guardrails",
];

/// `MaxWorkers` → `max-workers`.
pub(crate) fn kebab(field: &str) -> String {
    let mut out = String::new();
    for (i, c) in field.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('-');
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

/// A value on one line: its text, or the source of a collection with whitespace collapsed.
pub(super) fn one_line(text: &str, node: &Node<'_>) -> String {
    let v = text_of(node).unwrap_or_else(|| {
        text.get(node.span.0.ptr..node.span.1.ptr)
            .unwrap_or("")
            .to_string()
    });
    v.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The markdown words of a fix turned into EDN words: `MaxWorkers:` → `:max-workers`.
pub(super) fn words(keys: impl IntoIterator<Item = String>) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for k in keys {
        out.push((format!("`{k}:`"), format!("`:{k}`")));
        out.push((format!("`{k}: "), format!("`:{k} ")));
    }
    for f in FIELDS {
        let k = kebab(f);
        out.push((format!("`{f}:`"), format!("`:{k}`")));
        out.push((format!("`{f}: "), format!("`:{k} ")));
    }
    out.push(("add the line `".into(), "add `".into()));
    out.push(("` below the title".into(), "` to the map".into()));
    out.push(("delete the line".into(), "delete the key".into()));
    out
}

/// Reads config.edn text. Never fails; what is missing or invalid gets PROJECT.md's default
/// and diagnostic, on the EDN line.
pub fn parse_project(text: &str, file: &Path) -> Parsed<ProjectConfig> {
    let top = match super::top(text, file, "1.2", SHAPE) {
        Ok(n) => n,
        Err(d) => return Parsed::new(ProjectConfig::default(), vec![d]),
    };
    let pairs = pairs(&top).unwrap_or_default();
    let mut s = Synth::default();
    let get = |k: &str| pairs.iter().find(|p| p.key == k);
    match get("name") {
        Some(p) => s.push(&format!("# {}", one_line(text, p.value)), p.line),
        None => s.push("", 1),
    }
    for p in pairs.iter().filter(|p| !SECTIONS.contains(&p.key.as_str())) {
        s.push(&format!("{}: {}", p.key, one_line(text, p.value)), p.line);
    }
    notifications(
        text,
        get("notifications"),
        get("notification-mentions"),
        &mut s,
    );
    for name in ["goal", "guardrails"] {
        if let Some(p) = get(name) {
            s.push(&format!("## {name}"), p.line);
            match &p.value.kind {
                NodeKind::Vector(items, _) | NodeKind::List(items, _) => {
                    for i in items {
                        s.push(&format!("- {}", one_line(text, i)), i.span.0.line);
                    }
                }
                _ => s.push(&text_of(p.value).unwrap_or_default(), p.line),
            }
        }
    }
    let parsed = md::parse_project(&s.text, file);
    let words = words(pairs.iter().map(|p| p.key.clone()));
    let words: Vec<(&str, &str)> = words
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    let (mut cfg, diags) = s.remap(parsed, &words);
    for f in &mut cfg.fields {
        f.line = s.line_of(f.line);
    }
    Parsed::new(cfg, diags)
}

/// `:notifications {:question true}` and `:notification-mentions {:question ["<@1>"]}` as the
/// Notifications table.
fn notifications(
    text: &str,
    on: Option<&super::Pair<'_, '_>>,
    mentions: Option<&super::Pair<'_, '_>>,
    s: &mut Synth,
) {
    if on.is_none() && mentions.is_none() {
        return;
    }
    let line = on.or(mentions).map(|p| p.line).unwrap_or(1);
    let on_pairs = on.and_then(|p| pairs(p.value)).unwrap_or_default();
    let mention_pairs = mentions.and_then(|p| pairs(p.value)).unwrap_or_default();
    s.push("## Notifications", line);
    s.push("| Event | Enabled |", line);
    s.push("|---|---|", line);
    let mut events: Vec<&str> = on_pairs.iter().map(|p| p.key.as_str()).collect();
    for m in &mention_pairs {
        if !events.contains(&m.key.as_str()) {
            events.push(&m.key);
        }
    }
    for e in events {
        let o = on_pairs.iter().find(|p| p.key == e);
        let m = mention_pairs.iter().find(|p| p.key == e);
        let switch = o.map_or("on".to_string(), |p| {
            match one_line(text, p.value).as_str() {
                "true" => "on".to_string(),
                "false" | "none" => "off".to_string(),
                other => other.to_string(),
            }
        });
        let cell = match m.map(|p| one_line(text, p.value).replace(", ", " ")) {
            Some(who) if !who.is_empty() => format!("{switch} (mention {who})"),
            _ => switch,
        };
        let at = o.or(m).map_or(line, |p| p.line);
        s.push(&format!("| {e} | {} |", cell.replace('|', "\\|")), at);
    }
}
