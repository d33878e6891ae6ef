//! Named crash points for the crash-safety tests (CONTRACTS 7).
//!
//! `crash_point!("tick::after_claim")` marks a place where a crash must leave nothing braids
//! cannot recover from. Built with the `failpoints` feature and run with
//! `FAILPOINTS=tick::after_claim=return`, the process kills itself there with SIGKILL: no
//! destructor runs, no lock is released by braids, no buffered write is flushed — what a power
//! cut or the OOM killer does. Without the feature the points compile to nothing. The `fail`
//! crate does the naming, the configuration and the counting (`1*return` fires once per
//! process); this module only supplies the crash.

/// Every crash point, in the order a bead meets them; the crash-safety matrix runs each.
pub const POINTS: &[&str] = &[
    "tick::after_claim_recorded",
    "tick::after_claim",
    "session::after_pending_record",
    "session::after_spawn",
    "session::after_record",
    "tick::after_act",
    "worker::after_claim",
    "worker::after_agent",
    "worker::after_deliverable",
    "worker::after_close",
    "worker::after_commit",
    "worker::after_iteration",
    "worker::after_push",
];

/// Marks a crash point: with the `failpoints` feature and the point armed, the process dies
/// here by SIGKILL.
#[macro_export]
macro_rules! crash_point {
    ($name:literal) => {
        fail::fail_point!($name, |_| $crate::system::failpoint::die($name))
    };
}

/// Arms the points named in `FAILPOINTS` for this process (a no-op without the feature); the
/// guard must live as long as the process does its work.
pub fn arm() -> Armed {
    #[cfg(feature = "failpoints")]
    {
        Armed(Some(fail::FailScenario::setup()))
    }
    #[cfg(not(feature = "failpoints"))]
    {
        Armed(None)
    }
}

/// Keeps the points armed while it lives.
#[must_use]
pub struct Armed(#[allow(dead_code)] Option<fail::FailScenario<'static>>);

/// Kills this process the way a crash would.
pub fn die(name: &str) -> ! {
    eprintln!("braids: crash point {name}: killing this process (SIGKILL)");
    let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
    // SIGKILL cannot be caught; this only runs if raising it failed.
    std::process::abort()
}
