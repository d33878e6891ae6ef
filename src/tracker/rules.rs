//! Lifecycle rules every adapter applies the same way (4.6, 3.2), whatever the tracker itself
//! would allow.

use super::{ClaimOutcome, TrackerError};
use crate::model::{Bead, BeadId, BeadStatus};

/// What a claim by `actor` should come to, judged from the bead as the tracker reports it;
/// `None` means "open and free: go ahead and claim". A claim by the bead's current holder is
/// idempotent; anything not open, or held by someone else, is refused.
pub(crate) fn claim_verdict(bead: &Bead, actor: &str) -> Option<ClaimOutcome> {
    let holder = bead.assignee.clone();
    match bead.status {
        BeadStatus::InProgress if holder.as_deref() == Some(actor) => Some(ClaimOutcome::Claimed),
        BeadStatus::Open if holder.as_deref().is_none_or(|h| h == actor) => None,
        status => Some(ClaimOutcome::Refused { status, holder }),
    }
}

/// An actor name must be non-empty and on one line; it is trimmed.
pub(crate) fn check_actor(actor: &str) -> Result<&str, TrackerError> {
    let a = actor.trim();
    if a.is_empty() || a.contains(['\n', '\r']) {
        return Err(TrackerError::Failed {
            command: "claim".into(),
            code: "invalid".into(),
            message: format!("actor {actor:?} is not a usable name"),
        });
    }
    Ok(a)
}

/// The error for an operation that would move a closed bead.
pub(crate) fn closed_is_final(id: &BeadId, what: &str) -> TrackerError {
    TrackerError::Failed {
        command: format!("{what} {id}"),
        code: "refused".into(),
        message: format!("bead {id} is closed, and closed beads are final (4.6)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bead(status: BeadStatus, assignee: Option<&str>) -> Bead {
        let mut b = Bead::new(BeadId::new("p-1").unwrap(), "t", status);
        b.assignee = assignee.map(str::to_string);
        b
    }

    #[test]
    fn c3_2_claim_verdicts() {
        use BeadStatus::*;
        assert_eq!(claim_verdict(&bead(Open, None), "me"), None);
        assert_eq!(claim_verdict(&bead(Open, Some("me")), "me"), None);
        assert_eq!(
            claim_verdict(&bead(InProgress, Some("me")), "me"),
            Some(ClaimOutcome::Claimed)
        );
        assert_eq!(
            claim_verdict(&bead(InProgress, Some("other")), "me"),
            Some(ClaimOutcome::Refused {
                status: InProgress,
                holder: Some("other".into())
            })
        );
        assert_eq!(
            claim_verdict(&bead(Open, Some("other")), "me"),
            Some(ClaimOutcome::Refused {
                status: Open,
                holder: Some("other".into())
            })
        );
        for s in [Blocked, Deferred, Closed, Unknown] {
            assert!(
                matches!(
                    claim_verdict(&bead(s, None), "me"),
                    Some(ClaimOutcome::Refused { .. })
                ),
                "{s} claimable"
            );
        }
        assert!(check_actor(" ").is_err() && check_actor("a\nb").is_err());
        assert_eq!(check_actor(" w1 ").unwrap(), "w1");
    }
}
