//! `[workspace]`: where workspaces live, the pool of finished ones, and what each gets (see
//! [`crate::workspace::pool`] and [`crate::workspace::ready`]). PROJECT.md's `Copy:`,
//! `Setup:`, `Sparse:` and `Keep:` override the installation's for one project.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::format::project::ProjectConfig;
use crate::workspace::{Keep, Pooling};

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default)]
pub struct WorkspaceConfig {
    /// Where workspaces live (`~/…` or absolute); `<braids dir>/workspaces` when empty.
    pub root: String,
    /// The most finished workspaces a project keeps for reuse; MaxWorkers + 1 when unset, 0
    /// for none.
    pub pool: Option<usize>,
    /// The ignored build caches a reused workspace keeps: a list (gitignore syntax), or
    /// `"ignored"` for every ignored path.
    pub keep: KeepSetting,
    /// Untracked files of the project copied into each workspace, besides `.worktreeinclude`.
    pub copy: Vec<String>,
    /// The argv run once in each new workspace (`["npm", "ci"]`).
    pub setup: Vec<String>,
    #[serde(deserialize_with = "super::span")]
    pub setup_timeout: Duration,
    /// Run `setup` in a reused workspace too.
    pub setup_on_reuse: bool,
    /// Only these paths are checked out (monorepos); empty for all.
    pub sparse: Vec<String>,
    /// A pooled workspace unused this long is removed.
    #[serde(deserialize_with = "super::span")]
    pub idle_max: Duration,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum KeepSetting {
    Paths(Vec<String>),
    Word(String),
}

impl Default for WorkspaceConfig {
    fn default() -> Self {
        let d = Pooling::default();
        WorkspaceConfig {
            root: String::new(),
            pool: None,
            keep: KeepSetting::Paths(
                crate::workspace::pool::KEEP_DEFAULT
                    .iter()
                    .map(|s| s.to_string())
                    .collect(),
            ),
            copy: Vec::new(),
            setup: Vec::new(),
            setup_timeout: d.setup_timeout,
            setup_on_reuse: false,
            sparse: Vec::new(),
            idle_max: d.idle_max,
        }
    }
}

/// One entry of `keep`, `copy` or `sparse` that reaches outside the workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Escaping {
    /// `keep`, `copy` or `sparse` (the config.toml key; PROJECT.md's field is capitalised).
    pub key: &'static str,
    pub entry: String,
    /// PROJECT.md's line, when the entry is there.
    pub line: Option<usize>,
}

impl Escaping {
    /// What is wrong, naming the entry.
    pub fn sentence(&self) -> String {
        format!(
            "the {} entry `{}` reaches outside the workspace, so it is ignored",
            self.key, self.entry
        )
    }

    /// What to do about it.
    pub const FIX: &'static str = "write it relative to the project, without `..`, `~` or a leading `/` (`src/app/` is anchored at the project's top already)";
}

/// Whether an entry names something outside the workspace: `..` anywhere, a home (`~`), or
/// an absolute path. Entries are relative to the project; one with a `/` before its end is
/// already anchored at the project's top, as in a `.gitignore`, so a leading `/` is only ever
/// an absolute path here.
pub fn escapes(entry: &str) -> bool {
    let e = entry.trim().trim_start_matches('!');
    e.starts_with('/')
        || e.starts_with('~')
        || Path::new(e)
            .components()
            .any(|c| matches!(c, std::path::Component::ParentDir))
}

impl WorkspaceConfig {
    /// Where workspaces live, given braids' own default.
    pub fn root(&self, default: PathBuf, home: &Path) -> PathBuf {
        let r = self.root.trim();
        if r.is_empty() {
            return default;
        }
        match r.strip_prefix("~/") {
            Some(rest) => home.join(rest),
            None => PathBuf::from(r),
        }
    }

    /// What `project`'s workspaces keep and get: its PROJECT.md fields over these settings,
    /// entries reaching outside the workspace left out (`braids check` names them).
    pub fn pooling(&self, project: &ProjectConfig) -> Pooling {
        let list = |key: &str, dflt: &[String]| -> Vec<String> {
            match project.field(key) {
                Some(f) => split_list(&f.value),
                None => dflt.to_vec(),
            }
        };
        let keep = match project.field("keep") {
            Some(f) if f.value.trim().eq_ignore_ascii_case("ignored") => Keep::Ignored,
            Some(f) => Keep::Paths(split_list(&f.value)),
            None => match &self.keep {
                KeepSetting::Word(w) if w.trim().eq_ignore_ascii_case("ignored") => Keep::Ignored,
                KeepSetting::Word(w) => Keep::Paths(vec![w.clone()]),
                KeepSetting::Paths(p) => Keep::Paths(p.clone()),
            },
        };
        let keep = match keep {
            Keep::Paths(p) => Keep::Paths(inside(p)),
            k => k,
        };
        let setup = match project.field("setup") {
            Some(f) => shlex::split(&f.value).unwrap_or_default(),
            None => self.setup.clone(),
        };
        Pooling {
            size: self.pool_size(project.max_workers),
            keep,
            copy: inside(list("copy", &self.copy)),
            setup,
            setup_timeout: self.setup_timeout,
            setup_on_reuse: self.setup_on_reuse,
            sparse: inside(list("sparse", &self.sparse)),
            idle_max: self.idle_max,
        }
    }

    /// The most finished workspaces a project with `max_workers` keeps.
    pub fn pool_size(&self, max_workers: u32) -> usize {
        self.pool.unwrap_or(max_workers.max(1) as usize + 1)
    }

    /// The entries of `keep`, `copy` and `sparse` (here and in `project`'s PROJECT.md) that
    /// reach outside the workspace.
    pub fn escaping(&self, project: Option<&ProjectConfig>) -> Vec<Escaping> {
        let mut out = Vec::new();
        let keep: &[String] = match &self.keep {
            KeepSetting::Paths(p) => p,
            KeepSetting::Word(_) => &[],
        };
        for (key, entries) in [
            ("keep", keep),
            ("copy", &self.copy),
            ("sparse", &self.sparse),
        ] {
            out.extend(entries.iter().filter(|e| escapes(e)).map(|e| Escaping {
                key,
                entry: e.clone(),
                line: None,
            }));
        }
        for key in ["keep", "copy", "sparse"] {
            let Some(f) = project.and_then(|p| p.field(key)) else {
                continue;
            };
            out.extend(
                split_list(&f.value)
                    .into_iter()
                    .filter(|e| escapes(e))
                    .map(|entry| Escaping {
                        key,
                        entry,
                        line: Some(f.line),
                    }),
            );
        }
        out
    }
}

/// A PROJECT.md list: entries separated by commas.
fn split_list(v: &str) -> Vec<String> {
    v.split(',')
        .map(|s| s.trim().trim_matches('`').to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

fn inside(entries: Vec<String>) -> Vec<String> {
    entries.into_iter().filter(|e| !escapes(e)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_reaching_outside_the_workspace_are_found() {
        for e in [
            "../x",
            "a/../../b",
            "~/.ssh/",
            "/etc/passwd",
            "/src/app/",
            "!../x",
        ] {
            assert!(escapes(e), "{e}");
        }
        for e in [
            "target/",
            ".env",
            "config/*.local.yml",
            "src/app/",
            "!keep",
            "a..b",
        ] {
            assert!(!escapes(e), "{e}");
        }
    }

    #[test]
    fn project_fields_override_the_installation() {
        let md = "# P\n\nCopy: .env, .env.local\nSetup: npm ci --silent\nKeep: ignored\nSparse: src/app/, ../x\nMaxWorkers: 3\n";
        let p = crate::format::project::parse_project(md, Path::new("/p/.braids/PROJECT.md")).value;
        let c = WorkspaceConfig::default().pooling(&p);
        assert_eq!(c.copy, [".env", ".env.local"]);
        assert_eq!(c.setup, ["npm", "ci", "--silent"]);
        assert_eq!(c.keep, Keep::Ignored);
        assert_eq!(c.sparse, ["src/app/"], "the escaping entry is left out");
        assert_eq!(c.size, 4, "MaxWorkers + 1");
        let esc = WorkspaceConfig::default().escaping(Some(&p));
        assert_eq!(esc.len(), 1);
        assert_eq!(
            (esc[0].key, esc[0].entry.as_str(), esc[0].line),
            ("sparse", "../x", Some(6))
        );
    }
}
