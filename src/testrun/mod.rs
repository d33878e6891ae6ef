//! Test counts measured from a test runner's own machine output, never from what an agent
//! says it saw: libtest (`cargo test`'s JSON events or its summary lines), `go test -json`
//! events, and JUnit XML (pytest's `--junitxml`, and any runner that writes it). The parsers
//! are pure and take any bytes; `run.rs` is the edge that runs a command and reads its report.

mod gotest;
mod junit;
mod libtest;
pub mod run;

use serde::Serialize;

pub use run::{run, Ran};

/// What one test run counted. `failing` names every failed test as the runner names it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    pub pass: u32,
    pub fail: u32,
    pub skip: u32,
    pub failing: Vec<String>,
    /// Which reader understood the output.
    pub format: &'static str,
}

impl Counts {
    /// Whether any test ran or was skipped.
    pub fn is_empty(&self) -> bool {
        self.pass == 0 && self.fail == 0 && self.skip == 0
    }

    fn failed(&mut self, name: String) {
        self.fail += 1;
        if !self.failing.contains(&name) {
            self.failing.push(name);
        }
    }
}

/// The counts in a command's output: a JUnit report when there is one, else the first of
/// `go test -json`, libtest JSON and libtest's plain lines that found any test. `None` when
/// nothing in it reads as test results.
#[must_use]
pub fn parse(output: &str, report: Option<&str>) -> Option<Counts> {
    if let Some(xml) = report {
        return junit::parse(xml);
    }
    gotest::parse(output)
        .or_else(|| libtest::parse_json(output))
        .or_else(|| libtest::parse_plain(output))
        .or_else(|| {
            // A runner that prints JUnit XML on stdout.
            let at = output.find("<testsuite")?;
            junit::parse(&output[at..])
        })
}

#[cfg(test)]
mod tests;
