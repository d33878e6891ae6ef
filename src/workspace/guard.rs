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
    // Submodule URLs (an `ext::` one runs a program in every later workspace).
    ".gitmodules",
    // Filters and diff drivers, which run programs (any folder's, see [`is_control`]).
    ".gitattributes",
];

/// Control files wherever they are: a `.gitattributes` in any folder names filters too.
const CONTROL_ANYWHERE: &[&str] = &[".gitattributes", ".gitmodules"];

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
        || folded
            .components()
            .any(|c| CONTROL_ANYWHERE.iter().any(|a| c.as_os_str() == *a))
}

/// The target of `root/rel` when it is a symbolic link leading out of `root` (absolute, or
/// climbing above it).
pub fn escaping_link(root: &Path, rel: &str) -> Option<String> {
    let target = std::fs::read_link(root.join(rel)).ok()?;
    let target = target.to_string_lossy();
    crate::git::tree::leads_out(rel, &target).then(|| target.into_owned())
}

/// The repository's shared git directory (`<project>/.git` for a plain checkout).
fn common_dir(project: &Path) -> Result<PathBuf> {
    Ok(crate::git::open(project)?.commondir().to_path_buf())
}

/// Why no git may run in the worktree `ws` (see [`foreign_gitfile`] and [`git_config`]), as
/// the refusal `prepare_landing` returns; nothing is kept then.
pub(super) fn before_git(ws: &Workspace) -> Result<Option<Prepared>> {
    if let Some(held) = admin_drift(&ws.project, &ws.dir)? {
        return Ok(Some(held));
    }
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

/// Why the worktree of `ws` may not be trusted with braids' git even though its `.git` file
/// is git's: an admin file braids recorded when it made the worktree says something else now
/// (`HEAD` on another branch or detached, `commondir` or `gitdir` rewritten), or the bead's
/// branch is gone from the project's repository. The admin files are put back as braids wrote
/// them, so the work can be kept on a branch for a person; when they cannot be, nothing is.
pub(super) fn admin_drift(project: &Path, dir: &Path) -> Result<Option<Prepared>> {
    let Some(pin) = crate::git::safe::Pin::read(dir) else {
        return Ok(None);
    };
    // A `.git` file naming another folder is [`foreign_gitfile`]'s: nothing is kept then.
    let gitfile = crate::system::beneath::read_string(dir, Path::new(".git")).unwrap_or_default();
    if gitfile.trim().strip_prefix("gitdir:").map(str::trim) != pin.admin.to_str() {
        return Ok(None);
    }
    let mut paths: Vec<String> = pin
        .drift()
        .into_iter()
        .map(|(f, was, now)| format!("{f}: {was} -> {now}"))
        .collect();
    let home = crate::git::open(project)?;
    if home.find_reference(&pin.branch).is_err() {
        paths.push(format!("{} is not in the project's repository", pin.branch));
    }
    if paths.is_empty() {
        return Ok(None);
    }
    let keep = match pin.restore() {
        Ok(()) => home.find_reference(&pin.branch).is_ok(),
        Err(e) => {
            tracing::warn!(dir = %dir.display(), "cannot put the worktree's admin files back: {e:#}");
            false
        }
    };
    Ok(Some(Prepared::Held {
        why: "the agent changed its worktree's git admin files, which say what braids lands".into(),
        paths,
        keep,
    }))
}

/// Why no git may run in the worktree at `dir` to keep a bead's work on a branch: its `.git`
/// file names another folder, or its admin files changed and cannot be put back. Admin files
/// that can be are put back (the work is kept all the same, for a person), with a warning.
pub(super) fn before_keep(project: &Path, dir: &Path, bead: &crate::model::BeadId) -> Result<()> {
    if let Some(r) = admin_drift(project, dir)?.and_then(Prepared::refusal) {
        tracing::warn!(bead = %bead, "{}: {}", r.why, r.paths.join(", "));
        anyhow::ensure!(
            r.keep,
            "{} ({}); braids runs no git there",
            r.why,
            r.paths.join(", ")
        );
    }
    if let Some(why) = foreign_gitfile(project, dir)? {
        anyhow::bail!("{why}; braids runs no git there");
    }
    Ok(())
}

/// The admin files of the worktree at `dir` (from braids' record of it, else its `.git`
/// file) that could redirect braids' git if the agent rewrote them: where `HEAD` points, where
/// the repository is (`commondir`), which work tree is its (`gitdir`), its own settings and
/// sparse patterns. The ones that exist, for a sandbox to bind read-only.
pub fn redirecting_admin_files(dir: &Path) -> Vec<PathBuf> {
    let admin = match crate::git::safe::Pin::read(dir) {
        Some(pin) => pin.admin,
        None => match admin_of(dir) {
            Ok(a) => a,
            Err(_) => return Vec::new(),
        },
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
    .filter(|p| std::fs::symlink_metadata(p).is_ok())
    .collect()
}

/// Why the work changing `changes` (all but `exclude` land; read from the commits' trees)
/// waits for a person: it changes braids' control files (an in-tree hooks folder among them,
/// see [`super::hooks::in_tree`]), or adds a link leading out of the repository (its target
/// read from git, not the file system) or any link in the tracker's folder. The work is kept
/// on a branch.
pub(super) fn content(
    ws: &Workspace,
    changes: &[crate::git::tree::Change],
    exclude: &[PathBuf],
) -> Result<Option<Prepared>> {
    let landing = |p: &String| !exclude.iter().any(|x| Path::new(p).starts_with(x));
    let hooks_here = super::hooks::in_tree(&ws.project);
    let control: Vec<String> = changes
        .iter()
        .map(|c| &c.path)
        .filter(|p| {
            let p = Path::new(p.as_str());
            is_control(p) || hooks_here.as_ref().is_some_and(|h| p.starts_with(h))
        })
        .filter(|p| !ws.approved && landing(p))
        .cloned()
        .collect();
    if !control.is_empty() {
        return Ok(Some(Prepared::Held {
            why: "the agent changed braids' control files, which only a person may change".into(),
            paths: control,
            keep: true,
        }));
    }
    Ok(bad_links(&ws.dir, changes)?.map(|links| Prepared::Held {
        why: "the work adds a symbolic link leading out of the repository".into(),
        paths: links,
        keep: true,
    }))
}

/// Why the commit a landing just made on `ws`'s branch (on top of `base`) must not land, read
/// from its tree: a control file braids did not put there itself (`ours`, the tracker's files,
/// and the deliverable under `.braids/iterations` the landing names), a file in the tracker's
/// folder that is not the tracker's, or a link that never lands.
pub(super) fn landed(
    ws: &Workspace,
    base: &str,
    landing: &super::Landing,
    ours: &[PathBuf],
) -> Result<Option<String>> {
    let changes = crate::git::tree::changes(&ws.dir, &format!("{base}..HEAD"))?;
    let own = |p: &Path| {
        ours.iter().any(|o| o == p)
            || (p.starts_with(".braids/iterations") && landing.include.iter().any(|i| i == p))
    };
    let mut bad: Vec<String> = changes
        .iter()
        .filter(|c| c.status != 'D')
        .map(|c| Path::new(&c.path))
        .filter(|p| {
            (crate::git::tree::in_tracker_dir(p) && !crate::git::tree::is_tracker_file(p))
                || (!ws.approved && is_control(p) && !own(p))
        })
        .map(|p| p.display().to_string())
        .collect();
    bad.extend(bad_links(&ws.dir, &changes)?.unwrap_or_default());
    Ok((!bad.is_empty()).then(|| {
        format!(
            "the landing would carry what no agent's work may: {}",
            bad.join(", ")
        )
    }))
}

/// The links among `changes` that never land, approved or not, as `path -> target`: one
/// leading out of the repository, or any in the tracker's folder. `None` when there is none.
pub(super) fn bad_links(
    dir: &Path,
    changes: &[crate::git::tree::Change],
) -> Result<Option<Vec<String>>> {
    let mut bad = Vec::new();
    for c in changes.iter().filter(|c| c.is_link()) {
        let target = crate::git::tree::link_target(dir, &c.new_id)?;
        if crate::git::tree::leads_out(&c.path, &target)
            || crate::git::tree::in_tracker_dir(Path::new(&c.path))
        {
            bad.push(format!("{} -> {target}", c.path));
        }
    }
    Ok((!bad.is_empty()).then_some(bad))
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
        if harmless(&name) {
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

/// Whether the (lower-case) setting `name` is one a person changes in the normal course of
/// work and that runs nothing ([`HARMLESS`], a remote's [`REMOTE_HARMLESS`] keys): changing it
/// holds no bead. Everything else (the core settings, includes, filters, diff and merge
/// drivers, aliases, credential helpers, transports, a remote's upload or receive program)
/// does.
pub(super) fn harmless(name: &str) -> bool {
    if let Some(rest) = name.strip_prefix("remote.") {
        return rest
            .rsplit_once('.')
            .is_some_and(|(_, key)| REMOTE_HARMLESS.contains(&key));
    }
    HARMLESS.iter().any(|h| name.starts_with(h))
}

/// A remote's keys that name no program: where it is and what is fetched or pushed.
const REMOTE_HARMLESS: &[&str] = &[
    "url",
    "pushurl",
    "fetch",
    "push",
    "tagopt",
    "prune",
    "prunetags",
    "mirror",
    "skipdefaultupdate",
    "skipfetchall",
    "promisor",
    "partialclonefilter",
];

/// Settings (prefixes) that run nothing; a remote's are [`REMOTE_HARMLESS`].
const HARMLESS: &[&str] = &[
    // Lets each worktree read its own `config.worktree`, which [`fingerprint`] covers; git
    // turns it on for a sparse checkout.
    "extensions.worktreeconfig",
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
    fn settings_that_name_a_program_are_never_harmless() {
        for n in [
            "remote.origin.url",
            "remote.origin.fetch",
            "remote.up.pushurl",
            "remote.a.b.url",
            "branch.main.remote",
            "user.email",
            "extensions.worktreeconfig",
        ] {
            assert!(harmless(n), "{n}");
        }
        for n in [
            "remote.origin.uploadpack",
            "remote.origin.receivepack",
            "remote.origin.vcs",
            "core.sshcommand",
            "core.fsmonitor",
            "core.hookspath",
            "credential.helper",
            "credential.https://x.helper",
            "protocol.ext.allow",
            "filter.lfs.clean",
            "diff.x.textconv",
            "merge.x.driver",
            "gpg.program",
            "include.path",
            "url.ext::sh.insteadof",
            "submodule.lib.url",
        ] {
            assert!(!harmless(n), "{n}");
        }
    }

    #[test]
    fn git_files_that_name_programs_are_control_files_in_any_folder() {
        for p in [
            ".gitattributes",
            ".gitmodules",
            "src/.gitattributes",
            "a/b/.gitmodules",
        ] {
            assert!(is_control(Path::new(p)), "{p}");
        }
        assert!(!is_control(Path::new("docs/gitattributes.md")));
    }

    #[test]
    fn the_admin_files_that_could_redirect_braids_are_listed() {
        let tmp = tempfile::tempdir().unwrap();
        let project = tmp.path().join("p");
        let repo = git2::Repository::init(&project).unwrap();
        let sig = git2::Signature::now("t", "t@t").unwrap();
        let tree = repo
            .find_tree(repo.index().unwrap().write_tree().unwrap())
            .unwrap();
        repo.commit(Some("HEAD"), &sig, &sig, "one", &tree, &[])
            .unwrap();
        let dir = tmp.path().join("wt");
        let out = std::process::Command::new("git")
            .arg("-C")
            .arg(&project)
            .args(["worktree", "add", "-q", "-b", "braids/x"])
            .arg(&dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let files = redirecting_admin_files(&dir);
        let names: Vec<String> = files
            .iter()
            .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["HEAD", "commondir", "gitdir"], "{files:?}");
        assert!(files
            .iter()
            .all(|f| f.starts_with(project.join(".git/worktrees"))));
        std::fs::write(files[0].with_file_name("config.worktree"), "").unwrap();
        assert_eq!(redirecting_admin_files(&dir).len(), 4);
        assert!(redirecting_admin_files(&tmp.path().join("none")).is_empty());
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
