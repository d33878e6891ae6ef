use super::*;

const LIBTEST_PLAIN_FAILING: &str = include_str!("samples/libtest-plain-failing.txt");
const LIBTEST_QUIET_FAILING: &str = include_str!("samples/libtest-quiet-failing.txt");
const LIBTEST_PLAIN_PASSING: &str = include_str!("samples/libtest-plain-passing.txt");
const LIBTEST_JSON_FAILING: &str = include_str!("samples/libtest-json-failing.jsonl");
const GO_FAILING: &str = include_str!("samples/go-test-json-failing.jsonl");
const GO_PASSING: &str = include_str!("samples/go-test-json-passing.jsonl");
const PYTEST_JUNIT: &str = include_str!("samples/pytest-junit.xml");

fn counts(pass: u32, fail: u32, skip: u32, failing: &[&str], format: &'static str) -> Counts {
    Counts {
        pass,
        fail,
        skip,
        failing: failing.iter().map(|s| s.to_string()).collect(),
        format,
    }
}

#[test]
fn every_runner_is_counted_from_its_own_output() {
    let table: &[(&str, &str, Option<&str>, Counts)] = &[
        (
            "cargo test, a failing crate",
            LIBTEST_PLAIN_FAILING,
            None,
            counts(2, 1, 1, &["tests::adds_wrong"], "libtest"),
        ),
        (
            "cargo test --quiet: the names from the failures list",
            LIBTEST_QUIET_FAILING,
            None,
            counts(2, 1, 1, &["tests::adds_wrong"], "libtest"),
        ),
        (
            "cargo test, unit tests and doc tests summed",
            LIBTEST_PLAIN_PASSING,
            None,
            counts(2, 0, 0, &[], "libtest"),
        ),
        (
            "cargo test --format json",
            LIBTEST_JSON_FAILING,
            None,
            counts(2, 1, 1, &["tests::adds_wrong"], "libtest json"),
        ),
        (
            "go test -json: subtests count, a build failure is a failure",
            GO_FAILING,
            None,
            counts(
                2,
                2,
                1,
                &["TestApplyCoupon", "example.com/shop/pay"],
                "go test -json",
            ),
        ),
        (
            "go test -json, passing",
            GO_PASSING,
            None,
            counts(2, 0, 0, &[], "go test -json"),
        ),
        (
            "pytest --junitxml",
            "whatever pytest printed",
            Some(PYTEST_JUNIT),
            counts(
                2,
                2,
                1,
                &["test_cart::test_coupon", "test_cart.TestCart::test_error"],
                "junit xml",
            ),
        ),
    ];
    for (what, output, report, want) in table {
        assert_eq!(parse(output, *report).as_ref(), Some(want), "{what}");
    }
}

#[test]
fn generic_junit_errors_and_skips_and_xml_on_stdout() {
    let xml = r#"<?xml version="1.0"?>
<testsuite name="js" tests="4">
  <testcase name="adds" classname="math"/>
  <testcase name="divides"><error message="TypeError"/></testcase>
  <testcase name="later"><skipped/></testcase>
  <testcase name="ok &amp; fine" classname="">
    <system-out>fine</system-out>
  </testcase>
</testsuite>"#;
    let want = counts(2, 1, 1, &["divides"], "junit xml");
    assert_eq!(parse("", Some(xml)), Some(want.clone()));
    assert_eq!(parse(&format!("running...\n{xml}\n"), None), Some(want));
}

#[test]
fn output_without_test_results_is_none_and_never_panics() {
    for text in [
        "",
        "error[E0425]: cannot find value `x` in this scope\n",
        "{\"not\": \"an event\"}\n",
        "test result: garbage",
        "<testsuite",
        "\u{0}\u{ffff}{{{{",
    ] {
        assert_eq!(parse(text, None), None, "{text:?}");
    }
    // A report named but broken counts nothing rather than inventing a pass.
    assert_eq!(parse("", Some("not xml at all")), None);
    // An empty suite is a run with no tests, not a missing one.
    assert_eq!(
        parse(
            "test result: ok. 0 passed; 0 failed; 0 ignored; 0 measured",
            None
        ),
        Some(counts(0, 0, 0, &[], "libtest"))
    );
}
