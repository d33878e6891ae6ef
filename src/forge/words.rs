//! A forge's failures in one line a person can read: an HTTP client's error without the
//! backtrace some clients print with it, and a body that is a web page (a proxy's or a load
//! balancer's) named by its title rather than pasted whole.

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
