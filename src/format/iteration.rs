//! ITERATION.md and iteration directories (CONTRACTS 1.3). (Implemented by the formats work.)
use std::path::PathBuf;

use crate::model::{BeadId, IterationStatus};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Iteration {
    pub number: u32,
    /// The directory as named (`001`, `1`, `12`).
    pub dir: PathBuf,
    pub status: Option<IterationStatus>,
    pub stories: Vec<Story>,
    pub guardrails: Option<String>,
    pub notes: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Story {
    pub id: BeadId,
    pub title: String,
    pub line: usize,
}
