//! Observing the world for one tick: the registry, each project's files, its tracker, and the
//! live sessions. The result is a [`decide::Snapshot`] plus what STATUS.md shows.
//!
//! Projects are observed concurrently (`pool.rs`: `[tick] concurrency` threads), each with its
//! own time limit, so one hung tracker or vanished directory costs its own project a run and
//! nothing else. Tracker calls are spent only where they can matter: `list` for every project
//! that can be read (bead statuses for sessions and claims, and the bead counts STATUS.md shows
//! for every project, 1.5), `ready` only for an eligible project whose list has an open bead.
//! `ready` is asked even when the project is at capacity: whether ready work is waiting decides
//! between `all-at-capacity` and `no-ready-beads` (2.7).
//!
//! An unchanged project is observed from the last full run's cache ([`cache`]): its
//! stats, and no read of its files; a full run writes the next cache as projects finish.
//! `project.rs` observes one project, `files.rs` reads its files or takes them from the cache.

pub mod cache;
mod files;
pub mod lookups;
mod named;
mod pool;
mod project;
mod reviews;
mod tick;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::config::Config;
use crate::format::{self, project::ProjectConfig, registry::RegistryEntry};
use crate::model::{
    Autonomy, BeadId, BeadStatus, Checkin, IterationName, IterationStatus, Priority, ProjectStatus,
};
use crate::session::Session;
use crate::system::diag::Diagnostic;
use crate::system::paths::Paths;
use crate::tick::orchestrator_state::Claim;
use crate::tracker::{Tracker, TrackerKind};

use super::decide::{Eligibility, ProjectView, Snapshot};
use project::{observe_project, Reading};
pub use tick::tick;

/// A bead in review as STATUS.md and `braids status` show it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ReviewLine {
    pub bead: BeadId,
    pub number: u64,
    pub url: String,
    /// Where it stands: what braids waits for, or does next run.
    pub state: String,
}

/// What STATUS.md says about one project.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ProjectReport {
    pub slug: String,
    pub name: String,
    pub path: PathBuf,
    pub registry_status: Option<ProjectStatus>,
    pub project_status: Option<ProjectStatus>,
    pub priority: Priority,
    pub autonomy: Autonomy,
    pub max_workers: u32,
    /// The active iteration (its directory name as written), or else the newest one.
    #[serde(serialize_with = "named::iteration")]
    pub iteration: Option<(IterationName, Option<IterationStatus>)>,
    pub tracker: Option<&'static str>,
    /// Bead counts by status, when the tracker was asked this run.
    pub counts: Option<BTreeMap<String, usize>>,
    /// The iteration's Stories with their status when known.
    #[serde(serialize_with = "named::stories")]
    pub stories: Vec<(BeadId, String, Option<BeadStatus>)>,
    /// Stories of that iteration the tracker does not know, each with the finding STATUS.md
    /// lists under the project's Problems: the iteration could never complete (1.3, 3.7).
    /// `None` when the tracker's list was not read this run, so nothing is known either way.
    pub unknown_stories: Option<Vec<UnknownStory>>,
    /// Ready beads in the iteration's scope.
    pub ready: usize,
    /// Ready beads the iteration's Stories do not list: not worked this iteration.
    pub ready_out_of_scope: usize,
    /// Why the project is not eligible, or what failed.
    pub note: Option<String>,
    pub error: Option<String>,
    /// What is wrong in PROJECT.md and the iterations: file, line and fix.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
    /// The blocked beads, when the tracker's list was read this run (retention keeps their
    /// logs for the person who will look).
    #[serde(skip)]
    pub blocked: Vec<BeadId>,
    /// What each blocked bead waits for (a question, an approval, a reason), from the
    /// project's events; only for the dashboards.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub waiting: BTreeMap<String, crate::events::waiting::Waiting>,
    /// `Pipeline: protocol` stories that are not done: step, attempt, what each waits for.
    pub protocol: Vec<crate::protocol::tick::StoryLine>,
    /// Beads in review: each one's pull request and where it stands, as this run saw it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reviews: Vec<ReviewLine>,
    /// A push of this project failed earlier and waits for a retry (4.4).
    pub push_pending: bool,
    /// What that push holds back: since when, why, the next try, and the beads that are
    /// closed but not on the upstream.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_pushed: Option<crate::git::NotPushed>,
    /// The project's pool of finished workspaces, when it holds any (see
    /// [`crate::workspace::pool`]); filled by [`see_pools`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pool: Option<crate::workspace::pool::PoolSeen>,
    /// A claw-loop project whose loop is paused for a person: why (`crate::claw::loopstate`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loop_paused: Option<String>,
    /// A claw-loop project's phase now: the current (or last) task's heading, its done and
    /// remaining tasks, and whether every task is checked off.
    #[serde(skip)]
    pub claw_phase: Option<(String, usize, usize, bool)>,
    /// PROJECT.md `Checkin` (1.2): whether the tick sends this project progress summaries.
    pub checkin: Checkin,
    /// PROJECT.md `Channel`: where check-ins go; none means none are sent.
    pub channel: Option<String>,
    /// PROJECT.md as read this run, for notifications and the preflight (`None` in a dry
    /// run). Boxed: a dry run's 10,000 reports would each carry its space for nothing.
    #[serde(skip)]
    pub config: Option<Box<ProjectConfig>>,
}

impl ProjectReport {
    /// Records a change this run made to a bead after observing it (a claim, a release), so
    /// STATUS.md shows the beads as the run leaves them rather than as it found them.
    pub fn record_transition(&mut self, bead: &BeadId, from: BeadStatus, to: BeadStatus) {
        if let Some(counts) = &mut self.counts {
            match counts.get_mut(from.as_str()) {
                Some(n) if *n > 0 => *n -= 1,
                _ => return,
            }
            counts.retain(|_, n| *n > 0);
            *counts.entry(to.as_str().to_string()).or_insert(0) += 1;
        }
        for (id, _, status) in &mut self.stories {
            if id == bead && *status == Some(from) {
                *status = Some(to);
            }
        }
    }
}

/// A story its tracker does not know.
#[derive(Debug, Clone, serde::Serialize)]
pub struct UnknownStory {
    pub bead: BeadId,
    pub problem: Diagnostic,
}

/// The observed world: the snapshot `decide` reads, and what `act` and STATUS.md need besides.
pub struct Observed {
    pub snapshot: Snapshot,
    pub reports: Vec<ProjectReport>,
    pub trackers: BTreeMap<String, Arc<dyn Tracker>>,
    pub diagnostics: Vec<Diagnostic>,
    /// The generation of the observation cache this run wrote, for the state to vouch for
    /// (`None`: none written; the next run reads every project).
    pub cache: Option<String>,
    /// How many projects were observed from the last run's cache rather than their files.
    pub from_cache: usize,
    /// Problems of the installation, not of one project (config.toml's executor missing):
    /// listed once, however many projects they stop.
    pub installation: std::collections::BTreeSet<String>,
    /// A change of the provider breaker this run, for people to be told (a tick's observe).
    pub breaker_change: Option<crate::retry::breaker::Transition>,
    /// Why spawning is paused by the provider breaker, while it is.
    pub paused: Option<String>,
}

/// Surveys the sessions, then observes every project: the observe step of a tick, and what
/// `braids status` shows. `read_only` writes nothing (a dry run, `status`); `dashboard` keeps
/// what only STATUS.md and `status` show (each Story with its title).
pub fn observe_installation(
    inst: &crate::config::installation::Installation,
    state: &crate::tick::orchestrator_state::OrchestratorState,
    read_only: bool,
    dashboard: bool,
    now: chrono::DateTime<chrono::Utc>,
) -> anyhow::Result<Observed> {
    use anyhow::Context as _;
    let survey = inst
        .backend
        .survey()
        .context("cannot list worker sessions, so cannot tell who is running")?;
    let ctx = Context {
        paths: &inst.paths,
        config: &inst.config,
        config_warnings: &inst.config_warnings,
        read_only,
        dashboard,
        now,
        unreadable: survey.problems.len(),
    };
    let prior = cache::open(&inst.paths.braids_dir, state.observe_cache.as_deref());
    let mut observed = observe(&ctx, survey.sessions, state.claims.clone(), prior);
    observed.snapshot.unreadable = survey.problems;
    backend_errors(&mut observed, &survey.failed, inst.config.sessions.backend);
    Ok(observed)
}

/// Marks the projects whose backend could not be asked who is running: their workers are
/// unseen, so nothing of theirs is spawned, killed or released this run, while the projects on
/// other backends go on. A placement PROJECT.md gets wrong is reported the same way.
fn backend_errors(
    observed: &mut Observed,
    failed: &[crate::session::BackendFailure],
    default: crate::session::BackendKind,
) {
    for view in &mut observed.snapshot.projects {
        let kind = view.placement.backend_or(default);
        if let Some(f) = failed.iter().find(|f| f.backend == kind) {
            view.backend_error = Some(format!(
                "the {kind} backend cannot say which workers run ({}), so nothing of this project is touched this run",
                f.detail
            ));
        }
        let Some(why) = &view.backend_error else {
            continue;
        };
        if let Some(r) = observed.reports.iter_mut().find(|r| r.slug == view.slug) {
            r.error.get_or_insert_with(|| why.clone());
        }
    }
}

/// Inputs that do not change during a run.
pub struct Context<'a> {
    pub paths: &'a Paths,
    pub config: &'a Config,
    /// Unknown keys found in config.toml, shown on STATUS.md.
    pub config_warnings: &'a [String],
    /// Observe without writing anything (a dry run, `braids status`): the native tracker then
    /// assigns missing ids in memory instead of writing them into WORKPLAN.md. It also records
    /// nothing for a later run to reuse.
    pub read_only: bool,
    /// Keep what only the dashboards show (STATUS.md, `braids status`): each Story with its
    /// title. A dry run's 10,000 projects would otherwise hold 200,000 titles for nothing.
    pub dashboard: bool,
    /// The run's clock: when deferrals end and whether reused answers still hold.
    pub now: chrono::DateTime<chrono::Utc>,
    /// Session records that cannot be read: each may hold a bead of any project.
    pub unreadable: usize,
}

/// One project's observation, made on a blocking thread.
struct ProjectObservation {
    view: ProjectView,
    report: ProjectReport,
    tracker: Option<Arc<dyn Tracker>>,
    /// Its cache entry for the next run, encoded (only runs that write record one).
    record: Option<Vec<u8>>,
    /// Its files came from the last run's cache.
    cached: bool,
}

/// Reads every project, from `prior` (the last full run's cache) where a project is
/// unchanged. The sessions are listed by the caller first: without them braids cannot know who
/// is running, so a backend failure stops the run before this point.
pub fn observe(
    ctx: &Context<'_>,
    sessions: Vec<Session>,
    claims: Vec<Claim>,
    prior: Option<cache::Reader>,
) -> Observed {
    // Runs that write record the next cache: the registry's rows, then each project's entry
    // as it is observed.
    let braids_dir = &ctx.paths.braids_dir;
    let mut next = (!ctx.read_only)
        .then(|| cache::create(braids_dir))
        .flatten();
    let registry = files::registry(ctx.paths, prior.as_ref(), next.as_mut(), ctx.now);
    let mut diagnostics = registry.diagnostics;
    let entries = registry.value.entries;

    let tracker_timeout = Duration::from_secs(ctx.config.tracker.timeout_secs.max(1));
    // A project's whole observation: a few tracker calls, each bounded by the tracker timeout.
    let project_budget = tracker_timeout * 3 + Duration::from_secs(2);
    let sessions = Arc::new(sessions);
    let claims = Arc::new(claims);
    let entries = Arc::new(entries);
    let paths = Arc::new(ctx.paths.clone());
    let concurrency = ctx.config.tick.concurrency.max(1);
    let reading = Reading {
        default_kind: ctx.config.tracker.kind,
        read_only: ctx.read_only,
        dashboard: ctx.dashboard,
        timeout: tracker_timeout,
        cached: None,
        now: ctx.now,
        unreadable: ctx.unreadable,
        // One read of the day's cost ledger a run, for `DailyBudget`.
        spent_today: Arc::new(crate::cost::spent_by_project(
            &crate::cost::ledger::Ledger::in_dir(braids_dir).day(ctx.now.date_naive()),
        )),
    };
    let prior = prior.map(Arc::new);
    // Each observation lands in its project's slots as soon as it is made. Views and reports
    // in slots of their own become the snapshot's vectors in place, never held twice.
    let n = entries.len();
    let mut views: Vec<Option<ProjectView>> = Vec::with_capacity(n);
    views.resize_with(n, || None);
    let mut reports: Vec<Option<ProjectReport>> = Vec::with_capacity(n);
    reports.resize_with(n, || None);
    let mut trackers = BTreeMap::new();
    let mut from_cache = 0;
    let mut keep = |at: usize, obs: ProjectObservation| {
        let slug = &entries[at].slug;
        from_cache += usize::from(obs.cached);
        if let (Some(w), Some(bytes)) = (next.as_mut(), obs.record) {
            if let Err(e) = w.add(slug, &bytes) {
                tracing::warn!("cannot write {}: {e:#}", cache::path(braids_dir).display());
                next = None;
            }
        }
        if let Some(t) = obs.tracker {
            trackers.insert(slug.clone(), t);
        }
        views[at] = Some(obs.view);
        reports[at] = Some(obs.report);
    };

    let work: pool::Work<ProjectObservation> = {
        let (entries, paths) = (Arc::clone(&entries), Arc::clone(&paths));
        let (sessions, claims) = (Arc::clone(&sessions), Arc::clone(&claims));
        let reading = reading.clone();
        Arc::new(move |i: usize| {
            let entry = &entries[i];
            let cached = prior
                .as_ref()
                .and_then(|r| Some((Arc::clone(r), r.find(&entry.slug)?)));
            let how = Reading {
                cached,
                ..reading.clone()
            };
            observe_project(entry, &paths, how, &sessions, &claims)
        })
    };
    pool::run(n, concurrency, project_budget, work, |at, obs| {
        let entry = &entries[at];
        let obs = obs.unwrap_or_else(|failure| {
            let why = match failure {
                pool::Failure::Panicked(e) => format!("observing {} failed: {e}", entry.slug),
                // The budget runs from the project's start, not from the start of the run.
                pool::Failure::TimedOut => format!(
                    "observing {} took longer than {}s; skipped this run",
                    entry.slug,
                    project_budget.as_secs()
                ),
            };
            broken(entry, why)
        });
        keep(at, obs);
    });
    let written = next.and_then(|w| cache::finish(braids_dir, w));
    // What the observing threads freed sits in their own malloc arenas, where the rest of the
    // run (on this thread) cannot reuse it: hand it back before deciding (glibc).
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free memory; it is safe to call at any time.
    unsafe {
        nix::libc::malloc_trim(0);
    }

    for (at, entry) in entries.iter().enumerate() {
        if views[at].is_none() || reports[at].is_none() {
            let o = broken(entry, format!("observing {} failed", entry.slug));
            views[at] = Some(o.view);
            reports[at] = Some(o.report);
        }
    }
    // Every slot is filled, so these keep all; `filter_map` (unlike `flatten`) collects in
    // place, into the slots' own memory.
    #[allow(clippy::filter_map_identity)]
    let mut projects: Vec<ProjectView> = views.into_iter().filter_map(|v| v).collect();
    #[allow(clippy::filter_map_identity)]
    let mut reports: Vec<ProjectReport> = reports.into_iter().filter_map(|r| r).collect();
    // Beads in review are looked at every run, whatever the project cache kept.
    for why in reviews::watch(
        ctx.config,
        ctx.paths,
        ctx.read_only,
        &mut projects,
        &mut reports,
    ) {
        diagnostics.push(Diagnostic::warning(
            &ctx.paths.config(),
            None,
            "review",
            why,
            "see the pull request and the forge's settings",
        ));
    }
    for w in ctx.config_warnings {
        diagnostics.push(Diagnostic::warning(
            &ctx.paths.config(),
            None,
            "config",
            w.clone(),
            "remove or correct the key",
        ));
    }
    let snapshot = Snapshot {
        projects,
        sessions: (*sessions).clone(),
        claims: (*claims).clone(),
        global_max_workers: ctx.config.tick.max_workers,
        orphan_timeout_secs: format::project::DEFAULT_WORKER_TIMEOUT,
        claim_grace: chrono::Duration::seconds(ctx.config.sessions.claim_grace_secs as i64),
        unreadable: Vec::new(),
        allow_mass_kill: false,
        waiting: BTreeMap::new(),
        activity: BTreeMap::new(),
        finishing: Default::default(),
        gate: crate::retry::breaker::Gate::Open,
        next_probe: None,
        held_before: Default::default(),
        story_claims: Default::default(),
    };
    Observed {
        snapshot,
        reports,
        trackers,
        diagnostics,
        cache: written,
        from_cache,
        installation: Default::default(),
        breaker_change: None,
        paused: None,
    }
}

fn base_view(entry: &RegistryEntry, eligibility: Eligibility) -> ProjectView {
    ProjectView::builder(entry.slug.clone(), entry.path.clone())
        .priority(entry.priority.unwrap_or_default())
        .eligibility(eligibility)
        .build()
}

/// Fills each report's pool, as STATUS.md, `braids status` and the dashboard show it: a
/// `stat` for a project without one.
pub fn see_pools(reports: &mut [ProjectReport], config: &crate::config::Config, paths: &Paths) {
    let wss = config.workspaces(paths, None);
    for r in reports {
        let cap = config.workspace.pool_size(r.max_workers);
        r.pool = wss.pool_seen(&r.path, Some(cap));
    }
}

fn base_report(entry: &RegistryEntry) -> ProjectReport {
    ProjectReport {
        slug: entry.slug.clone(),
        name: entry.slug.clone(),
        path: entry.path.clone(),
        registry_status: entry.status,
        project_status: None,
        priority: entry.priority.unwrap_or_default(),
        autonomy: Autonomy::default(),
        max_workers: 1,
        iteration: None,
        tracker: None,
        counts: None,
        stories: Vec::new(),
        unknown_stories: None,
        ready: 0,
        ready_out_of_scope: 0,
        note: None,
        error: None,
        problems: Vec::new(),
        blocked: Vec::new(),
        waiting: BTreeMap::new(),
        protocol: Vec::new(),
        reviews: Vec::new(),
        push_pending: false,
        not_pushed: None,
        pool: None,
        loop_paused: None,
        claw_phase: None,
        checkin: Checkin::default(),
        channel: None,
        config: None,
    }
}

fn broken(entry: &RegistryEntry, why: String) -> ProjectObservation {
    let mut report = base_report(entry);
    report.error = Some(why.clone());
    ProjectObservation {
        view: base_view(entry, Eligibility::Broken(why)),
        report,
        tracker: None,
        record: None,
        cached: false,
    }
}

/// The tracker a project asked for in PROJECT.md (`Tracker: br`), else the installation's.
pub fn tracker_kind(
    config: &ProjectConfig,
    default: TrackerKind,
    root: &std::path::Path,
) -> TrackerKind {
    if crate::claw::is_claw(config, root) {
        return TrackerKind::Claw;
    }
    config
        .field("tracker")
        .and_then(|f| TrackerKind::parse(&f.value))
        .unwrap_or(default)
}

#[cfg(test)]
mod tests;
