//! braids' EDN files (CONTRACTS 1.7): `registry.edn`, a project's `config.edn` and an
//! iteration's `iteration.edn`, the layout of the braids this one replaces.
//!
//! Each reader turns the EDN into the markdown form's field lines in memory (one line per
//! value, each remembering the EDN line it came from) and runs the markdown reader over them,
//! so both forms share every rule, default and diagnostic; the diagnostics are then moved back
//! to the EDN file's lines and their fixes name EDN keys. Syntax comes from `clojure-reader`'s
//! syntax tree, whose byte spans also let [`edit`] change one value and keep every other byte.

pub mod convert;
pub mod edit;
mod iteration;
mod project;
mod registry;

use std::path::Path;

use clojure_reader::edn::Edn;
use clojure_reader::parse::{Node, NodeKind, SourceReader};

use crate::system::diag::{Diagnostic, Diags, Parsed};

pub use iteration::parse_iteration;
pub use project::parse_project;
pub use registry::parse_registry;

/// One `:key value` pair of a map, with where it was written.
pub(crate) struct Pair<'n, 'e> {
    /// The key without its colon (a string or symbol key as written).
    pub key: String,
    pub line: usize,
    pub value: &'n Node<'e>,
}

/// The whole file as one syntax tree, or the error a person can act on.
pub(crate) fn parse(text: &str) -> Result<Node<'_>, (Option<usize>, String)> {
    let mut reader = SourceReader::new(text);
    let node = clojure_reader::parse::parse(&mut reader).map_err(|e| {
        (
            e.line,
            format!(
                "it is not valid EDN ({})",
                describe(&format!("{:?}", e.code))
            ),
        )
    })?;
    let rest = reader.remaining();
    let trailing = rest
        .lines()
        .map(|l| l.split(';').next().unwrap_or("").trim())
        .any(|l| !l.is_empty());
    if trailing {
        let line = node.span.1.line;
        return Err((
            Some(line),
            "more than one form: the file must be a single map".to_string(),
        ));
    }
    // Duplicate keys and bad tags are caught when the tree becomes values.
    Edn::try_from(node.clone()).map_err(|e| {
        (
            e.line,
            format!(
                "it is not valid EDN ({})",
                describe(&format!("{:?}", e.code))
            ),
        )
    })?;
    Ok(node)
}

fn describe(code: &str) -> String {
    match code {
        "UnexpectedEOF" => "it ends before every `{`, `[` or `\"` is closed".into(),
        "HashMapDuplicateKey" => "a map has the same key twice".into(),
        c if c.starts_with("UnmatchedDelimiter") => {
            format!("a closing bracket does not match: {c}")
        }
        c => c.to_string(),
    }
}

/// The pairs of a map node, in file order.
pub(crate) fn pairs<'n, 'e>(node: &'n Node<'e>) -> Option<Vec<Pair<'n, 'e>>> {
    let NodeKind::Map(entries, _) = &node.kind else {
        return None;
    };
    Some(
        entries
            .iter()
            .map(|(k, v)| Pair {
                key: match &k.kind {
                    NodeKind::Key(s) | NodeKind::Symbol(s) => (*s).to_string(),
                    NodeKind::Str(_) => text_of(k).unwrap_or_default(),
                    _ => String::new(),
                },
                line: k.span.0.line,
                value: v,
            })
            .collect(),
    )
}

/// A scalar as the markdown form writes it: `:active` → `active`, strings decoded, `nil` →
/// `none`; a vector of scalars joined with `, `. `None` for a map or a nested collection.
pub(crate) fn text_of(node: &Node<'_>) -> Option<String> {
    match &node.kind {
        NodeKind::Vector(items, _) | NodeKind::List(items, _) => items
            .iter()
            .map(scalar)
            .collect::<Option<Vec<_>>>()
            .map(|v| v.join(", ")),
        _ => scalar(node),
    }
}

fn scalar(node: &Node<'_>) -> Option<String> {
    let edn = Edn::try_from(node.clone()).ok()?;
    Some(match &edn {
        Edn::Key(k) => k.to_string(),
        Edn::Symbol(s) => s.to_string(),
        Edn::Str(s) => s.to_string(),
        Edn::Int(n) => n.to_string(),
        Edn::Double(d) => d.to_string(),
        Edn::Bool(b) => b.to_string(),
        Edn::Nil => "none".to_string(),
        Edn::Char(c) => c.to_string(),
        _ => return None,
    })
}

/// The markdown text a reader runs over, and for each of its lines the EDN line it stands for.
#[derive(Default)]
pub(crate) struct Synth {
    pub text: String,
    lines: Vec<usize>,
}

impl Synth {
    /// Adds `line` (split at line breaks, each part standing for `from`).
    pub fn push(&mut self, line: &str, from: usize) {
        for part in line.split('\n') {
            self.text.push_str(part.trim_end_matches('\r'));
            self.text.push('\n');
            self.lines.push(from);
        }
    }

    /// The EDN line a line of [`Synth::text`] stands for.
    pub fn line_of(&self, synth_line: usize) -> usize {
        synth_line
            .checked_sub(1)
            .and_then(|i| self.lines.get(i))
            .copied()
            .unwrap_or(synth_line)
    }

    /// `parsed`'s diagnostics moved onto the EDN file's lines, their fixes in EDN words.
    pub fn remap<T>(&self, parsed: Parsed<T>, words: &[(&str, &str)]) -> (T, Vec<Diagnostic>) {
        let (value, diags) = parsed.into_parts();
        let diags = diags
            .into_iter()
            .map(|mut d| {
                d.line = d.line.map(|l| self.line_of(l));
                for (md, edn) in words {
                    d.fix = d.fix.replace(md, edn);
                    d.message = d.message.replace(md, edn);
                }
                d
            })
            .collect();
        (value, diags)
    }
}

/// The top-level map of `text`, or a diagnostic saying why there is none.
pub(crate) fn top<'e>(
    text: &'e str,
    file: &Path,
    section: &'static str,
    shape: &str,
) -> Result<Node<'e>, Diagnostic> {
    let mut diags = Diags::new(file, section);
    match parse(text) {
        Ok(node) if matches!(node.kind, NodeKind::Map(..)) => return Ok(node),
        Ok(node) => diags.error(
            Some(node.span.0.line),
            "the file is not an EDN map, so nothing in it is read",
            format!("write the file as one map: {shape}"),
        ),
        Err((line, why)) => diags.error(
            line,
            format!("the file cannot be read: {why}, so nothing in it is read"),
            format!("fix the EDN at that line (the file is one map: {shape})"),
        ),
    };
    Err(diags.into_vec().remove(0))
}

#[cfg(test)]
mod tests;
