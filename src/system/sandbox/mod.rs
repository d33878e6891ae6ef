//! The agent's sandbox (`[worker] sandbox`, `"auto"` unless the person says otherwise). A
//! sandboxed agent reads its workspace, the system and toolchains, its own CLI's state and what
//! `sandbox_read` adds; writes its workspace, the bead's share of the project's repository and
//! tracker, its own temp folder, its CLI's state and what `sandbox_write` adds; connects only to
//! its provider's ports and what `sandbox_connect` adds. It reads nothing else of the person's
//! home (keys, cloud credentials, braids' own folder, other projects) and reaches no other
//! loopback service (`braids serve` among them).
//!
//! Two ways, both wrapping the agent's argv: Landlock, applied by braids itself in a small
//! re-exec (`braids sandbox-exec … -- <agent>`) so nothing runs between fork and exec but the
//! exec; and bubblewrap (`bwrap`), a file system built of the allowed paths only, a PID
//! namespace of its own, and Landlock's network rules inside where the kernel has them.
//! `"auto"` takes Landlock where the kernel has it, else bubblewrap where it runs, else none,
//! which `braids check`, STATUS.md and every tick then say.

mod bwrap;
mod landlock;
pub mod policy;

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

pub use self::landlock::{abi as landlock_abi, enter as enter_landlock, Rules};
pub use policy::{Place, Policy};

/// `[worker] sandbox`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// Landlock, else bubblewrap, else none (said loudly).
    #[default]
    Auto,
    Off,
    Landlock,
    Bwrap,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Auto => "auto",
            Kind::Off => "off",
            Kind::Landlock => "landlock",
            Kind::Bwrap => "bwrap",
        }
    }
}

/// The sandbox that runs on this machine for a setting, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    /// `Off`, `Landlock` or `Bwrap`, never `Auto`.
    pub kind: Kind,
    /// Why this one, in words for `braids check` and STATUS.md.
    pub why: String,
    /// Whether the agent's connections are confined (Landlock's network rules, ABI 4).
    pub network: bool,
    /// Whether "none" came from `"auto"` finding nothing, not from the person's `"off"`.
    pub fell_back: bool,
}

impl Choice {
    pub fn is_on(&self) -> bool {
        self.kind != Kind::Off
    }

    /// What the sandbox confines, for `braids check`.
    pub fn confines(&self) -> String {
        match self.kind {
            Kind::Off => {
                "nothing: the agent can read, write and reach whatever the person can".into()
            }
            _ => {
                let net = if self.network {
                    "connections to port 443, the provider's port and sandbox_connect only"
                } else {
                    "connections not at all (the kernel's Landlock has no network rules before ABI 4)"
                };
                format!(
                    "reads to the workspace, the system, toolchains, its CLI's state and sandbox_read; writes to the workspace, its CLI's state, the caches and sandbox_write; {net}{}",
                    if self.kind == Kind::Bwrap {
                        "; its processes live in a PID namespace of their own"
                    } else {
                        ""
                    }
                )
            }
        }
    }
}

/// Which sandbox `kind` is on this machine, with `bwrap` as the bubblewrap program: an error
/// names the setting when the one asked for cannot run (never a silent run without it).
pub fn choose(kind: Kind, bwrap: &str) -> Result<Choice, String> {
    let abi = landlock_abi();
    let network = abi >= 4;
    let landlock = |why: String| Choice {
        kind: Kind::Landlock,
        why,
        network,
        fell_back: false,
    };
    let bubblewrap = |why: String| Choice {
        kind: Kind::Bwrap,
        why,
        network,
        fell_back: false,
    };
    match kind {
        Kind::Off => Ok(Choice {
            kind: Kind::Off,
            why: "[worker] sandbox = \"off\" in config.toml".into(),
            network: false,
            fell_back: false,
        }),
        Kind::Landlock => match landlock_missing(abi) {
            Some(why) => Err(format!("[worker] sandbox = \"landlock\": {why}; use sandbox = \"bwrap\" or \"auto\" in config.toml")),
            None => Ok(landlock(format!("[worker] sandbox = \"landlock\" (this kernel's Landlock ABI {abi})"))),
        },
        Kind::Bwrap => match bwrap_missing(bwrap) {
            Some(why) => Err(format!("[worker] sandbox = \"bwrap\": {why}; use sandbox = \"landlock\" or \"auto\" in config.toml")),
            None => Ok(bubblewrap(format!("[worker] sandbox = \"bwrap\" (`{bwrap}`)"))),
        },
        Kind::Auto => {
            let no_landlock = landlock_missing(abi);
            if no_landlock.is_none() {
                return Ok(landlock(format!(
                    "sandbox = \"auto\": this kernel has Landlock ABI {abi}"
                )));
            }
            let no_landlock = no_landlock.unwrap_or_default();
            match bwrap_missing(bwrap) {
                None => Ok(bubblewrap(format!(
                    "sandbox = \"auto\": {no_landlock}, and bubblewrap (`{bwrap}`) runs"
                ))),
                Some(no_bwrap) => Ok(Choice {
                    kind: Kind::Off,
                    why: format!(
                        "sandbox = \"auto\" found none: {no_landlock}, and {no_bwrap}; install \
                         the bubblewrap package (or set [worker] bwrap to its path), or set \
                         sandbox = \"off\" to say agents may run unconfined"
                    ),
                    network: false,
                    fell_back: true,
                }),
            }
        }
    }
}

/// Why Landlock cannot hold an agent here, if it cannot: before ABI 3 a file's truncation is
/// not covered, too little to call a sandbox.
fn landlock_missing(abi: i64) -> Option<String> {
    match abi {
        ..=0 => Some(
            "this kernel has no Landlock (it must be built with CONFIG_SECURITY_LANDLOCK and have \
             landlock in its lsm= list)"
                .into(),
        ),
        1 | 2 => Some(format!(
            "this kernel's Landlock (ABI {abi}) cannot stop a file being truncated"
        )),
        _ => None,
    }
}

/// Why `bwrap` cannot run here, if it cannot; asked once per program and process.
fn bwrap_missing(bwrap: &str) -> Option<String> {
    static SEEN: OnceLock<Mutex<HashMap<String, bool>>> = OnceLock::new();
    let seen = SEEN.get_or_init(Default::default);
    let cached = seen.lock().ok().and_then(|m| m.get(bwrap).copied());
    let ok = cached.unwrap_or_else(|| {
        let ok = Command::new(bwrap)
            .args(["--ro-bind", "/", "/", "--dev", "/dev", "--", "true"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if let Ok(mut m) = seen.lock() {
            m.insert(bwrap.to_string(), ok);
        }
        ok
    });
    (!ok).then(|| {
        format!(
            "bubblewrap (`{bwrap}`) cannot run here (not installed, or unprivileged user \
             namespaces are off)"
        )
    })
}

/// The sandbox settings a worker's executor carries. Their `Default` is no sandbox, for code
/// that runs no agent; config.toml's default is `"auto"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// As configured; [`Settings::choice`] says what runs.
    pub kind: Kind,
    /// The person's home, where a CLI's state folders and `~/…` entries are.
    pub home: PathBuf,
    /// braids' own folder, which names the install whose containers keep the agent's
    /// processes.
    pub braids_dir: PathBuf,
    /// Folders (or files) under the home the agent's CLI keeps its state in.
    pub state: Vec<String>,
    /// `sandbox_write`: more writable paths (`~/…` or absolute).
    pub extra: Vec<String>,
    /// `sandbox_read`: more readable paths (`~/…` or absolute).
    pub read: Vec<String>,
    /// The ports the agent may connect to: its provider's and `sandbox_connect`.
    pub ports: Vec<u16>,
    /// The bubblewrap program.
    pub bwrap: String,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            kind: Kind::Off,
            home: PathBuf::new(),
            braids_dir: PathBuf::new(),
            state: Vec::new(),
            extra: Vec::new(),
            read: Vec::new(),
            ports: Vec::new(),
            bwrap: "bwrap".into(),
        }
    }
}

impl Settings {
    /// What runs for these settings on this machine.
    pub fn choice(&self) -> Result<Choice, String> {
        choose(self.kind, &self.bwrap)
    }

    /// Whether an agent under these settings runs in a sandbox (an error counts: it never
    /// runs unconfined when a sandbox was asked for).
    pub fn is_on(&self) -> bool {
        self.choice().map_or(true, |c| c.is_on())
    }

    /// `cmd` as it runs under `policy` inside the sandbox `choice`: a new command with its
    /// program, arguments and environment changes, and `TMPDIR` set to `tmp` (the caller sets
    /// the working directory and the rest).
    pub fn wrap(
        &self,
        choice: &Choice,
        cmd: &Command,
        policy: &Policy,
        tmp: &Path,
    ) -> Result<Command> {
        let me =
            std::env::current_exe().context("cannot find braids' own program for the sandbox")?;
        self.wrap_as(&me, choice, cmd, policy, tmp)
    }

    /// [`Settings::wrap`] with `braids` as the program that enters Landlock (`braids
    /// sandbox-exec`), for a caller that is not braids itself (a benchmark).
    pub fn wrap_as(
        &self,
        braids: &Path,
        choice: &Choice,
        cmd: &Command,
        policy: &Policy,
        tmp: &Path,
    ) -> Result<Command> {
        let mut inner: Vec<OsString> = vec![cmd.get_program().to_os_string()];
        inner.extend(cmd.get_args().map(|a| a.to_os_string()));
        let mut out = match choice.kind {
            Kind::Off | Kind::Auto => bail!("no sandbox to wrap in"),
            Kind::Landlock => {
                let mut c = Command::new(braids);
                c.arg("sandbox-exec")
                    .args(Rules::of(policy, true, choice.network).to_args())
                    .arg("--")
                    .args(&inner);
                c
            }
            Kind::Bwrap => {
                let exe = braids;
                let mut c = Command::new(&self.bwrap);
                c.args(bwrap::args(policy, tmp, exe));
                c.arg("--");
                // The network rules and the signal scope, which bubblewrap has no way to say,
                // from Landlock inside it where the kernel has them.
                if landlock_abi() >= 4 {
                    c.arg(exe)
                        .arg("sandbox-exec")
                        .args(Rules::of(policy, false, true).to_args())
                        .arg("--");
                }
                c.args(&inner);
                c
            }
        };
        for (k, v) in cmd.get_envs() {
            match v {
                Some(v) => out.env(k, v),
                None => out.env_remove(k),
            };
        }
        out.env("TMPDIR", tmp);
        Ok(out)
    }
}

/// Why `kind` cannot work on this machine (with `bwrap` as the bubblewrap program), if it
/// cannot: for `braids check` and the worker.
pub fn unavailable(kind: Kind, bwrap: &str) -> Option<String> {
    choose(kind, bwrap).err()
}

/// The `~/…` or absolute `entry` as a path under `home`.
pub(crate) fn expand(home: &Path, entry: &str) -> PathBuf {
    match entry.strip_prefix("~/") {
        Some(rest) => home.join(rest),
        None if entry == "~" => home.to_path_buf(),
        None => PathBuf::from(entry),
    }
}
