//! The native WORKPLAN.md tracker. (Implemented by the tracker work.)
use std::path::{Path, PathBuf};

pub struct Workplan {
    #[allow(dead_code)]
    file: PathBuf,
}

impl Workplan {
    pub fn new(project: &Path) -> Self {
        Workplan { file: project.join(".braids/WORKPLAN.md") }
    }
}
