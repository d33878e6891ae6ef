//! Reading what an agent wrote without letting it point braids elsewhere. The agent controls
//! its workspace: a status report, a deliverable or `.ai/history.md` may be a symbolic link to
//! a secret of the person's, a FIFO that blocks for ever, or `/dev/zero`. Files are opened
//! beneath the workspace with `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`, so no link is
//! followed anywhere on the way, only regular files are read, and never more than [`CAP`].
//! braids' own writes there ([`write`]) go through a folder opened the same way, so a folder
//! the agent replaced with a link never carries them out of the workspace.

use std::io::{self, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Component, Path};
use std::sync::atomic::{AtomicU64, Ordering};

use nix::fcntl::{openat, openat2, renameat, OFlag, OpenHow, ResolveFlag};
use nix::sys::stat::{mkdirat, Mode};

/// The most braids reads of one file an agent wrote.
pub const CAP: u64 = 8 << 20;

/// Reads `path` (absolute inside `root`, or relative to it) without following any symbolic
/// link below `root`: a link, a FIFO, a device or a directory is an error, and so is a file
/// over [`CAP`].
pub fn read(root: &Path, path: &Path) -> io::Result<Vec<u8>> {
    let rel = relative(root, path)?;
    let dir = std::fs::File::open(root)?;
    let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
    let fd = open_beneath(dir.as_fd(), rel, flags).map_err(|e| refused(e, "read", path))?;
    let file = std::fs::File::from(fd);
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{} is not a regular file", path.display()),
        ));
    }
    if meta.len() > CAP {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{} is larger than {} MiB", path.display(), CAP >> 20),
        ));
    }
    let mut out = Vec::with_capacity(meta.len() as usize);
    file.take(CAP).read_to_end(&mut out)?;
    Ok(out)
}

/// Appends `bytes` to the regular file `path` inside `root`, following no link below `root`
/// and never blocking on a FIFO.
pub fn append(root: &Path, path: &Path, bytes: &[u8]) -> io::Result<()> {
    let rel = relative(root, path)?;
    let dir = std::fs::File::open(root)?;
    let flags = OFlag::O_WRONLY
        | OFlag::O_APPEND
        | OFlag::O_NOFOLLOW
        | OFlag::O_NONBLOCK
        | OFlag::O_CLOEXEC;
    let fd = open_beneath(dir.as_fd(), rel, flags).map_err(|e| refused(e, "append to", path))?;
    let mut file = std::fs::File::from(fd);
    if !file.metadata()?.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{} is not a regular file", path.display()),
        ));
    }
    file.write_all(bytes)
}

/// Writes `bytes` to `path` (inside `root`) through a temporary file and a rename, creating
/// the folders on the way; no symbolic link below `root` is followed, so a folder replaced by
/// a link is an error and a link at `path` itself is replaced, never written through.
pub fn write(root: &Path, path: &Path, bytes: &[u8]) -> io::Result<()> {
    let rel = relative(root, path)?;
    let (Some(name), parent) = (rel.file_name(), rel.parent().unwrap_or(Path::new(""))) else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} names no file", path.display()),
        ));
    };
    let mut dir: OwnedFd = std::fs::File::open(root)?.into();
    let dflags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
    for part in parent.components() {
        let Component::Normal(part) = part else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} leaves {}", path.display(), root.display()),
            ));
        };
        match mkdirat(dir.as_fd(), part, Mode::from_bits_truncate(0o755)) {
            Ok(()) | Err(nix::errno::Errno::EEXIST) => {}
            Err(e) => return Err(refused(e, "write", path)),
        }
        dir = open_beneath(dir.as_fd(), Path::new(part), dflags)
            .map_err(|e| refused(e, "write", path))?;
    }
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let tmp = format!(
        ".{}.braids-{}-{}.tmp",
        name.to_string_lossy(),
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    );
    let fd = openat(
        dir.as_fd(),
        tmp.as_str(),
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::from_bits_truncate(0o644),
    )
    .map_err(|e| refused(e, "write", path))?;
    let mut file = std::fs::File::from(fd);
    let written = file.write_all(bytes).and_then(|()| file.sync_all());
    let renamed = written.and_then(|()| {
        renameat(dir.as_fd(), tmp.as_str(), dir.as_fd(), name).map_err(io::Error::from)
    });
    if renamed.is_err() {
        let _ = nix::unistd::unlinkat(
            dir.as_fd(),
            tmp.as_str(),
            nix::unistd::UnlinkatFlags::NoRemoveDir,
        );
    }
    renamed.map_err(|e| io::Error::new(e.kind(), format!("cannot write {}: {e}", path.display())))
}

/// [`write`] for a path inside the workspace `root`; braids' own files elsewhere are written
/// as usual (temp + rename).
pub fn write_within(root: &Path, path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    if path.starts_with(root) {
        Ok(write(root, path, bytes)?)
    } else {
        crate::system::atomic::write(path, bytes)
    }
}

/// [`read_string`] for a path inside the workspace `root`; braids' own files elsewhere are
/// read as usual.
pub fn read_within(root: &Path, path: &Path) -> io::Result<String> {
    if path.starts_with(root) {
        read_string(root, path)
    } else {
        std::fs::read_to_string(path)
    }
}

/// `path` relative to `root` (it may already be relative).
fn relative<'p>(root: &Path, path: &'p Path) -> io::Result<&'p Path> {
    match path.strip_prefix(root) {
        Ok(rel) => Ok(rel),
        Err(_) if path.is_relative() => Ok(path),
        Err(_) => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is not inside {}", path.display(), root.display()),
        )),
    }
}

fn open_beneath(
    dir: std::os::fd::BorrowedFd<'_>,
    rel: &Path,
    flags: OFlag,
) -> nix::Result<OwnedFd> {
    let how = OpenHow::new()
        .flags(flags)
        .mode(Mode::empty())
        .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_SYMLINKS);
    openat2(dir, rel, how)
}

/// The error for an open that was refused, naming a link on the way as such.
fn refused(e: nix::errno::Errno, what: &str, path: &Path) -> io::Error {
    let why = match e {
        nix::errno::Errno::ELOOP | nix::errno::Errno::EXDEV => {
            "a symbolic link on the way, which braids does not follow".to_string()
        }
        other => other.desc().to_lowercase(),
    };
    io::Error::new(
        io::Error::from(e).kind(),
        format!("cannot {what} {}: {why}", path.display()),
    )
}

/// [`read`] as text (invalid UTF-8 replaced).
pub fn read_string(root: &Path, path: &Path) -> io::Result<String> {
    read(root, path).map(|b| String::from_utf8_lossy(&b).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn links_fifos_and_devices_are_never_read() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().join("ws");
        std::fs::create_dir_all(ws.join("sub")).unwrap();
        std::fs::write(tmp.path().join("secret"), "secret").unwrap();
        std::fs::write(ws.join("sub/ok.md"), "fine").unwrap();
        assert_eq!(read_string(&ws, &ws.join("sub/ok.md")).unwrap(), "fine");
        assert_eq!(read_string(&ws, Path::new("sub/ok.md")).unwrap(), "fine");
        symlink(tmp.path().join("secret"), ws.join("link.md")).unwrap();
        symlink("ok.md", ws.join("sub/inner.md")).unwrap();
        symlink(tmp.path(), ws.join("dir")).unwrap();
        symlink("/dev/zero", ws.join("zero")).unwrap();
        nix::unistd::mkfifo(&ws.join("fifo"), Mode::S_IRWXU).unwrap();
        for bad in [
            "link.md",
            "sub/inner.md",
            "dir/secret",
            "zero",
            "fifo",
            "../secret",
            "sub",
        ] {
            let err = read(&ws, &ws.join(bad)).unwrap_err();
            assert!(!err.to_string().is_empty(), "{bad}");
        }
        assert!(read(&ws, Path::new("/etc/hostname")).is_err());
    }

    #[test]
    fn writes_never_go_through_links() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().join("ws");
        let outside = tmp.path().join("outside");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        // Folders on the way are made, and the file lands.
        write(&ws, &ws.join("a/b/c.md"), b"one").unwrap();
        assert_eq!(std::fs::read(ws.join("a/b/c.md")).unwrap(), b"one");
        write(&ws, &ws.join("a/b/c.md"), b"two").unwrap();
        assert_eq!(std::fs::read(ws.join("a/b/c.md")).unwrap(), b"two");
        // A folder replaced by a link to elsewhere: refused, nothing written there.
        symlink(&outside, ws.join(".beads")).unwrap();
        let e = write(&ws, &ws.join(".beads/issues.jsonl"), b"x").unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        assert!(!outside.join("issues.jsonl").exists());
        // A link at the path itself is replaced, its target untouched.
        std::fs::write(outside.join("secret"), b"keep").unwrap();
        symlink(outside.join("secret"), ws.join("history.md")).unwrap();
        write(&ws, &ws.join("history.md"), b"new").unwrap();
        assert_eq!(std::fs::read(outside.join("secret")).unwrap(), b"keep");
        assert!(std::fs::symlink_metadata(ws.join("history.md"))
            .unwrap()
            .is_file());
        // Nothing outside the root, and no temporary file left behind.
        assert!(write(&ws, Path::new("../outside/x"), b"x").is_err());
        assert!(!outside.join("x").exists());
        let left: Vec<_> = std::fs::read_dir(&ws)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
            .collect();
        assert!(left.is_empty());
    }
}
