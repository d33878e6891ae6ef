//! The orchestrator tick.
