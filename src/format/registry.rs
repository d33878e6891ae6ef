//! registry.md (CONTRACTS 1.1). (Implemented by the formats work.)
use std::path::PathBuf;

use crate::model::{Priority, ProjectStatus};

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Registry {
    pub entries: Vec<RegistryEntry>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryEntry {
    pub slug: String,
    /// `None` when the cell is not a valid status (a diagnostic says which).
    pub status: Option<ProjectStatus>,
    pub priority: Option<Priority>,
    /// Expanded: `~` and `$BRAIDS_HOME` resolved (4.1, 4.2).
    pub path: PathBuf,
    pub raw_path: String,
    pub line: usize,
}
