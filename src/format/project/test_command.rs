//! A test command: PROJECT.md's `TestCommand:` (with `TestReport:`) and a step's
//! `test_command:` in `.ai/step-rules.yaml` both come to this. It is always run as argv; a
//! shell runs it only when the project wrote `{shell: "…"}` itself, and then the string is
//! `sh -c`'s one argument.

use serde::Serialize;

/// Words that mean something only to a shell: as argv they would reach the program as
/// arguments, so a command holding one is refused with the fix.
const SHELL_WORDS: &[&str] = &[
    "|", "||", "&&", "&", ";", ">", ">>", "<", "2>&1", "2>", "$(",
];

/// A test command and where its machine-readable report is, if not on stdout.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TestCommand {
    /// What runs: argv as written, or `sh -c <string>` for `{shell: …}`.
    pub argv: Vec<String>,
    /// How a person reads it.
    pub shown: String,
    /// A JUnit XML file the command writes, relative to the workspace.
    pub report: Option<String>,
}

impl TestCommand {
    /// An argv command.
    pub fn argv(argv: Vec<String>, report: Option<String>) -> TestCommand {
        TestCommand {
            shown: shlex::try_join(argv.iter().map(String::as_str)).unwrap_or(argv.join(" ")),
            argv,
            report,
        }
    }

    /// A shell string the project wrote as `{shell: "…"}`.
    pub fn shell(s: &str, report: Option<String>) -> TestCommand {
        TestCommand {
            argv: vec!["sh".into(), "-c".into(), s.to_string()],
            shown: s.to_string(),
            report,
        }
    }
}

/// A value that cannot be a test command: what is wrong, and the fix.
pub type Refused = (String, &'static str);

/// Reads a `TestCommand:` value: `cargo test --no-fail-fast` (split into words as a POSIX
/// shell would, quotes kept, and run as argv) or `{shell: "go test -json ./... 2>&1"}`.
pub fn parse_field(value: &str, report: Option<&str>) -> Result<TestCommand, Refused> {
    let v = value.trim().trim_matches('`').trim();
    let report = report
        .map(|r| r.trim().trim_matches('`').trim().to_string())
        .filter(|r| !r.is_empty());
    if let Some(inner) = v.strip_prefix('{').and_then(|r| r.strip_suffix('}')) {
        let Some(s) = inner.trim().strip_prefix("shell:") else {
            return Err((
                format!("`{v}` is a mapping other than {{shell: \"…\"}}"),
                "write the command as words (cargo test --no-fail-fast), or {shell: \"…\"} to run it through sh",
            ));
        };
        let s = s.trim();
        let s = s
            .strip_prefix('"')
            .and_then(|x| x.strip_suffix('"'))
            .or_else(|| s.strip_prefix('\'').and_then(|x| x.strip_suffix('\'')))
            .unwrap_or(s);
        if s.trim().is_empty() {
            return Err((
                "has an empty shell command".into(),
                "write {shell: \"your command\"}",
            ));
        }
        return Ok(TestCommand::shell(s, report));
    }
    let Some(words) = shlex::split(v) else {
        return Err((
            format!("`{v}` has an unclosed quote"),
            "close the quote, or write {shell: \"…\"}",
        ));
    };
    check_words(&words)?;
    Ok(TestCommand::argv(words, report))
}

/// An argv list from `.ai/step-rules.yaml` (already split by the YAML).
pub fn check_words(words: &[String]) -> Result<(), Refused> {
    if words.first().is_none_or(|w| w.trim().is_empty()) {
        return Err((
            "is an empty command".into(),
            "name the program and its arguments, e.g. cargo test",
        ));
    }
    if let Some(w) = words.iter().find(|w| SHELL_WORDS.contains(&w.as_str())) {
        return Err((
            format!("has `{w}`, which only a shell understands, and braids runs it as argv"),
            "drop it, or write the whole command as {shell: \"…\"} to run it through sh",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_argv_and_shell_only_when_written() {
        let c = parse_field("cargo test --no-fail-fast -- --format json", None).unwrap();
        assert_eq!(
            c.argv,
            ["cargo", "test", "--no-fail-fast", "--", "--format", "json"]
        );
        let c = parse_field("`pytest -q \"tests/a b.py\"`", Some("junit.xml")).unwrap();
        assert_eq!(c.argv, ["pytest", "-q", "tests/a b.py"]);
        assert_eq!(c.report.as_deref(), Some("junit.xml"));
        assert_eq!(c.shown, "pytest -q 'tests/a b.py'");
        // `$(…)` inside a word stays text: it is an argument, never expanded
        let c = parse_field("echo '$(touch x)'", None).unwrap();
        assert_eq!(c.argv, ["echo", "$(touch x)"]);
        let c = parse_field("{shell: \"go test -json ./... 2>&1\"}", None).unwrap();
        assert_eq!(c.argv, ["sh", "-c", "go test -json ./... 2>&1"]);
        assert_eq!(c.shown, "go test -json ./... 2>&1");
    }

    #[test]
    fn what_a_shell_alone_understands_is_refused_with_the_fix() {
        for bad in [
            "go test -json ./... | tee out",
            "make && make test",
            "cargo test 2>&1",
            "",
            "pytest 'unclosed",
            "{argv: x}",
            "{shell: \"\"}",
        ] {
            let (message, fix) = parse_field(bad, None).unwrap_err();
            assert!(!message.is_empty() && !fix.is_empty(), "{bad}");
        }
    }
}
