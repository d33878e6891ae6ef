//! A month unattended, in simulated time. 20 projects receive beads over the
//! month; their agents fail, hang, crash or forget their report; the model provider is down for
//! two hours on day 10, the git remote for an hour on day 20, the disk is full for ten minutes
//! on day 15. A cron tick runs every minute under the real idle backoff.
//!
//! Everything that decides is braids' own code, called as the tick and the worker call it:
//! `decide` (zombies with the stall and the timeout, slots, the retry backoff, the breaker's
//! gate, the release-storm guard), `retry::Attempts` (a failed attempt and the per-bead
//! breaker), `breaker::assess` and `breaker::signature`, `tick::decide::kill_failure`,
//! `retention::plan`, and the state's `run_kind`, `after_run` and `settle_claims`. The model is
//! the world around them: a tracker, worker processes, the log files, the clock.
//!
//! Checked at every tick: no bead has two live workers, no project runs more than MaxWorkers,
//! every in-progress bead has a worker or a claim that will release it, the logs stay within
//! the retention bound. At the end: every bead is done or blocked with a reason, no claim is
//! left, no bead in progress, and nobody blocked a bead for the provider's outage.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use braids::model::{Bead, BeadId, BeadStatus, Priority, SessionLabel};
use braids::retry::breaker::{self, BreakerPolicy};
use braids::retry::{AfterFailure, Attempts, Failure, Policy};
use braids::session::{BackendKind, Session};
use braids::tick::decide::{self, Eligibility, ProjectView, Slot, Snapshot, ZombieReason};
use braids::tick::observe::lookups::bead_lookups;
use braids::tick::orchestrator_state::{Claim, OrchestratorState, RunKind};
use braids::tick::tell::retention;
use chrono::{DateTime, Duration, TimeZone, Utc};

use crate::generator::Rng;

pub struct SoakConfig {
    pub seed: u64,
    pub days: i64,
    pub projects: usize,
    pub beads: usize,
}

#[derive(Debug, Default, Clone)]
pub struct SoakReport {
    pub ticks: usize,
    pub skipped: usize,
    pub spawns: usize,
    pub done: usize,
    pub blocked: usize,
    pub failed_attempts: usize,
    pub provider_failures: usize,
    pub stalled_kills: usize,
    pub timeout_kills: usize,
    pub releases: usize,
    pub breaker_opened: usize,
    pub breaker_closed: usize,
    pub push_failures: usize,
    pub retention_removed: usize,
    pub most_log_bytes: u64,
    pub blocked_in_outage: usize,
    pub violations: Vec<String>,
}

impl SoakReport {
    /// Sums the counts of several runs (the largest log total).
    pub fn add(&mut self, r: &SoakReport) {
        self.ticks += r.ticks;
        self.skipped += r.skipped;
        self.spawns += r.spawns;
        self.done += r.done;
        self.blocked += r.blocked;
        self.failed_attempts += r.failed_attempts;
        self.provider_failures += r.provider_failures;
        self.stalled_kills += r.stalled_kills;
        self.timeout_kills += r.timeout_kills;
        self.releases += r.releases;
        self.breaker_opened += r.breaker_opened;
        self.breaker_closed += r.breaker_closed;
        self.push_failures += r.push_failures;
        self.retention_removed += r.retention_removed;
        self.most_log_bytes = self.most_log_bytes.max(r.most_log_bytes);
        self.blocked_in_outage += r.blocked_in_outage;
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Fate {
    Pass,
    Fail,
    Hang,
    Crash,
    NoReport,
}

struct SimBead {
    id: BeadId,
    status: BeadStatus,
    reason: Option<String>,
    arrives: DateTime<Utc>,
}

struct Project {
    slug: String,
    path: PathBuf,
    max_workers: u32,
    beads: Vec<SimBead>,
}

struct Worker {
    project: usize,
    bead: BeadId,
    label: SessionLabel,
    id: String,
    started: DateTime<Utc>,
    ends: DateTime<Utc>,
    fate: Fate,
    running: bool,
    log: usize,
}

struct LogFile {
    path: PathBuf,
    bead: (String, String),
    modified: DateTime<Utc>,
    size: u64,
    gone: bool,
}

const WORKER_TIMEOUT: u64 = 3600;
const STALL: u64 = 900;

fn start() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap()
}

fn window(day: i64, hour: i64, minutes: i64) -> (DateTime<Utc>, DateTime<Utc>) {
    let from = start() + Duration::days(day) + Duration::hours(hour);
    (from, from + Duration::minutes(minutes))
}

fn within(t: DateTime<Utc>, w: (DateTime<Utc>, DateTime<Utc>)) -> bool {
    w.0 <= t && t < w.1
}

pub struct Soak {
    rng: Rng,
    now: DateTime<Utc>,
    end: DateTime<Utc>,
    projects: Vec<Project>,
    workers: Vec<Worker>,
    logs: Vec<LogFile>,
    state: OrchestratorState,
    attempts: Attempts,
    policy: Policy,
    breaker: BreakerPolicy,
    retention: retention::Policy,
    outage: (DateTime<Utc>, DateTime<Utc>),
    disk_full: (DateTime<Utc>, DateTime<Utc>),
    remote_down: (DateTime<Utc>, DateTime<Utc>),
    retention_at: Option<DateTime<Utc>>,
    next_id: usize,
    pub report: SoakReport,
}

impl Soak {
    pub fn new(c: &SoakConfig) -> Soak {
        let mut rng = Rng::new(c.seed);
        let arrivals = Duration::hours((c.days * 24 * 9 / 10).max(12));
        let mut projects: Vec<Project> = (0..c.projects)
            .map(|i| Project {
                slug: format!("p{i:02}"),
                path: PathBuf::from(format!("/soak/p{i:02}")),
                max_workers: 1 + (i % 3) as u32,
                beads: Vec::new(),
            })
            .collect();
        for n in 0..c.beads {
            let p = rng.below(projects.len());
            let at = start() + Duration::seconds(rng.range(0, arrivals.num_seconds()));
            let slug = projects[p].slug.clone();
            projects[p].beads.push(SimBead {
                id: BeadId::new(&format!("{slug}-{n}")).unwrap(),
                status: BeadStatus::Open,
                reason: None,
                arrives: at,
            });
        }
        for p in &mut projects {
            p.beads.sort_by_key(|b| b.arrives);
        }
        Soak {
            rng,
            now: start(),
            end: start() + Duration::days(c.days),
            projects,
            workers: Vec::new(),
            logs: Vec::new(),
            state: OrchestratorState::default(),
            attempts: Attempts::default(),
            policy: Policy {
                retries: 2,
                base: Duration::minutes(1),
                cap: Duration::hours(1),
            },
            breaker: BreakerPolicy::default(),
            retention: retention::Policy {
                max_age: Duration::days(7),
                max_total: 200 * 1024 * 1024,
            },
            // Day 10, 15 and 20 of a month; a shorter run keeps them in the same proportion.
            outage: window(c.days / 3, 2, 120),
            disk_full: window(c.days / 2, 10, 10),
            remote_down: window(c.days * 2 / 3, 12, 60),
            retention_at: None,
            next_id: 0,
            report: SoakReport::default(),
        }
    }

    /// Runs the month, then up to three more days for the last beads, and checks the end.
    pub fn run(mut self) -> SoakReport {
        let drain = self.end + Duration::days(3);
        while self.now < drain && self.report.violations.is_empty() {
            self.workers_finish();
            self.tick();
            self.now += Duration::minutes(1);
            if self.now >= self.end && self.settled() {
                break;
            }
        }
        self.check_end();
        self.report
    }

    fn settled(&self) -> bool {
        self.workers.iter().all(|w| !w.running)
            && self.projects.iter().all(|p| {
                p.beads
                    .iter()
                    .all(|b| matches!(b.status, BeadStatus::Closed | BeadStatus::Blocked))
            })
    }

    fn bead_mut(&mut self, p: usize, id: &BeadId) -> &mut SimBead {
        self.projects[p]
            .beads
            .iter_mut()
            .find(|b| &b.id == id)
            .unwrap()
    }

    fn block(&mut self, p: usize, id: &BeadId, reason: String) {
        if within(self.now, self.outage) && reason.contains("provider") {
            self.report.blocked_in_outage += 1;
        }
        let b = self.bead_mut(p, id);
        b.status = BeadStatus::Blocked;
        b.reason = Some(reason);
    }

    /// A failed attempt as `attempts.json` records it; the bead goes back to open or is
    /// blocked.
    fn failed(&mut self, p: usize, id: &BeadId, f: Failure, claimed_at: Option<DateTime<Utc>>) {
        let dir = self.projects[p].path.clone();
        if claimed_at.is_some_and(|t| self.attempts.failed_since(&dir, id, t)) {
            self.bead_mut(p, id).status = BeadStatus::Open;
            return;
        }
        self.report.failed_attempts += 1;
        // A worker's own failure is an agent's outcome; a release is the tick's observation.
        let agent = claimed_at.is_none();
        let verdict = self.attempts.fail(&dir, id, f, &self.policy, agent);
        let failures = match &verdict {
            AfterFailure::Retry { .. } => self.attempts.record(&dir, id).unwrap().failures.clone(),
            AfterFailure::Block { failures, .. } => failures.clone(),
        };
        // Failures the provider caused, or made while the breaker is open, never count (a
        // crash in the outage before the breaker opened is the bead's like any other).
        let open_since = self.attempts.breaker.open_since;
        let outage = self.outage;
        let outage_failure = |f: &Failure| {
            within(f.at, outage)
                && (f.signature.as_deref().is_some_and(breaker::is_provider)
                    || open_since.is_some_and(|t| f.at >= t))
        };
        if let Some(f) = failures.iter().find(|f| f.counts && outage_failure(f)) {
            self.fail(format!(
                "a failure in the provider outage counts against {id}: {f:?} (breaker open since {open_since:?})"
            ));
        }
        match verdict {
            AfterFailure::Retry { .. } => self.bead_mut(p, id).status = BeadStatus::Open,
            AfterFailure::Block { reason, .. } => self.block(p, id, reason),
        }
    }

    /// Workers whose run ends now: the worker's own steps after the agent.
    fn workers_finish(&mut self) {
        for i in 0..self.workers.len() {
            let w = &self.workers[i];
            if !w.running || w.ends > self.now {
                continue;
            }
            let (p, bead, fate, log) = (w.project, w.bead.clone(), w.fate, w.log);
            self.workers[i].running = false;
            self.logs[log].modified = self.now;
            let dir = self.projects[p].path.clone();
            if fate == Fate::Crash {
                continue; // gone without a word: its claim is stranded
            }
            if within(self.now, self.disk_full) {
                // Nothing can be written, not even the attempt: the worker gives the bead up.
                self.block(p, &bead, "worker error: no space left on device".into());
                continue;
            }
            let provider_down = within(self.now, self.outage);
            if provider_down || fate == Fate::Fail {
                let tail = if provider_down {
                    "Error: 429 Too Many Requests"
                } else {
                    "tests failed"
                };
                let (signature, retry_after_secs) =
                    breaker::signature(Some(1), false, tail, &self.breaker.patterns);
                if provider_down {
                    self.report.provider_failures += 1;
                }
                let f = Failure {
                    signature,
                    retry_after_secs,
                    ..Failure::new(self.now, "exit 1, status failing")
                };
                self.failed(p, &bead, f, None);
                continue;
            }
            // Pass, or exit 0 with a deliverable and no report (taken as a pass).
            self.attempts.succeed(&dir, &bead, self.now);
            self.bead_mut(p, &bead).status = BeadStatus::Closed;
            if within(self.now, self.remote_down) {
                self.report.push_failures += 1; // pushed by a later tick
            }
        }
    }

    fn snapshot(&self) -> Snapshot {
        let sessions: Vec<Session> = self
            .workers
            .iter()
            .filter(|w| w.running)
            .map(|w| Session {
                label: w.label.clone(),
                id: w.id.clone(),
                backend: BackendKind::Process,
                pid: Some(1),
                started_at: w.started,
                running: true,
                worker_gone: false,
                queued: false,
                ended: None,
                log: None,
            })
            .collect();
        let views = self
            .projects
            .iter()
            .map(|p| {
                // The beads observe asks the tracker about, by observe's own rule.
                let wanted = bead_lookups(&p.slug, &p.path, &sessions, &self.state.claims);
                let status = |id: &BeadId| {
                    let b = p.beads.iter().find(|b| &b.id == id).unwrap();
                    decide::BeadLookup::Known(b.status)
                };
                ProjectView::builder(p.slug.clone(), p.path.clone())
                    .priority(Priority::Normal)
                    .max_workers(p.max_workers)
                    .worker_timeout(WORKER_TIMEOUT)
                    .stall_timeout(STALL)
                    .eligibility(Eligibility::Eligible {
                        iteration: 1.into(),
                    })
                    .ready(
                        (p.beads.iter())
                            .filter(|b| b.arrives <= self.now && b.status == BeadStatus::Open)
                            .map(|b| Bead::new(b.id.clone(), "work", BeadStatus::Open)),
                    )
                    .beads(wanted.beads.into_iter().map(|id| (id.clone(), status(id))))
                    .build()
            })
            .collect();
        // A working agent prints; a hung one has been silent since its start.
        let activity = self
            .workers
            .iter()
            .filter(|w| w.running && w.fate != Fate::Hang)
            .map(|w| (w.label.to_string(), self.now - Duration::minutes(1)))
            .collect();
        let waiting = self.attempts.waiting();
        Snapshot {
            projects: views,
            sessions,
            claims: self.state.claims.clone(),
            global_max_workers: 0,
            orphan_timeout_secs: WORKER_TIMEOUT,
            claim_grace: Duration::seconds(120),
            unreadable: Vec::new(),
            allow_mass_kill: false,
            waiting,
            activity,
            finishing: Default::default(),
            gate: self.attempts.breaker.gate(self.now),
            next_probe: self.attempts.breaker.next_probe,
            held_before: self.state.held_claims.clone(),
            story_claims: Default::default(),
        }
    }

    fn fate(&mut self) -> (Fate, i64) {
        let roll = self.rng.below(100);
        let minutes = self.rng.range(5, 50);
        match roll {
            0..20 => (Fate::Fail, minutes),
            20..25 => (Fate::Hang, 100_000),
            25..30 => (Fate::Crash, self.rng.range(1, 30)),
            30..40 => (Fate::NoReport, minutes),
            _ => (Fate::Pass, minutes),
        }
    }

    fn tick(&mut self) {
        let now = self.now;
        if let RunKind::Skipped { .. } = self.state.run_kind(now, false) {
            self.report.skipped += 1;
            return;
        }
        self.report.ticks += 1;
        // The breaker looks at the outcomes (RetryEdge::observe), old records are pruned.
        let t = self.attempts.assess(&self.breaker, now);
        match t {
            Some(breaker::Transition::Opened { .. }) => self.report.breaker_opened += 1,
            Some(breaker::Transition::Closed { .. }) => self.report.breaker_closed += 1,
            None => {}
        }
        self.attempts.prune(now, Duration::days(30));

        let snap = self.snapshot();
        let plan = decide::decide(&snap, now);
        let by_slug: BTreeMap<String, usize> = self
            .projects
            .iter()
            .enumerate()
            .map(|(i, p)| (p.slug.clone(), i))
            .collect();

        // act: kill, release, claim and spawn
        for z in &plan.zombies {
            if let Some(w) = self.workers.iter_mut().find(|w| w.id == z.session.id) {
                w.running = false;
                self.logs[w.log].modified = now;
            }
            match z.reason {
                ZombieReason::Stalled => self.report.stalled_kills += 1,
                ZombieReason::Timeout => self.report.timeout_kills += 1,
                _ => {}
            }
            if let Some((owner, f)) = braids::tick::decide::kill_failure(z, now) {
                let p = by_slug[&owner.slug];
                let dir = owner.path.clone();
                self.report.failed_attempts += 1;
                if let AfterFailure::Block { reason, .. } =
                    self.attempts
                        .fail(&dir, z.session.label.bead(), f, &self.policy, false)
                {
                    self.block(p, z.session.label.bead(), reason);
                }
            }
        }
        for r in &plan.releases {
            self.report.releases += 1;
            let p = by_slug[&r.slug];
            let f = Failure::new(now, "the worker ended before finishing");
            self.failed(p, &r.bead, f, Some(r.claim.claimed_at));
        }
        let mut new_claims = Vec::new();
        let mut starts = Vec::new();
        plan.walk(|c| {
            starts.push((c.slug.clone(), c.bead.clone(), c.label()));
            Slot::Taken
        });
        for (slug, bead, label) in starts {
            let p = by_slug[&slug];
            self.bead_mut(p, &bead).status = BeadStatus::InProgress;
            let (fate, minutes) = self.fate();
            self.next_id += 1;
            self.logs.push(LogFile {
                path: PathBuf::from(format!("logs/{label}-{}", self.next_id)),
                bead: (slug.clone(), bead.to_string()),
                modified: now,
                size: 20_000 + self.rng.below(480_000) as u64,
                gone: false,
            });
            self.workers.push(Worker {
                project: p,
                bead: bead.clone(),
                label,
                id: format!("w{}", self.next_id),
                started: now,
                ends: now + Duration::minutes(minutes),
                fate,
                running: true,
                log: self.logs.len() - 1,
            });
            new_claims.push(Claim {
                project: slug,
                path: Some(self.projects[p].path.clone()),
                bead,
                claimed_at: now,
            });
            self.report.spawns += 1;
        }
        if plan.probe && !new_claims.is_empty() {
            self.attempts.breaker.probing_since = Some(now);
        }

        // persist
        let mut next = self
            .state
            .after_run(now, !new_claims.is_empty(), plan.idle_reason);
        next.settle_claims(plan.settled(), plan.upgraded(), &new_claims);
        next.held_claims = plan.held.iter().map(decide::held_key).collect();
        next.next_run_by = plan.wake_at;
        self.state = next;
        self.retain();
        self.check();
    }

    /// Retention, once an hour, as the tick applies it.
    fn retain(&mut self) {
        if self
            .retention_at
            .is_some_and(|t| self.now - t < retention::EVERY)
        {
            return;
        }
        self.retention_at = Some(self.now);
        let mut keep: BTreeSet<(String, String)> = self
            .workers
            .iter()
            .filter(|w| w.running)
            .map(|w| (self.projects[w.project].slug.clone(), w.bead.to_string()))
            .collect();
        keep.extend(
            self.state
                .claims
                .iter()
                .map(|c| (c.project.clone(), c.bead.to_string())),
        );
        for p in &self.projects {
            for b in p.beads.iter().filter(|b| b.status == BeadStatus::Blocked) {
                keep.insert((p.slug.clone(), b.id.to_string()));
            }
        }
        let items: Vec<retention::Item> = self
            .logs
            .iter()
            .filter(|l| !l.gone)
            .map(|l| retention::Item {
                path: l.path.clone(),
                bead: l.bead.clone(),
                modified: l.modified,
                size: l.size,
            })
            .collect();
        let remove: BTreeSet<PathBuf> = retention::plan(&items, &keep, &self.retention, self.now)
            .into_iter()
            .collect();
        self.report.retention_removed += remove.len();
        for l in self.logs.iter_mut().filter(|l| remove.contains(&l.path)) {
            l.gone = true;
        }
        let kept_bytes: u64 = self.logs.iter().filter(|l| !l.gone).map(|l| l.size).sum();
        let protected_bytes: u64 = self
            .logs
            .iter()
            .filter(|l| !l.gone && keep.contains(&l.bead))
            .map(|l| l.size)
            .sum();
        self.report.most_log_bytes = self.report.most_log_bytes.max(kept_bytes);
        if kept_bytes > self.retention.max_total.max(protected_bytes) {
            self.fail(format!("logs hold {kept_bytes} bytes after retention"));
        }
        for l in self
            .logs
            .iter()
            .filter(|l| !l.gone && !keep.contains(&l.bead))
        {
            if self.now - l.modified > self.retention.max_age {
                let path = l.path.display().to_string();
                self.fail(format!("{path} outlived the retention age"));
                break;
            }
        }
    }

    fn fail(&mut self, what: String) {
        self.report.violations.push(format!(
            "day {} {}: {what}",
            (self.now - start()).num_days(),
            self.now.format("%H:%M")
        ));
    }

    fn check(&mut self) {
        let mut live: BTreeMap<(usize, &BeadId), usize> = BTreeMap::new();
        for w in self.workers.iter().filter(|w| w.running) {
            *live.entry((w.project, &w.bead)).or_default() += 1;
        }
        let mut problems = Vec::new();
        if let Some(((p, b), n)) = live.iter().find(|(_, n)| **n > 1) {
            problems.push(format!(
                "{}:{b} has {n} live workers",
                self.projects[*p].slug
            ));
        }
        for (i, p) in self.projects.iter().enumerate() {
            let running = live.keys().filter(|(q, _)| *q == i).count();
            if running > p.max_workers as usize {
                problems.push(format!(
                    "{} runs {running} workers, MaxWorkers {}",
                    p.slug, p.max_workers
                ));
            }
            for b in p
                .beads
                .iter()
                .filter(|b| b.status == BeadStatus::InProgress)
            {
                let held = live.contains_key(&(i, &b.id))
                    || self
                        .state
                        .claims
                        .iter()
                        .any(|c| c.bead == b.id && c.belongs_to(&p.slug, &p.path));
                if !held {
                    problems.push(format!(
                        "{}:{} is in progress with no worker and no claim (leaked)",
                        p.slug, b.id
                    ));
                }
            }
        }
        for p in problems {
            self.fail(p);
        }
    }

    fn check_end(&mut self) {
        let mut problems = Vec::new();
        for p in &self.projects {
            for b in &p.beads {
                match b.status {
                    BeadStatus::Closed => self.report.done += 1,
                    BeadStatus::Blocked if b.reason.as_deref().is_some_and(|r| !r.is_empty()) => {
                        self.report.blocked += 1
                    }
                    s => problems.push(format!(
                        "{}:{} ended {s:?} (reason {:?})",
                        p.slug, b.id, b.reason
                    )),
                }
            }
        }
        if !self.state.claims.is_empty() {
            problems.push(format!(
                "{} claims left: {:?}",
                self.state.claims.len(),
                self.state.claims
            ));
        }
        if self.report.blocked_in_outage > 0 {
            problems.push(format!(
                "{} beads blocked for the provider outage",
                self.report.blocked_in_outage
            ));
        }
        // An outage that hit enough spawns opens the breaker, and it closes again once the
        // provider is back (an outage at a quiet hour may hit fewer than its window).
        let enough = self.report.provider_failures >= 2 * self.breaker.window;
        if enough && (self.report.breaker_opened == 0 || self.report.breaker_closed == 0) {
            problems.push(format!(
                "{} spawns failed in the outage, yet the breaker opened {} and closed {} times",
                self.report.provider_failures,
                self.report.breaker_opened,
                self.report.breaker_closed
            ));
        }
        for p in problems {
            self.fail(p);
        }
    }
}
