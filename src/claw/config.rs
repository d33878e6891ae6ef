//! `.claw/config.yaml`: how the claw loop validates a task and when it stops for a person.
//!
//! ```yaml
//! validation:            # each an argv list, run in order in the project; all must pass
//!   - [cargo, test, --quiet]
//!   - [cargo, clippy, --, -D, warnings]
//! retries: 2             # the coder gets this many more tries with the failure shown
//! stuck_after: 5         # loop iterations without a task checked off before loop_stuck
//! timeout: 10m           # per validation command
//! ```

use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClawConfig {
    pub validation: Vec<Vec<String>>,
    pub retries: u32,
    pub stuck_after: u32,
    #[serde(with = "humantime_serde_compat")]
    pub timeout: Duration,
}

impl Default for ClawConfig {
    fn default() -> Self {
        ClawConfig {
            validation: Vec::new(),
            retries: 2,
            stuck_after: 5,
            timeout: Duration::from_secs(600),
        }
    }
}

mod humantime_serde_compat {
    use serde::Deserialize;

    pub fn deserialize<'de, D: serde::Deserializer<'de>>(
        d: D,
    ) -> Result<std::time::Duration, D::Error> {
        let s = String::deserialize(d)?;
        humantime::parse_duration(&s).map_err(serde::de::Error::custom)
    }
}

/// The project's config, the defaults when there is none, or one sentence naming the file,
/// the place and the fix.
pub fn load(project: &Path) -> anyhow::Result<ClawConfig> {
    let file = project.join(".claw/config.yaml");
    let text = match std::fs::read_to_string(&file) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(ClawConfig::default()),
        Err(e) => anyhow::bail!("cannot read {}: {e}", file.display()),
    };
    parse(&text).map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))
}

/// The line a parse error names (`line 2 column 5: …`), for `braids check`.
pub fn error_line(message: &str) -> Option<usize> {
    let rest = &message[message.find("line ")? + 5..];
    rest.split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

pub fn parse(text: &str) -> Result<ClawConfig, String> {
    if text.trim().is_empty() {
        return Ok(ClawConfig::default());
    }
    // The parser's first line says what and where; the rest is a source excerpt.
    let c: ClawConfig = serde_saphyr::from_str(text).map_err(|e| {
        let m = e.to_string();
        let first = m.lines().next().unwrap_or("").trim();
        first.strip_prefix("error: ").unwrap_or(first).to_string()
    })?;
    if let Some(i) = c.validation.iter().position(|argv| argv.is_empty()) {
        return Err(format!("validation command {} is empty", i + 1));
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_argv_lists_and_refuses_shell_strings() {
        let c = parse("validation:\n  - [cargo, test]\n  - [\"sh\", \"-c\", \"echo hi\"]\nretries: 1\nstuck_after: 3\ntimeout: 2m\n").unwrap();
        assert_eq!(c.validation[0], ["cargo", "test"]);
        assert_eq!((c.retries, c.stuck_after, c.timeout.as_secs()), (1, 3, 120));
        assert_eq!(parse("").unwrap(), ClawConfig::default());
        let e = parse("validation:\n  - cargo test\n").unwrap_err();
        assert!(!e.is_empty());
        assert!(
            parse("retries: 2\nretry: 3\n").is_err(),
            "unknown keys are errors"
        );
        assert!(parse("validation:\n  - []\n")
            .unwrap_err()
            .contains("empty"));
    }
}
