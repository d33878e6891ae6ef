//! One project's observation, made on a blocking thread: its files (from disk or the cache),
//! its tracker's answers, and what they mean for this run given the sessions and claims.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use crate::format::registry::RegistryEntry;
use crate::model::{Bead, BeadId, BeadStatus};
use crate::session::Session;
use crate::system::paths::Paths;
use crate::tick::decide::{eligibility_of, BeadLookup, Eligibility};
use crate::tick::observe::cache::reuse;
use crate::tick::observe::cache::{self, Entry};
use crate::tick::orchestrator_state::Claim;
use crate::tracker::{Tracker, TrackerKind, TrackerOptions};
use crate::workspace::WorkspaceMode;

use super::files::{self, ProjectFiles};
use super::{base_report, base_view, broken, tracker_kind, ProjectObservation, UnknownStory};

/// How one project is read this run.
#[derive(Clone)]
pub(super) struct Reading {
    pub default_kind: TrackerKind,
    pub read_only: bool,
    /// The reports are shown (STATUS.md, `braids status`): keep each Story with its title.
    pub dashboard: bool,
    pub timeout: Duration,
    /// The project's entry in the last full run's cache, if it has one.
    pub cached: Option<(Arc<cache::Reader>, cache::Loc)>,
    pub now: chrono::DateTime<chrono::Utc>,
    pub unreadable: usize,
    /// Dollars each project spent today (UTC), from the cost ledger, for `DailyBudget`.
    pub spent_today: Arc<std::collections::BTreeMap<String, f64>>,
}

pub(super) fn observe_project(
    entry: &RegistryEntry,
    paths: &Paths,
    how: Reading,
    sessions: &[Session],
    claims: &[Claim],
) -> ProjectObservation {
    let Reading {
        default_kind,
        read_only,
        dashboard,
        timeout,
        cached,
        now,
        unreadable,
        spent_today,
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
    let from_cache = cached
        .and_then(|(reader, loc)| reader.read(loc))
        .and_then(|bytes| Entry::decode(&bytes, root, dashboard || !read_only))
        .and_then(|e| files::cached(root, e));
    let hit = from_cache.is_some();
    // A run that records stamps every file (before reading it, so a write in between shows
    // as a change next run); a read-only run compares only, and needs none without an entry.
    let ProjectFiles {
        config,
        iterations,
        listing,
        stamps: project_stamps,
        prior,
        problems,
    } = match from_cache {
        Some(f) => f,
        None => match files::read(root, !read_only) {
            Ok(f) => f,
            Err(why) => return broken(entry, why),
        },
    };
    let claw = crate::claw::is_claw(&config, root);
    let loop_paused = claw
        .then(|| crate::claw::loopstate::load(root).paused.map(|p| p.reason))
        .flatten();
    let eligibility = match claw {
        true => crate::tick::decide::claw_eligibility(entry, &config, loop_paused.as_deref()),
        false => eligibility_of(entry, &config, &iterations),
    };
    let spent = spent_today.get(&entry.slug).copied().unwrap_or(0.0);
    let held_by_budget = matches!(eligibility, Eligibility::Eligible { .. })
        .then(|| crate::tick::decide::budget_hold(&config, spent))
        .flatten();

    let mut view = base_view(entry, eligibility.clone());
    view.priority = config.priority;
    // The claw loop works one task at a time.
    view.max_workers = if claw { 1 } else { config.max_workers };
    view.worker_timeout = config.worker_timeout;
    view.stall_timeout = config.stall_timeout;
    view.channel = config.channel.clone();
    view.workspace = WorkspaceMode::of(&config);
    let (placement, unusable) = crate::session::Placement::of(&config);
    view.placement = placement;
    view.backend_error = unusable.first().map(|p| {
        format!(
            "{} line {}: {}, so no worker starts until it is fixed: {}",
            crate::format::layout::project_file(root).display(),
            p.line,
            p.message,
            p.fix
        )
    });
    view.held_by_budget.clone_from(&held_by_budget);
    let mut report = base_report(entry);
    report.problems.clone_from(&problems);
    if let Some((line, message, fix)) = WorkspaceMode::problem(&config) {
        let md = crate::format::layout::project_file(root);
        report
            .problems
            .push(format!("{}:{line}: {message} (fix: {fix})", md.display()));
    }
    report.name = config.name.clone().unwrap_or_else(|| entry.slug.clone());
    report.project_status = config.status;
    report.priority = config.priority;
    report.autonomy = config.autonomy;
    report.max_workers = config.max_workers;
    report.push_pending = crate::git::push_pending(root);
    if report.push_pending {
        report.not_pushed = crate::workspace::base_branch_of(root, &config)
            .ok()
            .and_then(|b| crate::git::not_pushed(root, &b));
    }
    if claw {
        report.loop_paused = loop_paused;
        report.claw_phase = crate::claw::tasks::Plan::read(root).map(|p| p.now());
    }
    report.checkin = config.checkin;
    report.channel = config.channel.clone();
    // For notifications, which read-only runs never send, and the preflight `status` shows.
    report.config = (!read_only || dashboard).then(|| Box::new(config.clone()));

    let shown = match &eligibility {
        Eligibility::Eligible { iteration } => iteration.find(&iterations, |i| i.name),
        _ => iterations.last(),
    };
    if let Some(it) = shown {
        report.iteration = Some((it.name, it.status));
    }
    let eligible = matches!(eligibility, Eligibility::Eligible { .. });
    // The Stories when the tracker cannot say which plain-word ids are beads.
    let listed_stories = || match (eligible, shown) {
        (true, Some(it)) => it.stories.iter().map(|s| s.id.clone()).collect(),
        _ => Vec::new(),
    };
    report.note = match &eligibility {
        Eligibility::Eligible { .. } => held_by_budget,
        Eligibility::Inactive { why } => Some(format!("not active ({why})")),
        Eligibility::NoActiveIteration => Some("no active iteration".into()),
        Eligibility::SeveralActive(n) => Some(format!(
            "{} active iterations ({}); at most one may be active (1.3)",
            n.len(),
            n.iter().map(|i| i.as_str()).collect::<Vec<_>>().join(", ")
        )),
        Eligibility::Broken(why) => Some(why.clone()),
    };
    // What the next run may use instead of the files: only what no write can still be
    // racing. The tracker's answers are added once they are known.
    let mut record = (!read_only)
        .then_some(project_stamps.as_ref())
        .flatten()
        .filter(|s| reuse::settled(s, now))
        .map(|s| Entry {
            files: reuse::fingerprint(s),
            listing,
            config: config.clone(),
            iterations: iterations.clone(),
            answers: None,
            problems,
        });
    let done = |view, report, tracker, record: Option<Entry>| ProjectObservation {
        view,
        report,
        tracker,
        record: record.map(|e| e.encode()),
        cached: hit,
    };

    let slug = entry.slug.as_str();
    // Bead statuses: for sessions, claims, counts and the Stories list.
    let wanted = super::lookups::bead_lookups(slug, root, sessions, claims);

    let kind = tracker_kind(&config, default_kind, root);
    let options = TrackerOptions {
        project: root.clone(),
        timeout,
        program: None,
        installation: Some(paths.clone()),
    };
    let opened = crate::forge::tracker::open_observing(kind, options, read_only);
    let tracker: Arc<dyn Tracker> = match opened {
        Ok(t) => Arc::from(t),
        Err(e) => {
            view.stories = listed_stories();
            view.tracker_error = Some(e.to_string());
            report.error = Some(e.to_string());
            return done(view, report, None, record);
        }
    };
    let kind = tracker.kind();
    report.tracker = Some(kind.as_str());

    let state_files = tracker.state_files();
    let stamps = project_stamps
        .filter(|_| !state_files.is_empty())
        .map(|mut s| {
            s.extend(reuse::stamps(state_files));
            s
        });
    // Answers another tracker gave (config.toml's default changed, `.beads/` appeared) are not
    // this one's.
    let prior = prior.filter(|(k, _)| *k == kind).map(|(_, a)| a);
    let recording = record.is_some();
    let read = match reuse::read_tracker(
        &*tracker,
        prior,
        stamps.as_deref(),
        recording,
        eligible,
        now,
    ) {
        Ok(read) => read,
        Err(e) => {
            for id in &wanted.beads {
                view.beads.insert((*id).clone(), BeadLookup::Unknown);
            }
            view.stories = listed_stories();
            view.tracker_error = Some(e.to_string());
            report.error = Some(e.to_string());
            return done(view, report, Some(tracker), record);
        }
    };
    let files = if hit { "unchanged" } else { "read" };
    tracing::debug!(project = slug, files, reads = %read.path, "tracker read");
    if let Some(r) = &mut record {
        r.answers = read.answers.map(|a| (kind, a));
    }
    // Each bead's status (the last listed wins, as a map would keep it), sorted for lookup.
    let mut by_id: Vec<(&BeadId, std::cmp::Reverse<usize>, BeadStatus)> = (read.beads.iter())
        .enumerate()
        .map(|(i, (id, s))| (id, std::cmp::Reverse(i), *s))
        .collect();
    by_id.sort_unstable_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
    by_id.dedup_by(|later, kept| later.0 == kept.0);
    let status = |id: &BeadId| match by_id.binary_search_by(|(b, _, _)| (*b).cmp(id)) {
        Ok(at) => Some(by_id[at].2),
        Err(_) => None,
    };
    for id in &wanted.beads {
        let l = status(id).map_or(BeadLookup::Missing, BeadLookup::Known);
        view.beads.insert((*id).clone(), l);
    }
    report.counts = Some(counts(&read.beads));
    report.blocked = read
        .beads
        .iter()
        .filter(|(_, s)| *s == BeadStatus::Blocked)
        .map(|(b, _)| b.clone())
        .collect();
    if dashboard && !report.blocked.is_empty() {
        let wanted = report.blocked.iter().map(BeadId::as_str).collect();
        report.waiting =
            crate::events::waiting::waiting(&crate::events::Journal::of_project(root), &wanted);
    }
    let mut unknown = Vec::new();
    // The in-scope stories of a protocol project, whose dependencies the tick follows.
    let mut scoped: Vec<(BeadId, String)> = Vec::new();
    // A milestone's Stories are its issues: the tracker's listing is kept a moment, so this
    // asks the forge nothing more.
    let of_milestone = shown
        .filter(|it| it.milestone.is_some())
        .and_then(|it| it.milestone_stories(&tracker.list().unwrap_or_default()));
    if let Some(it) = shown {
        let known = |id: &BeadId| status(id).is_some();
        let stories = match &of_milestone {
            Some(own) => own.iter().collect(),
            None => it.stories_known(known),
        };
        // Only STATUS.md and `braids status` show them, with their titles.
        if dashboard {
            report.stories = stories
                .iter()
                .map(|s| (s.id.clone(), s.title.clone(), status(&s.id)))
                .collect();
        }
        if eligible {
            // plain-word ids (`readme`) the tracker knows are stories too
            view.stories = stories.iter().map(|s| s.id.clone()).collect();
            view.scope_named = of_milestone.is_some();
            scoped = stories
                .iter()
                .map(|s| (s.id.clone(), s.title.clone()))
                .collect();
        }
        unknown = crate::format::iteration::unknown_stories(it, known, kind.as_str())
            .into_iter()
            .map(|(s, problem)| UnknownStory {
                bead: s.id.clone(),
                problem,
            })
            .collect();
    }
    report.unknown_stories = Some(unknown);

    if crate::protocol::Pipeline::of(&config) == crate::protocol::Pipeline::Protocol {
        match crate::protocol::overrides::load(root) {
            Ok(rules) => {
                let (views, lines) = protocol_views(&entry.slug, root, &rules);
                view.protocol = views;
                view.single_state = crate::protocol::single::Layout::of(&config)
                    == crate::protocol::single::Layout::Single;
                report.protocol = lines;
            }
            // A rules table that cannot be read holds the project; the others go on.
            Err(p) => {
                report.note = Some(format!("no worker can start: {}", p.sentence()));
                view.preflight_error = Some(p.sentence());
            }
        }
    }

    // `ready` wherever an open bead could be: with a free slot it is what to spawn, at
    // capacity it is what makes the idle reason `all-at-capacity` rather than `no-ready-beads`.
    match read.ready {
        Some(Ok(ready)) => {
            // Iteration scope (5.1): ready beads the Stories do not list are only counted.
            let in_scope =
                |b: &&Bead| crate::tick::decide::in_scope(&view.stories, view.scope_named, &b.id);
            let out = ready.iter().filter(|b| !in_scope(b)).count();
            report.ready = ready.len() - out;
            report.ready_out_of_scope = out;
            // Only the beads `decide` can reach: its slots and stand-ins, past the ones it must
            // skip (beads with a live session or a claim). A project's whole ready list, kept
            // for every project until the plan is made, was most of a large tick's memory.
            let reach = view.max_workers as usize
                + crate::tick::decide::STAND_INS
                + wanted.sessions
                + wanted.claims
                + unreadable;
            let mut seen = BTreeSet::new();
            view.ready = Vec::with_capacity(reach.min(ready.len()));
            view.ready.extend(
                crate::tick::decide::spawn_order(&view.stories, &ready)
                    .into_iter()
                    .filter(|b| in_scope(b) && b.status == BeadStatus::Open && seen.insert(&b.id))
                    .take(reach)
                    // Id, title and status: all `decide` reads of a bead.
                    .map(|b| Bead::new(b.id.clone(), b.title.clone(), b.status)),
            );
            if crate::protocol::Pipeline::of(&config) == crate::protocol::Pipeline::Protocol {
                let ready: BTreeSet<&BeadId> = ready.iter().map(|b| &b.id).collect();
                view.dependencies = story_waits(&*tracker, &scoped, &ready, status);
            }
        }
        Some(Err(e)) => {
            view.tracker_error = Some(e.to_string());
            report.error = Some(e.to_string());
        }
        None => {}
    }
    done(view, report, Some(tracker), record)
}

/// Beads by status, as STATUS.md counts them (one key per status present).
fn counts(beads: &[(BeadId, BeadStatus)]) -> BTreeMap<String, usize> {
    let mut by: Vec<(BeadStatus, usize)> = Vec::new();
    for (_, s) in beads {
        match by.iter_mut().find(|(k, _)| k == s) {
            Some((_, n)) => *n += 1,
            None => by.push((*s, 1)),
        }
    }
    by.into_iter()
        .map(|(s, n)| (s.as_str().to_string(), n))
        .collect()
}

/// The open dependencies of each open in-scope story: none for a ready one, else asked of
/// the tracker (`show`, only for open stories it does not list ready: the few that wait).
fn story_waits(
    tracker: &dyn Tracker,
    scoped: &[(BeadId, String)],
    ready: &BTreeSet<&BeadId>,
    status: impl Fn(&BeadId) -> Option<BeadStatus>,
) -> BTreeMap<BeadId, crate::protocol::deps::Waits> {
    use crate::protocol::deps::{open_of, Waits};
    let mut out = BTreeMap::new();
    for (id, title) in scoped {
        if status(id) != Some(BeadStatus::Open) {
            continue;
        }
        let open = match ready.contains(id) {
            true => Vec::new(),
            false => match tracker.show(id) {
                Ok(Some(b)) => open_of(&b.dependencies, &status),
                _ => continue,
            },
        };
        out.insert(
            id.clone(),
            Waits {
                open,
                first: crate::protocol::Step::first_of(title),
            },
        );
    }
    out
}

/// What the tick needs of each protocol story with a state file (invalid ones are the
/// worker's to hold).
fn protocol_views(
    slug: &str,
    root: &std::path::Path,
    rules: &crate::protocol::Rules,
) -> (
    BTreeMap<BeadId, crate::protocol::tick::StoryView>,
    Vec<crate::protocol::tick::StoryLine>,
) {
    use crate::protocol::{story_state, team, tick};
    let mut views = BTreeMap::new();
    let mut lines = Vec::new();
    for (bead, loaded) in story_state::load_all(root) {
        if let story_state::Loaded::Valid(s) = &loaded {
            let mode = match story_state::is_team(root, &bead) {
                true => team::Mode::Team,
                false => team::Mode::Single,
            };
            if s.is_done() {
                views.insert(bead, tick::view(s, rules, mode));
                continue;
            }
            views.insert(bead.clone(), tick::view(s, rules, mode));
        }
        lines.extend(tick::line(slug, bead.as_str(), &loaded));
    }
    (views, lines)
}
