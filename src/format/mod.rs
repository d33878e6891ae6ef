//! Tolerant readers and byte-preserving writers for the markdown files people and agents edit:
//! registry.md, PROJECT.md, ITERATION.md and deliverables (CONTRACTS 1.1–1.4).
//!
//! Readers take text and return a typed model plus line-numbered [`crate::diag::Diagnostic`]s;
//! they never panic and never fail on a missing or unknown field (3.9). Structure (tables,
//! headings, lists, code blocks) comes from pulldown-cmark, so `Status: complete` inside a code
//! block is never mistaken for a field. Writers change one thing and leave every other byte.

pub mod deliverable;
pub mod fields;
pub mod iteration;
mod md;
pub mod project;
pub mod registry;

/// Decodes file bytes for the readers: strips a UTF-8 BOM and replaces invalid UTF-8, so binary
/// garbage yields diagnostics rather than an error.
pub fn decode(bytes: &[u8]) -> std::borrow::Cow<'_, str> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    String::from_utf8_lossy(bytes)
}
