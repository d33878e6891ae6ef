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
