//! Catching up with an upstream others push to. braids' unpushed commits are replayed onto
//! the upstream branch one by one, without a work tree: `git merge-tree --write-tree` with a
//! commit's parent as the merge base is a cherry-pick of trees, and `git commit-tree` keeps
//! the commit's author and message. Never a merge commit, never a force push.
//!
//! A commit that conflicts with the upstream is kept on a branch of its own for a person and
//! left out; the commits after it are replayed without it (one that needed it conflicts too
//! and is kept as well). The checked-out branch then moves to the replayed history with
//! `reset --keep`, which refuses rather than touch a file a person is editing.
//!
//! `merge-tree --merge-base` needs git 2.40 or later; with an older git, libgit2 picks instead.
//!
//! An upstream whose history was rewritten (its old tip is no longer in it) is never caught up
//! with: the local commits would bring back what was removed on purpose. A person decides.

use std::path::Path;
use std::time::Duration;

use anyhow::{anyhow, bail, Result};

use super::{git, git_ok};
use crate::system::proc::Invocation;

/// An unpushed commit that conflicts with the upstream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kept {
    /// The commit as it was made, before the upstream moved.
    pub commit: String,
    pub subject: String,
    /// The paths it conflicts in.
    pub paths: Vec<String>,
    /// Where it is kept: `braids/kept/<branch>-<short commit>`.
    pub branch: String,
}

impl std::fmt::Display for Kept {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "commit {} ({}) conflicts with the upstream in {}; it is kept on branch {}",
            &self.commit[..self.commit.len().min(12)],
            self.subject,
            self.paths.join(", "),
            self.branch
        )
    }
}

/// The bead a landing commit's subject names (`<summary> (<bead>)`), if it names one.
pub fn bead_of(subject: &str) -> Option<&str> {
    let inner = subject.strip_suffix(')')?;
    let (_, id) = inner.rsplit_once(" (")?;
    crate::model::BeadId::new(id).ok().map(|_| id)
}

/// What [`catch_up`] did.
#[derive(Debug, Default)]
pub(super) struct CaughtUp {
    pub replayed: usize,
    pub kept: Vec<Kept>,
}

/// Whether `git push --porcelain` output says the push was refused because the upstream has
/// commits the local branch lacks.
pub(super) fn rejected_as_behind(porcelain: &str) -> bool {
    porcelain.lines().any(|l| {
        l.starts_with('!') && (l.contains("(fetch first)") || l.contains("(non-fast-forward)"))
    })
}

fn rev(root: &Path, what: &str) -> Result<String> {
    Ok(git_ok(root, &["rev-parse", "--verify", "--quiet", what])?
        .trim()
        .to_string())
}

fn is_ancestor(root: &Path, a: &str, b: &str) -> Result<bool> {
    let out = git(root, &["merge-base", "--is-ancestor", a, b])?;
    match out.code {
        Some(0) => Ok(true),
        Some(1) => Ok(false),
        _ => bail!("git merge-base failed: {}", out.stderr.trim()),
    }
}

/// Fetches the upstream of `branch` and replays the branch's unpushed commits onto it (see the
/// module docs).
pub(super) fn catch_up(root: &Path, branch: &str, timeout: Duration) -> Result<CaughtUp> {
    let branch = branch.to_string();
    let Some((remote, _)) = super::upstream_of(root, &branch) else {
        bail!("{branch} has no upstream to catch up with");
    };
    let upstream_ref = format!("{branch}@{{upstream}}");
    let before = rev(root, &upstream_ref)?;
    let fetch = super::over_network(
        root,
        &["fetch", "--quiet", "--no-tags", "--", &remote],
        timeout,
    )?;
    if !fetch.success() {
        bail!(
            "the upstream moved, and fetching it failed: {}",
            fetch.stderr.trim()
        );
    }
    let upstream = rev(root, &upstream_ref)?;
    let local = rev(root, &format!("refs/heads/{branch}"))?;
    let lost = !is_ancestor(root, &before, &upstream)? && is_ancestor(root, &before, &local)?;
    if lost || rewritten_before(root, &upstream_ref, &upstream, &local)? {
        bail!(
            "the upstream of {branch} was rewritten (force-pushed): braids does not replay its \
             commits onto it; a person decides (its commits stay on {branch})"
        );
    }
    let range = format!("{upstream}..{local}");
    let merges = git_ok(root, &["rev-list", "--merges", &range])?;
    if !merges.trim().is_empty() {
        bail!(
            "the upstream moved and {branch} has a merge commit among its unpushed ones; \
             braids replays only straight histories, so a person pushes it"
        );
    }
    let commits = git_ok(root, &["rev-list", "--reverse", &range])?;
    let mut done = CaughtUp::default();
    let mut tip = upstream.clone();
    for commit in commits.lines().map(str::trim).filter(|c| !c.is_empty()) {
        // Already on the tip (nothing moved under it): kept as it is, same id.
        if rev(root, &format!("{commit}^"))? == tip {
            tip = commit.to_string();
            continue;
        }
        match pick(root, &tip, commit)? {
            Picked::Onto(new) => {
                tip = new;
                done.replayed += 1;
            }
            Picked::AlreadyThere => {}
            Picked::Conflict(paths) => {
                let short = &commit[..commit.len().min(12)];
                let subject = git_ok(root, &["show", "-s", "--format=%s", commit])?;
                // A bead's landing (`… (<bead>)`) is kept under the bead's name, where a
                // person and the iteration's completion look for kept work.
                let owner = bead_of(subject.trim()).unwrap_or(&branch);
                let kept = format!("braids/kept/{owner}-{short}");
                git_ok(root, &["update-ref", &format!("refs/heads/{kept}"), commit])?;
                done.kept.push(Kept {
                    commit: commit.to_string(),
                    subject: subject.trim().to_string(),
                    paths,
                    branch: kept,
                });
            }
        }
    }
    move_branch(root, &branch, &local, &tip, !done.kept.is_empty())?;
    Ok(done)
}

/// Whether `local` still holds a commit the upstream had and no longer has (an earlier value
/// of its tracking ref, from the reflog of braids' fetches and pushes): the history was
/// rewritten, even when an earlier fetch already moved the tracking ref to the new tip. Once
/// a person moves `local` onto the rewritten history, it holds none and replays go on.
fn rewritten_before(root: &Path, upstream_ref: &str, upstream: &str, local: &str) -> Result<bool> {
    let name = git_ok(root, &["rev-parse", "--symbolic-full-name", upstream_ref])?;
    let seen = git(
        root,
        &["reflog", "show", "--format=%H", "-n", "64", name.trim()],
    )?;
    let mut checked = std::collections::BTreeSet::new();
    for old in seen.stdout.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if !checked.insert(old) || old == upstream {
            continue;
        }
        // An entry git has pruned away cannot be checked, and says nothing.
        let gone = git(root, &["merge-base", "--is-ancestor", old, upstream])?.code == Some(1);
        if gone && git(root, &["merge-base", "--is-ancestor", old, local])?.code == Some(0) {
            return Ok(true);
        }
    }
    Ok(false)
}

enum Picked {
    Onto(String),
    /// Its change is in the upstream already.
    AlreadyThere,
    Conflict(Vec<String>),
}

/// `commit` cherry-picked onto `onto`, as a new commit with its author and message.
fn pick(root: &Path, onto: &str, commit: &str) -> Result<Picked> {
    let base = format!("--merge-base={commit}^");
    let out = git(
        root,
        &[
            "merge-tree",
            "--write-tree",
            "--no-messages",
            "--name-only",
            &base,
            onto,
            commit,
        ],
    )?;
    let mut lines = out.stdout.lines().map(str::trim).filter(|l| !l.is_empty());
    let tree = lines.next().unwrap_or_default().to_string();
    match out.code {
        Some(0) => {}
        Some(1) => return Ok(Picked::Conflict(lines.map(String::from).collect())),
        // git before 2.40 has no `--merge-base`: libgit2's cherry-pick of trees instead.
        _ if out.stderr.contains("merge-base") => return pick_in_process(root, onto, commit),
        _ => bail!("git merge-tree failed: {}", out.stderr.trim()),
    }
    if tree == rev(root, &format!("{onto}^{{tree}}"))? {
        return Ok(Picked::AlreadyThere);
    }
    let who = git_ok(
        root,
        &[
            "show",
            "-s",
            "--format=%an%x00%ae%x00%ad%x00%cn%x00%ce",
            "--date=raw",
            commit,
        ],
    )?;
    let who: Vec<&str> = who.trim_end_matches('\n').split('\0').collect();
    let [an, ae, ad, cn, ce] = who[..] else {
        bail!("cannot read the author of {commit}");
    };
    let message = git_ok(root, &["show", "-s", "--format=%B", commit])?;
    let new = super::guarded(
        Invocation::new(["git", "commit-tree", &tree, "-p", onto, "-F", "-"]),
        root,
    )
    .cwd(root)
    .env("GIT_AUTHOR_NAME", an)
    .env("GIT_AUTHOR_EMAIL", ae)
    .env("GIT_AUTHOR_DATE", ad)
    .env("GIT_COMMITTER_NAME", cn)
    .env("GIT_COMMITTER_EMAIL", ce)
    .stdin(message.trim_end().as_bytes().to_vec())
    .timeout(super::GIT_TIMEOUT)
    .run()
    .map_err(|e| anyhow!("{e}"))?;
    if !new.success() {
        bail!("git commit-tree failed: {}", new.stderr.trim());
    }
    Ok(Picked::Onto(new.stdout.trim().to_string()))
}

/// [`pick`] with libgit2 (in memory, no work tree), for a git too old for `merge-tree
/// --merge-base`. Its merge finds no renames, so it may call a conflict what git would merge.
fn pick_in_process(root: &Path, onto: &str, commit: &str) -> Result<Picked> {
    let repo = git2::Repository::open(root)?;
    let ours = repo.find_commit(git2::Oid::from_str(onto)?)?;
    let theirs = repo.find_commit(git2::Oid::from_str(commit)?)?;
    let mut index = repo.cherrypick_commit(&theirs, &ours, 0, None)?;
    if index.has_conflicts() {
        let mut paths: Vec<String> = index
            .conflicts()?
            .flatten()
            .filter_map(|c| c.our.or(c.their).or(c.ancestor))
            .map(|e| String::from_utf8_lossy(&e.path).into_owned())
            .collect();
        paths.dedup();
        return Ok(Picked::Conflict(paths));
    }
    let tree = index.write_tree_to(&repo)?;
    if tree == ours.tree_id() {
        return Ok(Picked::AlreadyThere);
    }
    let message = String::from_utf8_lossy(theirs.message_raw_bytes()).into_owned();
    let new = repo.commit(
        None,
        &theirs.author(),
        &theirs.committer(),
        &message,
        &repo.find_tree(tree)?,
        &[&ours],
    )?;
    Ok(Picked::Onto(new.to_string()))
}

/// Moves `branch` from `from` to `to`: through the work tree when it is checked out there
/// (`reset --keep`: refused, with nothing changed, when a person's edit is in the way), else
/// the branch alone, only if nobody moved it meanwhile. With `dropped` (commits were kept
/// aside, off the branch), the tracker's files stay as the work tree has them: a bead closed by
/// a dropped commit must not reopen in the tracker's database; its next landing commits them.
fn move_branch(root: &Path, branch: &str, from: &str, to: &str, dropped: bool) -> Result<()> {
    if from == to {
        return Ok(());
    }
    let head = git(root, &["symbolic-ref", "--quiet", "HEAD"])?;
    if head.stdout.trim() != format!("refs/heads/{branch}") {
        let moved = git(
            root,
            &["update-ref", &format!("refs/heads/{branch}"), to, from],
        )?;
        if !moved.success() {
            bail!("{branch} moved while braids caught up with its upstream; the next push tries again");
        }
        return Ok(());
    }
    // A commit made meanwhile would be dropped by the reset: then nothing moves this time.
    if rev(root, "HEAD")? != from {
        bail!("{branch} moved while braids caught up with its upstream; the next push tries again");
    }
    let mut saved = Vec::new();
    if dropped {
        let mut args = vec!["diff", "--name-only", "--no-renames", to, from, "--"];
        args.extend(super::BOOKKEEPING);
        for rel in git_ok(root, &args)?.lines().filter(|l| !l.is_empty()) {
            let path = root.join(rel);
            // The person's own tree, but never through a link; any size (a big tracker).
            if std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file()) {
                saved.push((rel.to_string(), std::fs::read(&path)?));
            }
        }
    }
    let out = git(root, &["reset", "--quiet", "--keep", to])?;
    for (rel, bytes) in &saved {
        crate::system::beneath::write(root, Path::new(rel), bytes)?;
    }
    if !out.success() {
        bail!(
            "the upstream moved, and catching up would change files with uncommitted edits in \
             {}: commit or stash them; {branch} is left as it was ({})",
            root.display(),
            out.stderr.trim()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::{commit_all, push};
    use super::*;
    use std::path::PathBuf;

    const T: Duration = Duration::from_secs(60);

    fn sh(dir: &Path, args: &[&str]) -> String {
        git_ok(dir, args).unwrap()
    }

    #[test]
    fn commits_on_an_upstream_nobody_moved_keep_their_ids() {
        let (_tmp, _bare, ours, _theirs) = repos();
        std::fs::write(ours.join("a.txt"), "ours\n").unwrap();
        commit_all(&ours, "Activate iteration 001").unwrap();
        let before = rev(&ours, "HEAD").unwrap();
        let caught = catch_up(&ours, "main", T).unwrap();
        assert_eq!((caught.replayed, caught.kept.len()), (0, 0));
        assert_eq!(rev(&ours, "HEAD").unwrap(), before, "not recreated");
    }

    #[test]
    fn libgit2_picks_as_git_does_for_an_older_git() {
        let (_tmp, _bare, ours, _theirs) = repos();
        let base = rev(&ours, "HEAD").unwrap();
        std::fs::write(ours.join("a.txt"), "ours\n").unwrap();
        commit_all(&ours, "Ours (app-1)").unwrap();
        let mine = rev(&ours, "HEAD").unwrap();
        sh(&ours, &["reset", "-q", "--hard", &base]);
        std::fs::write(ours.join("b.txt"), "theirs\n").unwrap();
        commit_all(&ours, "Theirs").unwrap();
        let onto = rev(&ours, "HEAD").unwrap();
        let Picked::Onto(new) = pick_in_process(&ours, &onto, &mine).unwrap() else {
            panic!("not picked");
        };
        assert_eq!(
            sh(&ours, &["show", "-s", "--format=%s %P", &new]).trim(),
            format!("Ours (app-1) {onto}")
        );
        assert_eq!(sh(&ours, &["show", &format!("{new}:a.txt")]), "ours\n");
        assert!(matches!(
            pick_in_process(&ours, &new, &mine).unwrap(),
            Picked::AlreadyThere
        ));
        std::fs::write(ours.join("a.txt"), "other\n").unwrap();
        commit_all(&ours, "Other").unwrap();
        let other = rev(&ours, "HEAD").unwrap();
        match pick_in_process(&ours, &other, &mine).unwrap() {
            Picked::Conflict(paths) => assert_eq!(paths, ["a.txt"]),
            _ => panic!("no conflict"),
        }
    }

    /// A bare upstream with one commit, braids' clone of it, and somebody else's clone.
    fn repos() -> (tempfile::TempDir, PathBuf, PathBuf, PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let bare = tmp.path().join("up.git");
        let ours = tmp.path().join("ours");
        let theirs = tmp.path().join("theirs");
        sh(
            tmp.path(),
            &["init", "-q", "--bare", "-b", "main", bare.to_str().unwrap()],
        );
        for clone in [&ours, &theirs] {
            sh(
                tmp.path(),
                &[
                    "clone",
                    "-q",
                    bare.to_str().unwrap(),
                    clone.to_str().unwrap(),
                ],
            );
            sh(clone, &["config", "user.name", "t"]);
            sh(clone, &["config", "user.email", "t@t"]);
            sh(clone, &["checkout", "-q", "-B", "main"]);
        }
        std::fs::write(ours.join("README"), "r\n").unwrap();
        commit_all(&ours, "first").unwrap();
        sh(&ours, &["push", "-q", "-u", "origin", "main"]);
        sh(&theirs, &["pull", "-q", "origin", "main"]);
        sh(&theirs, &["branch", "-q", "-u", "origin/main"]);
        (tmp, bare, ours, theirs)
    }

    fn commit(dir: &Path, file: &str, text: &str, message: &str) {
        std::fs::write(dir.join(file), text).unwrap();
        commit_all(dir, message).unwrap();
    }

    fn log(bare: &Path) -> Vec<String> {
        sh(bare, &["log", "--format=%s %P", "main"])
            .lines()
            .map(String::from)
            .collect()
    }

    #[test]
    fn commits_are_replayed_onto_an_upstream_others_pushed_to() {
        let (_tmp, bare, ours, theirs) = repos();
        commit(&theirs, "theirs.txt", "t\n", "foreign");
        sh(&theirs, &["push", "-q"]);
        commit(&ours, "a.txt", "a\n", "bead a (app-1)");
        commit(&ours, "b.txt", "b\n", "bead b (app-2)");
        let author = sh(&ours, &["log", "-1", "--format=%an <%ae> %ad"]);
        let pushed = push(&ours, "main", T).unwrap();
        assert_eq!((pushed.replayed, pushed.kept.len()), (2, 0));
        let upstream = log(&bare);
        let order = ["bead b (app-2)", "bead a (app-1)", "foreign", "first"];
        assert_eq!(upstream.len(), order.len(), "{upstream:?}");
        for (line, subject) in upstream.iter().zip(order) {
            assert!(line.starts_with(subject), "{upstream:?}");
        }
        assert!(
            sh(&bare, &["rev-list", "--merges", "main"])
                .trim()
                .is_empty(),
            "no merge commit"
        );
        assert_eq!(sh(&ours, &["log", "-1", "--format=%an <%ae> %ad"]), author);
        // The checkout followed, with the foreign file and nothing left unpushed.
        assert!(ours.join("theirs.txt").exists());
        assert_eq!(
            sh(&ours, &["rev-parse", "HEAD"]),
            sh(&bare, &["rev-parse", "main"])
        );
        assert!(sh(&ours, &["status", "--porcelain"]).is_empty());
    }

    #[test]
    fn a_conflicting_commit_is_kept_on_a_branch_and_the_rest_lands() {
        let (_tmp, bare, ours, theirs) = repos();
        commit(&theirs, "README", "theirs\n", "foreign edit");
        sh(&theirs, &["push", "-q"]);
        commit(&ours, "README", "ours\n", "bead a (app-1)");
        let conflicting = sh(&ours, &["rev-parse", "HEAD"]).trim().to_string();
        commit(&ours, "b.txt", "b\n", "bead b (app-2)");
        let pushed = push(&ours, "main", T).unwrap();
        assert_eq!(pushed.replayed, 1);
        assert_eq!(pushed.kept.len(), 1);
        let k = &pushed.kept[0];
        assert_eq!(
            (k.commit.as_str(), k.paths.as_slice()),
            (conflicting.as_str(), &["README".to_string()][..])
        );
        assert_eq!(sh(&ours, &["rev-parse", &k.branch]).trim(), conflicting);
        assert!(k.to_string().contains("README"), "{k}");
        let upstream = log(&bare);
        assert!(upstream[0].starts_with("bead b (app-2)"), "{upstream:?}");
        assert!(upstream[1].starts_with("foreign edit"), "{upstream:?}");
        assert_eq!(
            std::fs::read_to_string(ours.join("README")).unwrap(),
            "theirs\n"
        );
    }

    #[test]
    fn a_rewritten_upstream_is_never_caught_up_with_nor_overwritten() {
        let (_tmp, bare, ours, theirs) = repos();
        commit(&theirs, "x.txt", "x\n", "to be removed");
        sh(&theirs, &["push", "-q"]);
        sh(&ours, &["pull", "-q"]);
        sh(&theirs, &["reset", "-q", "--hard", "HEAD~1"]);
        commit(&theirs, "y.txt", "y\n", "rewritten");
        sh(&theirs, &["push", "-q", "--force"]);
        commit(&ours, "a.txt", "a\n", "bead a (app-1)");
        let before = sh(&ours, &["rev-parse", "HEAD"]);
        let err = push(&ours, "main", T).unwrap_err().to_string();
        assert!(err.contains("rewritten"), "{err}");
        assert!(log(&bare)[0].starts_with("rewritten"));
        assert_eq!(sh(&ours, &["rev-parse", "HEAD"]), before, "nothing moved");
    }

    #[test]
    fn a_persons_edit_in_the_way_stops_the_catch_up_with_nothing_changed() {
        let (_tmp, _bare, ours, theirs) = repos();
        commit(&theirs, "README", "theirs\n", "foreign edit");
        sh(&theirs, &["push", "-q"]);
        commit(&ours, "a.txt", "a\n", "bead a (app-1)");
        std::fs::write(ours.join("README"), "a person's edit\n").unwrap();
        let before = sh(&ours, &["rev-parse", "HEAD"]);
        let err = format!("{:#}", push(&ours, "main", T).unwrap_err());
        assert!(err.contains("uncommitted edits"), "{err}");
        assert_eq!(sh(&ours, &["rev-parse", "HEAD"]), before);
        assert_eq!(
            std::fs::read_to_string(ours.join("README")).unwrap(),
            "a person's edit\n"
        );
    }
}

/// What replaying a branch onto a new base came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rebased {
    /// The new tip, every commit replayed with its author and message.
    Onto(String),
    /// A commit does not replay cleanly: the paths in conflict.
    Conflict(Vec<String>),
}

/// The commits of `head` that `onto` lacks, replayed onto `onto` one by one, as `git rebase`
/// would, without a work tree (no hook, no checkout, nothing of the repository's settings
/// run). A merge commit among them is refused: braids replays straight histories only.
pub fn rebase_onto(root: &Path, head: &str, onto: &str) -> Result<Rebased> {
    let range = format!("{onto}..{head}");
    if !git_ok(root, &["rev-list", "--merges", &range])?
        .trim()
        .is_empty()
    {
        bail!("the branch has a merge commit, so braids does not rebase it");
    }
    let mut tip = rev(root, onto)?;
    for commit in git_ok(root, &["rev-list", "--reverse", &range])?
        .lines()
        .map(str::trim)
        .filter(|c| !c.is_empty())
    {
        match pick(root, &tip, commit)? {
            Picked::Onto(new) => tip = new,
            Picked::AlreadyThere => {}
            Picked::Conflict(paths) => return Ok(Rebased::Conflict(paths)),
        }
    }
    Ok(Rebased::Onto(tip))
}
