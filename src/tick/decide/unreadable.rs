//! Session records the backend found but could not read: whether their worker runs is unknown,
//! so one that names its label counts as running. It holds its slot, its bead is not handed
//! out again, and it is never killed (there is nothing verified to signal).

use super::owners::Owners;
use super::{Snapshot, Workers};
use crate::model::SessionLabel;

/// The labels the unreadable records name (`None` for one that names none).
#[must_use]
pub fn labels(snap: &Snapshot) -> Vec<Option<SessionLabel>> {
    snap.unreadable
        .iter()
        .map(|p| p.label.as_deref().and_then(|l| SessionLabel::parse(l).ok()))
        .collect()
}

/// Counts each unreadable record as its label's worker, once per bead: a slot of its
/// project, or a bead held everywhere when its slug is no registered project's. Pure.
#[must_use]
pub fn hold_unreadable<'a>(
    labels: &'a [Option<SessionLabel>],
    owners: &Owners<'a>,
    mut w: Workers<'a>,
) -> Workers<'a> {
    for l in labels.iter().flatten() {
        if !owners.is_registered(l.slug()) {
            w.orphan_live.insert(l.bead());
        }
        if let Some(p) = owners.of_label(l) {
            if w.live.insert((p.slug.as_str(), l.bead())) {
                *w.healthy.entry(p.slug.clone()).or_default() += 1;
            }
        }
    }
    w
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::*;
    use crate::session::SessionProblem;

    #[test]
    fn hold_unreadable_table() {
        // (labels the unreadable records name, a running session on a-1) →
        // (slots held by a, beads held everywhere)
        type Row<'a> = (&'a [Option<&'a str>], bool, usize, &'a [&'a str]);
        let rows: [Row; 6] = [
            (&[Some("project:a:a-2")], false, 1, &[]),
            (
                &[Some("project:a:a-2"), Some("project:a:a-2")],
                false,
                1,
                &[],
            ), // once per bead
            (&[Some("project:a:a-1")], true, 1, &[]), // its worker is already counted
            (&[Some("project:zz:z-1")], false, 0, &["z-1"]), // no registered project's
            (&[None], false, 0, &[]),
            (&[Some("not a label")], false, 0, &[]),
        ];
        for (names, running, healthy, orphans) in rows {
            let sessions = match running {
                true => vec![session("a", "a-1", true, 60)],
                false => vec![],
            };
            let mut s = snap(vec![project("a")], sessions);
            s.unreadable = names
                .iter()
                .map(|l| SessionProblem {
                    label: l.map(str::to_string),
                    location: "sessions/x".into(),
                    detail: "corrupt record".into(),
                })
                .collect();
            let owners = Owners::of(&s);
            let found = super::super::zombies::find_zombies(&s, &owners, now());
            let labels = labels(&s);
            let w = hold_unreadable(&labels, &owners, found);
            assert_eq!(w.healthy["a"], healthy, "{names:?}");
            let held: Vec<&str> = w.orphan_live.iter().map(|b| b.as_str()).collect();
            assert_eq!(held, orphans, "{names:?}");
        }
    }
}
