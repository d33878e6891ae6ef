//! ITERATION.md and iteration directories (CONTRACTS 1.3, 4.5).
//!
//! An iteration lives in `.braids/iterations/<N>/` where N is any decimal number (`001`, `1`,
//! `12`), ordered numerically. Its ITERATION.md has a Status field (planning, active, complete)
//! written in any of the forms [`super::fields`] accepts, a Stories section listing
//! `- <bead-id>: <title>` entries in order (bold, backticks, task boxes and dashes tolerated),
//! and optional Guardrails and Notes sections.
//!
//! [`set_status`] changes only the Status value where it was written, whatever its form, so a
//! status change is a one-word diff; it refuses to reopen a complete iteration (4.5).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context};

use crate::diag::{Diagnostic, Parsed};
use crate::model::{BeadId, IterationStatus};

use super::fields::{self, clean_value, normalize_key};
use super::md::{self, Doc, Table, FIELD, OPAQUE};

const SECTION: &str = "1.3";

/// Headings of the Stories section, in order of preference.
const STORY_HEADINGS: &[&str] = &["stories", "user stories", "beads"];
/// Sections whose lines are content, not fields.
const CONTENT_SECTIONS: &[&str] = &["stories", "user stories", "beads", "guardrails", "notes"];

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Iteration {
    pub number: u32,
    /// The directory as named (`001`, `1`, `12`).
    pub dir: PathBuf,
    pub status: Option<IterationStatus>,
    pub stories: Vec<Story>,
    pub guardrails: Option<String>,
    pub notes: Option<String>,
}

impl Iteration {
    /// The iteration's ITERATION.md.
    pub fn file(&self) -> PathBuf {
        self.dir.join("ITERATION.md")
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Story {
    pub id: BeadId,
    pub title: String,
    pub line: usize,
}

/// `<project_root>/.braids/iterations`.
pub fn iterations_dir(project_root: &Path) -> PathBuf {
    project_root.join(".braids").join("iterations")
}

/// Reads ITERATION.md text. Never fails.
pub fn parse_iteration(text: &str, file: &Path, number: u32, dir: PathBuf) -> Parsed<Iteration> {
    let doc = Doc::new(text);
    let mut diags = Vec::new();
    let raw = fields::first_only(
        fields::scan(&doc, CONTENT_SECTIONS),
        file,
        SECTION,
        &mut diags,
    );
    let status = match raw.iter().find(|f| f.field.key == "status") {
        None => {
            diags.push(Diagnostic::error(
                file,
                None,
                SECTION,
                "required field Status is missing, so the iteration's status is unknown",
                "add the line `Status: planning` (or active, complete) below the title",
            ));
            None
        }
        Some(f) if f.field.value.trim().is_empty() => {
            diags.push(Diagnostic::error(
                file,
                Some(f.field.line),
                SECTION,
                "field Status is empty, so the iteration's status is unknown",
                format!("write planning, active or complete after `{}:`", f.raw_key),
            ));
            None
        }
        Some(f) => match IterationStatus::parse(fields::strip_decor(&f.field.value)) {
            Ok(s) => Some(s),
            Err(e) => {
                diags.push(Diagnostic::error(
                    file,
                    Some(f.field.line),
                    SECTION,
                    format!(
                        "Status `{}` is not one of {}, so the iteration's status is unknown",
                        e.value, e.expected
                    ),
                    format!("write planning, active or complete after `{}:`", f.raw_key),
                ));
                None
            }
        },
    };
    let stories = read_stories(&doc, file, &mut diags);
    let section = |name: &str| {
        doc.find_heading(name)
            .map(|h| doc.raw_lines(doc.section_body(h)))
            .filter(|s| !s.is_empty())
    };
    let iteration = Iteration {
        number,
        dir,
        status,
        stories,
        guardrails: section("guardrails"),
        notes: section("notes"),
    };
    diags.sort_by_key(|d| d.line);
    Parsed::new(iteration, diags)
}

/// What one list entry of the Stories section is.
#[derive(Debug, PartialEq)]
enum StoryLine {
    Story(BeadId, String),
    /// Something before a separator that is not a bead id, and why.
    BadId(String, String),
    /// No `id: title` shape at all.
    NotStory,
}

fn read_stories(doc: &Doc, file: &Path, diags: &mut Vec<Diagnostic>) -> Vec<Story> {
    let Some(h) = STORY_HEADINGS.iter().find_map(|n| doc.find_heading(n)) else {
        return Vec::new();
    };
    let body = doc.section_body(h);
    let mut found: Vec<Story> = Vec::new();
    for i in body.clone() {
        if !doc.has(i, FIELD) {
            continue;
        }
        let s = doc.line(i);
        let (c, marker) = md::content_start(s);
        if !marker {
            continue;
        }
        match parse_story(&s[c..]) {
            StoryLine::Story(id, title) => found.push(Story {
                id,
                title,
                line: i + 1,
            }),
            StoryLine::BadId(id, why) => diags.push(Diagnostic::error(
                file,
                Some(i + 1),
                SECTION,
                format!(
                    "story `{}` does not start with a valid bead id ({why}), so it is ignored",
                    id.escape_debug()
                ),
                "write the entry as `- <bead-id>: <title>`, with the id the tracker gave the bead",
            )),
            StoryLine::NotStory => diags.push(Diagnostic::warning(
                file,
                Some(i + 1),
                SECTION,
                "this Stories entry is not of the form `<bead-id>: <title>`, so it is ignored",
                "write the entry as `- <bead-id>: <title>`, or move the text to the Notes section",
            )),
        }
    }
    for t in doc.tables(body) {
        table_stories(doc, &t, &mut found);
    }
    found.sort_by_key(|s| s.line);
    let mut seen: HashMap<BeadId, usize> = HashMap::new();
    let mut out = Vec::with_capacity(found.len());
    for s in found {
        if let Some(first) = seen.get(&s.id) {
            diags.push(Diagnostic::warning(
                file,
                Some(s.line),
                SECTION,
                format!(
                    "story {} is listed again (first on line {first}), so this entry is ignored",
                    s.id
                ),
                format!("delete line {} or line {first}", s.line),
            ));
            continue;
        }
        seen.insert(s.id.clone(), s.line);
        out.push(s);
    }
    out
}

/// Stories written as a table with an id column and a title column.
fn table_stories(doc: &Doc, t: &Table, out: &mut Vec<Story>) {
    let names: Vec<String> = t
        .header
        .cells
        .iter()
        .map(|c| normalize_key(clean_value(doc.cell(c))))
        .collect();
    let id_col = names.iter().position(|h| {
        matches!(
            h.as_str(),
            "id" | "bead" | "beadid" | "storyid" | "ticket" | "key"
        )
    });
    let Some(id_col) = id_col else {
        return;
    };
    let title_col = names.iter().enumerate().position(|(i, h)| {
        i != id_col
            && matches!(
                h.as_str(),
                "title" | "name" | "summary" | "description" | "story"
            )
    });
    for row in &t.rows {
        let cell = |i: usize| {
            row.cells
                .get(i)
                .map(|c| clean_value(doc.cell(c)))
                .unwrap_or("")
        };
        if let Ok(id) = BeadId::new(cell(id_col)) {
            let title = title_col.map(cell).unwrap_or("").to_string();
            out.push(Story {
                id,
                title,
                line: row.line + 1,
            });
        }
    }
}

fn is_mark(b: u8) -> bool {
    matches!(b, b'*' | b'_' | b'`')
}

/// Parses the text of a Stories entry after its list marker.
fn parse_story(s: &str) -> StoryLine {
    let b = s.as_bytes();
    // leading emoji and opening marks: `**`, `` ` ``, `[`
    let mut i = s.len();
    let mut open = 0usize;
    let mut underscore = false;
    for (k, c) in s.char_indices() {
        if c.is_ascii() && (is_mark(c as u8) || c == '[') {
            open += 1;
            underscore |= c == '_';
        } else if !(c.is_whitespace() || (!c.is_ascii() && !c.is_alphanumeric())) {
            i = k;
            break;
        }
    }
    let id_start = i;
    while i < b.len() && (b[i].is_ascii_alphanumeric() || matches!(b[i], b'-' | b'_' | b'.')) {
        i += 1;
    }
    let mut id_end = i;
    while id_end > id_start && (b[id_end - 1] == b'.' || (underscore && b[id_end - 1] == b'_')) {
        id_end -= 1;
    }
    // closing marks, a link target, spaces
    let mut j = id_end;
    let mut closed = false;
    loop {
        while j < b.len() && (is_mark(b[j]) || b[j] == b']' || b[j] == b' ' || b[j] == b'\t') {
            closed |= b[j] != b' ' && b[j] != b'\t';
            j += 1;
        }
        if j > 0 && j < b.len() && b[j] == b'(' && b[j - 1] == b']' {
            match s[j..].find(')') {
                Some(k) => j += k + 1,
                None => break,
            }
        } else {
            break;
        }
    }
    let rest = &s[j..];
    let spaced = j > id_end && b[j - 1] == b' ';
    let sep = if rest.starts_with(':') {
        1
    } else if rest.starts_with('—') || rest.starts_with('–') {
        3
    } else if spaced && (rest.starts_with("- ") || rest == "-") {
        1
    } else {
        0
    };
    if sep > 0 && id_end > id_start {
        let id_text = &s[id_start..id_end];
        if !id_text.bytes().any(|b| b.is_ascii_digit() || b == b'-') && BeadId::new(id_text).is_ok()
        {
            // a plain word (`TBD:`, `Note:`) is prose, not an id: ids carry a digit or a dash
            return StoryLine::NotStory;
        }
        return match BeadId::new(id_text) {
            Ok(id) => {
                let mut title = rest[sep..].trim();
                if open > 0 && !closed {
                    // `**id:** title`
                    title = title.trim_start_matches(['*', '_', '`']).trim_start();
                }
                StoryLine::Story(id, title.to_string())
            }
            Err(e) => StoryLine::BadId(id_text.to_string(), e.to_string()),
        };
    }
    // not the expected shape: if it still has `something: title`, the something is a bad id
    match s.find(':') {
        Some(k) if k > 0 && k <= 80 => {
            let cand =
                clean_value(s[..k].trim_matches(|c: char| {
                    (c.is_ascii() && is_mark(c as u8)) || c.is_whitespace()
                }));
            match BeadId::new(cand) {
                Err(e) if !cand.is_empty() => StoryLine::BadId(cand.to_string(), e.to_string()),
                _ => StoryLine::NotStory,
            }
        }
        _ => StoryLine::NotStory,
    }
}

/// Iteration directories of a project, `(number, path)`, sorted numerically (`001`, `2`,
/// `10`); names that are not decimal numbers are ignored, as is a missing directory.
pub fn list_iteration_dirs(project_root: &Path) -> Vec<(u32, PathBuf)> {
    let Ok(rd) = std::fs::read_dir(iterations_dir(project_root)) else {
        return Vec::new();
    };
    let mut out: Vec<(u32, PathBuf)> = rd
        .flatten()
        .filter_map(|e| {
            let name = e.file_name();
            let name = name.to_str()?;
            if name.is_empty() || name.len() > 9 || !name.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let n = name.parse().ok()?;
            let p = e.path();
            p.is_dir().then_some((n, p))
        })
        .collect();
    out.sort();
    out
}

/// Reads every iteration of a project in order. An iteration directory without ITERATION.md is
/// an error and skipped; two directories with one number and two active iterations are errors.
pub fn read_iterations(project_root: &Path) -> Parsed<Vec<Iteration>> {
    let mut diags = Vec::new();
    let mut out = Vec::new();
    let dirs = list_iteration_dirs(project_root);
    for w in dirs.windows(2) {
        if w[0].0 == w[1].0 {
            diags.push(Diagnostic::error(
                &w[1].1,
                None,
                SECTION,
                format!(
                    "directories {} and {} are both iteration {}",
                    w[0].1.display(),
                    w[1].1.display(),
                    w[0].0
                ),
                "rename one of them to an unused number",
            ));
        }
    }
    for (n, dir) in dirs {
        let file = dir.join("ITERATION.md");
        match crate::atomic::read(&file) {
            Ok(bytes) => {
                let p = parse_iteration(&super::decode(&bytes), &file, n, dir);
                diags.extend(p.diagnostics);
                out.push(p.value);
            }
            Err(e) => {
                let msg = if e.kind() == std::io::ErrorKind::NotFound {
                    format!("iteration {n} has no ITERATION.md, so it is skipped")
                } else {
                    format!("iteration {n}'s ITERATION.md cannot be read ({e}), so it is skipped")
                };
                diags.push(Diagnostic::error(
                    &file,
                    None,
                    SECTION,
                    msg,
                    "create ITERATION.md with a `Status: planning` line (`braids iteration new` writes one)",
                ));
            }
        }
    }
    let active: Vec<&Iteration> = out
        .iter()
        .filter(|i| i.status == Some(IterationStatus::Active))
        .collect();
    if active.len() > 1 {
        let numbers = active
            .iter()
            .map(|i| i.number.to_string())
            .collect::<Vec<_>>()
            .join(", ");
        for it in &active[1..] {
            diags.push(Diagnostic::error(
                &it.file(),
                None,
                SECTION,
                format!("{} active iterations ({numbers}), but a project has at most one active iteration", active.len()),
                "set every iteration but one to planning or complete",
            ));
        }
    }
    Parsed::new(out, diags)
}

/// Sets the Status value of ITERATION.md text, changing nothing else: the value is replaced
/// where it was written (list item, bold, table cell, heading, front matter), wrapping emphasis
/// kept; without a Status field, `Status: <s>` is inserted after the H1 (or at the top).
/// Setting the status it already has returns the text unchanged; changing a complete
/// iteration is refused, since complete iterations are immutable (4.5).
///
/// The result is read back before it is returned: a text where the new Status would not read
/// as written (a Status value whose replacement changes the markdown structure around it, such
/// as one inside a broken code span) is an error to fix by hand, never a silent no-op.
pub fn set_status(text: &str, status: IterationStatus) -> Result<String, String> {
    let new = set_status_in_place(text, status)?;
    if new == text {
        return Ok(new);
    }
    let read = |t: &str| {
        let it = parse_iteration(t, Path::new("ITERATION.md"), 0, PathBuf::new()).value;
        let stories: Vec<(BeadId, String)> =
            it.stories.into_iter().map(|s| (s.id, s.title)).collect();
        (it.status, stories)
    };
    let ((_, before), (after, stories)) = (read(text), read(&new));
    if after != Some(status) || stories != before {
        return Err(format!(
            "the Status field cannot be changed to {status} without changing how the rest of the file reads; set it by hand (a line `Status: {status}` below the title)"
        ));
    }
    Ok(new)
}

fn set_status_in_place(text: &str, status: IterationStatus) -> Result<String, String> {
    let doc = Doc::new(text);
    let raw = fields::scan(&doc, CONTENT_SECTIONS);
    let Some(f) = raw.iter().find(|f| f.field.key == "status") else {
        return Ok(insert_status(&doc, status));
    };
    let current = IterationStatus::parse(fields::strip_decor(&f.field.value)).ok();
    if current == Some(status) {
        return Ok(text.to_string());
    }
    if current == Some(IterationStatus::Complete) {
        return Err(format!(
            "line {}: the iteration is complete, and complete iterations are immutable (4.5); it cannot become {status}",
            f.field.line
        ));
    }
    let (range, new) = match (&f.cell, f.span.is_empty()) {
        (Some(inner), true) => (inner.clone(), format!(" {status} ")),
        (_, true) => {
            let before = text[..f.span.start].chars().next_back();
            let sep = if before.is_some_and(|c| c.is_whitespace()) {
                ""
            } else {
                " "
            };
            (f.span.clone(), format!("{sep}{status}"))
        }
        (cell, false) => {
            let old = &text[f.span.clone()];
            let wrap = ["**", "__", "`", "*", "_"]
                .into_iter()
                .find(|w| old.len() > 2 * w.len() && old.starts_with(w) && old.ends_with(w))
                .unwrap_or("");
            let mut new = format!("{wrap}{status}{wrap}");
            if cell.is_some() {
                let (o, n) = (old.chars().count(), new.chars().count());
                if n < o {
                    new.extend(std::iter::repeat_n(' ', o - n));
                }
            }
            (f.span.clone(), new)
        }
    };
    let mut out = String::with_capacity(text.len() + 16);
    out.push_str(&text[..range.start]);
    out.push_str(&new);
    out.push_str(&text[range.end..]);
    Ok(out)
}

/// Inserts `Status: <s>` as its own paragraph after the H1, after front matter, or at the top:
/// the first of those places where it is read back as the Status. (An H1 can open a section
/// whose lines are content, not fields, as `# Stories` does; a Status put there would not be
/// read, and the iteration would silently keep its old status.)
fn insert_status(doc: &Doc, status: IterationStatus) -> String {
    let h1 = doc.headings.iter().find(|h| h.level == 1).map(|h| h.last);
    let places = [h1, front_matter_end(doc), None];
    let mut out = String::new();
    for (k, after) in places.iter().enumerate() {
        if k < 2 && after.is_none() {
            continue;
        }
        out = insert_status_after(doc, status, *after);
        let reads = fields::scan(&Doc::new(&out), CONTENT_SECTIONS)
            .iter()
            .any(|f| f.field.key == "status");
        if reads {
            break;
        }
    }
    out
}

fn insert_status_after(doc: &Doc, status: IterationStatus, after: Option<usize>) -> String {
    let text = doc.text;
    let eol = doc.eol();
    let line = format!("Status: {status}");
    let mut out = String::with_capacity(text.len() + line.len() + 4);
    match after {
        Some(i) => {
            let l = &doc.lines[i];
            if l.next > l.end {
                let next_blank = i + 1 >= doc.lines.len() || doc.is_blank(i + 1);
                out.push_str(&text[..l.next]);
                out.push_str(eol);
                out.push_str(&line);
                out.push_str(eol);
                if !next_blank {
                    out.push_str(eol);
                }
                out.push_str(&text[l.next..]);
            } else {
                out.push_str(text);
                out.push_str(eol);
                out.push_str(eol);
                out.push_str(&line);
                out.push_str(eol);
            }
        }
        None => {
            let start = if text.starts_with('\u{feff}') { 3 } else { 0 };
            out.push_str(&text[..start]);
            out.push_str(&line);
            out.push_str(eol);
            if !text[start..].trim().is_empty() {
                out.push_str(eol);
                out.push_str(&text[start..]);
            }
        }
    }
    out
}

/// The closing `---` line of YAML front matter at the top, if any.
fn front_matter_end(doc: &Doc) -> Option<usize> {
    if !doc.has(0, OPAQUE) || doc.raw_line(0).trim_start_matches('\u{feff}').trim_end() != "---" {
        return None;
    }
    (1..doc.lines.len())
        .take_while(|&i| doc.has(i, OPAQUE))
        .find(|&i| matches!(doc.raw_line(i).trim_end(), "---" | "..."))
}

/// Sets the status in an ITERATION.md file with [`set_status`], atomically, keeping a BOM.
/// Refuses files that are not UTF-8 rather than rewrite bytes it cannot read.
pub fn write_status(file: &Path, status: IterationStatus) -> anyhow::Result<()> {
    let bytes = std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
    let (bom, body) = match bytes.strip_prefix(b"\xEF\xBB\xBF") {
        Some(rest) => (&bytes[..3], rest),
        None => (&bytes[..0], &bytes[..]),
    };
    let text = std::str::from_utf8(body).map_err(|_| {
        anyhow!(
            "{} is not valid UTF-8; fix it by hand before changing its status",
            file.display()
        )
    })?;
    let new = set_status(text, status).map_err(|e| anyhow!("{}: {e}", file.display()))?;
    if new == text {
        return Ok(());
    }
    let mut out = Vec::with_capacity(bom.len() + new.len());
    out.extend_from_slice(bom);
    out.extend_from_slice(new.as_bytes());
    crate::atomic::write(file, &out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diag::Severity;

    fn parse(text: &str) -> Parsed<Iteration> {
        parse_iteration(
            text,
            Path::new("/p/.braids/iterations/001/ITERATION.md"),
            1,
            PathBuf::from("/p/.braids/iterations/001"),
        )
    }

    fn id(s: &str) -> BeadId {
        BeadId::new(s).unwrap()
    }

    #[test]
    fn c1_3_status_forms() {
        for (t, s) in [
            (
                "# Iteration 1\n\n- **Status:** active\n",
                IterationStatus::Active,
            ),
            ("Status: planning\n", IterationStatus::Planning),
            ("**Status**: Complete ✅\n", IterationStatus::Complete),
            ("Status: 🚧 active\n", IterationStatus::Active),
            (
                "| Field | Value |\n|---|---|\n| Status | done |\n",
                IterationStatus::Complete,
            ),
            (
                "```\nStatus: complete\n```\nStatus: active\n",
                IterationStatus::Active,
            ),
        ] {
            let p = parse(t);
            assert_eq!(p.value.status, Some(s), "{t:?}");
            assert!(p.diagnostics.is_empty(), "{t:?}: {:?}", p.diagnostics);
        }
        let missing = parse("# It\n\n```\nStatus: complete\n```\n");
        assert_eq!(missing.value.status, None);
        assert_eq!(missing.diagnostics[0].section, "1.3");
        let bad = parse("Status: paused\n");
        assert_eq!(bad.value.status, None);
        assert_eq!(bad.diagnostics[0].line, Some(1));
        assert!(bad.diagnostics[0]
            .message
            .contains("planning active complete"));
    }

    #[test]
    fn c1_3_stories_in_order_with_tolerated_forms() {
        let t = "# Iteration 3\nStatus: active\n\n## Stories\n\n- braids-a1b: Parse the registry\n- **braids-c2d**: Write STATUS.md\n- [ ] braids-e3f: Tick loop\n- [x] `braids-g4h` — Zombie cleanup\n* **braids-i5j:** Bold colon inside\n1. braids-k6l - Dash separated\n- ✅ braids-m7n: Done with emoji\n  - braids-zzz: nested, not a story\n- bad id here: nope\n- just a note\n- braids-a1b: repeated\n\n## Notes\n\n- braids-nnn: not a story either\n";
        let p = parse(t);
        let got: Vec<(&str, &str, usize)> = p
            .value
            .stories
            .iter()
            .map(|s| (s.id.as_str(), s.title.as_str(), s.line))
            .collect();
        assert_eq!(
            got,
            [
                ("braids-a1b", "Parse the registry", 6),
                ("braids-c2d", "Write STATUS.md", 7),
                ("braids-e3f", "Tick loop", 8),
                ("braids-g4h", "Zombie cleanup", 9),
                ("braids-i5j", "Bold colon inside", 10),
                ("braids-k6l", "Dash separated", 11),
                ("braids-m7n", "Done with emoji", 12),
            ]
        );
        let d: Vec<(usize, Severity)> = p
            .diagnostics
            .iter()
            .map(|d| (d.line.unwrap(), d.severity))
            .collect();
        assert_eq!(
            d,
            [
                (14, Severity::Error),
                (15, Severity::Warning),
                (16, Severity::Warning)
            ]
        );
        assert!(
            p.diagnostics[0].message.contains("`bad id here`"),
            "{}",
            p.diagnostics[0].message
        );
        assert_eq!(
            p.value.notes.as_deref(),
            Some("- braids-nnn: not a story either")
        );
    }

    #[test]
    fn stories_table_and_sections() {
        let t = "Status: planning\n\n## User Stories\n\n| ID | Title | Points |\n|---|---|---|\n| `x-1` | First | 3 |\n| x-2 | Second | 5 |\n\n## Guardrails\n\nNo force pushes.\n\n## Notes\n";
        let p = parse(t);
        let ids: Vec<&str> = p.value.stories.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["x-1", "x-2"]);
        assert_eq!(p.value.stories[1].title, "Second");
        assert_eq!(p.value.guardrails.as_deref(), Some("No force pushes."));
        assert_eq!(p.value.notes, None);
        assert!(p.diagnostics.is_empty(), "{:?}", p.diagnostics);
    }

    #[test]
    fn story_line_shapes() {
        assert_eq!(
            parse_story("__a-1__: t"),
            StoryLine::Story(id("a-1"), "t".into())
        );
        assert_eq!(
            parse_story("[a-1](http://x/a-1): t"),
            StoryLine::Story(id("a-1"), "t".into())
        );
        assert_eq!(parse_story("a-1:"), StoryLine::Story(id("a-1"), "".into()));
        assert_eq!(
            parse_story("a-1: **Bold** title"),
            StoryLine::Story(id("a-1"), "**Bold** title".into())
        );
        assert!(matches!(parse_story("a/b: t"), StoryLine::BadId(..)));
        assert!(matches!(
            parse_story(&format!("{}: t", "a".repeat(70))),
            StoryLine::BadId(..)
        ));
        assert_eq!(parse_story("(none yet)"), StoryLine::NotStory);
        assert_eq!(parse_story(""), StoryLine::NotStory);
        assert_eq!(parse_story("TBD: later"), StoryLine::NotStory);
        assert_eq!(
            parse_story("Note: ordered by priority"),
            StoryLine::NotStory
        );
        assert_eq!(
            parse_story("123: numeric ids are ids"),
            StoryLine::Story(id("123"), "numeric ids are ids".into())
        );
    }

    #[test]
    fn c1_3_set_status_changes_one_value() {
        let cases = [
            (
                "# It\n\n- **Status:** planning\n- Owner: me\n",
                "# It\n\n- **Status:** active\n- Owner: me\n",
            ),
            ("Status: **planning**\r\n", "Status: **active**\r\n"),
            ("**Status: planning**\n", "**Status: active**\n"),
            ("Status: planning (waiting on review)\n", "Status: active\n"),
            (
                "| Field | Value |\n|---|---|\n| Status | planning |\n",
                "| Field | Value |\n|---|---|\n| Status | active   |\n",
            ),
            (
                "| Field | Value |\n|---|---|\n| Status | |\n",
                "| Field | Value |\n|---|---|\n| Status | active |\n",
            ),
            ("## Status: planning\n", "## Status: active\n"),
            ("Status:\n", "Status: active\n"),
            ("**Status:**\n", "**Status:** active\n"),
            (
                "Status: planning <!-- since May -->\n",
                "Status: active <!-- since May -->\n",
            ),
            (
                "```\nStatus: planning\n```\nStatus: planning\n",
                "```\nStatus: planning\n```\nStatus: active\n",
            ),
            (
                "---\nstatus: planning\n---\n# T\n",
                "---\nstatus: active\n---\n# T\n",
            ),
        ];
        for (before, after) in cases {
            assert_eq!(
                set_status(before, IterationStatus::Active).unwrap(),
                after,
                "{before:?}"
            );
        }
    }

    #[test]
    fn c1_3_set_status_inserts_when_absent() {
        let s = IterationStatus::Planning;
        assert_eq!(
            set_status("# Iteration 2\n\n## Stories\n", s).unwrap(),
            "# Iteration 2\n\nStatus: planning\n\n## Stories\n"
        );
        assert_eq!(
            set_status("# Iteration 2\r\nIntro\r\n", s).unwrap(),
            "# Iteration 2\r\n\r\nStatus: planning\r\n\r\nIntro\r\n"
        );
        assert_eq!(
            set_status("# Iteration 2", s).unwrap(),
            "# Iteration 2\n\nStatus: planning\n"
        );
        assert_eq!(
            set_status("Iteration 2\n===\n", s).unwrap(),
            "Iteration 2\n===\n\nStatus: planning\n"
        );
        assert_eq!(set_status("", s).unwrap(), "Status: planning\n");
        assert_eq!(
            set_status("# T\rx\r", s).unwrap(),
            "# T\r\rStatus: planning\r\rx\r",
            "old Mac endings stay"
        );
        assert_eq!(
            set_status("Some text\n", s).unwrap(),
            "Status: planning\n\nSome text\n"
        );
        assert_eq!(
            set_status("---\ntitle: x\n---\nBody\n", s).unwrap(),
            "---\ntitle: x\n---\n\nStatus: planning\n\nBody\n"
        );
        assert_eq!(
            set_status("```\nStatus: active\n```\n", s).unwrap(),
            "Status: planning\n\n```\nStatus: active\n```\n"
        );
    }

    #[test]
    fn c4_5_complete_is_immutable() {
        let t = "Status: complete\n";
        assert!(set_status(t, IterationStatus::Active).is_err());
        assert_eq!(set_status(t, IterationStatus::Complete).unwrap(), t);
        let same = "- **Status:** Active (since Monday)\n";
        assert_eq!(set_status(same, IterationStatus::Active).unwrap(), same);
    }

    #[test]
    fn set_status_round_trips_through_the_reader() {
        for t in [
            "# I\n\n- **Status:** planning\n",
            "x\n",
            "| Status | planning |\n|--|--|\n",
            "# I\n\n## Stories\n- a-1: x\n",
        ] {
            let out = set_status(t, IterationStatus::Active).unwrap();
            assert_eq!(
                parse(&out).value.status,
                Some(IterationStatus::Active),
                "{out:?}"
            );
        }
    }

    #[test]
    fn c1_3_directories_sort_numerically() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for n in ["10", "001", "2", "notes", "3a", "0004"] {
            std::fs::create_dir_all(iterations_dir(root).join(n)).unwrap();
        }
        std::fs::write(iterations_dir(root).join("5"), "a file").unwrap();
        let got: Vec<(u32, String)> = list_iteration_dirs(root)
            .into_iter()
            .map(|(n, p)| (n, p.file_name().unwrap().to_string_lossy().into_owned()))
            .collect();
        assert_eq!(
            got,
            [
                (1, "001".into()),
                (2, "2".into()),
                (4, "0004".into()),
                (10, "10".into())
            ]
        );
        assert!(list_iteration_dirs(&root.join("missing")).is_empty());
    }

    #[test]
    fn c1_3_read_iterations() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let it = iterations_dir(root);
        for (n, body) in [
            ("001", Some("Status: complete\n")),
            ("2", Some("Status: active\n")),
            ("3", None),
            ("10", Some("Status: active\n")),
        ] {
            std::fs::create_dir_all(it.join(n)).unwrap();
            if let Some(b) = body {
                std::fs::write(it.join(n).join("ITERATION.md"), b).unwrap();
            }
        }
        let p = read_iterations(root);
        let nums: Vec<u32> = p.value.iter().map(|i| i.number).collect();
        assert_eq!(nums, [1, 2, 10]);
        assert_eq!(p.value[0].dir, it.join("001"));
        assert_eq!(p.diagnostics.len(), 2, "{:?}", p.diagnostics);
        assert!(p.diagnostics[0].path.ends_with("3/ITERATION.md"));
        assert!(p.diagnostics[1].message.contains("2, 10"));
    }

    #[test]
    fn write_status_keeps_bom_and_refuses_garbage() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("ITERATION.md");
        std::fs::write(&f, b"\xEF\xBB\xBF# I\r\n\r\n- **Status:** planning\r\n").unwrap();
        write_status(&f, IterationStatus::Active).unwrap();
        assert_eq!(
            std::fs::read(&f).unwrap(),
            b"\xEF\xBB\xBF# I\r\n\r\n- **Status:** active\r\n"
        );
        std::fs::write(&f, b"Status: planning\n\xff\xfe").unwrap();
        assert!(write_status(&f, IterationStatus::Active).is_err());
        assert!(write_status(&dir.path().join("nope.md"), IterationStatus::Active).is_err());
    }
}
