//! Which ends of a worker this run are failed attempts of its bead, pure. Act records each in
//! `attempts.json` (`retry/`), whose locked update says whether the bead's breaker trips: a
//! tripped bead is blocked instead of opened again. Workers record their own attempts; these
//! are the ones no worker lived to record.

use std::collections::BTreeMap;
use std::path::PathBuf;

use chrono::{DateTime, Utc};

use super::{Release, Snapshot, Zombie, ZombieOwner, ZombieReason};
use crate::model::BeadId;
use crate::retry::Failure;

/// One failed attempt to record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailedAttempt {
    pub slug: String,
    /// The project directory, which keys the bead's record.
    pub dir: PathBuf,
    pub bead: BeadId,
    /// The claim the attempt ran under (a released claim): a worker that recorded its own
    /// failure and died before releasing its bead is not counted twice.
    pub claimed_at: Option<DateTime<Utc>>,
    pub failure: Failure,
    /// A worker the tick stopped: how long it ran, for the cost ledger.
    pub ran_secs: Option<u64>,
}

/// The retry verdicts of one run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Retries {
    /// Zombies whose stop is a failed attempt, by session label and id.
    pub stops: BTreeMap<(String, String), FailedAttempt>,
    /// Claims to release whose worker ended before finishing, by (slug, bead).
    pub releases: BTreeMap<(String, BeadId), FailedAttempt>,
}

impl Retries {
    #[must_use]
    pub fn of_stop(&self, z: &Zombie) -> Option<&FailedAttempt> {
        self.stops
            .get(&(z.session.label.to_string(), z.session.id.clone()))
    }

    #[must_use]
    pub fn of_release(&self, r: &Release) -> Option<&FailedAttempt> {
        self.releases.get(&(r.slug.clone(), r.bead.clone()))
    }
}

/// The failed attempts among this run's `zombies` and `releases`.
#[must_use]
pub fn decide(
    snap: &Snapshot,
    zombies: &[Zombie],
    releases: &[Release],
    now: DateTime<Utc>,
) -> Retries {
    let stops = zombies
        .iter()
        .filter_map(|z| {
            let (owner, failure) = kill_failure(z, now)?;
            let ran = u64::try_from((now - z.session.started_at).num_seconds()).unwrap_or(0);
            let attempt = FailedAttempt {
                slug: owner.slug.clone(),
                dir: owner.path.clone(),
                bead: z.session.label.bead().clone(),
                claimed_at: None,
                failure,
                ran_secs: Some(ran),
            };
            Some(((z.session.label.to_string(), z.session.id.clone()), attempt))
        })
        .collect();
    let releases = releases
        .iter()
        .filter_map(|r| {
            let dir = r.claim.path.clone()?;
            // A protocol story counts its attempts itself, per step.
            if snap.story_claims.contains(&(dir.clone(), r.bead.clone())) {
                return None;
            }
            let failure = Failure::new(
                now,
                "the worker ended before finishing (crashed, killed, or the machine restarted)",
            );
            let attempt = FailedAttempt {
                slug: r.slug.clone(),
                dir,
                bead: r.bead.clone(),
                claimed_at: Some(r.claim.claimed_at),
                failure,
                ran_secs: None,
            };
            Some(((r.slug.clone(), r.bead.clone()), attempt))
        })
        .collect();
    Retries { stops, releases }
}

/// The failure a zombie's kill stands for, when it is one: a worker stopped for its
/// WorkerTimeout or a stall did not finish its bead.
#[must_use]
pub fn kill_failure(z: &Zombie, now: DateTime<Utc>) -> Option<(&ZombieOwner, Failure)> {
    let owner = z.owner.as_ref()?;
    let sig = match z.reason {
        ZombieReason::Timeout => "timed out",
        ZombieReason::Stalled => "stalled",
        // A protocol step's timeout is an attempt of the story's own count, not the bead's; a
        // gone worker's attempt is counted when its claim is released.
        ZombieReason::SessionEnded
        | ZombieReason::WorkerGone
        | ZombieReason::BeadClosed
        | ZombieReason::StepTimeout => return None,
    };
    let f = Failure {
        signature: Some(sig.into()),
        ..Failure::new(now, z.why())
    };
    Some((owner, f))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::SessionLabel;
    use crate::session::{BackendKind, Session};
    use crate::tick::orchestrator_state::Claim;

    fn now() -> DateTime<Utc> {
        "2026-03-01T12:00:00Z".parse().unwrap()
    }

    fn zombie(bead: &str, reason: ZombieReason, owned: bool) -> Zombie {
        Zombie {
            session: Session {
                label: SessionLabel::new("app", BeadId::new(bead).unwrap()).unwrap(),
                id: bead.into(),
                backend: BackendKind::Process,
                pid: Some(1),
                started_at: now() - chrono::Duration::minutes(90),
                running: true,
                worker_gone: false,
                queued: false,
                ended: None,
                log: None,
            },
            reason,
            owner: owned.then(|| ZombieOwner {
                slug: "app".into(),
                path: "/p/app".into(),
                timeout_secs: 3600,
                stall_secs: 600,
            }),
        }
    }

    fn release(bead: &str, path: Option<&str>) -> Release {
        let bead = BeadId::new(bead).unwrap();
        Release {
            slug: "app".into(),
            bead: bead.clone(),
            claim: Claim {
                project: "app".into(),
                path: path.map(PathBuf::from),
                bead,
                claimed_at: now() - chrono::Duration::minutes(30),
            },
        }
    }

    fn snap(story_claims: &[(&str, &str)]) -> Snapshot {
        Snapshot {
            projects: Vec::new(),
            sessions: Vec::new(),
            claims: Vec::new(),
            global_max_workers: 0,
            orphan_timeout_secs: 3600,
            claim_grace: chrono::Duration::seconds(120),
            unreadable: Vec::new(),
            allow_mass_kill: false,
            waiting: Default::default(),
            activity: Default::default(),
            finishing: Default::default(),
            gate: super::super::Gate::Open,
            next_probe: None,
            held_before: Default::default(),
            story_claims: story_claims
                .iter()
                .map(|(p, b)| (PathBuf::from(p), BeadId::new(b).unwrap()))
                .collect(),
        }
    }

    #[test]
    fn a_stop_is_a_failed_attempt_only_for_its_time_or_a_stall_of_an_owned_worker() {
        let table = [
            (ZombieReason::Timeout, true, Some("timed out")),
            (ZombieReason::Stalled, true, Some("stalled")),
            (ZombieReason::Timeout, false, None),
            (ZombieReason::StepTimeout, true, None),
            (ZombieReason::BeadClosed, true, None),
            (ZombieReason::WorkerGone, true, None),
            (ZombieReason::SessionEnded, true, None),
        ];
        for (reason, owned, signature) in table {
            let z = zombie("b-1", reason, owned);
            let r = decide(&snap(&[]), std::slice::from_ref(&z), &[], now());
            let got = r.of_stop(&z);
            assert_eq!(
                got.and_then(|a| a.failure.signature.as_deref()),
                signature,
                "{reason} owned={owned}"
            );
            if let Some(a) = got {
                assert_eq!((a.ran_secs, a.claimed_at), (Some(90 * 60), None));
                assert_eq!(
                    (a.slug.as_str(), a.dir.as_path()),
                    ("app", "/p/app".as_ref())
                );
            }
        }
    }

    #[test]
    fn a_released_claim_is_a_failed_attempt_unless_a_story_counts_it_or_its_directory_is_unknown() {
        let table = [
            (Some("/p/app"), &[][..], true),
            (Some("/p/app"), &[("/p/app", "b-1")][..], false),
            (Some("/p/app"), &[("/p/other", "b-1")][..], true),
            (None, &[][..], false),
        ];
        for (path, stories, counted) in table {
            let r = release("b-1", path);
            let got = decide(&snap(stories), &[], std::slice::from_ref(&r), now());
            let a = got.of_release(&r);
            assert_eq!(a.is_some(), counted, "{path:?} {stories:?}");
            if let Some(a) = a {
                assert_eq!(a.claimed_at, Some(r.claim.claimed_at));
                assert!(a.failure.counts);
                assert!(a.failure.why.contains("ended before finishing"), "{a:?}");
            }
        }
    }
}
