//! The `bd` adapter (beads, the Go tool).
//!
//! bd cannot be installed on the build machine, so this adapter is written from bd's
//! documentation and source (`cmd/bd/{ready,show,update}.go`, `docs/CLI_REFERENCE.md`) and
//! tested against recorded outputs in `tests/fixtures/bd/` through a stub executable. What it
//! relies on:
//!
//! * `bd ready --json` prints an array of issues. Older versions include `in_progress` (and
//!   `review`) issues and default to `--limit 10`; the adapter passes `--limit=0` (0 means no
//!   limit) and keeps only `open` issues.
//! * `bd list --json` prints an array of issues (rows may carry raw dependency records
//!   `{"issue_id", "depends_on_id", "type"}`); `--all` includes closed ones, `--limit=0` lifts
//!   the default page size.
//! * `bd show <id> --json` prints an **array** of issue details with `dependencies`:
//!   issues carrying a `dependency_type`. A missing id prints nothing (older versions, exit 0,
//!   "Error fetching …" on stderr) or `{"error": "…not found…"}` (exit 1).
//! * `--json` output may be wrapped as `{"schema_version": 1, "data": …}` (`BD_JSON_ENVELOPE=1`,
//!   the v2 default); objects may carry an injected `schema_version`.
//! * `bd update <id> --claim` is a compare-and-swap in the database (assignee empty, or the
//!   same actor; newer versions also require `status = open`). On failure older versions print
//!   "Error claiming …" to stderr and still **exit 0** with empty stdout, so the adapter never
//!   trusts the exit status of a mutation alone: it checks the returned issue and, failing
//!   that, re-reads the bead.
//! * `bd close <id> --reason …`; `bd update <id> --status blocked|open`; `--assignee ""`
//!   clears the assignee; `bd comments add <id> <text>` records a reason;
//!   `bd dep add <id> <depends-on>` (type `blocks`); `bd create --title … --json` prints the
//!   new issue object.
//! * `--actor` names the actor; `BEADS_DIR` pins the `.beads` directory; `BEADS_NO_DAEMON=1`
//!   keeps old versions from starting a background daemon.
//!
//! bd has no `--if-unchanged`, so the guards that br gets atomically (a claim refuses a
//! blocked bead, close/block never touch a closed one) are read-then-act here; bd's own claim
//! is still the atomic step that decides between two claimants.

use super::beads_cli::{
    find_exact, json_documents, one_line, parse_issues, BeadsCli, ErrorInfo, RawIssue,
};
use super::rules::{check_actor, claim_verdict, closed_is_final};
use super::{ClaimOutcome, Tracker, TrackerError, TrackerKind, TrackerOptions};
use crate::model::{Bead, BeadId, BeadStatus};
use crate::system::proc::Output;

pub struct Bd {
    cli: BeadsCli,
}

impl Bd {
    pub fn new(opts: TrackerOptions) -> Self {
        let cli = BeadsCli::new("bd", opts.program.as_deref(), &opts.project, opts.timeout)
            .with_env("BEADS_NO_DAEMON", "1")
            .with_env("BEADS_AUTO_START_DAEMON", "false");
        Bd { cli }
    }

    fn show_raw(&self, id: &BeadId) -> Result<Option<RawIssue>, TrackerError> {
        let args = vec!["show".to_string(), id.to_string(), "--json".to_string()];
        let out = self.cli.run(&args)?;
        if !out.success() {
            let info = ErrorInfo::from_output(&out);
            if mentions_missing(&info, id) {
                return Ok(None);
            }
            return Err(self.cli.failed(&args, &out));
        }
        let issues = parse_issues(&out.stdout).map_err(|d| self.cli.garbage(&args, d))?;
        Ok(find_exact(issues, id))
    }

    fn current(&self, id: &BeadId) -> Result<RawIssue, TrackerError> {
        self.show_raw(id)?
            .ok_or_else(|| TrackerError::NoSuchBead(id.clone()))
    }

    /// Runs a mutation and confirms it by the issue it prints or, failing that, by reading the
    /// bead again: bd may report a failed update with exit 0 and a message on stderr.
    fn mutate(
        &self,
        id: &BeadId,
        args: &[String],
        done: impl Fn(&Bead) -> bool,
    ) -> Result<(), TrackerError> {
        let out = self.cli.run(args)?;
        if out.success() && printed(&out, id).is_some_and(|b| done(&b)) {
            return Ok(());
        }
        let info = ErrorInfo::from_output(&out);
        if !out.success() && mentions_missing(&info, id) {
            return Err(TrackerError::NoSuchBead(id.clone()));
        }
        let now = self.current(id)?;
        if done(&now.bead) {
            return Ok(());
        }
        Err(self.refusal(args, &out, &now.bead))
    }

    fn refusal(&self, args: &[String], out: &Output, now: &Bead) -> TrackerError {
        let info = ErrorInfo::from_output(out);
        let message = if out.stdout.trim().is_empty() && out.stderr.trim().is_empty() {
            format!("bead {} is still {} afterwards", now.id, now.status)
        } else {
            info.message
        };
        TrackerError::Failed {
            command: self.cli.describe(args),
            code: out
                .code
                .map_or_else(|| "signal".to_string(), |c| c.to_string()),
            message,
        }
    }

    /// Records a reason as a comment; a failure here does not undo the state change, so it is
    /// reported but the change stands.
    fn comment(&self, id: &BeadId, prefix: &str, reason: &str) -> Result<(), TrackerError> {
        let reason = one_line(reason);
        if reason.is_empty() {
            return Ok(());
        }
        let args = vec![
            "comments".to_string(),
            "add".to_string(),
            id.to_string(),
            format!("{prefix}: {reason}"),
        ];
        self.cli.run_ok(&args).map(|_| ())
    }
}

/// The issue with this id in a mutation's output, if it printed one.
fn printed(out: &Output, id: &BeadId) -> Option<Bead> {
    parse_issues(&out.stdout)
        .ok()
        .and_then(|issues| find_exact(issues, id))
        .map(|i| i.bead)
}

/// Whether bd's message says this bead does not exist (bd has no error codes; the id must be
/// named so "database not found" is not mistaken for a missing bead).
fn mentions_missing(info: &ErrorInfo, id: &BeadId) -> bool {
    info.is_not_found() && info.message.contains(id.as_str())
}

impl Tracker for Bd {
    fn kind(&self) -> TrackerKind {
        TrackerKind::Bd
    }

    fn ready(&self) -> Result<Vec<Bead>, TrackerError> {
        self.cli.ready()
    }

    fn list(&self) -> Result<Vec<Bead>, TrackerError> {
        self.cli.list_all()
    }

    fn show(&self, id: &BeadId) -> Result<Option<Bead>, TrackerError> {
        // An old bd says "not found" only on stderr and exits 0 with nothing on stdout, which
        // `show_raw` reads as no issues.
        Ok(self.show_raw(id)?.map(|i| i.bead))
    }

    fn claim(&self, id: &BeadId, actor: &str) -> Result<ClaimOutcome, TrackerError> {
        let actor = check_actor(actor)?;
        let cur = self.current(id)?;
        if let Some(verdict) = claim_verdict(&cur.bead, actor) {
            return Ok(verdict);
        }
        let args = vec![
            "update".to_string(),
            id.to_string(),
            "--claim".to_string(),
            format!("--actor={actor}"),
            "--json".to_string(),
        ];
        let out = self.cli.run(&args)?;
        let mine =
            |b: &Bead| b.status == BeadStatus::InProgress && b.assignee.as_deref() == Some(actor);
        if out.success() && printed(&out, id).is_some_and(|b| mine(&b)) {
            return Ok(ClaimOutcome::Claimed);
        }
        let info = ErrorInfo::from_output(&out);
        if !out.success() && mentions_missing(&info, id) {
            return Err(TrackerError::NoSuchBead(id.clone()));
        }
        let now = self.current(id)?;
        if mine(&now.bead) {
            return Ok(ClaimOutcome::Claimed);
        }
        if let Some(verdict) = claim_verdict(&now.bead, actor) {
            return Ok(verdict);
        }
        // Still open and unclaimed: bd declined without anyone else holding it. A message
        // about claiming (e.g. open blockers) is a refusal; anything else is a failure.
        let m = info.message.to_ascii_lowercase();
        if m.contains("claim") || m.contains("block") {
            return Ok(ClaimOutcome::Refused {
                status: now.bead.status,
                holder: now.bead.assignee,
            });
        }
        Err(self.refusal(&args, &out, &now.bead))
    }

    fn close(&self, id: &BeadId, reason: &str) -> Result<(), TrackerError> {
        let mut args = vec!["close".to_string(), id.to_string()];
        let reason = one_line(reason);
        if !reason.is_empty() {
            args.push(format!("--reason={reason}"));
        }
        args.push("--json".to_string());
        self.mutate(id, &args, |b| b.status == BeadStatus::Closed)
    }

    fn block(&self, id: &BeadId, reason: &str) -> Result<(), TrackerError> {
        let cur = self.current(id)?;
        match cur.bead.status {
            BeadStatus::Closed => return Err(closed_is_final(id, "block")),
            BeadStatus::Blocked => return Ok(()),
            _ => {}
        }
        let args = vec![
            "update".to_string(),
            id.to_string(),
            "--status=blocked".to_string(),
            "--json".to_string(),
        ];
        self.mutate(id, &args, |b| b.status == BeadStatus::Blocked)?;
        self.comment(id, "Blocked", reason)
    }

    fn reopen(&self, id: &BeadId, reason: &str) -> Result<(), TrackerError> {
        let cur = self.current(id)?;
        match cur.bead.status {
            BeadStatus::Closed | BeadStatus::Deferred => return Ok(()),
            BeadStatus::Open if cur.bead.assignee.is_none() => return Ok(()),
            _ => {}
        }
        let args = vec![
            "update".to_string(),
            id.to_string(),
            "--status=open".to_string(),
            "--assignee=".to_string(),
            "--json".to_string(),
        ];
        self.mutate(id, &args, |b| {
            b.status == BeadStatus::Open && b.assignee.is_none()
        })?;
        self.comment(id, "Reopened", reason)
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
            // Old versions report failures on stderr with exit 0.
            let info = ErrorInfo::from_output(&out);
            if out.stdout.trim().is_empty() && out.stderr.to_ascii_lowercase().contains("error") {
                return Err(TrackerError::Failed {
                    command: self.cli.describe(&args),
                    code: "0".into(),
                    message: info.message,
                });
            }
            return Ok(());
        }
        let info = ErrorInfo::from_output(&out);
        for candidate in [on, id] {
            if mentions_missing(&info, candidate) {
                return Err(TrackerError::NoSuchBead(candidate.clone()));
            }
        }
        Err(self.cli.failed(&args, &out))
    }
}
