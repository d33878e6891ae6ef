//! Field extraction shared by PROJECT.md and ITERATION.md: `- **Status:** active`,
//! `**Status:** active`, `Status: active`, `- Status: active`, and two-column field tables.
//! (Implemented by the formats work.)

/// One `Key: value` field as written, with its 1-based line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    /// Lowercased, spaces and `_` turned to `-`: `max-workers`, `workertimeout` → see `key_is`.
    pub key: String,
    pub value: String,
    pub line: usize,
}
