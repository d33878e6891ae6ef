//! The executor's status report, in the Agentic Coding Protocol's formats: the flat
//! `executor-result` file first, then the YAML front matter of `.ai/HANDOFF.md`.
//!
//! The protocol's `.ai/executor-result` is one file per work tree, but workers of a project with
//! MaxWorkers above 1 share the work tree: they would read, and delete, each other's reports.
//! So each bead has its own report file, `.ai/executor-results/<bead-id>`, which the prompt
//! names; the shared file is read only by a worker alone in its project, and HANDOFF.md only
//! when the attempt changed it and it does not name another story.
//!
//! Agents write `passing` for `pass`, prose in `reason`, or nothing at all. Values outside the
//! fixed lists are never trusted: an unknown status reads as `failing`, an unknown reason as
//! none, and the original text is kept for the log.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::model::BeadId;

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
    /// The work would break a Guardrail of PROJECT.md or the iteration (3.10: never violate;
    /// block and escalate).
    GuardrailConflict,
    NeedsClarification,
    NfrMissing,
    ScopeWarning,
    TestTimeout,
}

impl Reason {
    fn parse(s: &str) -> Option<Reason> {
        Some(match s {
            "constitution_violation" => Reason::ConstitutionViolation,
            "guardrail_conflict" => Reason::GuardrailConflict,
            "needs_clarification" => Reason::NeedsClarification,
            "nfr_missing" => Reason::NfrMissing,
            "scope_warning" => Reason::ScopeWarning,
            "test_timeout" => Reason::TestTimeout,
            _ => return None,
        })
    }
}

/// What the executor said about its run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StatusReport {
    pub status: ExecStatus,
    pub reason: Option<Reason>,
    pub summary: Option<String>,
    /// The story (bead) it is about, when it says.
    pub story: Option<String>,
    pub files_changed: Vec<String>,
    /// Which file it came from.
    pub source: &'static str,
    /// Values that were not valid, as written, for the log.
    pub invalid: Vec<String>,
    /// The tokens and dollars the attempt used, when the agent said.
    pub usage: crate::cost::Usage,
}

impl ExecStatus {
    /// As agents write it.
    pub fn as_str(self) -> &'static str {
        match self {
            ExecStatus::Pass => "pass",
            ExecStatus::Failing => "failing",
            ExecStatus::NeedsHuman => "needs_human",
        }
    }
}

impl StatusReport {
    /// The report of an agent that exited 0 and wrote a fresh deliverable with a Summary but
    /// no status report: real agents forget it, and the work is there.
    pub fn assumed(summary: Option<String>) -> StatusReport {
        StatusReport {
            status: ExecStatus::Pass,
            reason: None,
            summary,
            story: None,
            files_changed: Vec::new(),
            source: "none (assumed from exit 0 and a fresh deliverable)",
            invalid: Vec::new(),
            usage: crate::cost::Usage::default(),
        }
    }

    /// A report the run wrote that cannot be used (`why` says how): failing.
    pub fn unusable(why: &'static str) -> StatusReport {
        StatusReport {
            status: ExecStatus::Failing,
            reason: None,
            summary: None,
            story: None,
            files_changed: Vec::new(),
            source: why,
            invalid: vec!["the report itself".into()],
            usage: crate::cost::Usage::default(),
        }
    }

    /// Whether the agent stopped because the work would break a guardrail: never retried.
    pub fn guardrail_conflict(&self) -> bool {
        self.reason == Some(Reason::GuardrailConflict)
    }

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
    let mut story = None;
    let mut invalid = Vec::new();
    let mut usage = crate::cost::Usage::default();
    for (k, v) in pairs {
        let v = clean(v);
        let key = k.trim().to_ascii_lowercase();
        if let Some(read) = usage.read(&key, &v) {
            invalid.extend(read.err());
            continue;
        }
        match key.as_str() {
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
            // `null` (and its YAML spellings) means no reason.
            "reason" if !(v.is_empty() || v == "null" || v == "~") => {
                reason = Reason::parse(&v);
                if reason.is_none() {
                    invalid.push(format!(
                        "reason `{}`",
                        v.chars().take(80).collect::<String>()
                    ));
                }
            }
            "summary" => summary = Some(v).filter(|s| !s.is_empty()),
            "story" | "bead" => story = Some(v).filter(|s| !s.is_empty() && s != "null"),
            _ => {}
        }
    }
    let status = status?;
    Some(StatusReport {
        status,
        reason,
        summary,
        story,
        files_changed: files,
        source,
        invalid,
        usage,
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

/// The protocol's report file, shared by everything working in the project.
pub const SHARED: &str = ".ai/executor-result";
/// Where each bead's own report file is.
pub const OWN_DIR: &str = ".ai/executor-results";
pub const HANDOFF: &str = ".ai/HANDOFF.md";

/// The bead's own report file, relative to the project.
pub fn own_file(bead: &BeadId) -> PathBuf {
    Path::new(OWN_DIR).join(bead.as_str())
}

/// Where one bead's attempts report, and what HANDOFF.md said before the current attempt.
pub struct Inbox {
    project: PathBuf,
    bead: BeadId,
    /// Whether this worker is the only one in the project (MaxWorkers 1), so that the shared
    /// `.ai/executor-result` can only be its agent's.
    alone: bool,
    handoff_before: Option<Stamp>,
    /// The shared `.ai/executor-result` before the attempt, when it is not this worker's to
    /// read: a change to it is a report nobody can attribute.
    shared_before: Option<Stamp>,
}

/// A file's bytes and modification time: a rewrite with the same text is still a new report.
type Stamp = (Vec<u8>, Option<std::time::SystemTime>);

/// `p` as it is now, read beneath the workspace `root` (never through a planted link).
fn stamp(root: &Path, p: &Path) -> Option<Stamp> {
    let bytes = crate::system::beneath::read(root, p).ok()?;
    let modified = std::fs::metadata(p).and_then(|m| m.modified()).ok();
    Some((bytes, modified))
}

impl Inbox {
    pub fn new(project: &Path, bead: &BeadId, alone: bool) -> Inbox {
        Inbox {
            project: project.to_path_buf(),
            bead: bead.clone(),
            alone,
            handoff_before: None,
            shared_before: None,
        }
    }

    /// The files a report is taken from, in order of trust, that this worker may remove.
    fn own_files(&self) -> Vec<PathBuf> {
        let mut v = vec![self.project.join(own_file(&self.bead))];
        if self.alone {
            v.push(self.project.join(SHARED));
        }
        v
    }

    /// Before an attempt: no report yet, the report directory ready, HANDOFF.md noted.
    pub fn clear(&mut self) {
        for f in self.own_files() {
            let _ = std::fs::remove_file(f);
        }
        if let Some(dir) = self.project.join(own_file(&self.bead)).parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        self.handoff_before = stamp(&self.project, &self.project.join(HANDOFF));
        self.shared_before = stamp(&self.project, &self.project.join(SHARED));
    }

    /// After an attempt: the report it left, if any; report files are removed (a status report
    /// is for braids, not for the project's history).
    /// `None` only when the run left no report at all; a report it wrote that cannot be read,
    /// a HANDOFF.md it wrote about another story, or a shared report changed while other
    /// workers share the work tree, is a failing one (3.10).
    pub fn take(&self) -> Option<StatusReport> {
        let read = |p: &Path| crate::system::beneath::read(&self.project, p).ok();
        let mut report = None;
        let mut unusable = (!self.alone && {
            let now = stamp(&self.project, &self.project.join(SHARED));
            now.is_some() && now != self.shared_before
        })
        .then_some("a shared report that other workers may have written");
        for f in self.own_files() {
            let text = read(&f);
            let _ = std::fs::remove_file(&f);
            if let (None, Some(b)) = (&report, text) {
                report = parse_executor_result(&String::from_utf8_lossy(&b));
                if report.is_none() {
                    unusable = Some("an unreadable report");
                }
            }
        }
        report
            .or_else(|| {
                let now = stamp(&self.project, &self.project.join(HANDOFF))?;
                if self.handoff_before.as_ref() == Some(&now) {
                    return None; // left by an earlier session: says nothing about this one
                }
                let found = parse_handoff(&String::from_utf8_lossy(&now.0))
                    .filter(|r| r.story.as_deref().is_none_or(|s| s == self.bead.as_str()));
                if found.is_none() {
                    unusable = Some("a HANDOFF.md that is unreadable or about another story");
                }
                found
            })
            .or_else(|| unusable.map(StatusReport::unusable))
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
    fn inbox_takes_only_this_attempts_report() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let bead = BeadId::new("p-1").unwrap();
        let write = |rel: &str, text: &str| {
            let p = root.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        write(HANDOFF, "---\nstatus: pass\n---\n");
        let mut shared = Inbox::new(root, &bead, false);
        shared.clear();
        assert!(root.join(OWN_DIR).is_dir(), "ready for the agent");
        write(SHARED, "status: pass\n");
        let taken = shared.take().expect("a report nobody can attribute");
        assert_eq!(
            (taken.status, taken.source),
            (
                ExecStatus::Failing,
                "a shared report that other workers may have written"
            ),
            "not alone: the shared file changed is not this agent's pass"
        );
        shared.clear();
        assert_eq!(shared.take(), None, "nothing changed: no report at all");
        assert!(
            root.join(SHARED).exists(),
            "another worker's report is left alone"
        );

        let mut alone = Inbox::new(root, &bead, true);
        alone.clear();
        assert!(
            !root.join(SHARED).exists(),
            "alone: a stale shared report is cleared"
        );
        write(SHARED, "status: failing\n");
        write("x/../.ai/executor-results/p-1", "status: needs_human\n");
        assert_eq!(
            alone.take().unwrap().status,
            ExecStatus::NeedsHuman,
            "own file first"
        );
        assert!(!root.join(own_file(&bead)).exists() && !root.join(SHARED).exists());

        alone.clear();
        write(HANDOFF, "---\nstory: p-2\nstatus: pass\n---\n");
        assert_eq!(
            alone.take().map(|r| r.status),
            Some(ExecStatus::Failing),
            "a handoff written this run about another story is not a pass"
        );
        alone.clear();
        write(HANDOFF, "---\nstory: p-1\nstatus: pass\n---\n");
        assert_eq!(alone.take().unwrap().source, ".ai/HANDOFF.md");
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

    #[test]
    fn usage_is_read_from_both_formats_and_bad_numbers_are_invalid() {
        let h = parse_handoff(
            "---\nstatus: pass\ntokens_in: 1200\ntokens_out: 300\ncost_usd: 0.05\n---\nbody\n",
        )
        .unwrap();
        assert_eq!(h.usage.tokens_in, Some(1200));
        assert_eq!(h.usage.cost_usd, Some(0.05));
        let r = parse_executor_result("status: pass\ncost_usd: free\ntokens_out: 7\n").unwrap();
        assert_eq!(r.usage.cost_usd, None);
        assert_eq!(r.usage.tokens_out, Some(7));
        assert_eq!(r.invalid, ["cost_usd `free`"]);
        assert_eq!(
            r.status,
            ExecStatus::Pass,
            "a bad cost never fails the attempt"
        );
    }

    #[test]
    fn the_reports_never_land_from_a_worktree() {
        let never = crate::workspace::agent_excludes();
        for p in [SHARED, OWN_DIR, HANDOFF] {
            assert!(never.iter().any(|x| x == std::path::Path::new(p)), "{p}");
        }
    }
}
