//! The registry writer: adds or updates one project's row and keeps every other byte of the
//! file — column order, extra columns, alignment where the value fits, the line endings.

use crate::model::{validate_slug, Priority, ProjectStatus};

use super::super::fields::strip_decor;
use super::super::md::{Doc, Table};
use super::{cell_of, locate, Missing, REGISTRY_TEMPLATE};

/// Adds a row for `slug` at the end of the registry table, or updates the cells of the row
/// that has it, keeping every other byte. Extra columns get empty cells; the file's line ending
/// is used. An empty text starts from [`REGISTRY_TEMPLATE`].
pub fn upsert_row(
    text: &str,
    slug: &str,
    status: ProjectStatus,
    priority: Priority,
    path: &str,
) -> Result<String, String> {
    validate_slug(slug).map_err(|e| e.to_string())?;
    let path = path.trim();
    if path.is_empty() {
        return Err(format!("the path for `{slug}` is empty"));
    }
    if path.contains(['|', '\n', '\r']) {
        return Err(format!(
            "the path `{}` contains `|` or a line break, which a table cannot hold",
            path.escape_debug()
        ));
    }
    if text.trim().is_empty() {
        return upsert_row(REGISTRY_TEMPLATE, slug, status, priority, path);
    }
    let doc = Doc::new(text);
    let (table, cols) = locate(&doc).map_err(|m| match m {
        Missing::NoTable => "the registry has no table with the columns Slug, Status, Priority and Path; add the header row `| Slug | Status | Priority | Path |`".to_string(),
        Missing::Columns(line, missing) => format!("the registry table on line {line} lacks the column(s) {}", missing.join(", ")),
    })?;
    let ncols = table.header.cells.len();
    let value_for = |i: usize| -> Option<&str> {
        if i == cols.slug {
            Some(slug)
        } else if i == cols.status {
            Some(status.as_str())
        } else if i == cols.priority {
            Some(priority.as_str())
        } else if i == cols.path {
            Some(path)
        } else {
            None
        }
    };

    if let Some(row) = table
        .rows
        .iter()
        .find(|r| cell_of(&doc, r, cols.slug) == slug)
    {
        if [cols.status, cols.priority, cols.path]
            .iter()
            .any(|&c| c >= row.cells.len())
        {
            // a short row: rewrite it whole, keeping the cells it has
            let values: Vec<String> = (0..ncols.max(row.cells.len()))
                .map(|i| match value_for(i) {
                    Some(v) => v.to_string(),
                    None => row
                        .cells
                        .get(i)
                        .map(|c| doc.cell(c).to_string())
                        .unwrap_or_default(),
                })
                .collect();
            let l = &doc.lines[row.line];
            let mut out = String::with_capacity(text.len() + 64);
            out.push_str(&text[..l.start]);
            out.push_str(&format_row(&doc, &table, &values));
            out.push_str(&text[l.end..]);
            return Ok(out);
        }
        let mut edits: Vec<(std::ops::Range<usize>, String)> = Vec::new();
        let aligned = is_aligned(&doc, &table);
        let mut edit = |i: usize, v: &str| {
            let inner = row.cells[i].inner.clone();
            let width = if aligned {
                doc.text[inner.clone()].chars().count()
            } else {
                0
            };
            edits.push((inner, pad_cell(v, width)));
        };
        if ProjectStatus::parse(strip_decor(&cell_of(&doc, row, cols.status))).ok() != Some(status)
        {
            edit(cols.status, status.as_str());
        }
        if Priority::parse(strip_decor(&cell_of(&doc, row, cols.priority))).ok() != Some(priority) {
            edit(cols.priority, priority.as_str());
        }
        if cell_of(&doc, row, cols.path) != path {
            edit(cols.path, path);
        }
        edits.sort_by_key(|e| std::cmp::Reverse(e.0.start));
        let mut out = text.to_string();
        for (r, s) in edits {
            out.replace_range(r, &s);
        }
        return Ok(out);
    }

    let values: Vec<String> = (0..ncols)
        .map(|i| value_for(i).unwrap_or("").to_string())
        .collect();
    let row = format_row(&doc, &table, &values);
    let eol = doc.eol();
    let last = &doc.lines[table.last_line()];
    let mut out = String::with_capacity(text.len() + row.len() + 2);
    if last.next > last.end {
        out.push_str(&text[..last.next]);
        out.push_str(&row);
        out.push_str(eol);
        out.push_str(&text[last.next..]);
    } else {
        out.push_str(&text[..last.end]);
        out.push_str(eol);
        out.push_str(&row);
        out.push_str(&text[last.end..]);
    }
    Ok(out)
}

/// ` value ` padded with spaces to `width` characters when it is shorter.
fn pad_cell(value: &str, width: usize) -> String {
    let mut s = if value.is_empty() {
        " ".to_string()
    } else {
        format!(" {value} ")
    };
    let n = s.chars().count();
    if n < width {
        s.extend(std::iter::repeat_n(' ', width - n));
    }
    s
}

/// Whether the table's columns are padded to equal widths (the delimiter row, or else the first
/// row, has the header's cell widths); if so, written cells are padded too.
fn is_aligned(doc: &Doc, table: &Table) -> bool {
    let widths = |cells: Vec<std::ops::Range<usize>>| -> Vec<usize> {
        cells
            .into_iter()
            .map(|r| doc.text[r].chars().count())
            .collect()
    };
    let header = widths(table.header.cells.iter().map(|c| c.inner.clone()).collect());
    let other = match (table.delim, table.rows.first()) {
        (Some(d), _) => doc.row_cells(d),
        (None, Some(r)) => r.cells.clone(),
        (None, None) => return false,
    };
    header == widths(other.iter().map(|c| c.inner.clone()).collect())
}

/// A row in the style of the table's header: same indentation and outer pipes, cells padded to
/// the header's widths when the table is aligned.
fn format_row(doc: &Doc, table: &Table, values: &[String]) -> String {
    let header = doc.line(table.header.line);
    let indent = &header[..header.len() - header.trim_start().len()];
    let lead = header.trim_start().starts_with('|');
    let trail = header.trim_end().ends_with('|');
    let aligned = is_aligned(doc, table);
    let mut s = String::from(indent);
    if lead {
        s.push('|');
    }
    let last = values.len().saturating_sub(1);
    for (i, v) in values.iter().enumerate() {
        if i > 0 {
            s.push('|');
        }
        let width = match table.header.cells.get(i) {
            Some(c) if aligned && (trail || i < last) => doc.text[c.inner.clone()].chars().count(),
            _ => 0,
        };
        let cell = pad_cell(v, width);
        // without outer pipes, no space before the first cell or after the last
        let cell = if !lead && i == 0 {
            cell.strip_prefix(' ').unwrap_or(&cell)
        } else {
            &cell
        };
        let cell = if !trail && i == last {
            cell.trim_end()
        } else {
            cell
        };
        s.push_str(cell);
    }
    if trail {
        s.push('|');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::super::tests::parse;
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn upsert_appends_in_the_tables_style() {
        let t = "# R\n\n| Slug | Status | Priority | Path | Notes |\n|------|--------|----------|------|-------|\n| a    | active | high     | ~/a  | hi    |\n\nFooter text.\n";
        let out = upsert_row(t, "b", ProjectStatus::Paused, Priority::Low, "~/b").unwrap();
        assert_eq!(
            out,
            "# R\n\n| Slug | Status | Priority | Path | Notes |\n|------|--------|----------|------|-------|\n| a    | active | high     | ~/a  | hi    |\n| b    | paused | low      | ~/b  |       |\n\nFooter text.\n"
        );
    }

    #[test]
    fn upsert_updates_only_changed_cells() {
        let t = "| Path | Slug | Status | Priority | Owner |\n|---|---|---|---|---|\n| ~/a | **a** | `active` | high | me |\n| ~/b | b | active | low | you |\n";
        let out = upsert_row(t, "a", ProjectStatus::Paused, Priority::High, "~/a").unwrap();
        assert_eq!(
            out,
            "| Path | Slug | Status | Priority | Owner |\n|---|---|---|---|---|\n| ~/a | **a** | paused | high | me |\n| ~/b | b | active | low | you |\n"
        );
        // nothing to change: not a byte changes
        assert_eq!(
            upsert_row(t, "a", ProjectStatus::Active, Priority::High, "~/a").unwrap(),
            t
        );
    }

    #[test]
    fn upsert_keeps_crlf_and_a_missing_final_newline() {
        let t = "| Slug | Status | Priority | Path |\r\n|---|---|---|---|\r\n| a | active | high | /a |";
        let out = upsert_row(t, "b", ProjectStatus::Active, Priority::Normal, "/b").unwrap();
        assert_eq!(out, format!("{t}\r\n| b | active | normal | /b |"));
        let empty_table = "| Slug | Status | Priority | Path |\r\n|---|---|---|---|\r\n\r\nend\r\n";
        let out = upsert_row(
            empty_table,
            "c",
            ProjectStatus::Blocked,
            Priority::High,
            "/c",
        )
        .unwrap();
        assert_eq!(out, "| Slug | Status | Priority | Path |\r\n|---|---|---|---|\r\n| c | blocked | high | /c |\r\n\r\nend\r\n");
    }

    #[test]
    fn upsert_into_template_and_errors() {
        let out = upsert_row(
            "",
            "app",
            ProjectStatus::Active,
            Priority::Normal,
            "$BRAIDS_HOME/app",
        )
        .unwrap();
        assert!(out.starts_with(REGISTRY_TEMPLATE));
        assert!(
            out.ends_with("| app  | active | normal   | $BRAIDS_HOME/app |\n"),
            "{out}"
        );
        let p = parse(&out);
        assert!(p.diagnostics.is_empty(), "{:?}", p.diagnostics);
        assert_eq!(
            p.value.entries[0].path,
            PathBuf::from("/home/u/Projects/app")
        );
        assert!(upsert_row(
            "no table",
            "a",
            ProjectStatus::Active,
            Priority::Normal,
            "/a"
        )
        .is_err());
        assert!(upsert_row(
            REGISTRY_TEMPLATE,
            "A b",
            ProjectStatus::Active,
            Priority::Normal,
            "/a"
        )
        .is_err());
        assert!(upsert_row(
            REGISTRY_TEMPLATE,
            "a",
            ProjectStatus::Active,
            Priority::Normal,
            "/a|b"
        )
        .is_err());
    }

    #[test]
    fn upsert_short_row_is_completed() {
        let t = "| Slug | Status | Priority | Path |\n|---|---|---|---|\n| a | active |\n";
        let out = upsert_row(t, "a", ProjectStatus::Active, Priority::Low, "/a").unwrap();
        assert_eq!(
            out,
            "| Slug | Status | Priority | Path |\n|---|---|---|---|\n| a | active | low | /a |\n"
        );
    }
}
