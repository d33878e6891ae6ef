//! Byte-preserving edits of braids' EDN files: one value's bytes replaced, or one pair or one
//! map added before its map's closing brace; comments, spacing, commas and unknown keys stay.

use clojure_reader::parse::{Node, NodeKind};

use crate::model::{IterationStatus, Priority, ProjectStatus};

use super::{pairs, parse, text_of};

fn tree(text: &str) -> Result<Node<'_>, String> {
    match parse(text) {
        Ok(n) if matches!(n.kind, NodeKind::Map(..)) => Ok(n),
        Ok(_) => Err("it is not an EDN map; fix it by hand first".into()),
        Err((line, why)) => Err(format!(
            "{why}{}; fix it by hand first",
            line.map(|l| format!(" at line {l}")).unwrap_or_default()
        )),
    }
}

/// `text` with `:key` of the map `map` set to the EDN source `value`: the old value's bytes
/// replaced where it was written, or ` :key value` added before the closing brace.
fn set_in(text: &str, map: &Node<'_>, key: &str, value: &str) -> String {
    let found = pairs(map)
        .unwrap_or_default()
        .into_iter()
        .find(|p| p.key == key)
        .map(|p| (p.value.span.0.ptr, p.value.span.1.ptr));
    let (at, end, insert) = match found {
        Some((start, end)) => (start, end, value.to_string()),
        None => {
            let close = map.span.1.ptr - 1;
            let empty = text[map.span.0.ptr + 1..close].trim().is_empty();
            let sep = if empty { "" } else { " " };
            (close, close, format!("{sep}:{key} {value}"))
        }
    };
    format!("{}{insert}{}", &text[..at], &text[end..])
}

/// An iteration.edn's text with `:status` set: one value changed, every other byte kept. A
/// complete iteration is never reopened (4.5).
pub fn set_iteration_status(text: &str, status: IterationStatus) -> Result<String, String> {
    let top = tree(text)?;
    let now = pairs(&top)
        .unwrap_or_default()
        .into_iter()
        .find(|p| p.key == "status")
        .and_then(|p| text_of(p.value))
        .and_then(|v| IterationStatus::parse(&v).ok());
    if now == Some(status) {
        return Ok(text.to_string());
    }
    if now == Some(IterationStatus::Complete) {
        return Err(format!(
            "the iteration is complete and complete iterations never change, so it is not set to {status}"
        ));
    }
    Ok(set_in(text, &top, "status", &format!(":{status}")))
}

/// A registry.edn's text with project `slug` at `status`, `priority` and `path`: the values
/// that differ are replaced in its map, or a new map is added at the end of `:projects`.
pub fn upsert_project(
    text: &str,
    slug: &str,
    status: ProjectStatus,
    priority: Priority,
    path: &str,
) -> Result<String, String> {
    crate::model::validate_slug(slug).map_err(|e| e.to_string())?;
    let text = if text.trim().is_empty() {
        "{:projects []}\n"
    } else {
        text
    };
    let top = tree(text)?;
    let top_pairs = pairs(&top).unwrap_or_default();
    let Some(projects) = top_pairs.iter().find(|p| p.key == "projects") else {
        let new = format!("[{}]", project_map(slug, status, priority, path));
        return Ok(set_in(text, &top, "projects", &new));
    };
    let NodeKind::Vector(items, _) = &projects.value.kind else {
        return Err("`:projects` is not a vector; fix it by hand first".into());
    };
    let mine = items.iter().find(|i| {
        pairs(i)
            .unwrap_or_default()
            .iter()
            .any(|p| p.key == "slug" && text_of(p.value).as_deref() == Some(slug))
    });
    let Some(mine) = mine else {
        let close = projects.value.span.1.ptr - 1;
        let sep = match items.last() {
            None => String::new(),
            // The new map goes on its own line, indented like the one before it.
            Some(last) => {
                let line_start = text[..last.span.0.ptr].rfind('\n').map_or(0, |i| i + 1);
                let indent = &text[line_start..last.span.0.ptr];
                if indent.trim().is_empty() {
                    format!("\n{indent}")
                } else {
                    " ".to_string()
                }
            }
        };
        let new = project_map(slug, status, priority, path);
        return Ok(format!("{}{sep}{new}{}", &text[..close], &text[close..]));
    };
    // Edits from the end of the map backwards, so earlier spans stay valid.
    let mut out = text.to_string();
    let wanted = [
        ("path", edn_string(path)),
        ("priority", format!(":{priority}")),
        ("status", format!(":{status}")),
    ];
    for (key, value) in wanted {
        let tree = tree(&out)?;
        let projects = pairs(&tree)
            .unwrap_or_default()
            .into_iter()
            .find(|p| p.key == "projects")
            .map(|p| p.value.clone());
        let Some(Node {
            kind: NodeKind::Vector(items, _),
            ..
        }) = projects
        else {
            return Err("`:projects` changed while it was edited".into());
        };
        let Some(map) = items.iter().find(|i| i.span.0.ptr == mine.span.0.ptr) else {
            return Err("the project's map moved while it was edited".into());
        };
        let current = pairs(map)
            .unwrap_or_default()
            .into_iter()
            .find(|p| p.key == key)
            .and_then(|p| text_of(p.value));
        let plain = value.trim_start_matches(':').trim_matches('"');
        if current.as_deref() != Some(plain) {
            out = set_in(&out, map, key, &value);
        }
    }
    Ok(out)
}

fn project_map(slug: &str, status: ProjectStatus, priority: Priority, path: &str) -> String {
    format!(
        "{{:slug {} :status :{status} :priority :{priority} :path {}}}",
        edn_string(slug),
        edn_string(path)
    )
}

/// A string as EDN writes it.
pub fn edn_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
