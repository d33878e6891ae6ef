//! The executor's status report, in the Agentic Coding Protocol's formats: the flat
//! `.ai/executor-result` file first, then the YAML front matter of `.ai/HANDOFF.md`.
//!
//! Agents write `passing` for `pass`, prose in `reason`, or nothing at all. Values outside the
//! fixed lists are never trusted: an unknown status reads as `failing`, an unknown reason as
//! none, and the original text is kept for the log.

use std::path::Path;

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ExecStatus {
    Pass,
    Failing,
    NeedsHuman,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    ConstitutionViolation,
    NeedsClarification,
    NfrMissing,
    ScopeWarning,
    TestTimeout,
}

impl Reason {
    fn parse(s: &str) -> Option<Reason> {
        Some(match s {
            "constitution_violation" => Reason::ConstitutionViolation,
            "needs_clarification" => Reason::NeedsClarification,
            "nfr_missing" => Reason::NfrMissing,
            "scope_warning" => Reason::ScopeWarning,
            "test_timeout" => Reason::TestTimeout,
            _ => return None,
        })
    }
}

/// What the executor said about its run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StatusReport {
    pub status: ExecStatus,
    pub reason: Option<Reason>,
    pub summary: Option<String>,
    pub files_changed: Vec<String>,
    /// Which file it came from.
    pub source: &'static str,
    /// Values that were not valid, as written, for the log.
    pub invalid: Vec<String>,
}

impl StatusReport {
    /// Whether a person must answer before work can go on.
    pub fn needs_human(&self) -> bool {
        self.status == ExecStatus::NeedsHuman || self.reason == Some(Reason::NeedsClarification)
    }
}

fn clean(v: &str) -> String {
    v.trim()
        .trim_matches(|c| c == '"' || c == '\'' || c == '`')
        .trim()
        .to_string()
}

/// Builds a report from `key: value` pairs; shared by both formats.
fn from_pairs<'a>(
    pairs: impl Iterator<Item = (&'a str, &'a str)>,
    files: Vec<String>,
    source: &'static str,
) -> Option<StatusReport> {
    let mut status = None;
    let mut reason = None;
    let mut summary = None;
    let mut invalid = Vec::new();
    for (k, v) in pairs {
        let v = clean(v);
        match k.trim().to_ascii_lowercase().as_str() {
            "status" => {
                status = Some(match v.as_str() {
                    "pass" => ExecStatus::Pass,
                    "failing" => ExecStatus::Failing,
                    "needs_human" => ExecStatus::NeedsHuman,
                    other => {
                        invalid.push(format!("status `{other}`"));
                        ExecStatus::Failing
                    }
                })
            }
            "reason" => {
                if !(v.is_empty() || v == "null" || v == "~") {
                    reason = Reason::parse(&v);
                    if reason.is_none() {
                        invalid.push(format!(
                            "reason `{}`",
                            v.chars().take(80).collect::<String>()
                        ));
                    }
                }
            }
            "summary" => summary = Some(v).filter(|s| !s.is_empty()),
            _ => {}
        }
    }
    let status = status?;
    Some(StatusReport {
        status,
        reason,
        summary,
        files_changed: files,
        source,
        invalid,
    })
}

/// Parses `.ai/executor-result`: flat `key: value` lines.
pub fn parse_executor_result(text: &str) -> Option<StatusReport> {
    let pairs = text
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .filter_map(|l| l.split_once(':'));
    from_pairs(pairs, Vec::new(), ".ai/executor-result")
}

/// Parses the YAML front matter of `.ai/HANDOFF.md` (the `status`, `reason`, `summary` keys
/// and the `files_changed` list); without front matter there is no report.
pub fn parse_handoff(text: &str) -> Option<StatusReport> {
    let text = text.trim_start_matches('\u{feff}');
    let mut lines = text.lines();
    if lines.next()?.trim_end() != "---" {
        return None;
    }
    let mut body = Vec::new();
    for l in lines.by_ref() {
        if l.trim_end() == "---" {
            break;
        }
        body.push(l);
    }
    let mut files = Vec::new();
    let mut in_files = false;
    let mut pairs = Vec::new();
    for l in &body {
        if in_files {
            if let Some(item) = l.trim_start().strip_prefix("- ") {
                files.push(clean(item));
                continue;
            }
            in_files = false;
        }
        if let Some((k, v)) = l.split_once(':') {
            if k.trim() == "files_changed" && v.trim().is_empty() {
                in_files = true;
            } else if !l.starts_with(' ') {
                pairs.push((k, v));
            }
        }
    }
    from_pairs(pairs.into_iter(), files, ".ai/HANDOFF.md")
}

/// Where one bead's agent writes its report. Workers of one project share a work tree, so each
/// bead has its own file; a shared `.ai/executor-result` would let one worker read (and remove)
/// another's report.
pub fn result_file(project: &Path, bead: &crate::model::BeadId) -> std::path::PathBuf {
    project
        .join(".ai/beads")
        .join(bead.as_str())
        .join("executor-result")
}

/// Reads a bead's report: its own executor-result, then its own HANDOFF.md. The protocol's
/// shared `.ai/executor-result` and `.ai/HANDOFF.md` are read too when `shared` says this
/// worker is alone in the project (MaxWorkers 1), so agents that follow the protocol to the
/// letter still work.
pub fn read(project: &Path, bead: &crate::model::BeadId, shared: bool) -> Option<StatusReport> {
    let read = |p: &Path| {
        std::fs::read(p)
            .ok()
            .map(|b| String::from_utf8_lossy(&b).into_owned())
    };
    let own = result_file(project, bead);
    let mut candidates = vec![
        (own.clone(), false),
        (own.with_file_name("HANDOFF.md"), true),
    ];
    if shared {
        candidates.push((project.join(".ai/executor-result"), false));
        candidates.push((project.join(".ai/HANDOFF.md"), true));
    }
    candidates.into_iter().find_map(|(p, handoff)| {
        let text = read(&p)?;
        if handoff {
            parse_handoff(&text)
        } else {
            parse_executor_result(&text)
        }
    })
}

/// Removes the status files a run may leave, before and after each attempt, so a stale report
/// is never mistaken for a new one. HANDOFF.md is the agent's notes and stays.
pub fn clear(project: &Path, bead: &crate::model::BeadId, shared: bool) {
    let _ = std::fs::remove_file(result_file(project, bead));
    if shared {
        let _ = std::fs::remove_file(project.join(".ai/executor-result"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn executor_result_valid_and_invalid_values() {
        let r =
            parse_executor_result("status: pass\nreason: null\nsummary: Fixed the timezone bug\n")
                .unwrap();
        assert_eq!(
            (r.status, r.reason, r.summary.as_deref()),
            (ExecStatus::Pass, None, Some("Fixed the timezone bug"))
        );
        // the common mistakes of the protocol: never trusted
        for wrong in ["passing", "passed", "failed", "fail", "PASS", "ok"] {
            let r = parse_executor_result(&format!("status: {wrong}\n")).unwrap();
            assert_eq!(r.status, ExecStatus::Failing, "{wrong}");
            assert_eq!(r.invalid.len(), 1);
        }
        let r =
            parse_executor_result("status: failing\nreason: the tests were flaky so I stopped\n")
                .unwrap();
        assert_eq!(r.reason, None);
        assert!(r.invalid[0].starts_with("reason"));
        let r =
            parse_executor_result("status: needs_human\nreason: needs_clarification\n").unwrap();
        assert!(r.needs_human());
        assert!(parse_executor_result("garbage without status").is_none());
        assert!(parse_executor_result("").is_none());
    }

    #[test]
    fn handoff_front_matter() {
        let text = "---\nstory: US-005\nstep: impl\nstatus: failing\nreason: needs_clarification\nfiles_changed:\n  - internal/cart/service.go\n  - src/a.ts\ntests_pass: 42\n---\n\n# HANDOFF\nstatus: pass\n";
        let r = parse_handoff(text).unwrap();
        assert_eq!(r.status, ExecStatus::Failing);
        assert_eq!(r.reason, Some(Reason::NeedsClarification));
        assert_eq!(r.files_changed, ["internal/cart/service.go", "src/a.ts"]);
        assert!(
            parse_handoff("# HANDOFF\nstatus: pass\n").is_none(),
            "no front matter, no report"
        );
    }
}
