//! The observation cache: an unchanged project costs its stats, not a read and parse of its
//! files.
//!
//! Reading and parsing PROJECT.md, the iterations and WORKPLAN.md was nearly all of a large
//! tick's time (10,000 projects: over a second of CPU). A full run therefore keeps, per
//! project, what it read of them ([`Entry`]: PROJECT.md, the iterations and the tracker's
//! answers) with fingerprints of the files, in `observe-cache.bin` beside the state. The next
//! run stats the same files; when PROJECT.md, the iterations directory and every ITERATION.md
//! are as they were, the entry stands in for them, and the tracker's answers stand in for the
//! tracker under the rules of [`reuse`] (their own fingerprint, over the tracker's files
//! too). A changed project is read as if there were no cache, and sessions are surveyed every
//! run.
//!
//! Trust, as for the tracker answers: an entry is written only when none of its files was
//! written within [`reuse::RACY`] of the observation; it carries its own fingerprints;
//! the file's generation must be the one the state recorded, and the state is written after the
//! file, so a run killed between the two costs a re-read, never a wrong answer. A missing, old
//! or damaged file, or a damaged entry, is no cache. The registry's rows are kept the same way
//! ([`registry`]).

mod codec;
mod entry;
mod file;
pub mod registry;
pub mod reuse;

pub use entry::{slim_config, slim_iterations, Entry};
pub use file::{Loc, Reader, Writer};

use std::path::{Path, PathBuf};

/// The file, in braids' own directory.
pub const FILE: &str = "observe-cache.bin";

/// The sidecar of releases before this cache, which kept only tracker answers.
const OLD_FILE: &str = "tracker-cache.json";

pub fn path(braids_dir: &Path) -> PathBuf {
    braids_dir.join(FILE)
}

/// The cache the state's generation (`observeCache`) vouches for, if it is there and sound.
pub fn open(braids_dir: &Path, generation: Option<&str>) -> Option<Reader> {
    let generation = u64::from_str_radix(generation?, 16).ok()?;
    Reader::open(&path(braids_dir), generation)
}

/// How the state records a generation.
pub fn generation_text(generation: u64) -> String {
    format!("{generation:016x}")
}

/// Starts this run's cache file; `None` (with a warning) when it cannot be created, and the
/// next run reads every project.
pub fn create(braids_dir: &Path) -> Option<Writer> {
    match Writer::create(&path(braids_dir)) {
        Ok(w) => Some(w),
        Err(e) => {
            tracing::warn!("cannot write {}: {e:#}", path(braids_dir).display());
            None
        }
    }
}

/// Puts the file in place; its generation for the state, or `None` (with a warning).
pub fn finish(braids_dir: &Path, writer: Writer) -> Option<String> {
    match writer.finish() {
        Ok(g) => {
            let _ = std::fs::remove_file(braids_dir.join(OLD_FILE));
            Some(generation_text(g))
        }
        Err(e) => {
            tracing::warn!("cannot write {}: {e:#}", path(braids_dir).display());
            None
        }
    }
}
