//! The agent's own session for a bead, kept beside its prompt (never in the project) while
//! the bead waits for a person's answer, so the next attempt continues the conversation the
//! question came from instead of starting cold.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::Preset;
use crate::cost::Usage;

/// A session to resume.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionRecord {
    pub preset: String,
    pub id: String,
    /// What the CLI had counted for the session so far: resumed runs report totals.
    #[serde(default)]
    pub usage: Usage,
}

fn file(work_dir: &Path) -> PathBuf {
    work_dir.join("agent-session.json")
}

/// The session a bead's last attempt left to resume with `preset`, if any.
pub fn load(work_dir: &Path, preset: Preset) -> Option<SessionRecord> {
    let bytes = crate::system::atomic::read(&file(work_dir)).ok()?;
    serde_json::from_slice::<SessionRecord>(&bytes)
        .ok()
        .filter(|r| r.preset == preset.name() && !r.id.trim().is_empty())
}

/// Keeps the session for the next attempt.
pub fn save(work_dir: &Path, record: &SessionRecord) -> anyhow::Result<()> {
    let bytes = serde_json::to_vec_pretty(record)?;
    crate::system::atomic::write(&file(work_dir), &bytes)
}

/// Forgets it: the bead moved on.
pub fn forget(work_dir: &Path) {
    let _ = std::fs::remove_file(file(work_dir));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_is_kept_for_its_own_preset_only() {
        let dir = tempfile::tempdir().unwrap();
        let r = SessionRecord {
            preset: "codex".into(),
            id: "t-1".into(),
            usage: Usage::default(),
        };
        save(dir.path(), &r).unwrap();
        assert_eq!(load(dir.path(), Preset::Codex), Some(r));
        assert_eq!(load(dir.path(), Preset::ClaudeCode), None);
        forget(dir.path());
        assert_eq!(load(dir.path(), Preset::Codex), None);
    }
}
