//! A coder's `CLAW_STATUS` block (seed 003's packet: "Emit CLAW_STATUS block when done"): its
//! report of what it did. The seed names the block but gives no layout, so braids reads the
//! one the packet asks for, `key: value` lines (YAML) after a `CLAW_STATUS` line:
//!
//! ```text
//! CLAW_STATUS
//! status: done            # done, failed, or needs_human (with `question:`)
//! summary: Added window snapping to useSnap
//! files_changed:
//!   - src/slices/windows/hooks/useSnap.ts
//! tests_passed: true
//! END_CLAW_STATUS
//! ```
//!
//! It may sit in a code fence, the end marker may be a closing fence or a blank line, the
//! marker may carry `#`, `**` or a colon, and a JSON object on the marker's line is read too.
//! The last block in the text is the report. Reading takes any text and never panics.

use serde::Serialize;
use serde_json::Value;

/// What the coder said it did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Said {
    Done,
    Failed,
    NeedsHuman,
}

/// One CLAW_STATUS block.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ClawStatus {
    pub status: Option<Said>,
    pub summary: Option<String>,
    pub files_changed: Vec<String>,
    pub tests_passed: Option<bool>,
    pub question: Option<String>,
    /// Values that were not valid, as written.
    pub warnings: Vec<String>,
}

impl ClawStatus {
    /// What to tell a person it asked, when it asked.
    pub fn question_text(&self) -> Option<String> {
        (self.status == Some(Said::NeedsHuman)).then(|| {
            self.question
                .clone()
                .or_else(|| self.summary.clone())
                .unwrap_or_else(|| "the coder needs a person".into())
        })
    }
}

const END: &str = "END_CLAW_STATUS";

/// The marker line's rest (after `CLAW_STATUS`), when `line` is one.
fn marker(line: &str) -> Option<&str> {
    let l = line.trim().trim_start_matches('#').trim();
    let l = l.strip_prefix("```").unwrap_or(l).trim();
    let l = l.trim_start_matches('*').trim_start();
    let rest = l.strip_prefix("CLAW_STATUS")?;
    let rest = rest.trim_start_matches('*').trim_start();
    let rest = rest.strip_prefix(':').unwrap_or(rest).trim();
    (!rest.starts_with(|c: char| c.is_alphanumeric() || c == '_')).then_some(rest)
}

/// The last CLAW_STATUS block in `text`; `None` when there is none.
#[must_use]
pub fn parse(text: &str) -> Option<ClawStatus> {
    let lines: Vec<&str> = text.lines().collect();
    let start = lines.iter().rposition(|l| marker(l).is_some())?;
    let rest = marker(lines[start]).unwrap_or("");
    let body = if rest.starts_with('{') {
        rest.to_string()
    } else {
        let mut body = Vec::new();
        let mut i = start + 1;
        if lines.get(i).is_some_and(|l| l.trim().starts_with("```")) {
            i += 1;
        }
        for l in &lines[i.min(lines.len())..] {
            let t = l.trim();
            if t == END || t.starts_with("```") || (t.is_empty() && !body.is_empty()) {
                break;
            }
            if !t.is_empty() {
                body.push(*l);
            }
        }
        body.join("\n")
    };
    Some(read(&body))
}

fn read(body: &str) -> ClawStatus {
    let mut s = ClawStatus::default();
    let map = match serde_saphyr::from_str::<Value>(body) {
        Ok(Value::Object(m)) => m,
        Ok(Value::Null) => Default::default(),
        _ => {
            s.warnings
                .push("the CLAW_STATUS block is not `key: value` lines".into());
            return s;
        }
    };
    let text = |k: &str| match map.get(k) {
        Some(Value::String(v)) => Some(v.trim().to_string()).filter(|v| !v.is_empty()),
        Some(Value::Number(n)) => Some(n.to_string()),
        Some(Value::Bool(b)) => Some(b.to_string()),
        _ => None,
    };
    s.status = text("status").map(|v| match v.to_ascii_lowercase().as_str() {
        "done" | "complete" | "completed" | "pass" | "success" | "ok" => Said::Done,
        "needs_human" | "blocked" | "question" => Said::NeedsHuman,
        "failed" | "failing" | "fail" | "error" => Said::Failed,
        _ => {
            s.warnings.push(format!(
                "CLAW_STATUS status `{}` is none of done, failed, needs_human; read as failed",
                crate::system::templates::clip(&v, 60)
            ));
            Said::Failed
        }
    });
    s.summary = text("summary");
    s.question = text("question");
    s.files_changed = match map.get("files_changed") {
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(|v| v.as_str().map(|x| x.trim().to_string()))
            .filter(|x| !x.is_empty())
            .collect(),
        Some(Value::String(one)) if !one.trim().is_empty() => vec![one.trim().to_string()],
        _ => Vec::new(),
    };
    s.tests_passed = match map.get("tests_passed") {
        Some(Value::Bool(b)) => Some(*b),
        Some(Value::String(v)) => match v.trim() {
            "true" | "yes" => Some(true),
            "false" | "no" => Some(false),
            _ => None,
        },
        _ => None,
    };
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_block_in_the_forms_a_coder_writes_it() {
        let plain = "I made the change.\n\nCLAW_STATUS\nstatus: done\nsummary: Added snapping\nfiles_changed:\n  - src/a.ts\n  - src/b.ts\ntests_passed: true\nEND_CLAW_STATUS\n";
        let s = parse(plain).unwrap();
        assert_eq!(s.status, Some(Said::Done));
        assert_eq!(s.summary.as_deref(), Some("Added snapping"));
        assert_eq!(s.files_changed, ["src/a.ts", "src/b.ts"]);
        assert_eq!(s.tests_passed, Some(true));
        assert!(s.warnings.is_empty());
        let fenced = "Done.\n```CLAW_STATUS\nstatus: done\nfiles_changed: [src/a.ts]\n```\n";
        assert_eq!(parse(fenced).unwrap().files_changed, ["src/a.ts"]);
        let heading =
            "## CLAW_STATUS:\n```yaml\nstatus: needs_human\nquestion: Which store?\n```\n";
        let s = parse(heading).unwrap();
        assert_eq!(s.question_text().as_deref(), Some("Which store?"));
        let json = "**CLAW_STATUS**: {\"status\": \"failed\", \"summary\": \"no API\"}\n";
        assert_eq!(parse(json).unwrap().status, Some(Said::Failed));
        // ended by a blank line; the last block is the report
        let two = "CLAW_STATUS\nstatus: failed\n\nretrying\nCLAW_STATUS\nstatus: done\n\nbye\n";
        assert_eq!(parse(two).unwrap().status, Some(Said::Done));
    }

    #[test]
    fn no_block_bad_values_and_any_bytes() {
        assert_eq!(parse("all done, no block here"), None);
        assert_eq!(parse("CLAW_STATUSES are nice"), None);
        let s = parse("CLAW_STATUS\nstatus: finished-ish\n").unwrap();
        assert_eq!(s.status, Some(Said::Failed));
        assert_eq!(s.warnings.len(), 1);
        let s = parse("CLAW_STATUS\n- a list\n").unwrap();
        assert_eq!(s.status, None);
        assert!(!s.warnings.is_empty());
        for junk in [
            "CLAW_STATUS",
            "CLAW_STATUS\n```",
            "CLAW_STATUS: {",
            "\u{0}CLAW_STATUS\n\u{ffff}: [",
        ] {
            let _ = parse(junk);
        }
    }
}
