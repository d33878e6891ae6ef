//! A bead in review as a tick sees it: what braids remembers of its pull request, what the
//! forge said of it this run and the project's rules, which decide whether a worker is needed.

use chrono::{DateTime, Duration, Utc};

use super::{decide, Handled, MergePolicy, PullRequest, Step};
use crate::model::BeadId;

/// How long a head braids pushed may show no checks before it counts as having none: CI
/// registers its checks a few seconds after a push, and a head merged in between would skip
/// them.
pub const CHECKS_GRACE: Duration = Duration::minutes(2);

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Watched {
    pub bead: BeadId,
    /// Its branch is pushed, its request not opened, and the forge may be asked.
    pub to_open: bool,
    pub handled: Handled,
    /// What the forge said this run; `None` when it could not be asked (an outage, settings
    /// a person must fix): nothing is done about the request then.
    pub pr: Option<PullRequest>,
    pub merge: MergePolicy,
    pub approvals: u32,
    /// Attempts the bead may have for the forge's sake.
    pub attempts: u32,
    /// The head braids last pushed, and when.
    pub pushed: (String, DateTime<Utc>),
}

impl Watched {
    /// The step the forge's answer calls for at `now`, when there was one. Pure.
    #[must_use]
    pub fn step(&self, now: DateTime<Utc>) -> Option<Step> {
        if self.to_open {
            return Some(Step::Open);
        }
        let pr = self.pr.as_ref()?;
        let step = decide(pr, &self.handled, self.merge, self.approvals, self.attempts);
        // Only a merge waits: no checks yet says nothing against a rebase or an answer.
        let (head, at) = &self.pushed;
        if matches!(step, Step::Merge { .. })
            && pr.checks.is_empty()
            && &pr.head == head
            && now - *at < CHECKS_GRACE
        {
            return Some(Step::Wait {
                why: format!("#{}'s head has no checks yet", pr.number),
            });
        }
        Some(step)
    }

    /// Whether a worker must act on the request at `now` (anything but waiting).
    pub fn needs_worker(&self, now: DateTime<Utc>) -> bool {
        self.step(now)
            .is_some_and(|s| !matches!(s, Step::Wait { .. }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::review::{Mergeable, PrState, PullRequest};

    #[test]
    fn a_head_braids_just_pushed_with_no_checks_waits_for_them_a_while() {
        let at = DateTime::<Utc>::UNIX_EPOCH;
        let w = Watched {
            bead: BeadId::new("app-1").unwrap(),
            to_open: false,
            handled: Handled::default(),
            pr: Some(PullRequest {
                number: 4,
                state: PrState::Open,
                head: "h1".into(),
                behind: false,
                mergeable: Mergeable::Clean,
                checks: vec![],
                reviews: vec![],
            }),
            merge: MergePolicy::Auto,
            approvals: 0,
            attempts: 2,
            pushed: ("h1".into(), at),
        };
        assert!(matches!(
            w.step(at + Duration::seconds(30)),
            Some(Step::Wait { .. })
        ));
        assert!(!w.needs_worker(at + Duration::seconds(30)));
        // None came: a repository without CI merges.
        assert_eq!(
            w.step(at + CHECKS_GRACE),
            Some(Step::Merge { head: "h1".into() })
        );
        // A head somebody else pushed is not braids' to wait for.
        let theirs = Watched {
            pushed: ("h0".into(), at),
            ..w.clone()
        };
        assert!(theirs.needs_worker(at));
        // A request the forge never opened is opened, whatever was seen of it.
        let unopened = Watched {
            to_open: true,
            pr: None,
            ..w.clone()
        };
        assert_eq!(unopened.step(at), Some(Step::Open));
        assert!(unopened.needs_worker(at));
    }
}
