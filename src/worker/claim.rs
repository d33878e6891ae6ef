//! Phase 2, the gates before any work: a complete iteration is refused (4.5), the bead is
//! claimed (3.2), its direct dependencies must be closed (3.3), and under ask-first autonomy a
//! person approves the plan (3.11). Each gate that stops the worker says why in a step.

use std::path::Path;

use anyhow::Result;

use crate::model::{Bead, BeadId, BeadStatus, IterationStatus, NotificationEvent};
use crate::tracker::ClaimOutcome;

use super::context::Loaded;
use super::{list, Ending, Run, Worker};

impl Worker<'_> {
    /// 4.5, then 3.2: `Some(ending)` when the worker must stop before doing anything.
    pub(super) fn claim(&self, run: &mut Run<'_, '_>, l: &Loaded) -> Result<Option<Ending>> {
        let bead_id = &run.msg.bead;
        // 4.5: never write into a completed iteration.
        if l.iteration.status == Some(IterationStatus::Complete) {
            run.step(
                "refuse",
                format!(
                    "iteration {} is complete; completed iterations are never modified",
                    l.iteration.name
                ),
            );
            return Ok(Some(Ending::IterationFrozen));
        }
        // 3.2: claim before any work; a refusal stops at once.
        let actor = &self.config.tracker.actor;
        let (status, holder) = match self.tracker.claim(bead_id, actor)? {
            ClaimOutcome::Claimed => {
                run.step("claim", "claimed");
                return Ok(None);
            }
            ClaimOutcome::Refused { status, holder } => (status, holder),
        };
        let mut why = format!(
            "refused: bead is {status}, held by {}",
            holder.as_deref().unwrap_or("nobody")
        );
        // br refuses to claim an open bead whose blockers are open: say which. The bead is left
        // as it is: without the claim it is not ours to block (4.6).
        if status == BeadStatus::Open && holder.as_deref().is_none_or(|h| h == actor.as_str()) {
            let bead = self.tracker.show(bead_id).ok().flatten();
            let open = bead.and_then(|b| self.open_dependencies(&b).ok());
            if let Some(open) = open.filter(|o| !o.is_empty()) {
                why.push_str(&format!("; open dependencies: {}", list(&open)));
            }
        }
        run.step("claim", why);
        Ok(Some(Ending::ClaimRefused))
    }

    /// The bead's direct dependencies that are not closed (3.3).
    pub(super) fn open_dependencies(&self, bead: &Bead) -> Result<Vec<BeadId>> {
        Ok(crate::tracker::open_dependencies(self.tracker, bead)?)
    }

    /// 3.3: `Some(ending)` when a direct dependency is open; the claimed bead is then blocked
    /// and a person told.
    pub(super) fn check_dependencies(
        &self,
        run: &mut Run<'_, '_>,
        l: &Loaded,
        bead: &Bead,
    ) -> Result<Option<Ending>> {
        let open = self.open_dependencies(bead)?;
        if open.is_empty() {
            all_closed(run, bead);
            return Ok(None);
        }
        let bead_id = &run.msg.bead;
        let list = list(&open);
        self.tracker
            .block(bead_id, &format!("open dependencies: {list}"))?;
        run.step("dependencies", format!("open: {list}; bead blocked"));
        run.notify(
            l,
            NotificationEvent::Blocker,
            &format!(
                "[{}] {bead_id} is blocked: its dependencies {list} are not closed.",
                l.slug
            ),
        );
        Ok(Some(Ending::DependenciesOpen { open }))
    }

    /// 3.11, ask-first: whether a person approved the plan. The first run posts the plan as a
    /// question and blocks the bead; a person unblocking it is the approval.
    pub(super) fn approved(
        &self,
        run: &mut Run<'_, '_>,
        l: &Loaded,
        bead: &Bead,
        deliverable: &Path,
    ) -> Result<bool> {
        let marker = self.paths.approval_marker(&l.slug, &bead.id);
        if marker.exists() {
            let _ = std::fs::remove_file(&marker);
            run.step(
                "autonomy",
                "ask-first: approved (a person unblocked the bead)",
            );
            return Ok(true);
        }
        let root = &run.msg.project;
        let plan = format!(
            "[{}] Approval needed for {} \"{}\": the agent will do this bead and write {}. Unblock the bead to approve.",
            l.slug,
            bead.id,
            bead.title,
            deliverable.strip_prefix(root).unwrap_or(deliverable).display()
        );
        // Blocked first: the marker must never exist for a bead nobody was asked about.
        self.tracker.block(
            &bead.id,
            "ask-first: waiting for a person to approve the plan",
        )?;
        crate::system::atomic::write(&marker, plan.as_bytes())?;
        run.step(
            "autonomy",
            "ask-first: plan posted, bead blocked until a person unblocks it",
        );
        run.notify(l, NotificationEvent::Question, &plan);
        Ok(false)
    }
}

/// The dependency gate's step when nothing is left open, for every pipeline.
pub(super) fn all_closed(run: &mut Run<'_, '_>, bead: &Bead) {
    let n = bead.dependencies.len();
    run.step(
        "dependencies",
        format!("{n} direct dependencies, all closed"),
    );
}
