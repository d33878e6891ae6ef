//! A story waits for its bead's open dependencies (seed 002's `blocked_by`). Pure: which
//! dependencies are still open, the state that records them, and a dependency cycle among a
//! project's beads (no story of it could ever start). The tracker is asked at the edges
//! (the worker, the tick's observation, `braids check`).

use std::collections::{BTreeMap, BTreeSet};

use super::story_state::StoryState;
use crate::model::{BeadId, BeadStatus};

/// What the tracker says of one story's dependencies this run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waits {
    /// Its open dependencies; empty when there is none (its bead is ready).
    pub open: Vec<String>,
    /// Where the story starts, for one that has no state yet.
    pub first: super::Step,
}

/// The dependencies that are not closed, in their order; one the tracker does not know
/// (`None`) counts as open, as the worker's own check counts it.
#[must_use]
pub fn open_of(deps: &[BeadId], status: impl Fn(&BeadId) -> Option<BeadStatus>) -> Vec<String> {
    deps.iter()
        .filter(|d| status(d) != Some(BeadStatus::Closed))
        .map(|d| d.to_string())
        .collect()
}

/// The story state recording `open` as its `blocked_by`: `None` when nothing changes. A story
/// not started yet gets a state (`fresh`) only when it has something to wait for.
#[must_use]
pub fn with_blocked_by(
    cur: Option<&StoryState>,
    fresh: impl FnOnce() -> StoryState,
    open: &[String],
) -> Option<StoryState> {
    match cur {
        Some(s) if s.blocked_by == open => None,
        Some(s) => Some(StoryState {
            blocked_by: open.to_vec(),
            ..s.clone()
        }),
        None if open.is_empty() => None,
        None => Some(StoryState {
            blocked_by: open.to_vec(),
            ..fresh()
        }),
    }
}

/// A dependency cycle among `graph`'s beads (bead → what it depends on), as the beads in the
/// cycle's order starting from its smallest id; `None` when there is none.
#[must_use]
pub fn cycle(graph: &BTreeMap<BeadId, Vec<BeadId>>) -> Option<Vec<BeadId>> {
    let mut done: BTreeSet<&BeadId> = BTreeSet::new();
    for start in graph.keys() {
        let mut path: Vec<&BeadId> = Vec::new();
        if let Some(c) = visit(graph, start, &mut path, &mut done) {
            let at = c
                .iter()
                .enumerate()
                .min_by_key(|(_, b)| **b)
                .map_or(0, |(i, _)| i);
            let mut c: Vec<BeadId> = c.into_iter().cloned().collect();
            c.rotate_left(at);
            return Some(c);
        }
    }
    None
}

fn visit<'g>(
    graph: &'g BTreeMap<BeadId, Vec<BeadId>>,
    at: &'g BeadId,
    path: &mut Vec<&'g BeadId>,
    done: &mut BTreeSet<&'g BeadId>,
) -> Option<Vec<&'g BeadId>> {
    if let Some(i) = path.iter().position(|b| *b == at) {
        return Some(path[i..].to_vec());
    }
    if done.contains(at) {
        return None;
    }
    path.push(at);
    for next in graph.get(at).into_iter().flatten() {
        if let Some(c) = visit(graph, next, path, done) {
            return Some(c);
        }
    }
    path.pop();
    done.insert(at);
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Step;

    fn id(s: &str) -> BeadId {
        BeadId::new(s).unwrap()
    }

    #[test]
    fn c10_10_open_dependencies_table() {
        let st = |s: &BeadId| match s.as_str() {
            "p-a" => Some(BeadStatus::Closed),
            "p-b" => Some(BeadStatus::Open),
            "p-c" => Some(BeadStatus::InProgress),
            "p-d" => Some(BeadStatus::Blocked),
            _ => None,
        };
        let cases: [(&[&str], &[&str]); 5] = [
            (&[], &[]),
            (&["p-a"], &[]),
            (&["p-a", "p-b"], &["p-b"]),
            (&["p-c", "p-d"], &["p-c", "p-d"]),
            (&["p-gone", "p-a"], &["p-gone"]),
        ];
        for (deps, open) in cases {
            let deps: Vec<BeadId> = deps.iter().map(|d| id(d)).collect();
            assert_eq!(open_of(&deps, st), open.to_vec(), "{deps:?}");
        }
    }

    #[test]
    fn c10_10_blocked_by_is_set_and_cleared_table() {
        let b = id("p-b");
        let fresh = || StoryState::new("p", &b, Step::Bdd);
        let mut held = fresh();
        held.step = Step::Impl;
        held.blocked_by = vec!["p-a".into()];
        let a = vec!["p-a".to_string()];
        // (current, open) → the blocked_by written, or nothing written
        type Case<'a> = (Option<&'a StoryState>, &'a [String], Option<Vec<String>>);
        let cases: [Case; 5] = [
            (None, &[], None),
            (None, &a, Some(a.clone())),
            (Some(&held), &a, None),
            (Some(&held), &[], Some(vec![])),
            (
                Some(&held),
                &["p-a".into(), "p-c".into()],
                Some(vec!["p-a".into(), "p-c".into()]),
            ),
        ];
        for (cur, open, want) in cases {
            let got = with_blocked_by(cur, fresh, open);
            assert_eq!(
                got.as_ref().map(|s| s.blocked_by.clone()),
                want,
                "{cur:?} {open:?}"
            );
            if let (Some(c), Some(g)) = (cur, &got) {
                assert_eq!(
                    (g.step, g.attempt),
                    (c.step, c.attempt),
                    "only blocked_by changes"
                );
            }
        }
        assert_eq!(with_blocked_by(None, fresh, &a).unwrap().step, Step::Bdd);
    }

    #[test]
    fn c10_10_cycles_table() {
        let g = |edges: &[(&str, &[&str])]| -> BTreeMap<BeadId, Vec<BeadId>> {
            edges
                .iter()
                .map(|(k, v)| (id(k), v.iter().map(|d| id(d)).collect()))
                .collect()
        };
        let ids =
            |c: Option<Vec<BeadId>>| c.map(|c| c.iter().map(|b| b.to_string()).collect::<Vec<_>>());
        assert_eq!(ids(cycle(&g(&[]))), None);
        assert_eq!(ids(cycle(&g(&[("p-b", &["p-a"]), ("p-a", &[])]))), None);
        assert_eq!(
            ids(cycle(&g(&[("p-c", &["p-b", "p-a"]), ("p-b", &["p-a"])]))),
            None,
            "a diamond is no cycle"
        );
        assert_eq!(
            ids(cycle(&g(&[("p-b", &["p-a"]), ("p-a", &["p-b"])]))),
            Some(vec!["p-a".into(), "p-b".into()])
        );
        assert_eq!(
            ids(cycle(&g(&[
                ("p-x", &["p-c"]),
                ("p-c", &["p-d"]),
                ("p-d", &["p-e"]),
                ("p-e", &["p-c"])
            ]))),
            Some(vec!["p-c".into(), "p-d".into(), "p-e".into()]),
            "only the beads in the cycle"
        );
        assert_eq!(
            ids(cycle(&g(&[("p-a", &["p-a"])]))),
            Some(vec!["p-a".into()])
        );
    }
}
