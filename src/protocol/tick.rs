//! What the tick needs of a story (pure): whether it holds its claim for a person, when its
//! running step is past its timeout, and how many worker slots its next step takes (a team
//! step takes one per role, CONTRACTS 2.2 counts them).

use chrono::{DateTime, Duration, Utc};

use super::rules::Rules;
use super::step::{Status, Step};
use super::story_state::StoryState;
use super::team::Mode;

/// One story as the tick sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoryView {
    pub step: Step,
    pub status: Status,
    pub attempt: u32,
    /// A review, a question, or out of attempts: the claim is kept, no slot is used.
    pub waits_for_human: bool,
    /// When the running step is past its `timeout_min`.
    pub deadline: Option<DateTime<Utc>>,
    /// When the running step was dispatched.
    pub running_since: Option<DateTime<Utc>>,
    pub done: bool,
    /// Worker slots the story's session takes: its team's roles at a team step, else 1.
    pub weight: usize,
    /// The open dependencies its state records (`blocked_by`).
    pub blocked_by: Vec<String>,
}

/// The view of `state` under `rules`, for a story run in `mode`.
#[must_use]
pub fn view(state: &StoryState, rules: &Rules, mode: Mode) -> StoryView {
    let running = state.status == Status::Running;
    let roles = rules
        .get(state.step)
        .map_or(0, |r| super::team::at_once(r, mode).len());
    StoryView {
        step: state.step,
        status: state.status,
        attempt: state.attempt,
        waits_for_human: state.waits_for_human(),
        deadline: running
            .then_some(state.dispatched_at)
            .flatten()
            .map(|d| d + Duration::minutes(i64::from(state.timeout_min))),
        running_since: running.then_some(state.dispatched_at).flatten(),
        done: state.is_done(),
        weight: roles.max(1),
        blocked_by: state.blocked_by.clone(),
    }
}

/// One story as STATUS.md and `braids status` show it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct StoryLine {
    pub bead: String,
    pub step: String,
    pub status: String,
    pub attempt: u32,
    pub max_attempts: u32,
    /// What it waits for, with the command that moves it on; `None` while it can go on.
    pub waits: Option<String>,
}

/// The line of one story file: its state, or why it cannot be read.
#[must_use]
pub fn line(project: &str, bead: &str, loaded: &super::story_state::Loaded) -> Option<StoryLine> {
    use super::story_state::Loaded;
    let s = match loaded {
        Loaded::Missing => return None,
        Loaded::Invalid(e) => {
            return Some(StoryLine {
                bead: bead.to_string(),
                step: "?".into(),
                status: "invalid".into(),
                attempt: 0,
                max_attempts: 0,
                waits: Some(format!("a person to fix the file: {e}")),
            })
        }
        Loaded::Valid(s) => s,
    };
    let waits = if !s.blocked_by.is_empty() && !s.is_done() {
        Some(format!(
            "its dependencies {} to close (it resumes by itself)",
            s.blocked_by.join(", ")
        ))
    } else if s.is_blocked() {
        Some(format!(
            "a person: stuck after {} attempts{} (`braids story reset {project} {bead} --step {}`)",
            s.attempt,
            s.last_error.as_deref().map_or(String::new(), |e| format!(
                ", {}",
                crate::system::templates::clip(e, 200)
            )),
            s.step
        ))
    } else if s.status == Status::NeedsHuman && s.step != Step::Review {
        Some(format!(
            "a person's answer to: {} (`braids answer {project}:{bead} \"…\"`)",
            crate::system::templates::clip(s.last_error.as_deref().unwrap_or("a question"), 200)
        ))
    } else if s.status == Status::NeedsHuman {
        Some(format!(
            "a person's review (`braids review approve {project} {bead}` or `braids review reject {project} {bead} --reason …`)"
        ))
    } else {
        None
    };
    Some(StoryLine {
        bead: bead.to_string(),
        step: s.step.to_string(),
        status: s.status.to_string(),
        attempt: s.attempt,
        max_attempts: s.max_attempts,
        waits,
    })
}

/// The state after the tick stopped a step's session for its timeout: `timeout`, counted as a
/// failed attempt at the next dispatch. `None` when the step is no longer running.
#[must_use]
pub fn timed_out(state: &StoryState, now: DateTime<Utc>) -> Option<StoryState> {
    (state.status == Status::Running).then(|| {
        let mut s = state.clone();
        s.status = Status::Timeout;
        s.completed_at = Some(now);
        s.last_error = Some(format!(
            "{} ran past its timeout of {} min; the tick stopped its session",
            s.step, s.timeout_min
        ));
        s
    })
}

/// The state of a step marked running whose worker is gone: `failing`, with why.
#[must_use]
pub fn orphaned(state: &StoryState, now: DateTime<Utc>) -> Option<StoryState> {
    (state.status == Status::Running).then(|| {
        let mut s = state.clone();
        s.status = Status::Failing;
        s.completed_at = Some(now);
        s.last_error = Some(format!(
            "the worker running {} ended without a result (crashed, killed, or the machine restarted)",
            s.step
        ));
        s
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::BeadId;

    #[test]
    fn views_table() {
        let rules = Rules::defaults();
        let bead = BeadId::new("p-1").unwrap();
        let t0 = DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let at = |step, status| {
            let mut s = StoryState::new("p", &bead, step);
            s.status = status;
            s.timeout_min = 10;
            s.max_attempts = 5;
            s.dispatched_at = Some(t0);
            s
        };
        // (state, mode) → (waits, deadline, weight)
        let cases = [
            (
                at(Step::Review, Status::NeedsHuman),
                Mode::Single,
                (true, None, 1),
            ),
            (
                at(Step::Impl, Status::Running),
                Mode::Single,
                (false, Some(t0 + Duration::minutes(10)), 1),
            ),
            (
                at(Step::Impl, Status::Running),
                Mode::Team,
                (false, Some(t0 + Duration::minutes(10)), 3),
            ),
            (
                at(Step::Impl, Status::Pending),
                Mode::Team,
                (false, None, 3),
            ),
            (at(Step::Bdd, Status::Pending), Mode::Team, (false, None, 1)),
            (
                at(Step::Impl, Status::Failing),
                Mode::Single,
                (false, None, 1),
            ),
        ];
        for (s, mode, (waits, deadline, weight)) in cases {
            let v = view(&s, &rules, mode);
            assert_eq!(
                (v.waits_for_human, v.deadline, v.weight),
                (waits, deadline, weight),
                "{} {}",
                s.step,
                s.status
            );
        }
        let mut stuck = at(Step::Impl, Status::Failing);
        stuck.attempt = 5;
        stuck.max_attempts = 5;
        assert!(
            view(&stuck, &rules, Mode::Single).waits_for_human,
            "out of attempts"
        );
        assert!(view(&at(Step::Done, Status::Pass), &rules, Mode::Single).done);
    }

    #[test]
    fn the_tick_records_timeouts_and_lost_workers_only_on_running_steps() {
        let bead = BeadId::new("p-1").unwrap();
        let now = Utc::now();
        let mut s = StoryState::new("p", &bead, Step::Impl);
        assert_eq!(timed_out(&s, now), None);
        assert_eq!(orphaned(&s, now), None);
        s.status = Status::Running;
        let t = timed_out(&s, now).unwrap();
        assert_eq!((t.status, t.completed_at), (Status::Timeout, Some(now)));
        assert!(t.last_error.unwrap().contains("timeout"));
        let o = orphaned(&s, now).unwrap();
        assert_eq!(o.status, Status::Failing);
        assert!(o.last_error.unwrap().contains("ended without a result"));
    }
}
