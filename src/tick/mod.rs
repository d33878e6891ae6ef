//! The orchestrator tick: lock → load → observe → decide → act → persist.
pub mod decide;

pub use decide::{decide, Plan, Snapshot};
