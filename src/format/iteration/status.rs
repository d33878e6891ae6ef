//! The ITERATION.md writer: sets the Status value where it was written and changes nothing
//! else, or inserts a Status line where the reader will find it.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context};

use crate::model::{BeadId, IterationStatus};

use super::super::fields;
use super::super::md::{Doc, OPAQUE};
use super::{parse_iteration, CONTENT_SECTIONS};

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
    let out = with_status(&bytes, status, file)?;
    if out != bytes {
        crate::system::atomic::write(file, &out)?;
    }
    Ok(())
}

/// The text of an ITERATION.md (`bytes`, read from `file`) with its status set to `status`:
/// one value changed, every other byte (a BOM, CRLF) kept.
pub fn with_status(bytes: &[u8], status: IterationStatus, file: &Path) -> anyhow::Result<Vec<u8>> {
    let (bom, body) = match bytes.strip_prefix(b"\xEF\xBB\xBF") {
        Some(rest) => (&bytes[..3], rest),
        None => (&bytes[..0], bytes),
    };
    let text = std::str::from_utf8(body).map_err(|_| {
        anyhow!(
            "{} is not valid UTF-8; fix it by hand before changing its status",
            file.display()
        )
    })?;
    let new = if crate::format::layout::is_edn(file) {
        crate::format::edn::edit::set_iteration_status(text, status)
    } else {
        set_status(text, status)
    };
    let new = new.map_err(|e| anyhow!("{}: {e}", file.display()))?;
    let mut out = Vec::with_capacity(bom.len() + new.len());
    out.extend_from_slice(bom);
    out.extend_from_slice(new.as_bytes());
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::tests::parse;
    use super::*;

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
