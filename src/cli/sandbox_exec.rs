//! `braids sandbox-exec`: the Landlock wrapper a sandboxed agent runs in (see
//! [`crate::system::sandbox`]). Hidden: the worker builds its argv.

use std::path::PathBuf;

use clap::Args;

#[derive(Debug, Args)]
pub struct SandboxExecArgs {
    #[arg(long, value_name = "PATH")]
    pub write: Vec<PathBuf>,
    /// The program and its arguments.
    #[arg(last = true, required = true)]
    pub command: Vec<std::ffi::OsString>,
}

/// Enters the sandbox and becomes the program; returns only when either fails.
pub fn run(a: SandboxExecArgs) -> anyhow::Result<i32> {
    use std::os::unix::process::CommandExt;
    crate::system::sandbox::enter_landlock(&a.write)?;
    let err = std::process::Command::new(&a.command[0])
        .args(&a.command[1..])
        .exec();
    anyhow::bail!("cannot run {}: {err}", a.command[0].to_string_lossy())
}
