//! `registry.edn`: `{:projects [{:slug "x" :status :active :priority :high :path "~/x"}]}`,
//! read by the registry.md reader over the same table.

use std::path::Path;

use crate::format::registry::{self as md, Registry};
use crate::system::diag::{Diags, Parsed};
use crate::system::paths::Paths;

use super::project::one_line;
use super::{pairs, Synth};

const SHAPE: &str =
    "`{:projects [{:slug \"app\" :status :active :priority :normal :path \"~/Projects/app\"}]}`";

/// The cell words of registry.md's fixes in EDN words.
const WORDS: &[(&str, &str)] = &[
    ("in the Status cell", "as `:status`"),
    ("in the Priority cell", "as `:priority`"),
    ("in the Slug cell", "as `:slug`"),
    ("in the Path cell", "as `:path`"),
    ("an empty Path", "an empty `:path`"),
    ("the same Path as", "the same `:path` as"),
    ("this registry row", "this project"),
    ("delete the row", "delete the project's map"),
    ("its row is ignored", "it is ignored"),
    ("this row is ignored", "this project is ignored"),
];

/// Reads registry.edn text. Never fails: unusable projects are skipped with a diagnostic.
pub fn parse_registry(text: &str, file: &Path, paths: &Paths) -> Parsed<Registry> {
    let top = match super::top(text, file, "1.1", SHAPE) {
        Ok(n) => n,
        Err(d) => return Parsed::new(Registry::default(), vec![d]),
    };
    let top_pairs = pairs(&top).unwrap_or_default();
    let mut more = Diags::new(file, "1.1");
    let Some(projects) = top_pairs.iter().find(|p| p.key == "projects") else {
        more.warn(
            None,
            "the registry has no `:projects`, so no project is scheduled",
            format!("write the projects as {SHAPE} (`braids new` adds one)"),
        );
        return more.parsed(Registry::default());
    };
    let items = match &projects.value.kind {
        clojure_reader::parse::NodeKind::Vector(items, _)
        | clojure_reader::parse::NodeKind::List(items, _) => items.iter().collect::<Vec<_>>(),
        _ => {
            more.error(
                Some(projects.line),
                "`:projects` is not a vector of maps, so no project is scheduled",
                format!("write it as {SHAPE}"),
            );
            return more.parsed(Registry::default());
        }
    };
    let mut s = Synth::default();
    s.push("| Slug | Status | Priority | Path |", projects.line);
    s.push("|---|---|---|---|", projects.line);
    for item in items {
        let line = item.span.0.line;
        let Some(p) = pairs(item) else {
            more.error(
                Some(line),
                "this entry of `:projects` is not a map, so it is ignored",
                "write each project as `{:slug \"app\" :status :active :priority :normal :path \"~/Projects/app\"}`",
            );
            continue;
        };
        let cell = |k: &str| {
            p.iter()
                .find(|q| q.key == k)
                .map(|q| one_line(text, q.value).replace('|', "\\|"))
                .unwrap_or_default()
        };
        for q in &p {
            if let Some(like) = ["slug", "status", "priority", "path"]
                .iter()
                .find(|k| **k != q.key && strsim::damerau_levenshtein(k, &q.key) <= 1)
            {
                if !p.iter().any(|o| o.key == *like) {
                    more.warn(
                        Some(q.line),
                        format!("key `:{}` is not one braids reads, so it is ignored; did you mean `:{like}`?", q.key),
                        format!("rename it to `:{like}`"),
                    );
                }
            }
        }
        let row = format!(
            "| {} | {} | {} | {} |",
            cell("slug"),
            cell("status"),
            cell("priority"),
            cell("path")
        );
        s.push(&row, line);
    }
    let parsed = md::parse_registry(&s.text, file, paths);
    let (mut reg, mut diags) = s.remap(parsed, WORDS);
    diags.extend(more.into_vec());
    diags.sort_by_key(|d| d.line);
    // The table's lines are the EDN lines of the projects' maps.
    for e in &mut reg.entries {
        e.line = s.line_of(e.line);
    }
    Parsed::new(reg, diags)
}
