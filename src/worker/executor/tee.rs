//! The agent's output passes through the worker on its way to the session log. On the way the
//! worker keeps its last few kilobytes (the provider breaker reads them for rate-limit
//! messages) and touches the bead's activity mark, which the tick's stall detection reads. A
//! watcher touches the same mark when a file in the workspace changes, so an agent that works
//! quietly is not taken for a stalled one.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

/// How much of the output is kept.
const TAIL: usize = 16 * 1024;
/// The mark is touched at most this often.
const TOUCH_EVERY: Duration = Duration::from_secs(5);
/// How often the workspace is looked at for changed files.
const WATCH_EVERY: Duration = Duration::from_secs(20);

/// The longest stdout line handed to a line reader; a longer one is cut (bounded memory).
const LINE_MAX: usize = 4 * 1024 * 1024;

/// What reads the agent's stdout a line at a time (a preset's [`crate::agent::StreamReader`]).
pub(in crate::worker) type LineSink = Arc<Mutex<Box<dyn crate::agent::StreamReader>>>;

/// A running agent's output readers and workspace watcher.
pub(in crate::worker) struct Tee {
    tail: Arc<Mutex<VecDeque<u8>>>,
    /// The end of the last output alone (stderr), for a reader that explains a failure.
    err_tail: Arc<Mutex<VecDeque<u8>>>,
    done: mpsc::Receiver<()>,
    readers: usize,
    stop: Arc<AtomicBool>,
}

impl Tee {
    /// Starts copying `outputs` (the agent's stdout and stderr) to the worker's stderr (when
    /// `echo`; a test's output must not land in the test runner's), and watching `workspace`.
    /// `mark` is the activity file.
    pub(in crate::worker) fn start(
        outputs: Vec<Box<dyn Read + Send>>,
        mark: PathBuf,
        workspace: &Path,
        echo: bool,
    ) -> Tee {
        Tee::start_with(outputs, mark, workspace, echo, None)
    }

    /// [`Tee::start`], with `lines` fed every line of the first output (stdout) as it comes.
    pub(in crate::worker) fn start_with(
        outputs: Vec<Box<dyn Read + Send>>,
        mark: PathBuf,
        workspace: &Path,
        echo: bool,
        lines: Option<LineSink>,
    ) -> Tee {
        let tail = Arc::new(Mutex::new(VecDeque::with_capacity(TAIL)));
        let err_tail = Arc::new(Mutex::new(VecDeque::with_capacity(TAIL)));
        let marker = Arc::new(Marker::new(mark));
        marker.touch();
        let (tx, done) = mpsc::channel();
        let readers = outputs.len();
        for (i, mut out) in outputs.into_iter().enumerate() {
            let (tail, marker, tx) = (tail.clone(), marker.clone(), tx.clone());
            let sink = if i == 0 { lines.clone() } else { None };
            let own = (i + 1 == readers && readers > 1).then(|| err_tail.clone());
            std::thread::spawn(move || {
                let mut buf = [0u8; 8192];
                let mut line: Vec<u8> = Vec::new();
                while let Ok(n) = out.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    if echo {
                        let _ = std::io::stderr().write_all(&buf[..n]);
                    }
                    if let Some(sink) = &sink {
                        feed(sink, &mut line, &buf[..n]);
                    }
                    if let Some(own) = &own {
                        let mut t = own.lock().unwrap_or_else(|p| p.into_inner());
                        t.extend(&buf[..n]);
                        let over = t.len().saturating_sub(TAIL);
                        t.drain(..over);
                    }
                    let mut t = tail.lock().unwrap_or_else(|p| p.into_inner());
                    t.extend(&buf[..n]);
                    let over = t.len().saturating_sub(TAIL);
                    t.drain(..over);
                    drop(t);
                    marker.touch_soon();
                }
                if let (Some(sink), false) = (&sink, line.is_empty()) {
                    let mut r = sink.lock().unwrap_or_else(|p| p.into_inner());
                    r.line(&String::from_utf8_lossy(&line));
                }
                let _ = tx.send(());
            });
        }
        let stop = Arc::new(AtomicBool::new(false));
        let (ws, halt) = (workspace.to_path_buf(), stop.clone());
        std::thread::spawn(move || watch(&ws, &marker, &halt));
        Tee {
            tail,
            err_tail,
            done,
            readers,
            stop,
        }
    }

    /// Waits (briefly: a process that escaped the agent's group may hold the pipe) for the
    /// readers to reach the end, stops the watcher, and returns the output's last kilobytes.
    pub(in crate::worker) fn finish(self) -> String {
        self.finish_both().0
    }

    /// [`Tee::finish`], with the end of stderr alone as well.
    pub(in crate::worker) fn finish_both(self) -> (String, String) {
        let deadline = Instant::now() + Duration::from_secs(2);
        for _ in 0..self.readers {
            let left = deadline.saturating_duration_since(Instant::now());
            if self.done.recv_timeout(left).is_err() {
                break;
            }
        }
        self.stop.store(true, Ordering::SeqCst);
        let text = |q: &Mutex<VecDeque<u8>>| {
            let t = q.lock().unwrap_or_else(|p| p.into_inner());
            let (a, b) = t.as_slices();
            String::from_utf8_lossy(&[a, b].concat()).into_owned()
        };
        (text(&self.tail), text(&self.err_tail))
    }
}

/// Hands each complete line of `bytes` to the sink, keeping a partial one in `line`.
fn feed(sink: &LineSink, line: &mut Vec<u8>, bytes: &[u8]) {
    for chunk in bytes.split_inclusive(|b| *b == b'\n') {
        if line.len() < LINE_MAX {
            line.extend_from_slice(&chunk[..chunk.len().min(LINE_MAX - line.len())]);
        }
        if chunk.ends_with(b"\n") {
            if line.last() == Some(&b'\n') {
                line.pop();
            }
            let mut r = sink.lock().unwrap_or_else(|p| p.into_inner());
            r.line(&String::from_utf8_lossy(line));
            line.clear();
        }
    }
}

/// Touches the activity file, at most every [`TOUCH_EVERY`].
struct Marker {
    path: PathBuf,
    last: Mutex<Option<Instant>>,
}

impl Marker {
    fn new(path: PathBuf) -> Marker {
        Marker {
            path,
            last: Mutex::new(None),
        }
    }

    fn touch_soon(&self) {
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        if last.is_some_and(|t| t.elapsed() < TOUCH_EVERY) {
            return;
        }
        *last = Some(Instant::now());
        drop(last);
        self.touch();
    }

    fn touch(&self) {
        if let Err(e) = touch(&self.path) {
            tracing::debug!("cannot touch {}: {e}", self.path.display());
        }
    }
}

/// Sets `path`'s mtime to now, creating it (and its directory) when missing.
pub(in crate::worker) fn touch(path: &Path) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let f = File::options().create(true).append(true).open(path)?;
    f.set_modified(SystemTime::now())
}

/// Every [`WATCH_EVERY`], the newest mtime of the workspace's files (git's ignore rules
/// apply, `.git` is skipped); a newer one than before touches the mark.
fn watch(ws: &Path, marker: &Marker, stop: &AtomicBool) {
    let mut newest = newest_mtime(ws);
    loop {
        let until = Instant::now() + WATCH_EVERY;
        while Instant::now() < until {
            if stop.load(Ordering::SeqCst) {
                return;
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        let now = newest_mtime(ws);
        if now > newest {
            newest = now;
            marker.touch_soon();
        }
    }
}

fn newest_mtime(ws: &Path) -> Option<SystemTime> {
    ignore::WalkBuilder::new(ws)
        .hidden(false)
        .filter_entry(|e| e.file_name() != ".git")
        .build()
        .filter_map(Result::ok)
        .filter_map(|e| e.metadata().ok()?.modified().ok())
        .max()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_tail_and_touches_the_mark() {
        let dir = tempfile::tempdir().unwrap();
        let mark = dir.path().join("w/activity");
        let long = "x".repeat(TAIL) + "\nError: 429 Too Many Requests\n";
        let out: Box<dyn Read + Send> = Box::new(std::io::Cursor::new(long.into_bytes()));
        let tee = Tee::start(vec![out], mark.clone(), dir.path(), false);
        let tail = tee.finish();
        assert_eq!(tail.len(), TAIL);
        assert!(tail.ends_with("Too Many Requests\n"));
        assert!(mark.exists(), "the mark is touched at the start");
    }

    #[test]
    fn newest_mtime_skips_git_and_ignored_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".git")).unwrap();
        std::fs::write(dir.path().join("a.txt"), "a").unwrap();
        let first = newest_mtime(dir.path()).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        std::fs::write(dir.path().join(".git/index"), "i").unwrap();
        assert_eq!(newest_mtime(dir.path()), Some(first), ".git is not work");
        std::fs::write(dir.path().join("b.txt"), "b").unwrap();
        assert!(newest_mtime(dir.path()).unwrap() >= first);
    }
}
