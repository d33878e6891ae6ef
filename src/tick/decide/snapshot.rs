//! What `decide` looks at: every registered project as observed this run, and the sessions,
//! claims and retry state beside them. Plain data; every `ProjectView` is made with
//! [`ProjectView::builder`], by observe, the tests and the simulation alike.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use chrono::{DateTime, Duration, Utc};

use super::{BeadLookup, Eligibility, Gate};
use crate::model::{Bead, BeadId, Priority};
use crate::session::{Session, SessionProblem};
use crate::tick::orchestrator_state::Claim;
use crate::workspace::WorkspaceMode;

/// One registered project as observed this run.
#[derive(Debug, Clone)]
pub struct ProjectView {
    pub slug: String,
    pub path: PathBuf,
    pub priority: Priority,
    pub max_workers: u32,
    /// Seconds.
    pub worker_timeout: u64,
    /// Seconds without output or a changed file after which a worker is stalled; 0: never.
    pub stall_timeout: u64,
    pub channel: Option<String>,
    pub eligibility: Eligibility,
    /// The active iteration's Stories, in order.
    pub stories: Vec<BeadId>,
    /// The Stories are the iteration's whole scope even when there are none (a milestone's
    /// issues): no Stories then means nothing to work, not every ready bead.
    pub scope_named: bool,
    /// Ready beads in the tracker's order; empty when not queried.
    pub ready: Vec<Bead>,
    /// Status of the beads that have sessions or claims.
    pub beads: BTreeMap<BeadId, BeadLookup>,
    /// Set when the tracker failed this run; the project is skipped, the rest go on.
    pub tracker_error: Option<String>,
    /// Set when no worker of the project could do its work (the preflight, `tick::preflight`):
    /// nothing is claimed for it.
    pub preflight_error: Option<String>,
    /// PROJECT.md `Workspace:`: a git worktree per bead, or the shared work tree.
    pub workspace: WorkspaceMode,
    /// Why the project gets no new worker today though it is eligible: its `DailyBudget` is
    /// reached ([`budget_hold`]). Ready work then waits as it would at capacity.
    pub held_by_budget: Option<String>,
    /// `Pipeline: protocol` stories with a state file, by bead (empty for other projects).
    pub protocol: BTreeMap<BeadId, crate::protocol::tick::StoryView>,
    /// Protocol stories' open dependencies as the tracker says them this run (a story whose
    /// bead is ready has none); stories not looked at are absent.
    pub dependencies: BTreeMap<BeadId, crate::protocol::deps::Waits>,
    /// `ProtocolState: single`: the project's one `.ai/STATE.json` holds one story at a time.
    pub single_state: bool,
    /// PROJECT.md `Backend:` and the resources its workers ask for.
    pub placement: crate::session::Placement,
    /// Set when the project's backend could not be asked who is running (slurmctld down), or
    /// its placement cannot be used: nothing of the project is touched this run.
    pub backend_error: Option<String>,
    /// Its beads in review (`Landing: pull-request`), with what their forge said this run.
    pub reviews: Vec<crate::review::Watched>,
}

/// Everything `decide` looks at.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// In registry order.
    pub projects: Vec<ProjectView>,
    pub sessions: Vec<Session>,
    pub claims: Vec<Claim>,
    /// 0 means no global cap.
    pub global_max_workers: u32,
    /// WorkerTimeout for sessions of projects missing from the registry (their PROJECT.md is
    /// not read): the default WorkerTimeout.
    pub orphan_timeout_secs: u64,
    pub claim_grace: Duration,
    /// Session records the backend found but could not read. Whether their worker runs is
    /// unknown, so one that names its label counts as running: it holds its slot, its bead is
    /// not handed out again, and it is never killed (there is nothing verified to signal).
    pub unreadable: Vec<SessionProblem>,
    /// `tick --allow-mass-kill`: this run may kill past the kill-storm guard.
    pub allow_mass_kill: bool,
    /// Beads waiting out a retry backoff: per project directory, when each may run again
    /// ([`crate::retry`]).
    pub waiting: BTreeMap<PathBuf, BTreeMap<BeadId, DateTime<Utc>>>,
    /// Per session label, when its worker last showed activity (output or a changed file).
    pub activity: BTreeMap<String, DateTime<Utc>>,
    /// Session labels whose worker is in its fixed steps (it marked itself finishing).
    pub finishing: BTreeSet<String>,
    /// What the provider breaker lets this run spawn.
    pub gate: Gate,
    /// When the provider breaker lets the next probe through, while it is open.
    pub next_probe: Option<DateTime<Utc>>,
    /// Claims the release-storm guard held last run (`<path or slug>/<bead>`): still stranded
    /// this run, they are released.
    pub held_before: BTreeSet<String>,
    /// Claims (project directory, bead) whose bead has a protocol story file: the story counts
    /// its attempts itself.
    pub story_claims: BTreeSet<(PathBuf, BeadId)>,
}
