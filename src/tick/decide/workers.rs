//! Who is working this run, as the rules pass it on: the sessions sorted by 2.6, the slots
//! they hold per project, and the beads no new worker may take.

use std::collections::{BTreeMap, BTreeSet};

use super::Zombie;
use crate::model::BeadId;
use crate::session::Session;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Workers<'a> {
    pub zombies: Vec<Zombie>,
    /// Sessions no longer running: forgotten.
    pub ended: Vec<Session>,
    /// Sessions of no registered project: reported, left alone, counted against the global cap.
    pub unmanaged: Vec<Session>,
    /// Worker slots held per registered project (every project present, 0 when idle).
    pub healthy: BTreeMap<String, usize>,
    /// Beads with a running session of a registered project, healthy or about to be killed:
    /// never spawned again this run.
    pub live: BTreeSet<(&'a str, &'a BeadId)>,
    /// Beads a worker may hold under a label of no registered project (a slug renamed, or a
    /// row lost, while its workers run): never spawned again, never released as stranded.
    pub orphan_live: BTreeSet<&'a BeadId>,
}

impl<'a> Workers<'a> {
    /// Counts one more worker of `slug` on `bead`: held in its slot and not spawned again.
    pub fn hold(&mut self, slug: &'a str, bead: &'a BeadId) {
        *self.healthy.entry(slug.to_string()).or_default() += 1;
        self.live.insert((slug, bead));
    }

    /// Every bead some live session may carry, under any label.
    #[must_use]
    pub fn held_anywhere(&self) -> BTreeSet<&'a BeadId> {
        self.live
            .iter()
            .map(|(_, b)| *b)
            .chain(self.orphan_live.iter().copied())
            .collect()
    }

    /// Every live braids session, orphans included: what the global cap counts.
    #[must_use]
    pub fn total(&self) -> usize {
        self.healthy.values().sum::<usize>() + self.unmanaged.len()
    }
}
