//! The claw-builder side of braids (seed 003): what a cheap loop needs to hand a coder the
//! right context without spending a model's tokens on finding it.
//!
//! - [`tools`]: the seed's exploration tools (`list-slices`, `show-contract`, `slice-deps`,
//!   `find-symbol`), built on ripgrep's own crates (`ignore` walks in parallel honouring
//!   `.gitignore`, `grep` searches), so an agent can ask them instead of reading files.

pub mod tools;
