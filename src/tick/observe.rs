//! Observing the world for one tick: the registry, each project's files, its tracker, and the
//! live sessions. The result is a [`decide::Snapshot`] plus what STATUS.md shows.
//!
//! Projects are observed concurrently (tokio, bounded by `[tick] concurrency`), each with its
//! own time limit, so one hung tracker or vanished directory costs its own project a run and
//! nothing else. Tracker calls are spent only where they can matter: `list` for every project
//! that can be read (bead statuses for sessions and claims, and the bead counts STATUS.md shows
//! for every project, 1.5), `ready` only for an eligible project whose list has an open bead.
//! `ready` is asked even when the project is at capacity: whether ready work is waiting decides
//! between `all-at-capacity` and `no-ready-beads` (2.7).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::config::Config;
use crate::diag::Diagnostic;
use crate::format::{self, project::ProjectConfig, registry::RegistryEntry};
use crate::model::{
    Autonomy, Bead, BeadId, BeadStatus, Checkin, IterationName, IterationStatus, Priority,
    ProjectStatus,
};
use crate::paths::Paths;
use crate::session::Session;
use crate::state::Claim;
use crate::tracker::{self, Tracker, TrackerKind, TrackerOptions};

use super::decide::{eligibility_of, BeadLookup, Eligibility, ProjectView, Snapshot};
use super::reuse::{self, Answers, Prior};
use crate::workspace::WorkspaceMode;

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
    pub iteration: Option<(IterationName, Option<IterationStatus>)>,
    pub tracker: Option<&'static str>,
    /// Bead counts by status, when the tracker was asked this run.
    pub counts: Option<BTreeMap<String, usize>>,
    /// The iteration's Stories with their status when known.
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
    /// A push of this project failed earlier and waits for a retry (4.4).
    pub push_pending: bool,
    /// PROJECT.md `Checkin` (1.2): whether the tick sends this project progress summaries.
    pub checkin: Checkin,
    /// PROJECT.md `Channel`: where check-ins go; none means none are sent.
    pub channel: Option<String>,
    /// PROJECT.md as read this run, for notifications (`None` in read-only runs).
    #[serde(skip)]
    pub config: Option<ProjectConfig>,
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
    /// Tracker answers a later run may reuse, per project ([`reuse`]).
    pub answers: BTreeMap<String, Answers>,
}

/// Surveys the sessions, then observes every project: the observe step of a tick, and what
/// `braids status` shows. `read_only` writes nothing (a dry run, `status`).
pub fn observe_installation(
    inst: &crate::installation::Installation,
    state: &crate::state::OrchestratorState,
    read_only: bool,
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
        now,
        unreadable: survey.problems.len(),
    };
    let prior = Prior::load(&inst.paths.braids_dir, &state.tracker_fingerprints);
    let mut observed = observe(&ctx, survey.sessions, state.claims.clone(), prior);
    observed.snapshot.unreadable = survey.problems;
    Ok(observed)
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
    answers: Option<Answers>,
}

/// Reads every project. The sessions are listed by the caller first: without them braids
/// cannot know who is running, so a backend failure stops the run before this point.
pub fn observe(
    ctx: &Context<'_>,
    sessions: Vec<Session>,
    claims: Vec<Claim>,
    mut prior: Prior,
) -> Observed {
    let registry = format::registry::read_registry(ctx.paths);
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
    let reading = |prior| Reading {
        default_kind: ctx.config.tracker.kind,
        read_only: ctx.read_only,
        timeout: tracker_timeout,
        prior,
        now: ctx.now,
        unreadable: ctx.unreadable,
    };

    let rt = tokio::runtime::Builder::new_current_thread()
        .max_blocking_threads(concurrency)
        .enable_time()
        .build()
        .expect("tokio runtime");
    // Each observation lands in its project's slot as soon as it is made, and only a few more
    // than there are threads are started ahead: spawning every project at once held every
    // task, its inputs and its finished observation until the registry-order await reached it.
    let n = entries.len();
    let mut slots: Vec<Option<ProjectObservation>> = Vec::with_capacity(n);
    slots.resize_with(n, || None);
    rt.block_on(async {
        let mut running = tokio::task::JoinSet::new();
        for i in 0..n {
            if running.len() >= concurrency * 2 {
                if let Some(Ok((at, obs))) = running.join_next().await {
                    slots[at] = Some(obs);
                }
            }
            let prior = prior.answers.remove(&entries[i].slug);
            let how = reading(prior);
            let (entries, paths) = (Arc::clone(&entries), Arc::clone(&paths));
            let (sessions, claims) = (Arc::clone(&sessions), Arc::clone(&claims));
            running.spawn(async move {
                let work = {
                    let entries = Arc::clone(&entries);
                    tokio::task::spawn_blocking(move || {
                        observe_project(&entries[i], &paths, how, &sessions, &claims)
                    })
                };
                // The budget runs from the project's start, not from the start of the run.
                let obs = match tokio::time::timeout(project_budget, work).await {
                    Ok(Ok(obs)) => obs,
                    Ok(Err(e)) => broken(
                        &entries[i],
                        format!("observing {} failed: {e}", entries[i].slug),
                    ),
                    Err(_) => broken(
                        &entries[i],
                        format!(
                            "observing {} took longer than {}s; skipped this run",
                            entries[i].slug,
                            project_budget.as_secs()
                        ),
                    ),
                };
                (i, obs)
            });
        }
        while let Some(done) = running.join_next().await {
            if let Ok((at, obs)) = done {
                slots[at] = Some(obs);
            }
        }
    });
    // A hung blocking task must not hold the process open.
    rt.shutdown_background();

    let mut projects = Vec::with_capacity(n);
    let mut reports = Vec::with_capacity(n);
    let mut trackers = BTreeMap::new();
    let mut answers = BTreeMap::new();
    for (slot, entry) in slots.into_iter().zip(entries.iter()) {
        let o = slot.unwrap_or_else(|| broken(entry, format!("observing {} failed", entry.slug)));
        if let Some(t) = o.tracker {
            trackers.insert(o.view.slug.clone(), t);
        }
        if let Some(a) = o.answers {
            answers.insert(o.view.slug.clone(), a);
        }
        projects.push(o.view);
        reports.push(o.report);
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
        gate: crate::retry::breaker::Gate::Open,
        next_probe: None,
        held_before: Default::default(),
    };
    Observed {
        snapshot,
        reports,
        trackers,
        diagnostics,
        answers,
    }
}

fn base_view(entry: &RegistryEntry, eligibility: Eligibility) -> ProjectView {
    ProjectView {
        slug: entry.slug.clone(),
        path: entry.path.clone(),
        priority: entry.priority.unwrap_or_default(),
        max_workers: 1,
        worker_timeout: 3600,
        stall_timeout: 0,
        channel: None,
        eligibility,
        stories: Vec::new(),
        ready: Vec::new(),
        beads: BTreeMap::new(),
        tracker_error: None,
        preflight_error: None,
        workspace: WorkspaceMode::default(),
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
        push_pending: false,
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
        answers: None,
    }
}

/// The tracker a project asked for in PROJECT.md (`Tracker: br`), else the installation's.
pub fn tracker_kind(config: &ProjectConfig, default: TrackerKind) -> TrackerKind {
    config
        .field("tracker")
        .and_then(|f| TrackerKind::parse(&f.value))
        .unwrap_or(default)
}

/// How one project's tracker is read this run.
struct Reading {
    default_kind: TrackerKind,
    read_only: bool,
    timeout: Duration,
    /// The last full run's answers for this project, if its fingerprint was recorded.
    prior: Option<Answers>,
    now: chrono::DateTime<chrono::Utc>,
    unreadable: usize,
}

fn observe_project(
    entry: &RegistryEntry,
    paths: &Paths,
    how: Reading,
    sessions: &[Session],
    claims: &[Claim],
) -> ProjectObservation {
    let Reading {
        default_kind,
        read_only,
        timeout,
        prior,
        now,
        unreadable,
    } = how;
    let root = &entry.path;
    if paths.in_workspace(root) {
        return broken(
            entry,
            format!(
                "{} is inside the agent workspace {} (4.1); move the project",
                root.display(),
                paths.workspace.display()
            ),
        );
    }
    // Stamped before they are read, so a write in between shows as a change next run.
    let fingerprinting = !read_only || prior.is_some();
    let project_stamps = fingerprinting.then(|| reuse::stamps(reuse::project_files(root)));
    let project_md = root.join(".braids/PROJECT.md");
    let text = match crate::atomic::read(&project_md) {
        Ok(b) => b,
        Err(e) => return broken(entry, format!("cannot read {}: {e}", project_md.display())),
    };
    let (config, mut problems) =
        format::project::parse_project(&format::decode(&text), &project_md).into_parts();
    let (iterations, more) = format::iteration::read_iterations(root).into_parts();
    problems.extend(more);
    let eligibility = eligibility_of(entry, &config, &iterations);

    let mut view = base_view(entry, eligibility.clone());
    view.priority = config.priority;
    view.max_workers = config.max_workers;
    view.worker_timeout = config.worker_timeout;
    view.stall_timeout = config.stall_timeout;
    view.channel = config.channel.clone();
    view.workspace = WorkspaceMode::of(&config);
    let mut report = base_report(entry);
    report.problems = problems.iter().map(ToString::to_string).collect();
    report.name = config.name.clone().unwrap_or_else(|| entry.slug.clone());
    report.project_status = config.status;
    report.priority = config.priority;
    report.autonomy = config.autonomy;
    report.max_workers = config.max_workers;
    report.push_pending = crate::git::push_pending(root);
    report.checkin = config.checkin;
    report.channel = config.channel.clone();
    // For notifications, which read-only runs never send.
    report.config = (!read_only).then(|| config.clone());

    let shown = match &eligibility {
        Eligibility::Eligible { iteration } => iteration.find(&iterations, |i| i.name),
        _ => iterations.last(),
    };
    if let Some(it) = shown {
        report.iteration = Some((it.name, it.status));
        if matches!(eligibility, Eligibility::Eligible { .. }) {
            view.stories = it.stories.iter().map(|s| s.id.clone()).collect();
        }
    }
    report.note = match &eligibility {
        Eligibility::Eligible { .. } => None,
        Eligibility::Inactive { why } => Some(format!("not active ({why})")),
        Eligibility::NoActiveIteration => Some("no active iteration".into()),
        Eligibility::SeveralActive(n) => Some(format!(
            "{} active iterations ({}); at most one may be active (1.3)",
            n.len(),
            n.iter().map(|i| i.as_str()).collect::<Vec<_>>().join(", ")
        )),
        Eligibility::Broken(why) => Some(why.clone()),
    };

    let slug = entry.slug.as_str();
    let mine: Vec<&Session> = sessions
        .iter()
        .filter(|s| s.label.slug() == slug && s.running)
        .collect();
    let claimed: Vec<&BeadId> = claims
        .iter()
        .filter(|c| c.belongs_to(slug, root))
        .map(|c| &c.bead)
        .collect();
    let eligible = matches!(eligibility, Eligibility::Eligible { .. });

    let kind = tracker_kind(&config, default_kind);
    let options = TrackerOptions {
        project: root.clone(),
        timeout,
        program: None,
    };
    let opened = tracker::open_observing(kind, options, read_only);
    let tracker: Arc<dyn Tracker> = match opened {
        Ok(t) => Arc::from(t),
        Err(e) => {
            view.tracker_error = Some(e.to_string());
            report.error = Some(e.to_string());
            return ProjectObservation {
                view,
                report,
                tracker: None,
                answers: None,
            };
        }
    };
    report.tracker = Some(tracker.kind().as_str());

    // Bead statuses: for sessions, claims, counts and the Stories list.
    let wanted: BTreeSet<&BeadId> = mine
        .iter()
        .map(|s| s.label.bead())
        .chain(claimed.iter().copied())
        .collect();
    let state_files = tracker.state_files();
    let stamps = project_stamps
        .filter(|_| !state_files.is_empty())
        .map(|mut s| {
            s.extend(reuse::stamps(state_files));
            s
        });
    let read =
        match reuse::read_tracker(&*tracker, prior.as_ref(), stamps.as_deref(), eligible, now) {
            Ok(read) => read,
            Err(e) => {
                for id in &wanted {
                    view.beads.insert((*id).clone(), BeadLookup::Unknown);
                }
                view.tracker_error = Some(e.to_string());
                report.error = Some(e.to_string());
                return ProjectObservation {
                    view,
                    report,
                    tracker: Some(tracker),
                    answers: None,
                };
            }
        };
    tracing::debug!(project = slug, reads = %read.path, "tracker read");
    let status: BTreeMap<&BeadId, BeadStatus> = read.beads.iter().map(|(id, s)| (id, *s)).collect();
    for id in &wanted {
        let l = status
            .get(id)
            .map_or(BeadLookup::Missing, |s| BeadLookup::Known(*s));
        view.beads.insert((*id).clone(), l);
    }
    let mut counts = BTreeMap::new();
    for (_, s) in &read.beads {
        *counts.entry(s.as_str().to_string()).or_insert(0) += 1;
    }
    report.counts = Some(counts);
    let mut unknown = Vec::new();
    if let Some(it) = shown {
        let known = |id: &BeadId| status.contains_key(id);
        let stories = it.stories_known(known);
        report.stories = stories
            .iter()
            .map(|s| (s.id.clone(), s.title.clone(), status.get(&s.id).copied()))
            .collect();
        if eligible {
            // plain-word ids (`readme`) the tracker knows are stories too
            view.stories = stories.iter().map(|s| s.id.clone()).collect();
        }
        let kind = tracker.kind().as_str();
        unknown = format::iteration::unknown_stories(it, known, kind)
            .into_iter()
            .map(|(s, problem)| UnknownStory {
                bead: s.id.clone(),
                problem,
            })
            .collect();
    }
    report.unknown_stories = Some(unknown);

    // `ready` wherever an open bead could be: with a free slot it is what to spawn, at
    // capacity it is what makes the idle reason `all-at-capacity` rather than `no-ready-beads`.
    match read.ready {
        Some(Ok(ready)) => {
            // Iteration scope (5.1): ready beads the Stories do not list are only counted.
            let in_scope = |b: &&Bead| super::decide::in_scope(&view.stories, &b.id);
            let out = ready.iter().filter(|b| !in_scope(b)).count();
            report.ready = ready.len() - out;
            report.ready_out_of_scope = out;
            // Only the beads `decide` can reach: its slots and stand-ins, past the ones it must
            // skip (beads with a live session or a claim). A project's whole ready list, kept
            // for every project until the plan is made, was most of a large tick's memory.
            let reach = view.max_workers as usize
                + super::decide::STAND_INS
                + mine.len()
                + claimed.len()
                + unreadable;
            let mut seen = BTreeSet::new();
            view.ready = Vec::with_capacity(reach.min(ready.len()));
            view.ready.extend(
                super::decide::spawn_order(&view.stories, &ready)
                    .into_iter()
                    .filter(|b| in_scope(b) && b.status == BeadStatus::Open && seen.insert(&b.id))
                    .take(reach)
                    .map(|b| Bead {
                        description: String::new(),
                        dependencies: Vec::new(),
                        ..b.clone()
                    }),
            );
        }
        Some(Err(e)) => {
            view.tracker_error = Some(e.to_string());
            report.error = Some(e.to_string());
        }
        None => {}
    }
    ProjectObservation {
        view,
        report,
        tracker: Some(tracker),
        answers: read.answers,
    }
}
