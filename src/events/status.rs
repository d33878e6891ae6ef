//! `.claw/status.json`: a project's state at a glance, in the claw-builder seed's shape.
//!
//! It is kept from what braids already knows, by pure functions: every event written
//! ([`Status::apply`]), every step a worker takes ([`Status::step`]) and what each tick observes
//! ([`Status::observe`]: the phase, its progress, whether the project is held, which workers
//! are live). [`Status::settle`] then derives the state and moves `last_transition` only when
//! it changed. The journal's lock serialises the tick and the workers, so no update is lost.
//!
//! A project may run several workers: `current_task` and `coder_session` are then lists (one
//! worker, a string; none, `null`), and `tasks` says which worker is at which step.

use std::path::Path;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::{Event, Kind};

/// How many events `recent_events` keeps.
const RECENT: usize = 10;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, Default)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum State {
    #[default]
    Idle,
    TaskSelection,
    ContextPrep,
    Coding,
    Validation,
    Commit,
    Paused,
    Complete,
}

/// One worker's bead and where it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Task {
    pub bead: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    pub state: State,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    pub since: DateTime<Utc>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct Progress {
    pub done: usize,
    pub remaining: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Recent {
    pub id: u64,
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bead: Option<String>,
    pub at: DateTime<Utc>,
}

/// What a tick knows of a project, for [`Status::observe`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Observation {
    /// The phase: the iteration (`Iteration 008`), or the WORKPLAN heading.
    pub phase: Option<String>,
    pub progress: Progress,
    /// Paused or blocked in the registry or PROJECT.md: braids starts nothing there.
    pub held: bool,
    /// Nothing is left to do in the phase.
    pub complete: bool,
    /// The live workers: (bead, session label).
    pub live: Vec<(String, String)>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    pub state: State,
    /// One task's title or bead, a list when several run, `null` when none does.
    pub current_task: serde_json::Value,
    pub phase: Option<String>,
    pub phase_progress: Progress,
    /// Tasks started in this project so far.
    pub loop_iteration: u64,
    pub started_at: DateTime<Utc>,
    pub last_transition: DateTime<Utc>,
    /// Like `current_task`, with the workers' session labels.
    pub coder_session: serde_json::Value,
    pub recent_events: Vec<Recent>,
    pub tasks: Vec<Task>,
    #[serde(default)]
    pub held: bool,
    #[serde(default)]
    pub complete: bool,
}

impl Status {
    pub fn new(now: DateTime<Utc>) -> Status {
        Status {
            state: State::Idle,
            current_task: serde_json::Value::Null,
            phase: None,
            phase_progress: Progress::default(),
            loop_iteration: 0,
            started_at: now,
            last_transition: now,
            coder_session: serde_json::Value::Null,
            recent_events: Vec::new(),
            tasks: Vec::new(),
            held: false,
            complete: false,
        }
    }

    /// What an event changes: the recent list, and the task it starts or ends.
    pub fn apply(&mut self, e: &Event) {
        self.recent_events.push(Recent {
            id: e.id,
            kind: e.kind.clone(),
            bead: e.bead.clone(),
            at: e.timestamp,
        });
        let extra = self.recent_events.len().saturating_sub(RECENT);
        self.recent_events.drain(..extra);
        // The claw loop's own states: the tick's next observation says the same.
        if e.kind == Kind::LoopPaused.as_str() || e.kind == Kind::LoopStuck.as_str() {
            self.held = true;
        } else if e.kind == Kind::LoopComplete.as_str() {
            self.complete = true;
        }
        let Some(bead) = &e.bead else { return };
        let text = |k: &str| e.fields.get(k).and_then(|v| v.as_str()).map(String::from);
        match e.kind.as_str() {
            // The tick picked the task; its worker is starting.
            k if k == Kind::BeadClaimed.as_str() => {
                self.tasks.retain(|t| &t.bead != bead);
                self.tasks.push(Task {
                    bead: bead.clone(),
                    title: None,
                    state: State::TaskSelection,
                    session: None,
                    since: e.timestamp,
                });
            }
            k if k == Kind::TaskStarted.as_str() => {
                self.loop_iteration += 1;
                self.tasks.retain(|t| &t.bead != bead);
                self.tasks.push(Task {
                    bead: bead.clone(),
                    title: text("task"),
                    state: State::Coding,
                    session: text("session"),
                    since: e.timestamp,
                });
            }
            k if ENDS_TASK.iter().any(|end| end.as_str() == k) => {
                self.tasks.retain(|t| &t.bead != bead);
            }
            _ => {}
        }
    }

    /// A worker's step: `bead` is now at `state`.
    pub fn step(&mut self, bead: &str, state: State, now: DateTime<Utc>) {
        if let Some(t) = self.tasks.iter_mut().find(|t| t.bead == bead) {
            if t.state != state {
                t.state = state;
                t.since = now;
            }
        }
    }

    /// What a tick saw. Live workers are the truth about tasks: one without a live session is
    /// gone (however it ended), one with a session and no task yet is coding.
    pub fn observe(&mut self, o: &Observation, now: DateTime<Utc>) {
        self.phase.clone_from(&o.phase);
        self.phase_progress = o.progress;
        self.held = o.held;
        self.complete = o.complete;
        self.tasks
            .retain(|t| o.live.iter().any(|(b, _)| *b == t.bead));
        for (bead, label) in &o.live {
            if let Some(t) = self.tasks.iter_mut().find(|t| &t.bead == bead) {
                t.session.get_or_insert_with(|| label.clone());
            } else {
                self.tasks.push(Task {
                    bead: bead.clone(),
                    title: None,
                    state: State::Coding,
                    session: Some(label.clone()),
                    since: now,
                });
            }
        }
    }

    /// Derives the state and the seed's single-or-list fields from the tasks.
    pub fn settle(&mut self, now: DateTime<Utc>) {
        let state = if self.held {
            State::Paused
        } else if let Some(furthest) = self.tasks.iter().map(|t| t.state).max() {
            furthest
        } else if self.complete {
            State::Complete
        } else {
            State::Idle
        };
        if state != self.state {
            self.state = state;
            self.last_transition = now;
        }
        self.current_task = one_or_list(
            self.tasks
                .iter()
                .map(|t| t.title.clone().unwrap_or_else(|| t.bead.clone())),
        );
        self.coder_session = one_or_list(self.tasks.iter().filter_map(|t| t.session.clone()));
    }
}

/// The kinds after which a bead has no worker.
/// (`validation_failed` does not: the claw loop retries in the same run, and a bead worker
/// that ends on it is found gone by the next tick's observation.)
const ENDS_TASK: &[Kind] = &[
    Kind::TaskComplete,
    Kind::BeadBlocked,
    Kind::Question,
    Kind::NeedsHuman,
    Kind::Error,
    Kind::ZombieKilled,
    Kind::ClaimReleased,
    Kind::LoopPaused,
    Kind::LoopStuck,
];

fn one_or_list(items: impl Iterator<Item = String>) -> serde_json::Value {
    let mut v: Vec<serde_json::Value> = items.map(serde_json::Value::String).collect();
    match v.len() {
        0 => serde_json::Value::Null,
        1 => v.remove(0),
        _ => serde_json::Value::Array(v),
    }
}

/// The file as it is, or a new status when it is missing or unreadable (it is derived
/// data: the next update rebuilds what matters).
pub fn load(path: &Path, now: DateTime<Utc>) -> Status {
    crate::system::atomic::read(path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_else(|| Status::new(now))
}

/// Writes `status` unless the file already says exactly that.
pub fn store(path: &Path, status: &Status) -> anyhow::Result<()> {
    let mut bytes = serde_json::to_vec_pretty(status)?;
    bytes.push(b'\n');
    if crate::system::atomic::read(path).is_ok_and(|old| old == bytes) {
        return Ok(());
    }
    crate::system::atomic::write(path, &bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + s, 0).unwrap()
    }

    fn event(id: u64, kind: Kind, bead: &str, at: i64) -> Event {
        Event {
            id,
            kind: kind.as_str().into(),
            timestamp: t(at),
            project: "p".into(),
            bead: Some(bead.into()),
            fields: serde_json::json!({"task": format!("title of {bead}"), "session": format!("project:p:{bead}")})
                .as_object()
                .unwrap()
                .clone(),
        }
    }

    #[test]
    fn c8_4_a_task_walks_coding_validation_commit_then_idle() {
        let mut s = Status::new(t(0));
        s.apply(&event(1, Kind::TaskStarted, "p-1", 1));
        s.settle(t(1));
        assert_eq!(s.state, State::Coding);
        assert_eq!(s.current_task, "title of p-1");
        assert_eq!(s.coder_session, "project:p:p-1");
        assert_eq!(s.loop_iteration, 1);
        s.step("p-1", State::Validation, t(5));
        s.settle(t(5));
        assert_eq!((s.state, s.last_transition), (State::Validation, t(5)));
        s.step("p-1", State::Commit, t(6));
        s.settle(t(6));
        s.apply(&event(2, Kind::TaskComplete, "p-1", 7));
        s.settle(t(7));
        assert_eq!(s.state, State::Idle);
        assert_eq!(s.current_task, serde_json::Value::Null);
        assert_eq!(s.recent_events.len(), 2);
    }

    #[test]
    fn c8_4_a_claim_is_task_selection_until_the_worker_starts() {
        let mut s = Status::new(t(0));
        s.apply(&event(1, Kind::BeadClaimed, "p-1", 1));
        s.settle(t(1));
        assert_eq!(s.state, State::TaskSelection);
        s.apply(&event(2, Kind::TaskStarted, "p-1", 2));
        s.settle(t(2));
        assert_eq!((s.state, s.tasks.len()), (State::Coding, 1));
    }

    #[test]
    fn c8_4_several_workers_make_lists_and_the_furthest_step_is_the_state() {
        let mut s = Status::new(t(0));
        s.apply(&event(1, Kind::TaskStarted, "p-1", 1));
        s.apply(&event(2, Kind::TaskStarted, "p-2", 2));
        s.step("p-2", State::Commit, t(3));
        s.settle(t(3));
        assert_eq!(s.state, State::Commit);
        assert_eq!(
            s.current_task,
            serde_json::json!(["title of p-1", "title of p-2"])
        );
        assert_eq!(s.coder_session.as_array().unwrap().len(), 2);
    }

    #[test]
    fn c8_4_observation_is_the_truth_about_workers_and_holds() {
        let mut s = Status::new(t(0));
        s.apply(&event(1, Kind::TaskStarted, "p-1", 1));
        let o = Observation {
            phase: Some("Iteration 002".into()),
            progress: Progress {
                done: 3,
                remaining: 0,
            },
            held: false,
            complete: true,
            live: vec![("p-9".into(), "project:p:p-9".into())],
        };
        s.observe(&o, t(4));
        s.settle(t(4));
        assert_eq!(s.tasks.len(), 1);
        assert_eq!(s.tasks[0].bead, "p-9");
        assert_eq!(s.state, State::Coding);
        s.observe(
            &Observation {
                live: vec![],
                ..o.clone()
            },
            t(5),
        );
        s.settle(t(5));
        assert_eq!(s.state, State::Complete);
        s.observe(&Observation { held: true, ..o }, t(6));
        s.settle(t(6));
        assert_eq!((s.state, s.last_transition), (State::Paused, t(6)));
    }

    #[test]
    fn c8_4_every_ending_frees_the_task_and_recent_keeps_ten() {
        for (i, end) in ENDS_TASK.iter().enumerate() {
            let mut s = Status::new(t(0));
            s.apply(&event(1, Kind::TaskStarted, "p-1", 1));
            s.apply(&event(2, *end, "p-1", 2));
            s.settle(t(2));
            assert!(s.tasks.is_empty(), "{end} #{i}");
        }
        let mut s = Status::new(t(0));
        for id in 1..=25 {
            s.apply(&event(id, Kind::WorkerSpawned, "p-1", id as i64));
        }
        assert_eq!(s.recent_events.len(), RECENT);
        assert_eq!(s.recent_events[0].id, 16);
    }

    #[test]
    fn the_file_round_trips_and_garbage_is_a_new_status() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("status.json");
        std::fs::write(&path, "{not json").unwrap();
        assert_eq!(load(&path, t(0)), Status::new(t(0)));
        let mut s = Status::new(t(0));
        s.apply(&event(1, Kind::TaskStarted, "p-1", 1));
        s.settle(t(1));
        store(&path, &s).unwrap();
        assert_eq!(load(&path, t(9)), s);
    }
}
