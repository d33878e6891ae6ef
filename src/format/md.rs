//! The line-level shape of a markdown text, computed once and shared by every reader and writer.
//!
//! pulldown-cmark decides what is structure: which lines sit in a code block, an HTML block or a
//! blockquote (opaque: never fields, never tables, never headings), which lines carry top-level
//! paragraph or list-item text (where a field may be written), and where the headings are.
//! Headings and sections are in [`headings`], pipe tables in [`tables`].
//!
//! Everything here works on byte offsets into the original text; nothing allocates per line
//! beyond the line table, and nothing can panic on any input.

mod headings;
mod tables;

use std::borrow::Cow;
use std::cell::OnceCell;
use std::ops::Range;

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};

/// A line whose text is top-level paragraph or list-item text, where a field may be written.
pub(crate) const FIELD: u8 = 1;
/// A line inside a code block, an HTML block, a blockquote or front matter: never a table,
/// a heading or a story.
pub(crate) const OPAQUE: u8 = 2;

#[derive(Debug, Clone)]
pub(crate) struct Line {
    /// Byte offset of the first character.
    pub start: usize,
    /// Byte offset just past the content, before `\n`, `\r\n` or `\r`.
    pub end: usize,
    /// Byte offset of the next line (past the line ending).
    pub next: usize,
    pub flags: u8,
}

pub(crate) use headings::{content_start, Heading};
use headings::{finish_heading, level_num, OpenHeading};
pub(crate) use tables::{Row, Table};

pub(crate) struct Doc<'a> {
    pub text: &'a str,
    /// `text` with HTML comments blanked out (same length, same offsets).
    pub masked: Cow<'a, str>,
    pub lines: Vec<Line>,
    pub headings: Vec<Heading>,
    /// Cache for [`Doc::heading_words`].
    words: OnceCell<Vec<Vec<String>>>,
}

/// Nesting counters while walking the event stream.
#[derive(Default)]
struct Depth {
    quote: usize,
    code: usize,
    html: usize,
    meta: usize,
    list: usize,
    table: usize,
    other: usize,
}

impl Depth {
    /// Text here is top level: a paragraph or a first-level list item, outside quotes, code,
    /// HTML, tables and footnotes.
    fn top(&self) -> bool {
        self.quote == 0
            && self.code == 0
            && self.html == 0
            && self.meta == 0
            && self.table == 0
            && self.other == 0
            && self.list <= 1
    }
}

impl Depth {
    /// Inside a quote but nothing else that hides fields.
    fn lazy_quote_ok(&self) -> bool {
        self.quote > 0
            && self.code == 0
            && self.html == 0
            && self.meta == 0
            && self.table == 0
            && self.other == 0
    }
}

/// Whether the line holding `offset` starts with a `>` quote marker.
fn quoted_line(text: &str, lines: &[Line], offset: usize) -> bool {
    let l = &lines[line_of(lines, offset).min(lines.len() - 1)];
    text.get(l.start..l.end)
        .unwrap_or("")
        .trim_start()
        .starts_with('>')
}

impl<'a> Doc<'a> {
    pub fn new(text: &'a str) -> Doc<'a> {
        let mut lines = split_lines(text);
        let bom = if text.starts_with('\u{feff}') { 3 } else { 0 };
        let mut masks: Vec<Range<usize>> = Vec::new();
        let mut headings = Vec::new();
        let mut d = Depth::default();
        let mut open: Option<OpenHeading> = None;
        let opts = Options::ENABLE_TABLES
            | Options::ENABLE_TASKLISTS
            | Options::ENABLE_YAML_STYLE_METADATA_BLOCKS;
        let body = &text[bom..];
        for (ev, r) in Parser::new_ext(body, opts).into_offset_iter() {
            let r = (r.start + bom).min(text.len())..(r.end + bom).min(text.len());
            match ev {
                Event::Start(tag) => match tag {
                    Tag::BlockQuote(_) => {
                        mark(&mut lines, &r, OPAQUE);
                        d.quote += 1;
                    }
                    Tag::CodeBlock(_) => {
                        mark(&mut lines, &r, OPAQUE);
                        d.code += 1;
                    }
                    Tag::HtmlBlock => {
                        mark(&mut lines, &r, OPAQUE);
                        if text
                            .get(r.clone())
                            .unwrap_or("")
                            .trim_start()
                            .starts_with("<!--")
                        {
                            masks.push(r.clone());
                        }
                        d.html += 1;
                    }
                    Tag::MetadataBlock(_) => {
                        mark(&mut lines, &r, OPAQUE);
                        d.meta += 1;
                    }
                    Tag::List(_) => d.list += 1,
                    Tag::Table(_) => d.table += 1,
                    Tag::FootnoteDefinition(_)
                    | Tag::DefinitionList
                    | Tag::DefinitionListTitle
                    | Tag::DefinitionListDefinition => d.other += 1,
                    Tag::Heading { level, .. } => {
                        open = Some(OpenHeading {
                            level: level_num(level),
                            range: r.clone(),
                            top: d.top(),
                            in_quote: d.quote > 0 || d.other > 0,
                        });
                    }
                    _ => {}
                },
                Event::End(tag) => match tag {
                    TagEnd::BlockQuote(_) => d.quote = d.quote.saturating_sub(1),
                    TagEnd::CodeBlock => d.code = d.code.saturating_sub(1),
                    TagEnd::HtmlBlock => d.html = d.html.saturating_sub(1),
                    TagEnd::MetadataBlock(_) => d.meta = d.meta.saturating_sub(1),
                    TagEnd::List(_) => d.list = d.list.saturating_sub(1),
                    TagEnd::Table => d.table = d.table.saturating_sub(1),
                    TagEnd::FootnoteDefinition
                    | TagEnd::DefinitionList
                    | TagEnd::DefinitionListTitle
                    | TagEnd::DefinitionListDefinition => d.other = d.other.saturating_sub(1),
                    TagEnd::Heading(_) => {
                        if let Some(h) = open.take() {
                            finish_heading(text, &mut lines, &mut headings, h);
                        }
                    }
                    _ => {}
                },
                Event::Text(_)
                | Event::Code(_)
                | Event::TaskListMarker(_)
                | Event::InlineMath(_)
                | Event::DisplayMath(_)
                | Event::FootnoteReference(_) => {
                    if open.is_some() {
                        // heading text: decided when the heading ends
                    } else if d.meta > 0 && d.quote == 0 && d.list == 0 {
                        // YAML front matter: `status: active` means what it says
                        mark(&mut lines, &r, FIELD);
                    } else if d.top() || (d.lazy_quote_ok() && !quoted_line(text, &lines, r.start))
                    {
                        // a line without `>` that continues a quote lazily was not quoted by
                        // its author: `> Note: …` then `Status: active` is a field
                        mark(&mut lines, &r, FIELD);
                    }
                }
                Event::InlineHtml(ref h) | Event::Html(ref h) if h.starts_with("<!--") => {
                    masks.push(r);
                }
                _ => {}
            }
        }
        let masked = mask(text, &masks);
        Doc {
            text,
            masked,
            lines,
            headings,
            words: OnceCell::new(),
        }
    }

    /// The masked content of line `i`, without its line ending.
    pub fn line(&self, i: usize) -> &str {
        match self.lines.get(i) {
            Some(l) => self.masked.get(l.start..l.end).unwrap_or(""),
            None => "",
        }
    }

    pub fn has(&self, i: usize, flag: u8) -> bool {
        self.lines.get(i).is_some_and(|l| l.flags & flag != 0)
    }

    pub fn is_blank(&self, i: usize) -> bool {
        self.line(i).trim().is_empty()
    }

    /// The line ending the file uses: that of the first line that has one.
    pub fn eol(&self) -> &'static str {
        for l in &self.lines {
            match self.text.get(l.end..l.next) {
                Some("\r\n") => return "\r\n",
                Some("\n") => return "\n",
                Some("\r") => return "\r",
                _ => {}
            }
        }
        "\n"
    }

    /// The raw text of lines `r`, joined with `\n`, without leading and trailing blank lines.
    pub fn raw_lines(&self, r: Range<usize>) -> String {
        let mut a = r.start;
        let mut b = r.end.min(self.lines.len());
        while a < b && self.raw_line(a).trim().is_empty() {
            a += 1;
        }
        while b > a && self.raw_line(b - 1).trim().is_empty() {
            b -= 1;
        }
        let mut out = String::new();
        for i in a..b {
            if i > a {
                out.push('\n');
            }
            out.push_str(self.raw_line(i));
        }
        let trimmed = out.trim_end().len();
        out.truncate(trimmed);
        out
    }

    /// Line `i` of the original text (not masked), without its line ending.
    pub fn raw_line(&self, i: usize) -> &str {
        match self.lines.get(i) {
            Some(l) => self.text.get(l.start..l.end).unwrap_or(""),
            None => "",
        }
    }
}

fn split_lines(text: &str) -> Vec<Line> {
    let b = text.as_bytes();
    let mut lines = Vec::with_capacity(b.len() / 40 + 1);
    // a BOM belongs to no line
    let mut start = if text.starts_with('\u{feff}') { 3 } else { 0 };
    let mut i = start;
    while i < b.len() {
        match b[i] {
            b'\n' => {
                lines.push(Line {
                    start,
                    end: i,
                    next: i + 1,
                    flags: 0,
                });
                start = i + 1;
            }
            b'\r' => {
                if i + 1 < b.len() && b[i + 1] == b'\n' {
                    lines.push(Line {
                        start,
                        end: i,
                        next: i + 2,
                        flags: 0,
                    });
                    i += 1;
                } else {
                    lines.push(Line {
                        start,
                        end: i,
                        next: i + 1,
                        flags: 0,
                    });
                }
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    if start < b.len() || lines.is_empty() {
        lines.push(Line {
            start,
            end: b.len(),
            next: b.len(),
            flags: 0,
        });
    }
    lines
}

fn line_of(lines: &[Line], offset: usize) -> usize {
    lines
        .partition_point(|l| l.start <= offset)
        .saturating_sub(1)
}

fn mark(lines: &mut [Line], r: &Range<usize>, flag: u8) {
    if lines.is_empty() {
        return;
    }
    let a = line_of(lines, r.start);
    let b = line_of(lines, r.end.saturating_sub(1).max(r.start));
    for l in &mut lines[a..=b.max(a)] {
        l.flags |= flag;
    }
}

fn mask<'a>(text: &'a str, masks: &[Range<usize>]) -> Cow<'a, str> {
    if masks.is_empty() {
        return Cow::Borrowed(text);
    }
    let mut bytes = text.as_bytes().to_vec();
    for r in masks {
        for b in bytes.get_mut(r.clone()).unwrap_or_default() {
            if *b != b'\n' && *b != b'\r' {
                *b = b' ';
            }
        }
    }
    match String::from_utf8(bytes) {
        Ok(s) => Cow::Owned(s),
        Err(_) => Cow::Borrowed(text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The 1-based lines marked as field lines.
    pub(super) fn field_lines(text: &str) -> Vec<usize> {
        let d = Doc::new(text);
        (0..d.lines.len())
            .filter(|&i| d.has(i, FIELD))
            .map(|i| i + 1)
            .collect()
    }

    #[test]
    fn lines_and_endings() {
        let d = Doc::new("a\r\nb\rc\n\nd");
        let l: Vec<&str> = (0..d.lines.len()).map(|i| d.line(i)).collect();
        assert_eq!(l, ["a", "b", "c", "", "d"]);
        assert_eq!(d.eol(), "\r\n");
        assert_eq!(Doc::new("a\rb").eol(), "\r");
        let bom = Doc::new("\u{feff}# T\nx");
        assert_eq!((bom.line(0), bom.lines[0].start), ("# T", 3));
        assert_eq!(bom.heading_title(&bom.headings[0]), "T");
        assert_eq!(Doc::new("").lines.len(), 1);
        assert_eq!(Doc::new("x\n").lines.len(), 1);
    }

    #[test]
    fn field_lines_exclude_code_quotes_html_and_nested_lists() {
        let t = "# T\n\nStatus: a\n- b: 1\n  - c: 2\n\n```\nd: 3\n```\n\n> e: 4\n\n<!--\nf: 5\n-->\n\n    g: 6\n";
        assert_eq!(field_lines(t), vec![3, 4]);
        // a lazy continuation of a quote has no `>`: its author did not quote it
        assert_eq!(field_lines("> quoted: 1\n> quoted: 2\nlazy: 3\n"), vec![3]);
        assert_eq!(
            field_lines("> > quoted: 1\n> quoted: 2\n"),
            Vec::<usize>::new()
        );
    }
}
