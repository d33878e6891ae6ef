//! The provider breaker: when the model provider is down or rate-limiting, every bead of every
//! project fails the same way. Retrying them all only burns attempts (and money), so when the
//! last `window` spawns across the installation all failed with the same signature, spawning
//! stops everywhere. One probe spawn is let through at growing intervals; the first success
//! closes the breaker. Beads that failed while it was open do not count towards their own
//! breaker. People are told once when it opens and once when it closes.
//!
//! A signature is what failures with one cause share: `provider: <pattern>` when the agent's
//! output matches a rate-limit or overload pattern, or it exited 75 (EX_TEMPFAIL, "try later");
//! otherwise `exit N` or `timed out`. A generic signature opens the breaker only when the
//! failures span at least two projects (one project's broken tests are not an outage).
//!
//! Pure: the state and the outcomes in, the next state out.

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};

use super::Failure;

/// The provider breaker's settings, from config.toml's `[breaker]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BreakerPolicy {
    /// How many consecutive failed spawns with one signature open it; 0 turns it off.
    pub window: usize,
    pub probe_base: Duration,
    pub probe_cap: Duration,
    /// Lowercase fragments of the agent's output that mean "the provider is failing".
    pub patterns: Vec<String>,
}

/// How long a probe may go without any outcome before another is let through.
pub const PROBE_LOST: Duration = Duration::hours(2);

/// The output fragments that mean a rate limit or an overload, unless config.toml says others.
pub const DEFAULT_PATTERNS: &[&str] = &[
    "rate limit",
    "rate_limit",
    "rate-limited",
    "too many requests",
    "overloaded",
    "quota exceeded",
];

impl Default for BreakerPolicy {
    fn default() -> Self {
        BreakerPolicy {
            window: 5,
            probe_base: Duration::minutes(1),
            probe_cap: Duration::minutes(30),
            patterns: DEFAULT_PATTERNS.iter().map(|s| (*s).to_string()).collect(),
        }
    }
}

/// How one spawn ended, for the breaker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Outcome {
    pub at: DateTime<Utc>,
    /// The project directory.
    pub project: String,
    pub passed: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_secs: Option<u64>,
    /// The tick saw the attempt end (a stall, a timeout, a worker gone) without an agent's
    /// answer: it ends a probe, but says nothing about the provider.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub seen_by_tick: bool,
}

impl Outcome {
    pub fn passed(at: DateTime<Utc>, project: &std::path::Path) -> Outcome {
        Outcome {
            at,
            project: project.to_string_lossy().into_owned(),
            passed: true,
            signature: None,
            retry_after_secs: None,
            seen_by_tick: false,
        }
    }

    pub fn failed(f: &Failure, project: &std::path::Path) -> Outcome {
        Outcome {
            at: f.at,
            project: project.to_string_lossy().into_owned(),
            passed: false,
            signature: f.signature.clone(),
            retry_after_secs: f.retry_after_secs,
            seen_by_tick: false,
        }
    }
}

/// The breaker's state, kept in `attempts.json`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Breaker {
    /// Set while spawning is paused: the first failure of the run of failures that opened it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_since: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
    /// When the next probe may be spawned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_probe: Option<DateTime<Utc>>,
    /// When the probe in flight was spawned; its outcome decides.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probing_since: Option<DateTime<Utc>>,
    /// Probes that failed since it opened.
    #[serde(default)]
    pub probes: u32,
}

/// A change people are told about.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub enum Transition {
    Opened {
        since: DateTime<Utc>,
        signature: String,
        failures: usize,
    },
    Closed {
        since: DateTime<Utc>,
    },
}

impl Transition {
    /// The sentence the log, STATUS.md's history and the notification carry.
    pub fn message(&self, now: DateTime<Utc>) -> String {
        match self {
            Transition::Opened {
                since,
                signature,
                failures,
            } => format!(
                "spawning paused: the last {failures} spawns failed the same way ({signature}) \
                 since {}; one probe spawn at growing intervals until one succeeds",
                since.format("%Y-%m-%d %H:%M UTC")
            ),
            Transition::Closed { since } => format!(
                "spawning resumed: a probe succeeded after the provider failed for {}",
                humantime::format_duration(std::time::Duration::from_secs(
                    u64::try_from((now - *since).num_seconds()).unwrap_or(0)
                ))
            ),
        }
    }
}

/// How many spawns this run may make, as the breaker sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum Gate {
    Open,
    /// One probe spawn, across the installation.
    Probe,
    Shut,
}

impl Breaker {
    /// "spawning paused: provider failing since …", or `None` when closed.
    /// The same line for as long as the outage lasts (the next probe's time is left out), so
    /// the log has it at WARN once, not at every probe.
    pub fn status_line(&self) -> Option<String> {
        let since = self.open_since?;
        Some(format!(
            "spawning paused: provider failing since {} ({}); one probe spawn at growing \
             intervals until one succeeds",
            since.format("%Y-%m-%d %H:%M UTC"),
            self.signature.as_deref().unwrap_or("same failure"),
        ))
    }

    /// What this run may spawn.
    pub fn gate(&self, now: DateTime<Utc>) -> Gate {
        match (self.open_since, self.probing_since, self.next_probe) {
            (None, _, _) => Gate::Open,
            (Some(_), None, Some(t)) if t <= now => Gate::Probe,
            (Some(_), None, None) => Gate::Probe,
            _ => Gate::Shut,
        }
    }
}

/// The breaker with a lost probe given up: the probe was spawned (`probing_since`), no outcome
/// came since, and no worker started since is running (`probe_running` says whether one is),
/// so none ever will. Another probe may go at once, rather than the breaker staying shut until
/// [`PROBE_LOST`]. `None` when nothing changes. Pure.
#[must_use]
pub fn probe_gone(b: &Breaker, recent: &[Outcome], probe_running: bool) -> Option<Breaker> {
    let p = b.probing_since?;
    if probe_running || recent.iter().any(|o| o.at >= p) {
        return None;
    }
    let mut next = b.clone();
    next.probing_since = None;
    next.next_probe = Some(p);
    Some(next)
}

/// The breaker after looking at the recent outcomes (oldest first). Pure.
pub fn assess(
    b: &Breaker,
    recent: &[Outcome],
    policy: &BreakerPolicy,
    now: DateTime<Utc>,
) -> (Breaker, Option<Transition>) {
    let mut next = b.clone();
    let Some(open_since) = b.open_since else {
        // Only agents' answers tell about the provider.
        let answered: Vec<&Outcome> = recent.iter().filter(|o| !o.seen_by_tick).collect();
        if policy.window == 0 || answered.len() < policy.window {
            return (next, None);
        }
        let last = &answered[answered.len() - policy.window..];
        let sig = last[0].signature.as_deref();
        let shared = sig.is_some()
            && last
                .iter()
                .all(|o| !o.passed && o.signature.as_deref() == sig);
        let projects: std::collections::BTreeSet<&str> =
            last.iter().map(|o| o.project.as_str()).collect();
        let Some(sig) = sig.filter(|s| shared && (is_provider(s) || projects.len() >= 2)) else {
            return (next, None);
        };
        let asked = last
            .iter()
            .filter_map(|o| o.retry_after_secs)
            .max()
            .and_then(|s| i64::try_from(s).ok())
            .map_or(Duration::zero(), Duration::seconds);
        next = Breaker {
            open_since: Some(last[0].at),
            signature: Some(sig.to_string()),
            next_probe: Some(now + policy.probe_base.max(asked)),
            probing_since: None,
            probes: 0,
        };
        let t = Transition::Opened {
            since: last[0].at,
            signature: sig.to_string(),
            failures: policy.window,
        };
        return (next, Some(t));
    };
    // Open: the probe's outcome (or any success since it opened) decides. A probe that left no
    // outcome at all (its worker stopped on an error) is given up after PROBE_LOST.
    if let Some(p) = b.probing_since.filter(|p| now - *p > PROBE_LOST) {
        if !recent.iter().any(|o| o.at >= p) {
            next.probing_since = None;
            next.next_probe = Some(now);
            return (next, None);
        }
    }
    let since = b.probing_since.unwrap_or(open_since);
    let after: Vec<&Outcome> = recent.iter().filter(|o| o.at >= since).collect();
    if after.iter().any(|o| o.passed) {
        return (
            Breaker::default(),
            Some(Transition::Closed { since: open_since }),
        );
    }
    if let (Some(_), Some(failed)) = (b.probing_since, after.last()) {
        next.probes = b.probes.saturating_add(1);
        let doublings = next.probes.min(30);
        let wait = policy
            .probe_base
            .checked_mul(1i32 << doublings.min(30))
            .map_or(policy.probe_cap, |d| d.min(policy.probe_cap));
        let asked = failed
            .retry_after_secs
            .and_then(|s| i64::try_from(s).ok())
            .map_or(Duration::zero(), Duration::seconds);
        next.next_probe = Some(failed.at.max(now) + wait.max(asked));
        next.probing_since = None;
    }
    (next, None)
}

/// Whether a signature says the provider, not the bead, failed.
pub fn is_provider(signature: &str) -> bool {
    signature.starts_with("provider:")
}

/// The signature and `Retry-After` (seconds) of one failed agent run: its exit code, whether
/// it timed out, and the end of its output.
pub fn signature(
    code: Option<i32>,
    timed_out: bool,
    output_tail: &str,
    patterns: &[String],
) -> (Option<String>, Option<u64>) {
    let lower = output_tail.to_lowercase();
    let retry_after = retry_after(&lower);
    if let Some(p) = patterns
        .iter()
        .find(|p| !p.is_empty() && lower.contains(p.as_str()))
    {
        return (Some(format!("provider: {p}")), retry_after);
    }
    if code == Some(75) {
        return (Some("provider: exit 75 (try later)".into()), retry_after);
    }
    if timed_out {
        return (Some("timed out".into()), retry_after);
    }
    (code.map(|c| format!("exit {c}")), retry_after)
}

/// The signature of a provider failure an agent CLI reported: by its HTTP status when it gave
/// one (so a storm across projects and CLIs shares one signature), else by its words.
pub fn provider_signature(status: Option<u16>, what: &str) -> String {
    match status {
        Some(s) => format!("provider: HTTP {s}"),
        None => format!(
            "provider: {}",
            crate::system::templates::clip(&what.to_lowercase(), 60)
        ),
    }
}

/// The seconds of the last `retry-after: N` (or `retry-after=N`, `retry after N`, `try again
/// in N`) in lowercase text.
pub fn retry_after(lower: &str) -> Option<u64> {
    let mut found = None;
    for key in ["retry-after", "retry_after", "retry after", "try again in"] {
        let mut rest = lower;
        while let Some(i) = rest.find(key) {
            rest = &rest[i + key.len()..];
            let digits: String = rest
                .trim_start_matches(|c: char| c == ':' || c == '=' || c == '"' || c.is_whitespace())
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            if let Ok(n) = digits.parse() {
                found = Some(n);
            }
        }
    }
    found
}

#[cfg(test)]
#[path = "breaker_tests.rs"]
mod tests;
