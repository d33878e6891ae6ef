//! The br adapter as the tick uses it: reads answered from br's JSONL export when that file
//! says what br's database says, everything else (and every write) through the `br` program.
//!
//! Why: a tick over many projects spent nearly all its time starting `br list` and `br ready`
//! (two processes per project, ~13 ms each plus start-up, up to 62 MB each), while br rewrites
//! `.beads/issues.jsonl` after every mutation, claims included. [`br_jsonl`] computes what those
//! two commands print from that file. br stays the authority: claims, closes and releases go
//! through [`Br`], and a wrong read costs at most a refused claim, which the tick already
//! handles by trying the next candidate.
//!
//! When is the file trusted ([`trust_jsonl`], a pure function of what the `.beads` directory
//! holds)? br commits a mutation to its database, writes `last-touched`, rewrites the JSONL,
//! then records the export in its database (so the database's mtime ends a few milliseconds
//! after the JSONL's). So the JSONL is trusted when it and the database were last written
//! within [`IN_STEP`] of each other and nothing was touched after the export. A database
//! written later (a mutation not yet or never exported: `--no-auto-flush`, a flush that
//! failed, one in progress) or a JSONL written later (a `git pull` br has not imported yet)
//! means asking br. So does any configuration that moves or changes what br reads: a
//! `BEADS_CACHE_DIR`, a `redirect` to another `.beads`, non-default file names in
//! `metadata.json`, `no-db` or auto-flush settings in `config.yaml`, a `policy.yaml` (custom
//! ready statuses). `BRAIDS_BR_READS=br`
//! turns the read path off (every read asks br).
//!
//! Known blind spot: br never exports ephemeral beads (wisps), so an epic whose only open child
//! is ephemeral reads as ready here. Any exported bead that depends on a wisp is caught (the
//! dependency points outside the file) and sent to br.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use chrono::{DateTime, Utc};

use super::beads_cli::sort_by_urgency;
use super::br::Br;
use super::br_jsonl;
use super::{ClaimOutcome, Tracker, TrackerError, TrackerKind, TrackerOptions};
use crate::model::{Bead, BeadId};

/// How far apart the JSONL's and the database's last writes may be for the JSONL to be taken
/// as the database's export: br's bookkeeping after an export takes milliseconds, and br takes
/// longer than this to start, run and commit another mutation.
pub const IN_STEP: Duration = Duration::from_secs(1);

/// The files of a `.beads` directory the decision looks at.
const JSONL: &str = "issues.jsonl";
const DB: &str = "beads.db";
const WAL: &str = "beads.db-wal";
const LAST_TOUCHED: &str = "last-touched";
const METADATA: &str = "metadata.json";
const CONFIG: &str = "config.yaml";
const POLICY: &str = "policy.yaml";
const REDIRECT: &str = "redirect";

/// What [`trust_jsonl`] looks at: modification times, and the two small settings files.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BeadsDir {
    pub jsonl: Option<SystemTime>,
    pub db: Option<SystemTime>,
    pub wal: Option<SystemTime>,
    pub last_touched: Option<SystemTime>,
    pub metadata: Option<String>,
    pub config: Option<String>,
    pub policy: bool,
    /// A `redirect` file: br reads another `.beads` directory.
    pub redirect: bool,
    /// `BEADS_CACHE_DIR` is set: br keeps its database (and `last-touched`) elsewhere.
    pub cache_dir_env: bool,
    /// `BRAIDS_BR_READS=br`: every read asks br.
    pub br_only: bool,
    /// `br` is on PATH. Without it no claim can be made, so reads go to br too, and the
    /// project reports br missing as it always has.
    pub br_installed: bool,
}

impl BeadsDir {
    /// Reads the directory's state (the I/O edge of [`trust_jsonl`]).
    pub fn read(beads: &Path) -> BeadsDir {
        let mtime = |name: &str| {
            std::fs::metadata(beads.join(name))
                .ok()
                .filter(|m| m.is_file())
                .and_then(|m| m.modified().ok())
        };
        let text = |name: &str| std::fs::read_to_string(beads.join(name)).ok();
        BeadsDir {
            jsonl: mtime(JSONL),
            db: mtime(DB),
            wal: mtime(WAL),
            last_touched: mtime(LAST_TOUCHED),
            metadata: text(METADATA),
            config: text(CONFIG),
            policy: beads.join(POLICY).exists(),
            redirect: beads.join(REDIRECT).exists(),
            cache_dir_env: std::env::var_os("BEADS_CACHE_DIR").is_some_and(|v| !v.is_empty()),
            br_only: std::env::var("BRAIDS_BR_READS").is_ok_and(|v| v.trim() == "br"),
            br_installed: br_installed(),
        }
    }
}

/// Whether `br` is on PATH, looked up once per process.
fn br_installed() -> bool {
    static ON_PATH: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON_PATH.get_or_init(|| super::on_path("br"))
}

/// Whether the JSONL export says what br's database says; `Err` says why br must be asked.
pub fn trust_jsonl(d: &BeadsDir) -> Result<(), String> {
    if d.br_only {
        return Err("BRAIDS_BR_READS=br".into());
    }
    if !d.br_installed {
        return Err("br is not on PATH".into());
    }
    if d.cache_dir_env {
        return Err("BEADS_CACHE_DIR moves br's database".into());
    }
    if d.policy {
        return Err("policy.yaml may change what ready means".into());
    }
    if d.redirect {
        return Err("a redirect sends br to another .beads".into());
    }
    if let Some(m) = &d.metadata {
        let v: serde_json::Value =
            serde_json::from_str(m).map_err(|_| "metadata.json is not JSON".to_string())?;
        for (key, default) in [("database", DB), ("jsonl_export", JSONL)] {
            match v.get(key).and_then(|x| x.as_str()).map(str::trim) {
                None | Some("") => {}
                Some(name) if name == default => {}
                Some(name) => return Err(format!("metadata.json names {key} `{name}`")),
            }
        }
    }
    if let Some(c) = &d.config {
        let settings = c
            .lines()
            .map(|l| l.split('#').next().unwrap_or("").to_ascii_lowercase())
            .filter(|l| l.contains("flush") || l.contains("no-db") || l.contains("no_db"));
        if settings.count() > 0 {
            return Err("config.yaml changes how br keeps its JSONL".into());
        }
    }
    let jsonl = d.jsonl.ok_or("no issues.jsonl")?;
    let db = d.db.ok_or("no database yet")?;
    let db = d.wal.map_or(db, |w| w.max(db));
    let apart = |a: SystemTime, b: SystemTime| a.duration_since(b).unwrap_or_default();
    if apart(db, jsonl) > IN_STEP {
        return Err("the database changed after the JSONL was written".into());
    }
    if apart(jsonl, db) > IN_STEP {
        return Err("the JSONL changed after br last read it (not imported yet)".into());
    }
    if d.last_touched.is_some_and(|t| t > jsonl) {
        return Err("a bead was touched after the JSONL was written".into());
    }
    Ok(())
}

/// How this run's reads were answered.
#[derive(Debug, Clone)]
enum Reading {
    /// From the JSONL: `br list --all` and `br ready` as br would print them now.
    Native {
        list: Vec<Bead>,
        ready: Vec<Bead>,
        /// When a deferral ends and `ready` may change without the file changing.
        until: Option<DateTime<Utc>>,
    },
    /// Through `br`, and why.
    Br(String),
}

/// br, with reads from its JSONL export when [`trust_jsonl`] allows.
pub struct BrNative {
    br: Br,
    beads: PathBuf,
    /// The first read's answer, shared by `list` and `ready`; a write through this adapter
    /// clears it.
    reading: Mutex<Option<Arc<Reading>>>,
}

impl BrNative {
    pub fn new(opts: TrackerOptions) -> Self {
        BrNative {
            beads: opts.project.join(".beads"),
            br: Br::new(opts),
            reading: Mutex::new(None),
        }
    }

    fn reading(&self) -> Arc<Reading> {
        let mut slot = self.reading.lock().unwrap_or_else(|e| e.into_inner());
        Arc::clone(slot.get_or_insert_with(|| Arc::new(read(&self.beads, Utc::now()))))
    }

    /// After a write, reads go back to the files (or br).
    fn wrote<T>(&self, result: T) -> T {
        *self.reading.lock().unwrap_or_else(|e| e.into_inner()) = None;
        result
    }
}

/// Reads the export if it can be trusted (the I/O edge): the directory's state first, then the
/// file, so a rewrite in between only makes the answer newer.
fn read(beads: &Path, now: DateTime<Utc>) -> Reading {
    // Read as br would be run: never through a link in its folder.
    super::links::remove_links(beads);
    if let Err(why) = trust_jsonl(&BeadsDir::read(beads)) {
        return Reading::Br(why);
    }
    let text = match std::fs::read(beads.join(JSONL)) {
        Ok(b) => match String::from_utf8(b) {
            Ok(t) => t,
            Err(_) => return Reading::Br("issues.jsonl is not UTF-8".into()),
        },
        Err(e) => return Reading::Br(format!("cannot read issues.jsonl: {e}")),
    };
    match br_jsonl::parse(&text) {
        Ok(g) => {
            let mut ready = g.ready(now);
            // As the br adapter orders br's answer.
            sort_by_urgency(&mut ready);
            Reading::Native {
                list: g.list(),
                ready,
                until: g.next_change(now),
            }
        }
        Err(e) => Reading::Br(format!("issues.jsonl: {e}")),
    }
}

impl Tracker for BrNative {
    fn kind(&self) -> TrackerKind {
        TrackerKind::Br
    }

    fn ready(&self) -> Result<Vec<Bead>, TrackerError> {
        match &*self.reading() {
            Reading::Native { ready, .. } => Ok(ready.clone()),
            Reading::Br(_) => self.br.ready(),
        }
    }

    fn list(&self) -> Result<Vec<Bead>, TrackerError> {
        match &*self.reading() {
            Reading::Native { list, .. } => Ok(list.clone()),
            Reading::Br(_) => self.br.list(),
        }
    }

    fn ready_among(&self, _listed: &[Bead]) -> Result<Vec<Bead>, TrackerError> {
        self.ready()
    }

    fn show(&self, id: &BeadId) -> Result<Option<Bead>, TrackerError> {
        self.br.show(id)
    }

    fn claim(&self, id: &BeadId, actor: &str) -> Result<ClaimOutcome, TrackerError> {
        self.wrote(self.br.claim(id, actor))
    }

    fn close(&self, id: &BeadId, reason: &str) -> Result<(), TrackerError> {
        self.wrote(self.br.close(id, reason))
    }

    fn block(&self, id: &BeadId, reason: &str) -> Result<(), TrackerError> {
        self.wrote(self.br.block(id, reason))
    }

    fn reopen(&self, id: &BeadId, reason: &str) -> Result<(), TrackerError> {
        self.wrote(self.br.reopen(id, reason))
    }

    fn create(&self, title: &str, description: &str, priority: u8) -> Result<BeadId, TrackerError> {
        self.wrote(self.br.create(title, description, priority))
    }

    fn add_dependency(&self, id: &BeadId, on: &BeadId) -> Result<(), TrackerError> {
        self.wrote(self.br.add_dependency(id, on))
    }

    fn state_files(&self) -> Vec<PathBuf> {
        [
            JSONL,
            DB,
            WAL,
            LAST_TOUCHED,
            METADATA,
            CONFIG,
            POLICY,
            REDIRECT,
        ]
        .iter()
        .map(|n| self.beads.join(n))
        .collect()
    }

    fn answers_valid(&self) -> Option<Option<DateTime<Utc>>> {
        match self
            .reading
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_deref()
        {
            Some(Reading::Native { until, .. }) => Some(*until),
            // br's answers may hang on what the files do not show (external dependencies).
            _ => None,
        }
    }

    fn read_path(&self) -> Option<String> {
        match self
            .reading
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_deref()
        {
            Some(Reading::Native { .. }) => Some("native (issues.jsonl)".into()),
            Some(Reading::Br(why)) => Some(format!("br ({why})")),
            None => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(ms: u64) -> Option<SystemTime> {
        Some(
            SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000) + Duration::from_millis(ms),
        )
    }

    fn synced() -> BeadsDir {
        BeadsDir {
            last_touched: t(0),
            jsonl: t(10),
            db: t(30),
            wal: t(40),
            metadata: Some(r#"{"database": "beads.db", "jsonl_export": "issues.jsonl"}"#.into()),
            config: Some("# issue_prefix: t\nissue_prefix: t\n".into()),
            br_installed: true,
            ..BeadsDir::default()
        }
    }

    #[test]
    fn c5_1_the_jsonl_is_trusted_only_when_it_is_the_databases_export() {
        assert_eq!(trust_jsonl(&synced()), Ok(()), "br's own write order");
        let with = |f: &dyn Fn(&mut BeadsDir)| {
            let mut d = synced();
            f(&mut d);
            trust_jsonl(&d)
        };
        assert!(
            with(&|d| d.wal = t(5_000)).is_err(),
            "an unexported mutation"
        );
        assert!(
            with(&|d| d.jsonl = t(9_000)).is_err(),
            "a pull not imported yet"
        );
        assert!(
            with(&|d| d.last_touched = t(20)).is_err(),
            "touched, not flushed"
        );
        assert!(with(&|d| d.jsonl = None).is_err());
        assert!(with(&|d| d.db = None).is_err());
        assert_eq!(with(&|d| d.wal = None), Ok(()));
        assert_eq!(with(&|d| d.metadata = None), Ok(()));
        assert!(with(&|d| d.metadata = Some("{\"database\": \"x.db\"}".into())).is_err());
        assert!(with(&|d| d.metadata = Some("{".into())).is_err());
        assert!(with(&|d| d.config = Some("no-auto-flush: true\n".into())).is_err());
        assert!(with(&|d| d.config = Some("no_db: true # x\n".into())).is_err());
        assert_eq!(with(&|d| d.config = Some("# no-db: true\n".into())), Ok(()));
        assert!(with(&|d| d.policy = true).is_err());
        assert!(with(&|d| d.redirect = true).is_err());
        assert!(with(&|d| d.cache_dir_env = true).is_err());
        assert!(with(&|d| d.br_only = true).is_err());
        assert!(with(&|d| d.br_installed = false).is_err());
    }
}
