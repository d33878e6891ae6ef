//! registry.md (CONTRACTS 1.1): the projects braids schedules, one table row each.
//!
//! The registry is the first markdown table anywhere in the file whose header has the columns
//! Slug, Status, Priority and Path — in any order and case, with any extra columns, cells
//! possibly in backticks or bold. Rows that cannot be used (bad slug, repeated slug, no path)
//! are skipped with an error naming the line; rows with a bad status or priority are kept with
//! the value unset, so the project is visible but not scheduled by accident.
//!
//! [`upsert_row`] (in `upsert.rs`) adds or updates one row and keeps every other byte of the
//! file: column order, extra columns (filled with empty cells), alignment where the value fits,
//! CRLF endings.

mod upsert;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::model::{validate_slug, Priority, ProjectStatus};
use crate::system::diag::{Diagnostic, Diags, Parsed};
use crate::system::paths::Paths;

use super::fields::{clean_value, normalize_key, strip_decor};
use super::md::{Doc, Row, Table};

pub use upsert::upsert_row;

const SECTION: &str = "1.1";

/// A new registry: a short explanation and the empty table.
pub const REGISTRY_TEMPLATE: &str = "# braids registry

The projects braids schedules, one row each. Slug is the project's short name (lowercase \
letters, digits and `-`); Status is `active`, `paused` or `blocked`; Priority is `high`, \
`normal` or `low`; Path is the project directory and may start with `~` or `$BRAIDS_HOME`. \
Extra columns are kept and ignored.

| Slug | Status | Priority | Path |
|------|--------|----------|------|
";

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Registry {
    pub entries: Vec<RegistryEntry>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryEntry {
    pub slug: String,
    /// `None` when the cell is not a valid status (a diagnostic says which).
    pub status: Option<ProjectStatus>,
    pub priority: Option<Priority>,
    /// Expanded: `~` and `$BRAIDS_HOME` resolved (4.1, 4.2).
    pub path: PathBuf,
    pub raw_path: String,
    pub line: usize,
}

impl Registry {
    /// The entry for `slug`.
    pub fn get(&self, slug: &str) -> Option<&RegistryEntry> {
        self.entries.iter().find(|e| e.slug == slug)
    }
}

/// Column indices of the four required columns.
#[derive(Debug, Clone, Copy)]
struct Columns {
    slug: usize,
    status: usize,
    priority: usize,
    path: usize,
}

const REQUIRED: [&str; 4] = ["Slug", "Status", "Priority", "Path"];

/// Why no registry table was found: nothing table-like, or the best candidate (its 1-based
/// line) and the columns it lacks.
enum Missing {
    NoTable,
    Columns(usize, Vec<&'static str>),
}

/// A cell's value: trimmed, `\|` unescaped, emphasis, code marks and a link's target removed.
fn clean_cell(raw: &str) -> String {
    let s = clean_value(raw);
    let s = match (s.strip_prefix('['), s.find("](")) {
        (Some(_), Some(i)) if s.ends_with(')') => clean_value(&s[1..i]),
        _ => s,
    };
    s.replace("\\|", "|")
}

fn locate(doc: &Doc) -> Result<(Table, Columns), Missing> {
    let mut best: Option<(usize, usize, Vec<&'static str>)> = None;
    for t in doc.tables(0..doc.lines.len()) {
        let names: Vec<String> = t
            .header
            .cells
            .iter()
            .map(|c| normalize_key(&clean_cell(doc.cell(c))))
            .collect();
        let pos = |n: &str| names.iter().position(|h| *h == n.to_ascii_lowercase());
        let found: Vec<Option<usize>> = REQUIRED.iter().map(|n| pos(n)).collect();
        if let [Some(slug), Some(status), Some(priority), Some(path)] = found[..] {
            return Ok((
                t,
                Columns {
                    slug,
                    status,
                    priority,
                    path,
                },
            ));
        }
        let hits = found.iter().filter(|f| f.is_some()).count();
        if hits > 0 && best.as_ref().is_none_or(|b| hits > b.0) {
            let missing = REQUIRED
                .iter()
                .zip(&found)
                .filter(|(_, f)| f.is_none())
                .map(|(n, _)| *n)
                .collect();
            best = Some((hits, t.header.line + 1, missing));
        }
    }
    match best {
        Some((_, line, missing)) => Err(Missing::Columns(line, missing)),
        None => Err(Missing::NoTable),
    }
}

fn cell_of(doc: &Doc, row: &Row, i: usize) -> String {
    row.cells
        .get(i)
        .map(|c| clean_cell(doc.cell(c)))
        .unwrap_or_default()
}

/// A slug someone probably meant, for the fix of an invalid one.
fn suggest_slug(raw: &str) -> String {
    let mut out = String::new();
    for c in raw.trim().chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_end_matches('-').chars().take(64).collect()
}

/// Reads registry.md text. Never fails: unusable rows are skipped with a diagnostic.
pub fn parse_registry(text: &str, file: &Path, paths: &Paths) -> Parsed<Registry> {
    let doc = Doc::new(text);
    let mut diags = Diags::new(file, SECTION);
    let mut reg = Registry::default();
    let (table, cols) = match locate(&doc) {
        Ok(found) => found,
        Err(Missing::NoTable) => {
            if text.trim_start_matches('\u{feff}').trim().is_empty() {
                diags.warn(
                    None,
                    "the registry is empty, so no project is scheduled",
                    "add the table header `| Slug | Status | Priority | Path |` and one row per project (`braids new` does it)",
                );
            } else {
                diags.error(
                    None,
                    "the registry has no table with the columns Slug, Status, Priority and Path, so no project is scheduled",
                    "add the table header `| Slug | Status | Priority | Path |` followed by `|---|---|---|---|` and one row per project",
                );
            }
            return diags.parsed(reg);
        }
        Err(Missing::Columns(line, missing)) => {
            let names = missing
                .iter()
                .map(|m| format!("`{m}`"))
                .collect::<Vec<_>>()
                .join(", ");
            diags.error(
                Some(line),
                format!(
                    "the registry table lacks the required column{} {names}, so no project is scheduled",
                    if missing.len() == 1 { "" } else { "s" }
                ),
                format!("add {names} to the header row (the columns are Slug, Status, Priority and Path, in any order)"),
            );
            return diags.parsed(reg);
        }
    };
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut seen_paths: HashMap<PathBuf, (String, usize)> = HashMap::new();
    for row in &table.rows {
        let line = row.line + 1;
        if row.cells.iter().all(|c| doc.cell(c).is_empty()) {
            continue;
        }
        let slug = cell_of(&doc, row, cols.slug);
        if slug.is_empty() {
            diags.error(
                Some(line),
                "this registry row has no slug, so it is ignored",
                "write the project's slug (lowercase letters, digits and `-`) in the Slug cell",
            );
            continue;
        }
        if validate_slug(&slug).is_err() {
            let hint = suggest_slug(&slug);
            let fix = if hint.is_empty() || validate_slug(&hint).is_err() {
                "use only lowercase letters, digits and `-`, starting with a letter or digit"
                    .to_string()
            } else {
                format!("rename it to `{hint}` (lowercase letters, digits and `-`)")
            };
            diags.error(
                Some(line),
                format!(
                    "slug `{}` is not valid, so this row is ignored",
                    slug.escape_debug()
                ),
                fix,
            );
            continue;
        }
        if let Some(&first) = seen.get(&slug) {
            diags.error(
                Some(line),
                format!("slug `{slug}` is listed twice, on lines {first} and {line}; only line {first} is used"),
                format!("delete or rename one of the rows on lines {first} and {line}"),
            );
            continue;
        }
        seen.insert(slug.clone(), line);

        let status_raw = cell_of(&doc, row, cols.status);
        let status = if status_raw.is_empty() {
            diags.error(
                Some(line),
                format!("project `{slug}` has no status, so it is not scheduled"),
                "write active, paused or blocked in the Status cell",
            );
            None
        } else {
            match ProjectStatus::parse(strip_decor(&status_raw)) {
                Ok(s) => Some(s),
                Err(e) => {
                    let complete = matches!(
                        normalize_key(&status_raw).as_str(),
                        "complete" | "completed" | "done" | "finished" | "closed"
                    );
                    let (msg, fix) = if complete {
                        (
                            format!(
                                "project `{slug}` has status `{}`, but a project is never complete (valid: {}), so it is not scheduled",
                                e.value, e.expected
                            ),
                            "set it to paused to stop scheduling the project, or delete the row".to_string(),
                        )
                    } else {
                        (
                            format!(
                                "project `{slug}` has status `{}`, which is not one of {}, so it is not scheduled",
                                e.value, e.expected
                            ),
                            "write active, paused or blocked in the Status cell".to_string(),
                        )
                    };
                    diags.error(Some(line), msg, fix);
                    None
                }
            }
        };

        let priority_raw = cell_of(&doc, row, cols.priority);
        let priority = if priority_raw.is_empty() {
            diags.warn(
                Some(line),
                format!("project `{slug}` has no priority, so the default normal applies"),
                "write high, normal or low in the Priority cell",
            );
            None
        } else {
            match Priority::parse(strip_decor(&priority_raw)) {
                Ok(p) => Some(p),
                Err(e) => {
                    diags.error(
                        Some(line),
                        format!(
                            "project `{slug}` has priority `{}`, which is not one of {}, so the default normal applies",
                            e.value, e.expected
                        ),
                        "write high, normal or low in the Priority cell",
                    );
                    None
                }
            }
        };

        let raw_path = cell_of(&doc, row, cols.path);
        if raw_path.is_empty() {
            diags.error(
                Some(line),
                format!("project `{slug}` has an empty Path, so its row is ignored"),
                format!(
                    "write the project directory in the Path cell, such as `$BRAIDS_HOME/{slug}`"
                ),
            );
            continue;
        }
        let path = paths.expand(&raw_path);
        // Two slugs for one directory would schedule its beads twice, once per label.
        if let Some((first_slug, first)) = seen_paths.get(&path) {
            diags.error(
                Some(line),
                format!(
                    "project `{slug}` has the same Path as `{first_slug}` on line {first} ({}), so its row is ignored: one directory is one project",
                    path.display()
                ),
                format!("give `{slug}` its own directory, or delete one of the rows on lines {first} and {line}"),
            );
            continue;
        }
        seen_paths.insert(path.clone(), (slug.clone(), line));
        reg.entries.push(RegistryEntry {
            slug,
            status,
            priority,
            path,
            raw_path,
            line,
        });
    }
    diags.parsed(reg)
}

/// Reads `~/.openclaw/braids/registry.md`. A missing file is an empty registry and a warning.
pub fn read_registry(paths: &Paths) -> Parsed<Registry> {
    let file = super::layout::registry_file(paths);
    let mut diags = Diags::new(&file, SECTION);
    match crate::system::atomic::read(&file) {
        Ok(bytes) => return super::layout::parse_registry(&super::decode(&bytes), &file, paths),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => diags.warn(
            None,
            "the registry does not exist yet, so no project is scheduled",
            "run `braids init` to create it",
        ),
        Err(e) => diags.error(
            None,
            format!("the registry cannot be read ({e}), so no project is scheduled"),
            "make the file readable by the user braids runs as",
        ),
    };
    diags.parsed(Registry::default())
}

/// Checks what parsing cannot: each Path is a directory with `.braids/PROJECT.md` (1.1) and is
/// outside the agent workspace (4.1).
pub fn check_paths(registry: &Registry, file: &Path, paths: &Paths) -> Vec<Diagnostic> {
    let mut out = Diags::new(file, SECTION);
    for e in &registry.entries {
        let shown = e.path.display();
        if paths.in_workspace(&e.path) {
            out.error(
                Some(e.line),
                format!("project `{}` lives in the agent workspace ({shown}), where project files must never be", e.slug),
                "move the project under BRAIDS_HOME and update its Path",
            ).in_section("4.1");
        }
        if !e.path.is_dir() {
            out.error(
                Some(e.line),
                format!(
                    "the Path of project `{}` ({shown}) is not an existing directory",
                    e.slug
                ),
                "fix the Path cell or create the project with `braids new`",
            );
        } else if !super::layout::project_file(&e.path).is_file() {
            out.error(
                Some(e.line),
                format!("project `{}` has no .braids/PROJECT.md in {shown}", e.slug),
                "create .braids/PROJECT.md there (`braids new` writes one) or fix the Path cell",
            );
        }
    }
    out.into_vec()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::system::diag::Severity;

    fn paths() -> Paths {
        Paths::new("/home/u".into(), None)
    }

    pub(super) fn parse(text: &str) -> Parsed<Registry> {
        parse_registry(
            text,
            Path::new("/home/u/.openclaw/braids/registry.md"),
            &paths(),
        )
    }

    #[test]
    fn c1_1_basic_table_and_expansion() {
        let t = "# Registry\n\n| Slug | Status | Priority | Path |\n|---|---|---|---|\n| app | active | high | ~/Projects/app |\n| lib | paused | low | $BRAIDS_HOME/lib |\n| svc | blocked | normal | /srv/svc |\n";
        let p = parse(t);
        assert!(p.diagnostics.is_empty(), "{:?}", p.diagnostics);
        let e = &p.value.entries;
        assert_eq!(e.len(), 3);
        assert_eq!(e[0].slug, "app");
        assert_eq!(e[0].status, Some(ProjectStatus::Active));
        assert_eq!(e[0].priority, Some(Priority::High));
        assert_eq!(e[0].path, PathBuf::from("/home/u/Projects/app"));
        assert_eq!(e[0].raw_path, "~/Projects/app");
        assert_eq!(e[0].line, 5);
        assert_eq!(e[1].path, PathBuf::from("/home/u/Projects/lib"));
        assert_eq!(e[2].status, Some(ProjectStatus::Blocked));
    }

    #[test]
    fn c1_1_reordered_extra_columns_any_case_and_decoration() {
        let t = "Intro.\n\n| Notes | PATH | priority | 🏷 **Slug** | status | Owner |\n|:--|--|--|--|--|--|\n| big one | `~/p/app` | 🔥 **High** | `app` | 🟢 Active | me |\n";
        let p = parse(t);
        assert!(p.diagnostics.is_empty(), "{:?}", p.diagnostics);
        let e = &p.value.entries[0];
        assert_eq!(
            (e.slug.as_str(), e.status, e.priority),
            ("app", Some(ProjectStatus::Active), Some(Priority::High))
        );
        assert_eq!(e.path, PathBuf::from("/home/u/p/app"));
    }

    #[test]
    fn c1_1_first_matching_table_wins_wherever_it_is() {
        let t = "| a | b |\n|---|---|\n| 1 | 2 |\n\n```\n| Slug | Status | Priority | Path |\n|---|---|---|---|\n| fake | active | high | /x |\n```\n\n## Projects\n\n| Slug | Status | Priority | Path |\n|---|---|---|---|\n| real | active | high | /r |\n\n## Archive\n\n| Slug | Status | Priority | Path |\n|---|---|---|---|\n| old | paused | low | /o |\n";
        let p = parse(t);
        let slugs: Vec<&str> = p.value.entries.iter().map(|e| e.slug.as_str()).collect();
        assert_eq!(slugs, ["real"]);
    }

    #[test]
    fn c1_1_missing_columns_are_named() {
        let p = parse("| Slug | Status | Notes |\n|---|---|---|\n| a | active | x |\n");
        assert!(p.value.entries.is_empty());
        let d = &p.diagnostics[0];
        assert_eq!(
            (d.severity, d.line, d.section),
            (Severity::Error, Some(1), "1.1")
        );
        assert!(d.message.contains("`Priority`, `Path`"), "{}", d.message);
        let none = parse("just text\n");
        assert!(none.has_errors());
        let empty = parse("");
        assert_eq!(empty.diagnostics[0].severity, Severity::Warning);
    }

    #[test]
    fn c1_1_invalid_values() {
        let t = "| Slug | Status | Priority | Path |\n|---|---|---|---|\n| a | complete | high | /a |\n| b | sleeping | urgent | /b |\n| Bad_Slug | active | high | /c |\n| a | active | high | /d |\n| e | active | high |  |\n| f | active |  | /f |\n|  |  |  |  |\n";
        let p = parse(t);
        let e = &p.value.entries;
        let slugs: Vec<&str> = e.iter().map(|e| e.slug.as_str()).collect();
        assert_eq!(slugs, ["a", "b", "f"]);
        assert_eq!(e[0].status, None);
        assert_eq!((e[1].status, e[1].priority), (None, None));
        let by_line = |l: usize| {
            p.diagnostics
                .iter()
                .filter(|d| d.line == Some(l))
                .collect::<Vec<_>>()
        };
        assert!(
            by_line(3)[0].message.contains("never complete"),
            "{:?}",
            by_line(3)
        );
        assert!(by_line(3)[0].message.contains("active paused blocked"));
        assert_eq!(by_line(4).len(), 2);
        assert!(by_line(5)[0].fix.contains("bad-slug"), "{:?}", by_line(5));
        assert!(
            by_line(6)[0].message.contains("lines 3 and 6"),
            "{:?}",
            by_line(6)
        );
        assert!(by_line(7)[0].message.contains("empty Path"));
        assert_eq!(by_line(8)[0].severity, Severity::Warning);
        assert!(p
            .diagnostics
            .iter()
            .all(|d| d.section == "1.1" && !d.fix.is_empty()));
    }

    #[test]
    fn c1_1_crlf_bom_and_no_outer_pipes() {
        let p = parse("\u{feff}Slug | Status | Priority | Path\r\n--- | --- | --- | ---\r\napp | active | low | ~/a\r\n");
        assert!(p.diagnostics.is_empty(), "{:?}", p.diagnostics);
        assert_eq!(p.value.entries[0].path, PathBuf::from("/home/u/a"));
        assert_eq!(p.value.entries[0].priority, Some(Priority::Low));
    }

    #[test]
    fn read_missing_registry_warns() {
        let dir = tempfile::tempdir().unwrap();
        let p = Paths::new(dir.path().to_path_buf(), None);
        let r = read_registry(&p);
        assert!(r.value.entries.is_empty());
        assert!(r.diagnostics[0].fix.contains("braids init"));
        assert_eq!(r.diagnostics[0].severity, Severity::Warning);
    }

    #[test]
    fn c1_1_check_paths() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().to_path_buf();
        let p = Paths::new(home.clone(), None);
        std::fs::create_dir_all(home.join("Projects/ok/.braids")).unwrap();
        std::fs::write(home.join("Projects/ok/.braids/PROJECT.md"), "# ok\n").unwrap();
        std::fs::create_dir_all(home.join("Projects/bare")).unwrap();
        let t = "| Slug | Status | Priority | Path |\n|---|---|---|---|\n| ok | active | high | ok |\n| bare | active | high | bare |\n| gone | active | high | gone |\n| ws | active | high | ~/.openclaw/workspace/ws |\n";
        let reg = parse_registry(t, &p.registry(), &p).value;
        let d = check_paths(&reg, &p.registry(), &p);
        let lines: Vec<_> = d.iter().map(|d| (d.line.unwrap(), d.section)).collect();
        assert_eq!(lines, [(4, "1.1"), (5, "1.1"), (6, "4.1"), (6, "1.1")]);
    }
}
