//! The `br` adapter (beads_rust, SQLite + JSONL).
//!
//! Facts about br 0.7.6 this adapter relies on (verified against the real binary; see
//! `tests/integration/trackers.rs`):
//!
//! * Every command takes `--json`. Reads print an array (`ready`, `show`), or
//!   `{"issues": [...], "total", "limit", "offset", "has_more"}` (`list`); `create` prints the
//!   new issue object; `update` prints an array of `{id, title, status, priority, assignee,
//!   owner, updated_at}`.
//! * With `--json`, errors go to **stdout** as `{"error": {"code", "message", "hint",
//!   "retryable", "context"}}`; stderr stays empty. Exit codes: 2 not initialised,
//!   3 `ISSUE_NOT_FOUND` (also `NOTHING_TO_DO`), 4 `VALIDATION_FAILED`,
//!   6 `UPDATE_PRECONDITION_FAILED`, 7 `CONFIG_ERROR`, 1 internal.
//! * `br update <id> --claim` is atomic (checked inside the write transaction): it refuses an
//!   issue assigned to another actor, a closed or deferred issue, and an issue with open
//!   blockers; re-claiming as the same actor succeeds. It does **not** refuse an unassigned
//!   issue whose status is `blocked` or `in_progress`, and `update --status` happily moves a
//!   closed issue back to open — so the adapter reads the issue first and makes every state
//!   change conditional on it with `--if-unchanged <updated_at>` (a compare-and-swap br checks
//!   inside the same transaction), retrying when another writer got there first.
//! * `br update --status closed` is refused; closing is `br close`. Closing a closed issue
//!   exits 3 with `NOTHING_TO_DO`.
//! * `ready` sorts "hybrid" by default (P0/P1 by age, then the rest by age). The adapter keeps
//!   that order (br sorts it by parsed timestamps, which the JSONL read path reproduces
//!   exactly; `--sort=priority` compares the stored text) and then sorts by priority.
//! * br discovers `.beads` by walking up from the cwd. `BEADS_DIR` pins it to the project
//!   (`CONFIG_ERROR` when that directory does not exist), and empty `BEADS_DB`/`BD_DB`/…
//!   values count as unset.
//! * Auto-import/auto-flush of `.beads/issues.jsonl` stay on: the JSONL is what git carries
//!   (4.4), and a call costs 15–60 ms either way.
//! * Values are passed as `--flag=value` so a title or reason starting with `-` is never
//!   taken for a flag.

use super::beads_cli::{
    find_exact, json_documents, one_line, parse_issues, BeadsCli, ErrorInfo, RawIssue,
};
use super::rules::{check_actor, claim_verdict, closed_is_final};
use super::{ClaimOutcome, Tracker, TrackerError, TrackerKind, TrackerOptions};
use crate::model::{Bead, BeadId, BeadStatus};
use crate::system::proc::Output;

/// Compare-and-swap retries before a contended bead is reported as refused.
const MAX_ATTEMPTS: usize = 4;

pub struct Br {
    cli: BeadsCli,
}

/// How one conditional update went.
enum Attempt {
    Applied(Output),
    /// Someone changed the bead since we read it (`--if-unchanged` failed): read again.
    Stale,
    /// br refused; its error and the raw output.
    Rejected(ErrorInfo, Output),
}

impl Br {
    pub fn new(opts: TrackerOptions) -> Self {
        Br {
            cli: BeadsCli::new("br", opts.program.as_deref(), &opts.project, opts.timeout),
        }
    }

    fn show_raw(&self, id: &BeadId) -> Result<Option<RawIssue>, TrackerError> {
        let args = vec!["show".to_string(), id.to_string(), "--json".to_string()];
        let out = self.cli.run(&args)?;
        if !out.success() {
            let info = ErrorInfo::from_output(&out);
            if info.code.as_deref() == Some("ISSUE_NOT_FOUND") {
                return Ok(None);
            }
            return Err(self.cli.failed(&args, &out));
        }
        let issues = parse_issues(&out.stdout).map_err(|d| self.cli.garbage(&args, d))?;
        Ok(find_exact(issues, id))
    }

    /// After a refused or contended claim: what the bead looks like now, as an outcome. An
    /// open, unassigned bead br would not let us claim has open blockers.
    fn verdict_now(&self, id: &BeadId, actor: &str) -> Result<ClaimOutcome, TrackerError> {
        let now = self.current(id)?;
        Ok(
            claim_verdict(&now.bead, actor).unwrap_or(ClaimOutcome::Refused {
                status: now.bead.status,
                holder: now.bead.assignee,
            }),
        )
    }

    fn current(&self, id: &BeadId) -> Result<RawIssue, TrackerError> {
        self.show_raw(id)?
            .ok_or_else(|| TrackerError::NoSuchBead(id.clone()))
    }

    /// Runs a mutating command guarded by `--if-unchanged`.
    fn attempt(&self, id: &BeadId, args: &[String]) -> Result<Attempt, TrackerError> {
        let out = self.cli.run(args)?;
        if out.success() {
            // The receipt must at least be JSON; its content is re-read by whoever needs it.
            json_documents(&out.stdout).map_err(|d| self.cli.garbage(args, d))?;
            return Ok(Attempt::Applied(out));
        }
        let info = ErrorInfo::from_output(&out);
        match info.code.as_deref() {
            Some("UPDATE_PRECONDITION_FAILED") => Ok(Attempt::Stale),
            Some("ISSUE_NOT_FOUND") => Err(TrackerError::NoSuchBead(id.clone())),
            _ => Ok(Attempt::Rejected(info, out)),
        }
    }

    /// `br update <id> <changes> --if-unchanged=<token> --json`, re-reading and re-deciding
    /// whenever another writer got in between. `decide` returns `None` when nothing needs doing.
    fn guarded_update(
        &self,
        id: &BeadId,
        decide: impl Fn(&RawIssue) -> Result<Option<Vec<String>>, TrackerError>,
    ) -> Result<(), TrackerError> {
        for _ in 0..MAX_ATTEMPTS {
            let cur = self.current(id)?;
            let Some(changes) = decide(&cur)? else {
                return Ok(());
            };
            let args = update_args(id, &changes, None, cur.updated_at.as_deref());
            match self.attempt(id, &args)? {
                Attempt::Applied(_) => return Ok(()),
                Attempt::Stale => continue,
                Attempt::Rejected(_, out) => return Err(self.cli.failed(&args, &out)),
            }
        }
        Err(TrackerError::Failed {
            command: format!("br update {id}"),
            code: "6".into(),
            message: format!("bead {id} kept changing under {MAX_ATTEMPTS} conditional updates"),
        })
    }
}

fn update_args(
    id: &BeadId,
    changes: &[String],
    actor: Option<&str>,
    token: Option<&str>,
) -> Vec<String> {
    let mut args = vec!["update".to_string(), id.to_string()];
    args.extend(changes.iter().cloned());
    if let Some(a) = actor {
        args.push(format!("--actor={a}"));
    }
    if let Some(t) = token {
        args.push(format!("--if-unchanged={t}"));
    }
    args.push("--json".to_string());
    args
}

impl Tracker for Br {
    fn kind(&self) -> TrackerKind {
        TrackerKind::Br
    }

    fn ready(&self) -> Result<Vec<Bead>, TrackerError> {
        self.cli.ready_sorted(None)
    }

    fn list(&self) -> Result<Vec<Bead>, TrackerError> {
        self.cli.list_all()
    }

    fn show(&self, id: &BeadId) -> Result<Option<Bead>, TrackerError> {
        Ok(self.show_raw(id)?.map(|i| i.bead))
    }

    fn claim(&self, id: &BeadId, actor: &str) -> Result<ClaimOutcome, TrackerError> {
        let actor = check_actor(actor)?;
        for _ in 0..MAX_ATTEMPTS {
            let cur = self.current(id)?;
            if let Some(verdict) = claim_verdict(&cur.bead, actor) {
                return Ok(verdict);
            }
            let args = update_args(
                id,
                &["--claim".to_string()],
                Some(actor),
                cur.updated_at.as_deref(),
            );
            match self.attempt(id, &args)? {
                Attempt::Applied(out) => {
                    let mine = parse_issues(&out.stdout)
                        .map_err(|d| self.cli.garbage(&args, d))?
                        .into_iter()
                        .any(|i| {
                            &i.bead.id == id
                                && i.bead.status == BeadStatus::InProgress
                                && i.bead.assignee.as_deref() == Some(actor)
                        });
                    if mine {
                        return Ok(ClaimOutcome::Claimed);
                    }
                    return Err(self.cli.garbage(
                        &args,
                        format!(
                            "br reported success but {id} is not in_progress for {actor}: {}",
                            out.stdout.trim()
                        ),
                    ));
                }
                Attempt::Stale => continue,
                // br's own refusal (another holder won the race, a closed/deferred bead, open
                // blockers): report what the bead looks like now.
                Attempt::Rejected(info, _) if info.code.as_deref() == Some("VALIDATION_FAILED") => {
                    return self.verdict_now(id, actor);
                }
                Attempt::Rejected(_, out) => return Err(self.cli.failed(&args, &out)),
            }
        }
        self.verdict_now(id, actor)
    }

    fn close(&self, id: &BeadId, reason: &str) -> Result<(), TrackerError> {
        let mut args = vec!["close".to_string(), id.to_string()];
        let reason = one_line(reason);
        if !reason.is_empty() {
            args.push(format!("--reason={reason}"));
        }
        args.push("--json".to_string());
        let out = self.cli.run(&args)?;
        if out.success() {
            json_documents(&out.stdout).map_err(|d| self.cli.garbage(&args, d))?;
            return Ok(());
        }
        if ErrorInfo::from_output(&out).code.as_deref() == Some("ISSUE_NOT_FOUND") {
            return Err(TrackerError::NoSuchBead(id.clone()));
        }
        // Closing a closed bead is a no-op (br says NOTHING_TO_DO).
        match self.show_raw(id)? {
            Some(cur) if cur.bead.status == BeadStatus::Closed => Ok(()),
            None => Err(TrackerError::NoSuchBead(id.clone())),
            Some(_) => Err(self.cli.failed(&args, &out)),
        }
    }

    fn block(&self, id: &BeadId, reason: &str) -> Result<(), TrackerError> {
        let reason = one_line(reason);
        self.guarded_update(id, |cur| match cur.bead.status {
            BeadStatus::Closed => Err(closed_is_final(id, "block")),
            BeadStatus::Blocked => Ok(None),
            _ => {
                let mut changes = vec!["--status=blocked".to_string()];
                if !reason.is_empty() {
                    changes.push(format!("--transition-comment={reason}"));
                }
                Ok(Some(changes))
            }
        })
    }

    fn reopen(&self, id: &BeadId, reason: &str) -> Result<(), TrackerError> {
        let reason = one_line(reason);
        self.guarded_update(id, |cur| match cur.bead.status {
            // Closed is final, and a deferral is a person's decision: nothing to release.
            BeadStatus::Closed | BeadStatus::Deferred => Ok(None),
            BeadStatus::Open if cur.bead.assignee.is_none() => Ok(None),
            _ => {
                let mut changes = vec!["--status=open".to_string(), "--assignee=".to_string()];
                if !reason.is_empty() {
                    changes.push(format!("--transition-comment={reason}"));
                }
                Ok(Some(changes))
            }
        })
    }

    fn create(&self, title: &str, description: &str, priority: u8) -> Result<BeadId, TrackerError> {
        self.cli.create(title, description, priority)
    }

    fn add_dependency(&self, id: &BeadId, on: &BeadId) -> Result<(), TrackerError> {
        let args = vec![
            "dep".to_string(),
            "add".to_string(),
            id.to_string(),
            on.to_string(),
            "--json".to_string(),
        ];
        let out = self.cli.run(&args)?;
        if out.success() {
            json_documents(&out.stdout).map_err(|d| self.cli.garbage(&args, d))?;
            return Ok(());
        }
        let info = ErrorInfo::from_output(&out);
        if info.code.as_deref() == Some("ISSUE_NOT_FOUND") {
            let missing = info
                .context
                .as_ref()
                .and_then(|c| c.get("searched_id"))
                .and_then(|v| v.as_str())
                .and_then(|s| BeadId::new(s).ok())
                .unwrap_or_else(|| id.clone());
            return Err(TrackerError::NoSuchBead(missing));
        }
        Err(self.cli.failed(&args, &out))
    }
}
