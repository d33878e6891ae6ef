//! `braids logs <bead> [-f]`: the output of the bead's worker and agent (the session log the
//! worker writes both into), the live session's or else the newest one, followed as it grows.

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::config::installation::Installation;
use crate::model::SessionLabel;

/// How often a followed log is read again; and how often the session is checked.
const POLL: Duration = Duration::from_millis(200);
const CHECK_SESSION: Duration = Duration::from_secs(1);

/// A bead's log.
pub struct Log {
    pub path: PathBuf,
    /// The session writing it now, if it is live.
    pub live: Option<SessionLabel>,
}

pub fn locate(inst: &Installation, target: &str) -> Result<Log> {
    let found = super::beads::locate(inst, target, false)?;
    let slug = &found.project.entry.slug;
    let label = SessionLabel::new(slug, found.bead.id.clone())?;
    let sessions = inst.backend.list()?;
    let live = super::beads::live_session(&sessions, slug, &found.bead.id);
    if let Some(path) = live.and_then(|s| s.log.clone()) {
        return Ok(Log {
            path,
            live: Some(label),
        });
    }
    let prefix = format!("{}-", found.bead.id);
    let dir = inst.paths.session_logs(slug);
    let newest = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        // `app-1-<time>.log`, not `app-1-2-<time>.log`: what follows the prefix is the time.
        .filter(|n| {
            n.strip_prefix(&prefix)
                .and_then(|t| t.strip_suffix(".log"))
                .is_some_and(|t| t.len() == 16 && t.ends_with('Z') && t.as_bytes()[8] == b'T')
        })
        // `<bead>-<YYYYmmddTHHMMSSZ>.log`: the name sorts by start time.
        .max();
    match newest {
        Some(name) => Ok(Log {
            path: dir.join(name),
            live: None,
        }),
        None => bail!(
            "{} has no log in {}: no worker has run it yet (or its logs were old enough for retention to remove)",
            found.bead.id,
            dir.display()
        ),
    }
}

/// A writer that shows each line of a session log as a person reads it
/// ([`crate::agent::render::readable`]): agent CLIs' JSON events one line each, the rest as
/// written; never a terminal escape or control character but tab.
pub struct Readable<W: Write> {
    out: W,
    line: Vec<u8>,
    show: fn(&str) -> Option<String>,
}

impl<W: Write> Readable<W> {
    pub fn new(out: W) -> Readable<W> {
        Readable {
            out,
            line: Vec::new(),
            show: crate::agent::render::readable,
        }
    }

    /// Every line as written, JSON too, only with the escapes and control characters removed:
    /// `--raw` to a terminal.
    pub fn printable(out: W) -> Readable<W> {
        Readable {
            out,
            line: Vec::new(),
            show: |l| Some(crate::system::templates::printable(l)),
        }
    }

    /// Writes a last line that had no newline.
    pub fn flush_line(&mut self) -> std::io::Result<()> {
        if !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            self.emit(&line)?;
        }
        self.out.flush()
    }

    fn emit(&mut self, line: &[u8]) -> std::io::Result<()> {
        if let Some(shown) = (self.show)(&String::from_utf8_lossy(line)) {
            writeln!(self.out, "{shown}")?;
        }
        Ok(())
    }
}

impl<W: Write> Write for Readable<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        for chunk in buf.split_inclusive(|b| *b == b'\n') {
            self.line.extend_from_slice(chunk);
            if chunk.ends_with(b"\n") {
                let line = std::mem::take(&mut self.line);
                self.emit(&line[..line.len() - 1])?;
            }
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

/// Copies the log to `out`; with `follow`, keeps copying what is written until the session
/// ends (or `stop` is raised), as `tail -f` would but ending with the worker.
pub fn copy(
    inst: &Installation,
    log: &Log,
    out: &mut impl Write,
    follow: bool,
    stop: &AtomicBool,
) -> Result<()> {
    let mut file = std::fs::File::open(&log.path)
        .with_context(|| format!("cannot read {}", log.path.display()))?;
    let mut buf = Vec::new();
    let mut pos = 0u64;
    let mut checked = Instant::now();
    let mut live = follow && log.live.is_some();
    loop {
        file.seek(SeekFrom::Start(pos))?;
        buf.clear();
        pos += file.read_to_end(&mut buf)? as u64;
        if !buf.is_empty() && out.write_all(&buf).and_then(|()| out.flush()).is_err() {
            // The reader went away (`braids logs x | head`).
            return Ok(());
        }
        if !live || stop.load(Ordering::SeqCst) {
            return Ok(());
        }
        if checked.elapsed() >= CHECK_SESSION {
            checked = Instant::now();
            let label = log.live.as_ref().expect("followed logs are live");
            // One more read after the session ends, for its last lines.
            live = inst
                .backend
                .list()
                .map(|all| all.iter().any(|s| s.running && &s.label == label))
                // A backend that cannot be asked ends the follow rather than hang it.
                .unwrap_or(false);
            if !live {
                continue;
            }
        }
        std::thread::sleep(POLL);
    }
}
