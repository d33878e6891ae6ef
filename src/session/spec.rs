//! What both backends do alike before and around a spawn: check the request, name a label's
//! files, open the log.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use super::{SessionError, SpawnSpec};
use crate::model::{BeadId, SessionLabel};

/// The file stem for a label: `<slug>_<bead>`. Reversible because a slug has no `_`; it cannot
/// contain `/` or `:`, start with `.`, or be `..`, because slug and bead id are validated, and
/// that is checked again here rather than trusted.
pub(crate) fn file_stem(label: &SessionLabel) -> Result<String, SessionError> {
    let stem = format!("{}_{}", label.slug(), label.bead());
    let safe = stem.as_bytes()[0].is_ascii_alphanumeric()
        && stem
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if safe {
        Ok(stem)
    } else {
        Err(SessionError::Spawn {
            label: label.to_string(),
            detail: "the label cannot be turned into a safe file name".into(),
        })
    }
}

/// The label a file stem names, if it is exactly the stem of that label.
pub(crate) fn label_from_stem(stem: &str) -> Option<SessionLabel> {
    let (slug, bead) = stem.split_once('_')?;
    let label = SessionLabel::new(slug, BeadId::new(bead).ok()?).ok()?;
    (file_stem(&label).ok()? == stem).then_some(label)
}

/// Checks a spawn request before anything is started.
pub(crate) fn validate_spec(spec: &SpawnSpec) -> Result<(), SessionError> {
    let fail = |detail: String| SessionError::Spawn {
        label: spec.label.to_string(),
        detail,
    };
    match spec.argv.first() {
        None => return Err(fail("the worker command is empty".into())),
        Some(p) if p.is_empty() => return Err(fail("the worker program name is empty".into())),
        Some(_) => {}
    }
    if spec.argv.iter().any(|a| a.as_bytes().contains(&0)) {
        return Err(fail("a worker argument contains a NUL byte".into()));
    }
    for (k, v) in &spec.env {
        let k = k.as_bytes();
        if k.is_empty() || k.contains(&b'=') || k.contains(&0) || v.as_bytes().contains(&0) {
            return Err(fail(format!(
                "environment variable `{}` has an invalid name or value",
                String::from_utf8_lossy(k)
            )));
        }
    }
    if !spec.cwd.is_dir() {
        return Err(fail(format!(
            "working directory {} is not a directory",
            spec.cwd.display()
        )));
    }
    Ok(())
}

/// Creates the log's directory and opens it for appending.
pub(crate) fn open_log(log: &Path) -> io::Result<File> {
    if let Some(dir) = log.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    use std::os::unix::fs::OpenOptionsExt;
    // What an agent printed may hold secrets: the person's alone.
    OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(log)
}

pub(crate) fn remove_if_present(path: &Path) -> io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c2_5_label_file_names_are_safe_and_reversible() {
        for raw in [
            "project:my-app:my-app-x1y",
            "project:a:b.c_d",
            "project:0:A..B",
            "project:a-:x_y_z",
        ] {
            let label = SessionLabel::parse(raw).unwrap();
            let stem = file_stem(&label).unwrap();
            assert!(
                !stem.contains('/') && !stem.contains(':') && !stem.starts_with('.'),
                "{stem}"
            );
            assert_ne!(stem, "..");
            assert_eq!(label_from_stem(&stem), Some(label), "{stem}");
        }
        for bad in [
            "noseparator",
            "A_b",
            "a_",
            "_b",
            "a_b c",
            "a_ b",
            "a_../x",
            "..",
            "a_.x",
        ] {
            assert_eq!(label_from_stem(bad), None, "{bad}");
        }
    }
}
