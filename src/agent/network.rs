//! Where an agent CLI's provider listens, from the CLI's settings as the person made them
//! (`ANTHROPIC_BASE_URL`, a Codex provider's `base_url`, opencode's `baseURL`, aider's
//! `--openai-api-base`): the ports its sandbox lets it connect to.

use std::path::{Path, PathBuf};

use super::{Preset, PresetSettings};

/// Variables of the person's own environment that name a provider.
const URL_VARS: &[&str] = &[
    "ANTHROPIC_BASE_URL",
    "OPENAI_BASE_URL",
    "OPENAI_API_BASE",
    "OPENCODE_CONFIG_CONTENT",
];

/// The ports of every provider URL the preset's settings, the person's environment and the
/// CLI's own configuration file name.
pub fn provider_ports(preset: Preset, settings: &PresetSettings) -> Vec<u16> {
    let env = |k: &str| {
        settings
            .env
            .get(k)
            .cloned()
            .or_else(|| std::env::var(k).ok())
    };
    let mut texts: Vec<String> = settings.env.values().cloned().collect();
    texts.extend(settings.args.iter().cloned());
    texts.extend(URL_VARS.iter().filter_map(|k| std::env::var(k).ok()));
    let home = env("HOME").map(PathBuf::from).unwrap_or_default();
    let files: Vec<PathBuf> = match preset {
        Preset::Codex => vec![env("CODEX_HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| home.join(".codex"))
            .join("config.toml")],
        Preset::ClaudeCode => vec![env("CLAUDE_CONFIG_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| home.join(".claude"))
            .join("settings.json")],
        Preset::Opencode => vec![home.join(".config/opencode/opencode.json")],
        Preset::Aider => vec![home.join(".aider.conf.yml")],
        Preset::OpenClaw => vec![],
    };
    texts.extend(files.iter().filter_map(|f| read_small(f)));
    let mut ports: Vec<u16> = texts.iter().flat_map(|t| url_ports(t)).collect();
    ports.sort_unstable();
    ports.dedup();
    ports
}

fn read_small(path: &Path) -> Option<String> {
    let bytes = crate::system::atomic::read(path).ok()?;
    (bytes.len() < 1 << 20).then(|| String::from_utf8_lossy(&bytes).into_owned())
}

/// The port of every `http://` or `https://` URL in `text` (80 and 443 when none is written).
pub fn url_ports(text: &str) -> Vec<u16> {
    let mut out = Vec::new();
    for (at, _) in text.match_indices("http") {
        let rest = &text[at..];
        if !(rest.starts_with("http://") || rest.starts_with("https://")) {
            continue;
        }
        let end = rest
            .find(|c: char| c.is_whitespace() || "\"'`<>,;)}".contains(c))
            .unwrap_or(rest.len());
        let Ok(uri) = rest[..end].parse::<http::Uri>() else {
            continue;
        };
        let port = uri.port_u16().or(match uri.scheme_str() {
            Some("https") => Some(443),
            Some("http") => Some(80),
            _ => None,
        });
        out.extend(port.filter(|_| uri.host().is_some_and(|h| !h.is_empty())));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_of_provider_urls() {
        let cases: &[(&str, &[u16])] = &[
            ("http://127.0.0.1:41234", &[41234]),
            ("https://api.anthropic.com/v1", &[443]),
            (
                "base_url = \"http://localhost:8080/v1\"\nwire_api = \"responses\"",
                &[8080],
            ),
            (
                r#"{"options":{"baseURL":"http://[::1]:9999/v1","apiKey":"k"}}"#,
                &[9999],
            ),
            (
                "--openai-api-base http://h:1/v1 --other https://x.example",
                &[1, 443],
            ),
            ("no url here, httpx, http:/broken", &[]),
            ("http://", &[]),
        ];
        for (text, want) in cases {
            assert_eq!(url_ports(text), *want, "{text}");
        }
    }

    #[test]
    fn a_codex_provider_in_its_own_config_is_found() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(
            tmp.path().join("config.toml"),
            "model_provider = \"s\"\n[model_providers.s]\nbase_url = \"http://127.0.0.1:5123/v1\"\n",
        )
        .unwrap();
        let mut settings = PresetSettings::default();
        settings
            .env
            .insert("CODEX_HOME".into(), tmp.path().display().to_string());
        assert!(provider_ports(Preset::Codex, &settings).contains(&5123));
    }
}
