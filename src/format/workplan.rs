//! WORKPLAN.md, the native tracker's file (`<project>/.braids/WORKPLAN.md`): a markdown
//! checklist, read into items and edited one line at a time.
//!
//! ```markdown
//! # WORKPLAN
//!
//! ## Phase 1: Foundation
//!
//! - [x] Set up project structure <!-- id:wp-k2f -->
//! - [ ] Create base window component <!-- id:wp-3kq, status:in_progress, assignee:braids -->
//!   Indented lines under an item are its description.
//! - [ ] Add window snapping <!-- id:wp-9za, priority:1, deps:wp-3kq, slice:windows -->
//! ```
//!
//! * An item is a `-`/`*`/`+` checkbox line indented by at most three columns (a checkbox
//!   indented two or more columns right under another item belongs to that item's
//!   description). Structure comes from `format::md`, as for every other reader: a checkbox
//!   inside a code block, an HTML block or comment, a blockquote or front matter is not a
//!   task. A UTF-8 BOM and CRLF line endings are tolerated and kept.
//! * `[x]`/`[X]` is closed. An unchecked item is open unless its metadata says
//!   `status:in_progress`, `blocked` or `deferred`.
//! * Metadata is the trailing `<!-- key:value, key:value -->` comment ([`Meta`]).
//! * Every item gets a stable id, `wp-` plus three base-36 characters from a hash of its title
//!   and position (longer on collision), written into its metadata the first time braids reads
//!   a file lacking one ([`assign_ids`]). From then on the id lives in the file, so retitling
//!   or reordering items keeps it.
//! * Writers (`edit.rs`) change only the affected item's line (its checkbox and its metadata
//!   comment), or append lines; every other byte is kept. Locking and atomic writes are the
//!   tracker's (the `workplan` tracker adapter).

mod edit;
mod meta;

use std::collections::HashSet;

use crate::model::{Bead, BeadId, BeadStatus};

use super::md::{Doc, OPAQUE};

pub use edit::{append_item, assign_ids, fresh_id, rewrite_item};
pub use meta::{meta_safe, meta_value, Meta};

/// The priority of an item whose metadata names none.
pub const DEFAULT_PRIORITY: u8 = 2;

/// One checklist item as found in the text.
#[derive(Debug, Clone)]
pub struct Item {
    pub checked: bool,
    /// Byte offset of the character between the brackets.
    check_at: usize,
    pub title: String,
    pub meta: Meta,
    /// Byte range of the metadata comment, when the line has one.
    meta_span: Option<(usize, usize)>,
    /// Where a new metadata comment goes: the end of the line's text, before trailing blanks.
    insert_at: usize,
    pub description: String,
}

/// The items of a WORKPLAN.md text, in file order.
#[derive(Debug, Clone, Default)]
pub struct Checklist {
    pub items: Vec<Item>,
}

/// Columns of leading whitespace (a tab counts to the next multiple of four) and the rest.
fn indentation(line: &str) -> (usize, &str) {
    let mut cols = 0;
    for (i, c) in line.char_indices() {
        match c {
            ' ' => cols += 1,
            '\t' => cols += 4 - cols % 4,
            _ => return (cols, &line[i..]),
        }
    }
    (cols, "")
}

/// `- [ ] rest` (also `*`, `+`, `[x]`, `[X]`): the checkbox character's offset in `rest` and
/// what follows the closing bracket.
fn checkbox(rest: &str) -> Option<(usize, char, &str)> {
    let mut chars = rest.char_indices();
    let (_, marker) = chars.next()?;
    if !matches!(marker, '-' | '*' | '+') {
        return None;
    }
    let after_marker = &rest[1..];
    let spaces = after_marker.len() - after_marker.trim_start_matches([' ', '\t']).len();
    if spaces == 0 {
        return None;
    }
    let open = 1 + spaces;
    let b = rest.as_bytes();
    if b.len() < open + 3 || b[open] != b'[' || b[open + 2] != b']' {
        return None;
    }
    let state = b[open + 1] as char;
    if !matches!(state, ' ' | 'x' | 'X') {
        return None;
    }
    let tail = &rest[open + 3..];
    if !(tail.is_empty() || tail.starts_with([' ', '\t'])) {
        return None;
    }
    Some((open + 1, state, tail))
}

/// Reads line text `line`, starting at byte `at` of the file, as an item.
fn item_line(line: &str, at: usize) -> Option<Item> {
    let (_, rest) = indentation(line);
    let (check_rel, state, tail) = checkbox(rest)?;
    let check_at = at + (line.len() - rest.len()) + check_rel;
    let tail_at = at + line.len() - tail.len();
    let trimmed = tail.trim_end();
    let insert_at = tail_at + trimmed.len();
    let mut title_part = trimmed;
    let mut meta = Meta::default();
    let mut meta_span = None;
    if trimmed.ends_with("-->") {
        if let Some(open) = trimmed.rfind("<!--") {
            let body = &trimmed[open + 4..trimmed.len() - 3];
            if let Some(m) = Meta::parse(body) {
                meta = m;
                meta_span = Some((tail_at + open, insert_at));
                title_part = &trimmed[..open];
            }
        }
    }
    Some(Item {
        checked: state != ' ',
        check_at,
        title: title_part.trim().to_string(),
        meta,
        meta_span,
        insert_at,
        description: String::new(),
    })
}

/// The markdown structure of `text`, reading an empty task box (`- [ ]` alone) as if it had
/// text. pulldown-cmark gives such an item no paragraph, so an unindented next line ends the
/// list instead of continuing the item, until an id is written after the box; reading a file
/// before and after its ids are written must find the same items. Only the box character
/// changes, so byte offsets stay valid.
fn structure(text: &str) -> Doc<'_> {
    let mut doc = Doc::new(text);
    let empty_boxes: Vec<usize> = doc
        .lines
        .iter()
        .enumerate()
        .filter_map(|(i, l)| {
            let line = doc.raw_line(i);
            let (_, rest) = indentation(line);
            let (check_rel, _, tail) = checkbox(rest)?;
            tail.trim()
                .is_empty()
                .then_some(l.start + (line.len() - rest.len()) + check_rel)
        })
        .collect();
    if empty_boxes.is_empty() {
        return doc;
    }
    let mut shaped = text.as_bytes().to_vec();
    for at in empty_boxes {
        shaped[at] = b'_';
    }
    // only ASCII bytes changed, so this is still UTF-8
    let shaped = String::from_utf8(shaped).unwrap_or_else(|_| text.to_string());
    doc.lines = Doc::new(&shaped).lines;
    doc
}

impl Item {
    /// Where the item's line is in the text (its checkbox), for placing it under headings.
    pub fn offset(&self) -> usize {
        self.check_at
    }
}

impl Checklist {
    pub fn parse(text: &str) -> Checklist {
        let doc = structure(text);
        let mut items: Vec<Item> = Vec::new();
        // The item whose description is being collected, and its (raw) description lines.
        let mut open_item: Option<usize> = None;
        let mut desc: Vec<&str> = Vec::new();
        for (i, l) in doc.lines.iter().enumerate() {
            let line = doc.raw_line(i);
            let (indent, rest) = indentation(line);
            if open_item.is_some() && (indent >= 2 || rest.trim().is_empty()) {
                desc.push(line);
                continue;
            }
            if let Some(n) = open_item.take() {
                items[n].description = dedent(&desc);
                desc.clear();
            }
            if indent > 3 || doc.has(i, OPAQUE) {
                continue;
            }
            if let Some(item) = item_line(line, l.start) {
                items.push(item);
                open_item = Some(items.len() - 1);
            }
        }
        if let Some(n) = open_item {
            items[n].description = dedent(&desc);
        }
        Checklist { items }
    }

    pub fn needs_ids(&self) -> bool {
        let mut seen = HashSet::new();
        self.items
            .iter()
            .any(|i| i.meta.id().is_none_or(|id| !seen.insert(id)))
    }

    pub fn ids(&self) -> HashSet<BeadId> {
        self.items.iter().filter_map(|i| i.meta.id()).collect()
    }

    /// The first item carrying `id`.
    pub fn find(&self, id: &BeadId) -> Option<&Item> {
        self.items.iter().find(|i| i.meta.id().as_ref() == Some(id))
    }

    /// Every item as a bead, in file order; titles and descriptions are moved, not copied.
    pub fn into_beads(self) -> Vec<Bead> {
        self.items
            .into_iter()
            .map(|mut item| {
                let title = std::mem::take(&mut item.title);
                let description = std::mem::take(&mut item.description);
                Bead {
                    title,
                    description,
                    ..item_bead(&item)
                }
            })
            .collect()
    }

    pub fn bead(&self, item: &Item) -> Bead {
        item_bead(item)
    }
}

/// One item as a bead.
fn item_bead(item: &Item) -> Bead {
    let status = if item.checked {
        BeadStatus::Closed
    } else {
        match item.meta.get("status").map(BeadStatus::parse) {
            Some(
                s @ (BeadStatus::InProgress
                | BeadStatus::Blocked
                | BeadStatus::Deferred
                | BeadStatus::Unknown),
            ) => s,
            // An unchecked box is open whatever stale metadata says.
            _ => BeadStatus::Open,
        }
    };
    let priority = item
        .meta
        .get("priority")
        .and_then(|p| p.trim().trim_start_matches(['P', 'p']).parse::<u8>().ok())
        .map_or(DEFAULT_PRIORITY, |p| p.min(4));
    Bead {
        id: item
            .meta
            .id()
            .unwrap_or_else(|| BeadId::new("wp-unassigned").expect("valid id")),
        title: item.title.clone(),
        status,
        priority,
        description: item.description.clone(),
        dependencies: item.meta.deps(),
        assignee: item.meta.get("assignee").map(str::to_string),
        labels: Vec::new(),
        url: None,
    }
}

/// Removes the indentation common to the non-blank lines and trailing blank lines.
fn dedent(lines: &[&str]) -> String {
    let last = match lines.iter().rposition(|l| !l.trim().is_empty()) {
        Some(n) => n,
        None => return String::new(),
    };
    let lines = &lines[..=last];
    let common = lines
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| indentation(l).0)
        .min()
        .unwrap_or(0);
    lines
        .iter()
        .map(|l| {
            let mut cols = 0;
            let mut cut = l.len();
            for (i, c) in l.char_indices() {
                if cols >= common || !(c == ' ' || c == '\t') {
                    cut = i;
                    break;
                }
                cols += if c == '\t' { 4 - cols % 4 } else { 1 };
            }
            l[cut.min(l.len())..].trim_end()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Removes what `assign_ids` adds: ` <!-- id:wp-x -->` comments and `id:wp-x, ` entries.
    pub(super) fn strip_ids(s: &str) -> String {
        let mut out = s.to_string();
        let mut from = 0;
        while let Some(rel) = out[from..].find("id:wp-") {
            let at = from + rel;
            let id_end = at
                + 6
                + out[at + 6..]
                    .chars()
                    .take_while(char::is_ascii_alphanumeric)
                    .count();
            if out[id_end..].starts_with(", ") {
                out.replace_range(at..id_end + 2, "");
            } else if out[id_end..].starts_with(" -->") && out[..at].ends_with(" <!-- ") {
                out.replace_range(at - 6..id_end + 4, "");
            } else {
                from = id_end;
                continue;
            }
            from = at.saturating_sub(6);
        }
        out
    }

    #[test]
    fn parses_items_descriptions_and_fences() {
        let text = "\u{feff}# Plan\r\n\r\n## Phase 1\r\n- [ ] First <!-- priority:1, touches:a,b -->\r\n  line one\r\n\r\n    indented more\r\n* [X] Second\r\n```\r\n- [ ] not a task\r\n```\r\n+ [x] Third <!-- just a note -->\r\n  - [ ] sub task is description\r\n-[ ] no space\r\n- [] no box\r\n";
        let checklist = Checklist::parse(text);
        let titles: Vec<&str> = checklist.items.iter().map(|i| i.title.as_str()).collect();
        assert_eq!(titles, ["First", "Second", "Third <!-- just a note -->"]);
        assert_eq!(
            checklist.items[0].description,
            "line one\n\n  indented more"
        );
        assert_eq!(checklist.items[0].meta.get("touches"), Some("a,b"));
        assert_eq!(
            checklist.items[2].description,
            "- [ ] sub task is description"
        );
        assert!(
            checklist.items[1].checked && checklist.items[2].checked && !checklist.items[0].checked
        );
        let assigned = assign_ids(text);
        assert_eq!(strip_ids(&assigned), text, "only ids were added");
        let again = Checklist::parse(&assigned);
        assert!(!again.needs_ids());
        assert_eq!(
            again.items[0].meta.get("touches"),
            Some("a,b"),
            "unknown keys survive"
        );
    }

    #[test]
    fn structure_is_markdowns_and_ids_do_not_change_it() {
        // a comment or HTML block hides items, as it hides fields from every other reader
        let hidden =
            "- [ ] one\n\n<!--\n- [ ] commented out\n-->\n\n<details>\n- [ ] in html\n</details>\n";
        let titles: Vec<String> = Checklist::parse(hidden)
            .items
            .into_iter()
            .map(|i| i.title)
            .collect();
        assert_eq!(titles, ["one"]);
        // an empty box reads as it will once its id is written after it
        let text = "- [ ]\nj\n  ```rust\n- [ ] task\n";
        let before = Checklist::parse(text).items.len();
        let after = Checklist::parse(&assign_ids(text));
        assert_eq!((before, after.items.len()), (2, 2));
        assert!(!after.needs_ids());
    }
}
