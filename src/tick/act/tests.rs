use std::path::PathBuf;

use super::*;
use crate::model::SessionLabel;
use crate::retry::Failure;
use crate::session::BackendKind;
use crate::tick::decide::{Retries, ZombieOwner};

fn now() -> DateTime<Utc> {
    "2026-03-01T12:00:00Z".parse().unwrap()
}

fn bead(b: &str) -> BeadId {
    BeadId::new(b).unwrap()
}

fn zombie(b: &str) -> Zombie {
    Zombie {
        session: Session {
            label: SessionLabel::new("app", bead(b)).unwrap(),
            id: format!("id-{b}"),
            backend: BackendKind::Process,
            pid: Some(1),
            started_at: now(),
            running: true,
            worker_gone: false,
            queued: false,
            ended: None,
            log: None,
        },
        reason: ZombieReason::Timeout,
        owner: Some(ZombieOwner {
            slug: "app".into(),
            path: "/p/app".into(),
            timeout_secs: 60,
            stall_secs: 0,
        }),
    }
}

fn release(b: &str) -> Release {
    Release {
        slug: "app".into(),
        bead: bead(b),
        claim: Claim {
            project: "app".into(),
            path: Some("/p/app".into()),
            bead: bead(b),
            claimed_at: now(),
        },
    }
}

fn attempt(b: &str) -> FailedAttempt {
    FailedAttempt {
        slug: "app".into(),
        dir: PathBuf::from("/p/app"),
        bead: bead(b),
        claimed_at: None,
        failure: Failure::new(now(), "timed out"),
        ran_secs: Some(60),
    }
}

fn plan(zombies: Vec<Zombie>, releases: Vec<Release>, retries: Retries) -> Plan {
    Plan {
        zombies,
        releases,
        retries,
        ..Plan::nothing()
    }
}

/// Effects that answer from a script and remember every call in order.
#[derive(Default)]
struct Scripted {
    unkillable: Vec<&'static str>,
    /// Stops whose recorded attempt trips the bead's breaker.
    trips: Vec<&'static str>,
    calls: Vec<String>,
}

impl Effects for Scripted {
    fn stop(
        &mut self,
        z: &Zombie,
        attempt: Option<&FailedAttempt>,
        _: DateTime<Utc>,
        out: &mut Outcome,
    ) -> Result<Option<KillOutcome>, String> {
        let b = z.session.label.bead().to_string();
        self.calls
            .push(format!("stop {b} attempt={}", attempt.is_some()));
        if self.unkillable.contains(&b.as_str()) {
            return Err(format!("cannot kill {b}"));
        }
        if self.trips.contains(&b.as_str()) {
            out.blocked.push(("app".into(), bead(&b), "tripped".into()));
        }
        Ok(Some(KillOutcome::Terminated))
    }
    fn forget_ended(&mut self, s: &Session, _: &mut Outcome) {
        self.calls.push(format!("forget {}", s.label));
    }
    fn mark_orphaned(&mut self, o: &OrphanedStep, _: DateTime<Utc>, _: &mut Outcome) {
        self.calls.push(format!("orphaned {}", o.bead));
    }
    fn set_blocked_by(&mut self, u: &DependencyUpdate, _: &mut Outcome) {
        self.calls.push(format!("blocked_by {}", u.bead));
    }
    fn release(&mut self, r: &Release, attempt: Option<&FailedAttempt>, _: &mut Outcome) -> bool {
        self.calls
            .push(format!("release {} attempt={}", r.bead, attempt.is_some()));
        true
    }
    fn sweep(&mut self, _: &Plan, _: &mut Outcome) {
        self.calls.push("sweep".into());
    }
    fn spawn(&mut self, _: &Plan, _: DateTime<Utc>, _: &mut Outcome) {
        self.calls.push("spawn".into());
    }
}

/// (unkillable, tripped, calls, killed, released, still held)
type Row = (
    &'static [&'static str],
    &'static [&'static str],
    &'static [&'static str],
    &'static [&'static str],
    &'static [&'static str],
    &'static [&'static str],
);

#[test]
fn act_hands_each_step_its_retry_verdict_and_keeps_what_a_failed_stop_holds() {
    let table: [Row; 3] = [
        (
            &[],
            &[],
            &[
                "stop b-1 attempt=true",
                "release b-1 attempt=false",
                "release b-2 attempt=true",
                "sweep",
                "spawn",
            ],
            &["b-1"],
            &["b-1", "b-2"],
            &[],
        ),
        // a worker that cannot be stopped keeps its claim: never released
        (
            &["b-1"],
            &[],
            &[
                "stop b-1 attempt=true",
                "release b-2 attempt=true",
                "sweep",
                "spawn",
            ],
            &[],
            &["b-2"],
            &["b-1"],
        ),
        // a stop that blocked its bead: the claim is not opened again
        (
            &[],
            &["b-1"],
            &[
                "stop b-1 attempt=true",
                "release b-2 attempt=true",
                "sweep",
                "spawn",
            ],
            &["b-1"],
            &["b-2"],
            &[],
        ),
    ];
    for (unkillable, trips, calls, killed, released, held) in table {
        let retries = Retries {
            stops: [(("project:app:b-1".into(), "id-b-1".into()), attempt("b-1"))].into(),
            releases: [(("app".into(), bead("b-2")), attempt("b-2"))].into(),
        };
        let p = plan(
            vec![zombie("b-1")],
            vec![release("b-1"), release("b-2")],
            retries,
        );
        let mut fx = Scripted {
            unkillable: unkillable.to_vec(),
            trips: trips.to_vec(),
            ..Scripted::default()
        };
        let out = act(&p, &mut fx, now());
        assert_eq!(fx.calls, calls, "{unkillable:?} {trips:?}");
        let names = |v: Vec<&BeadId>| v.iter().map(|b| b.to_string()).collect::<Vec<_>>();
        assert_eq!(names(out.killed.iter().map(|k| &k.bead).collect()), killed);
        assert_eq!(
            names(out.released.iter().map(|r| &r.bead).collect()),
            released
        );
        assert_eq!(names(out.still_held.iter().collect()), held);
        assert_eq!(out.errors.len(), unkillable.len());
    }
}

#[test]
fn a_dry_run_kills_nothing_and_reports_every_zombie_and_release() {
    let p = plan(
        vec![zombie("b-1")],
        vec![release("b-2")],
        Retries::default(),
    );
    let out = act(&p, &mut DryRun, now());
    assert_eq!(out.killed.len(), 1);
    assert_eq!(out.killed[0].outcome, None);
    assert_eq!(out.released.len(), 1);
    assert!(out.errors.is_empty() && out.blocked.is_empty() && out.spawned.is_empty());
}
