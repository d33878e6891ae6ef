//! The value a tick's decision returns, and the one walk over its spawn slots. `act` (for
//! real), the dry run (as intent) and the simulation's model of act all walk slots through
//! [`Plan::walk`], so the per-project MaxWorkers and the global cap are enforced in one place.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::model::{BeadId, IterationName, SessionLabel, SpawnMessage};
use crate::session::Session;
use crate::tick::orchestrator_state::{Claim, IdleReason};

use super::Zombie;

/// A bead that may be claimed and given a worker. What it shares with the project's other
/// candidates is held once ([`SpawnProject`], read through `Deref`: `c.slug`, `c.path`); its
/// label and spawn message are made when needed. A plan over 10,000 projects holds 60,000
/// candidates, and a copy of each project's strings in every one was a third of the run's
/// memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpawnCandidate {
    pub bead: BeadId,
    pub title: String,
    /// Worker slots its session takes: a protocol team step's roles, else 1.
    pub weight: usize,
    pub project: Arc<SpawnProject>,
    /// A bead in review whose pull request needs a worker: it is braids' already, so it is
    /// spawned without a claim.
    pub review: bool,
}

/// What every candidate of one project shares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpawnProject {
    pub slug: String,
    pub iteration: IterationName,
    pub path: PathBuf,
    pub channel: Option<String>,
    pub worker_timeout: u64,
    /// Where its workers run and what they ask for.
    pub placement: crate::session::Placement,
}

impl SpawnProject {
    /// The project's shared part, once its slug makes a label and its directory and channel a
    /// spawn message (checked with `bead`, any of its beads: neither depends on which).
    pub fn checked(self, bead: &BeadId) -> Result<SpawnProject, String> {
        SessionLabel::new(&self.slug, bead.clone()).map_err(|e| format!("{}: {e}", self.slug))?;
        self.message(bead.clone())
            .map_err(|e| format!("{}: cannot spawn {bead}: {e}", self.slug))?;
        Ok(self)
    }

    fn message(&self, bead: BeadId) -> Result<SpawnMessage, crate::model::SpawnMessageError> {
        SpawnMessage::new(
            self.path.clone(),
            bead,
            self.iteration,
            self.channel.clone().unwrap_or_default(),
        )
    }
}

impl std::ops::Deref for SpawnCandidate {
    type Target = SpawnProject;
    fn deref(&self) -> &SpawnProject {
        &self.project
    }
}

impl SpawnCandidate {
    /// The session label, `project:<slug>:<bead>` (2.5).
    pub fn label(&self) -> SessionLabel {
        SessionLabel::new(&self.slug, self.bead.clone())
            .expect("the slug was checked when the candidate was made")
    }

    /// The four-line spawn message (2.4).
    pub fn message(&self) -> SpawnMessage {
        self.project
            .message(self.bead.clone())
            .expect("the path and channel were checked when the candidate was made")
    }
}

/// Candidates kept beyond a project's free slots, to stand in for claims refused because
/// another worker or a person took the bead between `ready` and the claim. More refusals than
/// this in one run leave the slot for the next run.
pub const STAND_INS: usize = 4;

/// A project's share of this run: up to `slots` workers, from `candidates` in order (later
/// candidates stand in when a claim is refused; at most `slots + STAND_INS` of them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectSpawns {
    pub slug: String,
    pub slots: usize,
    pub candidates: Vec<SpawnCandidate>,
}

/// A project whose workspaces are swept this run: every worktree of a bead not in `live` is
/// removed (its worker is gone), and git's worktree records are pruned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sweep {
    pub slug: String,
    pub path: PathBuf,
    pub live: Vec<BeadId>,
    /// The project works in its own tree (`Workspace: shared`): only its pool is removed.
    pub shared: bool,
}

/// A claim to hand back (the worker is gone and the bead is still in_progress), or to forget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Release {
    /// The owning project's slug this run, which finds its tracker; the claim may have been
    /// made under an earlier one.
    pub slug: String,
    pub bead: BeadId,
    /// The claim as the state remembers it, so exactly this one is forgotten.
    pub claim: Claim,
}

/// A claim an older braids recorded without the project's directory, matched by slug this run:
/// from now on it is remembered with `path` and survives a rename of the slug.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upgrade {
    pub claim: Claim,
    pub path: PathBuf,
}

/// What to do this run. Acting on it is the caller's job.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub struct Plan {
    pub zombies: Vec<Zombie>,
    /// Protocol steps marked running with no worker left: each becomes a failed attempt.
    pub orphaned_steps: Vec<OrphanedStep>,
    /// Protocol stories whose `blocked_by` is to be set or cleared.
    pub dependency_updates: Vec<DependencyUpdate>,
    /// Sessions that are no longer running (2.6 rule 1), to forget.
    pub ended: Vec<Session>,
    /// Sessions labelled for a slug that is not in the registry (and not the label a claim of a
    /// registered project was made under, 2.10): reported, left alone.
    pub unmanaged: Vec<Session>,
    /// Healthy workers per project after zombies are excluded.
    pub healthy: BTreeMap<String, usize>,
    /// In scheduling order.
    pub spawns: Vec<ProjectSpawns>,
    /// `None` when there is no global cap.
    pub global_slots: Option<usize>,
    pub releases: Vec<Release>,
    /// Claims to stop remembering: their bead left in_progress or no longer exists.
    pub settled_claims: Vec<Release>,
    /// Old claims given their project's directory.
    pub upgrades: Vec<Upgrade>,
    /// Projects whose leftover workspaces are removed.
    pub sweeps: Vec<Sweep>,
    /// The idle reason to record if nothing ends up spawned.
    pub idle_reason: IdleReason,
    /// Problems worth a line on STATUS.md, such as a path a spawn message cannot carry.
    pub errors: Vec<String>,
    /// Set when the kill-storm guard held this run's kills.
    pub kill_storm: Option<KillStorm>,
    /// Stranded claims the release-storm guard held this run (released next run if still
    /// stranded then).
    pub held: Vec<Release>,
    /// The next full run is due by then at the latest: a bead's retry backoff or the provider
    /// breaker's next probe ends.
    pub wake_at: Option<chrono::DateTime<chrono::Utc>>,
    /// The provider breaker let one probe spawn through this run.
    pub probe: bool,
    /// Which stops and releases are failed attempts to record.
    pub retries: super::Retries,
}

/// A protocol story whose running step lost its worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrphanedStep {
    pub slug: String,
    pub path: PathBuf,
    pub bead: BeadId,
    pub step: crate::protocol::Step,
}

/// A protocol story's open dependencies, to record as its `blocked_by` (empty: cleared).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DependencyUpdate {
    pub slug: String,
    pub path: PathBuf,
    pub bead: BeadId,
    pub open: Vec<String>,
    /// Where a story with no state yet starts.
    pub first: crate::protocol::Step,
}

/// Kills the kill-storm guard held ([`super::is_mass_loss`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KillStorm {
    pub would_kill: usize,
    pub running: usize,
    /// The registered projects whose sessions were spared, for the notification.
    pub projects: std::collections::BTreeSet<String>,
}

impl KillStorm {
    /// The one sentence the log, STATUS.md and the notification carry.
    pub fn message(&self) -> String {
        format!(
            "kill-storm guard: this run would have killed {} of {} running sessions, so it killed none; \
             if they really are zombies, run `braids tick --allow-mass-kill` once",
            self.would_kill, self.running
        )
    }
}

/// What became of one candidate offered by [`Plan::walk`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slot {
    /// A worker was started: the candidate used one project slot and one global slot.
    Taken,
    /// Not started, no slot used: the next candidate stands in (a refused claim).
    Passed,
    /// Not started, and the rest of this project is skipped this run (tracker or spawn error).
    NextProject,
    /// Stop walking altogether (a claim that cannot be recorded first).
    Stop,
}

impl Plan {
    /// A plan that does nothing, for tests to fill in the fields they are about.
    #[cfg(test)]
    pub(in crate::tick) fn nothing() -> Plan {
        Plan {
            orphaned_steps: vec![],
            dependency_updates: vec![],
            zombies: vec![],
            ended: vec![],
            unmanaged: vec![],
            healthy: BTreeMap::new(),
            spawns: vec![],
            global_slots: None,
            sweeps: vec![],
            releases: vec![],
            settled_claims: vec![],
            upgrades: vec![],
            idle_reason: IdleReason::NoReadyBeads,
            errors: vec![],
            kill_storm: None,
            held: vec![],
            wake_at: None,
            retries: Default::default(),
            probe: false,
        }
    }

    /// Offers candidates in scheduling order to `f`, within each project's slots and the
    /// global cap: the one place those limits are applied when acting.
    pub fn walk<'a>(&'a self, mut f: impl FnMut(&'a SpawnCandidate) -> Slot) {
        let mut global = self.global_slots;
        for p in &self.spawns {
            let mut slots = p.slots;
            for c in &p.candidates {
                if slots == 0 {
                    break;
                }
                if global == Some(0) {
                    return;
                }
                // A team step waits, in its place, until its slots are free together: the
                // project's later candidates do not overtake it.
                if c.weight > slots || global.is_some_and(|g| c.weight > g) {
                    break;
                }
                match f(c) {
                    Slot::Taken => {
                        slots -= c.weight;
                        global = global.map(|g| g - c.weight);
                    }
                    Slot::Passed => {}
                    Slot::NextProject => break,
                    Slot::Stop => return,
                }
            }
        }
    }

    /// The spawns this plan makes if every claim succeeds, in order.
    pub fn intended(&self) -> Vec<&SpawnCandidate> {
        let mut out = Vec::new();
        self.walk(|c| {
            out.push(c);
            Slot::Taken
        });
        out
    }

    /// The claims this run ends: released ones, and those whose bead left in_progress. The
    /// state forgets them ([`crate::tick::orchestrator_state::OrchestratorState::settle_claims`]).
    pub fn settled(&self) -> impl Iterator<Item = &Claim> {
        self.settled_claims
            .iter()
            .chain(self.releases.iter())
            .map(|r| &r.claim)
    }

    /// The old claims this run gave a directory, for
    /// [`crate::tick::orchestrator_state::OrchestratorState::settle_claims`].
    pub fn upgraded(&self) -> impl Iterator<Item = (&Claim, &Path)> {
        self.upgrades.iter().map(|u| (&u.claim, u.path.as_path()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn candidate(slug: &str, bead: &str) -> SpawnCandidate {
        let bead = BeadId::new(bead).unwrap();
        let project = SpawnProject {
            slug: slug.into(),
            iteration: 1.into(),
            path: PathBuf::from("/p").join(slug),
            channel: None,
            worker_timeout: 3600,
            placement: Default::default(),
        };
        SpawnCandidate {
            title: bead.to_string(),
            weight: 1,
            project: Arc::new(project.checked(&bead).unwrap()),
            bead,
            review: false,
        }
    }

    fn plan(spawns: &[(&str, usize, &[&str])], global: Option<usize>) -> Plan {
        Plan {
            spawns: spawns
                .iter()
                .map(|(slug, slots, beads)| ProjectSpawns {
                    slug: (*slug).into(),
                    slots: *slots,
                    candidates: beads.iter().map(|b| candidate(slug, b)).collect(),
                })
                .collect(),
            global_slots: global,
            ..Plan::nothing()
        }
    }

    /// Walks `plan`, answering each offer from `answer` (by bead id), and returns the offers.
    fn offers(plan: &Plan, answer: impl Fn(&str) -> Slot) -> Vec<String> {
        let mut seen = Vec::new();
        plan.walk(|c| {
            seen.push(c.bead.to_string());
            answer(c.bead.as_str())
        });
        seen
    }

    #[test]
    fn c2_2_walk_table() {
        let p = plan(
            &[("a", 2, &["a1", "a2", "a3"]), ("b", 1, &["b1", "b2"])],
            None,
        );
        // every claim succeeds: each project up to its slots
        assert_eq!(offers(&p, |_| Slot::Taken), ["a1", "a2", "b1"]);
        // a refused claim lets the next candidate stand in
        let refuse_a1 = |b: &str| if b == "a1" { Slot::Passed } else { Slot::Taken };
        assert_eq!(offers(&p, refuse_a1), ["a1", "a2", "a3", "b1"]);
        // a project error skips the rest of that project only
        let fail_a = |b: &str| {
            if b == "a1" {
                Slot::NextProject
            } else {
                Slot::Taken
            }
        };
        assert_eq!(offers(&p, fail_a), ["a1", "b1"]);
        // stop ends the walk
        assert_eq!(offers(&p, |_| Slot::Stop), ["a1"]);
        // the global cap bounds the total, across projects
        let g = plan(&[("a", 2, &["a1", "a2"]), ("b", 2, &["b1", "b2"])], Some(3));
        assert_eq!(offers(&g, |_| Slot::Taken), ["a1", "a2", "b1"]);
        // refusals do not use the global cap
        let refuse_a2 = |b: &str| if b == "a2" { Slot::Passed } else { Slot::Taken };
        assert_eq!(offers(&g, refuse_a2), ["a1", "a2", "b1", "b2"]);
        assert_eq!(
            g.intended()
                .iter()
                .map(|c| c.bead.as_str())
                .collect::<Vec<_>>(),
            ["a1", "a2", "b1"]
        );
    }

    #[test]
    fn settled_lists_releases_and_settled_claims() {
        let mut p = plan(&[], None);
        // b1 was claimed under slug b0, renamed b since: the claim is named as remembered
        let r = |s: &str, was: &str, b: &str| Release {
            slug: s.into(),
            bead: BeadId::new(b).unwrap(),
            claim: Claim {
                project: was.into(),
                path: Some(PathBuf::from("/p").join(s)),
                bead: BeadId::new(b).unwrap(),
                claimed_at: chrono::DateTime::UNIX_EPOCH,
            },
        };
        p.settled_claims.push(r("a", "a", "a1"));
        p.releases.push(r("b", "b0", "b1"));
        let got: Vec<(String, String)> = p
            .settled()
            .map(|c| (c.project.clone(), c.bead.to_string()))
            .collect();
        assert_eq!(got, [("a".into(), "a1".into()), ("b0".into(), "b1".into())]);
    }
}
