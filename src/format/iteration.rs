//! ITERATION.md and iteration directories (CONTRACTS 1.3, 4.5).
//!
//! An iteration lives in `.braids/iterations/<N>/` where N is any decimal number (`001`, `1`,
//! `12`), ordered numerically. Its ITERATION.md has a Status field (planning, active, complete)
//! written in any of the forms [`super::fields`] accepts, a Stories section listing
//! `- <bead-id>: <title>` entries in order (bold, backticks, task boxes and dashes tolerated),
//! and optional Guardrails and Notes sections.
//!
//! The Stories section is read in `stories.rs`; [`set_status`] (in `status.rs`) changes only the
//! Status value where it was written, whatever its form, so a status change is a one-word diff;
//! it refuses to reopen a complete iteration (4.5).

mod status;
mod stories;

use std::path::{Path, PathBuf};

use crate::diag::{Diags, Parsed};
use crate::model::{BeadId, IterationStatus};

use super::fields;
use super::md::Doc;

pub use status::{set_status, write_status};

pub(super) const SECTION: &str = "1.3";

/// Sections whose lines are content, not fields.
pub(super) const CONTENT_SECTIONS: &[&str] =
    &["stories", "user stories", "beads", "guardrails", "notes"];

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
    let mut diags = Diags::new(file, SECTION);
    let raw = fields::first_only(fields::scan(&doc, CONTENT_SECTIONS), &mut diags);
    let status = match raw.iter().find(|f| f.field.key == "status") {
        None => {
            diags.error(
                None,
                "required field Status is missing, so the iteration's status is unknown",
                "add the line `Status: planning` (or active, complete) below the title",
            );
            None
        }
        Some(f) if f.field.value.trim().is_empty() => {
            diags.error(
                Some(f.field.line),
                "field Status is empty, so the iteration's status is unknown",
                format!("write planning, active or complete after `{}:`", f.raw_key),
            );
            None
        }
        Some(f) => match IterationStatus::parse(fields::strip_decor(&f.field.value)) {
            Ok(s) => Some(s),
            Err(e) => {
                diags.error(
                    Some(f.field.line),
                    format!(
                        "Status `{}` is not one of {}, so the iteration's status is unknown",
                        e.value, e.expected
                    ),
                    format!("write planning, active or complete after `{}:`", f.raw_key),
                );
                None
            }
        },
    };
    let stories = stories::read_stories(&doc, &mut diags);
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
    diags.by_line(iteration)
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
    let mut diags = Diags::new(&iterations_dir(project_root), SECTION);
    let mut out = Vec::new();
    let dirs = list_iteration_dirs(project_root);
    for w in dirs.windows(2) {
        if w[0].0 == w[1].0 {
            diags
                .error(
                    None,
                    format!(
                        "directories {} and {} are both iteration {}",
                        w[0].1.display(),
                        w[1].1.display(),
                        w[0].0
                    ),
                    "rename one of them to an unused number",
                )
                .about(&w[1].1);
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
                diags.error(
                    None,
                    msg,
                    "create ITERATION.md with a `Status: planning` line (`braids iteration new` writes one)",
                ).about(&file);
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
            diags.error(
                None,
                format!("{} active iterations ({numbers}), but a project has at most one active iteration", active.len()),
                "set every iteration but one to planning or complete",
            ).about(&it.file());
        }
    }
    diags.parsed(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn parse(text: &str) -> Parsed<Iteration> {
        parse_iteration(
            text,
            Path::new("/p/.braids/iterations/001/ITERATION.md"),
            1,
            PathBuf::from("/p/.braids/iterations/001"),
        )
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
}
