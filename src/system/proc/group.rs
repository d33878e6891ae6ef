//! [`ProcessGroup`]: how braids starts, waits for and stops every program it runs.
//!
//! A program braids starts leads a new process group, so a timeout or a kill reaches everything
//! it started, not only itself. Helpers and the agent get a group of their own and are waited
//! for; workers get a session of their own and run on after the tick that started them. Their
//! leaders go to a process-wide table and are reaped by [`reap_detached`]: the process that
//! spawns workers may live long (daemon mode, tests), and unreaped children would linger as
//! defunct zombies until it exits.

use std::io;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus};
use std::sync::{mpsc, Mutex};
use std::time::Duration;

use nix::errno::Errno;
use nix::libc;
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;

/// How far a new group is set apart from braids.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Detach {
    /// A process group of its own, in braids' session: a helper or the agent.
    Group,
    /// A session of its own (`setsid`), the signals a supervisor sends at their default action,
    /// and no descriptor of braids' beyond 0, 1 and 2: a worker. The tick lock must never live
    /// on in a worker.
    Session,
}

/// How stopping a group went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopped {
    /// Gone within the grace period after SIGTERM.
    Terminated,
    /// Needed SIGKILL.
    Killed,
    /// Nothing was left to signal.
    AlreadyGone,
}

/// A process group braids started, named by its leader's pid (which is its group id).
#[derive(Debug)]
pub struct ProcessGroup {
    pgid: Pid,
    leader: Leader,
}

#[derive(Debug)]
enum Leader {
    /// Started here and not waited for yet.
    Child(Child),
    /// A thread waits for it, so that a wait can have a deadline.
    Waiting(mpsc::Receiver<io::Result<ExitStatus>>),
    Exited(io::Result<ExitStatus>),
    /// Not ours to wait for: started by an earlier braids process, or handed to the reaper.
    Elsewhere,
}

impl ProcessGroup {
    /// Starts `cmd` as the leader of a new process group.
    pub fn spawn(cmd: &mut Command, detach: Detach) -> io::Result<ProcessGroup> {
        match detach {
            Detach::Group => {
                cmd.process_group(0);
            }
            // SAFETY: detach_session only makes async-signal-safe calls.
            Detach::Session => unsafe {
                cmd.pre_exec(detach_session);
            },
        }
        let child = spawn_retrying(cmd)?;
        Ok(ProcessGroup {
            pgid: Pid::from_raw(child.id() as i32),
            leader: Leader::Child(child),
        })
    }

    /// Group `pgid`, started earlier, perhaps by another braids process; the caller has made
    /// sure it is the group meant. `None` for groups never signalled: 0, 1 and braids' own.
    pub fn adopt(pgid: u32) -> Option<ProcessGroup> {
        let raw = i32::try_from(pgid).ok().filter(|&p| p > 1)?;
        (nix::unistd::getpgrp().as_raw() != raw).then(|| ProcessGroup {
            pgid: Pid::from_raw(raw),
            leader: Leader::Elsewhere,
        })
    }

    /// The group id, which is the leader's pid.
    pub fn id(&self) -> u32 {
        self.pgid.as_raw() as u32
    }

    /// The leader, for its pipes, until it is waited for.
    pub fn leader(&mut self) -> Option<&mut Child> {
        match &mut self.leader {
            Leader::Child(c) => Some(c),
            _ => None,
        }
    }

    /// Lets the group run on unwatched; its leader is reaped by [`reap_detached`] once it exits.
    pub fn detach(self) {
        // Dropping hands the leader to the reaper.
    }

    /// Waits up to `limit` (`None`: as long as it takes) for the leader to exit; true once it
    /// has. Other members of the group may still run.
    pub fn wait(&mut self, limit: Option<Duration>) -> bool {
        let leader = std::mem::replace(&mut self.leader, Leader::Elsewhere);
        self.leader = match (leader, limit) {
            (Leader::Child(mut child), None) => Leader::Exited(child.wait()),
            (Leader::Child(mut child), Some(limit)) => {
                let (tx, rx) = mpsc::channel();
                std::thread::spawn(move || {
                    let _ = tx.send(child.wait());
                });
                Self::receive(rx, Some(limit))
            }
            (Leader::Waiting(rx), limit) => Self::receive(rx, limit),
            (other, _) => other,
        };
        matches!(self.leader, Leader::Exited(_))
    }

    fn receive(rx: mpsc::Receiver<io::Result<ExitStatus>>, limit: Option<Duration>) -> Leader {
        let got = match limit {
            Some(limit) => rx.recv_timeout(limit).map_err(|e| match e {
                mpsc::RecvTimeoutError::Timeout => None,
                mpsc::RecvTimeoutError::Disconnected => Some(()),
            }),
            None => rx.recv().map_err(|_| Some(())),
        };
        match got {
            Ok(status) => Leader::Exited(status),
            Err(None) => Leader::Waiting(rx),
            Err(Some(())) => Leader::Exited(Err(io::Error::other("the waiter thread died"))),
        }
    }

    /// Waits for the leader as long as it takes, then kills what the group left behind (a
    /// background process holding a pipe open, say), and gives the leader's exit status.
    pub fn finish(mut self) -> io::Result<ExitStatus> {
        self.wait(None);
        self.kill();
        match std::mem::replace(&mut self.leader, Leader::Elsewhere) {
            Leader::Exited(status) => status,
            _ => Err(io::Error::other("the group's leader was not started here")),
        }
    }

    /// SIGKILL to the whole group at once; a group already gone is no error.
    pub fn kill(&self) {
        let _ = killpg(self.pgid, Signal::SIGKILL);
    }

    /// Stops a group whose leader was started here: SIGTERM to the group, up to `grace` for the
    /// leader to exit, then SIGKILL. An adopted group needs [`Self::terminate_watching`].
    pub fn terminate(&mut self, grace: Duration) -> io::Result<Stopped> {
        if matches!(self.leader, Leader::Elsewhere) {
            return Err(io::Error::other(
                "no leader to wait for: the group was not started here",
            ));
        }
        let pgid = self.pgid;
        stop(pgid, grace, Duration::ZERO, |limit| self.wait(Some(limit)))
    }

    /// Stops a group whose leader is not ours to wait for. `gone(limit)` waits up to `limit` for
    /// the group to empty and says whether it has: SIGTERM, `gone(grace)`, SIGKILL,
    /// `gone(after_kill)`.
    pub fn terminate_watching(
        &self,
        grace: Duration,
        after_kill: Duration,
        gone: impl FnMut(Duration) -> bool,
    ) -> io::Result<Stopped> {
        stop(self.pgid, grace, after_kill, gone)
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        if let Leader::Child(child) = std::mem::replace(&mut self.leader, Leader::Elsewhere) {
            DETACHED
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(child);
        }
    }
}

fn stop(
    pgid: Pid,
    grace: Duration,
    after_kill: Duration,
    mut gone: impl FnMut(Duration) -> bool,
) -> io::Result<Stopped> {
    match killpg(pgid, Signal::SIGTERM) {
        Ok(()) => {}
        Err(Errno::ESRCH) => return Ok(Stopped::AlreadyGone),
        Err(e) => return Err(e.into()),
    }
    if gone(grace) {
        return Ok(Stopped::Terminated);
    }
    match killpg(pgid, Signal::SIGKILL) {
        Ok(()) => {}
        // It finished exiting between the last look and now.
        Err(Errno::ESRCH) => return Ok(Stopped::Terminated),
        Err(e) => return Err(e.into()),
    }
    gone(after_kill);
    Ok(Stopped::Killed)
}

/// Leaders of detached groups not reaped yet, for the whole process: a daemon that makes a new
/// session backend each tick must still reap the workers of earlier ticks.
static DETACHED: Mutex<Vec<Child>> = Mutex::new(Vec::new());

/// Reaps every detached leader that has exited. Waits only on those children by pid (never
/// `waitpid(-1)`), so other code's children are left alone.
pub fn reap_detached() {
    let mut children = DETACHED.lock().unwrap_or_else(|p| p.into_inner());
    children.retain_mut(|c| matches!(c.try_wait(), Ok(None)));
}

/// `Command::spawn`, retried briefly on `ETXTBSY`. A program that was just written (a tracker
/// being updated, a script a test wrote) is "busy" while any process still holds a descriptor
/// it was written through — including a child another thread forked before that descriptor
/// closed, until the child's exec. That lasts microseconds; failing the call would not.
fn spawn_retrying(cmd: &mut Command) -> io::Result<Child> {
    let mut pause = Duration::from_millis(1);
    for _ in 0..10 {
        match cmd.spawn() {
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(50));
            }
            other => return other,
        }
    }
    cmd.spawn()
}

/// [`Detach::Session`]. Runs in the forked child before `exec`, so it only makes
/// async-signal-safe system calls.
fn detach_session() -> io::Result<()> {
    // Its own process group, no controlling terminal: nothing that happens to the caller's
    // group or terminal reaches it.
    nix::unistd::setsid()?;
    // The signals a supervisor sends act by default, even if braids was started ignoring them.
    for sig in [
        libc::SIGHUP,
        libc::SIGINT,
        libc::SIGQUIT,
        libc::SIGTERM,
        libc::SIGPIPE,
    ] {
        // SAFETY: resetting a disposition to the default is async-signal-safe.
        unsafe { libc::signal(sig, libc::SIG_DFL) };
    }
    close_inherited_fds_on_exec();
    Ok(())
}

/// Marks every descriptor above stderr close-on-exec, so the program gets 0, 1 and 2 only, even
/// when braids holds a descriptor it did not open with `O_CLOEXEC` (one inherited from cron, or
/// opened by a library). Marking instead of closing keeps std's own exec-error pipe working.
fn close_inherited_fds_on_exec() {
    // SAFETY: close_range(2) with CLOSE_RANGE_CLOEXEC only changes descriptor flags.
    let done = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3 as libc::c_uint,
            libc::c_uint::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    } == 0;
    if done {
        return;
    }
    // Kernels before 5.11: walk the descriptor table.
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we pass.
    let max = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0 {
        lim.rlim_cur.min(1 << 20) as libc::c_int
    } else {
        4096
    };
    for fd in 3..max {
        // SAFETY: fcntl on a descriptor number that may or may not be open is harmless.
        unsafe {
            let flags = libc::fcntl(fd, libc::F_GETFD);
            if flags >= 0 && flags & libc::FD_CLOEXEC == 0 {
                libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;

    fn sh(script: &str) -> Command {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", script]).stdout(Stdio::piped());
        cmd
    }

    /// The first line the group's leader writes: the script's cue that it is ready.
    fn ready(group: &mut ProcessGroup) -> String {
        let out = group.leader().unwrap().stdout.take().unwrap();
        let mut line = String::new();
        BufReader::new(out).read_line(&mut line).unwrap();
        line
    }

    #[test]
    fn a_group_ignoring_sigterm_is_killed_after_the_grace() {
        let mut group =
            ProcessGroup::spawn(&mut sh("trap '' TERM; echo ready; sleep 30"), Detach::Group)
                .unwrap();
        assert_eq!(ready(&mut group), "ready\n");
        assert!(!group.wait(Some(Duration::from_millis(50))));
        assert_eq!(
            group.terminate(Duration::from_millis(300)).unwrap(),
            Stopped::Killed
        );
        assert!(!group.finish().unwrap().success());
    }

    #[test]
    fn terminate_reaches_the_whole_group_and_finish_reaps_the_leader() {
        let mut group =
            ProcessGroup::spawn(&mut sh("sleep 30 & echo $!; wait"), Detach::Session).unwrap();
        let bg: i32 = ready(&mut group).trim().parse().unwrap();
        assert_eq!(
            nix::unistd::getpgid(Some(Pid::from_raw(bg))).unwrap(),
            Pid::from_raw(group.id() as i32)
        );
        assert_eq!(
            group.terminate(Duration::from_secs(10)).unwrap(),
            Stopped::Terminated
        );
        assert!(group.finish().is_ok());
        // The background process died of the SIGTERM too (a zombie until its new parent reaps it).
        let state = || {
            std::fs::read_to_string(format!("/proc/{bg}/stat"))
                .map(|t| t[t.rfind(')').unwrap() + 2..].chars().next().unwrap())
                .unwrap_or('X')
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !matches!(state(), 'Z' | 'X') {
            assert!(std::time::Instant::now() < deadline, "{bg} still runs");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    #[test]
    fn never_adopts_pid_0_1_or_its_own_group() {
        for pgid in [0, 1, nix::unistd::getpgrp().as_raw() as u32, u32::MAX] {
            assert!(ProcessGroup::adopt(pgid).is_none(), "{pgid}");
        }
    }
}
