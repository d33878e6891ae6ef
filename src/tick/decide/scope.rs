//! Which ready beads a project may start this run, in the order it offers them (4.3, 6.1): in
//! the iteration's scope, open, with no live worker under any label, not released this run,
//! not waiting for a story's dependencies or the single state file, and past any retry
//! backoff (2.13).

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};

use super::{stories, ProjectView, Release, Snapshot, Workers};
use crate::model::{Bead, BeadId, BeadStatus};

/// Iteration scope: when the active iteration lists Stories, only those beads are worked;
/// with no Stories, every ready bead is in scope (4.3).
#[must_use]
pub fn in_scope(stories: &[BeadId], bead: &BeadId) -> bool {
    stories.is_empty() || stories.contains(bead)
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
                && in_scope(&p.stories, &b.id)
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
