//! The one support module of the integration tests: a sandboxed installation and a fluent
//! builder for it, in the style of `just`'s `Test`.
//!
//! ```text
//! let sb = Install::new().worker(SLEEPER).config("[sessions]\nclaim_grace_secs = 5\n").build();
//! let app = sb.new_project("app").br().max_workers(2).beads(5).create();
//! let report: TickReport = sb.tick().force().run();
//! assert_eq!(report.spawned_beads(), app.beads[..2]);
//! ```
//!
//! - [`Sandbox`]: a throwaway HOME with the real `braids` binary, real git, the real `br` when a
//!   test asks for one, and a `bin/` first on PATH for stubs (`sandbox.rs`), and what tests read
//!   back from it (`readback.rs`). Dropping it kills the workers its session records name.
//! - [`Install`]: builds a sandbox with `braids init` done, a worker (an `sh` script standing in
//!   for the agent) and config.toml settings. Timeouts under 5 s are refused there: ordinary
//!   load must not turn into red CI.
//! - [`project::NewProject`] (`sb.new_project(slug)`): a project through `braids new` or
//!   written file by file, on br, a stub br or the native tracker, with beads and an active
//!   iteration over them.
//! - [`Tick`] (`sb.tick()`): one `braids tick --json` under a time limit, read back as a typed
//!   [`braids::tick::TickReport`] ([`ReportExt`] adds the views tests compare).
//! - [`procs`]: what `/proc` says about processes; [`files`]: trees of files; [`checks`]: the
//!   integrity checks the fault and hostile-input suites share.

pub mod agent_cli;
pub mod agent_model;
pub mod bare_git;
pub mod checks;
pub mod claw;
pub mod files;
pub mod forge_github;
pub mod forge_gitlab;
mod install;
pub mod procs;
pub mod project;
mod readback;
mod sandbox;
pub mod serve;
pub mod standin_model;
mod tick;

pub use install::{br_init, br_path, Install, QUITTER, SLEEPER};
pub use sandbox::Sandbox;
pub use tick::{label, ReportExt, Run, Tick};

use std::time::{Duration, Instant};

/// Polls `f` every 20 ms until it answers, failing the test after `limit`.
#[track_caller]
pub fn wait_for<T>(what: &str, limit: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "gave up after {limit:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Polls `cond` every 20 ms until it holds (true) or `limit` passes (false).
pub fn poll_until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The libtest name of test `name` in the module `module_path` (pass `module_path!()`): the
/// module path without the crate's name, as `--exact` wants it when a test re-runs its own
/// binary for a helper process.
pub fn test_name(module_path: &str, name: &str) -> String {
    match module_path.split_once("::") {
        Some((_crate, module)) => format!("{module}::{name}"),
        None => name.to_string(),
    }
}

/// The bubblewrap program the sandbox tests use: `bwrap` on PATH, else the copy CI unpacks off
/// PATH (`/opt/bwrap`, where Codex does not pick it up for its own sandbox); `None` when there
/// is none (a failure when `BRAIDS_REQUIRE_AGENTS` is set).
pub fn bwrap() -> Option<String> {
    let found = ["bwrap", "/opt/bwrap/usr/bin/bwrap"]
        .into_iter()
        .find(|p| {
            std::process::Command::new(p)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .map(String::from);
    assert!(
        found.is_some() || std::env::var_os("BRAIDS_REQUIRE_AGENTS").is_none(),
        "bubblewrap is not installed (.ci/run unpacks the Debian package into /opt/bwrap)"
    );
    found
}
