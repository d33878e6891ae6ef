//! Bead trackers behind one trait: `br` (beads_rust), `bd` (beads, Go) and the native
//! WORKPLAN.md checklist.
//!
//! The trackers differ in their list/show/ready JSON shapes, in close versus
//! `update -s closed`, in where errors go and in their claim rules. Adapters hide all of that
//! behind [`Tracker`], so the tick and the worker speak one vocabulary. No adapter writes a
//! tracker's database directly, and every external call has a timeout (see [`crate::system::proc`]).

use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono::{DateTime, Utc};

use serde::{Deserialize, Serialize};

use crate::model::{Bead, BeadId, BeadStatus};

pub mod bd;
mod beads_cli;
pub mod br;
pub mod br_jsonl;
pub mod br_native;
pub mod claw;
pub mod links;
pub mod native;
mod rules;
pub mod said;

/// Which tracker a project uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum TrackerKind {
    /// `.beads/` → br (or bd when only bd is installed); otherwise WORKPLAN.md.
    #[default]
    Auto,
    Br,
    Bd,
    Workplan,
    /// The claw loop's `.claw/WORKPLAN.md`: the first task not checked off, one at a time.
    Claw,
    /// The labelled issues of a GitHub repository.
    Github,
    /// The labelled issues of a GitLab project.
    Gitlab,
}

impl TrackerKind {
    pub fn parse(raw: &str) -> Option<TrackerKind> {
        match raw.trim().trim_matches('`').to_ascii_lowercase().as_str() {
            "auto" => Some(TrackerKind::Auto),
            "br" | "beads_rust" | "beads-rust" => Some(TrackerKind::Br),
            "bd" | "beads" => Some(TrackerKind::Bd),
            "workplan" | "workplan.md" | "native" => Some(TrackerKind::Workplan),
            "claw" => Some(TrackerKind::Claw),
            "github" | "github issues" => Some(TrackerKind::Github),
            "gitlab" | "gitlab issues" => Some(TrackerKind::Gitlab),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            TrackerKind::Auto => "auto",
            TrackerKind::Br => "br",
            TrackerKind::Bd => "bd",
            TrackerKind::Workplan => "workplan",
            TrackerKind::Claw => "claw",
            TrackerKind::Github => "github",
            TrackerKind::Gitlab => "gitlab",
        }
    }
}

/// What a claim attempt found.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub enum ClaimOutcome {
    /// The bead is now `in_progress` and assigned to the actor (or already was: claims by the
    /// same actor are idempotent).
    Claimed,
    /// Someone else holds it, or it is no longer open; try another bead.
    Refused {
        status: BeadStatus,
        holder: Option<String>,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum TrackerError {
    #[error("`{program}` is not installed (not found on PATH)")]
    NotInstalled { program: String },
    #[error("`{command}` timed out after {secs}s")]
    Timeout { command: String, secs: u64 },
    #[error("`{command}` failed (exit {code}): {message}")]
    Failed {
        command: String,
        code: String,
        message: String,
    },
    #[error("`{command}` printed output braids cannot read: {detail}")]
    Garbage { command: String, detail: String },
    #[error("bead `{0}` does not exist")]
    NoSuchBead(BeadId),
    #[error("{0}")]
    Io(String),
}

/// The direct dependencies of `bead` the tracker does not say are closed (3.3): one it does
/// not know counts as open. The worker's gate, a story's `blocked_by` and `story` commands all
/// ask this.
pub fn open_dependencies(tracker: &dyn Tracker, bead: &Bead) -> Result<Vec<BeadId>, TrackerError> {
    let mut open = Vec::new();
    for dep in &bead.dependencies {
        let closed = matches!(tracker.show(dep)?, Some(d) if d.status == BeadStatus::Closed);
        if !closed {
            open.push(dep.clone());
        }
    }
    Ok(open)
}

/// One project's bead tracker. Implementations are cheap to construct and hold no connection.
pub trait Tracker: Send + Sync {
    fn kind(&self) -> TrackerKind;

    /// Beads that can be started now (open, every blocker closed), most urgent first.
    fn ready(&self) -> Result<Vec<Bead>, TrackerError>;

    /// Every bead that is not deleted, for counts.
    fn list(&self) -> Result<Vec<Bead>, TrackerError>;

    /// [`Tracker::ready`], for a caller that has just read `listed` from [`Tracker::list`]. A
    /// tracker that can tell readiness from the listed beads alone answers from them (one read
    /// instead of two, and a consistent snapshot); the others ask again.
    fn ready_among(&self, listed: &[Bead]) -> Result<Vec<Bead>, TrackerError> {
        let _ = listed;
        self.ready()
    }

    /// One bead, with its direct dependencies; `Ok(None)` when it does not exist.
    fn show(&self, id: &BeadId) -> Result<Option<Bead>, TrackerError>;

    /// Atomically moves an open bead to `in_progress` for `actor` (4.6).
    fn claim(&self, id: &BeadId, actor: &str) -> Result<ClaimOutcome, TrackerError>;

    /// `in_progress → closed` (3.5). Closing a closed bead is a no-op.
    fn close(&self, id: &BeadId, reason: &str) -> Result<(), TrackerError>;

    /// `→ blocked` (3.3, 3.10), recording why.
    fn block(&self, id: &BeadId, reason: &str) -> Result<(), TrackerError>;

    /// `in_progress | blocked → open`, clearing the assignee: releases a stranded claim.
    fn reopen(&self, id: &BeadId, reason: &str) -> Result<(), TrackerError>;

    /// Creates an open bead and returns its id (used by `braids new` samples and tests).
    fn create(&self, title: &str, description: &str, priority: u8) -> Result<BeadId, TrackerError>;

    /// Adds a blocking dependency: `id` depends on `on`.
    fn add_dependency(&self, id: &BeadId, on: &BeadId) -> Result<(), TrackerError>;

    /// Whether a query is a local file read rather than a program run, so the tick can afford
    /// it for every project's dashboard counts.
    fn is_cheap(&self) -> bool {
        false
    }

    /// The files whose (size, mtime, inode) change whenever this tracker's answers can: what
    /// lets a tick reuse the last run's answers for a project nothing touched. Empty (the
    /// default) when no set of files can tell, so answers are never reused.
    fn state_files(&self) -> Vec<PathBuf> {
        Vec::new()
    }

    /// After this run's reads: whether their answers stay true while [`Tracker::state_files`]
    /// are unchanged, `Some(None)` for as long as they are, `Some(Some(t))` until `t` (a
    /// deferral ending); `None` (the default) means never reuse them.
    fn answers_valid(&self) -> Option<Option<DateTime<Utc>>> {
        None
    }

    /// Says `text` on the bead where people read it (a forge issue's comment); a tracker of
    /// files has nowhere to say it, and says nothing.
    fn tell(&self, id: &BeadId, text: &str) -> Result<(), TrackerError> {
        let _ = (id, text);
        Ok(())
    }

    /// What people replied on the bead since braids last asked there, oldest first, when the
    /// tracker lives where people talk: each reply from someone who may give it, and each
    /// ruling from someone who may not, once. Empty for nothing new, and always for a tracker
    /// of files.
    fn said_since_asked(&self, id: &BeadId) -> Result<Vec<said::Said>, TrackerError> {
        let _ = id;
        Ok(Vec::new())
    }

    /// How this run's reads were answered, for `-v` (`native (issues.jsonl)`, `br (why)`).
    fn read_path(&self) -> Option<String> {
        None
    }
}

/// Settings every adapter needs.
#[derive(Debug, Clone)]
pub struct TrackerOptions {
    pub project: PathBuf,
    /// Per external call.
    pub timeout: Duration,
    /// Overrides the program name (`br`, `bd`) — tests and unusual installs.
    pub program: Option<PathBuf>,
    /// braids' installation, where a forge's issues find the forge and its token; a tracker
    /// of files needs none.
    pub installation: Option<crate::system::paths::Paths>,
}

/// Picks and builds the tracker for a project: an explicit kind wins, otherwise a `.beads/`
/// directory means br (or bd when only bd is installed) and anything else means WORKPLAN.md.
pub fn open(kind: TrackerKind, opts: TrackerOptions) -> Result<Box<dyn Tracker>, TrackerError> {
    let resolved = match kind {
        TrackerKind::Auto => detect(&opts.project),
        k => k,
    };
    Ok(match resolved {
        TrackerKind::Br => Box::new(br::Br::new(opts)),
        TrackerKind::Bd => Box::new(bd::Bd::new(opts)),
        TrackerKind::Claw => Box::new(claw::ClawTracker::new(&opts, false)),
        // A forge's issues are opened by the forge room's `tracker::open`, which knows forges.
        k @ (TrackerKind::Github | TrackerKind::Gitlab) => {
            return Err(TrackerError::Io(format!(
                "the {} tracker is opened through its forge",
                k.as_str()
            )))
        }
        TrackerKind::Workplan | TrackerKind::Auto => {
            Box::new(native::Workplan::with_options(&opts))
        }
    })
}

/// As [`open`], for a caller that only reads: the native tracker then never writes its file
/// (it assigns missing ids in memory). `br` and `bd` reads change nothing of braids' anyway.
pub fn open_read_only(
    kind: TrackerKind,
    opts: TrackerOptions,
) -> Result<Box<dyn Tracker>, TrackerError> {
    let resolved = match kind {
        TrackerKind::Auto => detect(&opts.project),
        k => k,
    };
    match resolved {
        TrackerKind::Workplan | TrackerKind::Auto => {
            Ok(Box::new(native::Workplan::with_options(&opts).read_only()))
        }
        TrackerKind::Claw => Ok(Box::new(claw::ClawTracker::new(&opts, true))),
        k => open(k, opts),
    }
}

/// As [`open`] / [`open_read_only`], for the tick's observation: a br project's reads come from
/// its JSONL export whenever that file is known to say what br's database says
/// ([`br_native`]); writes still go through `br`.
pub fn open_observing(
    kind: TrackerKind,
    opts: TrackerOptions,
    read_only: bool,
) -> Result<Box<dyn Tracker>, TrackerError> {
    let resolved = match kind {
        TrackerKind::Auto => detect(&opts.project),
        k => k,
    };
    match (resolved, read_only) {
        (TrackerKind::Br, _) if opts.program.is_none() => {
            Ok(Box::new(br_native::BrNative::new(opts)))
        }
        (_, true) => open_read_only(resolved, opts),
        (_, false) => open(resolved, opts),
    }
}

/// The auto-detection rule, without building anything.
pub fn detect(project: &Path) -> TrackerKind {
    if project.join(".beads").is_dir() {
        if on_path("br") || !on_path("bd") {
            TrackerKind::Br
        } else {
            TrackerKind::Bd
        }
    } else {
        TrackerKind::Workplan
    }
}

/// Whether an executable named `program` is on PATH.
pub fn on_path(program: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::env::var_os("PATH").is_some_and(|p| {
        std::env::split_paths(&p).any(|d| {
            std::fs::metadata(d.join(program))
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
    })
}
