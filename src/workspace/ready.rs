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
}

/// One run of the setup command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetupRun {
    pub ok: bool,
    /// What it printed (stdout, then stderr), its last 8 KiB.
    pub output: String,
    pub took: Duration,
}

/// Where the list of files copied into the worktree at `dir` is kept (beside it).
pub(super) fn copied_of(dir: &Path) -> PathBuf {
    let name = dir.file_name().unwrap_or_default().to_string_lossy();
    dir.with_file_name(format!(".{name}.copied"))
}

/// The files copied into the worktree at `dir`, which never land.
pub(super) fn copied(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_to_string(copied_of(dir))
        .map(|s| {
            s.lines()
                .filter(|l| !l.is_empty())
                .map(PathBuf::from)
                .collect()
        })
        .unwrap_or_default()
}

/// A stable name for the workspace at `dir`, for per-workspace resources (a database, a
/// port): the same for as long as the worktree lives, pooled and reused included, and
/// different for every other workspace. From git's admin folder for the worktree, which a
/// move through the pool keeps; the directory itself for a shared one.
pub fn workspace_id(dir: &Path) -> String {
    let admin = std::fs::read_to_string(dir.join(".git"))
        .ok()
        .and_then(|t| {
            t.trim()
                .strip_prefix("gitdir:")
                .map(|s| s.trim().to_string())
        });
    let key = admin.unwrap_or_else(|| dir.to_string_lossy().into_owned());
    // FNV-1a: stable across releases.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in key.as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("w{:08x}", h as u32)
}

impl GitWorktrees {
    /// Copies the named untracked files in and runs the setup command when this workspace has
    /// not run it (or `setup_on_reuse`).
    pub(super) fn prepare(&self, ws: &Workspace) -> Result<Readiness> {
        let mut record = Record::read(&ws.dir);
        let mut out = Readiness {
            reused: record.since.is_some(),
            ..Default::default()
        };
        out.copied = copy_in(&ws.project, &ws.dir, &self.pooling.copy)?;
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
        if out.timed_out {
            output.push_str(&format!(
                "\n(stopped after {})",
                humantime::format_duration(self.pooling.setup_timeout)
            ));
        }
        Ok(SetupRun {
            ok: out.success() && !out.timed_out,
            output,
            took: started.elapsed(),
        })
    }
}

/// The project's patterns of files to copy: its `.worktreeinclude` (read without following
/// a link) and `extra`.
fn patterns(project: &Path, extra: &[String]) -> Vec<String> {
    let from_file =
        crate::beneath::read_string(project, Path::new(WORKTREE_INCLUDE)).unwrap_or_default();
    from_file
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(String::from)
        .chain(extra.iter().cloned())
        .collect()
}

/// Copies the untracked files of `project` the patterns name into `dir`; returns their
/// project-relative paths and records them beside the worktree.
fn copy_in(project: &Path, dir: &Path, extra: &[String]) -> Result<Vec<String>> {
    let pats = patterns(project, extra);
    let _ = std::fs::remove_file(copied_of(dir));
    if pats.is_empty() {
        return Ok(Vec::new());
    }
    let mut b = ignore::gitignore::GitignoreBuilder::new(project);
    for p in &pats {
        b.add_line(None, p)
            .with_context(|| format!("`{p}` is not a pattern of files to copy"))?;
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
    for rel in &files {
        let bytes = crate::beneath::read(project, &project.join(rel))
            .with_context(|| format!("cannot read {}", project.join(rel).display()))?;
        crate::beneath::write(dir, rel, &bytes)
            .with_context(|| format!("cannot copy {} into {}", rel.display(), dir.display()))?;
        if let Ok(meta) = std::fs::symlink_metadata(project.join(rel)) {
            let _ = std::fs::set_permissions(dir.join(rel), meta.permissions());
        }
    }
    let shown: Vec<String> = files
        .iter()
        .map(|f| f.to_string_lossy().into_owned())
        .collect();
    // Ignored ones never stage anyway (and git refuses to be told to leave them out).
    let ignored = ignored(project, &shown)?;
    let listed: Vec<&String> = shown.iter().filter(|f| !ignored.contains(*f)).collect();
    if !listed.is_empty() {
        let text: String = listed.iter().map(|f| format!("{f}\n")).collect();
        crate::atomic::write(&copied_of(dir), text.as_bytes())?;
    }
    Ok(shown)
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
    let out = crate::proc::Invocation::new(["git", "check-ignore", "-z", "--stdin"])
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
