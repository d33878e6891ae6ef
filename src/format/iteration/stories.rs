//! The Stories section of ITERATION.md: `- <bead-id>: <title>` entries in order, or a table
//! with an id column, with the decorations people and agents add (bold, backticks, task boxes,
//! emoji, links, dashes) tolerated and everything else reported. An id is any id a tracker
//! accepts ([`BeadId`]): `wp-3kq`, `bd-a1c`, `123`, or a native tracker's `readme`; a forge
//! issue's `#12` is the bead `issue-12`.
//!
//! A plain word before the colon (`readme:`, but also `TBD:` or `Note:`) may be a bead id or
//! prose, and only the tracker can tell: such entries are kept apart (`maybe`), and readers that
//! ask the tracker take the ones it knows as stories ([`super::Iteration::stories_known`]).

use std::collections::HashMap;

use crate::model::BeadId;
use crate::system::diag::Diags;

use super::super::fields::{clean_value, normalize_key};
use super::super::md::{self, Doc, Table, FIELD};
use super::Story;

/// Headings of the Stories section, in order of preference.
const STORY_HEADINGS: &[&str] = &["stories", "user stories", "beads"];

/// What one list entry of the Stories section is.
#[derive(Debug, PartialEq)]
enum StoryLine {
    Story(BeadId, String),
    /// Something before a separator that is not a bead id, and why.
    BadId(String, String),
    /// No `id: title` shape at all.
    NotStory,
}

/// Whether an id is a plain word (no digit, no dash), which people also write before a colon as
/// prose (`TBD:`); tracker ids usually carry a digit or a dash.
pub(super) fn is_plain_word(id: &BeadId) -> bool {
    !id.as_str().bytes().any(|b| b.is_ascii_digit() || b == b'-')
}

/// The Stories section's entries in order: `(stories, maybe)`, where `maybe` holds the list
/// entries whose id is a plain word (see the module docs).
pub(super) fn read_stories(doc: &Doc, diags: &mut Diags) -> (Vec<Story>, Vec<Story>) {
    let Some(h) = STORY_HEADINGS.iter().find_map(|n| doc.find_heading(n)) else {
        return (Vec::new(), Vec::new());
    };
    let body = doc.section_body(h);
    let mut found: Vec<Story> = Vec::new();
    let mut words: std::collections::HashSet<usize> = std::collections::HashSet::new();
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
            StoryLine::Story(id, title) => {
                if is_plain_word(&id) {
                    words.insert(i + 1);
                }
                found.push(Story {
                    id,
                    title,
                    line: i + 1,
                })
            }
            StoryLine::BadId(id, why) => {
                diags.error(
                    Some(i + 1),
                    format!(
                        "story `{}` does not start with a valid bead id ({why}), so it is ignored",
                        id.escape_debug()
                    ),
                    "write the entry as `- <bead-id>: <title>`, with the id the tracker gave the bead",
                );
            }
            StoryLine::NotStory => {
                diags.warn(
                    Some(i + 1),
                    "this Stories entry is not of the form `<bead-id>: <title>`, so it is ignored",
                    "write the entry as `- <bead-id>: <title>`, or move the text to the Notes section",
                );
            }
        }
    }
    for t in doc.tables(body) {
        table_stories(doc, &t, &mut found);
    }
    found.sort_by_key(|s| s.line);
    let mut seen: HashMap<BeadId, usize> = HashMap::new();
    let (mut out, mut maybe) = (Vec::with_capacity(found.len()), Vec::new());
    for s in found {
        if let Some(first) = seen.get(&s.id) {
            diags.warn(
                Some(s.line),
                format!(
                    "story {} is listed again (first on line {first}), so this entry is ignored",
                    s.id
                ),
                format!("delete line {} or line {first}", s.line),
            );
            continue;
        }
        seen.insert(s.id.clone(), s.line);
        if words.contains(&s.line) {
            maybe.push(s);
        } else {
            out.push(s);
        }
    }
    (out, maybe)
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
    // `#12`: a forge issue, whose bead id is `issue-12`.
    let hash = b.get(i) == Some(&b'#') && b.get(i + 1).is_some_and(u8::is_ascii_digit);
    if hash {
        i += 1;
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
        // Any id a tracker accepts is a story, plain words too (`readme:` names the WORKPLAN.md
        // item `<!-- id:readme -->`); an entry the tracker does not know is reported by `check`,
        // the tick and STATUS.md, which can ask it.
        let id_text = &s[id_start..id_end];
        let issue = format!("{}{id_text}", crate::model::ISSUE_PREFIX);
        return match BeadId::new(if hash { &issue } else { id_text }) {
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

#[cfg(test)]
mod tests {
    use super::super::tests::parse;
    use super::*;
    use crate::system::diag::Severity;

    fn id(s: &str) -> BeadId {
        BeadId::new(s).unwrap()
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
        assert_eq!(
            parse_story("#12: Fix the login"),
            StoryLine::Story(id("issue-12"), "Fix the login".into())
        );
        assert_eq!(
            parse_story("**#7** — Docs"),
            StoryLine::Story(id("issue-7"), "Docs".into())
        );
        assert_eq!(parse_story("(none yet)"), StoryLine::NotStory);
        assert_eq!(parse_story(""), StoryLine::NotStory);
        // every id a tracker accepts, plain words included (the native tracker's `readme`)
        assert_eq!(
            parse_story("readme: Write the README"),
            StoryLine::Story(id("readme"), "Write the README".into())
        );
        assert_eq!(
            parse_story("**Setup**: first"),
            StoryLine::Story(id("Setup"), "first".into())
        );
        assert_eq!(
            parse_story("123: numeric ids are ids"),
            StoryLine::Story(id("123"), "numeric ids are ids".into())
        );
    }
}
