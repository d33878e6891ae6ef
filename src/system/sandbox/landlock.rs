//! Landlock: the rules of a [`Policy`] as `braids sandbox-exec` arguments, and entering them.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};

use super::Policy;

/// What `braids sandbox-exec` enforces before it becomes the agent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rules {
    pub read: Vec<PathBuf>,
    pub write: Vec<PathBuf>,
    /// The only TCP ports it may connect to; honoured when `network` is set.
    pub ports: Vec<u16>,
    /// Whether the file system is confined here (not when bubblewrap already built it).
    pub fs: bool,
    pub network: bool,
}

impl Rules {
    #[must_use]
    pub fn of(policy: &Policy, fs: bool, network: bool) -> Rules {
        Rules {
            read: if fs { policy.read.clone() } else { Vec::new() },
            write: if fs { policy.write.clone() } else { Vec::new() },
            ports: policy.ports.clone(),
            fs,
            network,
        }
    }

    /// As `braids sandbox-exec` takes them.
    pub fn to_args(&self) -> Vec<std::ffi::OsString> {
        let mut out: Vec<std::ffi::OsString> = Vec::new();
        for p in &self.read {
            out.extend(["--read".into(), p.into()]);
        }
        for p in &self.write {
            out.extend(["--write".into(), p.into()]);
        }
        if self.network {
            for port in &self.ports {
                out.extend(["--connect".into(), port.to_string().into()]);
            }
        } else {
            out.push("--any-port".into());
        }
        if !self.fs {
            out.push("--no-fs".into());
        }
        out
    }
}

/// The kernel's Landlock ABI version; 0 or less when there is none.
pub fn abi() -> i64 {
    // landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)
    // SAFETY: the version query reads and writes no memory.
    unsafe { nix::libc::syscall(nix::libc::SYS_landlock_create_ruleset, 0usize, 0usize, 1u32) }
}

/// Limits this process (and what it executes) to `rules`, fully or not at all: a kernel that
/// would enforce them only in part is an error. Signals to processes outside the sandbox and
/// abstract sockets made outside it are refused too where the kernel can (ABI 6).
pub fn enter(rules: &Rules) -> Result<()> {
    use landlock::{
        path_beneath_rules, Access, AccessFs, AccessNet, CompatLevel, Compatible, NetPort, Ruleset,
        RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope, ABI,
    };
    let found = abi();
    if found < 3 {
        bail!(
            "this kernel's Landlock (ABI {found}) cannot hold an agent; use [worker] sandbox = \"bwrap\" or \"off\" in config.toml"
        );
    }
    let abi = ABI::from(found as i32);
    let mut ruleset = Ruleset::default().set_compatibility(CompatLevel::HardRequirement);
    if rules.fs {
        ruleset = ruleset.handle_access(AccessFs::from_all(abi))?;
    }
    if rules.network && found >= 4 {
        ruleset = ruleset.handle_access(AccessNet::ConnectTcp)?;
    }
    if found >= 6 {
        ruleset = ruleset.scope(Scope::from_all(abi))?;
    }
    let mut created = ruleset.create()?;
    if rules.fs {
        created = created
            .add_rules(path_beneath_rules(&rules.read, AccessFs::from_read(abi)))?
            .add_rules(path_beneath_rules(&rules.write, AccessFs::from_all(abi)))?;
    }
    if rules.network && found >= 4 {
        for port in &rules.ports {
            created = created.add_rule(NetPort::new(*port, AccessNet::ConnectTcp))?;
        }
    }
    let status = created
        .restrict_self()
        .context("cannot enter the Landlock sandbox")?;
    if status.ruleset != RulesetStatus::FullyEnforced {
        bail!(
            "the kernel did not enforce the Landlock sandbox; use [worker] sandbox = \"bwrap\" or \"off\" in config.toml"
        );
    }
    Ok(())
}
