//! `braids tools list-slices`.

use std::path::{Path, PathBuf};

use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Slice {
    pub name: String,
    /// The slice's directory, relative to the root.
    pub dir: PathBuf,
}

/// Every directory under `root` holding a `slice.md`, by name.
pub fn list_slices(root: &Path) -> Vec<Slice> {
    let found = super::walk::files(root, |p| (p.file_name()? == "slice.md").then_some(()));
    let mut out: Vec<Slice> = found
        .into_iter()
        .filter_map(|(p, ())| {
            let dir = p.parent()?;
            Some(Slice {
                name: dir.file_name()?.to_string_lossy().into_owned(),
                dir: dir.strip_prefix(root).unwrap_or(dir).to_path_buf(),
            })
        })
        .collect();
    out.sort_by(|a, b| (&a.name, &a.dir).cmp(&(&b.name, &b.dir)));
    out
}

/// The slice named `name`, or a sentence listing the ones there are.
pub fn find(root: &Path, name: &str) -> anyhow::Result<Slice> {
    let all = list_slices(root);
    if let Some(s) = all.iter().find(|s| s.name == name) {
        return Ok(s.clone());
    }
    let names: Vec<&str> = all.iter().map(|s| s.name.as_str()).collect();
    anyhow::bail!(
        "no slice named {name} under {} (a slice is a directory with a slice.md); slices: {}",
        root.display(),
        if names.is_empty() {
            "none".to_string()
        } else {
            names.join(", ")
        }
    )
}
