//! What a sandboxed agent may read, write and connect to: one pure-but-for-`stat` list both
//! sandboxes are built from, so Landlock and bubblewrap confine the same things.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::{expand, Settings};

/// The system: programs, libraries, toolchains installed for everyone, and the kernel's views.
/// `/etc` is added entry by entry (see [`ETC_SECRETS`]); `/tmp` and `/var` are not: other
/// people's files live there, and the agent has a temp folder of its own.
const SYSTEM: &[&str] = &[
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/opt",
    "/nix/store",
    "/snap",
    "/sys",
    "/proc",
    // Where a systemd machine's /etc/resolv.conf points.
    "/run/systemd/resolve",
];

/// Entries of `/etc` that hold secrets rather than configuration: left out even for an agent
/// running as root, whom file modes do not stop.
pub(super) const ETC_SECRETS: &[&str] = &[
    "shadow",
    "shadow-",
    "gshadow",
    "gshadow-",
    "ssh",
    "sudoers",
    "sudoers.d",
    "security",
    "ssl/private",
    "munge",
    "credstore",
    "credstore.encrypted",
    "wireguard",
    "NetworkManager/system-connections",
];

/// Toolchains and settings under the home that an agent's commands read: compilers, language
/// version managers, the git identity. Read only.
const TOOLCHAINS: &[&str] = &[
    ".cargo",
    ".rustup",
    ".local/bin",
    ".local/lib",
    ".local/share/pnpm",
    ".local/share/uv",
    ".local/share/mise",
    ".nvm",
    ".npm-global",
    ".bun",
    ".deno",
    ".pyenv",
    ".volta",
    ".asdf",
    ".sdkman",
    "go",
    ".gitconfig",
    ".config/git",
];

/// Folders every agent may write under the home: package caches its commands use.
const CACHES: &[&str] = &[".cache", ".npm", ".cargo/registry", ".cargo/git"];

/// The ports every agent may connect to: HTTPS (a provider's default, package registries) and
/// DNS over TCP.
const PORTS: &[u16] = &[443, 53];

/// Where one sandboxed run happens.
#[derive(Debug, Clone, Default)]
pub struct Place {
    pub workspace: PathBuf,
    pub project: PathBuf,
    /// Its own temp folder.
    pub tmp: PathBuf,
    /// More it reads: its prompt's folder, the program it runs and the files its command
    /// names ([`named_paths`]).
    pub own: Vec<PathBuf>,
    /// Files inside writable folders it may not change (a worktree's `HEAD`, `commondir`, …),
    /// where the sandbox can say so (bubblewrap binds them read-only).
    pub protect: Vec<PathBuf>,
}

/// What one sandboxed run may do.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    pub read: Vec<PathBuf>,
    pub write: Vec<PathBuf>,
    pub protect: Vec<PathBuf>,
    pub ports: Vec<u16>,
}

impl Settings {
    /// The paths the agent of `place` may write, then read, and the ports it may reach: the
    /// workspace; the project's tracker database and the parts of its repository a worktree's
    /// commits write (objects, its branch and that branch's log, the worktree's own admin
    /// folder; never another branch, the config or the hooks), the rest of the repository
    /// read only; its own temp folder; `/dev`; the CLI's state and the package caches; the
    /// system, the toolchains and what it was given; the extras.
    #[must_use]
    pub fn policy(&self, place: &Place) -> Policy {
        let (workspace, project) = (&place.workspace, &place.project);
        let mut write = vec![workspace.clone(), project.join(".beads")];
        let mut read = Vec::new();
        let git = project.join(".git");
        if git.is_dir() && workspace != project {
            read.push(git.clone());
            write.push(git.join("objects"));
            // Git LFS keeps the content of the files it tracks beside the objects.
            write.push(git.join("lfs"));
            for d in ["refs/heads/braids", "logs/refs/heads/braids"] {
                let _ = std::fs::create_dir_all(git.join(d));
                write.push(git.join(d));
            }
            if let Some(admin) = worktree_admin(&git, workspace) {
                write.push(admin);
            }
        } else if workspace == project {
            write.push(git);
        }
        let _ = std::fs::create_dir_all(&place.tmp);
        write.extend([place.tmp.clone(), "/dev".into()]);
        for dir in self
            .state
            .iter()
            .map(String::as_str)
            .chain(CACHES.iter().copied())
        {
            let p = self.home.join(dir);
            // A CLI's first run makes its folder: made here, so the sandbox can name it. A
            // dotted name with no slash is a file (`.claude.json`) and is left alone.
            if !dir.ends_with(".json") {
                let _ = std::fs::create_dir_all(&p);
            }
            write.push(p);
        }
        write.extend(self.extra.iter().map(|e| expand(&self.home, e)));
        read.extend(SYSTEM.iter().map(PathBuf::from));
        read.extend(etc_entries(Path::new("/etc")));
        read.extend(TOOLCHAINS.iter().map(|t| self.home.join(t)));
        read.extend(self.read.iter().map(|e| expand(&self.home, e)));
        read.extend(place.own.iter().cloned());
        let tidy = |v: &mut Vec<PathBuf>| {
            v.retain(|p| std::fs::symlink_metadata(p).is_ok());
            v.sort();
            v.dedup();
        };
        tidy(&mut write);
        tidy(&mut read);
        read.retain(|p| !write.contains(p));
        let mut protect = place.protect.clone();
        tidy(&mut protect);
        let mut ports: Vec<u16> = PORTS.iter().chain(&self.ports).copied().collect();
        ports.sort_unstable();
        ports.dedup();
        Policy {
            read,
            write,
            protect,
            ports,
        }
    }
}

/// `/etc`'s entries but [`ETC_SECRETS`]; a secret inside a folder (`ssl/private`) leaves that
/// folder's other entries.
fn etc_entries(etc: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(etc) else {
        return out;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if ETC_SECRETS.contains(&name.as_str()) {
            continue;
        }
        let nested: Vec<&str> = ETC_SECRETS
            .iter()
            .filter_map(|s| s.strip_prefix(&format!("{name}/")))
            .collect();
        if nested.is_empty() || !e.path().is_dir() {
            out.push(e.path());
            continue;
        }
        for inner in std::fs::read_dir(e.path()).into_iter().flatten().flatten() {
            if !nested.contains(&inner.file_name().to_string_lossy().as_ref()) {
                out.push(inner.path());
            }
        }
    }
    out
}

/// The admin folder git keeps for the worktree at `workspace`, when its `.git` file names one
/// under the repository's own `worktrees/`: the agent can rewrite that file, so a path
/// elsewhere is never made writable.
fn worktree_admin(git: &Path, workspace: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(workspace.join(".git")).ok()?;
    let admin = PathBuf::from(text.trim().strip_prefix("gitdir:")?.trim())
        .canonicalize()
        .ok()?;
    let worktrees = git.join("worktrees").canonicalize().ok()?;
    (admin.parent() == Some(worktrees.as_path())).then_some(admin)
}

/// What the person's command for the agent names, which the agent must read to run at all:
/// the program (as found on the command's PATH) and, for a script, its interpreter, each with
/// its folder, the folder a link leads to and, outside `home`, the installation it belongs to
/// (`<prefix>` of `<prefix>/bin/<program>`: a virtualenv, a pyenv or nvm version, with their
/// libraries); and every absolute path among its arguments (a model-settings file, say). The
/// person wrote these in config.toml; nothing of the agent's chooses them.
pub fn named_paths(cmd: &Command, home: &Path) -> Vec<PathBuf> {
    let path_var = cmd
        .get_envs()
        .find(|(k, _)| *k == "PATH")
        .and_then(|(_, v)| v.map(|v| v.to_os_string()))
        .or_else(|| std::env::var_os("PATH"));
    let find = |program: &Path| -> Option<PathBuf> {
        if program.components().count() > 1 {
            return Some(program.to_path_buf());
        }
        let cwd = std::env::current_dir().unwrap_or_default();
        which::which_in(program, path_var.clone(), cwd).ok()
    };
    let mut programs: Vec<PathBuf> = find(Path::new(cmd.get_program())).into_iter().collect();
    if let Some(interpreter) = programs.first().and_then(|p| interpreter(p)) {
        programs.extend(find(&interpreter));
    }
    let mut out = Vec::new();
    for found in programs {
        out.extend(found.parent().map(Path::to_path_buf));
        let Ok(real) = found.canonicalize() else {
            continue;
        };
        let dir = real.parent().map(Path::to_path_buf);
        let prefix = dir
            .as_deref()
            .filter(|d| d.file_name().is_some_and(|n| n == "bin"))
            .and_then(Path::parent)
            .filter(|p| p.components().count() > 2 && !p.starts_with(home) && !home.starts_with(p))
            .map(Path::to_path_buf);
        out.extend(dir);
        out.extend(prefix);
    }
    out.extend(
        cmd.get_args()
            .map(Path::new)
            .filter(|p| p.is_absolute() && p.exists())
            .map(Path::to_path_buf),
    );
    out
}

/// The interpreter a script's `#!` line names (the program after `env`).
fn interpreter(script: &Path) -> Option<PathBuf> {
    use std::io::Read;
    let mut head = [0u8; 256];
    let n = std::fs::File::open(script).ok()?.read(&mut head).ok()?;
    let line = head[..n].strip_prefix(b"#!")?;
    let line = String::from_utf8_lossy(line);
    let mut words = line.lines().next()?.split_whitespace();
    let first = words.next()?;
    match first.rsplit('/').next() {
        Some("env") => words.find(|w| !w.starts_with('-')).map(PathBuf::from),
        _ => Some(PathBuf::from(first)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::system::sandbox::Kind;

    fn settings(home: &Path) -> Settings {
        Settings {
            kind: Kind::Landlock,
            home: home.to_path_buf(),
            state: vec![".claude".into(), ".claude.json".into()],
            read: vec!["~/notes".into()],
            ports: vec![8080],
            ..Settings::default()
        }
    }

    #[test]
    fn a_planted_gitdir_never_widens_what_the_agent_may_write() {
        let tmp = tempfile::tempdir().unwrap();
        let project = tmp.path().join("app");
        let admin = project.join(".git/worktrees/app-1");
        std::fs::create_dir_all(&admin).unwrap();
        std::fs::create_dir_all(project.join(".git/objects")).unwrap();
        let ws = tmp.path().join("ws/app-1");
        std::fs::create_dir_all(&ws).unwrap();
        let s = settings(&tmp.path().join("home"));
        let place = Place {
            workspace: ws.clone(),
            project: project.clone(),
            tmp: tmp.path().join("tmp"),
            ..Place::default()
        };
        std::fs::write(ws.join(".git"), format!("gitdir: {}\n", admin.display())).unwrap();
        let p = s.policy(&place);
        assert!(p.write.contains(&admin.canonicalize().unwrap()), "{p:?}");
        assert!(
            p.write.contains(&project.join(".git/refs/heads/braids")),
            "{p:?}"
        );
        assert!(!p.write.contains(&project.join(".git")), "{p:?}");
        assert!(p.read.contains(&project.join(".git")), "{p:?}");
        for planted in ["/", "/root", tmp.path().to_str().unwrap()] {
            std::fs::write(ws.join(".git"), format!("gitdir: {planted}\n")).unwrap();
            let p = s.policy(&place);
            assert!(
                !p.write.iter().any(|w| w == Path::new(planted)),
                "{planted}: {p:?}"
            );
        }
    }

    #[test]
    fn the_home_is_readable_only_where_the_policy_names_it() {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("home");
        for d in [
            ".ssh",
            ".aws",
            ".openclaw/braids",
            "Projects/other",
            ".cargo/bin",
            "notes",
        ] {
            std::fs::create_dir_all(home.join(d)).unwrap();
        }
        std::fs::write(home.join(".gitconfig"), "").unwrap();
        std::fs::write(home.join(".claude.json"), "{}").unwrap();
        let ws = tmp.path().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        let s = settings(&home);
        let p = s.policy(&Place {
            workspace: ws.clone(),
            project: ws.clone(),
            tmp: tmp.path().join("tmp"),
            ..Place::default()
        });
        let reachable = |x: &Path| p.read.iter().chain(&p.write).any(|r| x.starts_with(r));
        for denied in [".ssh", ".aws", ".openclaw/braids", "Projects/other", ""] {
            assert!(!reachable(&home.join(denied).join("x")), "{denied}: {p:?}");
        }
        for allowed in [
            ".cargo/bin/x",
            ".gitconfig",
            "notes/x",
            ".claude/x",
            ".claude.json",
        ] {
            assert!(reachable(&home.join(allowed)), "{allowed}: {p:?}");
        }
        assert!(reachable(&ws.join("src/main.rs")));
        assert!(!reachable(Path::new("/tmp/someone-else")));
        assert!(!reachable(Path::new("/etc/shadow")));
        assert!(!reachable(Path::new("/etc/ssh/ssh_host_ed25519_key")));
        assert!(reachable(Path::new("/etc/passwd")));
        assert_eq!(p.ports, vec![53, 443, 8080]);
    }

    #[test]
    fn the_program_and_the_paths_its_command_names_are_readable() {
        let tmp = tempfile::tempdir().unwrap();
        let bin = tmp.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let meta = tmp.path().join("models.json");
        std::fs::write(&meta, "{}").unwrap();
        crate::system::atomic::write(&bin.join("agent"), b"#!/bin/sh\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(bin.join("agent"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
        let mut cmd = Command::new("agent");
        cmd.env("PATH", &bin)
            .args(["--meta", meta.to_str().unwrap(), "/nowhere/at/all"]);
        let named = named_paths(&cmd, &tmp.path().join("home"));
        assert!(named.contains(&bin), "{named:?}");
        assert!(named.contains(&meta), "{named:?}");
        assert!(
            !named.iter().any(|p| p.starts_with("/nowhere")),
            "{named:?}"
        );
        // A script's interpreter comes with its installation, unless that is the home.
        let venv = tmp.path().join("opt/venv/bin");
        std::fs::create_dir_all(&venv).unwrap();
        std::fs::write(venv.join("python3"), "").unwrap();
        std::fs::set_permissions(venv.join("python3"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
        let script = format!("#!{}\n", venv.join("python3").display());
        crate::system::atomic::write(&bin.join("agent"), script.as_bytes()).unwrap();
        let named = named_paths(&cmd, &tmp.path().join("home"));
        assert!(named.contains(&tmp.path().join("opt/venv")), "{named:?}");
        let named = named_paths(&cmd, tmp.path());
        assert!(!named.contains(&tmp.path().join("opt/venv")), "{named:?}");
    }
}
