//! The files an observation reads, the registry and each project's PROJECT.md and
//! iterations: read from disk, or taken from the last full run's cache when their stamps say
//! nothing changed.
//!
//! Both ways give the same slim values ([`cache::slim_config`], [`cache::slim_iterations`]),
//! so what a project looks like to the rest of the tick cannot depend on where it came from.
//! Reading stamps each file from the open file just before reading it (`atomic::read_with_meta`),
//! so recording costs no extra stat, and a write racing the read shows as a change next run.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::format::registry::Registry;
use crate::format::{self, iteration::Iteration, project::ProjectConfig};
use crate::system::diag::Parsed;
use crate::system::paths::Paths;
use crate::tick::observe::cache::reuse::{self, Answers, Stamp};
use crate::tick::observe::cache::{self, registry, Entry};
use crate::tracker::TrackerKind;

/// Files and their stamps (`None`: absent), in the order [`reuse::project_files`] lists them.
pub type Stamps = Vec<(PathBuf, Option<Stamp>)>;

pub struct ProjectFiles {
    pub config: ProjectConfig,
    pub iterations: Vec<Iteration>,
    /// The names in `.braids/iterations/`, sorted.
    pub listing: Vec<OsString>,
    /// PROJECT.md, the iterations directory and each listed ITERATION.md; `None` when this run
    /// neither records nor compares.
    pub stamps: Option<Stamps>,
    /// The last full run's tracker answers, when the files came from its entry.
    pub prior: Option<(TrackerKind, Answers)>,
    /// What the readers found wrong in these files, one sentence each.
    pub problems: Vec<String>,
}

/// The entry's files when every stamp is as it recorded; `None` when anything changed.
pub fn cached(root: &Path, entry: Entry) -> Option<ProjectFiles> {
    let files = reuse::project_files(root, entry.listing.iter().map(|n| n.as_os_str()));
    let stamps = reuse::stamps(files);
    (reuse::fingerprint(&stamps) == entry.files).then_some(ProjectFiles {
        config: entry.config,
        iterations: entry.iterations,
        listing: entry.listing,
        stamps: Some(stamps),
        prior: entry.answers,
        problems: entry.problems,
    })
}

/// Reads PROJECT.md and the iterations, stamping them when `stamping`. `Err` says why the
/// project cannot be read (its PROJECT.md cannot).
pub fn read(root: &Path, stamping: bool) -> Result<ProjectFiles, String> {
    let project_md = format::layout::project_file(root);
    let (text, meta) = crate::system::atomic::read_with_meta(&project_md)
        .map_err(|e| format!("cannot read {}: {e}", project_md.display()))?;
    let (parsed, mut problems) =
        format::layout::parse_project(&format::decode(&text), &project_md).into_parts();
    let config = cache::slim_config(parsed);

    // The directory is stamped before it is listed.
    let dir_stamp = stamping.then(|| reuse::stamp(&format::iteration::iterations_dir(root)));
    let entries = format::iteration::list_entries(root);
    let dirs = format::iteration::iteration_dirs(root, &entries);
    let mut seen: HashMap<PathBuf, Stamp> = HashMap::new();
    let iterations = format::iteration::read_iterations_with(root, dirs, |file| {
        let (bytes, meta) = crate::system::atomic::read_with_meta(file)?;
        if stamping {
            seen.insert(file.to_path_buf(), Stamp::of(&meta));
        }
        Ok(bytes)
    });
    let (iterations, more) = iterations.into_parts();
    problems.extend(more);
    let listing: Vec<OsString> = entries.into_iter().map(|e| e.name).collect();
    let stamps = dir_stamp.map(|dir_stamp| {
        let files = reuse::project_files(root, listing.iter().map(|n| n.as_os_str()));
        files
            .into_iter()
            .enumerate()
            .map(|(i, f)| {
                let s = match i {
                    0 => Some(Stamp::of(&meta)),
                    1 => dir_stamp,
                    // Not an iteration read this run (a file, a missing ITERATION.md): stat.
                    _ => seen.remove(&f).or_else(|| reuse::stamp(&f)),
                };
                (f, s)
            })
            .collect()
    });
    Ok(ProjectFiles {
        config,
        iterations: cache::slim_iterations(iterations),
        listing,
        stamps,
        prior: None,
        problems: problems.iter().map(ToString::to_string).collect(),
    })
}

/// The registry: the last full run's rows while the file is unchanged, else parsed. A run
/// that records (`next`) keeps the rows of a settled registry with no findings.
pub fn registry(
    paths: &Paths,
    prior: Option<&cache::Reader>,
    next: Option<&mut cache::Writer>,
    now: chrono::DateTime<chrono::Utc>,
) -> Parsed<Registry> {
    let file = paths.registry();
    // Stamped before it is read.
    let stamps = vec![(file.clone(), reuse::stamp(&file))];
    let key = registry::RegistryKey::new(reuse::fingerprint(&stamps), paths);
    let keep = |bytes: &[u8]| {
        if let Some(w) = next {
            if let Err(e) = w.add(registry::KEY, bytes) {
                tracing::warn!(
                    "cannot write {}: {e:#}",
                    cache::path(&paths.braids_dir).display()
                );
            }
        }
    };
    let kept = prior.and_then(|r| r.read(r.find(registry::KEY)?));
    if let Some((bytes, entries)) =
        kept.and_then(|b| registry::decode(&b, &key).map(|entries| (b, entries)))
    {
        keep(&bytes);
        return Parsed::new(Registry { entries }, Vec::new());
    }
    let parsed = format::registry::read_registry(paths);
    if parsed.diagnostics.is_empty() && reuse::settled(&stamps, now) {
        keep(&registry::encode(&key, &parsed.value.entries));
    }
    parsed
}
