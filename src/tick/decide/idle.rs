//! Why a run that spawns nothing is idle (2.7): what it found, in the order a person looks
//! for the cause. Pure.

use crate::tick::orchestrator_state::IdleReason;

/// What a run found while looking for work to start.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Found {
    /// Some project has an active iteration.
    pub eligible: bool,
    /// Some project with room or without has a ready bead it could start.
    pub ready: bool,
    /// Ready work waited for a slot.
    pub starved: bool,
    /// Ready work is in projects no worker can start in (preflight).
    pub unstartable: bool,
    /// The provider breaker lets no spawn through this run.
    pub paused: bool,
}

#[must_use]
pub fn reason(f: Found) -> IdleReason {
    if !f.eligible {
        IdleReason::NoActiveIterations
    } else if f.ready && f.starved && f.paused {
        IdleReason::SpawningPaused
    } else if f.ready && f.starved {
        IdleReason::AllAtCapacity
    } else if f.unstartable {
        IdleReason::NoWorkerCanStart
    } else {
        IdleReason::NoReadyBeads
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reason_table() {
        let f = |eligible, ready, starved, unstartable, paused| Found {
            eligible,
            ready,
            starved,
            unstartable,
            paused,
        };
        // (what the run found) → why it is idle
        let rows = [
            (
                f(false, true, true, true, true),
                IdleReason::NoActiveIterations,
            ),
            (f(true, true, true, false, true), IdleReason::SpawningPaused),
            (f(true, true, true, true, false), IdleReason::AllAtCapacity),
            (
                f(true, false, false, true, false),
                IdleReason::NoWorkerCanStart,
            ),
            (f(true, true, false, false, false), IdleReason::NoReadyBeads),
            (f(true, false, false, false, true), IdleReason::NoReadyBeads),
        ];
        for (found, want) in rows {
            assert_eq!(reason(found), want, "{found:?}");
        }
    }
}
