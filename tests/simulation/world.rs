//! The model world: projects (registry rows, PROJECT.md and ITERATION.md text, read by the
//! real readers), beads in a model tracker that enforces the lifecycle, worker sessions, a
//! clock and the orchestrator state; and the edits people make to its files.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use braids::format::iteration::{parse_iteration, set_status, Iteration};
use braids::format::project::{parse_project, ProjectConfig};
use braids::format::registry::{parse_registry, RegistryEntry};
use braids::model::{Bead, BeadId, BeadStatus, IterationStatus, SessionLabel};
use braids::system::paths::Paths;
use braids::tick::orchestrator_state::OrchestratorState;
use chrono::{DateTime, Duration, TimeZone, Utc};

use crate::generator::{gen_iteration_md, gen_project_md, mangle, new_bead, ProjectExpect, Rng};
use crate::tick::Mutation;
use crate::Fail;

// ---------------------------------------------------------------------------------------------
// The model world

#[derive(Debug, Clone)]
pub struct BeadM {
    pub id: BeadId,
    pub status: BeadStatus,
    pub assignee: Option<String>,
    pub deps: Vec<BeadId>,
    pub deleted: bool,
    pub priority: u8,
}

#[derive(Debug, Clone)]
pub struct IterM {
    pub number: u32,
    pub text: String,
    pub status: Option<IterationStatus>,
    pub stories: Vec<BeadId>,
    /// The text when it became complete; it must never change again (4.5).
    pub frozen: Option<String>,
}

#[derive(Debug, Clone)]
pub struct ProjM {
    pub slug: String,
    pub path: PathBuf,
    pub md: String,
    pub cfg: ProjectConfig,
    pub iters: Vec<IterM>,
    /// What the reader made of each of `iters` (same order): what observe hands the real
    /// `eligibility_of`.
    pub read: Vec<Iteration>,
    pub beads: Vec<BeadM>,
    pub next_bead: usize,
    /// The tracker fails every call this tick.
    pub tracker_down: bool,
    /// A bead the tracker wrongly reports as ready (a stale answer) this tick.
    pub stale_ready: Option<BeadId>,
    /// What the registry is meant to say about the project.
    pub reg_status: &'static str,
    pub reg_priority: &'static str,
    /// Every slug it was scheduled under (a mangled registry can rename it for a while).
    pub aliases: BTreeSet<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Behaviour {
    Finish,
    Block,
    Crash,
    Hang,
}

#[derive(Debug, Clone)]
pub struct SessM {
    pub label: SessionLabel,
    pub id: String,
    pub started: DateTime<Utc>,
    pub running: bool,
    pub behaviour: Behaviour,
    /// When the worker does its last step.
    pub done_at: DateTime<Utc>,
    /// A finished worker that keeps running this long after closing its bead (a zombie).
    pub linger: Option<Duration>,
    /// Its record cannot be read this tick (the backend reports only the label).
    pub unreadable: bool,
}

#[derive(Debug, Default, Clone, Copy)]
pub struct Stats {
    pub steps: usize,
    pub ticks: usize,
    pub skipped: usize,
    pub spawns: usize,
    pub kills: usize,
    pub releases: usize,
    pub refused_claims: usize,
    pub several_active: usize,
    pub garbage_edits: usize,
    /// Slugs renamed in the registry while a worker of the project ran.
    pub renames_while_running: usize,
    pub clock_back: usize,
    pub completed_iterations: usize,
    /// Idle reasons the oracle checked: no-active-iterations, no-ready-beads, all-at-capacity.
    pub idle_checked: [usize; 3],
    pub global_capped: usize,
}

impl std::ops::AddAssign for Stats {
    fn add_assign(&mut self, o: Stats) {
        self.steps += o.steps;
        self.ticks += o.ticks;
        self.skipped += o.skipped;
        self.spawns += o.spawns;
        self.kills += o.kills;
        self.releases += o.releases;
        self.refused_claims += o.refused_claims;
        self.several_active += o.several_active;
        self.garbage_edits += o.garbage_edits;
        self.renames_while_running += o.renames_while_running;
        self.clock_back += o.clock_back;
        self.completed_iterations += o.completed_iterations;
        for i in 0..3 {
            self.idle_checked[i] += o.idle_checked[i];
        }
        self.global_capped += o.global_capped;
    }
}

pub struct World {
    pub rng: Rng,
    pub mutation: Mutation,
    pub now: DateTime<Utc>,
    pub paths: Paths,
    pub projects: Vec<ProjM>,
    pub registry_text: String,
    /// Whether registry_text is exactly what the generator wrote (not mangled).
    pub registry_exact: bool,
    pub registry: Vec<RegistryEntry>,
    pub sessions: Vec<SessM>,
    pub next_session: u64,
    pub state: OrchestratorState,
    pub global_max: u32,
    pub claim_grace: Duration,
    pub trace: Vec<String>,
    pub keep_full_trace: bool,
    pub stats: Stats,
}

pub const ACTOR: &str = "braids";
pub const SLUGS: [&str; 5] = ["alpha", "beta", "gamma-2", "d", "web-app"];

pub fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 3, 1, 9, 0, 0).unwrap()
}

pub fn id(s: &str) -> BeadId {
    BeadId::new(s).unwrap()
}

// ---------------------------------------------------------------------------------------------
// The world

impl World {
    #[allow(clippy::result_large_err)]
    pub fn new(
        seed: u64,
        mutation: Mutation,
        keep_full_trace: bool,
    ) -> Result<World, (World, Fail)> {
        let mut rng = Rng::new(seed);
        let n = rng.range(1, 4) as usize;
        let paths = Paths::new(PathBuf::from("/home/sim"), None);
        let mut projects = Vec::new();
        for slug in SLUGS.iter().take(n) {
            let (md, _) = gen_project_md(&mut rng, slug);
            let cfg = parse_project(&md, Path::new("PROJECT.md")).value;
            let mut p = ProjM {
                slug: slug.to_string(),
                path: PathBuf::from(format!("/sim/{slug}")),
                md,
                cfg,
                iters: Vec::new(),
                read: Vec::new(),
                beads: Vec::new(),
                next_bead: 1,
                tracker_down: false,
                stale_ready: None,
                reg_status: "active",
                reg_priority: "normal",
                aliases: BTreeSet::from([slug.to_string()]),
            };
            for _ in 0..rng.range(0, 5) {
                let b = new_bead(&mut rng, &mut p);
                p.beads.push(b);
            }
            projects.push(p);
        }
        let mut w = World {
            rng,
            mutation,
            now: t0(),
            paths,
            projects,
            registry_text: String::new(),
            registry_exact: true,
            registry: Vec::new(),
            sessions: Vec::new(),
            next_session: 1,
            state: OrchestratorState::default(),
            global_max: 0,
            claim_grace: Duration::seconds(120),
            trace: Vec::new(),
            keep_full_trace,
            stats: Stats::default(),
        };
        for i in 0..w.projects.len() {
            // most projects start with an active iteration over their beads
            let status = if w.rng.pct(75) { "active" } else { "planning" };
            if let Err(f) = w.new_iteration(i, status) {
                return Err((w, f));
            }
        }
        w.rewrite_registry(false);
        if let Err(f) = w.check_registry_reading() {
            return Err((w, f));
        }
        Ok(w)
    }

    pub fn log(&mut self, s: String) {
        self.trace
            .push(format!("[{}] {s}", self.now.format("%d %H:%M:%S")));
        if !self.keep_full_trace && self.trace.len() > 40 {
            self.trace.remove(0);
        }
    }

    // ---- the model tracker (enforces 4.6 like the adapters do) ----

    /// Moves a bead; refuses what 4.6 forbids. `by_braids` marks moves braids asked for.
    pub fn transition(
        &mut self,
        p: usize,
        bead: &BeadId,
        to: BeadStatus,
        assignee: Option<&str>,
    ) -> bool {
        let Some(b) = self.projects[p]
            .beads
            .iter_mut()
            .find(|b| &b.id == bead && !b.deleted)
        else {
            return false;
        };
        if !b.status.can_become(to) || b.status == to {
            return false;
        }
        b.status = to;
        b.assignee = assignee.map(String::from);
        true
    }

    pub fn bead(&self, p: usize, bead: &BeadId) -> Option<&BeadM> {
        self.projects[p]
            .beads
            .iter()
            .find(|b| &b.id == bead && !b.deleted)
    }

    pub fn is_closed_or_gone(&self, p: usize, bead: &BeadId) -> bool {
        self.bead(p, bead)
            .is_none_or(|b| b.status == BeadStatus::Closed)
    }

    /// The tracker's ready list: open, unassigned, every dependency closed, most urgent first.
    pub fn ready(&self, p: usize) -> Vec<Bead> {
        let proj = &self.projects[p];
        let mut out: Vec<(u8, usize, Bead)> = proj
            .beads
            .iter()
            .enumerate()
            .filter(|(_, b)| {
                !b.deleted
                    && b.status == BeadStatus::Open
                    && b.assignee.is_none()
                    && b.deps.iter().all(|d| self.is_closed_or_gone(p, d))
            })
            .map(|(i, b)| {
                (
                    b.priority,
                    i,
                    Bead::new(b.id.clone(), format!("title of {}", b.id), b.status),
                )
            })
            .collect();
        out.sort_by_key(|(pr, i, _)| (*pr, *i));
        let mut ready: Vec<Bead> = out.into_iter().map(|(_, _, b)| b).collect();
        if let Some(stale) = &proj.stale_ready {
            // a stale answer: the bead was open when the tracker looked
            if !ready.iter().any(|b| &b.id == stale) {
                ready.push(Bead::new(stale.clone(), "stale", BeadStatus::Open));
            }
        }
        ready
    }

    pub fn claim(&mut self, p: usize, bead: &BeadId) -> Result<bool, ()> {
        if self.projects[p].tracker_down {
            return Err(());
        }
        let Some(b) = self.bead(p, bead) else {
            return Ok(false);
        };
        match (b.status, b.assignee.as_deref()) {
            (BeadStatus::InProgress, Some(ACTOR)) => Ok(true),
            (BeadStatus::Open, None) | (BeadStatus::Open, Some(ACTOR)) => {
                Ok(self.transition(p, bead, BeadStatus::InProgress, Some(ACTOR)))
            }
            _ => Ok(false),
        }
    }

    pub fn project_of_slug(&self, slug: &str) -> Option<usize> {
        self.projects.iter().position(|p| p.aliases.contains(slug))
    }

    /// The project a registry entry points at, by path.
    pub fn project_at(&self, path: &Path) -> Option<usize> {
        self.projects.iter().position(|p| p.path == path)
    }

    // ---- text edits ----

    pub fn rewrite_registry(&mut self, allow_garbage: bool) {
        let rng = &mut self.rng;
        for p in &mut self.projects {
            if rng.pct(30) {
                p.reg_status = *rng.pick(&[
                    "active", "active", "active", "Active", "paused", "blocked", "complete",
                    "asleep",
                ]);
            }
            if rng.pct(30) {
                p.reg_priority = *rng.pick(&["high", "normal", "low", "", "urgent"]);
            }
        }
        let mut cols = ["Slug", "Status", "Priority", "Path"];
        if rng.pct(40) {
            for i in (1..cols.len()).rev() {
                let j = rng.below(i + 1);
                cols.swap(i, j);
            }
        }
        let extra = rng.pct(40);
        let mut header: Vec<String> = cols
            .iter()
            .map(|c| {
                if rng.pct(20) {
                    c.to_uppercase()
                } else if rng.pct(20) {
                    format!("**{c}**")
                } else {
                    c.to_string()
                }
            })
            .collect();
        if extra {
            header.insert(rng.below(header.len() + 1), "Notes".into());
        }
        let eol = if rng.pct(20) { "\r\n" } else { "\n" };
        let mut t = format!("# Projects{eol}{eol}Some prose | with a pipe.{eol}{eol}");
        if rng.pct(20) {
            t.push_str(&format!(
                "| Name | Owner |{eol}|---|---|{eol}| x | y |{eol}{eol}"
            ));
        }
        t.push_str(&format!("| {} |{eol}", header.join(" | ")));
        t.push_str(&format!(
            "|{}|{eol}",
            header.iter().map(|_| "---").collect::<Vec<_>>().join("|")
        ));
        let mut order: Vec<usize> = (0..self.projects.len()).collect();
        for i in (1..order.len()).rev() {
            let j = rng.below(i + 1);
            order.swap(i, j);
        }
        for i in order {
            let p = &self.projects[i];
            if rng.pct(5) {
                continue; // a row deleted by mistake
            }
            let reps = if rng.pct(5) { 2 } else { 1 };
            for _ in 0..reps {
                let path = match rng.below(4) {
                    0 => format!("`{}`", p.path.display()),
                    1 => format!("$BRAIDS_HOME/../../..{}", p.path.display()),
                    _ => p.path.display().to_string(),
                };
                let mut cells: Vec<String> = header
                    .iter()
                    .map(|h| {
                        let h = h.trim_matches('*').to_lowercase();
                        match h.as_str() {
                            "slug" => p.slug.clone(),
                            "status" => p.reg_status.to_string(),
                            "priority" => p.reg_priority.to_string(),
                            "path" => path.clone(),
                            _ => "keep | out".replace('|', "\\|"),
                        }
                    })
                    .collect();
                if rng.pct(10) {
                    cells.push("surplus".into());
                }
                t.push_str(&format!("| {} |{eol}", cells.join(" | ")));
            }
        }
        t.push_str(&format!(
            "{eol}Trailing commentary: | Slug | not a table |{eol}"
        ));
        self.registry_exact = true;
        if allow_garbage && rng.pct(25) {
            t = mangle(rng, &t);
            self.registry_exact = false;
            self.stats.garbage_edits += 1;
        }
        self.registry_text = t;
        self.registry = parse_registry(&self.registry_text, Path::new("registry.md"), &self.paths)
            .value
            .entries;
    }

    pub fn edit_project_md(&mut self, p: usize) -> Result<(), Fail> {
        let name = self.projects[p].slug.clone();
        let (mut md, mut expect) = gen_project_md(&mut self.rng, &name);
        if self.rng.pct(10) {
            md = mangle(&mut self.rng, &md);
            expect = None;
            self.stats.garbage_edits += 1;
        }
        let cfg = parse_project(&md, Path::new("PROJECT.md")).value;
        if let Some(e) = expect {
            let got = ProjectExpect {
                status: cfg.status,
                priority: cfg.priority,
                max_workers: cfg.max_workers,
                timeout: cfg.worker_timeout,
                channel: cfg.channel.clone(),
            };
            ensure!(
                got == e,
                "1.2",
                "PROJECT.md of {name} read as {got:?}, written as {e:?}:\n{md}"
            );
        }
        ensure!(
            cfg.max_workers >= 1 && cfg.worker_timeout >= 1,
            "1.2",
            "MaxWorkers {} / WorkerTimeout {} must be positive",
            cfg.max_workers,
            cfg.worker_timeout
        );
        self.log(format!(
            "{name}: PROJECT.md now status {:?} max {} timeout {} channel {:?}",
            cfg.status, cfg.max_workers, cfg.worker_timeout, cfg.channel
        ));
        self.projects[p].md = md;
        self.projects[p].cfg = cfg;
        Ok(())
    }

    pub fn reparse_iteration(&mut self, p: usize, k: usize) {
        let it = &self.projects[p].iters[k];
        let parsed = parse_iteration(
            &it.text,
            Path::new("ITERATION.md"),
            it.number,
            PathBuf::from("it"),
        )
        .value;
        let proj = &mut self.projects[p];
        let it = &mut proj.iters[k];
        it.status = parsed.status;
        it.stories = parsed.stories.iter().map(|s| s.id.clone()).collect();
        if k < proj.read.len() {
            proj.read[k] = parsed;
        } else {
            proj.read.push(parsed);
        }
        if it.status == Some(IterationStatus::Complete) && it.frozen.is_none() {
            it.frozen = Some(it.text.clone());
            self.stats.completed_iterations += 1;
        }
    }

    pub fn new_iteration(&mut self, p: usize, status: &str) -> Result<(), Fail> {
        let n = self.projects[p]
            .iters
            .iter()
            .map(|i| i.number)
            .max()
            .unwrap_or(0)
            + 1;
        let mut stories: Vec<(BeadId, String)> = self.projects[p]
            .beads
            .iter()
            .filter(|b| !b.deleted && b.status != BeadStatus::Closed)
            .map(|b| (b.id.clone(), format!("Story {}", b.id)))
            .collect();
        if self.rng.pct(20) {
            stories.push((id("zz-404"), "A bead the tracker never heard of".into()));
        }
        let text = gen_iteration_md(&mut self.rng, n, status, &stories);
        self.projects[p].iters.push(IterM {
            number: n,
            text,
            status: None,
            stories: Vec::new(),
            frozen: None,
        });
        let k = self.projects[p].iters.len() - 1;
        self.reparse_iteration(p, k);
        // 1.3 differential oracle: the status and the Stories, in order, as written
        let it = &self.projects[p].iters[k];
        ensure!(
            it.status == IterationStatus::parse(status).ok(),
            "1.3",
            "ITERATION.md written with status {status} reads as {:?}:\n{}",
            it.status,
            it.text
        );
        let want: Vec<BeadId> = stories.into_iter().map(|(b, _)| b).collect();
        ensure!(
            it.stories == want,
            "1.3",
            "Stories read as {:?}, written as {want:?}:\n{}",
            it.stories,
            it.text
        );
        Ok(())
    }

    /// Changes an iteration's status with the real byte-preserving writer.
    pub fn set_iteration_status(
        &mut self,
        p: usize,
        k: usize,
        to: IterationStatus,
    ) -> Result<bool, Fail> {
        let before = self.projects[p].iters[k].clone();
        match set_status(&before.text, to) {
            Ok(text) => {
                ensure!(
                    before.status != Some(IterationStatus::Complete) || text == before.text,
                    "4.5",
                    "set_status changed complete iteration {} of {} to {to}",
                    before.number,
                    self.projects[p].slug
                );
                self.projects[p].iters[k].text = text;
                self.reparse_iteration(p, k);
                let after = self.projects[p].iters[k].status;
                ensure!(
                    after == Some(to),
                    "1.3",
                    "set_status({to}) on iteration {} of {} reads back as {after:?}\nbefore: {:?}\nafter:  {:?}",
                    before.number,
                    self.projects[p].slug,
                    before.text,
                    self.projects[p].iters[k].text
                );
                ensure!(
                    self.projects[p].iters[k].stories == before.stories,
                    "1.3",
                    "set_status changed the Stories of iteration {}",
                    before.number
                );
                Ok(true)
            }
            Err(_) => {
                ensure!(
                    before.status == Some(IterationStatus::Complete),
                    "1.3",
                    "set_status({to}) refused iteration {} in status {:?}",
                    before.number,
                    before.status
                );
                Ok(false)
            }
        }
    }

    pub fn step(&mut self) -> Result<(), Fail> {
        self.stats.steps += 1;
        self.now += Duration::seconds(self.rng.range(0, 900));
        for _ in 0..self.rng.range(0, 2) {
            self.random_event()?;
        }
        self.workers_progress()?;
        self.check_world()?;
        if self.rng.pct(70) {
            let force = self.rng.pct(10);
            self.tick(force)?;
        }
        self.check_world()?;
        let several = self.projects.iter().any(|p| {
            p.iters
                .iter()
                .filter(|i| i.status == Some(IterationStatus::Active))
                .count()
                > 1
        });
        if several {
            self.stats.several_active += 1;
        }
        Ok(())
    }
}
