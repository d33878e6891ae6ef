//! Work held for a person (`braids/kept/…`): what it changes, and a worktree to land it from
//! once the person approves it.

use std::path::Path;

use anyhow::Result;
use serde::Serialize;

use super::{guard, GitWorktrees};
use crate::git::{git, git_ok};
use crate::model::BeadId;
use crate::workspace::Workspace;

/// The most of a held change's patch shown; the summary always lists every file.
const PATCH_CAP: usize = 256 * 1024;

/// What a kept branch would change on the project's branch.
#[derive(Debug, Clone, Serialize)]
pub struct HeldDiff {
    pub branch: String,
    /// The commit braids kept there, the one an approval lands.
    pub commit: String,
    /// The project branch it is compared with (from where they parted).
    pub base: String,
    /// `git diff --stat`: one line a file, and the totals.
    pub stat: String,
    /// The patch, cut at 256 KiB (`truncated` then says so).
    pub patch: String,
    pub truncated: bool,
    /// The changed paths braids holds for a person (its control files; a bead's deliverable
    /// is not one).
    pub control: Vec<String>,
}

/// The `braids/kept/…` branches of `project` holding work of `bead` that never landed, the
/// newest last.
pub fn kept_branches(project: &Path, bead: &BeadId) -> Result<Vec<String>> {
    let pattern = format!("braids/kept/{bead}-*");
    let out = git_ok(
        project,
        &[
            "branch",
            "--list",
            "--sort=committerdate",
            "--format=%(refname:short)",
            &pattern,
        ],
    )?;
    Ok(out.lines().map(str::to_string).collect())
}

/// Every `braids/kept/…` branch of `project`, for views that ask of many beads at once.
pub fn all_kept(project: &Path) -> Vec<String> {
    git(
        project,
        &[
            "for-each-ref",
            "--format=%(refname:short)",
            "refs/heads/braids/kept/",
        ],
    )
    .map(|o| o.stdout.lines().map(str::to_string).collect())
    .unwrap_or_default()
}

/// What `commit` (kept on `branch`) changes since it parted from the project's base
/// branch. Renames are shown as a deletion and an addition, so a control file moved away is
/// named.
pub fn held_diff(project: &Path, branch: &str, commit: &str) -> Result<HeldDiff> {
    let base = crate::workspace::base_branch(project)?;
    let range = format!("{base}...{commit}");
    let plain = [
        "diff",
        "--no-ext-diff",
        "--no-textconv",
        "--no-renames",
        "--no-color",
    ];
    let with = |more: &[&str]| {
        let mut args = plain.to_vec();
        args.extend_from_slice(more);
        git_ok(project, &args)
    };
    let stat = with(&["--stat=100", &range])?;
    let mut patch = with(&[&range])?;
    let truncated = patch.len() > PATCH_CAP;
    if truncated {
        let mut cut = PATCH_CAP;
        while !patch.is_char_boundary(cut) {
            cut -= 1;
        }
        patch.truncate(cut);
    }
    let names = with(&["--name-only", "-z", &range])?;
    let landing = super::super::agent_excludes();
    let control = names
        .split('\0')
        .filter(|p| !p.is_empty() && !landing.iter().any(|x| Path::new(p).starts_with(x)))
        .filter(|p| guard::is_control(Path::new(p)))
        .map(str::to_string)
        .collect();
    Ok(HeldDiff {
        branch: branch.to_string(),
        commit: commit.to_string(),
        base,
        stat,
        patch,
        truncated,
        control,
    })
}

impl GitWorktrees {
    /// A worktree for `bead` at the kept `commit`, marked approved: preparing its landing
    /// replays it onto the project's branch as the worker would, without holding it for the
    /// control files a person has now seen.
    pub fn approved(&self, project: &Path, bead: &BeadId, commit: &str) -> Result<Workspace> {
        self.cut(project, bead, Some(commit), true)
    }
}
