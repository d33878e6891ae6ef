//! Contract 2.6: the zombie order for one session (bead status before runtime, then the
//! stall), as one pure function the tick and the simulation share, and the rule that sorts
//! every session of a run by it.

use std::path::PathBuf;

use chrono::{DateTime, Duration, Utc};
use serde::Serialize;

use super::owners::{lookup, Owners};
use super::{BeadLookup, Snapshot, Workers};
use crate::model::BeadStatus;
use crate::session::Session;

/// Why a session is a zombie (2.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ZombieReason {
    SessionEnded,
    /// Its worker has exited; what it left running (its agent) works for nobody.
    WorkerGone,
    BeadClosed,
    Timeout,
    /// No output and no changed file for StallTimeout.
    Stalled,
    /// A protocol step ran past its rule's `timeout_min`.
    StepTimeout,
}

impl ZombieReason {
    /// As `--json` and the log name it.
    pub fn as_str(self) -> &'static str {
        match self {
            ZombieReason::SessionEnded => "session-ended",
            ZombieReason::WorkerGone => "worker-gone",
            ZombieReason::BeadClosed => "bead-closed",
            ZombieReason::Timeout => "timeout",
            ZombieReason::Stalled => "stalled",
            ZombieReason::StepTimeout => "step-timeout",
        }
    }
}

impl std::fmt::Display for ZombieReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How 2.6 classifies one session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionVerdict {
    /// Not running: excluded from the count, nothing to kill.
    Ended,
    Kill(ZombieReason),
    Healthy,
}

/// The zombie order of 2.6 for one session. `timeout` is the project's WorkerTimeout;
/// `stall` its StallTimeout (0: off) and `active` the worker's last activity. A `finishing`
/// worker (past its agent, in its fixed steps) closed the bead itself and prints nothing while
/// it commits and pushes: only its WorkerTimeout stops it.
pub fn classify(
    session: &Session,
    bead: BeadLookup,
    timeout_secs: u64,
    stall: (u64, Option<DateTime<Utc>>),
    finishing: bool,
    now: DateTime<Utc>,
) -> SessionVerdict {
    if !session.running {
        return SessionVerdict::Ended;
    }
    // Before anything else: nothing may work on a bead for a worker that is gone, finishing
    // or not.
    if session.worker_gone {
        return SessionVerdict::Kill(ZombieReason::WorkerGone);
    }
    if !finishing
        && matches!(
            bead,
            BeadLookup::Known(BeadStatus::Closed) | BeadLookup::Missing
        )
    {
        return SessionVerdict::Kill(ZombieReason::BeadClosed);
    }
    // Queued on a cluster: no agent runs yet, so neither its time nor a stall has started
    // (Slurm counts `--time` from the job's start).
    if session.queued {
        return SessionVerdict::Healthy;
    }
    let limit = secs(timeout_secs);
    if now - session.started_at > limit {
        return SessionVerdict::Kill(ZombieReason::Timeout);
    }
    let (stall_secs, active) = stall;
    if finishing {
        return SessionVerdict::Healthy;
    }
    let quiet = now - active.map_or(session.started_at, |a| a.max(session.started_at));
    if stall_secs > 0 && quiet > secs(stall_secs) {
        return SessionVerdict::Kill(ZombieReason::Stalled);
    }
    SessionVerdict::Healthy
}

fn secs(n: u64) -> Duration {
    Duration::seconds(
        i64::try_from(n)
            .unwrap_or(i64::MAX / 1000)
            .min(i64::MAX / 1000),
    )
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Zombie {
    pub session: Session,
    pub reason: ZombieReason,
    /// The registered project it works for: a worker stopped for its time or a stall is a
    /// failed attempt of that project's bead.
    pub owner: Option<ZombieOwner>,
}

impl Zombie {
    /// Why it is stopped, in words for its log.
    pub fn why(&self) -> String {
        let (timeout, stall) = self
            .owner
            .as_ref()
            .map_or((0, 0), |o| (o.timeout_secs, o.stall_secs));
        match self.reason {
            ZombieReason::Timeout => format!("its WorkerTimeout of {timeout}s ran out"),
            ZombieReason::Stalled => {
                format!("stalled: no output and no changed file for its StallTimeout of {stall}s")
            }
            ZombieReason::StepTimeout => "its protocol step's timeout_min ran out".into(),
            ZombieReason::BeadClosed => "its bead was closed meanwhile".into(),
            ZombieReason::WorkerGone => "its worker process was gone".into(),
            ZombieReason::SessionEnded => "its session had ended".into(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZombieOwner {
    pub slug: String,
    pub path: PathBuf,
    /// WorkerTimeout and StallTimeout, seconds.
    pub timeout_secs: u64,
    pub stall_secs: u64,
}

/// Every session through 2.6: ended ones forgotten, zombies to kill, the rest counted as the
/// workers of their project (a team step's session as its roles). A session of no registered
/// project is an orphan: it counts against the global cap, and the zombie rules that need no
/// PROJECT.md still apply (ended → forgotten, too old → killed). A healthy protocol step past
/// its own `timeout_min` is a zombie before its WorkerTimeout (seed 002, the poller). Pure.
#[must_use]
pub fn find_zombies<'a>(
    snap: &'a Snapshot,
    owners: &Owners<'a>,
    now: DateTime<Utc>,
) -> Workers<'a> {
    let mut w = Workers {
        healthy: snap.projects.iter().map(|p| (p.slug.clone(), 0)).collect(),
        ..Workers::default()
    };
    for s in &snap.sessions {
        let bead = s.label.bead();
        if s.running && !owners.is_registered(s.label.slug()) {
            w.orphan_live.insert(bead);
        }
        let Some(p) = owners.of_label(&s.label) else {
            let timeout = snap.orphan_timeout_secs;
            match classify(s, BeadLookup::Unknown, timeout, (0, None), false, now) {
                SessionVerdict::Ended => w.ended.push(s.clone()),
                SessionVerdict::Kill(reason) => w.zombies.push(Zombie::new(s, reason, None)),
                SessionVerdict::Healthy => w.unmanaged.push(s.clone()),
            }
            continue;
        };
        if s.running {
            w.live.insert((p.slug.as_str(), bead));
        }
        let label = s.label.to_string();
        let stall = (p.stall_timeout, snap.activity.get(&label).copied());
        let finishing = snap.finishing.contains(&label);
        let owner = || Some(ZombieOwner::of(p));
        match classify(s, lookup(p, bead), p.worker_timeout, stall, finishing, now) {
            SessionVerdict::Ended => w.ended.push(s.clone()),
            SessionVerdict::Kill(reason) => w.zombies.push(Zombie::new(s, reason, owner())),
            SessionVerdict::Healthy => match p.protocol.get(bead) {
                Some(v) if v.deadline.is_some_and(|d| now > d) => {
                    let reason = ZombieReason::StepTimeout;
                    w.zombies.push(Zombie::new(s, reason, owner()));
                }
                story => {
                    let slots = story.map_or(1, |v| v.weight);
                    *w.healthy.entry(p.slug.clone()).or_default() += slots;
                }
            },
        }
    }
    w
}

impl Zombie {
    fn new(session: &Session, reason: ZombieReason, owner: Option<ZombieOwner>) -> Self {
        Zombie {
            session: session.clone(),
            reason,
            owner,
        }
    }
}

impl ZombieOwner {
    fn of(p: &super::ProjectView) -> Self {
        ZombieOwner {
            slug: p.slug.clone(),
            path: p.path.clone(),
            timeout_secs: p.worker_timeout,
            stall_secs: p.stall_timeout,
        }
    }
}

#[cfg(test)]
mod tests {
    use chrono::Duration;

    use super::super::test_support::*;
    use super::*;
    use crate::protocol::{Status, Step};

    #[derive(Debug, PartialEq)]
    enum Fate {
        Ended,
        Kill(ZombieReason, Option<&'static str>),
        Unmanaged,
        Healthy(usize),
    }

    #[test]
    fn find_zombies_table() {
        use BeadLookup::Known;
        use BeadStatus::*;
        let late = {
            let mut v = story(Step::Impl, Status::Running, 1);
            v.deadline = Some(now() - Duration::seconds(1));
            v
        };
        let team = story(Step::Impl, Status::Running, 3);
        // (session's slug, running, age s, its bead's status, its story) → fate
        let rows = [
            ("a", true, 60, Known(InProgress), None, Fate::Healthy(1)),
            ("a", false, 60, Known(InProgress), None, Fate::Ended),
            (
                "a",
                true,
                60,
                Known(Closed),
                None,
                Fate::Kill(ZombieReason::BeadClosed, Some("a")),
            ),
            (
                "a",
                true,
                60,
                BeadLookup::Missing,
                None,
                Fate::Kill(ZombieReason::BeadClosed, Some("a")),
            ),
            (
                "a",
                true,
                4000,
                Known(InProgress),
                None,
                Fate::Kill(ZombieReason::Timeout, Some("a")),
            ),
            (
                "a",
                true,
                60,
                Known(InProgress),
                Some(late),
                Fate::Kill(ZombieReason::StepTimeout, Some("a")),
            ),
            (
                "a",
                true,
                60,
                Known(InProgress),
                Some(team),
                Fate::Healthy(3),
            ),
            // an orphan: no PROJECT.md, so only its age and whether it runs count
            ("z", true, 60, Known(Closed), None, Fate::Unmanaged),
            (
                "z",
                true,
                4000,
                Known(InProgress),
                None,
                Fate::Kill(ZombieReason::Timeout, None),
            ),
            ("z", false, 60, Known(InProgress), None, Fate::Ended),
        ];
        for (slug, running, age, status, story, want) in rows {
            let mut p = project("a").bead(id("a-1"), status);
            if let Some(v) = story.clone() {
                p = p.story(id("a-1"), v);
            }
            let bead = if slug == "a" { "a-1" } else { "z-1" };
            let s = snap(vec![p], vec![session(slug, bead, running, age)]);
            let w = find_zombies(&s, &Owners::of(&s), now());
            let got = match (&w.zombies[..], &w.ended[..], &w.unmanaged[..]) {
                ([z], [], []) => Fate::Kill(
                    z.reason,
                    z.owner
                        .as_ref()
                        .map(|o| if o.slug == "a" { "a" } else { "?" }),
                ),
                ([], [_], []) => Fate::Ended,
                ([], [], [_]) => Fate::Unmanaged,
                _ => Fate::Healthy(w.healthy["a"]),
            };
            assert_eq!(
                got, want,
                "{slug} running={running} age={age} {status:?} {story:?}"
            );
            let live = w.live.contains(&("a", &id("a-1")));
            assert_eq!(
                live,
                slug == "a" && running,
                "a running session's bead is live"
            );
            let orphan = w.orphan_live.contains(&id("z-1"));
            assert_eq!(orphan, slug == "z" && running, "an orphan's bead is held");
        }
    }
}
