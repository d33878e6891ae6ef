//! `braids tools slice-deps <slice>`: what a slice imports and who imports it, read from the
//! import statements of JavaScript/TypeScript, Python and Rust files.

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

use serde::Serialize;

use super::slices::{self, Slice};

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SliceDeps {
    pub slice: String,
    /// Other slices by name, files outside any slice by path (no extension), packages by
    /// name.
    pub imports_from: Vec<String>,
    /// Slices by name, files outside any slice by path.
    pub imported_by: Vec<String>,
}

/// The import targets a file's text names, as written: `./store/windowStore`, `react`,
/// `..shared.types`, `crate::retry::store`.
pub fn imports_of(text: &str, ext: &str) -> Vec<String> {
    let quoted = |l: &str, after: &str| -> Option<String> {
        let rest = &l[l.find(after)? + after.len()..];
        let rest = rest.trim_start().trim_start_matches('(').trim_start();
        let q = rest
            .chars()
            .next()
            .filter(|c| matches!(c, '\'' | '"' | '`'))?;
        let body = &rest[1..];
        Some(body[..body.find(q)?].to_string())
    };
    let mut out = Vec::new();
    for l in text.lines().map(str::trim) {
        match ext {
            "ts" | "tsx" | "js" | "jsx" | "mjs" | "cjs" | "vue" | "svelte" => {
                let spec = if l.starts_with("import") || l.starts_with("export") {
                    quoted(l, " from ").or_else(|| quoted(l, "import"))
                } else {
                    None
                }
                .or_else(|| quoted(l, "require"));
                out.extend(spec);
            }
            "py" => {
                if let Some(rest) = l.strip_prefix("from ") {
                    out.extend(rest.split_whitespace().next().map(String::from));
                } else if let Some(rest) = l.strip_prefix("import ") {
                    out.extend(
                        rest.split(',')
                            .filter_map(|m| m.split_whitespace().next().map(String::from)),
                    );
                }
            }
            "rs" => {
                let l = l.strip_prefix("pub ").unwrap_or(l);
                if let Some(rest) = l.strip_prefix("use ") {
                    let path: String = rest
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                        .collect();
                    out.push(path.trim_end_matches(':').to_string());
                }
            }
            _ => {}
        }
    }
    out
}

/// Where an import target lies, as a path under `root` when it is one (relative imports,
/// `@/` and `~/` meaning `src/`, Rust's `crate::`, Python's dots), else `None` (a package).
fn resolve(root: &Path, file: &Path, spec: &str, ext: &str) -> Option<PathBuf> {
    let dir = file.parent()?;
    let joined = if ext == "rs" {
        let rest = spec.strip_prefix("crate::")?;
        root.join("src").join(rest.replace("::", "/"))
    } else if ext == "py" {
        let dots = spec.chars().take_while(|c| *c == '.').count();
        if dots == 0 {
            root.join(spec.replace('.', "/"))
        } else {
            let mut base = dir.to_path_buf();
            for _ in 1..dots {
                base.pop();
            }
            base.join(spec[dots..].replace('.', "/"))
        }
    } else if spec.starts_with('.') {
        dir.join(spec)
    } else if let Some(rest) = spec.strip_prefix("@/").or_else(|| spec.strip_prefix("~/")) {
        root.join("src").join(rest)
    } else {
        return None;
    };
    Some(normalize(&joined))
}

fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// What a resolved target is called: its slice's name, else its path without extension.
fn name_of(root: &Path, target: &Path, all: &[(Slice, PathBuf)]) -> String {
    if let Some((s, _)) = all.iter().find(|(_, abs)| target.starts_with(abs)) {
        return s.name.clone();
    }
    let rel = target.strip_prefix(root).unwrap_or(target);
    rel.with_extension("").display().to_string()
}

/// The slice's imports and importers.
pub fn slice_deps(root: &Path, name: &str) -> anyhow::Result<SliceDeps> {
    let root = &normalize(&std::path::absolute(root)?);
    let me = slices::find(root, name)?;
    let mine = root.join(&me.dir);
    let all: Vec<(Slice, PathBuf)> = slices::list_slices(root)
        .into_iter()
        .map(|s| {
            let abs = root.join(&s.dir);
            (s, abs)
        })
        .collect();
    let per_file = super::walk::files(root, |path| {
        let ext = path.extension()?.to_str()?.to_string();
        let text = std::fs::read_to_string(path).ok()?;
        let specs = imports_of(&text, &ext);
        (!specs.is_empty()).then_some((ext, specs))
    });
    let mut from = BTreeSet::new();
    let mut by = BTreeSet::new();
    for (path, (ext, specs)) in &per_file {
        let inside = path.starts_with(&mine);
        for spec in specs {
            let target = resolve(root, path, spec, ext);
            match (inside, &target) {
                (true, Some(t)) if !t.starts_with(&mine) => {
                    from.insert(name_of(root, t, &all));
                }
                (true, None) => {
                    from.insert(spec.split('/').next().unwrap_or(spec).to_string());
                }
                (false, Some(t)) if t.starts_with(&mine) => {
                    by.insert(name_of(root, path, &all));
                }
                _ => {}
            }
        }
    }
    Ok(SliceDeps {
        slice: me.name,
        imports_from: from.into_iter().collect(),
        imported_by: by.into_iter().collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn import_statements_of_three_languages() {
        let ts = "import { a } from '../../store/windowStore';\nimport x from \"react\";\nimport './side.css';\nconst y = require('lodash');\nexport * from './hooks/useSnap';\n// import nothing here\n";
        assert_eq!(
            imports_of(ts, "ts"),
            [
                "../../store/windowStore",
                "react",
                "./side.css",
                "lodash",
                "./hooks/useSnap"
            ]
        );
        let py = "from ..shared import types\nimport os, sys as s\nfrom app.store import x\n";
        assert_eq!(imports_of(py, "py"), ["..shared", "os", "sys", "app.store"]);
        let rs =
            "use crate::retry::store::Store;\npub use super::x;\nuse std::path::{Path, PathBuf};\n";
        assert_eq!(
            imports_of(rs, "rs"),
            ["crate::retry::store::Store", "super::x", "std::path"]
        );
    }
}
