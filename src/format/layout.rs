//! Where each file is and which form it has: braids' markdown (`registry.md`,
//! `.braids/PROJECT.md`, `ITERATION.md`) or the EDN layout of the braids it replaces
//! (`registry.edn`, `.braids/config.edn` or `.project/config.edn`, `iteration.edn`, CONTRACTS
//! 1.7). The markdown wins where both exist; `braids check` warns about the EDN file it ignores.
//! Readers and writers here pick the form from the file's name.

use std::path::{Path, PathBuf};

use crate::model::{IterationName, Priority, ProjectStatus};
use crate::system::diag::{Diagnostic, Diags, Parsed};
use crate::system::paths::Paths;

use super::iteration::Iteration;
use super::project::ProjectConfig;
use super::registry::Registry;

/// A project's settings files in the order they are looked for.
pub const PROJECT_FILES: [&str; 3] = [
    ".braids/PROJECT.md",
    ".braids/config.edn",
    ".project/config.edn",
];

/// Whether `file` is in the EDN form.
pub fn is_edn(file: &Path) -> bool {
    file.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("edn"))
}

/// The first of `candidates` that is a file, else the first.
fn first_file(candidates: impl IntoIterator<Item = PathBuf>) -> PathBuf {
    let mut all = candidates.into_iter();
    let first = all.next().unwrap_or_default();
    if first.is_file() {
        return first;
    }
    all.find(|p| p.is_file()).unwrap_or(first)
}

/// registry.md, or registry.edn beside it when there is no registry.md.
pub fn registry_file(paths: &Paths) -> PathBuf {
    let md = paths.registry();
    first_file([md.clone(), md.with_extension("edn")])
}

/// `.braids/PROJECT.md`, or the first config.edn of [`PROJECT_FILES`] when it is missing.
pub fn project_file(root: &Path) -> PathBuf {
    first_file(PROJECT_FILES.iter().map(|f| root.join(f)))
}

/// An iteration directory's ITERATION.md, or its iteration.edn when there is no ITERATION.md.
pub fn iteration_file(dir: &Path) -> PathBuf {
    first_file([dir.join("ITERATION.md"), dir.join("iteration.edn")])
}

/// The file that stands in for `path` when it is missing: registry.md's, PROJECT.md's or
/// ITERATION.md's EDN form, if one exists. The tick's stamps use it, so editing an EDN file
/// is seen as an edit.
pub fn edn_twin(path: &Path) -> Option<PathBuf> {
    let name = path.file_name()?.to_str()?;
    let dir = path.parent()?;
    let candidates: Vec<PathBuf> = match name {
        "registry.md" => vec![dir.join("registry.edn")],
        "ITERATION.md" => vec![dir.join("iteration.edn")],
        "PROJECT.md" if dir.file_name()? == ".braids" => {
            let root = dir.parent()?;
            vec![root.join(PROJECT_FILES[1]), root.join(PROJECT_FILES[2])]
        }
        _ => return None,
    };
    candidates.into_iter().find(|p| p.is_file())
}

pub fn parse_registry(text: &str, file: &Path, paths: &Paths) -> Parsed<Registry> {
    if is_edn(file) {
        super::edn::parse_registry(text, file, paths)
    } else {
        super::registry::parse_registry(text, file, paths)
    }
}

pub fn parse_project(text: &str, file: &Path) -> Parsed<ProjectConfig> {
    if is_edn(file) {
        super::edn::parse_project(text, file)
    } else {
        super::project::parse_project(text, file)
    }
}

pub fn parse_iteration(
    text: &str,
    file: &Path,
    name: IterationName,
    dir: PathBuf,
) -> Parsed<Iteration> {
    if is_edn(file) {
        super::edn::parse_iteration(text, file, name, dir)
    } else {
        super::iteration::parse_iteration(text, file, name, dir)
    }
}

/// [`super::registry::upsert_row`] or its EDN twin, by the file's form.
pub fn upsert_project(
    text: &str,
    file: &Path,
    slug: &str,
    status: ProjectStatus,
    priority: Priority,
    path: &str,
) -> Result<String, String> {
    if is_edn(file) {
        super::edn::edit::upsert_project(text, slug, status, priority, path)
    } else {
        super::registry::upsert_row(text, slug, status, priority, path)
    }
}

/// Warnings for EDN files that a markdown file beside them overrides: the registry's, each
/// project's settings and each iteration's.
pub fn shadowed(paths: &Paths, roots: &[PathBuf]) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    let mut warn = |used: &Path, ignored: &Path, section: &'static str| {
        let mut d = Diags::new(ignored, section);
        d.warn(
            None,
            format!("both {} and this file exist; braids reads {} and ignores this one", used.display(), used.display()),
            "delete the form you no longer use (`braids migrate --to md|edn` converts the whole installation)",
        );
        out.extend(d.into_vec());
    };
    let md = paths.registry();
    if md.is_file() && md.with_extension("edn").is_file() {
        warn(&md, &md.with_extension("edn"), "1.1");
    }
    for root in roots {
        let used = project_file(root);
        for f in PROJECT_FILES.iter().map(|f| root.join(f)) {
            if f != used && f.is_file() && used.is_file() {
                warn(&used, &f, "1.2");
            }
        }
        for (_, dir) in super::iteration::list_iteration_dirs(root) {
            let (md, edn) = (dir.join("ITERATION.md"), dir.join("iteration.edn"));
            if md.is_file() && edn.is_file() {
                warn(&md, &edn, "1.3");
            }
        }
    }
    out
}
