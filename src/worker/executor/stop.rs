//! What a termination signal (SIGTERM, SIGINT, SIGHUP) does to a worker: the tick stops a zombie
//! session (2.6) by signalling the worker's process group, a person presses Ctrl-C.
//!
//! - While the agent runs, the agent goes too. It runs in a process group of its own, so that a
//!   timeout can kill it and everything it started without killing the worker; a signal to the
//!   worker's group does not reach it, so the handler kills the agent's group first.
//! - While the fixed steps after the agent run (close, commit, push, iteration completion, or
//!   blocking the bead), the signal waits until they are done. The bead is closed before the
//!   commit (3.5), and a tick that sees the bead closed stops its session as a zombie (2.6):
//!   without the wait, it would cut the worker off between the close and the commit or push.
//!   The tick sends SIGKILL when the worker has not exited after its grace, which still bounds
//!   the wait.
//!
//! Then the signal does what it would have done: the worker dies of it.
//!
//! While holding, the signals are also blocked in the worker's thread. A signal sent to the
//! worker's process group at the instant the worker starts a helper (`git`) would otherwise
//! reach the new child before it leaves the group, with its handlers already reset, and kill
//! it: a landing cut in half. Blocked, it waits in the child too, which runs to completion (its
//! own deadline still bounds it), and the worker takes the signal when it unblocks.

use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};
use std::sync::Once;

use nix::libc;
use nix::sys::signal::{
    pthread_sigmask, sigaction, SaFlags, SigAction, SigHandler, SigSet, SigmaskHow, Signal,
};

/// The process groups of the agents running now; 0 in a free slot. A worker runs one bead,
/// with one agent, or one per role of a protocol team step.
static AGENT_GROUPS: [AtomicI32; 16] = [const { AtomicI32::new(0) }; 16];
/// How many [`Hold`]s are alive.
static HOLDING: AtomicUsize = AtomicUsize::new(0);
/// A signal that arrived while holding; 0 when none.
static PENDING: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_stop(sig: libc::c_int) {
    if HOLDING.load(Ordering::SeqCst) > 0 {
        PENDING.store(sig, Ordering::SeqCst);
        return;
    }
    for slot in &AGENT_GROUPS {
        let group = slot.load(Ordering::SeqCst);
        if group > 0 {
            // SAFETY: kill is async-signal-safe.
            unsafe { libc::kill(-group, libc::SIGKILL) };
        }
    }
    die_of(sig);
}

/// Restores the default action and raises `sig` again (async-signal-safe).
fn die_of(sig: libc::c_int) {
    // SAFETY: signal and raise are async-signal-safe.
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        libc::raise(sig);
    }
}

fn install() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let action = SigAction::new(
            SigHandler::Handler(on_stop),
            SaFlags::empty(),
            SigSet::empty(),
        );
        for sig in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP] {
            // SAFETY: the handler only makes async-signal-safe calls.
            if let Err(e) = unsafe { sigaction(sig, &action) } {
                tracing::warn!("cannot handle {sig}: {e}");
            }
        }
    });
}

/// The agent's process group, while it runs.
pub(crate) fn agent_started(group: i32) {
    install();
    // More agents than slots at once is not a configuration braids makes (team roles are
    // few); the extra one is then not killed by a signal, only by its own deadline.
    let _ = AGENT_GROUPS.iter().find(|slot| {
        slot.compare_exchange(0, group, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    });
}

pub(crate) fn agent_gone(group: i32) {
    for slot in &AGENT_GROUPS {
        let _ = slot.compare_exchange(group, 0, Ordering::SeqCst, Ordering::SeqCst);
    }
}

/// While alive, a termination signal waits; dropping it lets a pending one take effect.
pub(crate) struct Hold {
    /// The finishing mark the tick reads ([`crate::system::paths::Paths::finishing`]): a worker in its
    /// fixed steps is not a zombie because its bead was closed — it closed it.
    mark: Option<std::path::PathBuf>,
}

/// The signals a stop arrives as.
fn stop_signals() -> SigSet {
    let mut set = SigSet::empty();
    for sig in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP] {
        set.add(sig);
    }
    set
}

impl Hold {
    pub(crate) fn new() -> Hold {
        install();
        if HOLDING.fetch_add(1, Ordering::SeqCst) == 0 {
            let _ = pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&stop_signals()), None);
        }
        Hold { mark: None }
    }

    /// [`Hold::new`], marking the worker as finishing at `mark` until it is dropped.
    pub(crate) fn marking(mark: std::path::PathBuf) -> Hold {
        let mut hold = Hold::new();
        match crate::system::atomic::write(&mark, std::process::id().to_string().as_bytes()) {
            Ok(()) => hold.mark = Some(mark),
            Err(e) => tracing::warn!("cannot mark the worker as finishing: {e:#}"),
        }
        hold
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        if let Some(mark) = self.mark.take() {
            let _ = std::fs::remove_file(mark);
        }
        if HOLDING.fetch_sub(1, Ordering::SeqCst) > 1 {
            return;
        }
        let sig = PENDING.swap(0, Ordering::SeqCst);
        if sig != 0 {
            tracing::warn!("stopping now: signal {sig} arrived during the fixed steps");
            die_of(sig);
        }
        // A signal that waited, blocked, is delivered now and ends the worker (nothing holds).
        // SAFETY: sigpending only writes the set it is given.
        let mut pending: libc::sigset_t = unsafe { std::mem::zeroed() };
        if unsafe { libc::sigpending(&mut pending) } == 0 {
            let waiting = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP]
                .into_iter()
                .find(|s| unsafe { libc::sigismember(&pending, *s) } == 1);
            if let Some(sig) = waiting {
                tracing::warn!("stopping now: signal {sig} arrived during the fixed steps");
            }
        }
        let _ = pthread_sigmask(SigmaskHow::SIG_UNBLOCK, Some(&stop_signals()), None);
    }
}
