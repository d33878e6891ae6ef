//! The branch a bead's work is opened as a pull request from: pushed by braids from its own
//! commit, never from whatever a worktree's HEAD says, and moved again only by braids (its
//! agent's next attempt, its own rebase) with a lease on the head it last saw, so a person's
//! commit pushed to the branch meanwhile is never overwritten.

use std::path::Path;
use std::time::Duration;

use anyhow::{anyhow, Result};
use git2::Repository;

use super::over_network;

/// The URL of `remote` in `root`'s configuration.
pub fn remote_url(root: &Path, remote: &str) -> Option<String> {
    let repo = Repository::open(root).ok()?;
    let r = repo.find_remote(remote).ok()?;
    r.url().map(str::to_string)
}

/// Pushes `commit` to `branch` on `remote`. With `lease`, only while the remote's branch is
/// still that commit (a person's push since is refused, not overwritten); without, only a new
/// branch or a fast-forward.
pub fn push_review_branch(
    root: &Path,
    remote: &str,
    commit: &str,
    branch: &str,
    lease: Option<&str>,
    timeout: Duration,
) -> Result<()> {
    let refspec = format!("{commit}:refs/heads/{branch}");
    let lease_arg = lease.map(|l| format!("--force-with-lease=refs/heads/{branch}:{l}"));
    let mut args = vec!["push", "--quiet", "--porcelain", "--no-verify"];
    if let Some(l) = &lease_arg {
        args.push(l);
    }
    args.extend(["--", remote, &refspec]);
    let out = over_network(root, &args, timeout)?;
    if out.success() {
        return Ok(());
    }
    if out.timed_out {
        return Err(anyhow!("git push timed out after {}s", timeout.as_secs()));
    }
    Err(anyhow!(
        "git push of {branch} failed: {}",
        super::said_on_one_line(&out)
    ))
}

/// Fetches `branch` from `remote` as it is now; its commit. Kept under braids' own ref
/// (`refs/braids/review/<branch>`), so a worktree can be cut at it and git keeps its objects.
pub fn fetch_review_branch(
    root: &Path,
    remote: &str,
    branch: &str,
    timeout: Duration,
) -> Result<String> {
    let local = format!("refs/braids/review/{branch}");
    let refspec = format!("+refs/heads/{branch}:{local}");
    let out = over_network(
        root,
        &["fetch", "--quiet", "--no-tags", "--", remote, &refspec],
        timeout,
    )?;
    if !out.success() {
        return Err(anyhow!(
            "cannot fetch {branch} from {remote}: {}",
            out.stderr.trim()
        ));
    }
    Ok(super::git_ok(root, &["rev-parse", "--verify", &local])?
        .trim()
        .to_string())
}
