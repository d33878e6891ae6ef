//! `braids supervise --exec <argv…>`: runs a command once per new event, the seed's
//! supervisor loop made dependable.
//!
//! - The event's JSON goes to the command's stdin, its fields to `BRAIDS_EVENT_*` variables
//!   and to `{placeholders}` in the arguments ([`argv_for`]); the command is an argv list,
//!   never a shell string.
//! - An event is marked `.processed` only after its command exits 0. A failing one is retried
//!   with backoff (1 s doubling to 5 min), and the project's later events wait behind it, so a
//!   supervisor sees each project's events in order; other projects go on.
//! - Where it left off is on disk, in the markers: a restarted supervisor takes the first
//!   event without one, so it neither skips nor repeats an acknowledged event. (A supervisor
//!   killed between its command's exit and the marker runs that command again: at least once
//!   per event, acknowledged exactly once.)
//! - A stop request (SIGTERM, SIGINT) lets the running command finish and be acknowledged.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Result;

use crate::events::journal::Entry;
use crate::events::stream::{self, Source, Waker};
use crate::events::Event;

#[derive(Debug, Clone)]
pub struct Options {
    pub argv: Vec<String>,
    /// A command still running after this long is killed (its process group) and counts as
    /// failed.
    pub timeout: Duration,
    /// Handle what is there now, then return, instead of following.
    pub once: bool,
}

/// What one command run did, for the caller to show.
#[derive(Debug)]
pub enum Handled<'a> {
    Acknowledged {
        event: &'a Event,
        stdout: String,
        stderr: String,
    },
    Failed {
        event: &'a Event,
        why: String,
        /// `None` with `once`: the event waits for the next run.
        retry_in: Option<Duration>,
    },
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Totals {
    pub acknowledged: u64,
    pub failed: u64,
    /// Events still waiting (a `--once` run whose command failed).
    pub waiting: u64,
}

struct Queue<'s> {
    source: &'s Source,
    /// Unprocessed events after `seen`, in id order.
    waiting: VecDeque<Entry>,
    seen: u64,
    failures: u32,
    not_before: Option<Instant>,
}

impl Queue<'_> {
    /// Takes the folder's events after the last one seen, leaving out the processed ones.
    fn refresh(&mut self) {
        for e in self.source.journal.listing() {
            if e.id > self.seen {
                self.seen = e.id;
                if !e.is_processed() {
                    self.waiting.push_back(e);
                }
            }
        }
    }

    fn due(&self, now: Instant) -> bool {
        self.not_before.is_none_or(|t| t <= now)
    }
}

/// One supervisor per installation: two would run the same event's command twice. `None`
/// when another holds it.
pub fn single(
    paths: &crate::system::paths::Paths,
) -> Result<Option<crate::system::lock::TickLock>> {
    let path = paths.braids_dir.join(".supervise.lock");
    Ok(crate::system::lock::TickLock::try_acquire(&path)?)
}

const FIRST_RETRY: Duration = Duration::from_secs(1);
const LAST_RETRY: Duration = Duration::from_secs(300);

/// The wait after `failures` failures in a row.
pub fn backoff(failures: u32) -> Duration {
    let exp = failures.saturating_sub(1).min(16);
    (FIRST_RETRY * 2u32.pow(exp)).min(LAST_RETRY)
}

/// Runs until `stop` is raised (or, with `once`, until nothing is due).
pub fn run(
    sources: &[Source],
    opts: &Options,
    stop: &AtomicBool,
    mut show: impl FnMut(Handled<'_>),
) -> Result<Totals> {
    let mut queues: Vec<Queue<'_>> = sources
        .iter()
        .map(|source| Queue {
            source,
            waiting: VecDeque::new(),
            seen: 0,
            failures: 0,
            not_before: None,
        })
        .collect();
    for q in &mut queues {
        q.refresh();
    }
    let mut totals = Totals::default();
    let mut waker = (!opts.once).then(|| Waker::new(sources));
    while !stop.load(Ordering::SeqCst) {
        let now = Instant::now();
        let next = earliest(&mut queues, now);
        let Some((at, event)) = next else {
            let Some(w) = &waker else { break };
            let wait = queues
                .iter()
                .filter(|q| !q.waiting.is_empty())
                .filter_map(|q| q.not_before)
                .map(|t| t.saturating_duration_since(now))
                .min()
                .unwrap_or(Duration::from_secs(3600));
            let wake = w.wait(wait, stop);
            let woken: Vec<String> = stream::woken(sources, &wake)
                .iter()
                .map(|s| s.slug.clone())
                .collect();
            for q in queues.iter_mut().filter(|q| woken.contains(&q.source.slug)) {
                q.refresh();
            }
            if queues.iter().any(|q| w.outdated_for(q.source)) {
                waker = Some(Waker::new(sources));
                // Whatever was written while the new watches were set up.
                for q in &mut queues {
                    q.refresh();
                }
            }
            continue;
        };
        let q = &mut queues[at];
        let entry = q.waiting.front().expect("earliest found it").clone();
        match execute(opts, &entry, &event) {
            Ok(out) => {
                crate::system::atomic::write(&entry.marker(), marker_text().as_bytes())?;
                q.waiting.pop_front();
                q.failures = 0;
                q.not_before = None;
                totals.acknowledged += 1;
                show(Handled::Acknowledged {
                    event: &event,
                    stdout: out.stdout,
                    stderr: out.stderr,
                });
            }
            Err(why) => {
                q.failures += 1;
                let retry_in = backoff(q.failures);
                q.not_before = Some(Instant::now() + retry_in);
                totals.failed += 1;
                show(Handled::Failed {
                    event: &event,
                    why,
                    retry_in: (!opts.once).then_some(retry_in),
                });
                if opts.once {
                    // Nothing more of this project this run: its events wait, in order.
                    q.not_before = Some(Instant::now() + Duration::from_secs(365 * 24 * 3600));
                }
            }
        }
    }
    totals.waiting = queues.iter().map(|q| q.waiting.len() as u64).sum();
    Ok(totals)
}

/// The queue whose first event is the earliest among those due, with that event read. An
/// event that cannot be read is left for a person (logged once) and passed over.
fn earliest(queues: &mut [Queue<'_>], now: Instant) -> Option<(usize, Event)> {
    let mut best: Option<(usize, Event)> = None;
    for (i, q) in queues.iter_mut().enumerate() {
        if !q.due(now) {
            continue;
        }
        while let Some(e) = q.waiting.front() {
            match e.read() {
                Ok(mut event) => {
                    event.id = e.id;
                    event.project.clone_from(&q.source.slug);
                    let earlier = best.as_ref().is_none_or(|(_, b)| {
                        (event.timestamp, &event.project, event.id)
                            < (b.timestamp, &b.project, b.id)
                    });
                    if earlier {
                        best = Some((i, event));
                    }
                    break;
                }
                Err(err) => {
                    tracing::warn!("skipping {}: {err:#}", e.path().display());
                    q.waiting.pop_front();
                }
            }
        }
    }
    best
}

fn execute(
    opts: &Options,
    entry: &Entry,
    event: &Event,
) -> Result<crate::system::proc::Output, String> {
    let bytes = crate::system::atomic::read(&entry.path()).map_err(|e| e.to_string())?;
    let argv = argv_for(&opts.argv, event, &entry.path());
    let mut inv = crate::system::proc::Invocation::new(&argv)
        .stdin(bytes)
        .timeout(opts.timeout)
        .env("BRAIDS_EVENT_ID", event.id.to_string())
        .env("BRAIDS_EVENT_TYPE", &event.kind)
        .env("BRAIDS_EVENT_PROJECT", &event.project)
        .env("BRAIDS_EVENT_TIMESTAMP", event.timestamp.to_rfc3339())
        .env("BRAIDS_EVENT_FILE", entry.path());
    if let Some(b) = &event.bead {
        inv = inv.env("BRAIDS_EVENT_BEAD", b);
    }
    match inv.run() {
        Ok(out) if out.success() => Ok(out),
        Ok(out) => {
            let tail: String = out
                .stderr
                .lines()
                .last()
                .unwrap_or("")
                .chars()
                .take(200)
                .collect();
            Err(format!(
                "{}{}",
                out.status_text(),
                if tail.is_empty() {
                    String::new()
                } else {
                    format!(": {tail}")
                }
            ))
        }
        Err(e) => Err(e.to_string()),
    }
}

/// The command for one event: `{id}`, `{type}`, `{project}`, `{bead}`, `{timestamp}`,
/// `{file}`, `{message}` (its message or reason) and `{json}` (the event on one line) replaced
/// in each argument, so a notifier's own CLI can be the supervisor (`openclaw message send …
/// -m "{project}: {type} {message}"`). Each stays one argument: nothing reaches a shell.
pub fn argv_for(template: &[String], event: &Event, file: &std::path::Path) -> Vec<String> {
    let id = event.id.to_string();
    let ts = event.timestamp.to_rfc3339();
    let file = file.display().to_string();
    let json = serde_json::to_string(event).unwrap_or_default();
    let field = |k: &str| {
        event
            .fields
            .get(k)
            .and_then(|v| v.as_str())
            .map(str::to_string)
    };
    let message = field("message")
        .or_else(|| field("reason"))
        .unwrap_or_default();
    let vars = [
        ("id", id.as_str()),
        ("type", event.kind.as_str()),
        ("project", event.project.as_str()),
        ("bead", event.bead.as_deref().unwrap_or("")),
        ("timestamp", ts.as_str()),
        ("file", file.as_str()),
        ("message", message.as_str()),
        ("json", json.as_str()),
    ];
    template
        .iter()
        .map(|a| crate::system::templates::expand(a, &vars))
        .collect()
}

fn marker_text() -> String {
    format!(
        "processed by braids supervise (pid {}) at {}\n",
        std::process::id(),
        chrono::Utc::now().to_rfc3339()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c8_6_placeholders_fill_each_argument_and_never_split_it() {
        let event: Event = serde_json::from_str(
            r#"{"id":7,"type":"question","timestamp":"2026-11-23T17:00:00Z","project":"app","bead":"app-1","message":"which API? $(rm -rf ~) {type}"}"#,
        )
        .unwrap();
        let argv = argv_for(
            &[
                "openclaw".into(),
                "message".into(),
                "-m".into(),
                "{project}#{id} {type}: {message}".into(),
                "{bead}".into(),
                "{json}".into(),
            ],
            &event,
            std::path::Path::new("/p/000007-question.event"),
        );
        assert_eq!(argv[3], "app#7 question: which API? $(rm -rf ~) {type}");
        assert_eq!(argv[4], "app-1");
        let back: Event = serde_json::from_str(&argv[5]).unwrap();
        assert_eq!(back, event);
        assert_eq!(argv.len(), 6);
    }

    #[test]
    fn backoff_doubles_from_a_second_to_five_minutes() {
        let got: Vec<u64> = (1..=12).map(|f| backoff(f).as_secs()).collect();
        assert_eq!(got, [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300]);
        assert_eq!(backoff(u32::MAX).as_secs(), 300);
    }
}
