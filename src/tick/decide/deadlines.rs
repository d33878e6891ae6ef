//! When the next worker deadline falls: a live worker's WorkerTimeout, its StallTimeout from
//! its last activity, a protocol step's `timeout_min`. The idle backoff never sleeps past it,
//! so a hung agent is stopped within one scheduling interval of its deadline however long the
//! backoff (2.7). Pure.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Utc};

use super::{ProjectView, Snapshot};

fn secs(n: u64) -> Duration {
    Duration::seconds(
        i64::try_from(n)
            .unwrap_or(i64::MAX / 1000)
            .min(i64::MAX / 1000),
    )
}

/// The earliest deadline after `now` of any running worker of a registered project.
#[must_use]
pub fn earliest(snap: &Snapshot, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let by_slug: BTreeMap<&str, &ProjectView> =
        snap.projects.iter().map(|p| (p.slug.as_str(), p)).collect();
    snap.sessions
        .iter()
        .filter(|s| s.running && !s.queued)
        .filter_map(|s| {
            let p = by_slug.get(s.label.slug())?;
            let label = s.label.to_string();
            let timeout = s.started_at + secs(p.worker_timeout);
            let stall = (p.stall_timeout > 0 && !snap.finishing.contains(&label)).then(|| {
                let active = snap
                    .activity
                    .get(&label)
                    .map_or(s.started_at, |a| (*a).max(s.started_at));
                active + secs(p.stall_timeout)
            });
            let step = p.protocol.get(s.label.bead()).and_then(|v| v.deadline);
            [Some(timeout), stall, step]
                .into_iter()
                .flatten()
                .filter(|t| *t > now)
                .min()
        })
        .min()
}

/// When the next full run is due at the latest (2.7): the provider breaker's next probe, the
/// end of a kept claim's grace, the first worker deadline, a retry backoff's end, or now when
/// this run released or held a claim (the next scheduled run looks again). Pure.
#[must_use]
pub fn wake_at(
    snap: &Snapshot,
    grace_ends: Option<DateTime<Utc>>,
    backoff: Option<DateTime<Utc>>,
    looks_again: bool,
    now: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    [
        (snap.gate != super::Gate::Open)
            .then_some(snap.next_probe)
            .flatten(),
        grace_ends,
        earliest(snap, now),
        backoff,
        looks_again.then_some(now),
    ]
    .into_iter()
    .flatten()
    .min()
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::super::Gate;
    use super::*;

    #[test]
    fn wake_at_table() {
        let at = |s: i64| Some(now() + Duration::seconds(s));
        // (breaker, next probe, grace ends, backoff ends, released or held) → wake at
        let rows = [
            (Gate::Open, None, None, None, false, None),
            (Gate::Open, at(10), None, None, false, None), // no probe while closed
            (Gate::Shut, at(10), at(20), None, false, at(10)),
            (Gate::Open, None, at(20), at(5), false, at(5)),
            (Gate::Open, None, at(20), None, true, at(0)), // the next run looks again
        ];
        for (gate, probe, grace, backoff, again, want) in rows {
            let mut s = snap(vec![project("a")], vec![]);
            s.gate = gate;
            s.next_probe = probe;
            let got = wake_at(&s, grace, backoff, again, now());
            assert_eq!(
                got, want,
                "{gate:?} {probe:?} {grace:?} {backoff:?} {again}"
            );
        }
    }
}
