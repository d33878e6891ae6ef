//! What one run of this process read of each forge's issues, kept in memory: the tick and the
//! replies read right after it share one listing, so a run asks each forge once and reads
//! each mirror file once.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use super::Mirror;

/// The run this process is in (a tick and what follows it); 0 in a process that never said.
static RUN: AtomicU64 = AtomicU64::new(0);

/// For each mirror file listed by this process, the run that listed it and the mirror since:
/// every reader of the same issues in that run (the replies read right after the tick) uses
/// it, so a run lists each project's forge once and reads its file once.
static KEPT: Mutex<BTreeMap<PathBuf, (u64, Mirror)>> = Mutex::new(BTreeMap::new());

/// Starts a new run of this process.
pub fn next_run() {
    RUN.fetch_add(1, Ordering::SeqCst);
    KEPT.lock().unwrap_or_else(|p| p.into_inner()).clear();
}

/// The mirror this run listed, if it did.
pub(super) fn kept_this_run(file: &Path) -> Option<Mirror> {
    let run = RUN.load(Ordering::SeqCst);
    let kept = KEPT.lock().unwrap_or_else(|p| p.into_inner());
    kept.get(file)
        .filter(|(r, _)| run > 0 && *r == run)
        .map(|(_, m)| m.clone())
}

/// Keeps `m` as this run's mirror of `file`: always once `listed`, else only over one kept.
pub(super) fn keep_this_run(file: &Path, m: &Mirror, listed: bool) {
    let run = RUN.load(Ordering::SeqCst);
    if run == 0 {
        return;
    }
    let mut kept = KEPT.lock().unwrap_or_else(|p| p.into_inner());
    if listed || kept.get(file).is_some_and(|(r, _)| *r == run) {
        kept.insert(file.to_path_buf(), (run, m.clone()));
    }
}
