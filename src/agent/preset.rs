//! The agent CLIs braids knows by name. A preset turns `executor = "codex"` into the argv,
//! environment and output reader that the CLI needs, so a person names their agent instead of
//! learning each CLI's flags for non-interactive, machine-readable runs.

use serde::{Deserialize, Serialize};

/// One agent CLI braids can drive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Preset {
    ClaudeCode,
    Codex,
    Opencode,
    Aider,
    OpenClaw,
}

impl Preset {
    pub const ALL: [Preset; 5] = [
        Preset::ClaudeCode,
        Preset::Codex,
        Preset::Opencode,
        Preset::Aider,
        Preset::OpenClaw,
    ];

    /// As written in config.toml and PROJECT.md.
    pub fn name(self) -> &'static str {
        match self {
            Preset::ClaudeCode => "claude-code",
            Preset::Codex => "codex",
            Preset::Opencode => "opencode",
            Preset::Aider => "aider",
            Preset::OpenClaw => "openclaw",
        }
    }

    /// A preset by its name (any case; `claude` is accepted for Claude Code).
    pub fn parse(name: &str) -> Option<Preset> {
        let n = name.trim().to_ascii_lowercase();
        if n == "claude" {
            return Some(Preset::ClaudeCode);
        }
        Preset::ALL.into_iter().find(|p| p.name() == n)
    }

    /// The preset a misspelt name was probably meant to be (`cluade-code`, `Codex-cli`).
    pub fn like(name: &str) -> Option<Preset> {
        let n = name.trim().to_ascii_lowercase();
        Preset::ALL
            .into_iter()
            .map(|p| (p.name(), p))
            .chain([("claude", Preset::ClaudeCode)])
            .map(|(name, p)| (strsim::damerau_levenshtein(&n, name), name, p))
            .filter(|(d, name, _)| *d <= 2 || (n.len() > 3 && name.starts_with(&n)))
            .min_by_key(|(d, _, _)| *d)
            .map(|(_, _, p)| p)
    }

    /// The names, for messages that list them.
    pub fn names() -> String {
        Preset::ALL.map(Preset::name).join(", ")
    }

    /// The program looked up on PATH when `[executors.<name>] program` is empty.
    pub fn default_program(self) -> &'static str {
        match self {
            Preset::ClaudeCode => "claude",
            Preset::Codex => "codex",
            Preset::Opencode => "opencode",
            Preset::Aider => "aider",
            Preset::OpenClaw => "openclaw",
        }
    }

    /// The folders under the home the CLI keeps its state in, which a sandbox leaves writable.
    pub fn state_dirs(self) -> &'static [&'static str] {
        match self {
            Preset::ClaudeCode => &[".claude", ".claude.json"],
            Preset::Codex => &[".codex"],
            Preset::Opencode => &[
                ".local/share/opencode",
                ".local/state/opencode",
                ".config/opencode",
            ],
            Preset::Aider => &[".aider"],
            Preset::OpenClaw => &[".openclaw/agents", ".openclaw/workspace"],
        }
    }

    /// Variables naming a folder the CLI keeps its state in instead of [`Self::state_dirs`].
    pub fn state_env(self) -> &'static [&'static str] {
        match self {
            Preset::ClaudeCode => &["CLAUDE_CONFIG_DIR"],
            Preset::Codex => &["CODEX_HOME"],
            Preset::Opencode | Preset::Aider | Preset::OpenClaw => &[],
        }
    }

    /// The version braids' tests ran; `braids check` warns about a newer one.
    pub fn tested_version(self) -> &'static str {
        match self {
            Preset::ClaudeCode => "2.1.332",
            Preset::Codex => "0.171.0",
            Preset::Opencode => "1.18.33",
            Preset::Aider => "0.86.2",
            Preset::OpenClaw => "2026.9.6",
        }
    }

    /// Whether the CLI prints one JSON event a line (aider prints text).
    pub fn speaks_json(self) -> bool {
        !matches!(self, Preset::Aider)
    }
}

impl std::fmt::Display for Preset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl<'de> Deserialize<'de> for Preset {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Preset, D::Error> {
        let s = String::deserialize(d)?;
        Preset::parse(&s).ok_or_else(|| {
            let hint =
                Preset::like(&s).map_or(String::new(), |p| format!(" (did you mean `{p}`?)"));
            serde::de::Error::custom(format!(
                "`{s}` is not an executor preset{hint}; write one of {}",
                Preset::names()
            ))
        })
    }
}

/// The first dotted version number in a `--version` line (`2.1.332 (Claude Code)`,
/// `codex-cli 0.171.0`, `aider 0.86.2`).
pub fn version_in(text: &str) -> Option<String> {
    text.split(|c: char| c.is_whitespace() || c == '(' || c == ')' || c == 'v')
        .find(|w| {
            let parts: Vec<&str> = w.split('.').collect();
            parts.len() >= 2
                && parts
                    .iter()
                    .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        })
        .map(str::to_string)
}

/// `a` compared with `b`, number by number (`2.1.40` < `2.1.332`).
pub fn compare_versions(a: &str, b: &str) -> std::cmp::Ordering {
    let nums = |s: &str| -> Vec<u64> { s.split('.').map(|p| p.parse().unwrap_or(0)).collect() };
    nums(a).cmp(&nums(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_names_are_refused() {
        for p in Preset::ALL {
            assert_eq!(Preset::parse(p.name()), Some(p));
        }
        assert_eq!(Preset::parse(" Claude "), Some(Preset::ClaudeCode));
        assert_eq!(Preset::parse("cluade-code"), None);
        assert_eq!(Preset::like("cluade-code"), Some(Preset::ClaudeCode));
        assert_eq!(Preset::like("codx"), Some(Preset::Codex));
        assert_eq!(Preset::like("cluade"), Some(Preset::ClaudeCode));
        assert_eq!(Preset::like("open"), Some(Preset::Opencode));
        assert_eq!(Preset::like("my-agent"), None);
        let e = toml::from_str::<std::collections::BTreeMap<String, Preset>>("a = \"gpt\"")
            .unwrap_err();
        assert!(
            e.to_string()
                .contains("claude-code, codex, opencode, aider, openclaw"),
            "{e}"
        );
    }

    #[test]
    fn versions_are_found_and_compared() {
        assert_eq!(
            version_in("2.1.332 (Claude Code)").as_deref(),
            Some("2.1.332")
        );
        assert_eq!(version_in("codex-cli 0.171.0").as_deref(), Some("0.171.0"));
        assert_eq!(version_in("aider 0.86.2\n").as_deref(), Some("0.86.2"));
        assert_eq!(
            version_in("OpenClaw 2026.9.6 (abc)").as_deref(),
            Some("2026.9.6")
        );
        assert_eq!(version_in("v1.18.33").as_deref(), Some("1.18.33"));
        assert_eq!(version_in("garbage"), None);
        use std::cmp::Ordering::*;
        assert_eq!(compare_versions("2.1.40", "2.1.332"), Less);
        assert_eq!(compare_versions("0.172.0", "0.171.0"), Greater);
        assert_eq!(compare_versions("1.18.33", "1.18.33"), Equal);
    }
}
