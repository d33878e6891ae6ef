//! `braids iteration new|activate|complete`.

use std::path::PathBuf;

use anyhow::{anyhow, bail, Context, Result};
use serde::Serialize;

use crate::atomic;
use crate::format::{self, iteration, registry::RegistryEntry};
use crate::model::{IterationStatus, NotificationEvent};
use crate::paths::Paths;
use crate::templates;

use super::{IterationArgs, IterationCommand, Output, EXIT_OK};

#[derive(Debug, Serialize)]
pub struct IterationReport {
    pub project: String,
    pub number: u32,
    pub path: PathBuf,
    pub status: IterationStatus,
    pub changed: bool,
}

impl Output for IterationReport {
    fn text(&self) -> String {
        let verb = if self.changed {
            "is now"
        } else {
            "was already"
        };
        format!(
            "{} iteration {} {verb} {} ({})\n",
            self.project,
            self.number,
            self.status,
            self.path.display()
        )
    }
}

/// The registry row of `slug`, or a sentence saying how to create it.
pub fn locate(paths: &Paths, slug: &str) -> Result<RegistryEntry> {
    let reg = format::registry::read_registry(paths);
    reg.value
        .entries
        .into_iter()
        .find(|e| e.slug == slug)
        .ok_or_else(|| {
            anyhow!(
                "no project {slug} in {}; create it with `braids new {slug}`",
                paths.registry().display()
            )
        })
}

pub fn run(paths: &Paths, cmd: IterationCommand) -> Result<i32> {
    let (report, json) = match cmd {
        IterationCommand::New(a) => (new(paths, &a)?, a.json),
        IterationCommand::Activate(a) => (flip(paths, &a, IterationStatus::Active)?, a.json),
        IterationCommand::Complete(a) => (flip(paths, &a, IterationStatus::Complete)?, a.json),
    };
    report.print(json);
    Ok(EXIT_OK)
}

fn new(paths: &Paths, a: &IterationArgs) -> Result<IterationReport> {
    let entry = locate(paths, &a.slug)?;
    let dirs = iteration::list_iteration_dirs(&entry.path);
    let number = a
        .number
        .unwrap_or_else(|| dirs.iter().map(|(n, _)| *n).max().unwrap_or(0) + 1);
    if let Some((_, d)) = dirs.iter().find(|(n, _)| *n == number) {
        bail!(
            "iteration {number} of {} already exists at {}",
            a.slug,
            d.display()
        );
    }
    let dir = entry
        .path
        .join(".braids/iterations")
        .join(format!("{number:03}"));
    let file = dir.join("ITERATION.md");
    let n = number.to_string();
    atomic::write(
        &file,
        templates::render(templates::ITERATION, &[("number", &n)]).as_bytes(),
    )?;
    Ok(IterationReport {
        project: a.slug.clone(),
        number,
        path: file,
        status: IterationStatus::Planning,
        changed: true,
    })
}

fn flip(paths: &Paths, a: &IterationArgs, to: IterationStatus) -> Result<IterationReport> {
    let entry = locate(paths, &a.slug)?;
    let its = iteration::read_iterations(&entry.path).value;
    let active: Vec<u32> = its
        .iter()
        .filter(|i| i.status == Some(IterationStatus::Active))
        .map(|i| i.number)
        .collect();
    let number = match (a.number, to) {
        (Some(n), _) => n,
        (None, IterationStatus::Complete) => match active.as_slice() {
            [n] => *n,
            [] => bail!("{} has no active iteration to complete; name one: `braids iteration complete {} <N>`", a.slug, a.slug),
            _ => bail!("{} has several active iterations ({active:?}); name the one to complete", a.slug),
        },
        (None, _) => its.iter().filter(|i| i.status == Some(IterationStatus::Planning)).map(|i| i.number).min().ok_or_else(|| anyhow!("{} has no iteration in planning; create one with `braids iteration new {}`", a.slug, a.slug))?,
    };
    let it = its
        .iter()
        .find(|i| i.number == number)
        .ok_or_else(|| anyhow!("{} has no iteration {number}", a.slug))?;
    let file = it.dir.join("ITERATION.md");
    if it.status == Some(to) {
        return Ok(IterationReport {
            project: a.slug.clone(),
            number,
            path: file,
            status: to,
            changed: false,
        });
    }
    if it.status == Some(IterationStatus::Complete) {
        bail!("iteration {number} of {} is complete and may not be modified (4.5); plan a new one with `braids iteration new {}`", a.slug, a.slug);
    }
    if to == IterationStatus::Active {
        if let Some(other) = active.iter().find(|n| **n != number) {
            bail!("iteration {other} of {} is active; at most one iteration may be active (1.3): complete it first with `braids iteration complete {} {other}`", a.slug, a.slug);
        }
    }
    iteration::write_status(&file, to)
        .with_context(|| format!("cannot update {}", file.display()))?;
    let verb = if to == IterationStatus::Active {
        "Activate"
    } else {
        "Complete"
    };
    crate::git::commit_paths(
        &entry.path,
        std::slice::from_ref(&it.dir),
        &format!("{verb} iteration {number}"),
    )?;
    notify_flip(paths, &entry, number, to);
    Ok(IterationReport {
        project: a.slug.clone(),
        number,
        path: file,
        status: to,
        changed: true,
    })
}

/// iteration-start / iteration-complete, when the project asks for them (3.8).
fn notify_flip(paths: &Paths, entry: &RegistryEntry, number: u32, to: IterationStatus) {
    let Ok(loaded) = crate::config::Config::load(&paths.config()) else {
        return;
    };
    let md = entry.path.join(".braids/PROJECT.md");
    let Ok(bytes) = std::fs::read(&md) else {
        return;
    };
    let project = format::project::parse_project(&format::decode(&bytes), &md).value;
    let (event, text) = match to {
        IterationStatus::Active => (
            NotificationEvent::IterationStart,
            format!("[{}] Iteration {number} started.", entry.slug),
        ),
        _ => (
            NotificationEvent::IterationComplete,
            format!("[{}] Iteration {number} is complete.", entry.slug),
        ),
    };
    let notifier = crate::notify::from_config(&loaded.config.notify);
    crate::notify::send(&notifier, &project, &entry.slug, event, None, &text);
}
