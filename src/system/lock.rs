//! The per-installation tick lock (`Paths::lock()`, `~/.openclaw/braids/.tick.lock`).
//!
//! One tick at a time: an exclusive `flock(2)` on a file opened close-on-exec, held for the life
//! of a [`TickLock`] and released when it is dropped, or by the kernel when the process dies,
//! however it dies. Workers never inherit it: the descriptor is `O_CLOEXEC`, and the process
//! backend marks every descriptor above stderr close-on-exec in its children besides (a leaked
//! lock would stop every later tick for as long as the worker runs).

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

/// A held tick lock; released on drop.
#[derive(Debug)]
pub struct TickLock {
    _lock: Flock<File>,
    path: PathBuf,
}

impl TickLock {
    /// Takes the lock if nobody holds it: `Ok(None)` when another process (or another open of
    /// the file in this one) does. Creates the file and its directory when missing.
    pub fn try_acquire(path: &Path) -> io::Result<Option<TickLock>> {
        let mut file = open(path)?;
        loop {
            match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
                Ok(lock) => {
                    // Who holds it, for people and `holder`; advisory only.
                    let _ = lock.set_len(0);
                    let _ = writeln!(&*lock, "{}", std::process::id());
                    return Ok(Some(TickLock {
                        _lock: lock,
                        path: path.to_path_buf(),
                    }));
                }
                Err((_, Errno::EWOULDBLOCK)) => return Ok(None),
                Err((f, Errno::EINTR)) => file = f,
                Err((_, e)) => return Err(e.into()),
            }
        }
    }

    /// Waits up to `timeout` for the lock (daemon mode): `Ok(None)` when it is still held then.
    pub fn acquire(path: &Path, timeout: Duration) -> io::Result<Option<TickLock>> {
        let deadline = Instant::now() + timeout;
        let mut pause = Duration::from_millis(5);
        loop {
            if let Some(lock) = Self::try_acquire(path)? {
                return Ok(Some(lock));
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(None);
            }
            std::thread::sleep(pause.min(deadline - now));
            pause = (pause * 2).min(Duration::from_millis(100));
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The pid the last holder wrote into the lock file, if any; for messages only (the holder
    /// may have exited since).
    pub fn holder(path: &Path) -> Option<u32> {
        std::fs::read_to_string(path).ok()?.trim().parse().ok()
    }
}

fn open(path: &Path) -> io::Result<File> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(nix::libc::O_CLOEXEC)
        .open(path)
}

/// A lock another process held for all of the wait: a transient state, never a bead's fault.
/// Workers that meet it hand their bead back to be retried, uncounted.
#[derive(Debug, thiserror::Error)]
#[error("another worker held {} for over {}s", .path.display(), .waited.as_secs())]
pub struct Busy {
    pub path: std::path::PathBuf,
    pub waited: Duration,
}

/// Whether `e` (anywhere in its chain) is a lock held for all of the wait.
pub fn is_busy(e: &anyhow::Error) -> bool {
    e.chain().any(|c| c.is::<Busy>())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_holder_at_a_time_within_a_process_too() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/.tick.lock");
        let held = TickLock::try_acquire(&path).unwrap().expect("free");
        assert_eq!(TickLock::holder(&path), Some(std::process::id()));
        assert!(TickLock::try_acquire(&path).unwrap().is_none());
        let start = Instant::now();
        assert!(TickLock::acquire(&path, Duration::from_millis(100))
            .unwrap()
            .is_none());
        assert!(start.elapsed() >= Duration::from_millis(100));
        assert_eq!(held.path(), path);
        drop(held);
        assert!(TickLock::try_acquire(&path).unwrap().is_some());
    }

    #[test]
    fn a_busy_lock_is_known_through_any_context() {
        let e = anyhow::Error::from(Busy {
            path: "/p/.git/braids-worktrees.lock".into(),
            waited: Duration::from_secs(120),
        })
        .context("cannot create the worktree")
        .context("worker");
        assert!(is_busy(&e));
        assert!(format!("{e:#}").contains("held /p/.git/braids-worktrees.lock for over 120s"));
        assert!(!is_busy(&anyhow::anyhow!(
            "another worker held x for over 120s"
        )));
    }
}
