//! A `braids` command run as a child process, with its wall and CPU time: what the forge
//! benchmarks measure a tick by.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub struct Measured {
    pub wall: Duration,
    pub cpu: Duration,
    pub stdout: String,
}

/// `braids <args>` in `home`, with its wall and CPU time (user + system, from wait4).
#[allow(clippy::zombie_processes)] // reaped by wait4(2) below
pub fn run(bin: &Path, home: &Path, args: &[&str]) -> Measured {
    let start = Instant::now();
    let child = Command::new(bin)
        .args(args)
        .env_clear()
        .env("HOME", home)
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id() as i32;
    let mut out = String::new();
    use std::io::Read;
    child.stdout.unwrap().read_to_string(&mut out).unwrap();
    let mut status = 0;
    let mut usage: nix::libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: wait4 on our own child, writing into a zeroed rusage.
    unsafe { nix::libc::wait4(pid, &mut status, 0, &mut usage) };
    let wall = start.elapsed();
    let tv = |t: nix::libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    Measured {
        wall,
        cpu: tv(usage.ru_utime) + tv(usage.ru_stime),
        stdout: out,
    }
}
