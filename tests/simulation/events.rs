//! What happens between ticks: people create, close, block and delete beads, plan, activate
//! and complete iterations, rewrite (and mangle) their files, move the clock and the config;
//! workers finish, block, crash, hang or linger.

use std::collections::BTreeSet;

use braids::model::{BeadId, BeadStatus, IterationStatus};
use chrono::Duration;

use crate::generator::{mangle, new_bead};
use crate::world::{Behaviour, World, ACTOR};
use crate::Fail;

impl World {
    // ---- people ----

    pub fn random_event(&mut self) -> Result<(), Fail> {
        let np = self.projects.len();
        let p = self.rng.below(np);
        let slug = self.projects[p].slug.clone();
        match self.rng.below(100) {
            0..=17 => {
                let mut b = new_bead(&mut self.rng, &mut self.projects[p]);
                if self.rng.pct(25) {
                    let open: Vec<BeadId> = self.projects[p]
                        .beads
                        .iter()
                        .filter(|x| !x.deleted && x.status != BeadStatus::Closed)
                        .map(|x| x.id.clone())
                        .collect();
                    if !open.is_empty() {
                        b.deps.push(self.rng.pick(&open).clone());
                    }
                }
                let bid = b.id.clone();
                self.projects[p].beads.push(b);
                self.log(format!("{slug}: person creates {bid}"));
                // and lists it in the active or planned iteration
                if let Some(k) = self.projects[p]
                    .iters
                    .iter()
                    .rposition(|i| i.status != Some(IterationStatus::Complete))
                {
                    if self.rng.pct(60) {
                        let it = &mut self.projects[p].iters[k];
                        let eol = if it.text.contains("\r\n") {
                            "\r\n"
                        } else {
                            "\n"
                        };
                        if !it.text.ends_with('\n') {
                            it.text.push_str(eol);
                        }
                        it.text.push_str(&format!("- {bid}: Added later{eol}"));
                        self.reparse_iteration(p, k);
                    }
                }
            }
            18..=27 => {
                // a person closes, blocks, reopens, defers or deletes a bead
                let live: Vec<BeadId> = self.projects[p]
                    .beads
                    .iter()
                    .filter(|b| !b.deleted)
                    .map(|b| b.id.clone())
                    .collect();
                if live.is_empty() {
                    return Ok(());
                }
                let bid = self.rng.pick(&live).clone();
                let cur = self.bead(p, &bid).unwrap().status;
                let to = match (cur, self.rng.below(4)) {
                    (BeadStatus::InProgress, 0 | 1) => Some(BeadStatus::Closed),
                    (BeadStatus::InProgress, _) => Some(BeadStatus::Blocked),
                    (BeadStatus::Open, 0) => Some(BeadStatus::Blocked),
                    (BeadStatus::Open, 1) => Some(BeadStatus::Deferred),
                    (BeadStatus::Blocked | BeadStatus::Deferred, _) => Some(BeadStatus::Open),
                    _ => None,
                };
                if self.rng.pct(5) {
                    self.projects[p]
                        .beads
                        .iter_mut()
                        .find(|b| b.id == bid)
                        .unwrap()
                        .deleted = true;
                    self.log(format!("{slug}: person deletes {bid}"));
                } else if let Some(to) = to {
                    let assignee = if to == BeadStatus::Closed || to == BeadStatus::Blocked {
                        self.bead(p, &bid).unwrap().assignee.clone()
                    } else {
                        None
                    };
                    if self.transition(p, &bid, to, assignee.as_deref()) {
                        self.log(format!("{slug}: person moves {bid} {cur} -> {to}"));
                    }
                }
            }
            28..=35 => {
                // iterations
                let k = self.rng.below(self.projects[p].iters.len() + 1);
                let any_active = self.projects[p]
                    .iters
                    .iter()
                    .any(|i| i.status == Some(IterationStatus::Active));
                if k == self.projects[p].iters.len() {
                    // `braids iteration new` plans; a hand-written one may start active, even
                    // next to another active one now and then
                    let status = if self.rng.pct(50) && (!any_active || self.rng.pct(10)) {
                        "active"
                    } else {
                        "planning"
                    };
                    self.new_iteration(p, status)?;
                    self.log(format!("{slug}: person plans a new iteration ({status})"));
                    return Ok(());
                }
                let st = self.projects[p].iters[k].status;
                let number = self.projects[p].iters[k].number;
                match st {
                    Some(IterationStatus::Planning) | None if !any_active || self.rng.pct(10) => {
                        self.set_iteration_status(p, k, IterationStatus::Active)?;
                        self.log(format!("{slug}: iteration {number} activated"));
                    }
                    Some(IterationStatus::Active) => {
                        self.set_iteration_status(p, k, IterationStatus::Complete)?;
                        self.log(format!("{slug}: iteration {number} completed by a person"));
                    }
                    Some(IterationStatus::Complete) => {
                        // somebody tries to reopen it: refused (4.5)
                        let to = *self
                            .rng
                            .pick(&[IterationStatus::Active, IterationStatus::Planning]);
                        let changed = self.set_iteration_status(p, k, to)?;
                        ensure!(
                            !changed,
                            "4.5",
                            "complete iteration {number} of {slug} was reopened as {to}"
                        );
                    }
                    _ => {}
                }
            }
            36..=39 => {
                // a hand edit that mangles a non-complete ITERATION.md
                if let Some(k) = self.projects[p]
                    .iters
                    .iter()
                    .position(|i| i.status != Some(IterationStatus::Complete))
                {
                    let t = mangle(&mut self.rng, &self.projects[p].iters[k].text);
                    self.projects[p].iters[k].text = t;
                    self.reparse_iteration(p, k);
                    self.stats.garbage_edits += 1;
                    self.log(format!(
                        "{slug}: ITERATION.md {} mangled, now {:?}",
                        self.projects[p].iters[k].number, self.projects[p].iters[k].status
                    ));
                }
            }
            40..=49 => self.edit_project_md(p)?,
            50..=55 => {
                self.rewrite_registry(true);
                self.log(format!(
                    "registry rewritten: {:?}",
                    self.registry
                        .iter()
                        .map(|e| format!("{}:{:?}", e.slug, e.status))
                        .collect::<Vec<_>>()
                ));
                self.check_registry_reading()?;
            }
            56..=61 => {
                let back = self.rng.pct(35);
                let mins = self.rng.range(1, 240);
                if back {
                    self.now -= Duration::minutes(mins);
                    self.stats.clock_back += 1;
                } else {
                    self.now += Duration::minutes(mins);
                }
                self.log(format!(
                    "clock jumps {} {mins} min",
                    if back { "back" } else { "forward" }
                ));
            }
            62..=65 => {
                self.global_max = *self.rng.pick(&[0, 0, 1, 2, 3, 5]);
                self.claim_grace = Duration::seconds(*self.rng.pick(&[0, 120, 120, 600]));
                self.log(format!(
                    "config: global max {} claim grace {}s",
                    self.global_max,
                    self.claim_grace.num_seconds()
                ));
            }
            // a person renames a project's slug in the registry (same directory), most often
            // while its workers run under labels carrying the old slug
            70..=72 => self.rename_slug()?,
            // a session record becomes unreadable (or readable again)
            66..=69 if !self.sessions.is_empty() => {
                let i = self.rng.below(self.sessions.len());
                self.sessions[i].unreadable = !self.sessions[i].unreadable;
                let l = self.sessions[i].label.to_string();
                self.log(format!(
                    "session record of {l} unreadable={}",
                    self.sessions[i].unreadable
                ));
            }
            _ => {}
        }
        Ok(())
    }

    /// Renames one project's slug, to a new name or back to one it had, and rewrites the
    /// registry intact so the rename is what the next tick reads.
    fn rename_slug(&mut self) -> Result<(), Fail> {
        let running: Vec<usize> = (0..self.projects.len())
            .filter(|&p| {
                self.sessions
                    .iter()
                    .any(|s| s.running && self.projects[p].aliases.contains(s.label.slug()))
            })
            .collect();
        let p = match running.is_empty() {
            true => self.rng.below(self.projects.len()),
            false => *self.rng.pick(&running),
        };
        if !running.is_empty() {
            self.stats.renames_while_running += 1;
        }
        let taken: BTreeSet<String> = self.projects.iter().map(|x| x.slug.clone()).collect();
        let proj = &self.projects[p];
        let base = proj
            .path
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let earlier: Vec<String> = proj
            .aliases
            .iter()
            // its own names, not slugs a garbled registry once gave its directory
            .filter(|a| !taken.contains(*a) && (**a == base || a.starts_with(&format!("{base}-r"))))
            .cloned()
            .collect();
        let to = if !earlier.is_empty() && self.rng.pct(30) {
            self.rng.pick(&earlier).clone()
        } else {
            format!("{base}-r{}", proj.aliases.len())
        };
        if taken.contains(&to) {
            return Ok(());
        }
        let from = std::mem::replace(&mut self.projects[p].slug, to.clone());
        self.projects[p].aliases.insert(to.clone());
        self.rewrite_registry(false);
        self.log(format!(
            "person renames slug {from} -> {to} in the registry"
        ));
        self.check_registry_reading()
    }

    // ---- workers ----

    pub fn workers_progress(&mut self) -> Result<(), Fail> {
        for i in 0..self.sessions.len() {
            if !self.sessions[i].running || self.now < self.sessions[i].done_at {
                continue;
            }
            let label = self.sessions[i].label.clone();
            let Some(p) = self.project_of_slug(label.slug()) else {
                continue;
            };
            let bead = label.bead().clone();
            match self.sessions[i].behaviour {
                Behaviour::Hang => continue,
                Behaviour::Crash => {
                    self.sessions[i].running = false;
                    self.log(format!("{label}: worker crashes"));
                }
                Behaviour::Block => {
                    self.transition(p, &bead, BeadStatus::Blocked, Some(ACTOR));
                    self.sessions[i].running = false;
                    self.log(format!("{label}: worker blocks its bead"));
                }
                Behaviour::Finish => {
                    let was = self.bead(p, &bead).map(|b| b.status);
                    if was == Some(BeadStatus::InProgress) {
                        self.transition(p, &bead, BeadStatus::Closed, Some(ACTOR));
                        self.log(format!("{label}: worker closes its bead"));
                        self.complete_iteration_if_done(p)?;
                    }
                    match self.sessions[i].linger.take() {
                        Some(l) => {
                            self.sessions[i].done_at = self.now + l;
                            self.sessions[i].behaviour = Behaviour::Crash;
                            self.log(format!("{label}: worker lingers after closing"));
                        }
                        None => self.sessions[i].running = false,
                    }
                }
            }
        }
        Ok(())
    }

    /// 3.7, as a worker does it: when no story of the active iteration is open, mark it complete.
    pub fn complete_iteration_if_done(&mut self, p: usize) -> Result<(), Fail> {
        let Some(k) = self.projects[p]
            .iters
            .iter()
            .position(|i| i.status == Some(IterationStatus::Active))
        else {
            return Ok(());
        };
        let stories = self.projects[p].iters[k].stories.clone();
        let done = !stories.is_empty()
            && stories.iter().all(|s| {
                self.bead(p, s)
                    .is_none_or(|b| b.status == BeadStatus::Closed)
            });
        if done {
            self.set_iteration_status(p, k, IterationStatus::Complete)?;
            let n = self.projects[p].iters[k].number;
            self.log(format!(
                "{}: worker completes iteration {n}",
                self.projects[p].slug
            ));
        }
        Ok(())
    }
}
