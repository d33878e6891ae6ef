//! Git as transport (CONTRACTS 4.4) and the immutability of completed iterations (4.5).
//!
//! Commits are made with git2: staging exactly the paths a step produced and writing a commit
//! needs no shell and no parsing of porcelain output. Pushing uses the `git` program instead:
//! a push to a real remote needs the user's SSH agent, credential helpers and config, which
//! `git` already honours and git2 would have to re-implement.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use git2::{Repository, Signature};

use crate::system::lock::TickLock;
use crate::system::proc::{Invocation, Output};

mod debt;
mod frozen;
mod replay;
mod review_branch;
pub mod safe;
pub mod tree;
pub use debt::{
    clear_push_mark, expect_push, not_pushed, owe, push_debt, push_pending, push_recorded,
    take_owed, NotPushed, Owed, PushDebt,
};
pub use frozen::{check_frozen, Frozen};
pub use replay::{bead_of, rebase_onto, Kept, Rebased};
pub use review_branch::{fetch_review_branch, push_review_branch, remote_url};

/// Where braids keeps its bookkeeping in a project's tree: the tracker's files (br's `.beads`,
/// the native WORKPLAN.md). They follow braids' own writes, not a branch's history.
pub const BOOKKEEPING: [&str; 2] = [".beads", ".braids/WORKPLAN.md"];

/// A git command may take this long (a rebase of a large change on a slow disk).
pub(crate) const GIT_TIMEOUT: Duration = Duration::from_secs(120);

/// Runs the `git` program in `dir` from argv, never prompting, never opening an editor and
/// never running a hook, an fsmonitor or any program a repository's settings name (see
/// [`safe`]); an error only when it cannot run or times out (its exit status is the caller's).
pub(crate) fn git(dir: &Path, args: &[&str]) -> Result<Output> {
    let argv = safe::with_stock_programs(args);
    let mut git = Invocation::new(std::iter::once("git").chain(argv))
        .cwd(dir)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_EDITOR", "true")
        .env("LC_ALL", "C")
        .timeout(GIT_TIMEOUT);
    for (k, v) in safe::env_for(dir) {
        git = git.env(k, v);
    }
    // On a machine where nobody told git who they are, its commits would fail ("Author
    // identity unknown") and an agent's work with them. `EMAIL` is git's last resort, below
    // `user.email`, so a configured identity always wins; the same fallback as `signature`.
    if std::env::var_os("EMAIL").is_none() {
        git = git.env("EMAIL", FALLBACK_EMAIL);
    }
    let out = git.run().map_err(|e| anyhow!("{e}"))?;
    if out.timed_out {
        anyhow::bail!(
            "git {} timed out after {}s",
            args.join(" "),
            GIT_TIMEOUT.as_secs()
        );
    }
    Ok(out)
}

/// `inv` (a git command braids builds by hand, run in `dir`) with the environment of [`git`]'s.
pub(crate) fn guarded(mut inv: Invocation, dir: &Path) -> Invocation {
    for (k, v) in safe::env_for(dir) {
        inv = inv.env(k, v);
    }
    inv
}

/// Runs git and requires success; the error carries git's own words.
pub(crate) fn git_ok(dir: &Path, args: &[&str]) -> Result<String> {
    let out = git(dir, args)?;
    if !out.success() {
        anyhow::bail!(
            "git {} failed in {}: {}",
            args.join(" "),
            dir.display(),
            out.stderr.trim()
        );
    }
    Ok(out.stdout)
}

/// Opens the repository whose work tree is `root`.
pub fn open(root: &Path) -> Result<Repository> {
    Repository::open(root).with_context(|| format!("{} is not a git repository", root.display()))
}

/// Creates a repository at `root` unless one exists; returns whether it created one.
pub fn init(root: &Path) -> Result<bool> {
    if Repository::open(root).is_ok() {
        return Ok(false);
    }
    Repository::init(root)
        .with_context(|| format!("cannot create a git repository in {}", root.display()))?;
    Ok(true)
}

/// The email braids commits with when neither the environment nor git's configuration names one.
const FALLBACK_EMAIL: &str = "braids@localhost";

fn signature(repo: &Repository) -> Result<Signature<'static>> {
    // As git does: the environment before the config.
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
    if let (Some(name), Some(email)) = (env("GIT_AUTHOR_NAME"), env("GIT_AUTHOR_EMAIL")) {
        if let Ok(s) = Signature::now(&name, &email) {
            return Ok(s);
        }
    }
    repo.signature()
        .map(|s| s.to_owned())
        .or_else(|_| Signature::now("braids", FALLBACK_EMAIL))
        .map_err(|e| anyhow!("cannot make a commit signature: {e}"))
}

/// Stages `paths` (relative to the work tree; deletions included) and commits them with
/// `message`. Returns `None` when nothing changed.
///
/// The commit is HEAD's tree plus `paths` as they are in the work tree: whatever else a person
/// staged stays staged, and out of the commit. The index on disk then gets `paths` too, so it
/// agrees with the new HEAD for them.
pub fn commit_paths(root: &Path, paths: &[PathBuf], message: &str) -> Result<Option<git2::Oid>> {
    commit_with(root, &[], paths, message)
}

/// [`commit_paths`], with `blobs` (a path and the bytes to commit for it, whatever the work
/// tree holds there) in the commit too: braids commits its own change to a file a person is
/// editing without taking the person's edit along.
pub fn commit_with(
    root: &Path,
    blobs: &[(PathBuf, Vec<u8>)],
    paths: &[PathBuf],
    message: &str,
) -> Result<Option<git2::Oid>> {
    let repo = open(root)?;
    let mut scratch = repo.index()?;
    if let Ok(head) = repo.head() {
        scratch.read_tree(&head.peel_to_tree()?)?;
    }
    stage(root, &mut scratch, paths)?;
    put(root, &mut scratch, blobs)?;
    let oid = commit_index(&repo, &mut scratch, message)?;
    let mut real = repo.index()?;
    real.read(true)?;
    stage(root, &mut real, paths)?;
    put(root, &mut real, blobs)?;
    tree::sanitize(&repo, &mut real)?;
    real.write()?;
    Ok(oid)
}

/// Puts each of `blobs` into `index` as a regular file, keeping an executable bit it had.
fn put(root: &Path, index: &mut git2::Index, blobs: &[(PathBuf, Vec<u8>)]) -> Result<()> {
    for (p, bytes) in blobs {
        let rel = p.strip_prefix(root).unwrap_or(p);
        let path = rel.to_string_lossy().into_owned().into_bytes();
        let mode = index.get_path(rel, 0).map_or(0o100644, |e| {
            if e.mode == 0o100755 {
                e.mode
            } else {
                0o100644
            }
        });
        let entry = git2::IndexEntry {
            ctime: git2::IndexTime::new(0, 0),
            mtime: git2::IndexTime::new(0, 0),
            dev: 0,
            ino: 0,
            mode,
            uid: 0,
            gid: 0,
            file_size: u32::try_from(bytes.len()).unwrap_or(u32::MAX),
            id: git2::Oid::zero(),
            flags: 0,
            flags_extended: 0,
            path,
        };
        index.add_frombuffer(&entry, bytes)?;
    }
    Ok(())
}

/// The bytes of `path` (in the work tree `root`) as HEAD has them; `None` when HEAD has no
/// such file (or there is no commit yet).
pub fn head_blob(root: &Path, path: &Path) -> Result<Option<Vec<u8>>> {
    let repo = open(root)?;
    let Ok(head) = repo.head() else {
        return Ok(None);
    };
    let rel = path.strip_prefix(root).unwrap_or(path);
    let tree = head.peel_to_tree()?;
    let Ok(entry) = tree.get_path(rel) else {
        return Ok(None);
    };
    let object = entry.to_object(&repo)?;
    let bytes = object.as_blob().map(|b| b.content().to_vec());
    Ok(bytes)
}

/// Adds `paths` to the index: a directory with everything in it that is not ignored, a file,
/// or the removal of a path that no longer exists.
fn stage(root: &Path, index: &mut git2::Index, paths: &[PathBuf]) -> Result<()> {
    let mut out = |p: &Path, _: &[u8]| i32::from(tree::kept_out(root, p));
    for p in paths {
        let rel = p.strip_prefix(root).unwrap_or(p);
        if tree::kept_out(root, rel) {
            continue;
        }
        let meta = std::fs::symlink_metadata(root.join(rel));
        if meta.as_ref().is_ok_and(|m| m.is_dir()) {
            index.add_all([rel], git2::IndexAddOption::DEFAULT, Some(&mut out))?;
            index.update_all([rel], Some(&mut out))?;
        } else if meta.is_ok() {
            index.add_path(rel)?;
        } else {
            let _ = index.remove_path(rel);
        }
    }
    Ok(())
}

/// A file's (size, modification time), or `None` when it is gone: enough to tell whether it
/// changed between two looks.
pub type Stamp = Option<(u64, std::time::SystemTime)>;

/// Every path that differs from HEAD (staged, changed, deleted, or untracked and not ignored),
/// relative to the work tree, with its [`Stamp`]. The claw loop takes one before its coder runs
/// and one after, and commits only what changed between them: a person's uncommitted work is
/// never part of a task's commit.
pub fn dirty(root: &Path) -> Result<std::collections::BTreeMap<PathBuf, Stamp>> {
    let repo = open(root)?;
    let mut opts = git2::StatusOptions::new();
    opts.include_untracked(true)
        .recurse_untracked_dirs(true)
        .include_ignored(false);
    let statuses = repo.statuses(Some(&mut opts))?;
    Ok(statuses
        .iter()
        .filter_map(|e| {
            let rel = PathBuf::from(e.path()?);
            let stamp = std::fs::symlink_metadata(root.join(&rel))
                .ok()
                .and_then(|m| Some((m.len(), m.modified().ok()?)));
            Some((rel, stamp))
        })
        .collect())
}

/// Stages everything (like `git add -A`) and commits.
pub fn commit_all(root: &Path, message: &str) -> Result<Option<git2::Oid>> {
    commit_all_except(root, &[], &[], message)
}

/// Stages everything (like `git add -A`) but what lies under `skip`, then `also` (which may lie
/// under `skip`), and commits. Paths are relative to the work tree or inside it.
///
/// Other processes may be writing in the work tree meanwhile (a tracker replacing its file, an
/// agent): files being written atomically (`.braids-tmp-*`) are left out, and a file that
/// vanishes or changes between the scan and its staging makes the staging start over, a few
/// times.
pub fn commit_all_except(
    root: &Path,
    skip: &[PathBuf],
    also: &[PathBuf],
    message: &str,
) -> Result<Option<git2::Oid>> {
    let repo = open(root)?;
    let mut index = repo.index()?;
    let skip: Vec<&Path> = skip
        .iter()
        .map(|p| p.strip_prefix(root).unwrap_or(p))
        .collect();
    let skipped = |path: &Path| {
        tree::kept_out(root, path)
            || skip.iter().any(|s| path.starts_with(s))
            || path
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(".braids-tmp-"))
    };
    let mut attempt = 0;
    loop {
        attempt += 1;
        // 0 stages the path, 1 leaves it alone.
        let staged = index
            .add_all(
                ["*"],
                git2::IndexAddOption::DEFAULT,
                Some(&mut |p: &Path, _: &[u8]| i32::from(skipped(p) || !root.join(p).exists())),
            )
            .and_then(|()| {
                index.update_all(["*"], Some(&mut |p: &Path, _: &[u8]| i32::from(skipped(p))))
            });
        match staged {
            Ok(()) => break,
            Err(e)
                if attempt < 5
                    && matches!(
                        e.class(),
                        git2::ErrorClass::Os | git2::ErrorClass::Filesystem
                    ) =>
            {
                tracing::debug!("staging raced with a writer, starting over: {e}");
                index.read(true)?;
            }
            Err(e) => return Err(e.into()),
        }
    }
    stage(root, &mut index, also)?;
    let oid = commit_index(&repo, &mut index, message)?;
    index.write()?;
    Ok(oid)
}

/// The file workers lock to commit and push one at a time: in the repository's common git
/// directory, so linked work trees of one repository share it.
pub fn lock_path(root: &Path) -> Result<PathBuf> {
    Ok(open(root)?.commondir().join("braids-commit.lock"))
}

fn commit_index(
    repo: &Repository,
    index: &mut git2::Index,
    message: &str,
) -> Result<Option<git2::Oid>> {
    tree::sanitize(repo, index)?;
    let tree_id = index.write_tree()?;
    let parent = match repo.head() {
        Ok(h) => Some(h.peel_to_commit()?),
        Err(_) => None,
    };
    if let Some(p) = &parent {
        if p.tree_id() == tree_id {
            return Ok(None);
        }
    }
    let tree = repo.find_tree(tree_id)?;
    let sig = signature(repo)?;
    let parents: Vec<&git2::Commit> = parent.iter().collect();
    let oid = repo
        .commit(Some("HEAD"), &sig, &sig, message, &tree, &parents)
        .context("cannot write the commit")?;
    Ok(Some(oid))
}

/// The branch the work tree at `root` has checked out; `None` on a detached HEAD (or no
/// repository). Commits braids makes in a project's own work tree go there.
pub fn checked_out(root: &Path) -> Option<String> {
    let repo = Repository::open(root).ok()?;
    let head = repo.find_reference("HEAD").ok()?;
    let target = head.symbolic_target()?;
    Some(
        target
            .strip_prefix("refs/heads/")
            .unwrap_or(target)
            .to_string(),
    )
}

/// Where `branch` is pushed: its remote and the remote's branch (`branch.<name>.remote` and
/// `.merge`), `None` when it has no upstream.
pub fn upstream_of(root: &Path, branch: &str) -> Option<(String, String)> {
    let repo = Repository::open(root).ok()?;
    let config = repo.config().ok()?;
    let remote = config.get_string(&format!("branch.{branch}.remote")).ok()?;
    let merge = config.get_string(&format!("branch.{branch}.merge")).ok()?;
    // `.` is the repository itself, not a remote to push to.
    (remote != ".").then_some((remote, merge))
}

/// Whether `branch` has an upstream to push to.
pub fn has_upstream(root: &Path, branch: &str) -> bool {
    upstream_of(root, branch).is_some()
}

/// Whether the repository has a remote but `branch` has no upstream: then every push is
/// skipped, which a person who added the remote does not expect.
pub fn remote_without_upstream(root: &Path, branch: &str) -> bool {
    let Ok(repo) = Repository::open(root) else {
        return false;
    };
    !repo.remotes().map(|r| r.is_empty()).unwrap_or(true) && !has_upstream(root, branch)
}

/// What git said of a failed network command, on one line: it is shown in tables, logs and
/// notifications.
pub(crate) fn said_on_one_line(out: &Output) -> String {
    [out.stderr.as_str(), out.stdout.as_str()]
        .iter()
        .flat_map(|t| t.lines())
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// `git <args>` talking to a remote: the person's own git (their credentials, SSH agent and
/// config), never prompting, with messages in English for braids to read, within `timeout`.
pub(crate) fn over_network(root: &Path, args: &[&str], timeout: Duration) -> Result<Output> {
    let argv = safe::with_stock_programs(args);
    let mut git = Invocation::new(std::iter::once("git").chain(argv))
        .cwd(root)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("LC_ALL", "C")
        .timeout(timeout);
    // The person's credentials and transport, but no program a setting of the repository
    // names in place of git's own (see [`safe`]).
    for (k, v) in safe::env_for(root) {
        git = git.env(k, v);
    }
    git.run().map_err(|e| anyhow!("{e}"))
}

/// Brings `branch` up to date with its upstream before braids lands on it: one fetch, and
/// braids' unpushed commits replayed onto what others pushed (see `replay`). A bead's work
/// then meets their changes before its bead is closed, while a conflict can still block it
/// (a closed bead is final, 4.6). Nothing to do without an upstream.
pub fn catch_up(root: &Path, branch: &str, timeout: Duration) -> Result<Pushed> {
    if !has_upstream(root, branch) {
        return Ok(Pushed::default());
    }
    let caught = replay::catch_up(root, branch, timeout)?;
    Ok(Pushed {
        replayed: caught.replayed,
        kept: caught.kept,
    })
}

/// A push error that also names the commits an earlier round kept aside: they are off the
/// branch already, so this is where a person learns of them.
fn with_kept(e: anyhow::Error, kept: &[Kept]) -> anyhow::Error {
    if kept.is_empty() {
        return e;
    }
    let kept: Vec<String> = kept.iter().map(|k| k.to_string()).collect();
    e.context(format!("not pushed: {}", kept.join("; ")))
}

/// What a push did besides pushing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[must_use]
pub struct Pushed {
    /// Unpushed commits replayed onto an upstream others had pushed to.
    pub replayed: usize,
    /// Unpushed commits that conflict with the upstream: kept on branches for a person, and
    /// not pushed.
    pub kept: Vec<Kept>,
}

/// How many times a push rejected because the upstream moved is tried again after catching
/// up: others pushing again in between is normal, for ever is not.
const PUSH_ROUNDS: usize = 3;

/// `git push` to the upstream (4.4). When the upstream moved (somebody else pushed), braids'
/// unpushed commits are replayed onto it and pushed again (see `replay`): never a merge
/// commit, never a force push. The error carries git's own message.
pub fn push(root: &Path, branch: &str, timeout: Duration) -> Result<Pushed> {
    let Some((remote, merge)) = upstream_of(root, branch) else {
        return Err(anyhow!("{branch} has no upstream to push to"));
    };
    // Named in full: the person may have another branch checked out, and `push.default`
    // is theirs to set for their own pushes.
    let refspec = format!("refs/heads/{branch}:{merge}");
    let mut done = Pushed::default();
    for _ in 0..PUSH_ROUNDS {
        let out = over_network(
            root,
            // No pre-push hook: the hooks folder is writable by whoever can write the
            // repository (an agent among them), and braids pushes only what it landed.
            &[
                "push",
                "--quiet",
                "--porcelain",
                "--no-verify",
                "--",
                &remote,
                &refspec,
            ],
            timeout,
        )?;
        if out.success() {
            return Ok(done);
        }
        if out.timed_out {
            return Err(anyhow!("git push timed out after {}s", timeout.as_secs()));
        }
        if !replay::rejected_as_behind(&out.stdout) {
            return Err(anyhow!("git push failed: {}", said_on_one_line(&out)));
        }
        let caught =
            replay::catch_up(root, branch, timeout).map_err(|e| with_kept(e, &done.kept))?;
        done.replayed += caught.replayed;
        done.kept.extend(caught.kept);
    }
    Err(with_kept(
        anyhow!(
            "git push was rejected {PUSH_ROUNDS} times: the upstream kept moving while braids caught up; retried next run"
        ),
        &done.kept,
    ))
}

/// How long a worker waits for another to finish with the repository.
const REPO_LOCK_WAIT: Duration = Duration::from_secs(600);

/// The repository's commit lock, held; released on drop. Commits, pushes and iteration status
/// changes of one repository happen one at a time: concurrent index writes or `git push`es fail
/// or lose work, and an iteration checked without it could be completed twice, or frozen before
/// a bead's commit.
pub struct RepoLock {
    _lock: TickLock,
}

impl RepoLock {
    /// The lock if no one holds it now; `None` if someone does (the tick does not wait).
    pub fn try_acquire(root: &Path) -> Result<Option<RepoLock>> {
        let path = lock_path(root)?;
        Ok(TickLock::try_acquire(&path)
            .with_context(|| format!("cannot lock {}", path.display()))?
            .map(|lock| RepoLock { _lock: lock }))
    }

    /// Waits up to ten minutes for the lock of the repository at `root`.
    pub fn acquire(root: &Path) -> Result<RepoLock> {
        let path = lock_path(root)?;
        let lock = TickLock::acquire(&path, REPO_LOCK_WAIT)
            .with_context(|| format!("cannot lock {}", path.display()))?
            .ok_or_else(|| crate::system::lock::Busy {
                path: path.clone(),
                waited: REPO_LOCK_WAIT,
            })?;
        Ok(RepoLock { _lock: lock })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    #[test]
    fn braids_own_commits_add_no_link_and_nothing_of_the_trackers_folder_but_its_files() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        init(root).unwrap();
        std::fs::create_dir_all(root.join(".beads/sub")).unwrap();
        std::fs::write(root.join(".beads/issues.jsonl"), "{}\n").unwrap();
        std::fs::write(root.join(".beads/planted.txt"), "x").unwrap();
        std::fs::write(root.join(".beads/sub/deep.txt"), "x").unwrap();
        std::fs::write(root.join("work.txt"), "w").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", root.join("leak")).unwrap();
        std::os::unix::fs::symlink("../x", root.join(".beads/leak.txt")).unwrap();
        commit_all(root, "all").unwrap();
        commit_paths(root, &[root.join(".beads"), root.join("leak")], "paths").unwrap();
        // A link staged in the index alone is left out too.
        let repo = open(root).unwrap();
        let blob = repo.blob(b"/home/someone/.ssh/id_ed25519").unwrap();
        let mut index = repo.index().unwrap();
        let mut entry = index.get_path(Path::new("work.txt"), 0).unwrap();
        entry.id = blob;
        entry.mode = tree::LINK;
        entry.path = b"innocent".to_vec();
        index.add(&entry).unwrap();
        index.write().unwrap();
        std::fs::write(root.join("work.txt"), "w2").unwrap();
        commit_all(root, "more").unwrap();
        let head = repo.head().unwrap().peel_to_tree().unwrap();
        let mut names = Vec::new();
        head.walk(git2::TreeWalkMode::PreOrder, |dir, e| {
            if e.kind() == Some(git2::ObjectType::Blob) {
                names.push((format!("{dir}{}", e.name().unwrap()), e.filemode() as u32));
            }
            git2::TreeWalkResult::Ok
        })
        .unwrap();
        names.sort();
        assert_eq!(
            names,
            [
                (".beads/issues.jsonl".to_string(), 0o100644),
                ("work.txt".to_string(), 0o100644)
            ]
        );
    }

    #[test]
    fn commit_all_except_while_another_process_rewrites_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        init(root).unwrap();
        std::fs::write(root.join("WORKPLAN.md"), "0").unwrap();
        commit_all(root, "first").unwrap();
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            // A tracker rewriting its file the crash-safe way, as fast as it can.
            s.spawn(|| {
                let mut i = 0u64;
                while !stop.load(Ordering::SeqCst) {
                    i += 1;
                    crate::system::atomic::write(
                        &root.join("WORKPLAN.md"),
                        i.to_string().as_bytes(),
                    )
                    .unwrap();
                }
            });
            for i in 0..40 {
                std::fs::write(root.join("work.txt"), i.to_string()).unwrap();
                let r = commit_all_except(root, &[root.join("skipped")], &[], "work");
                if r.is_err() {
                    stop.store(true, Ordering::SeqCst);
                }
                r.unwrap();
            }
            stop.store(true, Ordering::SeqCst);
        });
        let repo = open(root).unwrap();
        let head = repo.head().unwrap().peel_to_tree().unwrap();
        assert!(head.get_path(Path::new("work.txt")).is_ok());
        assert!(
            head.iter()
                .all(|e| !e.name().unwrap_or("").starts_with(".braids-tmp-")),
            "a temp file was committed"
        );
    }
}
