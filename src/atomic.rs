//! Crash-safe file writes: a temp file in the same directory, fsync, rename.
//!
//! Every state file, dashboard and markdown edit goes through here, so a crash or a full disk
//! leaves either the old file or the new one, never half of each.

use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};

/// Replaces `path` with `bytes` atomically, creating parent directories as needed. An existing
/// file's permissions are kept.
pub fn write(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    std::fs::create_dir_all(dir)
        .with_context(|| format!("cannot create directory {}", dir.display()))?;
    let mut tmp = tempfile::Builder::new()
        .prefix(".braids-tmp-")
        .tempfile_in(dir)
        .with_context(|| format!("cannot create a temp file in {}", dir.display()))?;
    tmp.write_all(bytes)
        .with_context(|| format!("cannot write {}", path.display()))?;
    if let Ok(meta) = std::fs::metadata(path) {
        let _ = tmp.as_file().set_permissions(meta.permissions());
    }
    tmp.as_file()
        .sync_all()
        .with_context(|| format!("cannot sync {}", path.display()))?;
    tmp.persist(path)
        .map_err(|e| e.error)
        .with_context(|| format!("cannot replace {}", path.display()))?;
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// Writes `bytes` to `path` only when the file does not exist yet; returns whether it wrote.
pub fn write_new(path: &Path, bytes: &[u8]) -> Result<bool> {
    if path.exists() {
        return Ok(false);
    }
    write(path, bytes)?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_and_leaves_no_temp_files() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a/b/state.json");
        write(&p, b"one").unwrap();
        write(&p, b"two").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        let names: Vec<_> = std::fs::read_dir(p.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("state.json")]);
        assert!(!write_new(&p, b"three").unwrap());
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
    }

    #[test]
    fn a_directory_in_the_way_is_an_error_not_a_loss() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("STATUS.md");
        std::fs::create_dir(&p).unwrap();
        assert!(write(&p, b"x").is_err());
        assert!(p.is_dir());
    }
}
