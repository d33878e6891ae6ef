//! The repository's commit hooks (`pre-commit`, `prepare-commit-msg`, `commit-msg`), run on a
//! bead's landing commit as git runs them on the person's own commits: a formatter's changes
//! go into the commit, a refusal is a failed attempt whose output the next prompt shows.
//! `Hooks: off` in PROJECT.md skips them.
//!
//! The hooks are the person's, never the agent's: the folder is found from the project's own
//! configuration (`core.hooksPath`, a relative one taken in the project's work tree, not the
//! agent's worktree; else the repository's `hooks` folder), and its scripts are part of the
//! fingerprint [`super::guard::git_config`] records when a worktree is cut, so a hook the
//! agent planted or changed holds the bead before braids runs any git.

use std::path::{Path, PathBuf};

use anyhow::Result;

use super::worktree::{commit_staged, stage};
use super::Workspace;
use crate::format::project::ProjectConfig;
use crate::git::{git, git_ok};
use crate::model::BeadId;

/// The hooks a commit runs.
const COMMIT_HOOKS: &[&str] = &["pre-commit", "prepare-commit-msg", "commit-msg"];

/// Whether PROJECT.md lets landing commits run the repository's hooks (`Hooks: off` does
/// not; anything else, or no field, does).
pub fn enabled(config: &ProjectConfig) -> bool {
    let Some(f) = config.field("hooks") else {
        return true;
    };
    !matches!(
        crate::format::fields::clean_value(&f.value)
            .to_ascii_lowercase()
            .as_str(),
        "off" | "no" | "false" | "none" | "skip" | "0"
    )
}

/// The folder git takes the project's hooks from.
pub(super) fn dir(project: &Path) -> Option<PathBuf> {
    let repo = git2::Repository::open(project).ok()?;
    let configured = repo
        .config()
        .ok()
        .and_then(|c| c.get_path("core.hooksPath").ok());
    Some(match configured {
        Some(p) if p.is_absolute() => p,
        Some(p) => project.join(p),
        None => repo.commondir().join("hooks"),
    })
}

/// The hooks folder when it lies in the project's work tree (a relative `core.hooksPath`,
/// such as `.githooks`), relative to it: its files run inside braids, so a change to them is a
/// change to braids' control files.
pub(super) fn in_tree(project: &Path) -> Option<PathBuf> {
    let d = dir(project)?;
    let rel = d.strip_prefix(project).ok()?;
    (!rel.starts_with(".git")).then(|| rel.to_path_buf())
}

/// The commit hooks in `dir` git would run (present and executable), by name.
pub(super) fn present(dir: &Path) -> Vec<(&'static str, PathBuf)> {
    use std::os::unix::fs::PermissionsExt;
    COMMIT_HOOKS
        .iter()
        .map(|name| (*name, dir.join(name)))
        .filter(|(_, p)| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
        .collect()
}

/// One line per commit hook of `project`, naming its content, for the fingerprint of the
/// repository's settings.
pub(super) fn fingerprint(project: &Path) -> Vec<String> {
    let Some(dir) = dir(project) else {
        return Vec::new();
    };
    present(&dir)
        .into_iter()
        .map(|(name, path)| {
            let id = std::fs::read(&path)
                .ok()
                .and_then(|b| git2::Oid::hash_object(git2::ObjectType::Blob, &b).ok())
                .map_or_else(|| "unreadable".to_string(), |o| o.to_string());
            format!("hook.{name}={id} {}", path.display())
        })
        .collect()
}

/// Commits what is staged in the worktree `dir` with the commit hooks in `hooks` (the
/// project's, see [`super::hooks`]) run as git runs them. `Ok(Err(output))` when a hook
/// refused, with what it printed; nothing staged commits nothing.
pub(super) fn commit(
    dir: &Path,
    hooks: &Path,
    message: &str,
) -> Result<std::result::Result<bool, String>> {
    if git(dir, &["diff", "--cached", "--quiet"])?.success() {
        return Ok(Ok(false));
    }
    let path = format!("core.hooksPath={}", hooks.display());
    let out = git(dir, &["-c", &path, "commit", "--quiet", "-m", message])?;
    if out.success() {
        return Ok(Ok(true));
    }
    let said = [out.stdout.trim(), out.stderr.trim()].join("\n");
    Ok(Err(said.trim().to_string()))
}

/// The work as it would land (all but `exclude`), committed with the project's commit
/// hooks: what a refusing hook printed, or `None` when they passed or there are none.
/// Either way the worktree's branch ends holding everything the agent left on top of
/// `base`, a formatter's changes included, as `land` expects it.
pub(super) fn trial(
    ws: &Workspace,
    bead: &BeadId,
    base: &str,
    exclude: &[PathBuf],
    message: &str,
) -> Result<Option<String>> {
    let Some(hooks) = dir(&ws.project).filter(|d| !present(d).is_empty()) else {
        return Ok(None);
    };
    git_ok(&ws.dir, &["reset", "--quiet", "--soft", base])?;
    git_ok(&ws.dir, &["reset", "--quiet"])?;
    stage(&ws.dir, exclude, &[])?;
    let verdict = commit(&ws.dir, &hooks, message)?;
    stage(&ws.dir, &[], &[])?;
    commit_staged(&ws.dir, &format!("wip {bead}"))?;
    Ok(verdict.err())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hooks_are_on_unless_project_md_says_off() {
        let parse =
            |t: &str| crate::format::project::parse_project(t, Path::new("PROJECT.md")).value;
        assert!(enabled(&parse("# A\n\nStatus: active\n")));
        assert!(enabled(&parse("# A\n\nHooks: on\n")));
        assert!(!enabled(&parse("# A\n\n- **Hooks:** off\n")));
        assert!(!enabled(&parse("# A\n\nHooks: No\n")));
    }

    #[test]
    fn the_hooks_folder_is_the_persons_and_a_changed_hook_changes_the_fingerprint() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let repo = git2::Repository::init(tmp.path()).unwrap();
        let hooks = tmp.path().join(".git/hooks");
        assert_eq!(dir(tmp.path()).unwrap(), hooks);
        std::fs::create_dir_all(&hooks).unwrap();
        let hook = hooks.join("pre-commit");
        std::fs::write(&hook, "#!/bin/sh\nexit 0\n").unwrap();
        assert!(present(&hooks).is_empty(), "not executable: git skips it");
        std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
        let before = fingerprint(tmp.path());
        assert_eq!(before.len(), 1, "{before:?}");
        std::fs::write(&hook, "#!/bin/sh\ncurl evil\n").unwrap();
        assert_ne!(fingerprint(tmp.path()), before);

        // A relative core.hooksPath is the project's folder.
        repo.config()
            .unwrap()
            .set_str("core.hooksPath", "githooks")
            .unwrap();
        assert_eq!(dir(tmp.path()).unwrap(), tmp.path().join("githooks"));
    }
}
