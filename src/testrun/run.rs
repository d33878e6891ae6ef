//! Running a test command in a workspace: argv in a process group of its own with a deadline
//! (`proc::Invocation`), its report file read beneath the workspace, never through a link.

use std::path::Path;
use std::time::Duration;

use crate::format::project::test_command::TestCommand;

use super::Counts;

/// What one run of a test command gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ran {
    /// Whether it exited 0 within its deadline.
    pub ok: bool,
    /// How it ended, for people: `exit 101`, `timed out`, `cannot start …`.
    pub ended: String,
    /// The counts its output (or report) gave; `None` when nothing read as test results.
    pub counts: Option<Counts>,
    /// Its stdout then stderr, for the story's log.
    pub output: String,
}

/// Runs `cmd` in `dir` until `timeout`, and counts what it reported.
pub fn run(dir: &Path, cmd: &TestCommand, timeout: Duration) -> Ran {
    let removable = cmd.report.as_deref().and_then(|r| inside(dir, r));
    if let Some(r) = &removable {
        // A report left by an earlier run must not stand in for this one.
        let _ = std::fs::remove_file(r);
    }
    let out = match crate::system::proc::Invocation::new(cmd.argv.iter().map(String::as_str))
        .cwd(dir)
        .timeout(timeout)
        .run()
    {
        Ok(o) => o,
        Err(e) => {
            return Ran {
                ok: false,
                ended: e.to_string(),
                counts: None,
                output: String::new(),
            }
        }
    };
    let output = format!("{}{}", out.stdout, out.stderr);
    let report = cmd.report.as_ref().and_then(|r| {
        crate::system::beneath::read(dir, Path::new(r))
            .ok()
            .map(|b| String::from_utf8_lossy(&b).into_owned())
    });
    if let Some(r) = &removable {
        // Read once; left in the work tree it would ride into the story's commit.
        let _ = std::fs::remove_file(r);
    }
    let counts = match (&cmd.report, report) {
        // Named but not written: the run did not get as far as reporting.
        (Some(_), None) => None,
        (_, report) => super::parse(&output, report.as_deref()),
    };
    Ran {
        ok: out.success(),
        ended: out.status_text(),
        counts,
        output,
    }
}

/// The report's path inside `dir`, when it is plainly there: relative, with no `..`, and no
/// directory on the way a symbolic link. Only such a file is ever removed: the name comes from
/// the project's files, which an agent may have written.
fn inside(dir: &Path, report: &str) -> Option<std::path::PathBuf> {
    use std::path::Component;
    let rel = Path::new(report);
    if !rel.components().all(|c| matches!(c, Component::Normal(_))) {
        return None;
    }
    let mut at = dir.to_path_buf();
    let parts: Vec<_> = rel.components().collect();
    for c in &parts[..parts.len().saturating_sub(1)] {
        at.push(c);
        if !std::fs::symlink_metadata(&at).is_ok_and(|m| m.is_dir()) {
            return None;
        }
    }
    Some(dir.join(rel))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_is_removed_only_plainly_inside_the_workspace() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path();
        std::fs::create_dir_all(dir.join("out")).unwrap();
        std::os::unix::fs::symlink("/etc", dir.join("link")).unwrap();
        assert_eq!(inside(dir, "out/r.xml"), Some(dir.join("out/r.xml")));
        assert_eq!(inside(dir, "r.xml"), Some(dir.join("r.xml")));
        for bad in [
            "/etc/passwd",
            "../r.xml",
            "out/../../r.xml",
            "link/passwd",
            "missing/r.xml",
        ] {
            assert_eq!(inside(dir, bad), None, "{bad}");
        }
    }
}
