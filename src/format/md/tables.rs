//! Pipe tables, found line by line over the lines the structure pass left readable: a little
//! more tolerant than GFM (a missing delimiter row or a cell-count mismatch still makes a table),
//! with byte ranges for every cell so writers can change one cell and keep the rest.

use std::ops::Range;

use super::{Doc, OPAQUE};

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

impl Doc<'_> {
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
}
