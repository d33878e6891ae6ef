//! The orchestrator tick, one straight line: lock → load → observe → decide → act → persist.
//!
//! [`run`] (in `run.rs`) is that line and nothing else; `report.rs` is what a run says it did. `observe` and `act` are the only places with I/O
//! (through the tracker and session-backend traits); [`decide()`] is pure. A run that finds the
//! lock held, or that idle backoff says to skip (2.7), returns at once and writes nothing —
//! STATUS.md is rewritten on full runs only (2.8). Check-ins ([`checkin`]) are sent
//! after act and recorded with the state, on full runs that are not dry runs.

pub mod act;
pub mod attempts;
pub mod cache;
pub mod checkin;
pub mod decide;
pub mod events;
mod landings;
mod notices;
pub mod observe;
pub mod orchestrator_state;
pub mod preflight;
pub mod problems;
mod pushes;
mod report;
pub mod retention;
pub mod reuse;
mod run;
pub mod status_md;
pub mod wake;

pub use crate::config::installation::Installation;
pub use act::{Killed, Released, Spawned};
pub use decide::{decide, Plan, Snapshot};
pub use report::{Action, RunType, SkipReason, TickReport};
pub use run::run;

#[derive(Debug, Clone, Copy, Default)]
pub struct TickOptions {
    /// Observe and decide; kill, claim, spawn and write nothing.
    pub dry_run: bool,
    /// Ignore idle backoff.
    pub force: bool,
    /// Kill past the kill-storm guard, this run only.
    pub allow_mass_kill: bool,
}
