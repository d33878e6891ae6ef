//! The orchestrator tick, one straight line: lock → load → observe → decide → act → tell →
//! persist.
//!
//! [`run`] (in `run.rs`) is that line and nothing else. `observe/` reads everything decide
//! looks at (the projects, the preflight, the retry inputs; `observe/cache/` keeps what
//! unchanged projects' files said); [`decide()`] is pure and its [`Plan`] holds every decision;
//! `act/` carries the plan out through [`act::Effects`] ([`act::Live`], or [`act::DryRun`],
//! which records what it would do); `tell/` completes, pushes, notifies, checks in, journals
//! and prunes, returning one [`tell::Told`]; `persist.rs` stores it with the state and writes
//! STATUS.md. A run that finds the lock held, or that idle backoff says to skip (2.7), returns
//! at once and writes nothing — STATUS.md is rewritten on full runs only (2.8). `report.rs`
//! is what a run says it did.

pub mod act;
pub mod attempts;
pub mod decide;
pub mod observe;
pub mod orchestrator_state;
mod persist;
pub mod preflight;
pub mod problems;
mod report;
mod run;
pub mod status_md;
pub mod tell;
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
