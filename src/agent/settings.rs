//! `[executors.<preset>]` and `[prices]` in config.toml: what a person may change about a
//! preset (the program, the model, extra arguments and environment, the permission setting,
//! how long the CLI retries a failing provider by itself) and what models cost when a CLI
//! reports tokens but no dollars.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// What the agent may do without asking, which no one can answer in a run nobody watches.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Permission {
    /// Edit files and run commands in its workspace, nothing asked (the default).
    #[default]
    Workspace,
    /// The CLI's own default: whatever it would ask about is refused, and braids counts a
    /// refused action as a failed attempt.
    Ask,
    /// Everything, with the CLI's own checks off (`--dangerously-skip-permissions`): only inside
    /// a sandbox.
    Bypass,
}

impl Permission {
    pub fn as_str(self) -> &'static str {
        match self {
            Permission::Workspace => "workspace",
            Permission::Ask => "ask",
            Permission::Bypass => "bypass",
        }
    }
}

/// One preset's settings; every field has a default.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct PresetSettings {
    /// The executable: a name looked up on PATH or a path; empty: the preset's own name.
    pub program: String,
    /// The model the CLI is asked for; empty: the CLI's default. A project's `Model:` wins.
    pub model: String,
    /// Extra arguments, after the preset's own.
    pub args: Vec<String>,
    /// Extra environment (a base URL, a key's variable), over the person's own.
    pub env: BTreeMap<String, String>,
    pub permission: Permission,
    /// How often the CLI may retry a failing provider by itself before it gives up and braids'
    /// breaker takes over; `None`: 2.
    pub retries: Option<u32>,
}

/// What a CLI retries on its own at most, by default: a few quick tries, then braids decides.
pub const DEFAULT_RETRIES: u32 = 2;

impl PresetSettings {
    pub fn retries(&self) -> u32 {
        self.retries.unwrap_or(DEFAULT_RETRIES)
    }
}

/// A model's price, US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    pub input: f64,
    pub output: f64,
}

/// `[prices]`: by model name as the CLI or the settings name it.
pub type Prices = BTreeMap<String, Price>;

/// The cost of `tokens_in` and `tokens_out` of `model` at `prices`, when a price is known. A
/// `provider/model` name is also looked up by its model part.
#[must_use]
pub fn priced(prices: &Prices, model: &str, tokens_in: u64, tokens_out: u64) -> Option<f64> {
    let p = prices
        .get(model)
        .or_else(|| model.rsplit_once('/').and_then(|(_, m)| prices.get(m)))?;
    let micros = |tokens: u64, per_million: f64| tokens as f64 * per_million;
    Some((micros(tokens_in, p.input) + micros(tokens_out, p.output)) / 1_000_000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_read_with_defaults() {
        let s: PresetSettings = toml::from_str(
            "model = \"m1\"\nargs = [\"--x\"]\nenv = { BASE = \"http://127.0.0.1:1\" }\npermission = \"bypass\"\n",
        )
        .unwrap();
        assert_eq!(s.model, "m1");
        assert_eq!(s.permission, Permission::Bypass);
        assert_eq!(s.env["BASE"], "http://127.0.0.1:1");
        assert_eq!(s.retries(), DEFAULT_RETRIES);
        assert_eq!(PresetSettings::default().permission, Permission::Workspace);
    }

    #[test]
    fn env_that_is_not_a_table_and_prices_that_are_not_numbers_are_refused() {
        let e = toml::from_str::<PresetSettings>("env = \"BASE=x\"").unwrap_err();
        assert!(e.to_string().contains("expected a map"), "{e}");
        let e = toml::from_str::<Prices>("[m1]\ninput = \"cheap\"\noutput = 1\n").unwrap_err();
        assert!(e.to_string().contains("expected f64"), "{e}");
        let e = toml::from_str::<PresetSettings>("permission = \"yolo\"").unwrap_err();
        assert!(e.to_string().contains("workspace"), "{e}");
    }

    #[test]
    fn prices_are_per_million_tokens() {
        let prices: Prices = toml::from_str("[\"gpt-5.5\"]\ninput = 1.25\noutput = 10\n").unwrap();
        let c = priced(&prices, "gpt-5.5", 200, 40).unwrap();
        assert!((c - 0.00065).abs() < 1e-12, "{c}");
        assert!(priced(&prices, "openai/gpt-5.5", 1_000_000, 0).is_some());
        assert_eq!(priced(&prices, "m9", 1, 1), None);
    }
}
