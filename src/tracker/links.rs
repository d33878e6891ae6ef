//! The tracker's folder holds no link. br refuses to run beside one that leads out of
//! `.beads` (and stops the project with it), and braids reads the folder's files for its own
//! observations: an agent that may write the folder could plant one to make either read
//! another file of the person's. Every link found there is removed, never followed, and said.

use std::path::{Path, PathBuf};

/// Removes every symbolic link in the tracker's folder `folder` (`<project>/.beads`, any
/// depth, links to folders not entered) and returns them; a link at `folder` itself is
/// removed too. Each is logged as a warning naming it.
pub fn remove_links(folder: &Path) -> Vec<PathBuf> {
    let mut removed = Vec::new();
    let mut stack = vec![folder.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(meta) = std::fs::symlink_metadata(&dir) else {
            continue;
        };
        if meta.file_type().is_symlink() {
            remove(&dir, &mut removed);
            continue;
        }
        if !meta.is_dir() {
            continue;
        }
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            match e.file_type() {
                Ok(t) if t.is_symlink() => remove(&e.path(), &mut removed),
                Ok(t) if t.is_dir() => stack.push(e.path()),
                _ => {}
            }
        }
    }
    removed
}

fn remove(path: &Path, removed: &mut Vec<PathBuf>) {
    let target = std::fs::read_link(path).unwrap_or_default();
    match std::fs::remove_file(path) {
        Ok(()) => {
            tracing::warn!(path = %path.display(), target = %target.display(), "removed a symbolic link from the tracker's folder before running the tracker (it holds only the tracker's files)");
            removed.push(path.to_path_buf());
        }
        Err(e) => {
            tracing::warn!(path = %path.display(), "a symbolic link in the tracker's folder cannot be removed: {e}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_in_the_trackers_folder_are_removed_and_never_followed() {
        let tmp = tempfile::tempdir().unwrap();
        let beads = tmp.path().join(".beads");
        let outside = tmp.path().join("secret.txt");
        std::fs::write(&outside, "secret").unwrap();
        std::fs::create_dir_all(beads.join("sub")).unwrap();
        std::fs::create_dir_all(tmp.path().join("elsewhere")).unwrap();
        std::fs::write(tmp.path().join("elsewhere/keep.txt"), "x").unwrap();
        std::fs::write(beads.join("issues.jsonl"), "{}\n").unwrap();
        let link = |to: &Path, at: &str| std::os::unix::fs::symlink(to, beads.join(at)).unwrap();
        link(&outside, "leak.txt");
        link(Path::new("../secret.txt"), "sub/rel");
        link(&tmp.path().join("elsewhere"), "dir");
        link(&outside, "\u{e9}");
        let mut removed = remove_links(&beads);
        removed.sort();
        assert_eq!(removed.len(), 4, "{removed:?}");
        assert!(beads.join("issues.jsonl").is_file());
        assert!(outside.is_file(), "the target is untouched");
        assert!(
            tmp.path().join("elsewhere/keep.txt").is_file(),
            "a linked folder is not entered"
        );
        assert!(remove_links(&beads).is_empty());
        assert!(remove_links(&tmp.path().join("none")).is_empty());
    }
}
