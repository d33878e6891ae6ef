//! The files braids writes for people, embedded in the binary so a fresh install needs nothing
//! beside the executable. Placeholders are `{name}` and are filled in one pass by
//! [`crate::notify::expand`], so a value can never inject another placeholder.

use crate::notify::expand;

pub const PROJECT: &str = include_str!("../templates/PROJECT.md");
pub const ITERATION: &str = include_str!("../templates/ITERATION.md");
pub const DELIVERABLE: &str = include_str!("../templates/deliverable.md");
pub const AGENTS: &str = include_str!("../templates/AGENTS.md");
pub const STATUS: &str = include_str!("../templates/STATUS.md");
pub const REGISTRY: &str = include_str!("../templates/registry.md");
pub const WORKPLAN: &str = include_str!("../templates/WORKPLAN.md");
pub const CONFIG: &str = include_str!("../templates/config.toml");
pub const PROMPT: &str = include_str!("../templates/prompt.md");

/// Fills a template's placeholders.
pub fn render(template: &str, vars: &[(&str, &str)]) -> String {
    expand(template, vars)
}
