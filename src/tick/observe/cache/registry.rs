//! The registry's entry in the observation cache: its rows as the last full run read them.
//!
//! Parsing a registry of 10,000 rows takes about 30 ms, before any project can be observed.
//! The rows depend on the file and on how paths expand (`~`, `$BRAIDS_HOME`), so the entry
//! keeps the file's fingerprint and both directories, and is only written for a registry with
//! no findings (a registry with problems is parsed every run, so its diagnostics are always
//! fresh). It is filed under the empty slug, which no project can have.

use std::path::{Path, PathBuf};

use super::codec::{Dec, Enc};
use crate::format::registry::RegistryEntry;
use crate::model::{Priority, ProjectStatus};
use crate::system::paths::Paths;

/// The registry's key in the cache file's index.
pub const KEY: &str = "";

/// What the rows were read under: the file's fingerprint, and how `~` and `$BRAIDS_HOME`
/// expand.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryKey {
    pub fingerprint: u64,
    pub home: PathBuf,
    pub braids_home: PathBuf,
}

impl RegistryKey {
    pub fn new(fingerprint: u64, paths: &Paths) -> RegistryKey {
        RegistryKey {
            fingerprint,
            home: paths.home.clone(),
            braids_home: paths.braids_home.clone(),
        }
    }
}

pub fn encode(key: &RegistryKey, entries: &[RegistryEntry]) -> Vec<u8> {
    let mut e = Enc(Vec::with_capacity(64 + entries.len() * 96));
    e.u64_fixed(key.fingerprint);
    path(&mut e, &key.home);
    path(&mut e, &key.braids_home);
    e.uint(entries.len() as u64);
    for r in entries {
        e.str(&r.slug);
        e.choice(ProjectStatus::ALL, r.status.as_ref());
        e.choice(Priority::ALL, r.priority.as_ref());
        path(&mut e, &r.path);
        e.str(&r.raw_path);
        e.uint(r.line as u64);
    }
    e.0
}

/// The rows, when the bytes are a registry entry read under `key`.
pub fn decode(bytes: &[u8], key: &RegistryKey) -> Option<Vec<RegistryEntry>> {
    let mut d = Dec::new(bytes);
    let theirs = RegistryKey {
        fingerprint: d.u64_fixed()?,
        home: read_path(&mut d)?,
        braids_home: read_path(&mut d)?,
    };
    if &theirs != key {
        return None;
    }
    let n = d.len()?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(RegistryEntry {
            slug: d.string()?,
            status: d.choice(ProjectStatus::ALL)?,
            priority: d.choice(Priority::ALL)?,
            path: read_path(&mut d)?,
            raw_path: d.string()?,
            line: usize::try_from(d.uint()?).ok()?,
        });
    }
    d.is_empty().then_some(out)
}

fn path(e: &mut Enc, p: &Path) {
    e.bytes(p.as_os_str().as_encoded_bytes());
}

fn read_path(d: &mut Dec<'_>) -> Option<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    Some(PathBuf::from(std::ffi::OsStr::from_bytes(d.bytes()?)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c5_2_registry_rows_round_trip_only_under_the_same_key() {
        let paths = Paths::new(PathBuf::from("/home/u"), None);
        let key = RegistryKey::new(7, &paths);
        let rows = vec![RegistryEntry {
            slug: "web".into(),
            status: Some(ProjectStatus::Active),
            priority: None,
            path: PathBuf::from("/home/u/Projects/web"),
            raw_path: "~/Projects/web".into(),
            line: 9,
        }];
        let bytes = encode(&key, &rows);
        assert_eq!(decode(&bytes, &key), Some(rows));
        assert_eq!(
            decode(&bytes, &RegistryKey::new(8, &paths)),
            None,
            "the file changed"
        );
        let elsewhere = Paths::new(PathBuf::from("/home/u"), Some("/srv"));
        assert_eq!(
            decode(&bytes, &RegistryKey::new(7, &elsewhere)),
            None,
            "BRAIDS_HOME moved"
        );
        for cut in 0..bytes.len() {
            assert_eq!(decode(&bytes[..cut], &key), None);
        }
    }
}
