//! What can be known about a preset before a bead is claimed: settings the CLI will refuse,
//! and whether the installed version is one braids was tested with. Pure; running the CLI for
//! its `--version` is `braids check`'s.

use super::{compare_versions, version_in, Permission, Preset, PresetSettings};

/// Why no run of `preset` with `settings` can work for this user, before anything is claimed.
#[must_use]
pub fn preflight(preset: Preset, settings: &PresetSettings, root: bool) -> Option<String> {
    let sandboxed = settings.env.get("IS_SANDBOX").is_some_and(|v| v == "1")
        || std::env::var("IS_SANDBOX").is_ok_and(|v| v == "1");
    if preset == Preset::ClaudeCode
        && settings.permission == Permission::Bypass
        && root
        && !sandboxed
    {
        return Some(
            "Claude Code refuses --dangerously-skip-permissions as root, so [executors.claude-code] permission = \"bypass\" cannot run here; use permission = \"workspace\" (the default), or set IS_SANDBOX = \"1\" under [executors.claude-code.env] when the agent runs in a sandbox".into(),
        );
    }
    None
}

/// What `--version` said, against the version braids was tested with.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub enum VersionCheck {
    Tested(String),
    /// Newer than tested: probably fine, worth a warning.
    Newer(String),
    /// Older than tested: its flags or output may differ.
    Older(String),
    /// No version in what it printed.
    Unreadable(String),
}

pub fn version_check(preset: Preset, printed: &str) -> VersionCheck {
    let Some(v) = version_in(printed) else {
        return VersionCheck::Unreadable(crate::system::templates::clip(printed, 80));
    };
    match compare_versions(&v, preset.tested_version()) {
        std::cmp::Ordering::Equal => VersionCheck::Tested(v),
        std::cmp::Ordering::Greater => VersionCheck::Newer(v),
        std::cmp::Ordering::Less => VersionCheck::Older(v),
    }
}

/// Whether this process runs as root.
pub fn running_as_root() -> bool {
    nix::unistd::geteuid().is_root()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_bypass_as_root_is_refused_unless_sandboxed() {
        let mut s = PresetSettings {
            permission: Permission::Bypass,
            ..PresetSettings::default()
        };
        let why = preflight(Preset::ClaudeCode, &s, true).unwrap();
        assert!(why.contains("permission = \"workspace\""), "{why}");
        assert_eq!(preflight(Preset::ClaudeCode, &s, false), None);
        assert_eq!(preflight(Preset::Codex, &s, true), None);
        s.env.insert("IS_SANDBOX".into(), "1".into());
        assert_eq!(preflight(Preset::ClaudeCode, &s, true), None);
        assert_eq!(
            preflight(Preset::ClaudeCode, &PresetSettings::default(), true),
            None
        );
    }

    #[test]
    fn versions_are_judged_against_the_tested_one() {
        assert_eq!(
            version_check(Preset::ClaudeCode, "2.1.332 (Claude Code)"),
            VersionCheck::Tested("2.1.332".into())
        );
        assert_eq!(
            version_check(Preset::Codex, "codex-cli 0.200.1"),
            VersionCheck::Newer("0.200.1".into())
        );
        assert_eq!(
            version_check(Preset::Aider, "aider 0.80.0"),
            VersionCheck::Older("0.80.0".into())
        );
        assert!(matches!(
            version_check(Preset::Opencode, "Segmentation fault"),
            VersionCheck::Unreadable(_)
        ));
    }
}
