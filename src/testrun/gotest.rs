//! `go test -json` (cmd/test2json): one event a line with `Action` and, for a test's own
//! events, `Test`. Subtests (`TestCart/empty`) are tests of their own, as go reports them. A
//! package that fails with no failing test (a build error, a panic in `TestMain`) counts as
//! one failure named by the package, so it is never a silent pass.

use serde_json::Value;

use super::Counts;

pub(super) fn parse(output: &str) -> Option<Counts> {
    let mut c = Counts {
        format: "go test -json",
        ..Counts::default()
    };
    let mut seen = false;
    let mut failed_packages = Vec::new();
    let mut packages_with_failing_tests = Vec::new();
    for line in output.lines().map(str::trim).filter(|l| l.starts_with('{')) {
        let Ok(Value::Object(e)) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let Some(action) = e.get("Action").and_then(Value::as_str) else {
            continue;
        };
        seen = true;
        let package = e.get("Package").and_then(Value::as_str).unwrap_or("");
        match (e.get("Test").and_then(Value::as_str), action) {
            (Some(_), "pass") => c.pass += 1,
            (Some(_), "skip") => c.skip += 1,
            (Some(test), "fail") => {
                c.failed(test.to_string());
                packages_with_failing_tests.push(package.to_string());
            }
            (None, "fail") => failed_packages.push(package.to_string()),
            _ => {}
        }
    }
    for p in failed_packages {
        if !packages_with_failing_tests.contains(&p) {
            c.failed(if p.is_empty() { "(package)".into() } else { p });
        }
    }
    seen.then_some(c)
}
