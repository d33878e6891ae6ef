//! A workspace ready to work in: the untracked files git does not bring (`.env`, local
//! configuration) copied from the project, and the project's setup command run once per new
//! workspace, so an agent finds what a person's checkout has.
//!
//! What to copy is named the way Claude Code reads it: a `.worktreeinclude` file in the
//! project (gitignore syntax), plus `[workspace] copy` / PROJECT.md `Copy:`. Only untracked
//! files are copied, never through a link on either side, and a copied file never lands: the
//! list is kept beside the worktree and [`super::worktree::stage`] leaves it out.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use super::pool::Record;
use super::{GitWorktrees, Workspace};
use crate::git::git_ok;

/// The file a project names its files to copy in, as Claude Code reads it.
pub const WORKTREE_INCLUDE: &str = ".worktreeinclude";

/// What making a workspace ready did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Readiness {
    /// Taken from the pool rather than checked out anew.
    pub reused: bool,
    /// Project-relative paths copied in.
    pub copied: Vec<String>,
    /// The setup command, when it ran.
    pub setup: Option<SetupRun>,
    /// What could not be copied, and why: told in the bead's log, never a failed bead.
    pub warnings: Vec<String>,
}

/// One run of the setup command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetupRun {
    pub ok: bool,
    /// How it ended: `exit 2`, `killed by signal 9`, `stopped after 10m`.
    pub ended: String,
    /// What it printed (stdout, then stderr), its last 8 KiB.
    pub output: String,
    pub took: Duration,
}

/// Where the list of files copied into the worktree at `dir` is kept (beside it): one a line,
/// `!` before those the project ignores.
pub(super) fn copied_of(dir: &Path) -> PathBuf {
    let name = dir.file_name().unwrap_or_default().to_string_lossy();
    dir.with_file_name(format!(".{name}.copied"))
}

/// The files copied into the worktree at `dir`, which never land.
pub(super) fn copied(dir: &Path) -> Vec<PathBuf> {
    copied_lines(dir)
        .into_iter()
        .map(|l| PathBuf::from(l.strip_prefix('!').unwrap_or(&l)))
        .collect()
}

/// Those of [`copied`] the project's ignore rules do not ignore: `git add --all` would take
/// them, so it is told not to (git refuses to be told that of an ignored file).
pub(super) fn copied_unignored(dir: &Path) -> Vec<PathBuf> {
    copied_lines(dir)
        .into_iter()
        .filter(|l| !l.starts_with('!'))
        .map(PathBuf::from)
        .collect()
}

fn copied_lines(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(copied_of(dir))
        .map(|s| {
            s.lines()
                .filter(|l| !l.is_empty())
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

/// A stable name for the workspace at `dir`, for per-workspace resources (a database, a
/// port): the same for as long as the worktree lives, pooled and reused included, and
/// different for every other workspace. From git's admin folder for the worktree, which a
/// move through the pool keeps; the directory itself for a shared one.
pub fn workspace_id(dir: &Path) -> String {
    let key = match super::guard::admin_of(dir) {
        Ok(admin) => admin.to_string_lossy().into_owned(),
        Err(_) => dir.to_string_lossy().into_owned(),
    };
    format!("w{:08x}", super::fnv1a(key.as_bytes()))
}

impl GitWorktrees {
    /// Copies the named untracked files in and runs the setup command when this workspace has
    /// not run it (or `setup_on_reuse`).
    pub(super) fn make_ready(&self, ws: &Workspace) -> Result<Readiness> {
        let mut record = Record::read(&ws.dir);
        let mut out = Readiness {
            reused: record.since.is_some(),
            ..Default::default()
        };
        (out.copied, out.warnings) = copy_in(&ws.project, &ws.dir, &self.pooling.copy)?;
        let setup = &self.pooling.setup;
        let done = record.setup.as_ref() == Some(setup) && !self.pooling.setup_on_reuse;
        if !setup.is_empty() && !done {
            let run = self.run_setup(ws)?;
            record.setup = run.ok.then(|| setup.clone());
            out.setup = Some(run);
            record.write(&ws.dir)?;
        }
        Ok(out)
    }

    fn run_setup(&self, ws: &Workspace) -> Result<SetupRun> {
        let started = Instant::now();
        let mut cmd = std::process::Command::new(&self.pooling.setup[0]);
        cmd.args(&self.pooling.setup[1..])
            .env("BRAIDS_WORKSPACE", &ws.dir)
            .env("BRAIDS_WORKSPACE_ID", workspace_id(&ws.dir))
            .env("BRAIDS_PROJECT", &ws.project);
        let out = super::hooks::sandboxed(ws, cmd, &self.sandbox, self.pooling.setup_timeout)?;
        let mut output = [out.stdout.trim_end(), out.stderr.trim_end()]
            .iter()
            .filter(|s| !s.is_empty())
            .copied()
            .collect::<Vec<_>>()
            .join("\n");
        if output.len() > 8192 {
            let mut cut = output.len() - 8192;
            while !output.is_char_boundary(cut) {
                cut += 1;
            }
            output = output[cut..].to_string();
        }
        let ended = match (out.timed_out, out.code) {
            (true, _) => format!(
                "stopped after {}",
                humantime::format_duration(self.pooling.setup_timeout)
            ),
            (false, Some(code)) => format!("exit {code}"),
            (false, None) => "killed by a signal".into(),
        };
        Ok(SetupRun {
            ok: out.success() && !out.timed_out,
            ended,
            output,
            took: started.elapsed(),
        })
    }
}

/// The project's patterns of files to copy: its `.worktreeinclude` (read without following
/// a link) and `extra`.
fn patterns(project: &Path, extra: &[String]) -> Vec<String> {
    let from_file = crate::system::beneath::read_string(project, Path::new(WORKTREE_INCLUDE))
        .unwrap_or_default();
    from_file
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(String::from)
        .chain(extra.iter().cloned())
        .collect()
}

/// Copies the untracked files of `project` the patterns name into `dir`; returns their
/// project-relative paths, recorded beside the worktree, and what could not be copied (a
/// pattern that is not one, a file that cannot be read): a warning, never a failed bead.
fn copy_in(project: &Path, dir: &Path, extra: &[String]) -> Result<(Vec<String>, Vec<String>)> {
    let pats = patterns(project, extra);
    let _ = std::fs::remove_file(copied_of(dir));
    let mut warnings = Vec::new();
    if pats.is_empty() {
        return Ok((Vec::new(), warnings));
    }
    let mut b = ignore::gitignore::GitignoreBuilder::new(project);
    for p in &pats {
        if let Err(e) = b.add_line(None, p) {
            warnings.push(format!(
                "`{p}` is not a pattern of files to copy ({e}), so it is skipped"
            ));
        }
    }
    let matcher = b.build()?;
    let matches =
        |rel: &Path, is_dir: bool| matcher.matched_path_or_any_parents(rel, is_dir).is_ignore();
    // Untracked paths, a wholly untracked folder as one entry (`node_modules/` is not walked).
    let listed = git_ok(project, &["ls-files", "-z", "--others", "--directory"])?;
    let mut files = Vec::new();
    for entry in listed.split('\0').filter(|e| !e.is_empty()) {
        let rel = Path::new(entry.trim_end_matches('/'));
        let is_dir = entry.ends_with('/');
        if matches(rel, is_dir) {
            collect(project, rel, &mut files, &|_| true);
        } else if is_dir && pats.iter().any(|p| reaches_into(p, rel)) {
            collect(project, rel, &mut files, &|f| matches(f, false));
        }
    }
    let mut copied = Vec::new();
    for rel in files {
        match copy_one(project, dir, &rel) {
            Ok(()) => copied.push(rel.to_string_lossy().into_owned()),
            Err(e) => warnings.push(format!("{} was not copied: {e:#}", rel.display())),
        }
    }
    let ignored = ignored(project, &copied)?;
    if !copied.is_empty() {
        let text: String = copied
            .iter()
            .map(|f| match ignored.contains(f) {
                true => format!("!{f}\n"),
                false => format!("{f}\n"),
            })
            .collect();
        crate::system::atomic::write(&copied_of(dir), text.as_bytes())?;
    }
    Ok((copied, warnings))
}

/// One file, read and written without following a link on either side, with its mode.
fn copy_one(project: &Path, dir: &Path, rel: &Path) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let from = project.join(rel);
    let bytes = crate::system::beneath::read(project, &from)
        .with_context(|| format!("cannot read {}", from.display()))?;
    crate::system::beneath::write(dir, rel, &bytes)?;
    let mode = std::fs::symlink_metadata(&from)?.permissions();
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(dir.join(rel))?;
    f.set_permissions(mode)?;
    Ok(())
}

/// Which of the project-relative `paths` the project's ignore rules ignore.
fn ignored(project: &Path, paths: &[String]) -> Result<Vec<String>> {
    if paths.is_empty() {
        return Ok(Vec::new());
    }
    let input: Vec<u8> = paths
        .iter()
        .flat_map(|p| [p.as_bytes(), b"\0"].concat())
        .collect();
    let out = crate::git::guarded(
        crate::system::proc::Invocation::new(["git", "check-ignore", "-z", "--stdin"]),
        project,
    )
    .cwd(project)
    .stdin(input)
    .timeout(crate::git::GIT_TIMEOUT)
    .run()
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(out
        .stdout
        .split('\0')
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect())
}

/// Whether the anchored pattern `p` (one with a `/` before its end) can match inside `dir`.
fn reaches_into(p: &str, dir: &Path) -> bool {
    let p = p.trim_start_matches('/');
    let anchored = p.trim_end_matches('/').contains('/');
    anchored && Path::new(p).starts_with(dir)
}

/// The regular files at or under the project-relative `rel` that `keep` accepts; links are
/// neither followed nor copied.
fn collect(project: &Path, rel: &Path, out: &mut Vec<PathBuf>, keep: &dyn Fn(&Path) -> bool) {
    let Ok(meta) = std::fs::symlink_metadata(project.join(rel)) else {
        return;
    };
    if meta.file_type().is_file() {
        if keep(rel) {
            out.push(rel.to_path_buf());
        }
    } else if meta.is_dir() {
        let Ok(entries) = std::fs::read_dir(project.join(rel)) else {
            return;
        };
        for e in entries.flatten() {
            collect(project, &rel.join(e.file_name()), out, keep);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_anchored_pattern_reaches_into_its_folder_only() {
        assert!(reaches_into("config/*.local.yml", Path::new("config")));
        assert!(reaches_into("/config/app/x", Path::new("config")));
        assert!(!reaches_into(".env", Path::new("config")));
        assert!(!reaches_into("other/*.yml", Path::new("config")));
    }

    #[test]
    fn a_workspace_id_is_stable_and_differs_between_workspaces() {
        let t = tempfile::tempdir().unwrap();
        let (a, b) = (t.path().join("a"), t.path().join("b"));
        for (d, admin) in [(&a, "/r/.git/worktrees/x"), (&b, "/r/.git/worktrees/y")] {
            std::fs::create_dir_all(d).unwrap();
            std::fs::write(d.join(".git"), format!("gitdir: {admin}\n")).unwrap();
        }
        let before = workspace_id(&a);
        assert_ne!(before, workspace_id(&b));
        // Moved elsewhere (through the pool), same admin folder: same id.
        let moved = t.path().join("moved");
        std::fs::rename(&a, &moved).unwrap();
        assert_eq!(workspace_id(&moved), before);
        assert!(before.starts_with('w') && before.len() == 9, "{before}");
    }
}
