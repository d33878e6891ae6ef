//! `attempts.json` on disk. Workers (after an attempt) and the tick (after a kill or a
//! released claim, and for the breaker) both update it, so every update is a read-modify-write
//! under a lock of its own (`attempts.lock`, never the tick lock: a worker must not make a
//! tick skip), written temp + rename. A missing or corrupt file reads as empty: losing the
//! backoff only makes a retry come sooner; it never stops a tick.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{anyhow, Result};

use super::Attempts;

/// How long an update waits for another one; updates take milliseconds.
const LOCK_WAIT: Duration = Duration::from_secs(30);

/// Where the file and its lock live, in braids' own directory.
#[derive(Debug, Clone)]
pub struct Store {
    pub file: PathBuf,
}

impl Store {
    pub fn in_dir(braids_dir: &Path) -> Store {
        Store {
            file: braids_dir.join("attempts.json"),
        }
    }

    fn lock_path(&self) -> PathBuf {
        self.file.with_extension("lock")
    }

    /// The file as it is now; empty when missing or unreadable (logged).
    pub fn load(&self) -> Attempts {
        match crate::system::atomic::read(&self.file) {
            Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|e| {
                tracing::warn!(
                    "{} is not valid ({e}); the retry backoffs it held are forgotten",
                    self.file.display()
                );
                Attempts::default()
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Attempts::default(),
            Err(e) => {
                tracing::warn!("cannot read {}: {e}", self.file.display());
                Attempts::default()
            }
        }
    }

    /// Applies `f` to the current file under the lock and writes the result.
    pub fn update<T>(&self, f: impl FnOnce(&mut Attempts) -> T) -> Result<T> {
        let _lock = crate::system::lock::TickLock::acquire(&self.lock_path(), LOCK_WAIT)?
            .ok_or_else(|| anyhow!("{} is held by another process", self.lock_path().display()))?;
        let mut attempts = self.load();
        let before = attempts.clone();
        let out = f(&mut attempts);
        if attempts != before {
            let mut text = serde_json::to_string_pretty(&attempts)?;
            text.push('\n');
            crate::system::atomic::write(&self.file, text.as_bytes())?;
        }
        Ok(out)
    }
}
