//! The forge breaker: when a forge is down or its rate limit is spent, every request to it
//! fails the same way, and asking again each run only spends what quota is left. So the first
//! outage opens the forge's breaker: nothing is asked of it until its next probe, one look at
//! one request, at growing intervals (or when the forge said its limit resets); the first
//! answer closes it. An outage is never the bead's fault: it counts against no attempt.
//!
//! Pure: the state, what happened and the clock in, the next state out. One per forge name,
//! kept beside the provider breaker in `attempts.json`.

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};

/// The first wait after an outage; each failed probe doubles it, up to [`PROBE_CAP`].
pub const PROBE_BASE: Duration = Duration::minutes(1);
pub const PROBE_CAP: Duration = Duration::minutes(30);

/// One forge's breaker.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ForgeBreaker {
    /// Set while the forge is left alone: when the outage was first seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_since: Option<DateTime<Utc>>,
    /// The forge's last failure, in its words.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub why: String,
    /// When the next probe may look.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_probe: Option<DateTime<Utc>>,
    /// Probes that failed since it opened.
    #[serde(default)]
    pub probes: u32,
}

/// Whether the forge may be asked now.
#[must_use]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Look {
    /// Closed: ask as needed.
    Ask,
    /// Open, and its probe is due: one look, whose outcome decides.
    Probe,
    /// Open: nothing is asked until `until`.
    Paused { until: DateTime<Utc>, why: String },
}

/// A change people are told about.
#[must_use]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ForgeTransition {
    Opened { until: DateTime<Utc> },
    Closed { since: DateTime<Utc> },
}

impl ForgeBreaker {
    pub fn look(&self, now: DateTime<Utc>) -> Look {
        match (self.open_since, self.next_probe) {
            (None, _) => Look::Ask,
            (Some(_), Some(until)) if now < until => Look::Paused {
                until,
                why: self.why.clone(),
            },
            (Some(_), _) => Look::Probe,
        }
    }

    /// The forge failed with an outage (`why`); `reset` is when it said its rate limit
    /// resets, if it did.
    pub fn failed(
        &mut self,
        now: DateTime<Utc>,
        why: &str,
        reset: Option<DateTime<Utc>>,
    ) -> Option<ForgeTransition> {
        let opening = self.open_since.is_none();
        if opening {
            self.open_since = Some(now);
            self.probes = 0;
        } else {
            self.probes = self.probes.saturating_add(1);
        }
        let wait = (PROBE_BASE * 2i32.saturating_pow(self.probes.min(16))).min(PROBE_CAP);
        let until = (now + wait).max(reset.unwrap_or(now));
        self.next_probe = Some(until);
        self.why = why.to_string();
        opening.then_some(ForgeTransition::Opened { until })
    }

    /// The forge answered (whatever it said).
    pub fn answered(&mut self) -> Option<ForgeTransition> {
        let since = self.open_since?;
        *self = ForgeBreaker::default();
        Some(ForgeTransition::Closed { since })
    }
}

impl ForgeTransition {
    /// The sentence the log and the tick's report carry.
    pub fn message(&self, forge: &str, why: &str) -> String {
        match self {
            ForgeTransition::Opened { until } => format!(
                "forge `{forge}` paused until {}: {why}; one look at a time probes it until it answers",
                until.format("%H:%M:%S UTC")
            ),
            ForgeTransition::Closed { since } => format!(
                "forge `{forge}` answers again (paused since {})",
                since.format("%H:%M:%S UTC")
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + s, 0).unwrap()
    }

    #[test]
    fn c12_6_an_outage_pauses_the_forge_and_probes_at_growing_intervals_until_it_answers() {
        let mut b = ForgeBreaker::default();
        assert_eq!(b.look(t(0)), Look::Ask);
        assert_eq!(
            b.failed(t(0), "503", None),
            Some(ForgeTransition::Opened { until: t(60) })
        );
        assert!(matches!(b.look(t(59)), Look::Paused { until, .. } if until == t(60)));
        assert_eq!(b.look(t(60)), Look::Probe);
        // Each failed probe doubles the wait, up to the cap.
        let mut at = 60;
        for want in [120, 240, 480, 960, 1800, 1800] {
            assert_eq!(b.failed(t(at), "503", None), None);
            assert_eq!(b.next_probe, Some(t(at + want)), "after a probe at {at}");
            at += want;
        }
        assert_eq!(b.answered(), Some(ForgeTransition::Closed { since: t(0) }));
        assert_eq!(b, ForgeBreaker::default());
        assert_eq!(b.answered(), None);
    }

    #[test]
    fn c12_6_a_spent_rate_limit_waits_for_its_reset() {
        let mut b = ForgeBreaker::default();
        let _ = b.failed(t(0), "rate limit", Some(t(1200)));
        assert!(matches!(b.look(t(1199)), Look::Paused { .. }));
        assert_eq!(b.look(t(1200)), Look::Probe);
        // A reset already past waits the base interval.
        let mut c = ForgeBreaker::default();
        let _ = c.failed(t(0), "rate limit", Some(t(-5)));
        assert_eq!(c.next_probe, Some(t(60)));
    }

    #[test]
    fn an_old_attempts_file_without_forges_loads() {
        let b: ForgeBreaker = serde_json::from_str("{}").unwrap();
        assert_eq!(b, ForgeBreaker::default());
    }
}
