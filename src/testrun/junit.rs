//! JUnit XML, as pytest's `--junitxml` and most runners write it: every `<testcase>` is a test;
//! one holding `<failure>` or `<error>` failed, one holding `<skipped>` was skipped. A failed
//! test is named `classname::name` (pytest's `test_cart.TestCart::test_error`).

use quick_xml::events::{BytesStart, Event};
use quick_xml::Reader;

use super::Counts;

#[derive(PartialEq)]
enum Outcome {
    Pass,
    Fail,
    Skip,
}

pub(super) fn parse(xml: &str) -> Option<Counts> {
    let mut c = Counts {
        format: "junit xml",
        ..Counts::default()
    };
    let mut reader = Reader::from_str(xml);
    let mut seen = false;
    // The open testcase: its name and what it held so far.
    let mut open: Option<(String, Outcome)> = None;
    loop {
        match reader.read_event() {
            Ok(Event::Start(e)) => match e.local_name().as_ref() {
                b"testsuite" | b"testsuites" => seen = true,
                b"testcase" => open = Some((name_of(&e), Outcome::Pass)),
                other => mark(&mut open, other),
            },
            Ok(Event::Empty(e)) => match e.local_name().as_ref() {
                b"testsuite" | b"testsuites" => seen = true,
                b"testcase" => {
                    seen = true;
                    c.pass += 1;
                }
                other => mark(&mut open, other),
            },
            Ok(Event::End(e)) if e.local_name().as_ref() == b"testcase" => {
                seen = true;
                match open.take() {
                    Some((_, Outcome::Pass)) | None => c.pass += 1,
                    Some((_, Outcome::Skip)) => c.skip += 1,
                    Some((name, Outcome::Fail)) => c.failed(name),
                }
            }
            Ok(Event::Eof) => break,
            // A report cut short still counts what it closed; a broken one counts as read.
            Err(_) => break,
            Ok(_) => {}
        }
    }
    seen.then_some(c)
}

fn mark(open: &mut Option<(String, Outcome)>, tag: &[u8]) {
    if let Some((_, outcome)) = open {
        match tag {
            b"failure" | b"error" => *outcome = Outcome::Fail,
            b"skipped" if *outcome == Outcome::Pass => *outcome = Outcome::Skip,
            _ => {}
        }
    }
}

fn name_of(e: &BytesStart<'_>) -> String {
    let attr = |key: &[u8]| {
        e.try_get_attribute(key)
            .ok()
            .flatten()
            .and_then(|a| a.unescape_value().ok())
            .map(|v| v.into_owned())
            .unwrap_or_default()
    };
    match (attr(b"classname"), attr(b"name")) {
        (class, name) if class.is_empty() => name,
        (class, name) => format!("{class}::{name}"),
    }
}
