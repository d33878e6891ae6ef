//! The protocol's three vocabularies: the steps of the micro-waterfall, a story's status, and
//! the failure reasons that route it (seed 002, "Valid step Values", "status State Machine",
//! "Valid reason Values"). Spelled exactly as the protocol spells them; anything else is not
//! one of them, and is never guessed into one.

use serde::{Deserialize, Serialize};

/// One step of the micro-waterfall, `bootstrap` for a story that starts a new project.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Step {
    Bootstrap,
    Bdd,
    SddDelta,
    Contract,
    Review,
    Scaffold,
    Impl,
    Verify,
    Commit,
    UpdateMemory,
    Done,
}

impl Step {
    /// Where a story starts: `bootstrap` for a bead titled `[bootstrap]`, else bdd.
    pub fn first_of(title: &str) -> Step {
        match title.to_ascii_lowercase().contains("[bootstrap]") {
            true => Step::Bootstrap,
            false => Step::Bdd,
        }
    }

    /// Every step, in chain order.
    pub const ALL: [Step; 11] = [
        Step::Bootstrap,
        Step::Bdd,
        Step::SddDelta,
        Step::Contract,
        Step::Review,
        Step::Scaffold,
        Step::Impl,
        Step::Verify,
        Step::Commit,
        Step::UpdateMemory,
        Step::Done,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Step::Bootstrap => "bootstrap",
            Step::Bdd => "bdd",
            Step::SddDelta => "sdd-delta",
            Step::Contract => "contract",
            Step::Review => "review",
            Step::Scaffold => "scaffold",
            Step::Impl => "impl",
            Step::Verify => "verify",
            Step::Commit => "commit",
            Step::UpdateMemory => "update-memory",
            Step::Done => "done",
        }
    }

    pub fn parse(s: &str) -> Option<Step> {
        Step::ALL.into_iter().find(|x| x.as_str() == s)
    }

    /// The valid spellings, for error messages.
    pub fn spellings() -> String {
        Step::ALL.map(Step::as_str).join(", ")
    }
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a story is in its current step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Pending,
    Running,
    Pass,
    Failing,
    NeedsHuman,
    Timeout,
}

impl Status {
    pub const ALL: [Status; 6] = [
        Status::Pending,
        Status::Running,
        Status::Pass,
        Status::Failing,
        Status::NeedsHuman,
        Status::Timeout,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::Running => "running",
            Status::Pass => "pass",
            Status::Failing => "failing",
            Status::NeedsHuman => "needs_human",
            Status::Timeout => "timeout",
        }
    }

    pub fn parse(s: &str) -> Option<Status> {
        Status::ALL.into_iter().find(|x| x.as_str() == s)
    }

    pub fn spellings() -> String {
        Status::ALL.map(Status::as_str).join(", ")
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a step failed; the rules table routes on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    ConstitutionViolation,
    NeedsClarification,
    NfrMissing,
    ScopeWarning,
    TestTimeout,
}

impl Reason {
    pub const ALL: [Reason; 5] = [
        Reason::ConstitutionViolation,
        Reason::NeedsClarification,
        Reason::NfrMissing,
        Reason::ScopeWarning,
        Reason::TestTimeout,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Reason::ConstitutionViolation => "constitution_violation",
            Reason::NeedsClarification => "needs_clarification",
            Reason::NfrMissing => "nfr_missing",
            Reason::ScopeWarning => "scope_warning",
            Reason::TestTimeout => "test_timeout",
        }
    }

    pub fn parse(s: &str) -> Option<Reason> {
        Reason::ALL.into_iter().find(|x| x.as_str() == s)
    }

    pub fn spellings() -> String {
        Reason::ALL.map(Reason::as_str).join(", ")
    }
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_round_trip_and_match_serde() {
        for s in Step::ALL {
            assert_eq!(Step::parse(s.as_str()), Some(s));
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
        }
        for s in Status::ALL {
            assert_eq!(Status::parse(s.as_str()), Some(s));
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
        }
        for r in Reason::ALL {
            assert_eq!(Reason::parse(r.as_str()), Some(r));
            assert_eq!(serde_json::to_value(r).unwrap(), r.as_str());
        }
        for wrong in ["passing", "passed", "failed", "fail", "PASS", ""] {
            assert_eq!(Status::parse(wrong), None, "{wrong}");
        }
        assert_eq!(Step::parse("sdd_delta"), None);
    }
}
