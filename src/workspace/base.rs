//! The branch a project's beads land on and are pushed from: PROJECT.md's `Branch:`, else the
//! upstream's default branch (`refs/remotes/<remote>/HEAD`, which `git clone` records), else
//! the branch the person has checked out. Never an assumed `main`: master, trunk and develop
//! are as good, and a person working on a feature branch (or a detached HEAD) keeps it while
//! beads land on the base branch beside them.

use std::path::Path;

use anyhow::{bail, Context, Result};
use git2::{BranchType, Repository};

use crate::format::fields::clean_value;
use crate::format::project::ProjectConfig;

/// The project's base branch (see the module docs), reading its PROJECT.md; an error says
/// which fix a person makes.
pub fn base_branch(project: &Path) -> Result<String> {
    base_branch_of(
        project,
        &crate::format::project::read_project(project).value,
    )
}

/// [`base_branch`] with PROJECT.md already read. A shared work tree (`Workspace: shared`)
/// lands on the branch it has checked out.
pub fn base_branch_of(project: &Path, config: &ProjectConfig) -> Result<String> {
    let repo = Repository::open(project)
        .with_context(|| format!("{} is not a git repository", project.display()))?;
    if super::WorkspaceMode::of(config) == super::WorkspaceMode::Shared {
        // The agents commit onto whatever the project has checked out.
        return resolve(&repo, project, None, false);
    }
    let asked = config
        .field("branch")
        .map(|f| (clean_value(&f.value), f.line))
        .filter(|(b, _)| !b.is_empty());
    resolve(&repo, project, asked, true)
}

/// Why braids' own commits in the project's work tree (an iteration's new status) wait: the
/// person has another branch checked out (or a detached HEAD) than the base branch beads land
/// on, and those commits would go onto it and change their files. `None` when they may go
/// ahead, and always for `Workspace: shared` (its agents commit onto the checkout anyway).
pub fn checkout_elsewhere(project: &Path, config: &ProjectConfig) -> Option<String> {
    if super::WorkspaceMode::of(config) == super::WorkspaceMode::Shared {
        return None;
    }
    let base = base_branch_of(project, config).ok()?;
    let here = crate::git::checked_out(project);
    (here.as_deref() != Some(base.as_str())).then(|| {
        format!(
            "the checkout is on {}, not {base}: the iteration is completed when it is back on \
             {base}",
            here.as_deref().unwrap_or("a detached HEAD")
        )
    })
}

/// In-process (git2), as the tick asks it of every project with work each run.
fn resolve(
    repo: &Repository,
    project: &Path,
    asked: Option<(&str, usize)>,
    upstream_default: bool,
) -> Result<String> {
    let shown = project.display();
    let local = |name: &str| repo.find_branch(name, BranchType::Local).is_ok();
    let remote = remote(repo);
    if let Some((name, line)) = asked {
        if local(name) {
            return Ok(name.to_string());
        }
        // Only on the remote (a fresh clone has just its default branch locally): a local
        // branch tracking it, as `git switch <name>` would make.
        if let Some(remote) = &remote {
            let theirs = format!("{remote}/{name}");
            if let Ok(r) = repo.find_branch(&theirs, BranchType::Remote) {
                let tip = r.get().peel_to_commit()?;
                let mut made = repo.branch(name, &tip, false)?;
                made.set_upstream(Some(&theirs))?;
                return Ok(name.to_string());
            }
        }
        bail!(
            "{shown}/.braids/PROJECT.md line {line}: Branch `{name}` is not a branch of the \
             repository; correct the line or create the branch (`git -C {shown} branch {name}`)"
        );
    }
    if let Some(remote) = remote.as_ref().filter(|_| upstream_default) {
        let default = repo
            .find_reference(&format!("refs/remotes/{remote}/HEAD"))
            .ok()
            .and_then(|r| r.symbolic_target().map(String::from));
        let prefix = format!("refs/remotes/{remote}/");
        if let Some(name) = default.as_deref().and_then(|d| d.strip_prefix(&prefix)) {
            if local(name) {
                return Ok(name.to_string());
            }
        }
    }
    match crate::git::checked_out(project) {
        Some(branch) => Ok(branch),
        None => bail!(
            "{shown} is on a detached HEAD, so braids does not know which branch beads land on; \
             check out a branch (`git -C {shown} switch <branch>`) or name one in PROJECT.md \
             (`Branch: main`)"
        ),
    }
}

/// The remote whose default branch counts: `origin`, else the only one.
fn remote(repo: &Repository) -> Option<String> {
    let remotes = repo.remotes().ok()?;
    let names: Vec<&str> = remotes.iter().flatten().collect();
    match names[..] {
        [one] => Some(one.to_string()),
        _ => names.contains(&"origin").then(|| "origin".to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(dir: &Path, args: &[&str]) -> String {
        let out = std::process::Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .current_dir(dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn at(dir: &Path, asked: Option<(&str, usize)>) -> Result<String> {
        resolve(&Repository::open(dir).unwrap(), dir, asked, true)
    }

    #[test]
    fn the_base_is_the_asked_branch_else_the_upstream_default_else_the_checked_out_one() {
        let tmp = tempfile::tempdir().unwrap();
        let up = tmp.path().join("up");
        std::fs::create_dir_all(&up).unwrap();
        sh(&up, &["init", "-q", "-b", "trunk"]);
        sh(&up, &["commit", "-q", "--allow-empty", "-m", "one"]);
        sh(&up, &["branch", "develop"]);
        sh(tmp.path(), &["clone", "-q", up.to_str().unwrap(), "clone"]);
        let clone = tmp.path().join("clone");

        // A person on a feature branch: the upstream's default still is the base.
        sh(&clone, &["switch", "-q", "-c", "feature"]);
        assert_eq!(at(&clone, None).unwrap(), "trunk");
        // Detached, too.
        sh(&clone, &["checkout", "-q", "--detach"]);
        assert_eq!(at(&clone, None).unwrap(), "trunk");
        // Asked for a branch only the remote has: a local one tracking it is made.
        assert_eq!(at(&clone, Some(("develop", 3))).unwrap(), "develop");
        assert!(sh(&clone, &["branch", "--list", "develop"]).contains("develop"));
        let e = at(&clone, Some(("nope", 7))).unwrap_err().to_string();
        assert!(e.contains("PROJECT.md line 7: Branch `nope`"), "{e}");

        // No remote: the checked-out branch, and a detached HEAD is an error naming the fix.
        assert_eq!(at(&up, None).unwrap(), "trunk");
        sh(&up, &["checkout", "-q", "--detach"]);
        let e = at(&up, None).unwrap_err().to_string();
        assert!(e.contains("Branch: main"), "{e}");
    }
}
