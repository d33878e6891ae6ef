//! `braids init`: creates the installation, idempotently, never overwriting a file.

use std::path::PathBuf;

use anyhow::{Context, Result};
use serde::Serialize;

use crate::atomic;
use crate::paths::Paths;
use crate::templates;

use super::{Output, EXIT_OK};

#[derive(Debug, Serialize)]
pub struct InitReport {
    pub created: Vec<PathBuf>,
    pub kept: Vec<PathBuf>,
}

impl Output for InitReport {
    fn text(&self) -> String {
        let mut o = String::new();
        for p in &self.created {
            o.push_str(&format!("created {}\n", p.display()));
        }
        for p in &self.kept {
            o.push_str(&format!("exists  {}\n", p.display()));
        }
        o
    }
}

/// Creates what is missing; used by `init` and, implicitly, by `new`.
pub fn ensure(paths: &Paths) -> Result<InitReport> {
    let mut r = InitReport {
        created: vec![],
        kept: vec![],
    };
    for dir in [&paths.braids_dir, &paths.logs_dir(), &paths.braids_home] {
        if dir.is_dir() {
            r.kept.push(dir.clone());
        } else {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            r.created.push(dir.clone());
        }
    }
    for (path, text) in [
        (paths.registry(), templates::REGISTRY),
        (paths.config(), templates::CONFIG),
        (paths.status(), templates::STATUS),
    ] {
        if atomic::write_new(&path, text.as_bytes())? {
            r.created.push(path);
        } else {
            r.kept.push(path);
        }
    }
    Ok(r)
}

pub fn run(paths: &Paths, json: bool) -> Result<i32> {
    ensure(paths)?.print(json);
    Ok(EXIT_OK)
}
