//! The landings dead workers left: a worker records the landing it is about to make before it
//! closes its bead (`Paths::landing_plan`), so one killed between the close and the landing
//! leaves its plan, and the tick's sweep lands that work as the worker would have.

use super::{Live, Outcome};
use crate::model::BeadId;
use crate::tick::decide::Sweep;

/// Lands the work of workers killed between closing their bead and landing it, as they would
/// have (the plan they recorded before the close), and pushes it: the bead's work reaches the
/// history once, not on a branch for a person. A plan whose bead is not closed is stale (the
/// worker died before the close, so the bead is done again) and dropped; one whose work can no
/// longer land blocks its bead, its work kept on a branch. Returns the beads whose plan waits
/// for a later run: the sweep leaves their worktrees alone.
pub(super) fn finish(s: &Sweep, fx: &Live<'_>, out: &mut Outcome) -> Vec<BeadId> {
    let mut pending = Vec::new();
    let Ok(entries) = std::fs::read_dir(fx.paths.braids_dir.join("work").join(&s.slug)) else {
        return pending;
    };
    let Some(tracker) = fx.trackers.get(&s.slug) else {
        return pending;
    };
    for e in entries.flatten() {
        let Ok(bead) = BeadId::new(&e.file_name().to_string_lossy()) else {
            continue;
        };
        let plan_file = fx.paths.landing_plan(&s.slug, &bead);
        if s.live.contains(&bead) || !plan_file.is_file() {
            continue;
        }
        let closed = match tracker.show(&bead) {
            Ok(Some(b)) => b.status == crate::model::BeadStatus::Closed,
            Ok(None) => false,
            Err(_) => {
                pending.push(bead); // asked again next run
                continue;
            }
        };
        let landing: Option<crate::workspace::Landing> = std::fs::read(&plan_file)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
        let (true, Some(landing)) = (closed, landing) else {
            let _ = std::fs::remove_file(&plan_file);
            continue;
        };
        // A worker committing now lands its own: this waits for the next run, and so does the
        // sweep of this worktree.
        let Ok(Some(lock)) = crate::git::RepoLock::try_acquire(&s.path) else {
            pending.push(bead);
            continue;
        };
        // Held through the landing and its push; let go before keeping the work aside, which
        // takes the lock itself (a second lock of it in this process would wait on this one).
        let mut lock = Some(lock);
        // What cannot land any more is not left closed with nothing in the history (3.6): the
        // bead is blocked with why, its work kept on a branch when git may run there.
        let landed = (|| -> anyhow::Result<Result<Option<String>, String>> {
            let Some(ws) = fx.workspaces.resume(&s.path, &bead)? else {
                return Ok(Err("its workspace is gone".into()));
            };
            let prepared = fx
                .workspaces
                .prepare_landing(&ws, &bead, &landing.exclude, None)?;
            let Some(r) = prepared.refusal() else {
                return Ok(Ok(fx.workspaces.land(&ws, &landing)?));
            };
            let (why, keep) = (format!("{} ({})", r.why, r.paths.join(", ")), r.keep);
            let kept = if keep {
                drop(lock.take());
                fx.workspaces.keep(&ws, &bead)?
            } else {
                None
            };
            Ok(Err(match kept {
                Some(branch) => format!("{why}; the work is kept on branch {branch}"),
                None => why,
            }))
        })();
        let landed = match landed {
            Ok(Err(why)) => {
                let reason = format!("its worker died after closing it, and {why}");
                match tracker.block(&bead, &reason) {
                    Ok(()) => out.blocked.push((s.slug.clone(), bead.clone(), reason)),
                    Err(e) => out
                        .errors
                        .push(format!("{}: cannot block {bead}: {e}", s.slug)),
                }
                Ok(None)
            }
            Ok(Ok(c)) => Ok(c),
            Err(e) => Err(e),
        };
        let _ = std::fs::remove_file(&plan_file);
        match landed {
            Ok(Some(commit)) => {
                tracing::warn!(project = %s.slug, %bead, "landed {commit}, the work of a worker that died after closing its bead");
                let base = crate::workspace::base_branch(&s.path).ok();
                if let Some(base) = base.filter(|b| crate::git::has_upstream(&s.path, b)) {
                    let _ = crate::git::expect_push(&s.path);
                    let timeout = std::time::Duration::from_secs(120);
                    if let Err(e) = crate::git::push_recorded(&s.path, &base, timeout) {
                        out.errors.push(format!(
                            "{}: push still failing (retried next run): {e:#}",
                            s.slug
                        ));
                    }
                }
            }
            Ok(None) => {}
            Err(e) => out.errors.push(format!(
                "{}: cannot land the work {bead}'s worker left: {e:#}",
                s.slug
            )),
        }
    }
    pending
}
