//! Which ready beads a project may start this run, in the order it offers them (4.3, 6.1): in
//! the iteration's scope, open, with no live worker under any label, not released this run,
//! not waiting for a story's dependencies or the single state file, and past any retry
//! backoff (2.13).

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};

use super::{stories, ProjectView, Release, Snapshot, Workers};
use crate::model::{Bead, BeadId, BeadStatus};

/// Iteration scope: when the active iteration lists Stories, only those beads are worked;
/// with no Stories, every ready bead is in scope (4.3), unless the iteration names its scope
/// otherwise (`named`: a milestone, whose issues are its Stories, however few).
#[must_use]
pub fn in_scope(stories: &[BeadId], named: bool, bead: &BeadId) -> bool {
    (stories.is_empty() && !named) || stories.contains(bead)
}

/// Ready beads in the order a project offers them: the active iteration's Stories first, in
/// their order (a bead's first place counts), then the rest in the tracker's order.
#[must_use]
pub fn spawn_order<'a>(
    stories: &[BeadId],
    ready: impl IntoIterator<Item = &'a Bead>,
) -> Vec<&'a Bead> {
    let mut ready: Vec<(usize, usize, &Bead)> = ready
        .into_iter()
        .enumerate()
        .map(|(i, b)| (usize::MAX, i, b))
        .collect();
    // Each story's first place: looked up in the list itself when both are short (a plan's
    // few candidates), else in a table sorted by id. Called per project twice a run.
    let mut story_at: Vec<(&BeadId, usize)> = Vec::new();
    let linear = ready.len() * stories.len() <= 256;
    if !linear {
        story_at = stories.iter().zip(0..).collect();
        story_at.sort();
        story_at.dedup_by(|later, first| later.0 == first.0);
    }
    for (place, _, b) in &mut ready {
        let found = match linear {
            true => stories.iter().position(|s| *s == b.id),
            false => story_at
                .binary_search_by(|(s, _)| (*s).cmp(&b.id))
                .ok()
                .map(|at| story_at[at].1),
        };
        *place = found.unwrap_or(usize::MAX);
    }
    ready.sort_by_key(|(story, i, _)| (*story, *i));
    ready.into_iter().map(|(_, _, b)| b).collect()
}

/// When `bead` may run again, while it waits out a retry backoff; `None` when it may now.
#[must_use]
pub fn backoff_ends(
    waiting: Option<&BTreeMap<BeadId, DateTime<Utc>>>,
    bead: &BeadId,
    now: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    waiting
        .and_then(|w| w.get(bead))
        .copied()
        .filter(|t| *t > now)
}

/// The beads project `p` may start, in its order, and the earliest end of a backoff one of its
/// ready beads waits out (the run wakes for it). Pure.
#[must_use]
pub fn startable<'p>(
    snap: &Snapshot,
    p: &'p ProjectView,
    w: &Workers<'_>,
    releases: &[Release],
    now: DateTime<Utc>,
) -> (Vec<&'p Bead>, Option<DateTime<Utc>>) {
    let released: BTreeSet<&BeadId> = releases
        .iter()
        .filter(|r| r.slug == p.slug)
        .map(|r| &r.bead)
        .collect();
    let waiting = snap.waiting.get(&p.path);
    let mut wake: Option<DateTime<Utc>> = None;
    let mut past_backoff = |b: &BeadId| match backoff_ends(waiting, b, now) {
        Some(t) => {
            wake = Some(wake.map_or(t, |w| w.min(t)));
            false
        }
        None => true,
    };
    let ready = spawn_order(
        &p.stories,
        p.ready.iter().filter(|b| {
            b.status == BeadStatus::Open
                && in_scope(&p.stories, p.scope_named, &b.id)
                && !w.live.contains(&(p.slug.as_str(), &b.id))
                && !w.orphan_live.contains(&b.id)
                && !released.contains(&b.id)
                && !stories::waits_for_dependencies(p, &b.id)
                && !stories::waits_for_the_state_file(p, &b.id)
                && past_backoff(&b.id)
        }),
    );
    (ready, wake)
}

#[cfg(test)]
mod tests {
    use chrono::Duration;

    use super::super::test_support::*;
    use super::super::{owners::Owners, zombies::find_zombies};
    use super::*;

    #[test]
    fn c6_1_spawn_order_is_the_stories_first_place_then_the_trackers_short_or_long() {
        // The reference: each bead at its story's first place, the rest after, in tracker order.
        fn reference<'a>(stories: &[BeadId], ready: &'a [Bead]) -> Vec<&'a Bead> {
            let mut v: Vec<(usize, usize, &Bead)> = ready
                .iter()
                .enumerate()
                .map(|(i, b)| {
                    let at = stories.iter().position(|s| *s == b.id);
                    (at.unwrap_or(usize::MAX), i, b)
                })
                .collect();
            v.sort_by_key(|(s, i, _)| (*s, *i));
            v.into_iter().map(|(_, _, b)| b).collect()
        }
        for (n_stories, n_ready) in [(3, 4), (20, 6), (30, 20), (40, 40)] {
            // stories in a scrambled order with repeats, ready beads partly outside them
            let stories: Vec<BeadId> = (0..n_stories)
                .map(|i| id(&format!("a-{}", (i * 7) % (n_stories - 1))))
                .collect();
            let ready: Vec<Bead> = (0..n_ready)
                .map(|i| {
                    Bead::new(
                        id(&format!("a-{}", (i * 5 + 3) % (n_stories + 5))),
                        "t",
                        BeadStatus::Open,
                    )
                })
                .collect();
            let got: Vec<&BeadId> = spawn_order(&stories, &ready)
                .iter()
                .map(|b| &b.id)
                .collect();
            let want: Vec<&BeadId> = reference(&stories, &ready).iter().map(|b| &b.id).collect();
            assert_eq!(got, want, "{n_stories} stories, {n_ready} ready");
        }
    }

    #[test]
    fn in_scope_and_backoff_table() {
        // (Stories, named by a milestone, bead) → in scope
        let rows: [(&[&str], bool, &str, bool); 5] = [
            (&[], false, "a-1", true), // no Stories: every ready bead
            (&["a-1", "a-2"], false, "a-2", true),
            (&["a-1"], false, "a-2", false),
            (&[], true, "a-1", false), // a milestone with no issue: nothing
            (&["a-1"], true, "a-1", true),
        ];
        for (stories, named, bead, want) in rows {
            assert_eq!(
                in_scope(&ids(stories), named, &id(bead)),
                want,
                "{stories:?} {named} {bead}"
            );
        }
        let later = now() + Duration::seconds(30);
        let waiting = BTreeMap::from([(id("a-1"), later), (id("a-2"), now())]);
        // (bead) → when it may run again
        for (bead, want) in [("a-1", Some(later)), ("a-2", None), ("a-3", None)] {
            assert_eq!(
                backoff_ends(Some(&waiting), &id(bead), now()),
                want,
                "{bead}"
            );
        }
        assert_eq!(backoff_ends(None, &id("a-1"), now()), None);
    }

    #[test]
    fn startable_table() {
        use crate::protocol::deps::Waits;
        use crate::protocol::Step;
        let later = now() + Duration::seconds(30);
        // (what holds a-1 back) → startable, and the wake for a backoff
        let rows = [
            ("nothing", true, None),
            ("out of scope", false, None),
            ("not open", false, None),
            ("a live session", false, None),
            ("a session under another slug", false, None),
            ("released this run", false, None),
            ("its dependencies", false, None),
            ("a retry backoff", false, Some(later)),
        ];
        for (why, want, wake) in rows {
            let mut p = project("a").ready(open(&["a-1"]));
            let mut sessions = vec![];
            let mut releases = vec![];
            let mut waiting = BTreeMap::new();
            match why {
                "out of scope" => p = p.stories(ids(&["a-2"])),
                "not open" => {
                    p = p.ready([Bead::new(id("a-1"), "t", BeadStatus::InProgress)]);
                }
                "a live session" => sessions.push(session("a", "a-1", true, 60)),
                "a session under another slug" => sessions.push(session("zz", "a-1", true, 60)),
                "released this run" => releases.push(release("a", &claim("a", "a-1", 5))),
                "its dependencies" => {
                    let w = Waits {
                        open: vec!["a-0".into()],
                        first: Step::Impl,
                    };
                    p = p.dependencies([(id("a-1"), w)]);
                }
                "a retry backoff" => {
                    waiting.insert(
                        std::path::PathBuf::from("/p/a"),
                        BTreeMap::from([(id("a-1"), later)]),
                    );
                }
                _ => {}
            }
            let mut s = snap(vec![p], sessions);
            s.waiting = waiting;
            let w = find_zombies(&s, &Owners::of(&s), now());
            let (ready, got_wake) = startable(&s, &s.projects[0], &w, &releases, now());
            assert_eq!(!ready.is_empty(), want, "{why}");
            assert_eq!(got_wake, wake, "{why}");
        }
    }
}
