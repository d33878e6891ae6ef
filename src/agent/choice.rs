//! What runs as a project's agent: a preset by name, or an argv template as before presets.
//! config.toml's `[worker] executor` takes either (`"codex"` or `["my-agent", "{prompt_file}"]`);
//! PROJECT.md's `Executor:` takes a preset name or a command line.

use serde::Deserialize;

use super::Preset;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Choice {
    /// An argv template with `{placeholder}`s; empty: nothing configured.
    Argv(Vec<String>),
    Preset(Preset),
}

impl Default for Choice {
    fn default() -> Self {
        Choice::Argv(Vec::new())
    }
}

impl Choice {
    /// The argv template; empty for a preset.
    pub fn argv(&self) -> &[String] {
        match self {
            Choice::Argv(a) => a,
            Choice::Preset(_) => &[],
        }
    }

    pub fn preset(&self) -> Option<Preset> {
        match self {
            Choice::Preset(p) => Some(*p),
            Choice::Argv(_) => None,
        }
    }

    pub fn is_empty(&self) -> bool {
        matches!(self, Choice::Argv(a) if a.is_empty())
    }

    /// PROJECT.md's `Executor:` value: a preset's name, else a command line split as a shell
    /// would (never run by one). `None`: an unclosed quote.
    pub fn from_field(value: &str) -> Option<Choice> {
        let v = value.trim();
        if let Some(p) = Preset::parse(v) {
            return Some(Choice::Preset(p));
        }
        shlex::split(v).filter(|a| !a.is_empty()).map(Choice::Argv)
    }
}

impl<'de> Deserialize<'de> for Choice {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Choice, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Name(String),
            Argv(Vec<String>),
        }
        match Raw::deserialize(d).map_err(|_| {
            serde::de::Error::custom(format!(
                "executor must be a preset's name ({}) or an argv list such as [\"my-agent\", \"{{prompt_file}}\"]",
                Preset::names()
            ))
        })? {
            Raw::Argv(a) => Ok(Choice::Argv(a)),
            Raw::Name(n) => Preset::parse(&n).map(Choice::Preset).ok_or_else(|| {
                let hint = Preset::like(&n).map_or(String::new(), |p| format!(" (did you mean `{p}`?)"));
                serde::de::Error::custom(format!(
                    "`{n}` is not an executor preset{hint}; write one of {}, or an argv list such as [\"{n}\", \"{{prompt_file}}\"]",
                    Preset::names()
                ))
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    struct W {
        executor: Choice,
    }

    #[test]
    fn a_name_is_a_preset_and_a_list_an_argv() {
        let w: W = toml::from_str("executor = \"claude-code\"").unwrap();
        assert_eq!(w.executor, Choice::Preset(Preset::ClaudeCode));
        let w: W = toml::from_str("executor = [\"agent\", \"{prompt_file}\"]").unwrap();
        assert_eq!(w.executor.argv(), ["agent", "{prompt_file}"]);
        let e = toml::from_str::<W>("executor = \"cluade\"").err().unwrap();
        assert!(
            e.to_string().contains("`cluade` is not an executor preset"),
            "{e}"
        );
        assert!(e.to_string().contains("line 1"), "{e}");
        let e = toml::from_str::<W>("executor = 3").err().unwrap();
        assert!(e.to_string().contains("a preset's name"), "{e}");
    }

    #[test]
    fn project_fields_name_a_preset_or_a_command() {
        assert_eq!(
            Choice::from_field(" Codex "),
            Some(Choice::Preset(Preset::Codex))
        );
        assert_eq!(
            Choice::from_field("my-agent --fast 'two words'"),
            Some(Choice::Argv(vec![
                "my-agent".into(),
                "--fast".into(),
                "two words".into()
            ]))
        );
        assert_eq!(Choice::from_field("agent 'unclosed"), None);
    }
}
