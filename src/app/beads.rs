//! Finding a bead from what a person types, and the picture of one project's beads
//! (`braids beads`): status, scope, attempts, what it waits for, and its worker.
//!
//! What a bead waits for comes from braids' own events (the question the agent asked, the
//! reason it was blocked), newest first, because the trackers keep those only as free-text
//! comments that differ between `br`, `bd` and WORKPLAN.md.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{anyhow, bail, Result};
use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::config::installation::Installation;
use crate::events::waiting::{waiting, Waiting};
use crate::events::Journal;
use crate::format::{self, project::ProjectConfig, registry::RegistryEntry};
use crate::model::{Bead, BeadId, BeadStatus, ProjectStatus, SessionLabel};
use crate::session::Session;
use crate::tracker::{Tracker, TrackerOptions};

/// A registry project opened for reading or acting on its beads.
pub struct Opened {
    pub entry: RegistryEntry,
    pub config: ProjectConfig,
    pub tracker: Box<dyn Tracker>,
}

impl Opened {
    /// Opens `entry`'s tracker (through `br` itself when `write`, so writes and reads agree).
    pub fn open(inst: &Installation, entry: RegistryEntry, write: bool) -> Result<Opened> {
        if !entry.path.is_dir() {
            anyhow::bail!(
                "{}: its directory {} does not exist; fix its Path in {} (or remove the row)",
                entry.slug,
                entry.path.display(),
                inst.paths.registry().display()
            );
        }
        let config = format::project::read_project(&entry.path).value;
        let kind =
            crate::tick::observe::tracker_kind(&config, inst.config.tracker.kind, &entry.path);
        let options = TrackerOptions {
            project: entry.path.clone(),
            timeout: Duration::from_secs(inst.config.tracker.timeout_secs),
            program: None,
            installation: Some(inst.paths.clone()),
        };
        let opened = if write {
            crate::forge::tracker::open(kind, options)
        } else {
            crate::forge::tracker::open_observing(kind, options, true)
        };
        let tracker = opened.map_err(|e| anyhow!("{}: {e}", entry.slug))?;
        Ok(Opened {
            entry,
            config,
            tracker,
        })
    }

    /// Paused in the registry or in PROJECT.md: the tick starts nothing here.
    pub fn paused(&self) -> bool {
        [self.entry.status, self.config.status]
            .iter()
            .any(|s| matches!(s, Some(ProjectStatus::Paused)))
    }

    /// Refuses an action that would make a bead eligible in a paused project: it would silently
    /// wait for a `resume` nobody knows is needed.
    pub fn refuse_if_paused(&self, bead: &BeadId) -> Result<()> {
        if self.paused() {
            bail!(
                "project {} is paused, so {bead} would not run; `braids resume {}` first",
                self.entry.slug,
                self.entry.slug
            );
        }
        Ok(())
    }

    pub fn journal(&self) -> Journal {
        Journal::of_project(&self.entry.path)
    }
}

/// How long a person's action waits for a running tick to finish.
const TICK_WAIT: Duration = Duration::from_secs(60);

/// Holds the tick lock while a person's action reads and changes a bead, so no tick observes
/// the bead between the action's steps (a claim released after a `kill --block`, a spawn in
/// the middle of a retry). Drop it before [`crate::tick::orchestrator_state::wake`], which takes it again.
pub fn hold_ticks(paths: &crate::system::paths::Paths) -> Result<crate::system::lock::TickLock> {
    let lock = paths.lock();
    crate::system::lock::TickLock::acquire(&lock, TICK_WAIT)
        .map_err(|e| anyhow!("cannot take the tick lock {}: {e}", lock.display()))?
        .ok_or_else(|| {
            anyhow!(
                "a tick has held {} for over a minute; try again when it ends",
                lock.display()
            )
        })
}

/// The live session of `bead` in project `slug`, among `sessions`.
pub fn live_session<'s>(sessions: &'s [Session], slug: &str, bead: &BeadId) -> Option<&'s Session> {
    sessions
        .iter()
        .find(|s| s.running && s.label.slug() == slug && s.label.bead() == bead)
}

/// A bead found from what a person typed.
pub struct Located {
    pub project: Opened,
    pub bead: Bead,
}

/// Finds `raw` among the registry's projects: an exact id, `<slug>:<id>`, a session label, or
/// an id's unique ending (`a1b` for `app-a1b`). An unknown id and an ambiguous one are errors;
/// the ambiguous one lists its candidates.
pub fn locate(inst: &Installation, raw: &str, write: bool) -> Result<Located> {
    let raw = raw.trim();
    let (only, wanted) = split_target(raw);
    let registry = format::registry::read_registry(&inst.paths).value;
    if let Some(slug) = only {
        if registry.get(slug).is_none() {
            bail!(
                "no project named {slug} in {}; `braids status` lists them",
                inst.paths.registry().display()
            );
        }
    }
    let mut exact = Vec::new();
    let mut ending = Vec::new();
    let mut unreadable = Vec::new();
    for entry in registry.entries {
        if only.is_some_and(|s| s != entry.slug) {
            continue;
        }
        let slug = entry.slug.clone();
        let listed = Opened::open(inst, entry.clone(), false).and_then(|o| {
            o.tracker
                .list()
                .map_err(|e| anyhow!("{}: {e}", o.entry.slug))
        });
        let beads = match listed {
            Ok(b) => b,
            Err(e) => {
                unreadable.push(format!("{e:#}"));
                continue;
            }
        };
        for b in beads {
            if b.id.as_str() == wanted {
                exact.push((entry.clone(), b));
            } else if ends_with_part(b.id.as_str(), wanted) {
                ending.push((slug.clone(), entry.clone(), b));
            }
        }
    }
    let found = match (exact.len(), ending.len()) {
        (1, _) => exact.pop(),
        (0, 1) => ending.pop().map(|(_, e, b)| (e, b)),
        (0, 0) => {
            let also = if unreadable.is_empty() {
                String::new()
            } else {
                format!(" (not searched: {})", unreadable.join("; "))
            };
            bail!(
                "no bead {raw} in any registered project{also}; `braids beads <project>` lists them"
            )
        }
        _ => {
            let mut names: Vec<String> = exact
                .iter()
                .map(|(e, b)| format!("{}:{}", e.slug, b.id))
                .chain(ending.iter().map(|(s, _, b)| format!("{s}:{}", b.id)))
                .collect();
            names.sort();
            bail!(
                "{raw} is ambiguous: it could be {}; give one of these",
                names.join(", ")
            )
        }
    };
    let (entry, bead) = found.expect("one candidate");
    let project = Opened::open(inst, entry, write)?;
    Ok(Located { project, bead })
}

/// `project:<slug>:<bead>` and `<slug>:<bead>` name the project; a bare id does not.
fn split_target(raw: &str) -> (Option<&str>, &str) {
    if let Ok(label) = SessionLabel::parse(raw) {
        let slug_len = label.slug().len();
        return (
            Some(&raw["project:".len().."project:".len() + slug_len]),
            &raw[raw.len() - label.bead().as_str().len()..],
        );
    }
    match raw.split_once(':') {
        Some((slug, bead)) if !slug.is_empty() && !bead.contains(':') => (Some(slug), bead),
        _ => (None, raw),
    }
}

/// Whether `typed` is a whole `-`/`.`-separated ending of `id` (`a1b`, `x.1` of `app-x.1`).
fn ends_with_part(id: &str, typed: &str) -> bool {
    !typed.is_empty()
        && id.len() > typed.len()
        && id[id.len() - typed.len()..].eq_ignore_ascii_case(typed)
        && matches!(id.as_bytes()[id.len() - typed.len() - 1], b'-' | b'.')
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// One bead as `braids beads` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct BeadRow {
    pub id: BeadId,
    pub title: String,
    pub status: BeadStatus,
    pub priority: u8,
    /// Listed in the active iteration's Stories: worked this iteration.
    pub in_scope: bool,
    /// Failed attempts recorded since the last success or retry that count towards blocking it.
    pub attempts: u32,
    /// Failed attempts during a provider outage (a rate limit, an overloaded API): retried,
    /// never counted.
    #[serde(skip_serializing_if = "is_zero")]
    pub outage_attempts: u32,
    /// After a failed attempt, not spawned before this time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_at: Option<DateTime<Utc>>,
    /// A blocked bead's question, approval or reason.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waiting: Option<Waiting>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worker: Option<Worker>,
    /// A closed bead whose landing is not on the upstream yet (4.4): `closed, not pushed
    /// (since …, why)`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_pushed: Option<String>,
    /// In review (`Landing: pull-request`): its pull request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub review: Option<InReviewShown>,
    /// A forge issue's number (`#12`), for a tracker of forge issues.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub issue: Option<u64>,
    /// Where a person reads it (a forge issue's page).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

/// A bead's pull request as the views show it.
#[derive(Debug, Clone, Serialize)]
pub struct InReviewShown {
    pub number: u64,
    pub url: String,
    pub branch: String,
    /// The head braids last pushed.
    pub head: String,
    /// Attempts started for the forge's sake.
    pub attempts: u32,
    /// What braids last found or did about it.
    pub last: String,
}

impl InReviewShown {
    pub fn of(r: &crate::review::InReview) -> InReviewShown {
        InReviewShown {
            number: r.number,
            url: r.url.clone(),
            branch: r.branch.clone(),
            head: r.head.clone(),
            attempts: r.handled.attempts,
            last: r.last.clone(),
        }
    }
}

/// A live worker of a bead.
#[derive(Debug, Clone, Serialize)]
pub struct Worker {
    pub session: String,
    pub started_at: DateTime<Utc>,
    pub elapsed_seconds: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log: Option<PathBuf>,
}

impl Worker {
    pub fn of(s: &Session, now: DateTime<Utc>) -> Worker {
        Worker {
            session: s.label.to_string(),
            started_at: s.started_at,
            elapsed_seconds: u64::try_from((now - s.started_at).num_seconds()).unwrap_or(0),
            log: s.log.clone(),
        }
    }
}

/// One bead as `braids beads` shows it, with its project's slug.
pub fn one(inst: &Installation, target: &str, now: DateTime<Utc>) -> Result<(String, BeadRow)> {
    let found = locate(inst, target, false)?;
    let sessions = inst.backend.list()?;
    let shown = rows(inst, &found.project, vec![found.bead], &[], &sessions, now);
    let row = shown.beads.into_iter().next().expect("the bead itself");
    Ok((found.project.entry.slug, row))
}

/// The bead's deliverable in the newest iteration that has one: its path relative to the
/// project, and its text.
pub fn deliverable(root: &std::path::Path, bead: &BeadId) -> Option<(String, String)> {
    let p = format::iteration::list_iteration_dirs(root)
        .into_iter()
        .rev()
        .find_map(|(_, dir)| format::deliverable::find(&dir, bead).into_iter().next())?;
    let text = std::fs::read_to_string(&p).ok()?;
    Some((
        p.strip_prefix(root).unwrap_or(&p).display().to_string(),
        text,
    ))
}

/// One project's beads.
#[derive(Debug, Clone, Serialize)]
pub struct ProjectBeads {
    pub project: String,
    pub paused: bool,
    pub iteration: Option<String>,
    pub beads: Vec<BeadRow>,
}

/// `braids beads <project>`: every bead (or those with a status in `only`), most urgent first.
pub fn list(
    inst: &Installation,
    slug: &str,
    only: &[BeadStatus],
    now: DateTime<Utc>,
) -> Result<ProjectBeads> {
    let entry = crate::app::iteration::locate(&inst.paths, slug)?;
    let project = Opened::open(inst, entry, false)?;
    let all = project.tracker.list().map_err(|e| anyhow!("{slug}: {e}"))?;
    let sessions = inst.backend.list()?;
    Ok(rows(inst, &project, all, only, &sessions, now))
}

/// The rows for `beads` of `project`, given the live sessions.
pub fn rows(
    inst: &Installation,
    project: &Opened,
    beads: Vec<Bead>,
    only: &[BeadStatus],
    sessions: &[Session],
    now: DateTime<Utc>,
) -> ProjectBeads {
    let root = &project.entry.path;
    let iterations = format::iteration::read_iterations(root).value;
    let active = iterations
        .iter()
        .rev()
        .find(|i| i.status == Some(crate::model::IterationStatus::Active));
    let known: BTreeSet<BeadId> = beads.iter().map(|b| b.id.clone()).collect();
    let scope: BTreeSet<BeadId> = active
        .map(|i| match i.milestone_stories(&beads) {
            Some(own) => own.into_iter().map(|s| s.id).collect(),
            None => i
                .stories_known(|id| known.contains(id))
                .into_iter()
                .map(|s| s.id.clone())
                .collect(),
        })
        .unwrap_or_default();
    let attempts = crate::retry::store::Store::in_dir(&inst.paths.braids_dir).load();
    let mut beads: Vec<Bead> = beads
        .into_iter()
        .filter(|b| only.is_empty() || only.contains(&b.status))
        .collect();
    beads.sort_by(|a, b| (a.priority, &a.id).cmp(&(b.priority, &b.id)));
    let blocked: BTreeSet<&str> = beads
        .iter()
        .filter(|b| b.status == BeadStatus::Blocked)
        .map(|b| b.id.as_str())
        .collect();
    let waits = waiting(&project.journal(), &blocked);
    let debt = crate::workspace::base_branch_of(root, &project.config)
        .ok()
        .and_then(|b| crate::git::not_pushed(root, &b));
    let kept = match beads.iter().any(|b| b.status == BeadStatus::Closed) {
        true => crate::workspace::all_kept(root),
        false => Vec::new(),
    };
    // A closed bead is not done until its work is on the upstream (4.4): owed to a push, or
    // kept on a branch because it conflicted with what others pushed.
    let not_pushed = |b: &Bead| -> Option<String> {
        if b.status != BeadStatus::Closed {
            return None;
        }
        // Only a landing the replay kept aside (`…-<commit>`); a failed attempt's work is kept
        // under its time (`…-20261127T101500Z`) and says nothing of a later landing.
        let prefix = format!("braids/kept/{}-", b.id);
        let replayed = |k: &&String| {
            k.strip_prefix(&prefix)
                .is_some_and(|rest| rest.len() == 12 && rest.bytes().all(|c| c.is_ascii_hexdigit()))
        };
        if let Some(k) = kept.iter().find(replayed) {
            return Some(format!(
                "closed, not landed: its work conflicts with the upstream and is kept on branch {k}"
            ));
        }
        let n = debt.as_ref()?;
        n.beads.contains(&b.id.to_string()).then(|| n.describe())
    };
    let rows = beads
        .iter()
        .map(|b| {
            let record = attempts.record(root, &b.id);
            let worker =
                live_session(sessions, &project.entry.slug, &b.id).map(|s| Worker::of(s, now));
            BeadRow {
                issue: b.url.as_ref().and_then(|_| b.id.issue_number()),
                url: b.url.clone(),
                id: b.id.clone(),
                title: b.title.clone(),
                status: b.status,
                priority: b.priority,
                in_scope: scope.contains(&b.id),
                attempts: record.map_or(0, |r| r.counted()),
                outage_attempts: record.map_or(0, |r| {
                    u32::try_from(r.failures.iter().filter(|f| !f.counts).count())
                        .unwrap_or(u32::MAX)
                }),
                retry_at: record.and_then(|r| r.not_before).filter(|t| *t > now),
                waiting: waits.get(b.id.as_str()).cloned(),
                worker,
                not_pushed: not_pushed(b),
                review: (b.status == BeadStatus::InProgress)
                    .then(|| {
                        crate::review_records::load(&inst.paths, &project.entry.slug, &b.id)
                            .ok()
                            .flatten()
                    })
                    .flatten()
                    .map(|r| InReviewShown::of(&r)),
            }
        })
        .collect();
    ProjectBeads {
        project: project.entry.slug.clone(),
        paused: project.paused(),
        iteration: active.map(|i| i.name.to_string()),
        beads: rows,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_name_their_project_or_not() {
        assert_eq!(split_target("app-a1b"), (None, "app-a1b"));
        assert_eq!(split_target("app:app-a1b"), (Some("app"), "app-a1b"));
        assert_eq!(
            split_target("project:app:app-a1b"),
            (Some("app"), "app-a1b")
        );
    }

    #[test]
    fn an_ending_is_a_whole_part_of_the_id() {
        assert!(ends_with_part("app-a1b", "a1b"));
        assert!(ends_with_part("app-a1b", "A1B"));
        assert!(ends_with_part("app-x.1", "1"));
        assert!(!ends_with_part("app-a1b", "1b"), "not half a part");
        assert!(
            !ends_with_part("app-a1b", "app-a1b"),
            "the whole id is exact"
        );
        assert!(!ends_with_part("app-a1b", ""));
    }
}
