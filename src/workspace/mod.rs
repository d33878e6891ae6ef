//! Where an agent works: a git worktree of its own per bead (the default), or the project's
//! own work tree (`Workspace: shared` in PROJECT.md).
//!
//! Several agents on one project must never see, commit or overwrite each other's files or the
//! files a person left uncommitted. A worktree per bead gives each agent a private checkout on
//! a branch `braids/<bead>` cut from the tip of the project's branch, outside the project's
//! work tree (so the person's `git status` never shows it). Finishing a bead lands its work as
//! one commit on the project's branch, in three steps the worker takes under the project's
//! repository lock:
//!
//! 1. [`Workspaces::prepare_landing`]: commit what the agent left, replay it onto the project
//!    branch's current tip (a rebase: the history stays a line of one commit per bead), and
//!    check that moving the project's work tree forward cannot touch a file the person
//!    changed. A conflict or a file in the way is reported before anything irreversible.
//! 2. The worker closes the bead in the tracker (CONTRACTS 3.5).
//! 3. [`Workspaces::land`]: fold everything into one commit `<summary> (<bead-id>)` that also
//!    holds the tracker's closed state, and fast-forward the project's branch to it. git
//!    itself refuses a fast-forward that would overwrite an uncommitted change, so a person's
//!    work is never lost.
//!
//! Cleanup is braids' job: a landed or blocked bead's worktree is removed at once, and each
//! tick sweeps worktrees whose worker is gone ([`Workspaces::sweep`]).

mod base;
mod cleanup;
pub mod guard;
pub mod hooks;
mod host;
pub mod pool;
pub mod ready;
mod scrub;
mod worktree;

use std::path::{Path, PathBuf};

use anyhow::Result;
use serde::{Deserialize, Serialize};

use crate::model::BeadId;

pub use base::{base_branch, base_branch_of, checkout_elsewhere};
pub use host::cannot_host;
pub use pool::{Keep, Pooling, Retired};
pub use ready::{workspace_id, Readiness, SetupRun};
pub use worktree::{all_kept, held_diff, kept_branches, GitWorktrees, HeldDiff};

/// FNV-1a, 32 bits: a short name stable across releases (std's hasher is not).
pub(crate) fn fnv1a(bytes: &[u8]) -> u32 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h as u32
}

/// How a project's agents work, from PROJECT.md `Workspace:`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WorkspaceMode {
    /// A git worktree per bead.
    #[default]
    Worktree,
    /// Every agent in the project's own work tree (braids before workspaces).
    Shared,
}

impl WorkspaceMode {
    pub fn parse(s: &str) -> Option<WorkspaceMode> {
        match s.trim().to_ascii_lowercase().as_str() {
            "worktree" | "per-bead" | "isolated" => Some(WorkspaceMode::Worktree),
            "shared" => Some(WorkspaceMode::Shared),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            WorkspaceMode::Worktree => "worktree",
            WorkspaceMode::Shared => "shared",
        }
    }

    /// What a project asked for in PROJECT.md (`Workspace: shared`, a comment after it
    /// allowed); a worktree per bead otherwise.
    pub fn of(config: &crate::format::project::ProjectConfig) -> WorkspaceMode {
        config
            .field("workspace")
            .and_then(|f| WorkspaceMode::parse(first_word(f.clean_value())))
            .unwrap_or_default()
    }

    /// PROJECT.md's `Workspace:` when it is neither mode: its line, what is wrong, the fix.
    pub fn problem(
        config: &crate::format::project::ProjectConfig,
    ) -> Option<(usize, String, &'static str)> {
        let f = config.field("workspace")?;
        let v = f.clean_value();
        WorkspaceMode::parse(first_word(v)).is_none().then(|| {
            (
                f.line,
                format!("Workspace `{v}` is not worktree or shared, so each bead gets a worktree of its own"),
                "write `Workspace: shared` to have agents work in the project itself, or `worktree` (the default)",
            )
        })
    }
}

/// `shared (one checkout)` → `shared`.
fn first_word(v: &str) -> &str {
    v.split(|c: char| c.is_whitespace() || c == '(')
        .next()
        .unwrap_or_default()
}

/// One agent's place to work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workspace {
    /// The project's root (its own work tree).
    pub project: PathBuf,
    /// Where the agent runs: the worktree, or the project root when shared.
    pub dir: PathBuf,
    /// `braids/<bead>` for a worktree; `None` when shared.
    pub branch: Option<String>,
    /// The project branch the worktree was cut from and lands on.
    pub base: Option<String>,
    /// The repository's git configuration when the agent was given the worktree: a change
    /// to it while the agent works holds the bead before braids runs git there.
    pub git_config: Option<Vec<u8>>,
    /// Work a person approved (`braids approve`): it lands with the control files and links
    /// that otherwise hold it.
    pub approved: bool,
    /// The commit the work goes on top of instead of the base branch's tip: a pull request's
    /// head, whose commits (a person's among them) are kept as they are, never rebased or
    /// folded into braids' commit.
    pub onto: Option<String>,
}

impl Workspace {
    /// What the work is checked against and committed on top of: [`Workspace::onto`], else
    /// the base branch.
    pub fn start(&self) -> Option<&str> {
        self.onto.as_deref().or(self.base.as_deref())
    }
}

impl Workspace {
    /// The project's own work tree, for `Workspace: shared`.
    pub fn shared(project: &Path) -> Workspace {
        Workspace {
            onto: None,
            project: project.to_path_buf(),
            dir: project.to_path_buf(),
            branch: None,
            base: None,
            git_config: None,
            approved: false,
        }
    }

    pub fn is_shared(&self) -> bool {
        self.branch.is_none()
    }

    /// The place in this workspace of a path in the project (`<project>/x` → `<dir>/x`).
    pub fn here(&self, in_project: &Path) -> PathBuf {
        match in_project.strip_prefix(&self.project) {
            Ok(rel) => self.dir.join(rel),
            Err(_) => in_project.to_path_buf(),
        }
    }

    /// The place in the project of a path in this workspace.
    pub fn in_project(&self, here: &Path) -> PathBuf {
        match here.strip_prefix(&self.dir) {
            Ok(rel) => self.project.join(rel),
            Err(_) => here.to_path_buf(),
        }
    }
}

/// What one landing commit holds: everything the agent changed except `exclude`, plus
/// `include` (forced in even when excluded) and the project's current `tracker_files`. Paths
/// are project-relative; `exclude` may name `.` to take nothing but `include` (research-only).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Landing {
    pub message: String,
    pub exclude: Vec<PathBuf>,
    pub include: Vec<PathBuf>,
    pub tracker_files: Vec<PathBuf>,
    /// The commit runs the repository's commit hooks (see [`hooks`]).
    #[serde(default)]
    pub hooks: bool,
}

/// What never lands from an agent's worktree unless named: the iterations (a bead's own
/// deliverable is included by name), status reports and handoffs (the worker's `report`
/// paths, a test keeps them equal), generated files and the agent CLIs' own state.
pub fn agent_excludes() -> Vec<PathBuf> {
    [
        ".braids/iterations",
        ".ai/executor-result",
        ".ai/executor-results",
        ".ai/HANDOFF.md",
        ".ai/handoffs",
    ]
    .into_iter()
    .chain(crate::events::GENERATED.iter().copied())
    .chain(crate::agent::TOOL_STATE.iter().copied())
    .map(PathBuf::from)
    .collect()
}

/// Whether a bead's work can land, decided before the bead is closed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub enum Prepared {
    /// Replayed onto the project branch; these paths change when it lands.
    Ready { paths: Vec<String> },
    /// The work conflicts with what landed meanwhile. Nothing is half-merged; the workspace
    /// is as the agent left it.
    Conflict { paths: Vec<String> },
    /// The person has uncommitted changes (or untracked files) at these paths in the
    /// project's work tree, which landing would overwrite: the bead waits.
    InTheWay { paths: Vec<String> },
    /// The work must not land without a person (see [`guard`]): it changes braids' control
    /// files or adds a link leading out of the repository (`keep`: the work is kept on a
    /// branch), or the worktree no longer points at the project's repository or its git
    /// configuration changed (no git is run there, so nothing is kept).
    Held {
        why: String,
        paths: Vec<String>,
        keep: bool,
    },
    /// A commit hook of the repository refused the work, with what it printed: a failed
    /// attempt, whose output the next attempt's prompt shows.
    Refused { hook_output: String },
}

/// Why work cannot land, the paths it is about, and whether git may run in the workspace to
/// keep it on a branch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub why: String,
    pub paths: Vec<String>,
    pub keep: bool,
}

impl Prepared {
    /// `None` when the work can land; otherwise why not, for the bead's blocked reason.
    pub fn refusal(self) -> Option<Refusal> {
        let (why, paths, keep) = match self {
            Prepared::Ready { .. } => return None,
            Prepared::Conflict { paths } => (
                "its work conflicts with work that landed meanwhile".to_string(),
                paths,
                true,
            ),
            Prepared::InTheWay { paths } => (
                "landing it would overwrite uncommitted changes in the project's work tree"
                    .to_string(),
                paths,
                true,
            ),
            Prepared::Held { why, paths, keep } => (why, paths, keep),
            Prepared::Refused { hook_output } => (
                format!("a commit hook refused it: {hook_output}"),
                Vec::new(),
                true,
            ),
        };
        Some(Refusal { why, paths, keep })
    }
}

/// The work-tree edge the worker and the tick drive.
pub trait Workspaces: Send + Sync {
    /// A fresh workspace for `bead`, replacing any left by a crashed worker.
    fn create(&self, project: &Path, bead: &BeadId) -> Result<Workspace>;
    /// [`create`], its branch at `commit` instead of the base branch (a pull request's head).
    ///
    /// [`create`]: Workspaces::create
    fn create_at(&self, project: &Path, bead: &BeadId, commit: &str) -> Result<Workspace>;
    /// Step 1 of landing (see the module docs). Nothing in the project changes; `exclude`
    /// as in [`Landing`]. With `hooks` (the landing's message), the repository's commit hooks
    /// run on a trial commit of the work, so a refusal comes before the close. The caller
    /// holds the repository lock for this step and [`land`]; the other methods take it
    /// themselves.
    ///
    /// [`land`]: Workspaces::land
    fn prepare_landing(
        &self,
        ws: &Workspace,
        bead: &BeadId,
        exclude: &[PathBuf],
        hooks: Option<&str>,
    ) -> Result<Prepared>;
    /// The bead's workspace as a worker left it, to finish its landing; `None` when there is
    /// none.
    fn resume(&self, _project: &Path, _bead: &BeadId) -> Result<Option<Workspace>> {
        Ok(None)
    }

    /// Step 3: one commit as `landing` says, fast-forwarded onto the project branch. Returns
    /// the commit id, or `None` when there was nothing to commit.
    fn land(&self, ws: &Workspace, landing: &Landing) -> Result<Option<String>>;
    /// [`land`]'s commit, made and checked the same way on the bead's own branch, without
    /// moving the project's branch: the work opened as a pull request. Returns the commit id,
    /// or `None` when there was nothing to commit.
    ///
    /// [`land`]: Workspaces::land
    fn propose(&self, ws: &Workspace, landing: &Landing) -> Result<Option<String>>;
    /// Commits whatever the agent left and keeps it on a branch of its own for a person
    /// (`braids/kept/<bead>-<time>`), whose name is returned; `None` when the agent changed
    /// nothing. The worktree stays until [`Workspaces::remove`].
    fn keep(&self, ws: &Workspace, bead: &BeadId) -> Result<Option<String>>;
    /// Removes the worktree and the bead's branch (a kept branch has another name).
    fn remove(&self, ws: &Workspace) -> Result<()>;
    /// Copies in the project's untracked files to copy and runs its setup command where it
    /// has not run (see [`ready`]); a fresh workspace needs this before its agent starts.
    fn make_ready(&self, _ws: &Workspace) -> Result<Readiness> {
        Ok(Readiness::default())
    }
    /// Ends a finished bead's worktree: back to the project's pool, scrubbed, when it has one
    /// (see [`pool`]); otherwise, or when it cannot be shown clean, removed as
    /// [`Workspaces::remove`] does.
    fn retire(&self, ws: &Workspace) -> Result<Retired> {
        self.remove(ws).map(|()| Retired::Removed { why: None })
    }
    /// Removes the project's pooled workspaces idle for too long, or all of them when it no
    /// longer works in worktrees; how many went. A project without a pool costs one `stat`.
    fn prune_pool(&self, _project: &Path, _all: bool) -> Result<usize> {
        Ok(0)
    }
    /// Removes the pools of projects not among `projects` (unregistered); how many went.
    fn sweep_orphans(&self, _projects: &[PathBuf]) -> usize {
        0
    }
    /// Removes the worktrees of `project` whose bead is not in `live`, and prunes git's
    /// worktree records; work a worktree holds that no branch has is kept first. Returns what
    /// was removed.
    fn sweep(&self, project: &Path, live: &[BeadId]) -> Result<Vec<Swept>>;
}

/// A worktree [`Workspaces::sweep`] removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Swept {
    pub bead: BeadId,
    /// The branch that keeps the work its worker left (it died before landing it).
    pub kept: Option<String>,
}
