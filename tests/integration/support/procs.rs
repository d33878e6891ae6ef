//! What `/proc` says about processes, and guards for processes a test starts itself.

use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};

/// `Command::spawn`, retried on `ETXTBSY`: a script a test just wrote is "busy" for as long
/// as a child another test's thread forked still holds the descriptor it was written through
/// (until that child's exec), which on a loaded machine can be a while.
pub fn spawn(cmd: &mut Command) -> std::io::Result<Child> {
    let mut pause = std::time::Duration::from_millis(1);
    for _ in 0..40 {
        match cmd.spawn() {
            Err(e) if e.raw_os_error() == Some(nix::libc::ETXTBSY) => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(std::time::Duration::from_millis(100));
            }
            other => return other,
        }
    }
    cmd.spawn()
}

/// Fields of `/proc/<pid>/stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// `R`, `S`, `Z` …
    pub state: char,
    pub pgrp: i32,
    pub session: i32,
    /// Clock ticks after boot at which the process started: with the pid, its identity.
    pub starttime: u64,
}

impl Stat {
    /// Running something: neither a zombie (exited, not yet reaped) nor dead.
    pub fn runs(&self) -> bool {
        !matches!(self.state, 'Z' | 'X')
    }
}

/// `/proc/<pid>/stat`, or `None` when there is no such process.
pub fn stat(pid: u32) -> Option<Stat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let f: Vec<&str> = text[text.rfind(')')? + 1..].split_whitespace().collect();
    Some(Stat {
        state: f.first()?.chars().next()?,
        pgrp: f.get(2)?.parse().ok()?,
        session: f.get(3)?.parse().ok()?,
        starttime: f.get(19)?.parse().ok()?,
    })
}

/// Field 22 of `/proc/<pid>/stat`, the identity the process backend records next to a pid.
pub fn proc_starttime(pid: u32) -> Option<u64> {
    stat(pid).map(|s| s.starttime)
}

/// Whether `pid` is a live process (not a zombie).
pub fn alive(pid: u32) -> bool {
    stat(pid).is_some_and(|s| s.runs())
}

/// Every pid in `/proc`.
pub fn pids() -> impl Iterator<Item = u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
}

/// The live (non-zombie) processes of process group `pgid`.
pub fn group_members(pgid: u32) -> Vec<u32> {
    pids()
        .filter(|&pid| stat(pid).is_some_and(|s| s.pgrp == pgid as i32 && s.runs()))
        .collect()
}

/// Whether any process of group `pgid` still runs.
pub fn group_alive(pgid: u32) -> bool {
    !group_members(pgid).is_empty()
}

/// Whether a live process whose command line contains `needle` exists.
pub fn process_with_arg(needle: &str) -> bool {
    pids().any(|pid| {
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        String::from_utf8_lossy(&cmdline).contains(needle) && alive(pid)
    })
}

/// A process that is not a worker: `sleep 300` leading its own process group (so a wrongly
/// aimed `killpg` would reach it). Killed and reaped when dropped.
pub struct Bystander(pub Child);

impl Bystander {
    pub fn start() -> Bystander {
        Bystander(
            Command::new("sleep")
                .arg("300")
                .process_group(0)
                .stdin(Stdio::null())
                .spawn()
                .unwrap(),
        )
    }

    pub fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Bystander {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// SIGKILLs a process group when dropped: for workers a test makes the sandbox unable to find
/// (an unreadable record, an exited leader).
pub struct KillGroup(pub u32);

impl Drop for KillGroup {
    fn drop(&mut self) {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(self.0 as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}
