//! The claw-builder side of braids (seed 003): what a cheap loop needs to hand a coder the
//! right context without spending a model's tokens on finding it.
//!
//! - [`tools`]: the seed's exploration tools (`list-slices`, `show-contract`, `slice-deps`,
//!   `find-symbol`), built on ripgrep's own crates (`ignore` walks in parallel honouring
//!   `.gitignore`, `grep` searches), so an agent can ask them instead of reading files.

//! - [`workplan`]: `.claw/WORKPLAN.md` as the loop reads it (tasks in file order, phases).
//! - [`packet`]: the context packet, built by code.
//! - [`loopstate`]: what the loop remembers (paused, runs without progress), pure rules.
//! - [`config`]: `.claw/config.yaml`.
//! - [`status_block`]: a coder's `CLAW_STATUS` block, its report.
//! - [`turn_events`]: the events of a turn as the seed shows them.

pub mod config;
pub mod loopstate;
pub mod packet;
pub mod status_block;
pub mod tasks;
pub mod tools;
pub mod turn_events;

/// The plan, relative to the project root.
pub const WORKPLAN: &str = ".claw/WORKPLAN.md";

/// Whether a project runs the claw loop: `Pipeline: claw` in PROJECT.md, or, with no
/// Pipeline field, a `.claw/WORKPLAN.md` (one `stat`).
pub fn is_claw(config: &crate::format::project::ProjectConfig, root: &std::path::Path) -> bool {
    match config.field("pipeline") {
        Some(f) => f
            .value
            .trim()
            .trim_matches('`')
            .eq_ignore_ascii_case("claw"),
        None => crate::tracker::claw::plan_file(root).is_file(),
    }
}
