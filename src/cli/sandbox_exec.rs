//! `braids sandbox-exec`: the Landlock wrapper a sandboxed agent runs in (see
//! [`crate::system::sandbox`]). Hidden: the worker builds its argv.

use std::path::PathBuf;

use clap::Args;

#[derive(Debug, Args)]
pub struct SandboxExecArgs {
    /// A path the program may read beneath.
    #[arg(long, value_name = "PATH")]
    pub read: Vec<PathBuf>,
    /// A path the program may read and write beneath.
    #[arg(long, value_name = "PATH")]
    pub write: Vec<PathBuf>,
    /// A TCP port the program may connect to (any host).
    #[arg(long, value_name = "PORT")]
    pub connect: Vec<u16>,
    /// Connections are not confined.
    #[arg(long)]
    pub any_port: bool,
    /// The file system is not confined here (bubblewrap built it).
    #[arg(long)]
    pub no_fs: bool,
    /// The program and its arguments.
    #[arg(last = true, required = true)]
    pub command: Vec<std::ffi::OsString>,
}

/// Enters the sandbox and becomes the program; returns only when either fails.
pub fn run(a: SandboxExecArgs) -> anyhow::Result<i32> {
    use std::os::unix::process::CommandExt;
    crate::system::sandbox::enter_landlock(&crate::system::sandbox::Rules {
        read: a.read,
        write: a.write,
        ports: a.connect,
        fs: !a.no_fs,
        network: !a.any_port,
    })?;
    let err = std::process::Command::new(&a.command[0])
        .args(&a.command[1..])
        .exec();
    anyhow::bail!("cannot run {}: {err}", a.command[0].to_string_lossy())
}
