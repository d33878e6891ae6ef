//! Headings and the sections they open: which lines are a heading, what it is called, where
//! its section ends. Also [`content_start`], the list-marker rule shared by field lines,
//! stories and the setext check (a `Status: active` line over `---` is a field, not a heading).

use std::ops::Range;

use pulldown_cmark::HeadingLevel;

use super::{line_of, Doc, Line, FIELD};

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

/// A heading whose end event has not been seen yet.
pub(super) struct OpenHeading {
    pub level: u8,
    pub range: Range<usize>,
    pub top: bool,
    pub in_quote: bool,
}

pub(super) fn level_num(l: HeadingLevel) -> u8 {
    match l {
        HeadingLevel::H1 => 1,
        HeadingLevel::H2 => 2,
        HeadingLevel::H3 => 3,
        HeadingLevel::H4 => 4,
        HeadingLevel::H5 => 5,
        HeadingLevel::H6 => 6,
    }
}

impl Doc<'_> {
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

/// Records a heading, or — for a setext heading whose lines are fields (`Status: active`
/// followed by `---`, a classic accident) — marks those lines as field lines instead.
pub(super) fn finish_heading(
    text: &str,
    lines: &mut [Line],
    headings: &mut Vec<Heading>,
    h: OpenHeading,
) {
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
        super::super::fields::split_field(&s[c..]).is_some()
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

#[cfg(test)]
mod tests {
    use super::super::tests::field_lines;
    use super::*;

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
