//! `braids check`: prints every finding as `file:line: severity [section]: message (fix: …)`.
//! Exit 0 when there are no errors (and, with `--strict`, no warnings), 1 when there are, 2
//! when there is nothing to check.

use anyhow::Result;
use serde::Serialize;

use crate::app::check;
use crate::system::diag::Diagnostic;
use crate::system::paths::Paths;

use super::{CheckArgs, Output, EXIT_FINDINGS, EXIT_OK, EXIT_USAGE};

#[derive(Serialize)]
struct CheckReport {
    sandbox: check::SandboxSummary,
    errors: usize,
    warnings: usize,
    findings: Vec<Diagnostic>,
}

impl Output for CheckReport {
    fn text(&self) -> String {
        let sb = &self.sandbox;
        let mut o = format!(
            "sandbox: {} ({})\n  confines: {}\n  processes: {}\n",
            sb.runs, sb.why, sb.confines, sb.processes
        );
        o.extend(self.findings.iter().map(|d| format!("{d}\n")));
        if self.findings.is_empty() {
            o.push_str("ok: no findings\n");
        } else {
            o.push_str(&format!(
                "{} error(s), {} warning(s)\n",
                self.errors, self.warnings
            ));
        }
        o
    }
}

pub fn run(paths: &Paths, args: CheckArgs) -> Result<i32> {
    let findings = match check::check_installation(paths) {
        Ok(f) => f,
        Err(check::Unusable::NoInstallation(e)) => {
            eprintln!("braids: {e}");
            return Ok(EXIT_USAGE);
        }
        // Only what is wrong with config.toml: every other finding would come from defaults.
        Err(check::Unusable::Config(d)) => {
            CheckReport {
                sandbox: check::sandbox_summary(paths),
                errors: 1,
                warnings: 0,
                findings: vec![d],
            }
            .print(args.json);
            return Ok(EXIT_USAGE);
        }
    };
    let (errors, warnings) = check::tally(&findings);
    CheckReport {
        sandbox: check::sandbox_summary(paths),
        errors,
        warnings,
        findings,
    }
    .print(args.json);
    let failing = errors > 0 || (args.strict && warnings > 0);
    Ok(if failing { EXIT_FINDINGS } else { EXIT_OK })
}
