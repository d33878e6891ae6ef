//! The stop flag the long-running commands share (`events --follow`, `supervise`, the bead
//! lists that follow): SIGTERM or SIGINT raise it, and the command returns at its next check.

use std::sync::atomic::{AtomicBool, Ordering};

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn raise_stop(_: nix::libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// A flag raised by SIGTERM or SIGINT (the handler only stores to an atomic, which is
/// async-signal-safe): long-running commands finish what they are doing and return.
pub fn stop_on_signals() -> &'static AtomicBool {
    use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};
    let action = SigAction::new(
        SigHandler::Handler(raise_stop),
        SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    for sig in [Signal::SIGTERM, Signal::SIGINT] {
        // SAFETY: the handler only stores to a static atomic.
        if let Err(e) = unsafe { sigaction(sig, &action) } {
            tracing::warn!("cannot handle {sig}: {e}");
        }
    }
    &STOP
}
