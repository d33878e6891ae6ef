//! Reading what an agent wrote without letting it point braids elsewhere. The agent controls
//! its workspace: a status report, a deliverable or `.ai/history.md` may be a symbolic link to
//! a secret of the person's, a FIFO that blocks for ever, or `/dev/zero`. Files are opened
//! beneath the workspace with `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`, so no link is
//! followed anywhere on the way, only regular files are read, and never more than [`CAP`].

use std::io::{self, Read};
use std::os::fd::AsFd;
use std::path::Path;

use nix::fcntl::{openat2, OFlag, OpenHow, ResolveFlag};
use nix::sys::stat::Mode;

/// The most braids reads of one file an agent wrote.
pub const CAP: u64 = 8 << 20;

/// Reads `path` (absolute inside `root`, or relative to it) without following any symbolic
/// link below `root`: a link, a FIFO, a device or a directory is an error, and so is a file
/// over [`CAP`].
pub fn read(root: &Path, path: &Path) -> io::Result<Vec<u8>> {
    let rel = match path.strip_prefix(root) {
        Ok(rel) => rel,
        Err(_) if path.is_relative() => path,
        Err(_) => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} is not inside {}", path.display(), root.display()),
            ))
        }
    };
    let dir = std::fs::File::open(root)?;
    let how = OpenHow::new()
        .flags(OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC)
        .mode(Mode::empty())
        .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_SYMLINKS);
    let fd = openat2(dir.as_fd(), rel, how).map_err(|e| {
        let why = match e {
            nix::errno::Errno::ELOOP | nix::errno::Errno::EXDEV => {
                "a symbolic link on the way, which braids does not follow".to_string()
            }
            other => other.desc().to_lowercase(),
        };
        io::Error::new(
            io::Error::from(e).kind(),
            format!("cannot read {}: {why}", path.display()),
        )
    })?;
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
}
