//! Every process of a bead ends with it. An agent may leave children that leave its process
//! group, drop braids' session mark and call `setsid`; each agent therefore runs in a
//! container braids can account for and empty:
//!
//! - a cgroup v2 of its own where braids can make one (as root, or in a delegated subtree),
//!   which `cgroup.kill` empties whatever the processes did to their groups and sessions;
//! - always, a scan for processes whose working directory, root, program or open files lie in
//!   the bead's folders (its workspace, its temp folder), which catches what a missing cgroup
//!   lets go.
//!
//! A container is named for its worker (pid and start time), so any later run of the tick,
//! skipped for the backoff or not, stops what a dead worker's agent left: [`sweep_dead`]. The
//! containers of one install (one braids folder) sit in a folder of their own: another
//! install's run on the machine never ends, nor accounts for, what this one's workers left.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// Where braids' cgroups live on this machine, if it can make them.
pub fn cgroup_root() -> Option<PathBuf> {
    let mount = cgroup2_mount()?;
    let mut candidates = Vec::new();
    if nix::unistd::geteuid().is_root() {
        candidates.push(mount.join("braids"));
    }
    // A delegated subtree (a systemd user service's): the highest folder of our own cgroup we
    // own.
    if let Some(own) = own_cgroup() {
        let uid = nix::unistd::geteuid().as_raw();
        let mut top = None;
        let mut at = mount.join(own.trim_start_matches('/'));
        while at.starts_with(&mount) && at != mount {
            use std::os::unix::fs::MetadataExt;
            match std::fs::metadata(&at) {
                Ok(m) if m.uid() == uid => top = Some(at.clone()),
                _ => break,
            }
            at = at.parent().map(Path::to_path_buf).unwrap_or_default();
        }
        candidates.extend(top.map(|t| t.join("braids")));
    }
    candidates
        .into_iter()
        .find(|c| std::fs::create_dir(c).is_ok() || c.join("cgroup.procs").exists())
}

/// Where the containers of the install whose folder is `braids_dir` live, made if need be;
/// named for the folder's device and inode, which no other folder of the machine shares.
fn install_root(braids_dir: &Path) -> Option<PathBuf> {
    let dir = cgroup_root()?.join(install_name(braids_dir)?);
    (std::fs::create_dir(&dir).is_ok() || dir.join("cgroup.procs").exists()).then_some(dir)
}

fn install_name(braids_dir: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(braids_dir).ok()?;
    Some(format!("{:x}-{:x}", m.dev(), m.ino()))
}

/// The cgroup v2 file system's mount point, from `/proc/self/mountinfo`.
fn cgroup2_mount() -> Option<PathBuf> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    text.lines().find_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        let point = left.split_whitespace().nth(4)?;
        (right.split_whitespace().next()? == "cgroup2").then(|| PathBuf::from(point))
    })
}

/// This process's cgroup v2 path (`0::/…`).
fn own_cgroup() -> Option<String> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(str::to_string)
}

/// What holds one agent's processes.
#[derive(Debug)]
pub struct Container {
    cgroup: Option<PathBuf>,
    /// `cgroup.procs`, opened before the fork so the child only writes to it.
    procs: Option<File>,
    /// The bead's folders: a process inside them after the end is the bead's.
    folders: Vec<PathBuf>,
}

/// What ending a container stopped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Ended {
    /// Processes the cgroup still held.
    pub cgroup: usize,
    /// Processes found in the bead's folders outside it.
    pub scanned: usize,
}

impl Container {
    /// A container for an agent of the worker running this for the install whose folder is
    /// `braids_dir`, named for `name` (the bead's label), watching `folders`; a cgroup where
    /// one can be made.
    pub fn create(braids_dir: &Path, name: &str, folders: Vec<PathBuf>) -> Container {
        // One per agent run: a protocol step's roles run side by side in one worker.
        static RUNS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let run = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let me = std::process::id();
        let leaf = starttime(me).map(|start| format!("{}-{run}.{me}.{start}", safe(name)));
        // Another install's run removes an install's folder while it holds no container: made
        // again when it went between the two steps.
        let cgroup = leaf.and_then(|leaf| {
            (0..3).find_map(|_| {
                let dir = install_root(braids_dir)?.join(&leaf);
                match std::fs::create_dir(&dir) {
                    Ok(()) => Some(Some(dir)),
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Some(Some(dir)),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                    Err(e) => {
                        tracing::debug!("no cgroup for {name}: {e}");
                        Some(None)
                    }
                }
            })?
        });
        let procs = cgroup.as_ref().and_then(|d| {
            std::fs::OpenOptions::new()
                .write(true)
                .open(d.join("cgroup.procs"))
                .ok()
        });
        Container {
            cgroup: procs.as_ref().and(cgroup),
            procs,
            folders,
        }
    }

    /// The cgroup, when there is one.
    pub fn cgroup(&self) -> Option<&Path> {
        self.cgroup.as_deref()
    }

    /// Has the child `cmd` starts join the cgroup before it executes anything.
    pub fn join_on_exec(&self, cmd: &mut std::process::Command) {
        use std::os::fd::AsRawFd;
        use std::os::unix::process::CommandExt;
        let Some(fd) = self.procs.as_ref().map(|f| f.as_raw_fd()) else {
            return;
        };
        // SAFETY: write(2) is async-signal-safe, and the buffer is static.
        unsafe {
            cmd.pre_exec(move || {
                if nix::libc::write(fd, b"0".as_ptr().cast(), 1) != 1 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }

    /// Stops everything left in the cgroup and in the bead's folders, and removes the cgroup.
    pub fn end(self) -> Ended {
        let cgroup = self.cgroup.as_deref().map_or(0, empty);
        let scanned = stop_holders(&self.folders);
        Ended { cgroup, scanned }
    }
}

/// Kills what `dir` (a cgroup) holds, waits for it to be empty, and removes it; returns how
/// many processes it held.
fn empty(dir: &Path) -> usize {
    let held = procs_of(dir).len();
    let kill_file = dir.join("cgroup.kill");
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let left = procs_of(dir);
        if left.is_empty() {
            break;
        }
        if kill_file.exists() {
            let _ = File::options()
                .write(true)
                .open(&kill_file)
                .and_then(|mut f| f.write_all(b"1"));
        } else {
            for p in &left {
                let _ = kill(Pid::from_raw(*p), Signal::SIGKILL);
            }
        }
        if Instant::now() > deadline {
            tracing::warn!(cgroup = %dir.display(), "processes outlived SIGKILL: {left:?}");
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    // Its sub-cgroups first (an agent in a delegated tree may make some).
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.path().is_dir() {
                empty(&e.path());
            }
        }
    }
    let _ = std::fs::remove_dir(dir);
    held
}

fn procs_of(dir: &Path) -> Vec<i32> {
    std::fs::read_to_string(dir.join("cgroup.procs"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// Stops the containers of the install whose folder is `braids_dir` whose worker is gone (its
/// pid dead or now another process's), and removes them: what a SIGKILLed worker's agent
/// left. Returns how many processes it stopped.
pub fn sweep_dead(braids_dir: &Path) -> usize {
    let own = install_root(braids_dir).map_or(0, |root| sweep_in(&root, false));
    // Straight under the root: the folders of installs (removed once they hold no container,
    // as a removed install never comes back for its own), and containers of a braids that
    // kept them there, which whoever runs first ends.
    own + cgroup_root().map_or(0, |root| sweep_in(&root, true))
}

fn sweep_in(root: &Path, installs: bool) -> usize {
    let Ok(entries) = std::fs::read_dir(root) else {
        return 0;
    };
    let mut stopped = 0;
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some((pid, start)) = owner(&name) else {
            if installs && e.path().is_dir() {
                // A cgroup with a process or a child cgroup is never removed.
                let _ = std::fs::remove_dir(e.path());
            }
            continue;
        };
        if starttime(pid) != Some(start) {
            let n = empty(&e.path());
            if n > 0 {
                tracing::info!("stopped {n} processes a dead worker's agent left ({name})");
            }
            stopped += n;
        }
    }
    stopped
}

/// The worker pid and start time a container's name carries.
fn owner(name: &str) -> Option<(u32, u64)> {
    let mut parts = name.rsplitn(3, '.');
    let start = parts.next()?.parse().ok()?;
    let pid = parts.next()?.parse().ok()?;
    parts.next()?;
    Some((pid, start))
}

/// `name` as a cgroup's name: letters, digits, `-` and `_` kept.
fn safe(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(120)
        .collect()
}

/// A running process's start time in clock ticks since boot (`/proc/<pid>/stat` field 22);
/// `None` for a zombie, which runs nothing however long nobody reaps it.
fn starttime(pid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let mut fields = text[text.rfind(')')? + 1..].split_whitespace();
    if matches!(fields.next()?, "Z" | "X") {
        return None;
    }
    fields.nth(18)?.parse().ok()
}

/// The processes whose working directory, root, program or open files lie in one of
/// `folders`, but this one, its ancestors and its descendants: what still runs under this
/// process (another role of the same step, in the same workspace) is its own to end.
pub fn holders(folders: &[PathBuf]) -> Vec<i32> {
    holding(folders, true, true)
}

/// Every process but this one and its ancestors that holds one of `folders`, what runs under
/// this process included, and braids' own commands too: whether a workspace may be pooled.
/// (A braids process holding a descriptor there is spared a kill, never trusted with a
/// directory the next bead gets: its children would inherit the descriptor.)
pub fn any_holders(folders: &[PathBuf]) -> Vec<i32> {
    holding(folders, false, false)
}

fn holding(folders: &[PathBuf], spare_descendants: bool, spare_braids: bool) -> Vec<i32> {
    let folders: Vec<PathBuf> = folders
        .iter()
        .filter_map(|f| f.canonicalize().ok())
        .collect();
    if folders.is_empty() {
        return Vec::new();
    }
    let spared = ancestors();
    let inside = |p: PathBuf| folders.iter().any(|f| p.starts_with(f));
    // braids' own commands (`sessions`, `status`, `serve`) walk worktrees to see when they
    // last changed: a directory they hold open for that moment is not the bead's. Only such a
    // descriptor is spared: a braids process working in the folder (its cwd or root there)
    // holds it like any other, so an agent cannot keep one alive there by running braids.
    let identity = |path: &str| {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
    };
    let braids = identity("/proc/self/exe");
    let mut out = Vec::new();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in procs.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if spared.contains(&pid)
            || (spare_descendants && descends_from(pid, std::process::id() as i32))
        {
            continue;
        }
        let base = e.path();
        let works_there = ["cwd", "root", "exe"]
            .iter()
            .filter_map(|l| std::fs::read_link(base.join(l)).ok())
            .any(inside);
        let walking =
            || spare_braids && braids.is_some() && identity(&format!("/proc/{pid}/exe")) == braids;
        let held = works_there
            || !walking()
                && std::fs::read_dir(base.join("fd"))
                    .into_iter()
                    .flatten()
                    .flatten()
                    .filter_map(|fd| std::fs::read_link(fd.path()).ok())
                    .any(inside);
        if held {
            out.push(pid);
        }
    }
    out
}

/// This process and the processes it descends from.
fn ancestors() -> Vec<i32> {
    let mut out = vec![std::process::id() as i32];
    let mut at = std::process::id() as i32;
    for _ in 0..64 {
        match parent_of(at) {
            Some(parent) if parent > 1 => {
                out.push(parent);
                at = parent;
            }
            _ => break,
        }
    }
    out
}

/// Whether `pid` is a descendant of `ancestor`.
fn descends_from(pid: i32, ancestor: i32) -> bool {
    let mut at = pid;
    for _ in 0..64 {
        match parent_of(at) {
            Some(p) if p == ancestor => return true,
            Some(p) if p > 1 => at = p,
            _ => return false,
        }
    }
    false
}

/// A process's parent (`/proc/<pid>/stat` field 4).
fn parent_of(pid: i32) -> Option<i32> {
    let t = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    t[t.rfind(')')? + 1..]
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// SIGKILLs every process holding one of `folders` until none does (a few rounds: a dying
/// parent's child may be found in the next); returns how many it stopped.
pub fn stop_holders(folders: &[PathBuf]) -> usize {
    let mut stopped = std::collections::BTreeSet::new();
    for _ in 0..5 {
        let found = holders(folders);
        if found.is_empty() {
            break;
        }
        for p in &found {
            if kill(Pid::from_raw(*p), Signal::SIGKILL).is_ok() {
                stopped.insert(*p);
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    if !stopped.is_empty() {
        tracing::info!(
            "stopped {} processes still in the bead's folders",
            stopped.len()
        );
    }
    stopped.len()
}

/// How this machine contains an agent's processes, for `braids check`.
pub fn describe(braids_dir: &Path) -> String {
    let root = cgroup_root().map(|r| match install_name(braids_dir) {
        Some(name) => r.join(name),
        None => r,
    });
    match root {
        Some(root) => format!(
            "a cgroup v2 per bead under {} (emptied with cgroup.kill at its end), and a scan of \
             the bead's folders",
            root.display()
        ),
        None => "a scan for processes in the bead's workspace and temp folder at its end (no \
                 cgroup v2 braids may make here: run as root, or in a delegated systemd user \
                 service)"
            .into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_container_name_carries_its_worker() {
        assert_eq!(owner("project_app_app-w1.1234.98765"), Some((1234, 98765)));
        assert_eq!(owner("a.b.c.12.34"), Some((12, 34)));
        assert_eq!(owner("nope"), None);
        assert_eq!(owner("x.y"), None);
        assert_eq!(safe("project:app:a/b c"), "project_app_a_b_c");
    }

    #[test]
    fn a_process_that_left_its_session_but_holds_the_folder_is_stopped() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("ws");
        std::fs::create_dir_all(&dir).unwrap();
        // A grandchild that leaves for `/` but keeps the folder open, in a session of its own,
        // orphaned: no longer this process's descendant.
        let status = std::process::Command::new("sh")
            .args([
                "-c",
                "setsid sh -c 'exec 3<\"$0\"; cd /; exec sleep 600' \"$0\" </dev/null >/dev/null 2>&1 & exit 0",
            ])
            .arg(&dir)
            .status()
            .unwrap();
        assert!(status.success());
        let seen = (0..500).any(|_| {
            std::thread::sleep(Duration::from_millis(10));
            !holders(std::slice::from_ref(&dir)).is_empty()
        });
        assert!(seen, "the holder was not found");
        assert!(stop_holders(std::slice::from_ref(&dir)) >= 1);
        assert!(holders(&[dir]).is_empty());
    }

    /// Not a check of its own: what the test below runs as another process of this program.
    #[test]
    #[ignore]
    fn idles_as_another_process_of_this_program() {
        std::thread::sleep(Duration::from_secs(600));
    }

    /// Orphans a process of this program: `setup` (shell) runs first with `$0` the folder,
    /// then it idles. Returns its pid once it runs.
    fn orphan_of_this_program(dir: &Path, setup: &str, mark: &str) -> i32 {
        let exe = std::env::current_exe().unwrap();
        let script = format!(
            "setsid sh -c '{setup}; exec \"$1\" --ignored --exact \
             system::container::tests::idles_as_another_process_of_this_program \"$2\"' \
             \"$0\" \"$1\" \"$2\" </dev/null >/dev/null 2>&1 & exit 0"
        );
        let status = std::process::Command::new("sh")
            .args(["-c", &script])
            .arg(dir)
            .arg(&exe)
            .arg(mark)
            .status()
            .unwrap();
        assert!(status.success());
        (0..3000)
            .find_map(|_| {
                std::thread::sleep(Duration::from_millis(10));
                std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
                    let pid = e.file_name().to_str()?.parse::<i32>().ok()?;
                    let cmd = std::fs::read(e.path().join("cmdline")).ok()?;
                    let exe_now = std::fs::read_link(e.path().join("exe")).ok()?;
                    (exe_now == exe && String::from_utf8_lossy(&cmd).contains(mark)).then_some(pid)
                })
            })
            .expect("the process of this program never ran")
    }

    /// braids' own commands are spared only for a descriptor they hold open in a folder
    /// (walking a worktree for its activity); one working there is stopped like any other,
    /// so an agent cannot outlive its bead by running braids in its workspace.
    #[test]
    fn braids_working_in_the_folder_is_stopped_and_braids_reading_it_is_spared() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("ws");
        std::fs::create_dir_all(&dir).unwrap();
        let tag = format!("{}-{}", std::process::id(), line!());
        let working = orphan_of_this_program(&dir, "cd \"$0\"", &format!("working-{tag}"));
        let reading =
            orphan_of_this_program(&dir, "exec 3<\"$0\"; cd /", &format!("reading-{tag}"));
        let found = holders(std::slice::from_ref(&dir));
        // Spared a kill, but the folder it holds is not pooled.
        let pooling = any_holders(std::slice::from_ref(&dir));
        let _ = kill(Pid::from_raw(reading), Signal::SIGKILL);
        let _ = kill(Pid::from_raw(working), Signal::SIGKILL);
        assert!(found.contains(&working), "{found:?} lacks {working}");
        assert!(!found.contains(&reading), "{found:?} holds {reading}");
        assert!(pooling.contains(&reading), "{pooling:?} lacks {reading}");
    }

    #[test]
    fn what_runs_under_this_process_is_its_own_to_end() {
        let tmp = tempfile::tempdir().unwrap();
        let mut child = std::process::Command::new("sleep")
            .arg("600")
            .current_dir(tmp.path())
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        std::thread::sleep(Duration::from_millis(50));
        assert!(!holders(&[tmp.path().to_path_buf()]).contains(&pid));
        let _ = child.kill();
        let _ = child.wait();
    }
}
