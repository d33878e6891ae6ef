//! `[ask]`: the cheap agent `braids tools ask` puts a question to. Off until a preset is named,
//! so asking never spends tokens nobody chose to spend.

use serde::Deserialize;

use crate::agent::Preset;

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default)]
pub struct AskConfig {
    /// The agent CLI preset that answers; `None` (an empty string) turns `tools ask` off.
    #[serde(deserialize_with = "preset_or_off")]
    pub executor: Option<Preset>,
    /// The model it answers with (a cheap one); empty: the preset's own settings.
    pub model: String,
    /// The most bytes of question and files the agent is given.
    pub max_bytes: usize,
    /// Seconds the agent may take.
    pub timeout_secs: u64,
}

impl Default for AskConfig {
    fn default() -> Self {
        AskConfig {
            executor: None,
            model: String::new(),
            max_bytes: 64 * 1024,
            timeout_secs: 300,
        }
    }
}

fn preset_or_off<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Preset>, D::Error> {
    let s = String::deserialize(d)?;
    if s.trim().is_empty() {
        return Ok(None);
    }
    let p = Preset::deserialize(serde::de::value::StrDeserializer::<D::Error>::new(&s))?;
    if p == Preset::OpenClaw {
        return Err(serde::de::Error::custom(
            "`openclaw` runs workers as gateway sessions and cannot answer `tools ask`; name claude-code, codex, opencode or aider",
        ));
    }
    Ok(Some(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_unless_a_preset_is_named() {
        let c: AskConfig = toml::from_str("").unwrap();
        assert_eq!(c, AskConfig::default());
        assert_eq!(c.executor, None);
        let c: AskConfig = toml::from_str("executor = \"claude\"\nmodel = \"haiku\"\n").unwrap();
        assert_eq!(c.executor, Some(Preset::ClaudeCode));
        let e = toml::from_str::<AskConfig>("executor = \"cluade-code\"\n").unwrap_err();
        assert!(e.to_string().contains("did you mean `claude-code`"), "{e}");
        let e = toml::from_str::<AskConfig>("executor = \"openclaw\"\n").unwrap_err();
        assert!(e.to_string().contains("cannot answer"), "{e}");
    }
}
