//! Words to and from a forge: its failures in one line a person can read (an HTTP client's
//! error without the backtrace some clients print with it, a body that is a web page named by
//! its title rather than pasted whole), and text braids lands that must not close issues.

/// `e` and its causes on one line, `outer: inner: innermost`, without backtraces.
pub fn one_line(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut at = Some(e);
    while let Some(err) = at {
        let text = err.to_string();
        let text = text
            .split("Found at")
            .next()
            .and_then(|t| t.lines().next())
            .unwrap_or_default()
            .trim()
            .trim_end_matches(':')
            .to_string();
        if !text.is_empty() && !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        at = err.source();
    }
    parts.join(": ")
}

/// What a forge's non-JSON answer says: a web page's title, or its first 200 characters.
pub fn body_text(text: &str) -> String {
    let t = text.trim();
    if !t.starts_with('<') {
        return t.chars().take(200).collect::<String>();
    }
    let lower = t.to_ascii_lowercase();
    let title = lower
        .find("<title>")
        .and_then(|a| lower[a..].find("</title>").map(|b| (a + 7, a + b)))
        .map(|(a, b)| t[a..b].split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|s| !s.is_empty());
    match title {
        Some(title) => format!(
            "a web page titled \"{}\"",
            title.chars().take(120).collect::<String>()
        ),
        None => "a web page, not the API's JSON".to_string(),
    }
}

/// The words after which GitHub and GitLab close the issue a landed commit or merged request
/// names.
const CLOSING: &[&str] = &[
    "close",
    "closes",
    "closed",
    "closing",
    "fix",
    "fixes",
    "fixed",
    "fixing",
    "resolve",
    "resolves",
    "resolved",
    "resolving",
    "implement",
    "implements",
    "implemented",
    "implementing",
];

/// `text` (an agent's summary, an issue's title) made safe to land: a closing keyword before an
/// issue reference becomes `refs`, so the forge links the issue and closes nothing. braids
/// closes only the bead's own issue, in words of its own.
pub fn no_closing(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find(|c: char| c.is_ascii_alphabetic()) {
        let (before, from) = rest.split_at(start);
        out.push_str(before);
        let len = from
            .find(|c: char| !c.is_ascii_alphabetic())
            .unwrap_or(from.len());
        let (word, after) = from.split_at(len);
        let joined = out
            .chars()
            .last()
            .is_some_and(|c| c.is_alphanumeric() || c == '_');
        if !joined && CLOSING.contains(&word.to_ascii_lowercase().as_str()) && names_issue(after) {
            out.push_str(match word.starts_with(|c: char| c.is_ascii_uppercase()) {
                true => "Refs",
                false => "refs",
            });
        } else {
            out.push_str(word);
        }
        rest = after;
    }
    out.push_str(rest);
    out
}

/// Whether `after` a keyword comes an issue reference: `: ` or spaces, then `#7`,
/// `owner/repo#7`, `GH-7` or a link to an issue.
fn names_issue(after: &str) -> bool {
    let t = after.strip_prefix(':').unwrap_or(after);
    if !t.starts_with(char::is_whitespace) {
        return false;
    }
    let token = t.trim_start().split_whitespace().next().unwrap_or_default();
    let digit_after = |mark: &str| {
        token
            .split_once(mark)
            .is_some_and(|(_, n)| n.starts_with(|c: char| c.is_ascii_digit()))
    };
    digit_after("#")
        || token.to_ascii_lowercase().starts_with("gh-") && digit_after("-")
        || token.starts_with("http") && token.contains("/issues/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct E(&'static str, Option<Box<E>>);
    impl std::fmt::Display for E {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }
    impl std::error::Error for E {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            self.1.as_deref().map(|e| e as _)
        }
    }

    #[test]
    fn an_error_is_its_causes_on_one_line_without_a_backtrace() {
        let e = E(
            "Service Error: client error (Connect)\nFound at\n   0: snafu::backtrace_impl",
            Some(Box::new(E(
                "client error (Connect)",
                Some(Box::new(E(
                    "tcp connect error: Connection refused (os error 111)",
                    None,
                ))),
            ))),
        );
        assert_eq!(
            one_line(&e),
            "Service Error: client error (Connect): tcp connect error: Connection refused (os error 111)"
        );
    }

    #[test]
    fn closing_keywords_before_a_reference_become_refs() {
        for (text, want) in [
            ("Fixes #7", "Refs #7"),
            (
                "fix the form; closes: #7, resolves me/app#8",
                "fix the form; refs: #7, refs me/app#8",
            ),
            (
                "Implemented https://gitlab.example/g/p/-/issues/3",
                "Refs https://gitlab.example/g/p/-/issues/3",
            ),
            ("fixed GH-12 for good", "refs GH-12 for good"),
            // Not before a reference, or not a keyword: as written.
            ("Fix the login form", "Fix the login form"),
            ("prefixes #7 and fixes2 #8", "prefixes #7 and fixes2 #8"),
            ("fixes #", "fixes #"),
            ("closes#7", "closes#7"),
        ] {
            assert_eq!(no_closing(text), want, "{text}");
        }
    }

    #[test]
    fn a_web_page_is_named_by_its_title() {
        let page = "<!DOCTYPE HTML>\n<html><head><TITLE>502  Bad\nGateway</TITLE></head><body>..</body></html>";
        assert_eq!(body_text(page), "a web page titled \"502 Bad Gateway\"");
        assert_eq!(
            body_text("<html><body>x</body></html>"),
            "a web page, not the API's JSON"
        );
        assert_eq!(body_text("  upstream timed out \n"), "upstream timed out");
    }
}
