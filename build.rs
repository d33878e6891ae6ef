//! Records the commit braids is built from, for `braids --version`: `git rev-parse` of the
//! checkout, or `unknown` outside one (a crate tarball).

fn main() {
    let commit = std::process::Command::new("git")
        .args(["rev-parse", "--short=10", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=BRAIDS_COMMIT={commit}");
    // A new commit moves HEAD or the branch it names; nothing else needs a rebuild.
    for f in [".git/HEAD", ".git/refs/heads", ".git/packed-refs"] {
        if std::path::Path::new(f).exists() {
            println!("cargo:rerun-if-changed={f}");
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
}
