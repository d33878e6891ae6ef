//! The line-level shape of a markdown text, computed once and shared by every reader and writer.
//!
//! pulldown-cmark decides what is structure: which lines sit in a code block, an HTML block or a
//! blockquote (opaque: never fields, never tables, never headings), which lines carry top-level
//! paragraph or list-item text (where a field may be written), and where the headings are.
//! Tables are then found line by line over the lines that are not opaque, a little more
//! tolerantly than GFM (a missing delimiter row or a cell-count mismatch still makes a table),
//! and with byte ranges for every cell so writers can change one cell and keep the rest.
//!
//! Everything here works on byte offsets into the original text; nothing allocates per line
//! beyond the line table, and nothing can panic on any input.

use std::borrow::Cow;
use std::cell::OnceCell;
use std::ops::Range;

use pulldown_cmark::{Event, HeadingLevel, Options, Parser, Tag, TagEnd};

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

#[derive(Debug, Clone)]
pub(crate) struct Heading {
    /// Index of the heading's first line.
    pub first: usize,
    /// Index of its last line (the underline of a setext heading).
    pub last: usize,
    pub level: u8,
    pub atx: bool,
    /// The title's bytes in the text, without `#` marks.
    pub title: Range<usize>,
}

#[derive(Debug, Clone)]
pub(crate) struct Cell {
    /// Between the pipes.
    pub inner: Range<usize>,
    /// The content, trimmed.
    pub span: Range<usize>,
}

#[derive(Debug, Clone)]
pub(crate) struct Row {
    /// Line index.
    pub line: usize,
    pub cells: Vec<Cell>,
}

#[derive(Debug, Clone)]
pub(crate) struct Table {
    pub header: Row,
    /// Line index of the `|---|` row, if written.
    pub delim: Option<usize>,
    pub rows: Vec<Row>,
}

impl Table {
    /// Index of the table's last line.
    pub fn last_line(&self) -> usize {
        self.rows
            .last()
            .map(|r| r.line)
            .or(self.delim)
            .unwrap_or(self.header.line)
    }
}

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

struct OpenHeading {
    level: u8,
    range: Range<usize>,
    top: bool,
    in_quote: bool,
}

fn level_num(l: HeadingLevel) -> u8 {
    match l {
        HeadingLevel::H1 => 1,
        HeadingLevel::H2 => 2,
        HeadingLevel::H3 => 3,
        HeadingLevel::H4 => 4,
        HeadingLevel::H5 => 5,
        HeadingLevel::H6 => 6,
    }
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

    /// The heading's title text (masked), trimmed.
    pub fn heading_title(&self, h: &Heading) -> &str {
        self.masked.get(h.title.clone()).unwrap_or("").trim()
    }

    /// The normalised words of every heading, computed once.
    fn heading_words(&self) -> &[Vec<String>] {
        self.words.get_or_init(|| {
            self.headings
                .iter()
                .map(|h| heading_words(self.heading_title(h)))
                .collect()
        })
    }

    /// Index in `headings` of the first heading called `name`: an exact match on words
    /// (case, emphasis, emoji and plurals ignored) wins over a heading that merely starts with
    /// those words (`## Goals and non-goals` is a Goal section).
    pub fn find_heading(&self, name: &str) -> Option<usize> {
        let want = heading_words(name);
        if want.is_empty() {
            return None;
        }
        let words = self.heading_words();
        words
            .iter()
            .position(|w| *w == want)
            .or_else(|| words.iter().position(|w| w.starts_with(&want)))
    }

    /// Every heading called `name` (exact or prefix match), for skipping sections.
    pub fn matching_headings(&self, name: &str) -> Vec<usize> {
        let want = heading_words(name);
        if want.is_empty() {
            return Vec::new();
        }
        let words = self.heading_words();
        (0..self.headings.len())
            .filter(|&i| words[i].starts_with(&want))
            .collect()
    }

    /// The body of heading `h`: the lines after it up to the next heading of the same or a
    /// higher level (line indices).
    pub fn section_body(&self, h: usize) -> Range<usize> {
        let Some(head) = self.headings.get(h) else {
            return 0..0;
        };
        let end = self.headings[h + 1..]
            .iter()
            .find(|o| o.level <= head.level)
            .map(|o| o.first)
            .unwrap_or(self.lines.len());
        (head.last + 1).min(end)..end
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

    /// The cells of line `i` if it has an unescaped `|`, else nothing.
    pub fn row_cells(&self, i: usize) -> Vec<Cell> {
        let Some(l) = self.lines.get(i) else {
            return Vec::new();
        };
        split_row(self.masked.get(l.start..l.end).unwrap_or(""), l.start)
    }

    /// The (masked) text of a cell, trimmed.
    pub fn cell(&self, c: &Cell) -> &str {
        self.masked.get(c.span.clone()).unwrap_or("")
    }

    /// Pipe tables among lines `range` that are not opaque. A table is a row of cells followed by
    /// a delimiter row, or two consecutive lines that both start with `|`; it runs until a blank
    /// line or a line without `|`.
    pub fn tables(&self, range: Range<usize>) -> Vec<Table> {
        let end = range.end.min(self.lines.len());
        let mut out = Vec::new();
        let mut i = range.start;
        while i < end {
            if self.has(i, OPAQUE) || self.is_blank(i) {
                i += 1;
                continue;
            }
            let header = self.row_cells(i);
            if header.is_empty() || self.is_delim(&header) {
                i += 1;
                continue;
            }
            let next = i + 1;
            let next_ok = next < end && !self.has(next, OPAQUE);
            let next_cells = if next_ok {
                self.row_cells(next)
            } else {
                Vec::new()
            };
            let has_delim = !next_cells.is_empty() && self.is_delim(&next_cells);
            let piped = |k: usize| self.line(k).trim_start().starts_with('|');
            let both_piped = next_ok && piped(i) && piped(next) && !next_cells.is_empty();
            if !(has_delim || both_piped) {
                i += 1;
                continue;
            }
            let mut j = if has_delim { next + 1 } else { next };
            let mut rows = Vec::new();
            while j < end && !self.has(j, OPAQUE) && !self.is_blank(j) {
                let cells = self.row_cells(j);
                if cells.is_empty() {
                    break;
                }
                if !self.is_delim(&cells) {
                    rows.push(Row { line: j, cells });
                }
                j += 1;
            }
            out.push(Table {
                header: Row {
                    line: i,
                    cells: header,
                },
                delim: has_delim.then_some(next),
                rows,
            });
            i = j;
        }
        out
    }

    fn is_delim(&self, cells: &[Cell]) -> bool {
        !cells.is_empty()
            && cells.iter().any(|c| self.cell(c).contains('-'))
            && cells.iter().all(|c| {
                let t = self.cell(c);
                let t = t.strip_prefix(':').unwrap_or(t);
                let t = t.strip_suffix(':').unwrap_or(t);
                !t.is_empty() && t.bytes().all(|b| b == b'-')
            })
    }
}

/// Where the content of a field or list line starts: after indentation, a list marker
/// (`-`, `*`, `+`, `1.`, `1)`) and a task box (`[ ]`, `[x]`). Returns a byte offset into `s`
/// and whether a list marker was there.
pub(crate) fn content_start(s: &str) -> (usize, bool) {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() && (b[i] == b' ' || b[i] == b'\t') {
        i += 1;
    }
    let mut marker = false;
    let space_at = |k: usize| k >= b.len() || b[k] == b' ' || b[k] == b'\t';
    if i < b.len() && matches!(b[i], b'-' | b'*' | b'+') && space_at(i + 1) {
        i += 1;
        marker = true;
    } else {
        let mut k = i;
        while k < b.len() && k - i < 9 && b[k].is_ascii_digit() {
            k += 1;
        }
        if k > i && k < b.len() && matches!(b[k], b'.' | b')') && space_at(k + 1) {
            i = k + 1;
            marker = true;
        }
    }
    if marker {
        while i < b.len() && (b[i] == b' ' || b[i] == b'\t') {
            i += 1;
        }
        if b.len() >= i + 3
            && b[i] == b'['
            && matches!(b[i + 1], b' ' | b'x' | b'X')
            && b[i + 2] == b']'
            && space_at(i + 3)
        {
            i += 3;
            while i < b.len() && (b[i] == b' ' || b[i] == b'\t') {
                i += 1;
            }
        }
    }
    (i, marker)
}

/// Lowercase words of a heading, emphasis, emoji and punctuation dropped, plurals singular.
pub(crate) fn heading_words(title: &str) -> Vec<String> {
    title
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(|w| {
            let w = w.to_lowercase();
            if w.len() > 4 && w.ends_with("ies") {
                format!("{}y", &w[..w.len() - 3])
            } else if w.len() > 3 && w.ends_with('s') && !w.ends_with("ss") {
                w[..w.len() - 1].to_string()
            } else {
                w
            }
        })
        .collect()
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

/// Records a heading, or — for a setext heading whose lines are fields (`Status: active`
/// followed by `---`, a classic accident) — marks those lines as field lines instead.
fn finish_heading(text: &str, lines: &mut [Line], headings: &mut Vec<Heading>, h: OpenHeading) {
    if lines.is_empty() {
        return;
    }
    let first = line_of(lines, h.range.start);
    let last = line_of(lines, h.range.end.saturating_sub(1).max(h.range.start)).max(first);
    let first_text = text.get(lines[first].start..lines[first].end).unwrap_or("");
    let (cs, _) = content_start(first_text);
    let atx = first_text[cs..].starts_with('#');
    if atx {
        if h.in_quote {
            return;
        }
        let l = &lines[first];
        let s = first_text;
        let lead = cs;
        let hashes = s[lead..].bytes().take_while(|&b| b == b'#').count();
        let mut a = lead + hashes;
        let mut b = s.trim_end().len().max(a);
        // closing sequence: ` ##`
        let closing = s[a..b].bytes().rev().take_while(|&b| b == b'#').count();
        if closing > 0 {
            let before = b - closing;
            if before == a || s.as_bytes()[before - 1] == b' ' || s.as_bytes()[before - 1] == b'\t'
            {
                b = before;
            }
        }
        while a < b && (s.as_bytes()[a] == b' ' || s.as_bytes()[a] == b'\t') {
            a += 1;
        }
        while b > a && (s.as_bytes()[b - 1] == b' ' || s.as_bytes()[b - 1] == b'\t') {
            b -= 1;
        }
        headings.push(Heading {
            first,
            last: first,
            level: h.level,
            atx: true,
            title: l.start + a..l.start + b,
        });
        return;
    }
    // setext: the last line is the underline
    let underline = text
        .get(lines[last].start..lines[last].end)
        .unwrap_or("")
        .trim();
    let is_underline = !underline.is_empty() && underline.bytes().all(|b| b == b'=' || b == b'-');
    let content_last = if is_underline && last > first {
        last - 1
    } else {
        last
    };
    let fields = (first..=content_last).any(|i| {
        let s = text.get(lines[i].start..lines[i].end).unwrap_or("");
        let (c, _) = content_start(s);
        super::fields::split_field(&s[c..]).is_some()
    });
    if fields {
        if h.top {
            for l in &mut lines[first..=content_last] {
                l.flags |= FIELD;
            }
        }
        return;
    }
    if h.in_quote {
        return;
    }
    let start = lines[first].start;
    let end = lines[content_last].end.max(start);
    headings.push(Heading {
        first,
        last,
        level: h.level,
        atx: false,
        title: start..end,
    });
}

/// Splits one line into cells at unescaped `|`; a leading and a trailing pipe are optional.
fn split_row(s: &str, base: usize) -> Vec<Cell> {
    let b = s.as_bytes();
    let mut pipes = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' {
            i += 2;
            continue;
        }
        if b[i] == b'|' {
            pipes.push(i);
        }
        i += 1;
    }
    if pipes.is_empty() {
        return Vec::new();
    }
    let lead = s.len() - s.trim_start().len();
    let tail = s.trim_end().len();
    let first_is_pipe = pipes[0] == lead;
    let last_pipe = pipes[pipes.len() - 1];
    let last_is_pipe = last_pipe + 1 == tail && (pipes.len() > 1 || !first_is_pipe);
    let mut cells = Vec::new();
    let mut seg = if first_is_pipe { pipes[0] + 1 } else { 0 };
    let skip = usize::from(first_is_pipe);
    for &p in &pipes[skip..] {
        cells.push(make_cell(s, base, seg..p));
        seg = p + 1;
    }
    if !last_is_pipe {
        cells.push(make_cell(s, base, seg..tail.max(seg)));
    }
    cells
}

fn make_cell(s: &str, base: usize, r: Range<usize>) -> Cell {
    let inner = &s[r.clone()];
    let lead = inner.len() - inner.trim_start().len();
    let len = inner.trim().len();
    Cell {
        inner: base + r.start..base + r.end,
        span: base + r.start + lead..base + r.start + lead + len,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field_lines(text: &str) -> Vec<usize> {
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

    #[test]
    fn setext_fields_stay_fields() {
        let t = "Status: active\nPriority: high\n---\n\nTitle\n=====\n";
        let d = Doc::new(t);
        assert_eq!(field_lines(t), vec![1, 2]);
        assert_eq!(d.headings.len(), 1);
        assert_eq!(d.heading_title(&d.headings[0]), "Title");
        assert_eq!(d.headings[0].level, 1);
    }

    #[test]
    fn tables_and_cells() {
        let t = "x\n\n| A | B |\n|---|:-:|\n| 1 | `2` |\n| 3 \\| 4 |\n\ntext\n";
        let d = Doc::new(t);
        let tables = d.tables(0..d.lines.len());
        assert_eq!(tables.len(), 1);
        let tb = &tables[0];
        assert_eq!(tb.header.line, 2);
        assert_eq!(tb.delim, Some(3));
        assert_eq!(tb.rows.len(), 2);
        assert_eq!(d.cell(&tb.rows[0].cells[1]), "`2`");
        assert_eq!(d.cell(&tb.rows[1].cells[0]), "3 \\| 4");
        assert_eq!(tb.last_line(), 5);
    }

    #[test]
    fn headings_and_sections() {
        let t = "# Name #\n\n## 🔔 Notifications\nx\n### Sub\ny\n## Goals and non-goals\nz\n";
        let d = Doc::new(t);
        assert_eq!(d.heading_title(&d.headings[0]), "Name");
        let n = d.find_heading("notifications").unwrap();
        assert_eq!(d.raw_lines(d.section_body(n)), "x\n### Sub\ny");
        let g = d.find_heading("Goal").unwrap();
        assert_eq!(d.raw_lines(d.section_body(g)), "z");
        assert!(d.find_heading("sub").is_some());
        assert!(d.find_heading("nothing").is_none());
    }

    #[test]
    fn content_start_strips_markers() {
        let s = "  - [x] a";
        assert_eq!(&s[content_start(s).0..], "a");
        assert_eq!(content_start("12. b"), (4, true));
        assert_eq!(content_start("**b**"), (0, false));
        assert_eq!(content_start("-"), (1, true));
    }
}
