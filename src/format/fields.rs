//! Field extraction shared by PROJECT.md and ITERATION.md (CONTRACTS 1.2, 1.3, 3.9).
//!
//! A field is written in any of the ways people and agents actually write one:
//! `- **Status:** active`, `**Status:** active`, `**Status**: active`, `Status: active`,
//! `- Status: active`, `* Status: active`, `1. Status: active`, `- [x] Status: active`,
//! `` `Status`: active ``, `🚦 **Status:** active`, `## Status: active`, YAML front matter, or a
//! row of a two-column field table (`| Field | Value |`, header in any case). Keys are
//! normalised (`MaxWorkers`, `Max Workers`, `max_workers`, `Max-Workers (count)` are one key).
//! Values are kept verbatim — `on (mention <@123>)` stays whole; the enum parsers ignore trailing
//! commentary.
//!
//! Only top-level text counts: paragraphs and first-level list items. Fenced and indented code
//! blocks, HTML blocks and comments, quoted lines (`>`) and nested lists are never read as
//! fields, so a code block showing `Status: complete` cannot complete anything. (A line without
//! `>` that CommonMark folds into a preceding quote as a lazy continuation was not quoted by its
//! author and is read.) The first occurrence of a key wins; a repeated key is a warning.

use std::collections::HashMap;
use std::ops::Range;
use std::path::Path;

use crate::system::diag::{Diags, Parsed};

use super::md::{self, Doc, FIELD};

/// One `Key: value` field as written, with its 1-based line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    /// Normalised by [`normalize_key`]: lowercase letters and digits only, a trailing
    /// parenthetical dropped (`Max Workers (count)` → `maxworkers`). Compare with [`key_is`].
    pub key: String,
    /// The value as written, trimmed; a closing emphasis mark that belongs to the key
    /// (`**Status: active**`) is removed.
    pub value: String,
    pub line: usize,
}

impl Field {
    /// Whether this field's key is `name`, in any spelling.
    pub fn is(&self, name: &str) -> bool {
        self.key == normalize_key(name)
    }

    /// The value without wrapping emphasis, code marks or quotes.
    pub fn clean_value(&self) -> &str {
        clean_value(&self.value)
    }
}

/// Keys that make a table whose header row is `| Status | active |` a field table.
const KNOWN_KEYS: &[&str] = &[
    "status",
    "priority",
    "autonomy",
    "maxworkers",
    "workertimeout",
    "checkin",
    "channel",
];

/// Header names of a field table's key and value columns (normalised).
const KEY_HEADERS: &[&str] = &[
    "",
    "field",
    "fields",
    "key",
    "setting",
    "settings",
    "name",
    "property",
    "option",
    "parameter",
    "config",
    "configuration",
];
const VALUE_HEADERS: &[&str] = &["", "value", "values", "setting"];

/// Normalises a key: drops a trailing parenthetical, keeps letters and digits, lowercases.
pub fn normalize_key(raw: &str) -> String {
    let mut s = raw.trim();
    if s.ends_with(')') {
        if let Some(p) = s.rfind('(') {
            if s[..p].chars().any(|c| c.is_alphanumeric()) {
                s = &s[..p];
            }
        }
    }
    s.chars()
        .filter(|c| c.is_alphanumeric())
        .flat_map(|c| c.to_lowercase())
        .collect()
}

/// Whether two keys are the same key (`max_workers` and `MaxWorkers` are).
pub fn key_is(key: &str, name: &str) -> bool {
    normalize_key(key) == normalize_key(name)
}

/// The first field called `key`, in any spelling.
pub fn get<'a>(fields: &'a [Field], key: &str) -> Option<&'a Field> {
    let k = normalize_key(key);
    fields.iter().find(|f| f.key == k)
}

/// Strips wrapping emphasis, code marks and quotes: `` **`#dev`** `` → `#dev`.
pub fn clean_value(v: &str) -> &str {
    let mut s = v.trim();
    loop {
        let before = s.len();
        for w in ["**", "__", "`", "*", "_", "\"", "'"] {
            if s.len() >= 2 * w.len() && s.starts_with(w) && s.ends_with(w) {
                s = s[w.len()..s.len() - w.len()].trim();
            }
        }
        if s.len() == before {
            return s;
        }
    }
}

/// A value without leading emoji and symbols, for the enum parsers: `🟢 active` → `active`.
pub(crate) fn strip_decor(v: &str) -> &str {
    v.trim_start_matches(|c: char| is_decor(c) && c != '\u{fffd}')
}

/// Every top-level field of `text`, first occurrence of each key only; a repeated key is a
/// warning (section `section`, such as `1.2`).
pub fn extract(text: &str, file: &Path, section: &'static str) -> Parsed<Vec<Field>> {
    extract_except(text, file, section, &[])
}

/// Like [`extract`], ignoring fields inside the sections named in `skip` (such as `Stories`).
pub fn extract_except(
    text: &str,
    file: &Path,
    section: &'static str,
    skip: &[&str],
) -> Parsed<Vec<Field>> {
    let doc = Doc::new(text);
    let mut diags = Diags::new(file, section);
    let fields = first_only(scan(&doc, skip), &mut diags);
    diags.parsed(fields.into_iter().map(|f| f.field).collect())
}

/// Reads one line as a field: `(key as written, value)`. List markers, task boxes, emphasis
/// and leading emoji are tolerated; structure (code blocks and so on) is not considered.
pub fn parse_line(line: &str) -> Option<(String, String)> {
    let line = line.trim_end_matches(['\r', '\n']);
    let (c, _) = md::content_start(line);
    let s = &line[c..];
    let (k, v) = split_field(s)?;
    Some((s[k].to_string(), s[v].to_string()))
}

/// The raw text under the first heading called `heading` (any level; case, emphasis, emoji
/// and plurals ignored), up to the next heading of the same or a higher level, without
/// surrounding blank lines and with `\n` line endings. `None` when there is no such heading;
/// `Some("")` when the section is empty.
pub fn section_text(text: &str, heading: &str) -> Option<String> {
    let doc = Doc::new(text);
    let h = doc.find_heading(heading)?;
    Some(doc.raw_lines(doc.section_body(h)))
}

/// A field with where its value sits in the text, for byte-preserving writers.
#[derive(Debug, Clone)]
pub(crate) struct RawField {
    pub field: Field,
    /// The key as written.
    pub raw_key: String,
    /// The value's bytes in the text (empty, at the insertion point, when the value is).
    pub span: Range<usize>,
    /// For a table field, the value cell between its pipes.
    pub cell: Option<Range<usize>>,
}

/// Every field candidate in document order, duplicates included.
pub(crate) fn scan(doc: &Doc, skip: &[&str]) -> Vec<RawField> {
    let mut skipped = vec![false; doc.lines.len()];
    for h in skip.iter().flat_map(|name| doc.matching_headings(name)) {
        let end = doc.section_body(h).end.min(skipped.len());
        for s in skipped
            .get_mut(doc.headings[h].first..end)
            .unwrap_or_default()
        {
            *s = true;
        }
    }
    let is_skipped = |i: usize| skipped.get(i).copied().unwrap_or(false);
    let mut out = Vec::new();
    for i in 0..doc.lines.len() {
        if doc.has(i, FIELD) && !is_skipped(i) {
            if let Some(f) = line_field(doc, i) {
                out.push(f);
            }
        }
    }
    for h in &doc.headings {
        if h.atx && h.level >= 2 && !is_skipped(h.first) {
            let title = doc.masked.get(h.title.clone()).unwrap_or("");
            if let Some((k, v)) = split_field(title) {
                let base = h.title.start;
                out.push(raw_field(
                    &title[k],
                    &title[v.clone()],
                    h.first,
                    base + v.start..base + v.end,
                    None,
                ));
            }
        }
    }
    for t in doc.tables(0..doc.lines.len()) {
        if is_skipped(t.header.line) {
            continue;
        }
        let Some(header_is_field) = field_table(doc, &t) else {
            continue;
        };
        let rows = std::iter::once(&t.header)
            .filter(|_| header_is_field)
            .chain(t.rows.iter());
        for row in rows {
            if let Some(f) = cell_field(doc, row) {
                out.push(f);
            }
        }
    }
    out.sort_by_key(|f| f.field.line);
    out
}

/// Lines inside the `skip` sections that read as a field with one of `keys`: written where
/// the reader does not look for fields (under `## Notifications`, say), so a person who meant
/// them as settings should be told.
pub(crate) fn misplaced(doc: &Doc, skip: &[&str], keys: &[&str]) -> Vec<RawField> {
    let mut out = Vec::new();
    for h in skip.iter().flat_map(|name| doc.matching_headings(name)) {
        let end = doc.section_body(h).end.min(doc.lines.len());
        for i in doc.headings[h].first..end {
            if !doc.has(i, FIELD) {
                continue;
            }
            if let Some(f) = line_field(doc, i).filter(|f| keys.contains(&f.field.key.as_str())) {
                out.push(f);
            }
        }
    }
    out.sort_by_key(|f| f.field.line);
    out
}

/// Warns of each field whose key is not one of `known` but looks like a misspelling of one
/// (`Priorty`, `MaxWorker`): such a field is never read, so its value would be lost quietly.
/// Keys far from every known one (`Owner: Ana`) are a person's own notes and pass.
pub(crate) fn misspelled(raw: &[RawField], known: &[&str], diags: &mut Diags) {
    for f in raw {
        let key = &f.field.key;
        if key.is_empty() || known.iter().any(|k| normalize_key(k) == *key) {
            continue;
        }
        if let Some(like) = like(key, known) {
            diags.warn(
                Some(f.field.line),
                format!(
                    "field `{}` is not one braids reads, so it is ignored; did you mean `{like}`?",
                    f.raw_key
                ),
                format!("rename it to `{like}:`, or delete the line"),
            );
        }
    }
}

/// The known key `key` is most likely a misspelling of.
fn like<'a>(key: &str, known: &[&'a str]) -> Option<&'a str> {
    let allowed = if key.chars().count() < 6 { 1 } else { 2 };
    known
        .iter()
        .map(|k| (normalize_key(k), *k))
        .filter_map(|(norm, k)| {
            let d = strsim::damerau_levenshtein(key, &norm);
            // `Workers` for `MaxWorkers`, never `Copyright` for `Copy`.
            let inside = key.len() >= 5
                && key.len().abs_diff(norm.len()) <= 3
                && (norm.contains(key) || key.contains(norm.as_str()));
            (d <= allowed || inside).then_some((d, k))
        })
        .min()
        .map(|(_, k)| k)
}

/// Keeps the first field of each key; each repeat is a warning.
pub(crate) fn first_only(raw: Vec<RawField>, diags: &mut Diags) -> Vec<RawField> {
    // a linear scan is faster for the usual handful of fields; a map keeps huge inputs linear
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut out: Vec<RawField> = Vec::with_capacity(raw.len());
    for f in raw {
        let prior = if out.len() < 32 {
            out.iter().position(|o| o.field.key == f.field.key)
        } else {
            if seen.is_empty() {
                seen.extend(
                    out.iter()
                        .enumerate()
                        .map(|(i, o)| (o.field.key.clone(), i)),
                );
            }
            seen.get(&f.field.key).copied()
        };
        if let Some(i) = prior {
            let first = &out[i];
            diags.warn(
                Some(f.field.line),
                format!(
                    "field `{}` is set again here, but the first value `{}` from line {} is the one used",
                    f.raw_key, first.field.value, first.field.line
                ),
                format!("delete line {} or line {} so the field is set once", f.field.line, first.field.line),
            );
        } else {
            if !seen.is_empty() {
                seen.insert(f.field.key.clone(), out.len());
            }
            out.push(f);
        }
    }
    out
}

/// Reads line `i` (0-based) of `doc` as a field, whatever its structure.
pub(crate) fn line_field(doc: &Doc, i: usize) -> Option<RawField> {
    let l = doc.lines.get(i)?;
    let s = doc.line(i);
    let (c, _) = md::content_start(s);
    let (k, v) = split_field(&s[c..])?;
    let base = l.start + c;
    Some(raw_field(
        &s[c..][k],
        &s[c..][v.clone()],
        i,
        base + v.start..base + v.end,
        None,
    ))
}

fn raw_field(
    key: &str,
    value: &str,
    line: usize,
    span: Range<usize>,
    cell: Option<Range<usize>>,
) -> RawField {
    RawField {
        field: Field {
            key: normalize_key(key),
            value: value.to_string(),
            line: line + 1,
        },
        raw_key: key.trim().to_string(),
        span,
        cell,
    }
}

/// `Some(header_is_a_field)` when `t` is a field table.
fn field_table(doc: &Doc, t: &md::Table) -> Option<bool> {
    let cells = &t.header.cells;
    if cells.len() < 2 {
        return None;
    }
    let h0 = normalize_key(clean_key(doc.cell(&cells[0])));
    let h1 = normalize_key(clean_key(doc.cell(&cells[1])));
    if KNOWN_KEYS.contains(&h0.as_str()) {
        return Some(true);
    }
    (KEY_HEADERS.contains(&h0.as_str()) && VALUE_HEADERS.contains(&h1.as_str())).then_some(false)
}

fn cell_field(doc: &Doc, row: &md::Row) -> Option<RawField> {
    let (k, v) = (row.cells.first()?, row.cells.get(1)?);
    let key = clean_key(doc.cell(k));
    if key.is_empty() || key.len() > 64 || !key.chars().next().is_some_and(|c| c.is_alphabetic()) {
        return None;
    }
    let value = doc.cell(v).replace("\\|", "|");
    Some(raw_field(
        key,
        &value,
        row.line,
        v.span.clone(),
        Some(v.inner.clone()),
    ))
}

/// A table key cell without emphasis, code marks, emoji or a trailing colon.
fn clean_key(s: &str) -> &str {
    let mut s = s.trim();
    loop {
        let before = s.len();
        s = s.trim_start_matches(|c: char| is_decor(c) || matches!(c, '*' | '_' | '`'));
        s = s.trim_end_matches(|c: char| c.is_whitespace() || matches!(c, '*' | '_' | '`' | ':'));
        if s.len() == before {
            return s;
        }
    }
}

/// Whitespace and symbols (emoji, BOM, variation selectors) that may precede a key.
fn is_decor(c: char) -> bool {
    c.is_whitespace() || (!c.is_ascii() && !c.is_alphanumeric())
}

fn is_mark(b: u8) -> bool {
    matches!(b, b'*' | b'_' | b'`')
}

fn valid_key(k: &str) -> bool {
    !k.is_empty()
        && k.len() <= 48
        && k.as_bytes()[0].is_ascii_alphabetic()
        && k.bytes().all(|b| {
            b.is_ascii_alphanumeric() || matches!(b, b' ' | b'\t' | b'_' | b'-' | b'(' | b')')
        })
        && k.split_whitespace().count() <= 5
}

/// Splits the content of one line (list marker already removed) into key and value ranges.
pub(crate) fn split_field(s: &str) -> Option<(Range<usize>, Range<usize>)> {
    let colon = s.find(':')?;
    if colon > 96 {
        return None;
    }
    let head = &s[..colon];
    // leading emoji, spaces and emphasis marks
    let mut a = head.len();
    let mut open = 0usize;
    for (i, c) in head.char_indices() {
        if c.is_ascii() && is_mark(c as u8) {
            open += 1;
        } else if !is_decor(c) {
            a = i;
            break;
        }
    }
    // trailing emphasis marks: `**Status**:`
    let hb = head.as_bytes();
    let mut b = head.len();
    let mut closed = false;
    while b > a && (hb[b - 1] == b' ' || hb[b - 1] == b'\t' || is_mark(hb[b - 1])) {
        closed |= is_mark(hb[b - 1]);
        b -= 1;
    }
    if !valid_key(&head[a..b]) {
        return None;
    }
    let mut v = colon + 1;
    let sb = s.as_bytes();
    if s[v..].starts_with("//") || s[v..].starts_with(':') {
        return None; // a URL or `::`
    }
    if open > 0 && !closed {
        // `**Status:** active`: the closing marks follow the colon
        let n = sb[v..].iter().take_while(|&&c| is_mark(c)).count();
        if n > 0 {
            v += n.min(open);
            closed = true;
        }
    }
    let (mut vs, mut ve) = trim_range(s, v, s.len());
    if open > 0 && !closed {
        // `**Status: active**`
        let n = sb[vs..ve]
            .iter()
            .rev()
            .take_while(|&&c| is_mark(c))
            .count()
            .min(open);
        ve -= n;
        (vs, ve) = trim_range(s, vs, ve);
    }
    if ve > vs && sb[ve - 1] == b'\\' {
        // a hard line break
        (vs, ve) = trim_range(s, vs, ve - 1);
    }
    if vs == ve {
        // empty value: the insertion point is just after the colon (and its closing marks)
        return Some((a..b, v..v));
    }
    Some((a..b, vs..ve))
}

fn trim_range(s: &str, a: usize, b: usize) -> (usize, usize) {
    let t = &s[a..b];
    let lead = t.len() - t.trim_start().len();
    let len = t.trim().len();
    (a + lead, a + lead + len)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(text: &str) -> Vec<(String, String, usize)> {
        extract(text, Path::new("X.md"), "1.2")
            .value
            .into_iter()
            .map(|f| (f.key, f.value, f.line))
            .collect()
    }

    fn status(text: &str) -> Option<String> {
        let p = extract(text, Path::new("X.md"), "1.2");
        get(&p.value, "Status").map(|f| f.value.clone())
    }

    #[test]
    fn a_misspelled_key_is_named_with_the_one_it_resembles() {
        let known = crate::format::project::FIELDS;
        assert_eq!(like("priorty", known), Some("Priority"));
        assert_eq!(like("maxworker", known), Some("MaxWorkers"));
        assert_eq!(like("workers", known), Some("MaxWorkers"));
        assert_eq!(like("stalltimout", known), Some("StallTimeout"));
        assert_eq!(like("copyright", known), None);
        assert_eq!(like("keepalive", known), None);
        assert_eq!(like("statsu", known), Some("Status"));
        assert_eq!(like("owner", known), None);
        assert_eq!(like("state", known), None);
        assert_eq!(like("notes", known), None);
    }

    #[test]
    fn every_written_form() {
        for t in [
            "- **Status:** active",
            "**Status:** active",
            "**Status**: active",
            "Status: active",
            "- Status: active",
            "* Status: active",
            "+ Status: active",
            "1. Status: active",
            "- [x] Status: active",
            "`Status`: active",
            "__Status__: active",
            "*Status:* active",
            "**Status: active**",
            "🚦 **Status:** active",
            "- 🚦 Status: active",
            "STATUS : active",
            "status:active",
            "## Status: active",
            "Status: active\\",
            "   Status: active   ",
            "\u{feff}Status: active",
            "---\nstatus: active\n---\n",
            "| Field | Value |\n|---|---|\n| Status | active |",
            "| field | value |\n|-|-|\n| **Status** | active |",
            "| Key | Value |\n|---|---|\n| `Status`: | active |",
            "| Status | active |\n|---|---|\n| Priority | high |",
            "| Setting | Value | Notes |\n|---|---|---|\n| Status | active | since May |",
            "Status: active\nPriority: high\n---\n",
        ] {
            assert_eq!(status(t).as_deref(), Some("active"), "{t:?}");
        }
    }

    #[test]
    fn values_are_verbatim() {
        assert_eq!(
            status("Status: **Active** (since Monday)").unwrap(),
            "**Active** (since Monday)"
        );
        assert_eq!(
            status("- **Status:** on (mention <@123>)").unwrap(),
            "on (mention <@123>)"
        );
        assert_eq!(
            status("Status: active <!-- was paused -->").unwrap(),
            "active"
        );
        assert_eq!(status("Status:").unwrap(), "");
    }

    #[test]
    fn keys_are_normalised() {
        for k in [
            "MaxWorkers",
            "Max Workers",
            "max_workers",
            "max-workers",
            "MAX WORKERS",
            "Max Workers (parallel)",
        ] {
            let f = fields(&format!("{k}: 3"));
            assert_eq!(
                f,
                vec![("maxworkers".to_string(), "3".to_string(), 1)],
                "{k}"
            );
        }
        assert!(key_is("Worker Timeout", "worker_timeout"));
        assert_eq!(normalize_key("Check-in"), "checkin");
    }

    #[test]
    fn traps_are_not_fields() {
        for t in [
            "```\nStatus: complete\n```",
            "~~~md\nStatus: complete\n~~~",
            "    Status: complete",
            "> Status: complete",
            "> - **Status:** complete",
            "<!-- Status: complete -->",
            "<!--\nStatus: complete\n-->",
            "- item\n  - Status: complete",
            "See https://example.com: complete",
            "<details>\nStatus: complete\n</details>",
            "Some text <!--\nStatus: complete\n-->",
        ] {
            assert_eq!(status(t), None, "{t:?}");
        }
        // an unquoted line right after a quote is the author's field, not part of the quote
        assert_eq!(
            status("> Note: agents, read the guardrails.\nStatus: active").as_deref(),
            Some("active")
        );
        // the trap does not hide the real field either
        assert_eq!(
            status("```\nStatus: complete\n```\n\n- **Status:** active").as_deref(),
            Some("active")
        );
    }

    #[test]
    fn first_wins_and_repeats_warn() {
        let p = extract(
            "Status: active\n\nStatus: paused\n",
            Path::new("P.md"),
            "1.2",
        );
        assert_eq!(p.value.len(), 1);
        assert_eq!(p.value[0].value, "active");
        assert_eq!(p.diagnostics.len(), 1);
        let d = &p.diagnostics[0];
        assert_eq!((d.line, d.section), (Some(3), "1.2"));
        assert!(d.message.contains("line 1"), "{}", d.message);
    }

    #[test]
    fn repeats_among_many_fields() {
        let mut t: String = (0..40).map(|i| format!("Key{i}: v{i}\n")).collect();
        t.push_str("Key0: again\nKey39: again\nkey_20: again\n");
        let p = extract(&t, Path::new("P.md"), "1.2");
        assert_eq!(p.value.len(), 40);
        assert_eq!(get(&p.value, "key 39").unwrap().value, "v39");
        let lines: Vec<Option<usize>> = p.diagnostics.iter().map(|d| d.line).collect();
        assert_eq!(lines, [Some(41), Some(42), Some(43)]);
    }

    #[test]
    fn crlf_and_bom() {
        let f = fields("\u{feff}# T\r\n\r\n- **Status:** active\r\n- Priority: high\r\n");
        assert_eq!(f[0], ("status".into(), "active".into(), 3));
        assert_eq!(f[1], ("priority".into(), "high".into(), 4));
    }

    #[test]
    fn table_fields_and_other_tables() {
        let t = "| Event | Enabled |\n|---|---|\n| question | on |\n\n| Field | Value |\n|---|---|\n| Max Workers | 2 |\n";
        assert_eq!(fields(t), vec![("maxworkers".into(), "2".into(), 7)]);
    }

    #[test]
    fn sections() {
        let t = "# P\n\n## Goal\n\nShip it.\n\n### Detail\nmore\n\n## Guardrails\r\n- no prod\r\n";
        assert_eq!(
            section_text(t, "goal").unwrap(),
            "Ship it.\n\n### Detail\nmore"
        );
        assert_eq!(section_text(t, "GUARDRAILS").unwrap(), "- no prod");
        assert_eq!(section_text(t, "Notes"), None);
        assert_eq!(section_text("## Notes\n\n## Next", "notes").unwrap(), "");
        assert_eq!(section_text("```\n## Goal\nx\n```\n", "goal"), None);
    }

    #[test]
    fn skip_sections() {
        let t = "Status: active\n\n## Stories\n- app-1: Build\n\n## Notes\nowner: me\n";
        let p = extract_except(t, Path::new("I.md"), "1.3", &["stories"]);
        let keys: Vec<&str> = p.value.iter().map(|f| f.key.as_str()).collect();
        assert_eq!(keys, ["status", "owner"]);
    }

    #[test]
    fn parse_line_helper() {
        assert_eq!(
            parse_line("- **Status:** active\r\n"),
            Some(("Status".into(), "active".into()))
        );
        assert_eq!(parse_line("no colon here"), None);
        assert_eq!(
            parse_line("a sentence that is much too long to be a key of any kind: x"),
            None
        );
        assert_eq!(clean_value("**`#dev`**"), "#dev");
    }
}
