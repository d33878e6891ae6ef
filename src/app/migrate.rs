//! `braids migrate --to md|edn`: the whole installation — the registry, every project's
//! settings and every iteration — converted to one form (CONTRACTS 1.7). Every file is
//! converted and checked before anything is written; one that cannot be carried whole stops the
//! command with nothing changed. Then each new file is written (temp + rename) and the file it
//! replaces removed.

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use serde::Serialize;

use crate::format::edn::convert;
use crate::format::{self, iteration, layout};
use crate::system::paths::Paths;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Form {
    Md,
    Edn,
}

impl Form {
    fn of(file: &Path) -> Form {
        if layout::is_edn(file) {
            Form::Edn
        } else {
            Form::Md
        }
    }
}

/// One file written in place of another.
#[derive(Debug, Serialize)]
pub struct Converted {
    pub from: PathBuf,
    pub to: PathBuf,
    pub text: String,
}

#[derive(Debug, Serialize)]
pub struct Migrated {
    pub to: Form,
    pub dry_run: bool,
    pub files: Vec<Converted>,
}

/// Converts every file of the installation that is not in `to` already; with `dry_run`, only
/// says what it would write.
pub fn migrate(paths: &Paths, to: Form, dry_run: bool) -> Result<Migrated> {
    let plan = plan(paths, to)?;
    if !dry_run {
        for f in &plan {
            crate::system::atomic::write(&f.to, f.text.as_bytes())?;
        }
        for f in &plan {
            if f.from != f.to {
                std::fs::remove_file(&f.from)
                    .map_err(|e| anyhow::anyhow!("cannot remove {}: {e}", f.from.display()))?;
            }
        }
        crate::tick::orchestrator_state::wake(paths, crate::tick::orchestrator_state::WAKE_WAIT);
    }
    Ok(Migrated {
        to,
        dry_run,
        files: plan,
    })
}

fn read(file: &Path) -> Result<String> {
    let bytes = crate::system::atomic::read(file)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", file.display()))?;
    Ok(format::decode(&bytes).into_owned())
}

/// Every conversion, or every reason one cannot be made.
fn plan(paths: &Paths, to: Form) -> Result<Vec<Converted>> {
    let reg = layout::registry_file(paths);
    if !reg.is_file() {
        bail!(
            "{} does not exist; run `braids init` to create the installation",
            reg.display()
        );
    }
    let mut out = Vec::new();
    let mut refused = Vec::new();
    let mut add = |from: PathBuf, target: PathBuf, made: Result<String, String>| match made {
        Ok(text) => out.push(Converted {
            from,
            to: target,
            text,
        }),
        Err(why) => refused.push(why),
    };
    let reg_text = read(&reg)?;
    if Form::of(&reg) != to {
        let (target, made) = match to {
            Form::Md => (
                paths.registry(),
                convert::registry_to_md(&reg_text, &reg, paths),
            ),
            Form::Edn => (
                paths.registry().with_extension("edn"),
                convert::registry_to_edn(&reg_text, &reg, paths),
            ),
        };
        add(reg.clone(), target, made);
    }
    let entries = layout::parse_registry(&reg_text, &reg, paths).value.entries;
    for e in &entries {
        let file = layout::project_file(&e.path);
        if file.is_file() && Form::of(&file) != to {
            let text = read(&file)?;
            let (target, made) = match to {
                Form::Md => (
                    e.path.join(layout::PROJECT_FILES[0]),
                    convert::project_to_md(&text, &file),
                ),
                Form::Edn => (
                    e.path.join(layout::PROJECT_FILES[1]),
                    convert::project_to_edn(&text, &file),
                ),
            };
            add(file, target, made);
        }
        for (name, dir) in iteration::list_iteration_dirs(&e.path) {
            let file = layout::iteration_file(&dir);
            if !file.is_file() || Form::of(&file) == to {
                continue;
            }
            let text = read(&file)?;
            let (target, made) = match to {
                Form::Md => (
                    dir.join("ITERATION.md"),
                    convert::iteration_to_md(&text, &file, name),
                ),
                Form::Edn => (
                    dir.join("iteration.edn"),
                    convert::iteration_to_edn(&text, &file, name),
                ),
            };
            add(file, target, made);
        }
    }
    if !refused.is_empty() {
        bail!(
            "nothing was changed: {} file(s) cannot be converted whole:\n{}",
            refused.len(),
            refused.join("\n")
        );
    }
    Ok(out)
}
