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

/// The hooks folder, when it holds a commit hook git would run.
pub(super) fn active(project: &Path) -> Option<PathBuf> {
    dir(project).filter(|d| !present(d).is_empty())
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

/// How long the hooks of one commit may run (a pre-commit running a test suite).
const HOOK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(15 * 60);

/// Commits what is staged in `ws`'s worktree with the commit hooks in `hooks` (the project's,
/// see the module docs) run as git runs them, inside `sandbox` when one is set: a hook runs
/// whatever the worktree holds (a pre-commit config, a script it calls, `node_modules`), which
/// is the agent's, so it gets no more than the agent had. `Ok(Err(output))` when a hook
/// refused, with what it printed; nothing staged commits nothing.
pub(super) fn commit(
    ws: &Workspace,
    hooks: &Path,
    message: &str,
    sandbox: &crate::system::sandbox::Settings,
) -> Result<std::result::Result<bool, String>> {
    let dir = &ws.dir;
    if git(dir, &["diff", "--cached", "--quiet"])?.success() {
        return Ok(Ok(false));
    }
    let path = format!("core.hooksPath={}", hooks.display());
    let mut cmd = std::process::Command::new("git");
    cmd.args(["-c", "core.fsmonitor=false", "-c", &path])
        .args(["commit", "--quiet", "-m", message])
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_EDITOR", "true")
        .env("LC_ALL", "C")
        // The person's hooks (`-c` beats the environment's overrides), nothing else of theirs.
        .envs(crate::git::safe::env_for(dir));
    let out = sandboxed(ws, cmd, sandbox, HOOK_TIMEOUT)?;
    if out.timed_out {
        return Ok(Err(format!(
            "the commit hooks ran longer than {} minutes",
            HOOK_TIMEOUT.as_secs() / 60
        )));
    }
    if out.success() {
        return Ok(Ok(true));
    }
    let said = [out.stdout.trim(), out.stderr.trim()].join("\n");
    Ok(Err(said.trim().to_string()))
}

/// Runs `cmd` in `ws`'s worktree with `timeout`, inside `sandbox` when one is set, with a temp
/// folder of its own: what the worktree holds is the agent's, so what runs it gets no more than
/// the agent had.
pub(super) fn sandboxed(
    ws: &Workspace,
    mut cmd: std::process::Command,
    sandbox: &crate::system::sandbox::Settings,
    timeout: std::time::Duration,
) -> Result<crate::system::proc::Output> {
    let dir = &ws.dir;
    let tmp = std::env::temp_dir().join(format!(
        "braids-ws-{}-{}",
        std::process::id(),
        super::ready::workspace_id(dir)
    ));
    let choice = sandbox.choice().map_err(anyhow::Error::msg)?;
    if choice.is_on() {
        let place = crate::system::sandbox::Place {
            workspace: dir.clone(),
            project: ws.project.clone(),
            tmp: tmp.clone(),
            own: crate::system::sandbox::policy::named_paths(&cmd, &sandbox.home),
            protect: super::guard::redirecting_admin_files(dir),
        };
        cmd = sandbox.wrap(&choice, &cmd, &sandbox.policy(&place), &tmp)?;
    }
    let mut run = crate::system::proc::Invocation::new(
        std::iter::once(cmd.get_program().to_os_string())
            .chain(cmd.get_args().map(|a| a.to_os_string())),
    )
    .cwd(dir)
    .timeout(timeout);
    for (k, v) in cmd.get_envs() {
        if let Some(v) = v {
            run = run.env(k, v);
        }
    }
    let out = run.run().map_err(|e| anyhow::anyhow!("{e}"));
    // What it started and left behind, however it left its group, ends with it.
    // Never in a shared work tree: that is the person's checkout.
    let mut folders = vec![tmp.clone()];
    if !ws.is_shared() {
        folders.push(dir.clone());
    }
    crate::system::container::stop_holders(&folders);
    let _ = std::fs::remove_dir_all(&tmp);
    out
}

/// The work as it would land (all but `exclude`), committed with the commit hooks in `hooks`
/// (see [`active`]): what a refusing hook printed, or `None` when they passed.
/// Either way the worktree's branch ends holding everything the agent left on top of
/// `base`, a formatter's changes included, as `land` expects it; on an error it is put back
/// as it was, so the work can still be kept.
pub(super) fn trial(
    ws: &Workspace,
    bead: &BeadId,
    base: &str,
    exclude: &[PathBuf],
    (message, hooks): (&str, &Path),
    sandbox: &crate::system::sandbox::Settings,
) -> Result<Option<String>> {
    let before = git_ok(&ws.dir, &["rev-parse", "HEAD"])?.trim().to_string();
    let tried = (|| {
        git_ok(&ws.dir, &["reset", "--quiet", "--soft", base])?;
        git_ok(&ws.dir, &["reset", "--quiet"])?;
        stage(&ws.dir, exclude, &[])?;
        let verdict = commit(ws, hooks, message, sandbox)?;
        stage(&ws.dir, &[], &[])?;
        commit_staged(&ws.dir, &format!("wip {bead}"))?;
        Ok::<_, anyhow::Error>(verdict.err())
    })();
    if tried.is_err() {
        // A git killed mid-commit leaves its index lock; nothing else runs git here now.
        if let Ok(admin) = git_ok(&ws.dir, &["rev-parse", "--absolute-git-dir"]) {
            let _ = std::fs::remove_file(Path::new(admin.trim()).join("index.lock"));
        }
        let _ = git(&ws.dir, &["reset", "--quiet", "--soft", &before]);
    }
    tried
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
