//! The events of one claw turn, as seed 003 shows them (`.claw/events/007-task-complete.event`:
//! `task`, `duration_seconds`, `files_changed`, `tests_passed`), pure. The files are what the
//! task's commit took, not what the coder listed; the test counts are read from the validation
//! commands' own output where they are test runners ([`crate::testrun`]); the coder's
//! CLAW_STATUS report adds its summary, and what it claimed where that differs.

use std::path::PathBuf;

use crate::events::{Draft, Kind};
use crate::testrun::Counts;

use super::status_block::ClawStatus;

/// The counts of several commands' runs, summed; `None` when none of them was a test runner.
#[must_use]
pub fn sum(runs: &[Option<Counts>]) -> Option<Counts> {
    let mut found = runs.iter().flatten().peekable();
    found.peek()?;
    let mut total = Counts {
        format: "summed",
        ..Counts::default()
    };
    for c in found {
        total.pass += c.pass;
        total.fail += c.fail;
        total.skip += c.skip;
        total.failing.extend(c.failing.iter().cloned());
    }
    Some(total)
}

fn tests(counts: Option<&Counts>) -> Option<serde_json::Value> {
    counts.map(|c| serde_json::json!({ "pass": c.pass, "fail": c.fail, "skip": c.skip }))
}

/// The checks passed.
pub fn validation_pass(task: &str, attempt: u32, counts: Option<&Counts>) -> Draft {
    Draft::new(Kind::ValidationPass)
        .with("task", task)
        .with("attempt", attempt)
        .with("tests_passed", true)
        .with("tests", tests(counts))
}

/// A check failed: its output's tail, and the failing tests by name where they were counted.
pub fn validation_failed(task: &str, attempt: u32, output: &str, counts: Option<&Counts>) -> Draft {
    Draft::new(Kind::ValidationFailed)
        .with("task", task)
        .with("attempt", attempt)
        .with("tests_passed", false)
        .with("tests", tests(counts))
        .with(
            "failing_tests",
            counts.map(|c| &c.failing).filter(|f| !f.is_empty()),
        )
        .with("message", crate::system::templates::clip(output, 400))
}

/// The task landed: `committed` is what its commit took (the WORKPLAN's check-off left out,
/// being braids'), `said` the coder's report if it wrote one.
pub fn task_complete(
    task: &str,
    duration_seconds: u64,
    commit: Option<&str>,
    committed: &[PathBuf],
    counts: Option<&Counts>,
    said: Option<&ClawStatus>,
) -> Draft {
    let files: Vec<String> = committed
        .iter()
        .filter(|p| p.as_path() != std::path::Path::new(super::WORKPLAN))
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let mut sorted = files.clone();
    sorted.sort();
    let reported = said.map(|s| s.files_changed.clone()).filter(|r| {
        let mut r = r.clone();
        r.sort();
        !r.is_empty() && r != sorted
    });
    Draft::new(Kind::TaskComplete)
        .with("task", task)
        .with("duration_seconds", duration_seconds)
        .with("files_changed", files)
        .with("tests_passed", true)
        .with("tests", tests(counts))
        .with("commit", commit)
        .with("summary", said.and_then(|s| s.summary.as_deref()))
        .with("reported_files_changed", reported)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::claw::status_block::Said;

    fn counts(pass: u32, fail: u32, failing: &[&str]) -> Counts {
        Counts {
            pass,
            fail,
            skip: 0,
            failing: failing.iter().map(|s| s.to_string()).collect(),
            format: "libtest",
        }
    }

    #[test]
    fn task_complete_carries_the_seeds_fields() {
        let committed = [
            PathBuf::from("src/slices/windows/hooks/useSnap.ts"),
            PathBuf::from(".claw/WORKPLAN.md"),
        ];
        let said = ClawStatus {
            status: Some(Said::Done),
            summary: Some("Added snapping".into()),
            files_changed: vec!["src/slices/windows/hooks/useSnap.ts".into()],
            tests_passed: Some(true),
            ..ClawStatus::default()
        };
        let c = counts(12, 0, &[]);
        let d = task_complete("Snap", 342, Some("abc"), &committed, Some(&c), Some(&said));
        let f = &d.fields;
        assert_eq!(d.kind, Kind::TaskComplete);
        assert_eq!(f["task"], "Snap");
        assert_eq!(f["duration_seconds"], 342);
        assert_eq!(
            f["files_changed"],
            serde_json::json!(["src/slices/windows/hooks/useSnap.ts"])
        );
        assert_eq!(f["tests_passed"], true);
        assert_eq!(
            f["tests"],
            serde_json::json!({"pass": 12, "fail": 0, "skip": 0})
        );
        assert_eq!(f["summary"], "Added snapping");
        assert!(!f.contains_key("reported_files_changed"), "they agree");
        // a coder that lists other files than it changed: the commit's list stands
        let other = ClawStatus {
            files_changed: vec!["src/elsewhere.ts".into()],
            ..said
        };
        let d = task_complete("Snap", 1, None, &committed, None, Some(&other));
        assert_eq!(
            d.fields["reported_files_changed"],
            serde_json::json!(["src/elsewhere.ts"])
        );
        assert!(!d.fields.contains_key("tests") && !d.fields.contains_key("commit"));
    }

    #[test]
    fn validation_events_and_summed_counts() {
        assert_eq!(sum(&[None, None]), None);
        let total = sum(&[Some(counts(3, 0, &[])), None, Some(counts(2, 1, &["t::x"]))]).unwrap();
        assert_eq!(
            (total.pass, total.fail, total.failing.clone()),
            (5, 1, vec!["t::x".to_string()])
        );
        let d = validation_pass("Snap", 1, Some(&counts(5, 0, &[])));
        assert_eq!(d.kind, Kind::ValidationPass);
        assert_eq!(d.fields["tests_passed"], true);
        assert_eq!(d.fields["tests"]["pass"], 5);
        let d = validation_failed("Snap", 2, "`cargo test` exit 101", Some(&total));
        assert_eq!(d.fields["tests_passed"], false);
        assert_eq!(d.fields["failing_tests"], serde_json::json!(["t::x"]));
        assert_eq!(d.fields["attempt"], 2);
        let d = validation_failed("Snap", 1, "lint", None);
        assert!(!d.fields.contains_key("failing_tests") && !d.fields.contains_key("tests"));
    }
}
