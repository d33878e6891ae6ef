//! The native tracker: a markdown checklist at `<project>/.braids/WORKPLAN.md`, so braids runs
//! with no tracker installed.
//!
//! The file's format (items, metadata, ids) and its byte-preserving edits are
//! [`crate::format::workplan`]. This adapter adds the tracker's rules and the file handling:
//! every write is a read-modify-write under an exclusive `flock` on `.braids/.workplan.lock`
//! and goes through [`crate::system::atomic::write`].

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

use super::beads_cli::one_line;
use super::rules::{check_actor, claim_verdict, closed_is_final};
use super::{ClaimOutcome, Tracker, TrackerError, TrackerKind, TrackerOptions};
use crate::format::workplan::{self as wp, Checklist, Meta};
use crate::model::{Bead, BeadId, BeadStatus};

pub struct Workplan {
    file: PathBuf,
    timeout: Duration,
    /// Reads assign missing ids in memory only and never write the file (`tick --dry-run`,
    /// `braids status`). Writes (claim, close, …) are unaffected.
    read_only: bool,
}

impl Workplan {
    /// The workplan of `project`, waiting up to 30 s for the file lock.
    pub fn new(project: &Path) -> Self {
        Workplan {
            file: project.join(".braids/WORKPLAN.md"),
            timeout: Duration::from_secs(30),
            read_only: false,
        }
    }

    /// Reads never write: ids missing from the file are assigned in memory, exactly as a
    /// writing read would assign them, so the ids reported are the ones a real run writes.
    pub fn read_only(mut self) -> Self {
        self.read_only = true;
        self
    }

    /// A checklist at `file` (the claw loop's `.claw/WORKPLAN.md`), its lock beside it.
    pub fn at(file: PathBuf, timeout: Duration) -> Self {
        Workplan {
            file,
            timeout,
            read_only: false,
        }
    }

    /// As [`Workplan::new`], waiting at most `opts.timeout` for the file lock.
    pub fn with_options(opts: &TrackerOptions) -> Self {
        Workplan {
            timeout: opts.timeout,
            ..Workplan::new(&opts.project)
        }
    }

    pub fn path(&self) -> &Path {
        &self.file
    }

    fn lock_path(&self) -> PathBuf {
        self.file.with_file_name(".workplan.lock")
    }

    fn io(&self, what: &str, e: impl std::fmt::Display) -> TrackerError {
        TrackerError::Io(format!("{what} {}: {e}", self.file.display()))
    }

    /// The file's text; a missing file is an empty checklist.
    fn read_text(&self) -> Result<String, TrackerError> {
        match crate::system::atomic::read(&self.file) {
            Ok(bytes) => {
                String::from_utf8(bytes).map_err(|_| self.io("cannot read", "not UTF-8 text"))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
            Err(e) => Err(self.io("cannot read", e)),
        }
    }

    /// An exclusive lock on `.braids/.workplan.lock`, held until the guard drops.
    fn lock(&self) -> Result<Flock<File>, TrackerError> {
        let path = self.lock_path();
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| self.io("cannot create the directory of", e))?;
        }
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| TrackerError::Io(format!("cannot open {}: {e}", path.display())))?;
        let deadline = Instant::now() + self.timeout;
        let mut pause = Duration::from_millis(1);
        loop {
            match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
                Ok(guard) => return Ok(guard),
                Err((f, Errno::EWOULDBLOCK)) | Err((f, Errno::EINTR)) => {
                    if Instant::now() >= deadline {
                        return Err(TrackerError::Timeout {
                            command: format!("lock {}", path.display()),
                            secs: self.timeout.as_secs().max(1),
                        });
                    }
                    file = f;
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_millis(20));
                }
                Err((_, e)) => {
                    return Err(TrackerError::Io(format!(
                        "cannot lock {}: {e}",
                        path.display()
                    )))
                }
            }
        }
    }

    /// The checklist with every item's id in place, assigning (and writing) ids under the lock
    /// when some are missing.
    fn load(&self) -> Result<Checklist, TrackerError> {
        let text = self.read_text()?;
        let checklist = Checklist::parse(&text);
        if !checklist.needs_ids() {
            return Ok(checklist);
        }
        if self.read_only {
            return Ok(Checklist::parse(&wp::assign_ids(&text)));
        }
        self.transact(|_| Ok(()))?;
        Ok(Checklist::parse(&self.read_text()?))
    }

    /// Read-modify-write under the lock: ids are assigned first, then `edit` may change the
    /// text; the file is rewritten (atomically) only if anything changed.
    fn transact<T>(
        &self,
        edit: impl FnOnce(&mut String) -> Result<T, TrackerError>,
    ) -> Result<T, TrackerError> {
        let _guard = self.lock()?;
        let original = self.read_text()?;
        let mut text = wp::assign_ids(&original);
        let result = edit(&mut text)?;
        if text != original {
            crate::system::atomic::write(&self.file, text.as_bytes())
                .map_err(|e| self.io("cannot write", format!("{e:#}")))?;
        }
        Ok(result)
    }

    /// Changes one item under the lock. `change` sees the item as a bead and returns the new
    /// checkbox state and metadata, or `None` for "leave it".
    fn update_item<T>(
        &self,
        id: &BeadId,
        change: impl FnOnce(&Bead, &Meta) -> Result<(Option<(bool, Meta)>, T), TrackerError>,
    ) -> Result<T, TrackerError> {
        self.transact(|text| {
            let checklist = Checklist::parse(text);
            let item = checklist
                .find(id)
                .ok_or_else(|| TrackerError::NoSuchBead(id.clone()))?;
            let bead = checklist.bead(item);
            let (edit, result) = change(&bead, &item.meta)?;
            if let Some((checked, meta)) = edit {
                *text = wp::rewrite_item(text, item, checked, &meta);
            }
            Ok(result)
        })
    }
}

impl Tracker for Workplan {
    fn kind(&self) -> TrackerKind {
        TrackerKind::Workplan
    }

    fn is_cheap(&self) -> bool {
        true
    }

    fn state_files(&self) -> Vec<PathBuf> {
        vec![self.file.clone()]
    }

    /// The items alone decide every answer; nothing changes them but the file.
    fn answers_valid(&self) -> Option<Option<chrono::DateTime<chrono::Utc>>> {
        Some(None)
    }

    fn ready(&self) -> Result<Vec<Bead>, TrackerError> {
        Ok(ready_of(&self.list()?))
    }

    /// Readiness is a function of the items alone, so the list just read answers it: one read
    /// and parse of the file per tick instead of two, and list and ready agree.
    fn ready_among(&self, listed: &[Bead]) -> Result<Vec<Bead>, TrackerError> {
        Ok(ready_of(listed))
    }

    fn list(&self) -> Result<Vec<Bead>, TrackerError> {
        Ok(self.load()?.into_beads())
    }

    fn show(&self, id: &BeadId) -> Result<Option<Bead>, TrackerError> {
        let checklist = self.load()?;
        Ok(checklist.find(id).map(|i| checklist.bead(i)))
    }

    fn claim(&self, id: &BeadId, actor: &str) -> Result<ClaimOutcome, TrackerError> {
        let actor = check_actor(actor)?;
        let actor = wp::meta_value(&one_line(actor));
        self.update_item(id, |bead, meta| {
            if let Some(verdict) = claim_verdict(bead, &actor) {
                return Ok((None, verdict));
            }
            let mut meta = meta.clone();
            meta.set("status", BeadStatus::InProgress.as_str());
            meta.set("assignee", &actor);
            meta.remove("reason");
            Ok((Some((false, meta)), ClaimOutcome::Claimed))
        })
    }

    fn close(&self, id: &BeadId, _reason: &str) -> Result<(), TrackerError> {
        self.update_item(id, |bead, meta| {
            if bead.status == BeadStatus::Closed {
                return Ok((None, ()));
            }
            // The checkbox carries the state; the assignee stays as a record of who did it.
            let mut meta = meta.clone();
            meta.remove("status");
            meta.remove("reason");
            Ok((Some((true, meta)), ()))
        })
    }

    fn block(&self, id: &BeadId, reason: &str) -> Result<(), TrackerError> {
        self.update_item(id, |bead, meta| match bead.status {
            BeadStatus::Closed => Err(closed_is_final(id, "block")),
            BeadStatus::Blocked => Ok((None, ())),
            _ => {
                let mut meta = meta.clone();
                meta.set("status", BeadStatus::Blocked.as_str());
                let reason = wp::meta_value(&one_line(reason));
                if reason.is_empty() {
                    meta.remove("reason");
                } else {
                    meta.set("reason", &reason);
                }
                Ok((Some((false, meta)), ()))
            }
        })
    }

    fn reopen(&self, id: &BeadId, _reason: &str) -> Result<(), TrackerError> {
        self.update_item(id, |bead, meta| match bead.status {
            BeadStatus::Closed | BeadStatus::Deferred => Ok((None, ())),
            BeadStatus::Open if bead.assignee.is_none() => Ok((None, ())),
            _ => {
                let mut meta = meta.clone();
                meta.remove("status");
                meta.remove("assignee");
                meta.remove("reason");
                Ok((Some((false, meta)), ()))
            }
        })
    }

    fn create(&self, title: &str, description: &str, priority: u8) -> Result<BeadId, TrackerError> {
        let title = wp::meta_safe(&one_line(title));
        if title.is_empty() {
            return Err(TrackerError::Failed {
                command: "create".into(),
                code: "invalid".into(),
                message: "a bead needs a title".into(),
            });
        }
        let id = self.transact(|text| {
            let checklist = Checklist::parse(text);
            let used = checklist.ids();
            let id = wp::fresh_id(&title, checklist.items.len(), &used);
            wp::append_item(text, &id, &title, description, priority);
            if Checklist::parse(text).find(&id).is_none() {
                return Err(self.io(
                    "cannot append an item to",
                    "the file ends inside a code block",
                ));
            }
            Ok(id)
        })?;
        Ok(id)
    }

    fn add_dependency(&self, id: &BeadId, on: &BeadId) -> Result<(), TrackerError> {
        if id == on {
            return Err(TrackerError::Failed {
                command: format!("add_dependency {id} {on}"),
                code: "invalid".into(),
                message: format!("bead {id} cannot depend on itself"),
            });
        }
        self.transact(|text| {
            let checklist = Checklist::parse(text);
            if checklist.find(on).is_none() {
                return Err(TrackerError::NoSuchBead(on.clone()));
            }
            let item = checklist
                .find(id)
                .ok_or_else(|| TrackerError::NoSuchBead(id.clone()))?;
            let mut deps = item.meta.deps();
            if deps.contains(on) {
                return Ok(());
            }
            deps.push(on.clone());
            let mut meta = item.meta.clone();
            meta.set(
                "deps",
                &deps
                    .iter()
                    .map(BeadId::as_str)
                    .collect::<Vec<_>>()
                    .join(" "),
            );
            *text = wp::rewrite_item(text, item, item.checked, &meta);
            Ok(())
        })
    }
}

/// The open items whose dependencies are all closed, most urgent first: file order is the
/// plan's order, and an explicit priority moves an item ahead of it.
fn ready_of(beads: &[Bead]) -> Vec<Bead> {
    let closed: std::collections::HashSet<&BeadId> = beads
        .iter()
        .filter(|b| b.status == BeadStatus::Closed)
        .map(|b| &b.id)
        .collect();
    let mut ready: Vec<Bead> = beads
        .iter()
        .filter(|b| {
            b.status == BeadStatus::Open && b.dependencies.iter().all(|d| closed.contains(d))
        })
        .cloned()
        .collect();
    ready.sort_by_key(|b| b.priority);
    ready
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_only_reads_report_the_ids_a_writing_read_writes() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(".braids/WORKPLAN.md");
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        let text = "# Plan\n\n- [ ] one\n- [x] two\n- [ ] three <!-- id:wp-333 -->\n";
        std::fs::write(&file, text).unwrap();
        let ro = Workplan::new(dir.path()).read_only();
        let seen: Vec<Bead> = ro.list().unwrap();
        assert_eq!(seen.len(), 3);
        assert_eq!(ro.ready().unwrap().len(), 2);
        assert_eq!(ro.ready_among(&seen).unwrap(), ro.ready().unwrap());
        assert_eq!(std::fs::read_to_string(&file).unwrap(), text, "not written");
        assert!(
            !file.with_file_name(".workplan.lock").exists(),
            "not even locked"
        );
        let written = Workplan::new(dir.path()).list().unwrap();
        assert_eq!(written, seen, "the same ids");
        assert_ne!(std::fs::read_to_string(&file).unwrap(), text);
    }
}
