//! libtest, the harness behind `cargo test`: its JSON events (`-Z unstable-options --format
//! json`, one object a line) and its plain output (`test foo ... FAILED` lines and the
//! `test result:` summary of each test binary).

use serde_json::Value;

use super::Counts;

/// One `{"type":"test",…}` event per finished test; `suite` events only frame them.
pub(super) fn parse_json(output: &str) -> Option<Counts> {
    let mut c = Counts {
        format: "libtest json",
        ..Counts::default()
    };
    let mut seen = false;
    for line in output.lines().map(str::trim).filter(|l| l.starts_with('{')) {
        let Ok(Value::Object(e)) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let kind = e.get("type").and_then(Value::as_str);
        let event = e.get("event").and_then(Value::as_str);
        match (kind, event) {
            (Some("suite"), _) => seen = true,
            (Some("test"), Some(ev)) => {
                seen = true;
                let name = e.get("name").and_then(Value::as_str).unwrap_or("?");
                match ev {
                    "ok" => c.pass += 1,
                    "failed" | "timeout" => c.failed(name.to_string()),
                    "ignored" => c.skip += 1,
                    _ => {}
                }
            }
            _ => {}
        }
    }
    seen.then_some(c)
}

/// The summary lines (`test result: FAILED. 2 passed; 1 failed; 1 ignored; …`), summed over
/// every test binary, and the names from `test <name> ... FAILED`.
pub(super) fn parse_plain(output: &str) -> Option<Counts> {
    let mut c = Counts {
        format: "libtest",
        ..Counts::default()
    };
    let mut seen = false;
    let mut names = Vec::new();
    // `--quiet` prints no `... FAILED` lines: the names are the indented list that follows
    // the last `failures:` header (the first one is followed by each test's output).
    let mut listing = false;
    let mut after_header = false;
    for line in output.lines().map(str::trim_end) {
        if line == "failures:" {
            after_header = true;
            continue;
        }
        if after_header || listing {
            let name = line
                .strip_prefix("    ")
                .filter(|n| !n.is_empty() && !n.contains(char::is_whitespace));
            after_header = false;
            listing = name.is_some();
            if let Some(name) = name {
                if !names.iter().any(|n: &String| n == name) {
                    names.push(name.to_string());
                }
                continue;
            }
        }
        if let Some(rest) = line.strip_prefix("test result: ") {
            let Some((_, counts)) = rest.split_once(". ") else {
                continue;
            };
            seen = true;
            for part in counts.split(';') {
                let mut words = part.split_whitespace();
                let (Some(n), Some(what)) = (words.next(), words.next()) else {
                    continue;
                };
                let Ok(n) = n.parse::<u32>() else { continue };
                match what {
                    "passed" => c.pass += n,
                    "failed" => c.fail += n,
                    "ignored" => c.skip += n,
                    _ => {}
                }
            }
        } else if let Some(name) = line
            .strip_prefix("test ")
            .and_then(|l| l.strip_suffix(" ... FAILED"))
        {
            if !names.iter().any(|n: &String| n == name) {
                names.push(name.to_string());
            }
        }
    }
    c.failing = names;
    seen.then_some(c)
}
