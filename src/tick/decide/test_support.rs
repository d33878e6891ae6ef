//! The worlds the rule tests build: a fixed clock, projects at `/p/<slug>` with one active
//! iteration, sessions, claims and snapshots with the defaults a run has.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use chrono::{DateTime, Duration, TimeZone, Utc};

use super::{Eligibility, Gate, Plan, ProjectView, ProjectViewBuilder, Release, Snapshot};
use crate::model::{Bead, BeadId, BeadStatus, SessionLabel};
use crate::session::Session;
use crate::tick::orchestrator_state::Claim;

pub fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 3, 1, 12, 0, 0).unwrap()
}
pub fn id(s: &str) -> BeadId {
    BeadId::new(s).unwrap()
}

/// A project at `/p/<slug>` with one active iteration, the defaults otherwise.
pub fn project(slug: &str) -> ProjectViewBuilder {
    ProjectView::builder(slug, format!("/p/{slug}")).eligibility(Eligibility::Eligible {
        iteration: 1.into(),
    })
}

/// Open beads titled `title <id>`.
pub fn open(ids: &[&str]) -> Vec<Bead> {
    ids.iter()
        .map(|i| Bead::new(id(i), format!("title {i}"), BeadStatus::Open))
        .collect()
}

pub fn ids(ids: &[&str]) -> Vec<BeadId> {
    ids.iter().map(|i| id(i)).collect()
}

pub fn session(slug: &str, bead: &str, running: bool, age_secs: i64) -> Session {
    Session {
        label: SessionLabel::new(slug, id(bead)).unwrap(),
        id: format!("pid:{bead}"),
        backend: crate::session::BackendKind::Process,
        pid: Some(100),
        started_at: now() - Duration::seconds(age_secs),
        running,
        worker_gone: false,
        queued: false,
        ended: None,
        log: None,
    }
}

/// A claim made `mins` ago in the project `slug` at `/p/<slug>`.
pub fn claim(slug: &str, bead: &str, mins: i64) -> Claim {
    Claim {
        project: slug.into(),
        path: Some(PathBuf::from(format!("/p/{slug}"))),
        bead: id(bead),
        claimed_at: now() - Duration::minutes(mins),
    }
}

/// `c` released or forgotten under the project's slug of this run.
pub fn release(slug: &str, c: &Claim) -> Release {
    Release {
        slug: slug.into(),
        bead: c.bead.clone(),
        claim: c.clone(),
    }
}

pub fn snap(projects: Vec<ProjectViewBuilder>, sessions: Vec<Session>) -> Snapshot {
    Snapshot {
        projects: projects
            .into_iter()
            .map(ProjectViewBuilder::build)
            .collect(),
        sessions,
        claims: vec![],
        global_max_workers: 0,
        orphan_timeout_secs: 3600,
        claim_grace: Duration::seconds(120),
        unreadable: vec![],
        allow_mass_kill: false,
        waiting: BTreeMap::new(),
        activity: BTreeMap::new(),
        finishing: Default::default(),
        gate: Gate::Open,
        next_probe: None,
        held_before: BTreeSet::new(),
        story_claims: BTreeSet::new(),
    }
}

pub fn spawned(plan: &Plan) -> Vec<String> {
    plan.intended()
        .iter()
        .map(|c| c.label().to_string())
        .collect()
}

pub fn story(
    step: crate::protocol::Step,
    status: crate::protocol::Status,
    weight: usize,
) -> crate::protocol::tick::StoryView {
    let running = status == crate::protocol::Status::Running;
    crate::protocol::tick::StoryView {
        step,
        status,
        attempt: 1,
        waits_for_human: status == crate::protocol::Status::NeedsHuman,
        deadline: running.then(|| now() + Duration::minutes(5)),
        running_since: running.then(|| now() - Duration::minutes(5)),
        done: step == crate::protocol::Step::Done,
        weight,
        blocked_by: vec![],
    }
}
