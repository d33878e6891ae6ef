//! ITERATION.md and iteration directories (CONTRACTS 1.3, 4.5).
//!
//! An iteration lives in `.braids/iterations/<N>/` where N is any decimal number (`001`, `1`,
//! `12`), ordered numerically. The directory's name as written is the iteration's name
//! ([`IterationName`]): `008` is shown as `008` everywhere. Its ITERATION.md has a Status field (planning, active, complete)
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

use crate::model::{BeadId, IterationName, IterationStatus};
use crate::system::diag::Diagnostic;
use crate::system::diag::{Diags, Parsed};

use super::fields;
use super::md::Doc;

pub use status::{set_status, with_status, write_status};

pub(super) const SECTION: &str = "1.3";

/// The label a forge issue's bead carries for its milestone, before the milestone's title.
pub const MILESTONE_LABEL: &str = "milestone:";

/// Sections whose lines are content, not fields.
pub(super) const CONTENT_SECTIONS: &[&str] =
    &["stories", "user stories", "beads", "guardrails", "notes"];

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Iteration {
    /// The directory's name as written (`001`, `1`, `12`).
    pub name: IterationName,
    pub dir: PathBuf,
    pub status: Option<IterationStatus>,
    /// The Stories entries whose id has a digit or a dash (`wp-3kq`, `123`), or that come from a
    /// table: stories whatever the tracker says.
    pub stories: Vec<Story>,
    /// The Stories list entries whose id is a plain word (`readme: …`, `TBD: …`): a story when
    /// the tracker knows the id, prose otherwise ([`Iteration::stories_known`]).
    pub maybe_stories: Vec<Story>,
    pub guardrails: Option<String>,
    pub notes: Option<String>,
    /// `Milestone: <title>`: the Stories are the milestone's issues, when the project's
    /// tracker is a forge's issues ([`Iteration::milestone_stories`]).
    pub milestone: Option<String>,
}

impl Iteration {
    /// The iteration's ITERATION.md.
    pub fn file(&self) -> PathBuf {
        super::layout::iteration_file(&self.dir)
    }

    /// The Stories as the tracker tells them from prose, in order: [`Iteration::stories`], and
    /// the entries of [`Iteration::maybe_stories`] whose id `known` says the tracker has.
    /// For an iteration that names a milestone: its Stories are the beads of `beads` in that
    /// milestone (a forge issue's bead carries the label `milestone:<title>`), in issue order,
    /// which is the order they were opened in. `None` when it names none.
    pub fn milestone_stories(&self, beads: &[crate::model::Bead]) -> Option<Vec<Story>> {
        let title = self.milestone.as_deref()?;
        let label = format!("{MILESTONE_LABEL}{title}");
        let mut of: Vec<&crate::model::Bead> = beads
            .iter()
            .filter(|b| b.labels.iter().any(|l| l.eq_ignore_ascii_case(&label)))
            .collect();
        of.sort_by_key(|b| (b.id.issue_number(), b.id.clone()));
        Some(
            of.into_iter()
                .map(|b| Story {
                    id: b.id.clone(),
                    title: b.title.clone(),
                    line: 0,
                })
                .collect(),
        )
    }

    pub fn stories_known(&self, known: impl Fn(&BeadId) -> bool) -> Vec<&Story> {
        let mut out: Vec<&Story> = self.stories.iter().collect();
        out.extend(self.maybe_stories.iter().filter(|s| known(&s.id)));
        out.sort_by_key(|s| s.line);
        out
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
    let dir = project_root.join(".braids").join("iterations");
    // The newer EDN layout keeps them under `.project/` (CONTRACTS 1.7).
    let newer = project_root.join(".project").join("iterations");
    if !dir.exists() && newer.is_dir() {
        return newer;
    }
    dir
}

/// Reads ITERATION.md text. Never fails.
pub fn parse_iteration(
    text: &str,
    file: &Path,
    name: impl Into<IterationName>,
    dir: PathBuf,
) -> Parsed<Iteration> {
    let doc = Doc::new(text);
    let mut diags = Diags::new(file, SECTION);
    let raw = fields::first_only(fields::scan(&doc, CONTENT_SECTIONS), &mut diags);
    fields::misspelled(&raw, &["Status"], &mut diags);
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
    let (stories, maybe_stories) = stories::read_stories(&doc, &mut diags);
    let section = |name: &str| {
        doc.find_heading(name)
            .map(|h| doc.raw_lines(doc.section_body(h)))
            .filter(|s| !s.is_empty())
    };
    let milestone = raw
        .iter()
        .find(|f| f.field.key == "milestone")
        .map(|f| (f, fields::strip_decor(&f.field.value).trim().to_string()))
        .filter(|(_, m)| !m.is_empty());
    if let (Some((f, m)), false) = (&milestone, stories.is_empty()) {
        diags.warn(
            Some(f.field.line),
            format!("the iteration names Milestone `{m}` and Stories: the milestone's issues are its stories, and the Stories list is not read"),
            "keep one: delete the Milestone line, or the Stories",
        );
    }
    let iteration = Iteration {
        name: name.into(),
        dir,
        status,
        stories,
        maybe_stories,
        guardrails: section("guardrails"),
        notes: section("notes"),
        milestone: milestone.map(|(_, m)| m),
    };
    diags.by_line(iteration)
}

/// The stories of `it` that its tracker does not know, each with a finding that names the line
/// and the fix. Such a story can never be closed, so the iteration could never complete (3.7).
/// `known` says whether the tracker has a bead; `tracker` is its kind (`br`, `bd`, `workplan`),
/// named in the fix. A complete iteration is frozen (4.5) and has nothing left to complete, so it
/// has none.
pub fn unknown_stories<'a>(
    it: &'a Iteration,
    known: impl Fn(&BeadId) -> bool,
    tracker: &str,
) -> Vec<(&'a Story, Diagnostic)> {
    // A milestone's issues are its stories: the Stories list is not read.
    if it.status == Some(IterationStatus::Complete) || it.milestone.is_some() {
        return Vec::new();
    }
    it.stories
        .iter()
        .filter(|s| !known(&s.id))
        .map(|s| {
            let never = format!("so iteration {} can never complete", it.name);
            let (message, fix) = match (tracker, s.id.issue_number()) {
                ("github" | "gitlab", Some(n)) => (
                    format!("story #{n} is not an issue of the project's forge carrying its labels, {never}"),
                    format!(
                        "give issue #{n} every label PROJECT.md's `Labels:` names (`braids` by default), write the number of an issue that has them, or delete the line"
                    ),
                ),
                ("github" | "gitlab", None) => (
                    format!("story {} is not an issue: with `Tracker: {tracker}` the Stories name issues, {never}", s.id),
                    "write the issue as `#<number>` (`- #12: Add the login page`), or delete the line".to_string(),
                ),
                ("br" | "bd", _) => (
                    format!("story {} is not a bead the project's tracker ({tracker}) knows, {never}", s.id),
                    format!(
                        "write the id of an existing bead (`{tracker} list` shows them), create the bead with `{tracker} create` and write the id it prints, or delete the line"
                    ),
                ),
                _ => (
                    format!("story {} is not a bead the project's tracker (.braids/WORKPLAN.md) knows, {never}", s.id),
                    format!(
                        "write the id of an existing item (its `<!-- id:… -->`), add an item ending in `<!-- id:{} -->` to .braids/WORKPLAN.md, or delete the line",
                        s.id
                    ),
                ),
            };
            let d = Diagnostic::error(&it.file(), Some(s.line), SECTION, message, fix);
            (s, d)
        })
        .collect()
}

/// The Stories entries of `it` starting with a plain word the tracker does not know (`TBD:`),
/// as warnings: they are read as prose and ignored. `known` is as for [`unknown_stories`].
pub fn prose_entries(it: &Iteration, known: impl Fn(&BeadId) -> bool) -> Vec<Diagnostic> {
    it.maybe_stories
        .iter()
        .filter(|s| !known(&s.id))
        .map(|s| {
            Diagnostic::warning(
                &it.file(),
                Some(s.line),
                SECTION,
                format!(
                    "this Stories entry is not of the form `<bead-id>: <title>` (`{}` is no bead the project's tracker knows), so it is ignored",
                    s.id
                ),
                "write the entry as `- <bead-id>: <title>` with the id the tracker gave the bead, or move the text to the Notes section",
            )
        })
        .collect()
}

/// One entry of `.braids/iterations/`, as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub name: std::ffi::OsString,
    /// Whether it is a directory, from the listing itself; `None` for a symlink (or a file
    /// system that does not say), which takes a stat to tell.
    pub dir: Option<bool>,
}

/// Every entry of `.braids/iterations/`, sorted by name; none when the directory is missing.
pub fn list_entries(project_root: &Path) -> Vec<Listed> {
    let Ok(rd) = std::fs::read_dir(iterations_dir(project_root)) else {
        return Vec::new();
    };
    let mut out: Vec<Listed> = rd
        .flatten()
        .map(|e| Listed {
            // The entry's type costs no syscall; only a symlink needs a stat to follow it.
            dir: match e.file_type() {
                Ok(t) if !t.is_symlink() => Some(t.is_dir()),
                _ => None,
            },
            name: e.file_name(),
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// The entries that are iteration directories, `(name, path)`, sorted numerically (`001`, `2`,
/// `10`); names that are not decimal numbers are ignored.
pub fn iteration_dirs(project_root: &Path, entries: &[Listed]) -> Vec<(IterationName, PathBuf)> {
    let dir = iterations_dir(project_root);
    let mut out: Vec<(IterationName, PathBuf)> = entries
        .iter()
        .filter_map(|e| {
            let name = e.name.to_str()?;
            if name.trim() != name {
                return None;
            }
            let n = IterationName::new(name).ok()?;
            let p = dir.join(&e.name);
            e.dir.unwrap_or_else(|| p.is_dir()).then_some((n, p))
        })
        .collect();
    out.sort();
    out
}

/// Iteration directories of a project, `(name, path)`, sorted numerically (`001`, `2`,
/// `10`); names that are not decimal numbers are ignored, as is a missing directory.
pub fn list_iteration_dirs(project_root: &Path) -> Vec<(IterationName, PathBuf)> {
    iteration_dirs(project_root, &list_entries(project_root))
}

/// Reads every iteration of a project in order. An iteration directory without ITERATION.md is
/// an error and skipped; two directories with one number and two active iterations are errors.
pub fn read_iterations(project_root: &Path) -> Parsed<Vec<Iteration>> {
    read_iterations_with(
        project_root,
        list_iteration_dirs(project_root),
        crate::system::atomic::read,
    )
}

/// [`read_iterations`] over directories already listed, each ITERATION.md read by `read`.
pub fn read_iterations_with(
    project_root: &Path,
    dirs: Vec<(IterationName, PathBuf)>,
    mut read: impl FnMut(&Path) -> std::io::Result<Vec<u8>>,
) -> Parsed<Vec<Iteration>> {
    let mut diags = Diags::new(&iterations_dir(project_root), SECTION);
    let mut out = Vec::new();
    for w in dirs.windows(2) {
        if w[0].0.number() == w[1].0.number() {
            diags
                .error(
                    None,
                    format!(
                        "directories {} and {} are both iteration {}",
                        w[0].1.display(),
                        w[1].1.display(),
                        w[0].0.number()
                    ),
                    "rename one of them to an unused number",
                )
                .about(&w[1].1);
        }
    }
    for (n, dir) in dirs {
        let mut file = dir.join("ITERATION.md");
        let mut got = read(&file);
        if matches!(&got, Err(e) if e.kind() == std::io::ErrorKind::NotFound) {
            let edn = dir.join("iteration.edn");
            if let Ok(bytes) = read(&edn) {
                (file, got) = (edn, Ok(bytes));
            }
        }
        match got {
            Ok(bytes) => {
                let p = super::layout::parse_iteration(&super::decode(&bytes), &file, n, dir);
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
            .map(|i| i.name.to_string())
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
            IterationName::new("001").unwrap(),
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
        for n in [
            "10",
            "001",
            "2",
            "notes",
            "3a",
            "0004",
            "9",
            " 7",
            "99999999999",
        ] {
            std::fs::create_dir_all(iterations_dir(root).join(n)).unwrap();
        }
        std::fs::write(iterations_dir(root).join("5"), "a file").unwrap();
        let got: Vec<(String, String)> = list_iteration_dirs(root)
            .into_iter()
            .map(|(n, p)| {
                let dir = p.file_name().unwrap().to_string_lossy().into_owned();
                (n.to_string(), dir)
            })
            .collect();
        let want = [
            ("001", "001"),
            ("2", "2"),
            ("0004", "0004"),
            ("9", "9"),
            ("10", "10"),
        ];
        let want: Vec<(String, String)> = want
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        assert_eq!(got, want);
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
        let names: Vec<String> = p.value.iter().map(|i| i.name.to_string()).collect();
        assert_eq!(names, ["001", "2", "10"]);
        assert_eq!(p.value[0].dir, it.join("001"));
        assert_eq!(p.diagnostics.len(), 2, "{:?}", p.diagnostics);
        assert!(p.diagnostics[0].path.ends_with("3/ITERATION.md"));
        assert!(p.diagnostics[1].message.contains("2, 10"));
    }

    #[test]
    fn c1_3_plain_word_ids_are_stories_when_the_tracker_knows_them() {
        let t = "Status: active\n\n## Stories\n\n- wp-a1b: First\n- readme: Write the README\n- TBD: later\n- e-404: Gone\n";
        let p = parse(t);
        assert!(p.diagnostics.is_empty(), "{:?}", p.diagnostics);
        let it = p.value;
        let ids = |v: Vec<&Story>| v.iter().map(|s| s.id.to_string()).collect::<Vec<_>>();
        assert_eq!(ids(it.stories.iter().collect()), ["wp-a1b", "e-404"]);
        assert_eq!(ids(it.maybe_stories.iter().collect()), ["readme", "TBD"]);
        let tracker = ["wp-a1b", "readme"];
        let known = |id: &BeadId| tracker.contains(&id.as_str());
        assert_eq!(ids(it.stories_known(known)), ["wp-a1b", "readme", "e-404"]);

        let unknown = unknown_stories(&it, known, "workplan");
        assert_eq!(unknown.len(), 1);
        let (story, d) = &unknown[0];
        assert_eq!((story.id.as_str(), d.line), ("e-404", Some(8)));
        assert_eq!(d.severity, crate::system::diag::Severity::Error);
        assert!(
            d.message.contains("iteration 001 can never complete"),
            "{d}"
        );
        assert!(d.fix.contains("<!-- id:e-404 -->"), "{d}");
        let br = unknown_stories(&it, known, "br");
        assert!(br[0].1.fix.contains("`br create`"), "{}", br[0].1);

        let prose = prose_entries(&it, known);
        assert_eq!(prose.len(), 1);
        assert_eq!(prose[0].line, Some(7));
        assert_eq!(prose[0].severity, crate::system::diag::Severity::Warning);
        assert!(prose[0].message.contains("`TBD`"), "{}", prose[0]);

        let mut done = it.clone();
        done.status = Some(IterationStatus::Complete);
        assert!(
            unknown_stories(&done, known, "br").is_empty(),
            "frozen (4.5)"
        );
    }
}
