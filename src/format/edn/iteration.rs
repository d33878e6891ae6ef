//! An iteration's `iteration.edn`, read by the ITERATION.md reader.

use std::path::{Path, PathBuf};

use crate::format::iteration::{self as md, Iteration};
use crate::model::IterationName;
use crate::system::diag::{Diags, Parsed};

use super::project::{one_line, words};
use super::{pairs, Synth};

const SHAPE: &str = "`{:number \"001\" :status :planning :stories [{:id \"app-1\" :title \"…\"}]}`";

/// Reads iteration.edn text. Never fails.
pub fn parse_iteration(
    text: &str,
    file: &Path,
    name: impl Into<IterationName>,
    dir: PathBuf,
) -> Parsed<Iteration> {
    let name = name.into();
    let top = match super::top(text, file, "1.3", SHAPE) {
        Ok(n) => n,
        Err(d) => {
            let (it, _) = md::parse_iteration("", file, name, dir).into_parts();
            return Parsed::new(it, vec![d]);
        }
    };
    let pairs = pairs(&top).unwrap_or_default();
    let mut more = Diags::new(file, "1.3");
    let mut s = Synth::default();
    s.push(&format!("# Iteration {name}"), 1);
    for p in pairs
        .iter()
        .filter(|p| !["stories", "notes", "guardrails"].contains(&p.key.as_str()))
    {
        s.push(&format!("{}: {}", p.key, one_line(text, p.value)), p.line);
    }
    if let Some(p) = pairs.iter().find(|p| p.key == "number") {
        let n = one_line(text, p.value);
        if IterationName::new(&n).map(|n| n.number()).ok() != Some(name.number()) {
            more.warn(
                Some(p.line),
                format!("`:number \"{n}\"` is not the directory's number {name}; the directory's is used"),
                format!("write `:number \"{name}\"`"),
            );
        }
    }
    for section in ["stories", "guardrails", "notes"] {
        let Some(p) = pairs.iter().find(|p| p.key == section) else {
            continue;
        };
        s.push(&format!("## {section}"), p.line);
        let items = match &p.value.kind {
            clojure_reader::parse::NodeKind::Vector(items, _)
            | clojure_reader::parse::NodeKind::List(items, _) => items.iter().collect(),
            _ => vec![p.value],
        };
        for i in items {
            let line = i.span.0.line;
            let entry = match (section, pairs_of(i)) {
                ("stories", Some(story)) => {
                    let field = |k: &str| {
                        story
                            .iter()
                            .find(|q| q.key == k)
                            .map(|q| one_line(text, q.value))
                    };
                    match field("id") {
                        Some(id) => format!("- {id}: {}", field("title").unwrap_or_default()),
                        None => {
                            more.error(
                                Some(line),
                                "this story has no `:id`, so it is not part of the iteration",
                                "add `:id \"<bead-id>\"` with the id the tracker gave the bead",
                            );
                            continue;
                        }
                    }
                }
                _ => format!("- {}", one_line(text, i)),
            };
            s.push(&entry, line);
        }
    }
    let parsed = md::parse_iteration(&s.text, file, name, dir);
    let words = words(pairs.iter().map(|p| p.key.clone()));
    let words: Vec<(&str, &str)> = words
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    let (mut it, mut diags) = s.remap(parsed, &words);
    for story in it.stories.iter_mut().chain(it.maybe_stories.iter_mut()) {
        story.line = s.line_of(story.line);
    }
    diags.extend(more.into_vec());
    diags.sort_by_key(|d| d.line);
    Parsed::new(it, diags)
}

fn pairs_of<'n, 'e>(node: &'n clojure_reader::parse::Node<'e>) -> Option<Vec<super::Pair<'n, 'e>>> {
    pairs(node)
}
