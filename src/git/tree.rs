//! What a range of commits changes, read from the commits' trees as git has them: modes, blob
//! ids and raw names (`-z`, so a name git would quote, `.beads/é`, is the name itself), never
//! from the index or the work tree an agent may have arranged. And which files of the
//! tracker's folder are the tracker's own.

use std::path::{Component, Path, PathBuf};

use anyhow::{anyhow, Context, Result};
use git2::Repository;

/// A symbolic link's mode in a tree.
pub const LINK: u32 = 0o120000;

/// One path a range changes (`git diff --raw`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub old_mode: u32,
    pub new_mode: u32,
    /// The blob the path holds after the change (zeros when it is deleted).
    pub new_id: String,
    /// `A`, `M`, `D`, `T` (type changed), …
    pub status: char,
    pub path: String,
}

impl Change {
    /// Whether the change leaves a symbolic link at the path.
    pub fn is_link(&self) -> bool {
        self.new_mode == LINK
    }
}

/// `git diff -z --raw --no-renames` output: `:<old mode> <new mode> <old id> <new id>
/// <status>\0<path>\0` per path. Entries it cannot read are skipped; a rename or copy (not
/// asked for) would carry a second path, which is read as one more change's path.
pub fn parse_raw_z(out: &str) -> Vec<Change> {
    let mut changes = Vec::new();
    let mut it = out.split('\0');
    while let Some(head) = it.next() {
        let Some(head) = head.strip_prefix(':') else {
            continue;
        };
        let f: Vec<&str> = head.split(' ').collect();
        let Some(path) = it.next() else { break };
        let [old_mode, new_mode, _, new_id, status] = f[..] else {
            continue;
        };
        let mode = |m: &str| u32::from_str_radix(m, 8).unwrap_or(0);
        let status = status.chars().next().unwrap_or('?');
        changes.push(Change {
            old_mode: mode(old_mode),
            new_mode: mode(new_mode),
            new_id: new_id.to_string(),
            status,
            path: path.to_string(),
        });
        if matches!(status, 'R' | 'C') {
            if let Some(to) = it.next() {
                changes.push(Change {
                    old_mode: 0,
                    new_mode: mode(new_mode),
                    new_id: new_id.to_string(),
                    status: 'A',
                    path: to.to_string(),
                });
            }
        }
    }
    changes
}

/// What `range` (`base..HEAD`) changes in the repository at `dir`, from the commits' trees.
pub fn changes(dir: &Path, range: &str) -> Result<Vec<Change>> {
    let out = super::git_ok(
        dir,
        &["diff", "-z", "--raw", "--no-abbrev", "--no-renames", range],
    )?;
    Ok(parse_raw_z(&out))
}

/// The target a link blob `id` of the repository at `dir` holds (its content, from git's
/// object store, never the file system).
pub fn link_target(dir: &Path, id: &str) -> Result<String> {
    let out = super::git(dir, &["cat-file", "blob", id])?;
    if !out.success() {
        return Err(anyhow!("cannot read {id}: {}", out.stderr.trim()));
    }
    Ok(out.stdout)
}

/// Whether a link at the repository-relative `rel` pointing at `target` leads out of the
/// repository (absolute, or climbing above its top).
pub fn leads_out(rel: &str, target: &str) -> bool {
    let from = Path::new(rel).parent().unwrap_or(Path::new(""));
    let mut depth = from.components().count() as i64;
    for c in Path::new(target).components() {
        match c {
            Component::Normal(_) => depth += 1,
            Component::CurDir => {}
            Component::ParentDir => depth -= 1,
            Component::RootDir | Component::Prefix(_) => return true,
        }
        if depth < 0 {
            return true;
        }
    }
    false
}

/// The tracker folders braids lands files from (br's and bd's `.beads`).
pub const TRACKER_DIRS: &[&str] = &[".beads"];

/// The files br (`br init`, `create`, `close`, `sync`) and bd (`bd init`, its export) write in
/// `.beads/` for git to carry; everything else there is local (the database, its sidecars,
/// locks, history, which their own `.gitignore` leaves out) or somebody else's.
pub const TRACKER_OWN: &[&str] = &[
    ".gitignore",
    "config.yaml",
    "issues.jsonl",
    "metadata.json",
    // bd's
    "README.md",
    "interactions.jsonl",
    "deletions.jsonl",
];

/// Whether the repository-relative `rel` lies in a tracker folder ([`TRACKER_DIRS`]).
pub fn in_tracker_dir(rel: &Path) -> bool {
    TRACKER_DIRS.iter().any(|d| rel.starts_with(d))
}

/// Whether the repository-relative `rel` is one of the files the tracker itself writes in its
/// folder: directly in it and named in [`TRACKER_OWN`] (in exactly that case).
pub fn is_tracker_file(rel: &Path) -> bool {
    TRACKER_DIRS.iter().any(|d| {
        rel.strip_prefix(d).is_ok_and(|name| {
            name.components().count() == 1 && TRACKER_OWN.iter().any(|own| name == Path::new(own))
        })
    })
}

/// Whether braids' own commits leave the work-tree path `rel` (under `root`) alone: a symbolic
/// link (braids commits none: one may lead out of the repository, and br refuses to run
/// beside one in its folder), or a file in the tracker's folder that is not the tracker's own
/// (see [`is_tracker_file`]).
pub(super) fn kept_out(root: &Path, rel: &Path) -> bool {
    (in_tracker_dir(rel) && !is_tracker_file(rel) && !root.join(rel).is_dir())
        || std::fs::symlink_metadata(root.join(rel)).is_ok_and(|m| m.file_type().is_symlink())
}

/// Puts back as HEAD has them the entries of `index` that braids' own commits never add,
/// whoever staged them: a link, a file in the tracker's folder that is not the tracker's.
/// The index is not trusted (`git update-index --cacheinfo 120000,…` stages a link no file
/// shows).
pub(super) fn sanitize(repo: &Repository, index: &mut git2::Index) -> Result<()> {
    let head = repo.head().ok().and_then(|h| h.peel_to_tree().ok());
    let odd: Vec<(PathBuf, u32, git2::Oid)> = index
        .iter()
        .filter_map(|e| {
            let path = PathBuf::from(String::from_utf8_lossy(&e.path).into_owned());
            let refused = e.mode == LINK || (in_tracker_dir(&path) && !is_tracker_file(&path));
            refused.then_some((path, e.mode, e.id))
        })
        .collect();
    for (path, mode, id) in odd {
        let before = head.as_ref().and_then(|t| t.get_path(&path).ok());
        if before
            .as_ref()
            .is_some_and(|b| b.id() == id && b.filemode() as u32 == mode)
        {
            continue;
        }
        tracing::warn!(path = %path.display(), "braids' commit leaves out a link or a file in the tracker's folder that is not the tracker's");
        match before {
            Some(b) => {
                let mut entry = index.get_path(&path, 0).context("index entry vanished")?;
                entry.id = b.id();
                entry.mode = b.filemode() as u32;
                index.add(&entry)?;
            }
            None => index.remove_path(&path)?,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_names_and_modes_are_read_as_git_has_them() {
        let z = ":000000 120000 0000000000000000000000000000000000000000 \
                 1111111111111111111111111111111111111111 A\0.beads/\u{e9}\0\
                 :100644 100644 2222222222222222222222222222222222222222 \
                 3333333333333333333333333333333333333333 M\0.braids/PROJECT.md.\u{e9}\0\
                 :100644 000000 4444444444444444444444444444444444444444 \
                 0000000000000000000000000000000000000000 D\0a b\nc\0";
        let c = parse_raw_z(z);
        assert_eq!(c.len(), 3, "{c:?}");
        assert_eq!(c[0].path, ".beads/é");
        assert!(c[0].is_link());
        assert_eq!(c[0].new_id, "1".repeat(40));
        assert_eq!(c[1].path, ".braids/PROJECT.md.é");
        assert_eq!((c[1].status, c[1].new_mode), ('M', 0o100644));
        assert_eq!(c[2].path, "a b\nc", "a newline is part of the name");
        assert_eq!(c[2].status, 'D');
        assert!(parse_raw_z("").is_empty());
        assert!(parse_raw_z("garbage\0").is_empty());
    }

    #[test]
    fn links_leading_out_are_told_from_the_target_alone() {
        assert!(leads_out("leak", "/home/someone/secret.txt"));
        assert!(leads_out("a/b/x", "../../../x"));
        assert!(leads_out("x", "../x"));
        assert!(leads_out("a/x", "b/../../../x"));
        assert!(!leads_out("a/b/x", "../../README"));
        assert!(!leads_out("a/x", "./b/c"));
    }

    #[test]
    fn the_tracker_folder_holds_only_the_trackers_files() {
        for f in [
            ".beads/issues.jsonl",
            ".beads/.gitignore",
            ".beads/config.yaml",
            ".beads/metadata.json",
        ] {
            assert!(is_tracker_file(Path::new(f)), "{f}");
        }
        for f in [
            ".beads/leak.txt",
            ".beads/beads.db",
            ".beads/é",
            ".beads/sub/issues.jsonl",
            ".beads",
            "issues.jsonl",
            ".beads/issues.jsonl.bak",
        ] {
            assert!(!is_tracker_file(Path::new(f)), "{f}");
        }
        assert!(in_tracker_dir(Path::new(".beads/x")));
        assert!(!in_tracker_dir(Path::new(".beadsx/x")));
    }
}
