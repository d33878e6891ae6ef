//! Running seeds: one, or thousands spread over threads, and the violations they found.

use std::sync::OnceLock;
use std::time::Instant;

use crate::tick::Mutation;
use crate::world::{Stats, World};

// ---------------------------------------------------------------------------------------------
// Violations

#[derive(Debug, Clone)]
pub struct Violation {
    pub section: &'static str,
    pub seed: u64,
    pub step: usize,
    pub message: String,
    pub trace: Vec<String>,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "{} violated at seed {} step {}: {}",
            self.section, self.seed, self.step, self.message
        )?;
        writeln!(
            f,
            "  replay: BRAIDS_SIM_SEED={} BRAIDS_SIM_TRACE=1 cargo test --test simulation -- --nocapture",
            self.seed
        )?;
        writeln!(f, "  last events:")?;
        for t in &self.trace {
            writeln!(f, "    {t}")?;
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Running seeds

pub fn run_seed(
    seed: u64,
    steps: usize,
    mutation: Mutation,
    full_trace: bool,
) -> (Stats, Option<Violation>) {
    let mut w = match World::new(seed, mutation, full_trace) {
        Ok(w) => w,
        Err((mut w, (section, message))) => {
            return (
                w.stats,
                Some(Violation {
                    section,
                    seed,
                    step: 0,
                    message,
                    trace: std::mem::take(&mut w.trace),
                }),
            )
        }
    };
    for step in 1..=steps {
        if let Err((section, message)) = w.step() {
            return (
                w.stats,
                Some(Violation {
                    section,
                    seed,
                    step,
                    message,
                    trace: std::mem::take(&mut w.trace),
                }),
            );
        }
    }
    if full_trace {
        for t in &w.trace {
            eprintln!("{t}");
        }
    }
    (w.stats, None)
}

pub struct Report {
    pub seeds: u64,
    pub steps: usize,
    pub stats: Stats,
    /// The first violation of each seed that failed, by seed.
    pub violations: Vec<Violation>,
    pub elapsed: std::time::Duration,
}

pub fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

pub fn run_many(seeds: std::ops::Range<u64>, steps: usize, mutation: Mutation) -> Report {
    let start = Instant::now();
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
        .min(8) as u64;
    let count = seeds.end - seeds.start;
    let results: Vec<(Stats, Vec<Violation>)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let seeds = seeds.clone();
                s.spawn(move || {
                    let mut stats = Stats::default();
                    let mut v = Vec::new();
                    let mut seed = seeds.start + t;
                    while seed < seeds.end {
                        let (st, viol) = run_seed(seed, steps, mutation, false);
                        stats += st;
                        v.extend(viol);
                        seed += threads;
                    }
                    (stats, v)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut stats = Stats::default();
    let mut violations = Vec::new();
    for (s, v) in results {
        stats += s;
        violations.extend(v);
    }
    violations.sort_by_key(|v| v.seed);
    Report {
        seeds: count,
        steps,
        stats,
        violations,
        elapsed: start.elapsed(),
    }
}

/// The shared run: one seed when `BRAIDS_SIM_SEED` is set, else `BRAIDS_SIM_SEEDS` seeds.
pub fn report() -> &'static Report {
    static REPORT: OnceLock<Report> = OnceLock::new();
    REPORT.get_or_init(|| {
        let steps = env_num("BRAIDS_SIM_STEPS", 50) as usize;
        if let Ok(seed) = std::env::var("BRAIDS_SIM_SEED") {
            let seed: u64 = seed.trim().parse().expect("BRAIDS_SIM_SEED is a number");
            let trace = std::env::var_os("BRAIDS_SIM_TRACE").is_some();
            let start = Instant::now();
            let (stats, v) = run_seed(seed, steps, Mutation::None, trace);
            return Report {
                seeds: 1,
                steps,
                stats,
                violations: v.into_iter().collect(),
                elapsed: start.elapsed(),
            };
        }
        let n = env_num("BRAIDS_SIM_SEEDS", 6000);
        let r = run_many(0..n, steps, Mutation::None);
        eprintln!(
            "simulation: {} seeds x {} steps in {:.2?}: {:?}",
            r.seeds, r.steps, r.elapsed, r.stats
        );
        r
    })
}
