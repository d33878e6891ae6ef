//! Records the commit braids is built from, for `braids --version`: `git rev-parse` of the
//! checkout, or `unknown` outside one (a crate tarball).

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && !text.is_empty()).then_some(text)
}

fn main() {
    let commit = git(&["rev-parse", "--short=10", "HEAD"]).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=BRAIDS_COMMIT={commit}");
    // A new commit moves HEAD or the branch it names (in a linked worktree HEAD is in its own
    // git folder, the branches in the common one); nothing else needs a rebuild.
    let dirs = [
        git(&["rev-parse", "--git-dir"]),
        git(&["rev-parse", "--git-common-dir"]),
    ];
    for dir in dirs.iter().flatten() {
        for f in ["HEAD", "refs/heads", "packed-refs"] {
            let path = std::path::Path::new(dir).join(f);
            if path.exists() {
                println!("cargo:rerun-if-changed={}", path.display());
            }
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
}
