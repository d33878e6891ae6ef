//! Every exit code braids returns, and the mapping from an error to one, documented once.
//! Scripts (cron wrappers, CI, supervisors) branch on these, so they never change meaning.
//!
//! | code | meaning |
//! |---|---|
//! | 0 | success: for `check`, no findings; for `tick`, the run happened or was skipped (locked, backoff) |
//! | 1 | `check` found contract violations |
//! | 2 | unusable input or a usage error: the message names the file and what to do |
//! | 3 | `worker` stopped without completing its bead (blocked, refused claim, question, killed) |

use std::process::ExitCode;

/// Success.
pub const EXIT_OK: i32 = 0;
/// `braids check` found violations.
pub const EXIT_FINDINGS: i32 = 1;
/// Unusable input or a usage error.
pub const EXIT_USAGE: i32 = 2;
/// The worker stopped without completing the bead.
pub const EXIT_STOPPED: i32 = 3;

/// The process exit code for a command's result: its own code, or [`EXIT_USAGE`] after printing
/// the error as one `braids: …` line (the whole context chain, lowercase fragments joined by
/// `: `).
pub fn from_result(result: anyhow::Result<i32>) -> ExitCode {
    let code = match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("braids: {e:#}");
            EXIT_USAGE
        }
    };
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}
