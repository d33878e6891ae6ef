//! Whole-file conversions between the markdown and the EDN forms, for `braids migrate`. Each
//! refuses a file with errors (what cannot be read cannot be carried) and any part the other
//! form has no place for, naming it; each checks its result by reading it back into the same
//! model as its source before it is returned. HTML comments in markdown are guidance for
//! people, not values, and are not carried.

use std::path::Path;

use clojure_reader::parse::{Node, NodeKind};

use crate::format::fields::{self, normalize_key};
use crate::format::iteration::{self as md_iteration, Iteration};
use crate::format::project::{self as md_project, ProjectConfig, FIELDS};
use crate::format::registry::{self as md_registry, Registry, REGISTRY_TEMPLATE};
use crate::model::{IterationName, NotificationEvent, Priority, ProjectStatus};
use crate::system::diag::{Diagnostic, Parsed, Severity};
use crate::system::paths::Paths;

use super::edit::edn_string;
use super::project::{kebab, one_line};
use super::{pairs, text_of};

/// Settings whose value is a keyword in EDN, and those that are a whole number.
const KEYWORDS: &[&str] = &["status", "priority", "autonomy", "checkin"];
const NUMBERS: &[&str] = &[
    "max-workers",
    "worker-timeout",
    "stall-timeout",
    "cpus",
    "gpus",
];

fn no_errors<T>(p: Parsed<T>, file: &Path) -> Result<T, String> {
    let (v, d) = p.into_parts();
    match d.iter().find(|d| d.severity == Severity::Error) {
        Some(e) => Err(format!(
            "{} has errors, so it is not converted (fix them first; `braids check` lists them): {}",
            file.display(),
            short(e)
        )),
        None => Ok(v),
    }
}

fn short(d: &Diagnostic) -> String {
    match d.line {
        Some(l) => format!("line {l}: {}", d.message),
        None => d.message.clone(),
    }
}

/// A markdown value as EDN: a keyword or a number where the setting is one, the EDN it already
/// is for a key braids does not know (so `[1 2]` stays a vector), else a string.
fn edn_value(key: &str, value: &str) -> String {
    let v = fields::clean_value(value);
    if KEYWORDS.contains(&key)
        && !v.is_empty()
        && v.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
    {
        return format!(":{}", v.to_ascii_lowercase());
    }
    if NUMBERS.contains(&key) && !v.is_empty() && v.chars().all(|c| c.is_ascii_digit()) {
        return v.to_string();
    }
    let known = FIELDS.iter().any(|f| kebab(f) == key) || key == "name";
    if !known && is_literal(value.trim()) {
        return value.trim().to_string();
    }
    edn_string(if known { v } else { value.trim() })
}

/// Whether `s` reads as exactly one EDN value other than a symbol.
fn is_literal(s: &str) -> bool {
    matches!(super::parse(s), Ok(n) if !matches!(n.kind, NodeKind::Symbol(_)))
}

/// An EDN value as a markdown field's value: known settings as their plain text; for other
/// keys a string bare (quoted if bare it would read as another value) and anything else as its
/// EDN source, so it comes back as it was.
fn md_value(text: &str, key: &str, node: &Node<'_>) -> String {
    let known = FIELDS.iter().any(|f| kebab(f) == key);
    if known {
        return one_line(text, node);
    }
    match (&node.kind, text_of(node)) {
        (NodeKind::Str(_), Some(s)) if !is_literal(&s) && !s.contains('\n') && s.trim() == s => s,
        _ => text
            .get(node.span.0.ptr..node.span.1.ptr)
            .unwrap_or("")
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" "),
    }
}

/// The markdown key for an EDN key: the documented spelling for a setting braids reads.
fn md_key(key: &str) -> String {
    FIELDS
        .iter()
        .find(|f| kebab(f) == key)
        .map_or(key.to_string(), |f| (*f).to_string())
}

/// The EDN key for a markdown key as written.
fn edn_key(raw: &str) -> String {
    if let Some(f) = FIELDS
        .iter()
        .find(|f| normalize_key(f) == normalize_key(raw))
    {
        return kebab(f);
    }
    let mut out = String::new();
    for c in fields::clean_value(raw).chars() {
        match c {
            c if c.is_alphanumeric() || c == '?' || c == '_' => out.extend(c.to_lowercase()),
            _ if !out.is_empty() && !out.ends_with('-') => out.push('-'),
            _ => {}
        }
    }
    out.trim_end_matches('-').to_string()
}

/// The lines of a markdown file split at its `## ` headings: the head (title and fields)
/// and each section's `(name, 1-based line, body)`. HTML comments are dropped.
/// A markdown file's head lines `(line, text)` and its `## ` sections `(name, line, body)`.
type Split = (Vec<(usize, String)>, Vec<(String, usize, String)>);

fn sections(text: &str) -> Split {
    let mut head = Vec::new();
    let mut out: Vec<(String, usize, String)> = Vec::new();
    let mut fence = false;
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        if t.starts_with("```") || t.starts_with("~~~") {
            fence = !fence;
        }
        if !fence && t.starts_with("## ") {
            out.push((t[3..].trim().to_string(), i + 1, String::new()));
            continue;
        }
        let t = if t.starts_with("<!--") && t.ends_with("-->") {
            ""
        } else {
            line
        };
        match out.last_mut() {
            Some((_, _, body)) => {
                body.push_str(t);
                body.push('\n');
            }
            None => head.push((i + 1, t.to_string())),
        }
    }
    for s in &mut out {
        s.2 = s.2.trim().to_string();
    }
    (head, out)
}

/// The field lines of a head, `(line, edn key, value)`; prose there is refused.
fn head_fields(
    head: &[(usize, String)],
    file: &Path,
) -> Result<Vec<(usize, String, String)>, String> {
    let mut out = Vec::new();
    for (line, text) in head {
        let t = text.trim();
        if t.is_empty() || t.starts_with("# ") {
            continue;
        }
        match fields::parse_line(t) {
            Some((k, v)) => out.push((*line, edn_key(&k), v.trim().to_string())),
            None => {
                return Err(format!(
                    "{} line {line} is text that is not a field (`{t}`), which the EDN form has no place for; move it into a section such as Notes, or delete it",
                    file.display()
                ))
            }
        }
    }
    Ok(out)
}

/// A section body as EDN: a vector of its items when every line is a `- ` item, else a string.
fn edn_items(body: &str) -> String {
    let lines: Vec<&str> = body.lines().filter(|l| !l.trim().is_empty()).collect();
    if !lines.is_empty() && lines.iter().all(|l| l.starts_with("- ")) {
        let items: Vec<String> = lines.iter().map(|l| edn_string(l[2..].trim())).collect();
        format!("[{}]", items.join(" "))
    } else {
        edn_string(body)
    }
}

/// An EDN section value as markdown: a vector's items as `- ` lines, a string as it is.
fn md_items(text: &str, node: &Node<'_>) -> String {
    match &node.kind {
        NodeKind::Vector(items, _) | NodeKind::List(items, _) => items
            .iter()
            .map(|i| format!("- {}\n", one_line(text, i)))
            .collect(),
        _ => format!("{}\n", text_of(node).unwrap_or_default().trim_end()),
    }
}

fn refuse_sections(
    secs: &[(String, usize, String)],
    known: &[&str],
    file: &Path,
) -> Result<(), String> {
    match secs.iter().find(|(n, _, _)| !known.contains(&normalize_key(n).as_str())) {
        Some((n, line, _)) => Err(format!(
            "{} line {line}: the section `## {n}` has no place in the EDN form, so the file is not converted; move its text into {} or delete it",
            file.display(),
            known.join(" or ")
        )),
        None => Ok(()),
    }
}

/// What two reads of a project must agree on for a conversion to have lost nothing.
fn project_view(c: &ProjectConfig) -> impl PartialEq + std::fmt::Debug {
    let trim = |s: &Option<String>| {
        s.as_deref().map(|s| {
            s.lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(|l| l.trim_start_matches("- ").to_string())
                .collect::<Vec<_>>()
        })
    };
    (
        (
            c.name.clone(),
            c.status,
            c.priority,
            c.autonomy,
            c.max_workers,
            c.worker_timeout,
            c.stall_timeout,
        ),
        (
            c.checkin,
            c.channel.clone(),
            c.notifications.clone(),
            trim(&c.goal),
            trim(&c.guardrails),
        ),
        c.fields.iter().map(|f| f.key.clone()).collect::<Vec<_>>(),
    )
}

fn same<T: PartialEq + std::fmt::Debug>(a: T, b: T, file: &Path) -> Result<(), String> {
    if a == b {
        return Ok(());
    }
    Err(format!(
        "{} would not read the same after conversion ({a:?} became {b:?}), so it is not converted; convert it by hand",
        file.display()
    ))
}

/// PROJECT.md text as config.edn.
pub fn project_to_edn(text: &str, file: &Path) -> Result<String, String> {
    let cfg = no_errors(md_project::parse_project(text, file), file)?;
    let (head, secs) = sections(text);
    refuse_sections(&secs, &["goal", "guardrails", "notifications"], file)?;
    let mut parts: Vec<String> = Vec::new();
    if let Some(n) = &cfg.name {
        parts.push(format!(":name {}", edn_string(n)));
    }
    for (_, key, value) in head_fields(&head, file)? {
        parts.push(format!(":{key} {}", edn_value(&key, &value)));
    }
    let events = &cfg.notifications.events;
    if !events.is_empty() {
        let on: Vec<String> = events
            .iter()
            .map(|(e, s)| format!(":{e} {}", s.on))
            .collect();
        parts.push(format!(":notifications {{{}}}", on.join(" ")));
        let who: Vec<String> = events
            .iter()
            .filter_map(|(e, s)| {
                let m = s.mention.as_deref()?;
                let v: Vec<String> = m.split_whitespace().map(edn_string).collect();
                Some(format!(":{e} [{}]", v.join(" ")))
            })
            .collect();
        if !who.is_empty() {
            parts.push(format!(":notification-mentions {{{}}}", who.join(" ")));
        }
    }
    for (name, _, body) in &secs {
        let key = normalize_key(name);
        if key != "notifications" && !body.is_empty() {
            parts.push(format!(":{key} {}", edn_items(body)));
        }
    }
    let out = format!("{{{}}}\n", parts.join("\n "));
    let back = no_errors(super::parse_project(&out, file), file)?;
    same(project_view(&cfg), project_view(&back), file)?;
    Ok(out)
}

/// config.edn text as PROJECT.md.
pub fn project_to_md(text: &str, file: &Path) -> Result<String, String> {
    let cfg = no_errors(super::parse_project(text, file), file)?;
    let top = super::top(text, file, "1.2", "").map_err(|d| d.to_string())?;
    let ps = pairs(&top).unwrap_or_default();
    let mut out = format!(
        "# {}\n\n",
        cfg.name.clone().unwrap_or_else(|| "Project".into())
    );
    for p in ps.iter().filter(|p| {
        ![
            "name",
            "notifications",
            "notification-mentions",
            "goal",
            "guardrails",
        ]
        .contains(&p.key.as_str())
    }) {
        out.push_str(&format!(
            "- **{}:** {}\n",
            md_key(&p.key),
            md_value(text, &p.key, p.value)
        ));
    }
    for key in ["goal", "guardrails"] {
        if let Some(p) = ps.iter().find(|p| p.key == key) {
            let title = if key == "goal" { "Goal" } else { "Guardrails" };
            out.push_str(&format!("\n## {title}\n\n{}", md_items(text, p.value)));
        }
    }
    if !cfg.notifications.events.is_empty() {
        out.push_str("\n## Notifications\n\n| Event | Enabled |\n|---|---|\n");
        for e in NotificationEvent::ALL {
            if let Some(s) = cfg.notifications.events.get(e) {
                let on = if s.on { "on" } else { "off" };
                match &s.mention {
                    Some(m) => out.push_str(&format!("| {e} | {on} (mention {m}) |\n")),
                    None => out.push_str(&format!("| {e} | {on} |\n")),
                }
            }
        }
    }
    let back = no_errors(md_project::parse_project(&out, file), file)?;
    same(project_view(&cfg), project_view(&back), file)?;
    Ok(out)
}

fn iteration_view(it: &Iteration) -> impl PartialEq + std::fmt::Debug {
    let mut stories: Vec<_> = it
        .stories
        .iter()
        .chain(&it.maybe_stories)
        .map(|s| (s.line, s.id.clone(), s.title.clone()))
        .collect();
    // Stable: stories written on one line keep their order.
    stories.sort_by_key(|s| s.0);
    let items = |s: &Option<String>| {
        s.as_deref()
            .map(|s| {
                s.lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty() && !l.starts_with("<!--"))
                    .map(|l| l.trim_start_matches("- ").to_string())
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default()
    };
    (
        it.status,
        stories
            .into_iter()
            .map(|(_, i, t)| (i, t))
            .collect::<Vec<_>>(),
        items(&it.notes),
        items(&it.guardrails),
    )
}

/// ITERATION.md text as iteration.edn.
pub fn iteration_to_edn(text: &str, file: &Path, name: IterationName) -> Result<String, String> {
    let dir = file.parent().unwrap_or(Path::new("")).to_path_buf();
    let it = no_errors(
        md_iteration::parse_iteration(text, file, name, dir.clone()),
        file,
    )?;
    let (head, secs) = sections(text);
    refuse_sections(
        &secs,
        &["stories", "userstories", "beads", "guardrails", "notes"],
        file,
    )?;
    let mut parts = vec![format!(":number {}", edn_string(name.as_str()))];
    for (_, key, value) in head_fields(&head, file)? {
        if key != "number" {
            parts.push(format!(":{key} {}", edn_value(&key, &value)));
        }
    }
    let mut stories: Vec<_> = it.stories.iter().chain(&it.maybe_stories).collect();
    stories.sort_by_key(|s| s.line);
    let stories: Vec<String> = stories
        .iter()
        .map(|s| {
            format!(
                "{{:id {} :title {}}}",
                edn_string(s.id.as_str()),
                edn_string(&s.title)
            )
        })
        .collect();
    parts.push(format!(":stories [{}]", stories.join("\n           ")));
    for (key, body) in [("guardrails", &it.guardrails), ("notes", &it.notes)] {
        if let Some(b) = body.as_deref().map(str::trim).filter(|b| !b.is_empty()) {
            parts.push(format!(":{key} {}", edn_items(b)));
        }
    }
    let out = format!("{{{}}}\n", parts.join("\n "));
    let back = no_errors(super::parse_iteration(&out, file, name, dir), file)?;
    same(iteration_view(&it), iteration_view(&back), file)?;
    Ok(out)
}

/// iteration.edn text as ITERATION.md.
pub fn iteration_to_md(text: &str, file: &Path, name: IterationName) -> Result<String, String> {
    let dir = file.parent().unwrap_or(Path::new("")).to_path_buf();
    let it = no_errors(super::parse_iteration(text, file, name, dir.clone()), file)?;
    let top = super::top(text, file, "1.3", "").map_err(|d| d.to_string())?;
    let ps = pairs(&top).unwrap_or_default();
    let mut out = format!("# Iteration {name}\n\n");
    for p in ps
        .iter()
        .filter(|p| !["number", "stories", "notes", "guardrails"].contains(&p.key.as_str()))
    {
        out.push_str(&format!(
            "- **{}:** {}\n",
            md_key(&p.key),
            md_value(text, &p.key, p.value)
        ));
    }
    out.push_str("\n## Stories\n\n");
    if let Some(NodeKind::Vector(items, _)) = ps
        .iter()
        .find(|p| p.key == "stories")
        .map(|p| &p.value.kind)
    {
        for i in items {
            let story = pairs(i).unwrap_or_default();
            if let Some(extra) = story.iter().find(|q| q.key != "id" && q.key != "title") {
                return Err(format!("{} line {}: a story's `:{}` has no place in ITERATION.md, so the file is not converted; delete it or keep the EDN form", file.display(), extra.line, extra.key));
            }
            let get = |k: &str| {
                story
                    .iter()
                    .find(|q| q.key == k)
                    .map(|q| one_line(text, q.value))
                    .unwrap_or_default()
            };
            out.push_str(&format!("- {}: {}\n", get("id"), get("title")));
        }
    }
    for (key, title) in [("guardrails", "Guardrails"), ("notes", "Notes")] {
        if let Some(p) = ps.iter().find(|p| p.key == key) {
            out.push_str(&format!("\n## {title}\n\n{}", md_items(text, p.value)));
        }
    }
    let back = no_errors(md_iteration::parse_iteration(&out, file, name, dir), file)?;
    same(iteration_view(&it), iteration_view(&back), file)?;
    Ok(out)
}

fn registry_view(r: &Registry) -> Vec<(String, Option<ProjectStatus>, Option<Priority>, String)> {
    r.entries
        .iter()
        .map(|e| (e.slug.clone(), e.status, e.priority, e.raw_path.clone()))
        .collect()
}

/// registry.md text as registry.edn. Extra columns are refused.
pub fn registry_to_edn(text: &str, file: &Path, paths: &Paths) -> Result<String, String> {
    let reg = no_errors(md_registry::parse_registry(text, file, paths), file)?;
    let header = text.lines().enumerate().find(|(_, l)| {
        let n = normalize_key(l);
        l.contains('|') && n.contains("slug") && n.contains("path")
    });
    if let Some((i, h)) = header {
        let cells = h
            .trim()
            .trim_matches('|')
            .split('|')
            .filter(|c| !c.trim().is_empty())
            .count();
        if cells > 4 {
            return Err(format!("{} line {}: the table has columns beyond Slug, Status, Priority and Path, which registry.edn has no place for; delete them or keep registry.md", file.display(), i + 1));
        }
    }
    let rows: Vec<String> = reg
        .entries
        .iter()
        .map(|e| {
            let mut m = format!("{{:slug {}", edn_string(&e.slug));
            if let Some(s) = e.status {
                m.push_str(&format!(" :status :{s}"));
            }
            if let Some(p) = e.priority {
                m.push_str(&format!(" :priority :{p}"));
            }
            m.push_str(&format!(" :path {}}}", edn_string(&e.raw_path)));
            m
        })
        .collect();
    let out = format!("{{:projects [{}]}}\n", rows.join("\n            "));
    let back = no_errors(super::parse_registry(&out, file, paths), file)?;
    same(registry_view(&reg), registry_view(&back), file)?;
    Ok(out)
}

/// registry.edn text as registry.md. Keys other than the four columns are refused.
pub fn registry_to_md(text: &str, file: &Path, paths: &Paths) -> Result<String, String> {
    let reg = no_errors(super::parse_registry(text, file, paths), file)?;
    let top = super::top(text, file, "1.1", "").map_err(|d| d.to_string())?;
    let ps = pairs(&top).unwrap_or_default();
    if let Some(p) = ps.iter().find(|p| p.key != "projects") {
        return Err(format!("{} line {}: `:{}` has no place in registry.md, so it is not converted; delete it or keep registry.edn", file.display(), p.line, p.key));
    }
    if let Some(NodeKind::Vector(items, _)) = ps.first().map(|p| &p.value.kind) {
        for q in items.iter().flat_map(|i| pairs(i).unwrap_or_default()) {
            if !["slug", "status", "priority", "path"].contains(&q.key.as_str()) {
                return Err(format!("{} line {}: `:{}` has no column in registry.md, so it is not converted; delete it or keep registry.edn", file.display(), q.line, q.key));
            }
        }
    }
    let mut out = REGISTRY_TEMPLATE.to_string();
    for e in &reg.entries {
        let cell = |v: Option<String>| v.unwrap_or_default();
        out.push_str(&format!(
            "| {} | {} | {} | {} |\n",
            e.slug,
            cell(e.status.map(|s| s.to_string())),
            cell(e.priority.map(|p| p.to_string())),
            e.raw_path.replace('|', "\\|")
        ));
    }
    let back = no_errors(md_registry::parse_registry(&out, file, paths), file)?;
    same(registry_view(&reg), registry_view(&back), file)?;
    Ok(out)
}
