//! bubblewrap: a [`Policy`] as `bwrap` arguments. The agent's root is a fresh tmpfs holding only
//! the allowed paths, bound read-only or writable; its processes live in a PID namespace that
//! ends with it.

use std::ffi::OsString;
use std::path::Path;

use super::Policy;

/// The arguments before `--`; `exe` (braids itself) is bound so the network layer can run.
pub(super) fn args(policy: &Policy, tmp: &Path, exe: &Path) -> Vec<OsString> {
    let mut out: Vec<OsString> = [
        "--die-with-parent",
        "--unshare-pid",
        "--proc",
        "/proc",
        "--dev-bind",
        "/dev",
        "/dev",
    ]
    .map(OsString::from)
    .to_vec();
    // Parents before what lies inside them, so a writable folder inside a read-only one (the
    // repository's objects inside its `.git`) is bound over it, and not the other way round.
    // `/etc` is one bind with its secrets masked, not one bind per entry: a bind costs a
    // mount, and `/etc` has over a hundred entries.
    let etc = Path::new("/etc");
    let whole_etc = policy.read.iter().any(|p| p.starts_with(etc));
    let mut binds: Vec<(&Path, &str)> = policy
        .read
        .iter()
        .filter(|p| !p.starts_with(etc))
        .map(|p| (p.as_path(), "--ro-bind"))
        .chain(whole_etc.then_some((etc, "--ro-bind")))
        .chain(policy.write.iter().map(|p| (p.as_path(), "--bind")))
        .filter(|(p, _)| !["/dev", "/proc"].contains(&p.to_string_lossy().as_ref()))
        .chain(std::iter::once((exe, "--ro-bind")))
        .chain(std::iter::once((tmp, "--bind")))
        .collect();
    binds.sort_by(|a, b| a.0.cmp(b.0));
    binds.dedup_by(|a, b| a.0 == b.0);
    for (p, how) in binds {
        out.extend([how.into(), p.into(), p.into()]);
    }
    if whole_etc {
        for secret in super::policy::ETC_SECRETS {
            let p = etc.join(secret);
            match std::fs::symlink_metadata(&p) {
                Ok(m) if m.is_dir() => out.extend([
                    "--tmpfs".into(),
                    p.clone().into(),
                    "--remount-ro".into(),
                    p.into(),
                ]),
                Ok(_) => out.extend(["--ro-bind".into(), "/dev/null".into(), p.into()]),
                Err(_) => {}
            }
        }
    }
    for p in &policy.protect {
        out.extend(["--ro-bind".into(), p.into(), p.into()]);
    }
    // The folders bubblewrap made to hold the binds are its own tmpfs: read-only too, so a
    // write outside the allowed paths fails as it does under Landlock, not into thin air.
    out.extend(["--remount-ro".into(), "/".into()]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parents_are_bound_before_what_lies_inside_them_and_protected_files_last() {
        let policy = Policy {
            read: vec!["/usr".into(), "/p/.git".into()],
            write: vec!["/p/.git/objects".into(), "/ws".into(), "/dev".into()],
            protect: vec!["/p/.git/worktrees/a/HEAD".into()],
            ports: vec![443],
        };
        let a: Vec<String> = args(&policy, Path::new("/t/tmp"), Path::new("/b/braids"))
            .iter()
            .map(|s| s.to_string_lossy().into_owned())
            .collect();
        let at = |p: &str| a.iter().position(|x| x == p).unwrap();
        assert!(at("/p/.git") < at("/p/.git/objects"), "{a:?}");
        assert_eq!(a[at("/p/.git/objects") - 1], "--bind");
        assert_eq!(a[at("/p/.git") - 1], "--ro-bind");
        assert!(at("/p/.git/worktrees/a/HEAD") > at("/ws"), "{a:?}");
        assert_eq!(a[a.len() - 2..], ["--remount-ro", "/"]);
        assert!(
            !a.windows(2).any(|w| w[0] == "--bind" && w[1] == "/dev"),
            "{a:?}"
        );
    }
}
