//! What an agent may not make braids do through its workspace. The agent runs arbitrary code
//! there and may be steered by a hostile bead, so before braids lands anything or runs git in
//! a worktree it checks that the worktree still points at the project's repository, that the
//! repository's git configuration is the one it was when the agent started, and that the work
//! changes none of braids' control files and adds no link leading out of the repository. Any
//! of these holds the bead for a person instead of landing it.

use std::path::{Component, Path, PathBuf};

use anyhow::{Context, Result};

use super::{Prepared, Workspace};

/// Files that steer braids (its configuration, a project's fields and iterations, the
/// protocol's rules and state, the claw loop's plan, the tracker's database, the agents'
/// instructions): an agent's change to one never lands without a person.
pub const CONTROL: &[&str] = &[
    ".braids",
    ".ai/step-rules.yaml",
    ".ai/states",
    ".claw/config.yaml",
    ".claw/WORKPLAN.md",
    ".beads",
    "AGENTS.md",
    // What it names is copied from the person's files into every workspace.
    ".worktreeinclude",
];

/// `p` as a plain relative path: `./` and empty components dropped; `None` when it is absolute
/// or climbs out with `..`.
pub fn normalize(p: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    (!out.as_os_str().is_empty()).then_some(out)
}

/// Whether the project-relative `p` is one of braids' control files ([`CONTROL`]), however it
/// is spelled: `./` and `//` dropped, and in any case, since on a case-insensitive file system
/// `.BRAIDS/project.md` is `.braids/PROJECT.md` (holding such a path on a case-sensitive one
/// costs a person a look, never a wrong landing). A path that cannot be normalised counts.
pub fn is_control(p: &Path) -> bool {
    let Some(p) = normalize(p) else {
        return true;
    };
    let folded = PathBuf::from(p.to_string_lossy().to_lowercase());
    CONTROL.iter().any(|c| folded.starts_with(c.to_lowercase()))
}

/// The target of `root/rel` when it is a symbolic link leading out of `root` (absolute, or
/// climbing above it).
pub fn escaping_link(root: &Path, rel: &str) -> Option<String> {
    let target = std::fs::read_link(root.join(rel)).ok()?;
    let from = Path::new(rel).parent().unwrap_or(Path::new(""));
    let mut depth: i64 = from.components().count() as i64;
    for c in target.components() {
        match c {
            Component::Normal(_) => depth += 1,
            Component::CurDir => {}
            Component::ParentDir => depth -= 1,
            Component::RootDir | Component::Prefix(_) => depth = -1,
        }
        if depth < 0 {
            return Some(target.display().to_string());
        }
    }
    None
}

/// The repository's shared git directory (`<project>/.git` for a plain checkout).
fn common_dir(project: &Path) -> Result<PathBuf> {
    Ok(crate::git::open(project)?.commondir().to_path_buf())
}

/// Why no git may run in the worktree `ws` (see [`foreign_gitfile`] and [`git_config`]), as
/// the refusal `prepare_landing` returns; nothing is kept then.
pub(super) fn before_git(ws: &Workspace) -> Result<Option<Prepared>> {
    if let Some(why) = foreign_gitfile(&ws.project, &ws.dir)? {
        return Ok(Some(Prepared::Held {
            why,
            paths: vec![".git".into()],
            keep: false,
        }));
    }
    let changed = ws
        .git_config
        .as_ref()
        .is_some_and(|seen| fingerprint(&ws.project, &ws.dir).ok().as_ref() != Some(seen));
    Ok(changed.then(|| Prepared::Held {
        why: "the repository's git configuration changed while the agent worked, so braids \
              ran no git in its workspace"
            .into(),
        paths: vec![".git/config".into()],
        keep: false,
    }))
}

/// Why the work changing `paths` (all but `exclude` land) waits for a person: it changes
/// braids' control files (an in-tree hooks folder among them, see [`super::hooks::in_tree`])
/// or adds a link leading out of the repository. The work is kept on a branch.
pub(super) fn content(ws: &Workspace, paths: &[String], exclude: &[PathBuf]) -> Option<Prepared> {
    let landing = |p: &String| !exclude.iter().any(|x| Path::new(p).starts_with(x));
    let hooks_here = super::hooks::in_tree(&ws.project);
    let control: Vec<String> = paths
        .iter()
        .filter(|p| {
            let p = Path::new(p.as_str());
            is_control(p) || hooks_here.as_ref().is_some_and(|h| p.starts_with(h))
        })
        .filter(|p| !ws.approved && landing(p))
        .cloned()
        .collect();
    if !control.is_empty() {
        return Some(Prepared::Held {
            why: "the agent changed braids' control files, which only a person may change".into(),
            paths: control,
            keep: true,
        });
    }
    let links: Vec<String> = paths
        .iter()
        .filter_map(|p| Some(format!("{p} -> {}", escaping_link(&ws.dir, p)?)))
        .collect();
    (!links.is_empty()).then(|| Prepared::Held {
        why: "the work adds a symbolic link leading out of the repository".into(),
        paths: links,
        keep: true,
    })
}

/// The repository's own configuration as it is now (what every worktree of it reads), as
/// sorted `name=value` lines, without the [`HARMLESS`] settings, and its commit hooks (see
/// [`super::hooks`]): what would run inside braids when it commits.
pub fn git_config(project: &Path) -> Result<Vec<u8>> {
    let common = common_dir(project)?;
    let mut lines = config_lines(&common.join("config"), "")?;
    // The main work tree's own settings, read once `extensions.worktreeConfig` is on.
    lines.extend(config_lines(&common.join("config.worktree"), "main:")?);
    lines.extend(super::hooks::fingerprint(project));
    lines.sort();
    Ok(lines.join("\n").into_bytes())
}

/// [`git_config`] as the worktree at `dir` reads it: with its own `config.worktree` (a sparse
/// checkout's settings), which its agent can write.
pub(super) fn fingerprint(project: &Path, dir: &Path) -> Result<Vec<u8>> {
    let mut out = git_config(project)?;
    out.extend(worktree_own(dir)?);
    Ok(out)
}

/// The settings of the worktree at `dir` alone: its `config.worktree` and its sparse
/// checkout's patterns, both in its admin folder, which its agent can write.
pub(super) fn worktree_own(dir: &Path) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    let Ok(admin) = admin_of(dir) else {
        return Ok(out);
    };
    for line in config_lines(&admin.join("config.worktree"), "worktree:")? {
        out.push(b'\n');
        out.extend_from_slice(line.as_bytes());
    }
    let sparse = admin.join("info/sparse-checkout");
    if std::fs::symlink_metadata(&sparse).is_ok() {
        for line in std::fs::read_to_string(&sparse).unwrap_or_default().lines() {
            out.extend_from_slice(format!("\nsparse:{line}").as_bytes());
        }
    }
    Ok(out)
}

/// The settings in the git config file at `path` but the [`HARMLESS`] ones, as `name=value`
/// lines after `prefix`; none when there is no such file.
fn config_lines(path: &Path, prefix: &str) -> Result<Vec<String>> {
    if std::fs::symlink_metadata(path).is_err() {
        return Ok(Vec::new());
    }
    let config =
        git2::Config::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut lines = Vec::new();
    let mut entries = config.entries(None)?;
    while let Some(e) = entries.next() {
        let e = e?;
        let name = e.name().unwrap_or_default().to_ascii_lowercase();
        if HARMLESS.iter().any(|h| name.starts_with(h)) {
            continue;
        }
        lines.push(format!("{prefix}{name}={}", e.value().unwrap_or_default()));
    }
    Ok(lines)
}

/// Where the repository's git configuration is kept as it was when the agent was given the
/// worktree at `dir`: beside the worktree, out of the agent's reach when it is sandboxed, so a
/// later run (a dead worker's landing, the sweep) compares with that and not with what the
/// agent may have made of it.
pub(super) fn baseline_of(dir: &Path) -> PathBuf {
    let name = dir.file_name().unwrap_or_default().to_string_lossy();
    dir.with_file_name(format!(".{name}.git-config"))
}

/// The configuration recorded for the worktree at `dir`, or the current one when none was.
pub(super) fn baseline(project: &Path, dir: &Path) -> Result<Vec<u8>> {
    match std::fs::read(baseline_of(dir)) {
        Ok(b) => Ok(b),
        Err(_) => fingerprint(project, dir),
    }
}

/// Settings a person changes in the normal course of work (a remote, a branch's upstream, who
/// they are, housekeeping) that run nothing: changing them holds no bead. Everything else (the
/// core settings, includes, filters, diff and merge drivers, aliases, credential helpers) does.
const HARMLESS: &[&str] = &[
    // Lets each worktree read its own `config.worktree`, which [`fingerprint`] covers; git
    // turns it on for a sparse checkout.
    "extensions.worktreeconfig",
    "remote.",
    "branch.",
    "user.",
    "gc.",
    "pull.",
    "fetch.",
    "maintenance.",
    "color.",
    "advice.",
    "log.",
    "rerere.",
];

/// The admin folder git keeps for the worktree at `dir`, from its `.git` file (check
/// [`foreign_gitfile`] first).
pub(super) fn admin_of(dir: &Path) -> Result<PathBuf> {
    let text = crate::system::beneath::read_string(dir, Path::new(".git"))?;
    text.trim()
        .strip_prefix("gitdir:")
        .map(|s| PathBuf::from(s.trim()))
        .with_context(|| format!("{} names no repository", dir.join(".git").display()))
}

/// The files of the worktree at `dir`'s admin folder that say where its git looks (its
/// branch, its repository, its own settings): a sandbox that can keeps them read-only for the
/// agent, who still writes the rest of the folder (the index, its logs) through git.
pub fn redirecting_admin_files(dir: &Path) -> Vec<PathBuf> {
    let Ok(admin) = admin_of(dir) else {
        return Vec::new();
    };
    [
        "HEAD",
        "commondir",
        "gitdir",
        "config.worktree",
        "info/sparse-checkout",
    ]
    .iter()
    .map(|f| admin.join(f))
    .filter(|p| std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_file()))
    .collect()
}

/// Why the worktree at `dir` no longer belongs to the project's repository, if it does not:
/// its `.git` must be the file git wrote, naming an admin folder under the repository's
/// `worktrees/` that names `dir` back.
pub fn foreign_gitfile(project: &Path, dir: &Path) -> Result<Option<String>> {
    let file = dir.join(".git");
    let meta = match std::fs::symlink_metadata(&file) {
        Ok(m) => m,
        Err(e) => return Ok(Some(format!("{} cannot be read: {e}", file.display()))),
    };
    if !meta.file_type().is_file() {
        return Ok(Some(format!(
            "{} is not the file git wrote",
            file.display()
        )));
    }
    let text = crate::system::beneath::read_string(dir, Path::new(".git"))?;
    let Some(admin) = text
        .trim()
        .strip_prefix("gitdir:")
        .map(|s| PathBuf::from(s.trim()))
    else {
        return Ok(Some(format!("{} names no repository", file.display())));
    };
    let worktrees = common_dir(project)?.join("worktrees");
    let same = |a: &Path, b: &Path| match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    let inside = admin.parent().is_some_and(|p| same(p, &worktrees));
    let back = std::fs::read_to_string(admin.join("gitdir"))
        .is_ok_and(|b| same(Path::new(b.trim()), &file));
    // The admin folder is writable by the agent: its `commondir` must still lead home.
    let common = std::fs::read_to_string(admin.join("commondir")).is_ok_and(|c| {
        same(
            &admin.join(c.trim()),
            &common_dir(project).unwrap_or_default(),
        )
    });
    Ok((!inside || !back || !common).then(|| {
        format!(
            "{} was changed to point at {}, not at the project's repository",
            file.display(),
            admin.display()
        )
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_files_are_found_however_they_are_spelled() {
        for p in [
            ".braids/PROJECT.md",
            "./.braids/iterations/001/ITERATION.md",
            ".//.ai/step-rules.yaml",
            ".ai/states/x.json",
            ".claw/WORKPLAN.md",
            ".beads/leak.txt",
            "AGENTS.md",
            ".BRAIDS/project.md",
            "Agents.md",
            "./.Beads/x",
            "../elsewhere",
            "/etc/passwd",
        ] {
            assert!(is_control(Path::new(p)), "{p}");
        }
        for p in [
            "src/main.rs",
            ".ai/history.md",
            "docs/AGENTS.md.txt",
            ".braidsx",
        ] {
            assert!(!is_control(Path::new(p)), "{p}");
        }
        assert_eq!(
            normalize(Path::new("./a//b/./c")),
            Some(PathBuf::from("a/b/c"))
        );
    }

    #[test]
    fn links_leading_out_of_the_repository_are_found() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        let link = |name: &str, to: &str| std::os::unix::fs::symlink(to, root.join(name)).unwrap();
        link("a/b/up", "../../README");
        link("a/b/out", "../../../secret");
        link("abs", "/home/someone/.ssh/id_ed25519");
        link("a/side", "b/up");
        assert_eq!(escaping_link(root, "a/b/up"), None);
        assert_eq!(escaping_link(root, "a/side"), None);
        assert!(escaping_link(root, "a/b/out").is_some());
        assert!(escaping_link(root, "abs").is_some());
        assert_eq!(escaping_link(root, "a"), None, "not a link");
    }
}
