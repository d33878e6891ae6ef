//! Failed attempts, remembered across runs: per-bead retry backoff and the per-bead breaker.
//!
//! A failed attempt (the agent exited non-zero, timed out, reported failing, wrote nothing; the
//! worker crashed; the tick killed it as a zombie) does not block the bead at once, and is not
//! retried at once either: the bead goes back to open and waits `min(base·2^(n−1), cap)` after
//! its n-th consecutive failure. That wait lives in braids' `attempts.json`, so it outlives the
//! worker, a restart and cron. After `1 + retries` consecutive failures that count, the bead's
//! breaker trips: it is blocked with a reason listing its last failures and a person is told.
//! A success forgets the bead's failures.
//!
//! Failures caused by the model provider (exit 75, a rate-limit message, see [`breaker`]) back
//! off like the others but never trip the bead's own breaker: the outage is not the bead's fault.
//!
//! Everything here is pure except [`store`], the locked read-modify-write of the file that both
//! workers and the tick update.

pub mod breaker;
pub mod forge_breaker;
pub mod store;

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};

use crate::model::BeadId;

pub use breaker::{Breaker, BreakerPolicy, Outcome};

/// How many failures of a bead are kept: enough to list in a blocked bead's reason.
pub const KEPT_FAILURES: usize = 10;

/// How many of the last spawns' outcomes are kept for the provider breaker (its window is at
/// most this).
pub const RECENT: usize = 64;

/// The per-bead retry rules, from config.toml's `[worker]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// Extra attempts after the first failure: the breaker trips at `1 + retries` failures.
    pub retries: u32,
    pub base: Duration,
    pub cap: Duration,
}

impl Policy {
    /// The wait after the `n`-th consecutive failure (n ≥ 1): `min(base·2^(n−1), cap)`.
    #[must_use]
    pub fn delay(&self, n: u32) -> Duration {
        let doublings = n.saturating_sub(1).min(30);
        let factor = 1i32 << doublings;
        self.base
            .checked_mul(factor)
            .map_or(self.cap, |d| d.min(self.cap))
    }
}

/// One failed attempt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Failure {
    pub at: DateTime<Utc>,
    /// One line for people: "exit 1, status failing", "timed out", "stalled" …
    pub why: String,
    /// What failures that share a cause share (see [`breaker::signature`]); `None` when the
    /// failure says nothing about its cause.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
    /// Whether it counts towards the bead's breaker (provider failures do not).
    #[serde(default = "yes")]
    pub counts: bool,
    /// How long the agent asked to wait (`Retry-After`), honoured over the backoff.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_secs: Option<u64>,
}

fn yes() -> bool {
    true
}

impl Failure {
    pub fn new(at: DateTime<Utc>, why: impl Into<String>) -> Failure {
        Failure {
            at,
            why: why.into(),
            signature: None,
            counts: true,
            retry_after_secs: None,
        }
    }
}

/// A bead's consecutive failures and when it may run again.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BeadRecord {
    /// Oldest first, at most [`KEPT_FAILURES`].
    #[serde(default)]
    pub failures: Vec<Failure>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_before: Option<DateTime<Utc>>,
    /// The counted failures that blocked the bead, once their list is cleared: a new run
    /// starts from none, and `braids retry` still says how many it forgets.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub blocked_after: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl BeadRecord {
    /// The counted failures since the last success, those that blocked the bead included.
    pub fn since_success(&self) -> usize {
        self.counted() as usize + self.blocked_after
    }

    /// Consecutive failures that count towards the breaker.
    pub fn counted(&self) -> u32 {
        u32::try_from(self.failures.iter().filter(|f| f.counts).count()).unwrap_or(u32::MAX)
    }
}

/// What becomes of a bead after a failed attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub enum AfterFailure {
    /// Back to open, eligible again from `not_before`.
    Retry {
        not_before: DateTime<Utc>,
        /// Consecutive failures so far (counted or not).
        failures: u32,
    },
    /// The breaker tripped: block the bead with this reason; its failures, oldest first.
    Block {
        reason: String,
        failures: Vec<Failure>,
    },
}

/// The per-bead rule: the record after one more failure, and what to do with the bead. Pure.
pub fn after_failure(
    record: &BeadRecord,
    failure: Failure,
    policy: &Policy,
) -> (BeadRecord, AfterFailure) {
    let mut next = record.clone();
    let at = failure.at;
    let asked = failure
        .retry_after_secs
        .and_then(|s| i64::try_from(s).ok())
        .map(Duration::seconds);
    next.failures.push(failure);
    let overflow = next.failures.len().saturating_sub(KEPT_FAILURES);
    next.failures.drain(..overflow);
    if next.counted() > policy.retries {
        let reason = block_reason(&next);
        let blocked = BeadRecord {
            blocked_after: next.blocked_after + next.counted() as usize,
            ..BeadRecord::default()
        };
        let failures = next.failures;
        return (blocked, AfterFailure::Block { reason, failures });
    }
    let n = u32::try_from(next.failures.len()).unwrap_or(u32::MAX);
    let wait = asked.map_or(policy.delay(n), |a| a.max(policy.delay(n)));
    let not_before = at + wait;
    next.not_before = Some(not_before);
    (
        next,
        AfterFailure::Retry {
            not_before,
            failures: n,
        },
    )
}

/// "failed 3 times in a row: 12:00 exit 1, status failing; 12:01 timed out; 12:03 stalled".
fn block_reason(record: &BeadRecord) -> String {
    let shown: Vec<String> = record
        .failures
        .iter()
        .rev()
        .take(3)
        .rev()
        .map(|f| format!("{} {}", f.at.format("%Y-%m-%d %H:%M"), f.why))
        .collect();
    let times = match record.counted() {
        1 => "once".to_string(),
        n => format!("{n} times in a row"),
    };
    format!("failed {times} ({})", shown.join("; "))
}

/// `attempts.json`: every bead's failures, by project directory, plus what the provider
/// breaker needs. Fields a newer braids wrote are kept as they were.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Attempts {
    #[serde(default)]
    pub beads: BTreeMap<String, BTreeMap<BeadId, BeadRecord>>,
    /// The last spawns' outcomes across the installation, oldest first.
    #[serde(default)]
    pub recent: Vec<Outcome>,
    #[serde(default)]
    pub breaker: Breaker,
    /// Each forge's breaker, by the forge's name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub forges: BTreeMap<String, forge_breaker::ForgeBreaker>,
    #[serde(flatten)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

fn key(dir: &std::path::Path) -> String {
    dir.to_string_lossy().into_owned()
}

impl Attempts {
    pub fn record(&self, dir: &std::path::Path, bead: &BeadId) -> Option<&BeadRecord> {
        self.beads.get(&key(dir))?.get(bead)
    }

    /// Every bead with a wait, by project directory: when each may run again.
    pub fn waiting(&self) -> BTreeMap<std::path::PathBuf, BTreeMap<BeadId, DateTime<Utc>>> {
        let waits = |beads: &BTreeMap<BeadId, BeadRecord>| {
            beads
                .iter()
                .filter_map(|(b, r)| Some((b.clone(), r.not_before?)))
                .collect()
        };
        self.beads
            .iter()
            .map(|(dir, beads)| (std::path::PathBuf::from(dir), waits(beads)))
            .collect()
    }

    /// When the bead may run again, if it is waiting.
    pub fn not_before(&self, dir: &std::path::Path, bead: &BeadId) -> Option<DateTime<Utc>> {
        self.record(dir, bead)?.not_before
    }

    /// Records a failed attempt of `bead` in `dir` and says what becomes of it. A failure
    /// during an open provider breaker never counts towards the bead's own breaker. `agent`
    /// says whether an agent ran and failed (its worker records it), or the tick saw the
    /// attempt end (a stall, a timeout, a worker gone): only an agent's failure tells about
    /// the provider, though either ends the breaker's probe.
    pub fn fail(
        &mut self,
        dir: &std::path::Path,
        bead: &BeadId,
        mut failure: Failure,
        policy: &Policy,
        agent: bool,
    ) -> AfterFailure {
        if failure
            .signature
            .as_deref()
            .is_some_and(breaker::is_provider)
            || self.breaker.open_since.is_some_and(|t| failure.at >= t)
        {
            failure.counts = false;
        }
        let mut o = Outcome::failed(&failure, dir);
        o.seen_by_tick = !agent;
        self.push_outcome(o);
        let beads = self.beads.entry(key(dir)).or_default();
        let (record, verdict) = after_failure(
            &beads.get(bead).cloned().unwrap_or_default(),
            failure,
            policy,
        );
        beads.insert(bead.clone(), record);
        verdict
    }

    /// The provider breaker looks at the recent outcomes ([`breaker::assess`]). When it opens,
    /// the outage began with the first of the failures that opened it: every bead's failures
    /// since then stop counting towards the bead's own breaker.
    pub fn assess(
        &mut self,
        policy: &breaker::BreakerPolicy,
        now: DateTime<Utc>,
    ) -> Option<breaker::Transition> {
        let (b, t) = breaker::assess(&self.breaker, &self.recent, policy, now);
        self.breaker = b;
        if let Some(breaker::Transition::Opened { since, .. }) = &t {
            for f in self
                .beads
                .values_mut()
                .flat_map(|b| b.values_mut())
                .flat_map(|r| &mut r.failures)
            {
                if f.at >= *since {
                    f.counts = false;
                }
            }
        }
        t
    }

    /// A passed attempt: the bead's failures are forgotten.
    pub fn succeed(&mut self, dir: &std::path::Path, bead: &BeadId, at: DateTime<Utc>) {
        self.push_outcome(Outcome::passed(at, dir));
        self.forget(dir, bead);
    }

    /// Forgets a bead's failures (blocked for another reason, retried by a person, closed).
    pub fn forget(&mut self, dir: &std::path::Path, bead: &BeadId) {
        let k = key(dir);
        if let Some(beads) = self.beads.get_mut(&k) {
            beads.remove(bead);
            if beads.is_empty() {
                self.beads.remove(&k);
            }
        }
    }

    /// Whether a failure was recorded for the bead at or after `since` (one claim, one failure:
    /// the tick does not count a worker's end twice).
    pub fn failed_since(&self, dir: &std::path::Path, bead: &BeadId, since: DateTime<Utc>) -> bool {
        self.record(dir, bead)
            .is_some_and(|r| r.failures.iter().any(|f| f.at >= since))
    }

    fn push_outcome(&mut self, o: Outcome) {
        self.recent.push(o);
        let overflow = self.recent.len().saturating_sub(RECENT);
        self.recent.drain(..overflow);
    }

    /// Retention: records of beads that are no longer waiting and whose last failure is older
    /// than `age` go (their bead was closed, deleted, or done by hand).
    pub fn prune(&mut self, now: DateTime<Utc>, age: Duration) {
        for beads in self.beads.values_mut() {
            // A blocked bead's count stays until a retry or a success forgets it.
            beads.retain(|_, r| {
                r.blocked_after > 0
                    || r.not_before.is_some_and(|t| t > now)
                    || r.failures.last().is_some_and(|f| now - f.at < age)
            });
        }
        self.beads.retain(|_, b| !b.is_empty());
    }
}

#[cfg(test)]
mod tests;
