//! Whether a project's repository can host a worker at all, asked before anything is claimed:
//! a bead claimed in a repository with no commit, with no base branch (a detached HEAD and
//! nothing naming one, or a `Branch:` that names none) or in a shallow clone would only be
//! blocked by the first `git worktree add` or replay, one bead after another.

use std::path::Path;

use crate::format::project::ProjectConfig;

use super::WorkspaceMode;

/// Why no worker can work in the repository at `root` (with a fix), or `None` when one can.
/// A folder that is not a git repository has its agents in it directly and needs nothing.
pub fn cannot_host(root: &Path, project: &ProjectConfig) -> Option<String> {
    let mode = WorkspaceMode::of(project);
    let repo = git2::Repository::open(root).ok()?;
    let shown = root.display();
    if repo.is_shallow() {
        return Some(format!(
            "{shown} is a shallow clone, onto which braids cannot replay its work when the \
             upstream moves; run `git -C {shown} fetch --unshallow`"
        ));
    }
    if let Some(why) = lfs_problem(root, &repo) {
        return Some(why);
    }
    if mode == WorkspaceMode::Shared {
        return None;
    }
    let head = repo.head().map(|_| ());
    match head {
        // A detached HEAD is fine when the base branch is known otherwise (PROJECT.md, the
        // upstream's default); a `Branch:` that names no branch is not.
        Ok(()) => match super::base::base_branch_of(root, project) {
            Err(e) => Some(format!("{e:#}")),
            Ok(base) => missing_remote(&repo, &base, &shown.to_string()),
        },
        Err(e) if e.code() == git2::ErrorCode::UnbornBranch => Some(format!(
            "{shown} has no commit yet, so no worktree can be cut from it; commit what is there \
             (`git -C {shown} add -A && git -C {shown} commit -m 'Start'`)"
        )),
        // Anything else may be a moment's state of a repository being written (a worker
        // landing); the worker itself reports a lasting problem.
        Err(_) => None,
    }
}

/// The base branch asks to be pushed to a remote the repository does not have (removed or
/// renamed): every landing would fail its push.
fn missing_remote(repo: &git2::Repository, base: &str, shown: &str) -> Option<String> {
    let config = repo.config().ok()?;
    let remote = config.get_string(&format!("branch.{base}.remote")).ok()?;
    if remote == "." || repo.find_remote(&remote).is_ok() {
        return None;
    }
    Some(format!(
        "branch {base} of {shown} is pushed to the remote {remote}, which the repository does \
         not have; add it (`git -C {shown} remote add {remote} <url>`) or land locally only \
         (`git -C {shown} branch --unset-upstream {base}`)"
    ))
}

/// A repository that keeps files in Git LFS (`filter=lfs` in its `.gitattributes`) needs
/// git-lfs installed and set up (`git lfs install`): else its checkouts hold pointer files,
/// and an agent's edit of one would be committed as content in place of the pointer.
fn lfs_problem(root: &Path, repo: &git2::Repository) -> Option<String> {
    let attributes = std::fs::read_to_string(root.join(".gitattributes")).ok()?;
    let uses = attributes.contains("filter=lfs");
    if !uses {
        return None;
    }
    let installed = which::which("git-lfs").is_ok();
    let configured = repo.config().is_ok_and(|c| {
        c.get_string("filter.lfs.process").is_ok() || c.get_string("filter.lfs.smudge").is_ok()
    });
    lfs_verdict(&root.display().to_string(), uses, installed, configured)
}

fn lfs_verdict(shown: &str, uses: bool, installed: bool, configured: bool) -> Option<String> {
    match (uses, installed, configured) {
        (false, _, _) | (true, true, true) => None,
        (true, false, _) => Some(format!(
            "{shown} keeps files in Git LFS, but git-lfs is not installed, so its worktrees would \
             hold pointer files; install it (`apt-get install git-lfs`) and run `git lfs install`"
        )),
        (true, true, false) => Some(format!(
            "{shown} keeps files in Git LFS, but git-lfs is not set up, so its worktrees would \
             hold pointer files; run `git lfs install`"
        )),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_repository_in_git_lfs_needs_git_lfs_installed_and_set_up() {
        assert_eq!(lfs_verdict("/p", false, false, false), None);
        assert_eq!(lfs_verdict("/p", true, true, true), None);
        assert!(lfs_verdict("/p", true, false, false)
            .unwrap()
            .contains("apt-get install git-lfs"));
        assert!(lfs_verdict("/p", true, true, false)
            .unwrap()
            .contains("run `git lfs install`"));
    }

    use super::*;

    fn git(dir: &Path, args: &[&str]) {
        let ok = std::process::Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .current_dir(dir)
            .output()
            .unwrap()
            .status
            .success();
        assert!(ok, "git {args:?}");
    }

    #[test]
    fn a_repository_with_no_commit_a_detached_head_or_a_shallow_history_hosts_no_worker() {
        let worktree = ProjectConfig::default();
        let shared = crate::format::project::parse_project(
            "# App\n\nWorkspace: shared\n",
            Path::new("PROJECT.md"),
        )
        .value;
        let tmp = tempfile::tempdir().unwrap();
        let plain = tmp.path().join("plain");
        std::fs::create_dir_all(&plain).unwrap();
        assert_eq!(cannot_host(&plain, &worktree), None);

        let repo = tmp.path().join("repo");
        std::fs::create_dir_all(&repo).unwrap();
        git(&repo, &["init", "-q", "-b", "trunk"]);
        let why = cannot_host(&repo, &worktree).unwrap();
        assert!(why.contains("no commit yet"), "{why}");
        assert!(why.contains("add -A"), "{why}");
        assert_eq!(cannot_host(&repo, &shared), None);

        git(&repo, &["commit", "-q", "--allow-empty", "-m", "one"]);
        git(&repo, &["commit", "-q", "--allow-empty", "-m", "two"]);
        assert_eq!(cannot_host(&repo, &worktree), None);
        git(&repo, &["checkout", "-q", "--detach"]);
        let why = cannot_host(&repo, &worktree).unwrap();
        assert!(why.contains("detached HEAD"), "{why}");
        git(&repo, &["checkout", "-q", "trunk"]);

        git(&repo, &["config", "branch.trunk.remote", "origin"]);
        git(&repo, &["config", "branch.trunk.merge", "refs/heads/trunk"]);
        let why = cannot_host(&repo, &worktree).unwrap();
        assert!(
            why.contains("remote origin, which the repository does not have"),
            "{why}"
        );
        git(&repo, &["branch", "--unset-upstream", "trunk"]);
        assert_eq!(cannot_host(&repo, &worktree), None);

        let url = format!("file://{}", repo.display());
        git(
            tmp.path(),
            &["clone", "-q", "--depth", "1", &url, "shallow"],
        );
        let why = cannot_host(&tmp.path().join("shallow"), &worktree).unwrap();
        assert!(why.contains("fetch --unshallow"), "{why}");
    }
}
