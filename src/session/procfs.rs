//! What `/proc` says about a session's processes, for both backends: a pid's start time (a
//! session's identity is its pid plus that start time, so a reused pid is never taken for a
//! worker), whether a process or a process group still runs, and which group members carry a
//! session's mark in their environment. Stopping a session's group lives here too, because it is
//! only done once `/proc` has confirmed whose group it is.

use std::collections::{BTreeSet, HashMap};
use std::io;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::libc;
use nix::sys::signal::killpg;
use nix::unistd::Pid;

use super::KillOutcome;
use crate::system::proc::{reap_detached, ProcessGroup};

/// How long to wait for a process group to vanish after SIGKILL before reporting anyway.
const AFTER_KILL_WAIT: Duration = Duration::from_secs(5);
/// How often a dying process group is looked at.
pub(crate) const POLL: Duration = Duration::from_millis(20);

/// What `/proc/<pid>/stat` says about a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProcStat {
    /// Field 3: `R`, `S`, `D`, `Z`, …
    pub state: char,
    /// Field 5.
    pub pgrp: i32,
    /// Field 22: clock ticks after boot at which the process started.
    pub starttime: u64,
}

impl ProcStat {
    /// A zombie (exited, not yet reaped) or a dead process: it runs nothing any more.
    pub fn is_dead(&self) -> bool {
        matches!(self.state, 'Z' | 'X' | 'x')
    }
}

/// Parses the text of `/proc/<pid>/stat`. The command name (field 2) is in parentheses and may
/// itself contain spaces and parentheses, so fields are counted from the last `)`.
pub(crate) fn parse_stat(text: &str) -> Option<ProcStat> {
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // fields[0] is field 3 of stat(5).
    Some(ProcStat {
        state: fields.first()?.chars().next()?,
        pgrp: fields.get(2)?.parse().ok()?,
        starttime: fields.get(19)?.parse().ok()?,
    })
}

/// Reads `/proc/<pid>/stat`: `Ok(None)` when there is no such process.
pub(crate) fn read_stat(pid: u32) -> io::Result<Option<ProcStat>> {
    if pid == 0 {
        return Ok(None);
    }
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(text) => parse_stat(&text).map(Some).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("cannot parse /proc/{pid}/stat"),
            )
        }),
        Err(e) if e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ESRCH) => {
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// Whether the process `stat` describes still runs something. `/proc/<pid>/stat` shows the
/// main thread, which can be a zombie while other threads of the process still run.
pub(crate) fn runs(pid: u32, stat: &ProcStat) -> bool {
    if !stat.is_dead() {
        return true;
    }
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.flatten().any(|t| {
        std::fs::read_to_string(t.path().join("stat"))
            .ok()
            .and_then(|text| parse_stat(&text))
            .is_some_and(|s| !s.is_dead())
    })
}

/// Whether `pid` is still the process that started at `starttime` and has not exited.
pub(crate) fn is_alive(pid: u32, starttime: u64) -> io::Result<bool> {
    Ok(read_stat(pid)?.is_some_and(|s| s.starttime == starttime && runs(pid, &s)))
}

/// Every process of the machine that has not exited, with its stat, as far as `/proc` can be
/// read; `None` when `/proc` cannot.
fn running() -> Option<impl Iterator<Item = (u32, ProcStat)>> {
    let dir = std::fs::read_dir("/proc").ok()?;
    Some(dir.flatten().filter_map(|entry| {
        let pid = entry.file_name().to_str()?.parse::<u32>().ok()?;
        let stat = read_stat(pid).ok().flatten()?;
        runs(pid, &stat).then_some((pid, stat))
    }))
}

/// The live processes of group `pgid`, as far as `/proc` can be read.
fn live_members(pgid: i32) -> Option<impl Iterator<Item = u32>> {
    Some(running()?.filter_map(move |(pid, s)| (s.pgrp == pgid).then_some(pid)))
}

/// Whether any process of group `pgid` still runs. `kill(-pgid, 0)` also succeeds while only
/// zombies remain (an unreaped leader, say), so a success is confirmed by looking for a member
/// in `/proc` that is not one.
pub(crate) fn group_has_live_members(pgid: i32) -> bool {
    if pgid <= 1 {
        return false;
    }
    if killpg(Pid::from_raw(pgid), None) == Err(Errno::ESRCH) {
        return false;
    }
    live_members(pgid).is_none_or(|mut m| m.next().is_some())
}

/// Whether process `pid` carries `var` (`NAME=value`) in its environment.
fn is_marked(pid: u32, var: &str) -> bool {
    std::fs::read(format!("/proc/{pid}/environ"))
        .is_ok_and(|env| env.split(|b| *b == 0).any(|v| v == var.as_bytes()))
}

/// Finds the session whose processes carry `var`, by looking at every process of the
/// machine: its group (the leader's pid) and, when the leader still runs, the leader's start
/// time. A marked group leader is preferred to a member whose group it is not, and the oldest
/// leader to younger ones (a worker's `git commit` detaches `git maintenance` into a session of
/// its own, carrying the mark too); `None` when no live process carries the mark.
pub(crate) fn find_marked(var: &str) -> Option<(u32, Option<u64>)> {
    let mut leader: Option<(u32, u64)> = None;
    let mut group = None;
    for (pid, stat) in running()? {
        if !is_marked(pid, var) {
            continue;
        }
        if stat.pgrp == pid as i32 {
            if leader.is_none_or(|(_, t)| stat.starttime < t) {
                leader = Some((pid, stat.starttime));
            }
        } else {
            group.get_or_insert(stat.pgrp as u32);
        }
    }
    // A leader that exited unreaped (no init to reap it) still holds the group's number and its
    // start time, which identify the session.
    leader.map(|(pid, t)| (pid, Some(t))).or(group.map(|g| {
        let start = read_stat(g).ok().flatten().map(|s| s.starttime);
        (g, start)
    }))
}

/// The process groups whose live members carry `NAME=<value>` in their environment, by value:
/// one look at every process of the machine (other users' processes cannot be read and are
/// not ours).
pub(crate) fn marked_groups(name: &str) -> HashMap<String, BTreeSet<i32>> {
    let mut out: HashMap<String, BTreeSet<i32>> = HashMap::new();
    let Some(processes) = running() else {
        return out;
    };
    let prefix = format!("{name}=");
    let own = nix::unistd::getpgrp().as_raw();
    for (pid, stat) in processes {
        if stat.pgrp <= 1 || stat.pgrp == own {
            continue;
        }
        let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        let value = env
            .split(|b| *b == 0)
            .find_map(|v| v.strip_prefix(prefix.as_bytes()));
        if let Some(value) = value.and_then(|v| std::str::from_utf8(v).ok()) {
            out.entry(value.to_owned()).or_default().insert(stat.pgrp);
        }
    }
    out
}

/// Stops every process group with a live member carrying `NAME=value`, found anew each round
/// since a dying process may leave children behind; the strongest stop it needed, or an error
/// when some still run after three rounds.
pub(crate) fn stop_marked(name: &str, value: &str, grace: Duration) -> io::Result<KillOutcome> {
    let mut outcome = KillOutcome::AlreadyGone;
    for round in 0..4 {
        let groups = marked_groups(name).remove(value).unwrap_or_default();
        if groups.is_empty() {
            break;
        }
        // Processes that keep leaving their group are not gone: the claim stays held.
        if round == 3 {
            return Err(io::Error::other(format!(
                "processes carrying {name}={value} keep escaping into new process groups"
            )));
        }
        for pgid in groups {
            let Some(group) = ProcessGroup::adopt(pgid as u32) else {
                continue;
            };
            outcome = stronger(outcome, stop_group(&group, grace)?);
        }
    }
    Ok(outcome)
}

/// The stop that took more: SIGKILL over SIGTERM over nothing.
pub(crate) fn stronger(a: KillOutcome, b: KillOutcome) -> KillOutcome {
    use KillOutcome::*;
    match (a, b) {
        (Killed, _) | (_, Killed) => Killed,
        (Terminated, _) | (_, Terminated) => Terminated,
        _ => AlreadyGone,
    }
}

/// Stops the process group led by `pid`, but only if `pid` is still the process that started
/// at `starttime`: otherwise nothing is signalled and the answer is `AlreadyGone`. SIGTERM, up
/// to `grace` for the whole group to exit, then SIGKILL.
///
/// A leader that has exited but is not yet reaped still holds its pid, so its group can be
/// cleaned up safely; once the identity check fails, nothing is touched.
pub(crate) fn kill_group(pid: u32, starttime: u64, grace: Duration) -> io::Result<KillOutcome> {
    if pid <= 1 || pid > i32::MAX as u32 || pid == std::process::id() {
        return Ok(KillOutcome::AlreadyGone);
    }
    let Some(stat) = read_stat(pid)? else {
        reap_detached();
        return Ok(KillOutcome::AlreadyGone);
    };
    if stat.starttime != starttime {
        return Ok(KillOutcome::AlreadyGone);
    }
    // Sessions lead their own process group, so their group is their pid.
    let Some(group) = ProcessGroup::adopt(pid) else {
        return Ok(KillOutcome::AlreadyGone);
    };
    if !runs(pid, &stat) && !group_has_live_members(pid as i32) {
        reap_detached();
        return Ok(KillOutcome::AlreadyGone);
    }
    stop_group(&group, grace)
}

/// SIGTERM to `group`, up to `grace` for it to empty, then SIGKILL. The caller has established
/// that the group is the session's.
pub(crate) fn stop_group(group: &ProcessGroup, grace: Duration) -> io::Result<KillOutcome> {
    let pgid = group.id() as i32;
    let outcome =
        group.terminate_watching(grace, AFTER_KILL_WAIT, |limit| wait_group_gone(pgid, limit))?;
    if outcome == crate::system::proc::Stopped::AlreadyGone {
        reap_detached();
    }
    Ok(outcome.into())
}

/// Waits up to `limit` for group `pgid` to have no live member, reaping our children meanwhile.
fn wait_group_gone(pgid: i32, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        reap_detached();
        if !group_has_live_members(pgid) {
            return true;
        }
        let now = Instant::now();
        if now >= deadline {
            return false;
        }
        std::thread::sleep(POLL.min(deadline - now));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_from_the_last_paren() {
        let text =
            "4242 (a) b (c) d) S 1 4242 4242 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 987654 1 2 3";
        let s = parse_stat(text).unwrap();
        assert_eq!((s.state, s.pgrp, s.starttime), ('S', 4242, 987654));
        assert!(!s.is_dead());
        assert!(parse_stat("12 (x) Z 1 12 12").is_none());
        let own = read_stat(std::process::id()).unwrap().unwrap();
        assert!(runs(std::process::id(), &own));
        assert!(is_alive(std::process::id(), own.starttime).unwrap());
        assert!(!is_alive(std::process::id(), own.starttime + 1).unwrap());
    }

    #[test]
    fn never_signals_pid_0_1_or_itself() {
        for pid in [0, 1, std::process::id()] {
            let start = read_stat(pid).unwrap().map_or(0, |s| s.starttime);
            assert_eq!(
                kill_group(pid, start, Duration::ZERO).unwrap(),
                KillOutcome::AlreadyGone
            );
        }
    }
}
