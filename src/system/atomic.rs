//! Crash-safe file writes: a temp file in the same directory, fsync, rename — and the matching
//! read, which never blocks.
//!
//! Every state file, dashboard and markdown edit goes through here, so a crash or a full disk
//! leaves either the old file or the new one, never half of each.

use std::io::{Read, Write};
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
    // An existing file keeps its mode; a new one gets what the process's umask allows, as a
    // plain `open(O_CREAT, 0666)` would (the temp file itself is created 0600).
    let mode = match std::fs::metadata(path) {
        Ok(meta) => meta.permissions(),
        Err(_) => new_file_mode(),
    };
    let tmp = synced_temp(dir, path, bytes, mode)?;
    tmp.persist(path)
        .map_err(|e| e.error)
        .with_context(|| format!("cannot replace {}", path.display()))?;
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// A temp file beside `path` holding `bytes` with `mode`, synced to disk: ready to be renamed
/// or linked to its final name.
fn synced_temp(
    dir: &Path,
    path: &Path,
    bytes: &[u8],
    mode: std::fs::Permissions,
) -> Result<tempfile::NamedTempFile> {
    let mut tmp = tempfile::Builder::new()
        .prefix(".braids-tmp-")
        .tempfile_in(dir)
        .with_context(|| format!("cannot create a temp file in {}", dir.display()))?;
    tmp.write_all(bytes)
        .with_context(|| format!("cannot write {}", path.display()))?;
    let _ = tmp.as_file().set_permissions(mode);
    tmp.as_file()
        .sync_all()
        .with_context(|| format!("cannot sync {}", path.display()))?;
    Ok(tmp)
}

/// What a new file's mode is under the process's umask.
fn new_file_mode() -> std::fs::Permissions {
    use std::os::unix::fs::PermissionsExt;
    std::fs::Permissions::from_mode(0o666 & !umask())
}

/// The process's umask, read without changing it (`/proc/self/status`, Linux 4.7+); 022 when
/// it cannot be read.
fn umask() -> u32 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("Umask:"))?;
            u32::from_str_radix(line["Umask:".len()..].trim(), 8).ok()
        })
        .unwrap_or(0o022)
}

/// Reads a regular file whole. Anything else in its place (a directory, a FIFO, a socket, a
/// device) is an `InvalidInput` error at once, never a wait: opening a FIFO for reading blocks
/// until a writer comes, and a tick blocked there would hold the tick lock for good.
/// A read-modify-write of a JSON file that several processes add to: under the `lock` file's
/// flock (waited for up to 30 s), the file read strictly (missing is `V::default()`; unreadable
/// or invalid is an error, so it is never replaced by a file that lost what it held), `f`
/// applied, and the result written temp + rename.
pub fn update_json<V, R>(path: &Path, lock: &Path, f: impl FnOnce(&mut V) -> R) -> Result<R>
where
    V: serde::Serialize + serde::de::DeserializeOwned + Default,
{
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let _held = crate::system::lock::TickLock::acquire(lock, std::time::Duration::from_secs(30))?
        .ok_or_else(|| anyhow::anyhow!("{} is held by another process", lock.display()))?;
    let mut value: V = match read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes).with_context(|| {
            format!(
                "{} is not valid; move it aside so a new one can be written",
                path.display()
            )
        })?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => V::default(),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    let out = f(&mut value);
    let mut text = serde_json::to_vec_pretty(&value).context("the value serialises")?;
    text.push(b'\n');
    write(path, &text)?;
    Ok(out)
}

pub fn read(path: &Path) -> std::io::Result<Vec<u8>> {
    read_with_meta(path).map(|(bytes, _)| bytes)
}

/// [`read`], with the file's metadata as it was just before the read (from the open file, so
/// it is the version read, or an older one: a stamp taken here never vouches for newer bytes).
pub fn read_with_meta(path: &Path) -> std::io::Result<(Vec<u8>, std::fs::Metadata)> {
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_CLOEXEC)
        .open(path)?;
    let meta = f.metadata()?;
    if !meta.is_file() {
        let t = meta.file_type();
        let what = if t.is_dir() {
            "a directory"
        } else if t.is_fifo() {
            "a FIFO"
        } else if t.is_socket() {
            "a socket"
        } else {
            "a device"
        };
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("not a regular file but {what}"),
        ));
    }
    // `File::read_to_end` would ask the size again (fstat, lseek) and read once more to see
    // the end: three syscalls per file, tens of thousands per large tick. A read of a regular
    // file that returns less than asked has reached the end, so one byte past the known size
    // sees the end in the same read (or shows a file that grew, which is read on).
    let mut buf = vec![0; meta.len() as usize + 1];
    let mut n = 0;
    loop {
        if n == buf.len() {
            buf.resize(n * 2, 0);
        }
        match f.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => {
                n += k;
                if n < buf.len() {
                    break;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    buf.truncate(n);
    Ok((buf, meta))
}

/// A file written piece by piece and put in place as one, like [`write`]: a temp file beside
/// `path`, renamed over it by [`Streamed::commit`]. Dropped uncommitted, it leaves nothing.
pub struct Streamed {
    path: std::path::PathBuf,
    tmp: std::io::BufWriter<tempfile::NamedTempFile>,
}

impl Streamed {
    pub fn create(path: &Path) -> Result<Streamed> {
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create directory {}", dir.display()))?;
        let tmp = tempfile::Builder::new()
            .prefix(".braids-tmp-")
            .tempfile_in(dir)
            .with_context(|| format!("cannot create a temp file in {}", dir.display()))?;
        Ok(Streamed {
            path: path.to_path_buf(),
            tmp: std::io::BufWriter::with_capacity(1 << 16, tmp),
        })
    }

    pub fn write_all(&mut self, bytes: &[u8]) -> Result<()> {
        self.tmp
            .write_all(bytes)
            .with_context(|| format!("cannot write {}", self.path.display()))
    }

    /// Syncs the file and renames it over `path`.
    pub fn commit(self) -> Result<()> {
        let path = self.path;
        let tmp = self
            .tmp
            .into_inner()
            .map_err(|e| e.into_error())
            .with_context(|| format!("cannot write {}", path.display()))?;
        tmp.as_file()
            .sync_all()
            .with_context(|| format!("cannot sync {}", path.display()))?;
        tmp.persist(&path)
            .map_err(|e| e.error)
            .with_context(|| format!("cannot replace {}", path.display()))?;
        if let Some(d) = path.parent().and_then(|d| std::fs::File::open(d).ok()) {
            let _ = d.sync_all();
        }
        Ok(())
    }
}

/// Creates `path` with `bytes`, whole or not at all, and never over an existing file: a synced
/// temp file is hard-linked to the final name, then the temp name is removed. Unlike a rename,
/// `link(2)` is an inotify `IN_CREATE` on the final name, the one event a `inotifywait -e create`
/// watcher waits for; and it fails rather than replace a file already there.
pub fn publish(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let tmp = synced_temp(dir, path, bytes, new_file_mode())?;
    std::fs::hard_link(tmp.path(), path)
        .with_context(|| format!("cannot create {}", path.display()))?;
    // The temp name goes when `tmp` drops; a crash before that leaves it for `sweep`.
    drop(tmp);
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// Removes the temp files of writes that never finished (the writer was killed between creating
/// and renaming one) from `dir`, when older than `age`; returns how many went.
pub fn sweep(dir: &Path, age: std::time::Duration) -> usize {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut n = 0;
    for e in rd.flatten() {
        let old = e
            .metadata()
            .ok()
            .filter(|m| m.is_file())
            .and_then(|m| m.modified().ok())
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|a| a > age);
        if old
            && e.file_name().to_string_lossy().starts_with(".braids-tmp-")
            && std::fs::remove_file(e.path()).is_ok()
        {
            n += 1;
        }
    }
    n
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
    fn publish_creates_whole_and_never_replaces() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("000001-error.event");
        publish(&path, b"{}\n").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"{}\n");
        let err = publish(&path, b"other").unwrap_err();
        assert!(format!("{err:#}").contains("cannot create"), "{err:#}");
        assert_eq!(std::fs::read(&path).unwrap(), b"{}\n", "left as it was");
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["000001-error.event"], "no temp file left");
    }

    #[test]
    fn update_json_adds_and_never_replaces_a_file_it_cannot_read() {
        let dir = tempfile::tempdir().unwrap();
        let (file, lock) = (dir.path().join("d/list.json"), dir.path().join("d/.lock"));
        for n in [1, 2] {
            let len = update_json(&file, &lock, |v: &mut Vec<u32>| {
                v.push(n);
                v.len()
            })
            .unwrap();
            assert_eq!(len, n as usize);
        }
        std::fs::write(&file, b"{ half a write").unwrap();
        let err = update_json(&file, &lock, |v: &mut Vec<u32>| v.push(3)).unwrap_err();
        assert!(format!("{err:#}").contains("is not valid"), "{err:#}");
        assert_eq!(
            std::fs::read(&file).unwrap(),
            b"{ half a write",
            "left as it was"
        );
    }

    #[test]
    fn a_new_file_gets_the_umasks_mode_and_an_old_one_keeps_its_own() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("new.md");
        write(&p, b"x").unwrap();
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o666 & !umask(), "{mode:o}");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        write(&p, b"y").unwrap();
        assert_eq!(
            std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }

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
    fn reading_a_fifo_or_a_directory_is_an_error_not_a_wait() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let e = read(&fifo).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
        assert!(e.to_string().contains("FIFO"), "{e}");
        assert!(read(dir.path())
            .unwrap_err()
            .to_string()
            .contains("directory"));
        let missing = read(&dir.path().join("none")).unwrap_err();
        assert_eq!(missing.kind(), std::io::ErrorKind::NotFound);
        std::fs::write(dir.path().join("f"), "x").unwrap();
        assert_eq!(read(&dir.path().join("f")).unwrap(), b"x");
        std::fs::write(dir.path().join("e"), "").unwrap();
        assert_eq!(read(&dir.path().join("e")).unwrap(), b"");
        let (big, meta) = read_with_meta(&dir.path().join("f")).unwrap();
        assert_eq!((big.as_slice(), meta.len()), (&b"x"[..], 1));
    }

    #[test]
    fn a_streamed_file_appears_whole_on_commit_and_not_at_all_without() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("cache.bin");
        std::fs::write(&p, "old").unwrap();
        let mut w = Streamed::create(&p).unwrap();
        w.write_all(b"new ").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"old", "not before the commit");
        drop(w);
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            1,
            "no temp file left"
        );
        let mut w = Streamed::create(&p).unwrap();
        w.write_all(b"new ").unwrap();
        w.write_all(b"file").unwrap();
        w.commit().unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"new file");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
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
