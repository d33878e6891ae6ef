//! The native tracker: a markdown checklist at `<project>/.braids/WORKPLAN.md`, so braids runs
//! with no tracker installed.
//!
//! ```markdown
//! # WORKPLAN
//!
//! ## Phase 1: Foundation
//!
//! - [x] Set up project structure <!-- id:wp-k2f -->
//! - [ ] Create base window component <!-- id:wp-3kq, status:in_progress, assignee:braids -->
//!   Indented lines under an item are its description.
//! - [ ] Add window snapping <!-- id:wp-9za, priority:1, deps:wp-3kq, slice:windows -->
//! ```
//!
//! * An item is a `-`/`*`/`+` checkbox line indented by at most three columns (a checkbox
//!   indented two or more columns right under another item belongs to that item's
//!   description). Items inside fenced code blocks are not tasks. A UTF-8 BOM and CRLF line
//!   endings are tolerated and kept.
//! * `[x]`/`[X]` is closed. An unchecked item is open unless its metadata says
//!   `status:in_progress`, `blocked` or `deferred`.
//! * Metadata is the trailing `<!-- key:value, key:value -->` comment. braids reads `id`,
//!   `status`, `assignee`, `priority` (0–4, default 2), `deps` (space-separated ids) and
//!   `reason`; other keys (`slice`, `touches`, …) are kept as they are. A segment without a
//!   colon continues the previous value (`touches:a,b`).
//! * Every item gets a stable id, `wp-` plus three base-36 characters from a hash of its title
//!   and position (longer on collision), written into its metadata the first time braids reads
//!   a file lacking one. From then on the id lives in the file, so retitling or reordering
//!   items keeps it.
//! * Every write is a read-modify-write under an exclusive `flock` on `.braids/.workplan.lock`
//!   and goes through [`crate::atomic::write`]; it changes only the affected item's line (an
//!   item's checkbox and its metadata comment), or appends lines for `create`. Every other byte
//!   of the file is preserved.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

use super::rules::{check_actor, claim_verdict, closed_is_final};
use super::{ClaimOutcome, Tracker, TrackerError, TrackerKind, TrackerOptions};
use crate::model::{Bead, BeadId, BeadStatus};

const DEFAULT_PRIORITY: u8 = 2;

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

    /// The file's text; a missing file is an empty plan.
    fn read_text(&self) -> Result<String, TrackerError> {
        match crate::atomic::read(&self.file) {
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

    /// The plan with every item's id in place, assigning (and writing) ids under the lock
    /// when some are missing.
    fn load(&self) -> Result<Plan, TrackerError> {
        let text = self.read_text()?;
        let plan = Plan::parse(&text);
        if !plan.needs_ids() {
            return Ok(plan);
        }
        if self.read_only {
            return Ok(Plan::parse(&assign_ids(&text)));
        }
        self.transact(|_| Ok(()))?;
        Ok(Plan::parse(&self.read_text()?))
    }

    /// Read-modify-write under the lock: ids are assigned first, then `edit` may change the
    /// text; the file is rewritten (atomically) only if anything changed.
    fn transact<T>(
        &self,
        edit: impl FnOnce(&mut String) -> Result<T, TrackerError>,
    ) -> Result<T, TrackerError> {
        let _guard = self.lock()?;
        let original = self.read_text()?;
        let mut text = assign_ids(&original);
        let result = edit(&mut text)?;
        if text != original {
            crate::atomic::write(&self.file, text.as_bytes())
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
            let plan = Plan::parse(text);
            let item = plan
                .find(id)
                .ok_or_else(|| TrackerError::NoSuchBead(id.clone()))?;
            let bead = plan.bead(item);
            let (edit, result) = change(&bead, &item.meta)?;
            if let Some((checked, meta)) = edit {
                *text = rewrite_item(text, item, checked, &meta);
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
        let plan = self.load()?;
        Ok(plan.items.iter().map(|i| plan.bead(i)).collect())
    }

    fn show(&self, id: &BeadId) -> Result<Option<Bead>, TrackerError> {
        let plan = self.load()?;
        Ok(plan.find(id).map(|i| plan.bead(i)))
    }

    fn claim(&self, id: &BeadId, actor: &str) -> Result<ClaimOutcome, TrackerError> {
        let actor = check_actor(actor)?;
        let actor = meta_value(actor);
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
                let reason = meta_value(reason);
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
        let title = meta_safe(&super::beads_cli::one_line(title));
        if title.is_empty() {
            return Err(TrackerError::Failed {
                command: "create".into(),
                code: "invalid".into(),
                message: "a bead needs a title".into(),
            });
        }
        let id = self.transact(|text| {
            let plan = Plan::parse(text);
            let used = plan.ids();
            let id = fresh_id(&title, plan.items.len(), &used);
            let nl = if text.contains("\r\n") { "\r\n" } else { "\n" };
            if text.trim_start_matches('\u{feff}').trim().is_empty() {
                text.push_str(&format!("# WORKPLAN{nl}{nl}"));
            } else if !text.ends_with('\n') {
                text.push_str(nl);
            }
            let mut meta = Meta::default();
            meta.set("id", id.as_str());
            if priority.min(4) != DEFAULT_PRIORITY {
                meta.set("priority", &priority.min(4).to_string());
            }
            text.push_str(&format!("- [ ] {title} {}{nl}", meta.render()));
            let desc: Vec<&str> = description.lines().collect();
            let last = desc.iter().rposition(|l| !l.trim().is_empty());
            for line in desc.iter().take(last.map_or(0, |n| n + 1)) {
                let line = line.trim_end();
                if line.is_empty() {
                    text.push_str(nl);
                } else {
                    text.push_str(&format!("  {line}{nl}"));
                }
            }
            if Plan::parse(text).find(&id).is_none() {
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
            let plan = Plan::parse(text);
            if plan.find(on).is_none() {
                return Err(TrackerError::NoSuchBead(on.clone()));
            }
            let item = plan
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
            *text = rewrite_item(text, item, item.checked, &meta);
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

/// The trailing `<!-- key:value, … -->` comment, in its original key order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Meta {
    entries: Vec<(String, String)>,
}

impl Meta {
    /// Reads a comment body; `None` when it is not `key:value` metadata (an ordinary comment).
    fn parse(body: &str) -> Option<Meta> {
        let mut entries: Vec<(String, String)> = Vec::new();
        for segment in body.split(',') {
            let keyed = segment.split_once(':').filter(|(k, _)| {
                let k = k.trim();
                k.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
                    && k.chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            });
            match (keyed, entries.last_mut()) {
                (Some((k, v)), _) => entries.push((k.trim().to_string(), v.trim().to_string())),
                (None, Some((_, v))) => {
                    v.push(',');
                    v.push_str(segment.trim());
                }
                (None, None) if segment.trim().is_empty() => {}
                (None, None) => return None,
            }
        }
        (!entries.is_empty()).then_some(Meta { entries })
    }

    fn get(&self, key: &str) -> Option<&str> {
        self.entries
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
            .map(|(_, v)| v.as_str())
            .filter(|v| !v.is_empty())
    }

    fn set(&mut self, key: &str, value: &str) {
        match self
            .entries
            .iter_mut()
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
        {
            Some(e) => e.1 = value.to_string(),
            None => self.entries.push((key.to_string(), value.to_string())),
        }
    }

    fn remove(&mut self, key: &str) {
        self.entries.retain(|(k, _)| !k.eq_ignore_ascii_case(key));
    }

    fn render(&self) -> String {
        let body: Vec<String> = self
            .entries
            .iter()
            .map(|(k, v)| format!("{k}:{v}"))
            .collect();
        format!("<!-- {} -->", body.join(", "))
    }

    fn id(&self) -> Option<BeadId> {
        self.get("id").and_then(|v| BeadId::new(v).ok())
    }

    fn deps(&self) -> Vec<BeadId> {
        let mut deps = Vec::new();
        for raw in self
            .get("deps")
            .unwrap_or("")
            .split(|c: char| c.is_whitespace() || c == ',')
        {
            if let Ok(id) = BeadId::new(raw) {
                if !deps.contains(&id) {
                    deps.push(id);
                }
            }
        }
        deps
    }
}

/// A value that can sit inside the metadata comment: one line, no commas (they separate
/// entries) and nothing that would end the comment.
fn meta_value(s: &str) -> String {
    meta_safe(&super::beads_cli::one_line(s))
        .replace(',', ";")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

fn meta_safe(s: &str) -> String {
    s.replace("<!--", "").replace("-->", "").trim().to_string()
}

/// One checklist item as found in the text.
#[derive(Debug, Clone)]
struct Item {
    checked: bool,
    /// Byte offset of the character between the brackets.
    check_at: usize,
    title: String,
    meta: Meta,
    /// Byte range of the metadata comment, when the line has one.
    meta_span: Option<(usize, usize)>,
    /// Where a new metadata comment goes: the end of the line's text, before trailing blanks.
    insert_at: usize,
    description: String,
}

/// The items of a WORKPLAN.md text, in file order.
#[derive(Debug, Clone, Default)]
struct Plan {
    items: Vec<Item>,
}

/// Columns of leading whitespace (a tab counts to the next multiple of four) and the rest.
fn indentation(line: &str) -> (usize, &str) {
    let mut cols = 0;
    for (i, c) in line.char_indices() {
        match c {
            ' ' => cols += 1,
            '\t' => cols += 4 - cols % 4,
            _ => return (cols, &line[i..]),
        }
    }
    (cols, "")
}

/// An opening or closing code fence: its character and run length.
fn fence(rest: &str) -> Option<(char, usize)> {
    let c = rest.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let run = rest.chars().take_while(|x| *x == c).count();
    (run >= 3 && !(c == '`' && rest[run..].contains('`'))).then_some((c, run))
}

/// `- [ ] rest` (also `*`, `+`, `[x]`, `[X]`): the checkbox character's offset in `rest` and
/// what follows the closing bracket.
fn checkbox(rest: &str) -> Option<(usize, char, &str)> {
    let mut chars = rest.char_indices();
    let (_, marker) = chars.next()?;
    if !matches!(marker, '-' | '*' | '+') {
        return None;
    }
    let after_marker = &rest[1..];
    let spaces = after_marker.len() - after_marker.trim_start_matches([' ', '\t']).len();
    if spaces == 0 {
        return None;
    }
    let open = 1 + spaces;
    let b = rest.as_bytes();
    if b.len() < open + 3 || b[open] != b'[' || b[open + 2] != b']' {
        return None;
    }
    let state = b[open + 1] as char;
    if !matches!(state, ' ' | 'x' | 'X') {
        return None;
    }
    let tail = &rest[open + 3..];
    if !(tail.is_empty() || tail.starts_with([' ', '\t'])) {
        return None;
    }
    Some((open + 1, state, tail))
}

impl Plan {
    fn parse(text: &str) -> Plan {
        let mut items: Vec<Item> = Vec::new();
        // The item whose description is being collected, and its (raw) description lines.
        let mut open_item: Option<usize> = None;
        let mut desc: Vec<&str> = Vec::new();
        // (fence char, run length, whether it belongs to the open item's description)
        let mut in_fence: Option<(char, usize, bool)> = None;
        let mut pos = 0;
        let finish = |items: &mut Vec<Item>, open_item: Option<usize>, desc: &mut Vec<&str>| {
            if let Some(i) = open_item {
                items[i].description = dedent(desc);
            }
            desc.clear();
        };
        while pos < text.len() {
            let end = text[pos..].find('\n').map_or(text.len(), |n| pos + n);
            let mut start = pos;
            if pos == 0 && text.starts_with('\u{feff}') {
                start = '\u{feff}'.len_utf8();
            }
            let line_end = if end > start && text.as_bytes()[end - 1] == b'\r' {
                end - 1
            } else {
                end
            };
            let line = &text[start..line_end];
            pos = end + 1;
            let (indent, rest) = indentation(line);
            let blank = rest.trim().is_empty();

            if let Some((c, run, owned)) = in_fence {
                if indent <= 3 + if owned { 2 } else { 0 }
                    && fence(rest).is_some_and(|(fc, fr)| fc == c && fr >= run)
                    && rest.trim_end().chars().all(|x| x == c)
                {
                    in_fence = None;
                }
                if owned {
                    desc.push(line);
                }
                continue;
            }
            let in_description = open_item.is_some() && (blank || indent >= 2);
            if let Some((c, run)) = fence(rest).filter(|_| indent <= 3 || in_description) {
                in_fence = Some((c, run, in_description));
                if in_description {
                    desc.push(line);
                } else {
                    finish(&mut items, open_item.take(), &mut desc);
                }
                continue;
            }
            if in_description {
                desc.push(line);
                continue;
            }
            finish(&mut items, open_item.take(), &mut desc);
            if indent > 3 {
                continue;
            }
            let Some((check_rel, state, tail)) = checkbox(rest) else {
                continue;
            };
            let rest_at = line_end - line.len() + (line.len() - rest.len());
            let check_at = rest_at + check_rel;
            let tail_at = line_end - tail.len();
            let trimmed = tail.trim_end();
            let insert_at = tail_at + trimmed.len();
            let mut title_part = trimmed;
            let mut meta = Meta::default();
            let mut meta_span = None;
            if trimmed.ends_with("-->") {
                if let Some(open) = trimmed.rfind("<!--") {
                    let body = &trimmed[open + 4..trimmed.len() - 3];
                    if let Some(m) = Meta::parse(body) {
                        meta = m;
                        meta_span = Some((tail_at + open, insert_at));
                        title_part = &trimmed[..open];
                    }
                }
            }
            items.push(Item {
                checked: state != ' ',
                check_at,
                title: title_part.trim().to_string(),
                meta,
                meta_span,
                insert_at,
                description: String::new(),
            });
            open_item = Some(items.len() - 1);
        }
        finish(&mut items, open_item, &mut desc);
        Plan { items }
    }

    /// Whether some item lacks a valid id or shares one with an earlier item.
    fn needs_ids(&self) -> bool {
        let mut seen = std::collections::HashSet::new();
        self.items
            .iter()
            .any(|i| i.meta.id().is_none_or(|id| !seen.insert(id)))
    }

    fn ids(&self) -> std::collections::HashSet<BeadId> {
        self.items.iter().filter_map(|i| i.meta.id()).collect()
    }

    /// The first item carrying `id`.
    fn find(&self, id: &BeadId) -> Option<&Item> {
        self.items.iter().find(|i| i.meta.id().as_ref() == Some(id))
    }

    fn bead(&self, item: &Item) -> Bead {
        let status = if item.checked {
            BeadStatus::Closed
        } else {
            match item.meta.get("status").map(BeadStatus::parse) {
                Some(
                    s @ (BeadStatus::InProgress
                    | BeadStatus::Blocked
                    | BeadStatus::Deferred
                    | BeadStatus::Unknown),
                ) => s,
                // An unchecked box is open whatever stale metadata says.
                _ => BeadStatus::Open,
            }
        };
        let priority = item
            .meta
            .get("priority")
            .and_then(|p| p.trim().trim_start_matches(['P', 'p']).parse::<u8>().ok())
            .map_or(DEFAULT_PRIORITY, |p| p.min(4));
        Bead {
            id: item
                .meta
                .id()
                .unwrap_or_else(|| BeadId::new("wp-unassigned").expect("valid id")),
            title: item.title.clone(),
            status,
            priority,
            description: item.description.clone(),
            dependencies: item.meta.deps(),
            assignee: item.meta.get("assignee").map(str::to_string),
        }
    }
}

/// Removes the indentation common to the non-blank lines and trailing blank lines.
fn dedent(lines: &[&str]) -> String {
    let last = match lines.iter().rposition(|l| !l.trim().is_empty()) {
        Some(n) => n,
        None => return String::new(),
    };
    let lines = &lines[..=last];
    let common = lines
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| indentation(l).0)
        .min()
        .unwrap_or(0);
    lines
        .iter()
        .map(|l| {
            let mut cols = 0;
            let mut cut = l.len();
            for (i, c) in l.char_indices() {
                if cols >= common || !(c == ' ' || c == '\t') {
                    cut = i;
                    break;
                }
                cols += if c == '\t' { 4 - cols % 4 } else { 1 };
            }
            l[cut.min(l.len())..].trim_end()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `text` with `item`'s checkbox set to `checked` and its metadata replaced by `meta`; nothing
/// outside that line changes.
fn rewrite_item(text: &str, item: &Item, checked: bool, meta: &Meta) -> String {
    let mut out = String::with_capacity(text.len() + 64);
    let mark = match (checked, item.checked) {
        (true, true) => &text[item.check_at..item.check_at + 1], // keep `x` or `X`
        (true, false) => "x",
        (false, _) => " ",
    };
    out.push_str(&text[..item.check_at]);
    out.push_str(mark);
    match item.meta_span {
        Some((from, to)) => {
            let between = &text[item.check_at + 1..from];
            if meta.entries.is_empty() {
                // No metadata left: drop the comment and the blank before it.
                out.push_str(between.trim_end());
            } else {
                out.push_str(between);
                out.push_str(&meta.render());
            }
            out.push_str(&text[to..]);
        }
        None => {
            out.push_str(&text[item.check_at + 1..item.insert_at]);
            if !meta.entries.is_empty() {
                out.push(' ');
                out.push_str(&meta.render());
            }
            out.push_str(&text[item.insert_at..]);
        }
    }
    out
}

/// Gives every item without a valid, unique id a fresh one, editing only those items' lines.
fn assign_ids(text: &str) -> String {
    let plan = Plan::parse(text);
    if !plan.needs_ids() {
        return text.to_string();
    }
    let mut used = plan.ids();
    let mut seen = std::collections::HashSet::new();
    // Edit from the last item up so earlier offsets stay valid.
    let mut assignments = Vec::new();
    for (n, item) in plan.items.iter().enumerate() {
        match item.meta.id() {
            Some(id) if seen.insert(id.clone()) => {}
            _ => assignments.push(n),
        }
    }
    let mut fresh = Vec::new();
    for &n in &assignments {
        let id = fresh_id(&plan.items[n].title, n, &used);
        used.insert(id.clone());
        fresh.push((n, id));
    }
    let mut out = text.to_string();
    for (n, id) in fresh.into_iter().rev() {
        let item = &plan.items[n];
        match item.meta_span {
            // No id key yet: slip `id:…, ` in front of the existing entries, touching nothing else.
            Some((from, _))
                if item.meta.get("id").is_none()
                    && !item
                        .meta
                        .entries
                        .iter()
                        .any(|(k, _)| k.eq_ignore_ascii_case("id")) =>
            {
                let body = from + "<!--".len();
                let at = body + (out[body..].len() - out[body..].trim_start().len());
                out.insert_str(at, &format!("id:{id}, "));
            }
            _ => {
                let mut meta = item.meta.clone();
                meta.set("id", id.as_str());
                out = rewrite_item(&out, item, item.checked, &meta);
            }
        }
    }
    out
}

/// `wp-` + three base-36 characters of a hash of the title and position; on a collision the
/// hash is salted, and after a few tries the id grows a character.
fn fresh_id(title: &str, position: usize, used: &std::collections::HashSet<BeadId>) -> BeadId {
    for attempt in 0u64.. {
        let len = 3 + (attempt / 16) as usize;
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for byte in title
            .trim()
            .bytes()
            .chain(position.to_le_bytes())
            .chain(attempt.to_le_bytes())
        {
            h ^= u64::from(byte);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        let mut s = String::new();
        for _ in 0..len {
            s.push(char::from_digit((h % 36) as u32, 36).expect("base 36"));
            h /= 36;
        }
        let id = BeadId::new(&format!("wp-{s}")).expect("valid id");
        if !used.contains(&id) {
            return id;
        }
    }
    unreachable!("the id space is unbounded")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Removes what `assign_ids` adds: ` <!-- id:wp-x -->` comments and `id:wp-x, ` entries.
    pub(super) fn strip_ids(s: &str) -> String {
        let mut out = s.to_string();
        let mut from = 0;
        while let Some(rel) = out[from..].find("id:wp-") {
            let at = from + rel;
            let id_end = at
                + 6
                + out[at + 6..]
                    .chars()
                    .take_while(char::is_ascii_alphanumeric)
                    .count();
            if out[id_end..].starts_with(", ") {
                out.replace_range(at..id_end + 2, "");
            } else if out[id_end..].starts_with(" -->") && out[..at].ends_with(" <!-- ") {
                out.replace_range(at - 6..id_end + 4, "");
            } else {
                from = id_end;
                continue;
            }
            from = at.saturating_sub(6);
        }
        out
    }

    #[test]
    fn parses_items_descriptions_and_fences() {
        let text = "\u{feff}# Plan\r\n\r\n## Phase 1\r\n- [ ] First <!-- priority:1, touches:a,b -->\r\n  line one\r\n\r\n    indented more\r\n* [X] Second\r\n```\r\n- [ ] not a task\r\n```\r\n+ [x] Third <!-- just a note -->\r\n  - [ ] sub task is description\r\n-[ ] no space\r\n- [] no box\r\n";
        let plan = Plan::parse(text);
        let titles: Vec<&str> = plan.items.iter().map(|i| i.title.as_str()).collect();
        assert_eq!(titles, ["First", "Second", "Third <!-- just a note -->"]);
        assert_eq!(plan.items[0].description, "line one\n\n  indented more");
        assert_eq!(plan.items[0].meta.get("touches"), Some("a,b"));
        assert_eq!(plan.items[2].description, "- [ ] sub task is description");
        assert!(plan.items[1].checked && plan.items[2].checked && !plan.items[0].checked);
        let assigned = assign_ids(text);
        assert_eq!(strip_ids(&assigned), text, "only ids were added");
        let again = Plan::parse(&assigned);
        assert!(!again.needs_ids());
        assert_eq!(
            again.items[0].meta.get("touches"),
            Some("a,b"),
            "unknown keys survive"
        );
    }

    /// Markdown-ish lines, including the awkward ones.
    fn line() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        prop_oneof![
            Just("- [ ] task".to_string()),
            Just("* [x] done <!-- slice:a, touches:b,c -->".to_string()),
            Just("+ [X] Done too\t".to_string()),
            Just("- [ ]".to_string()),
            Just("  - [ ] nested".to_string()),
            Just("   - [ ] three in".to_string()),
            Just("    - [ ] four in".to_string()),
            Just("- [ ] note <!-- a plain note -->".to_string()),
            Just("- [ ] empty <!-- -->".to_string()),
            Just("- [ ] odd <!-- k:v --> tail".to_string()),
            Just("- [] not a box".to_string()),
            Just("-[ ] not a box".to_string()),
            Just("```".to_string()),
            Just("~~~~".to_string()),
            Just("  ```rust".to_string()),
            Just("## Phase".to_string()),
            Just("".to_string()),
            Just("  indented description".to_string()),
            Just("\tTabbed".to_string()),
            "[a-hj-zé✓ \\[\\]x:,<!>-]{0,24}".prop_map(|s| s),
            "[a-z ]{0,10}".prop_map(|s| format!("- [ ] {s}")),
        ]
    }

    fn document() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        (
            any::<bool>(),
            proptest::collection::vec((line(), any::<bool>()), 0..24),
            any::<bool>(),
        )
            .prop_map(|(bom, lines, final_newline)| {
                let mut s = if bom {
                    "\u{feff}".to_string()
                } else {
                    String::new()
                };
                let n = lines.len();
                for (i, (l, crlf)) in lines.into_iter().enumerate() {
                    s.push_str(&l);
                    if i + 1 < n || final_newline {
                        s.push_str(if crlf { "\r\n" } else { "\n" });
                    }
                }
                s
            })
    }

    proptest::proptest! {
        #[test]
        fn assigning_ids_only_adds_ids(text in document()) {
            let before = Plan::parse(&text);
            let with_ids = assign_ids(&text);
            proptest::prop_assert_eq!(strip_ids(&with_ids), text.clone());
            let after = Plan::parse(&with_ids);
            proptest::prop_assert!(!after.needs_ids());
            proptest::prop_assert_eq!(after.items.len(), before.items.len());
            for (a, b) in before.items.iter().zip(&after.items) {
                proptest::prop_assert_eq!(&a.title, &b.title);
                proptest::prop_assert_eq!(&a.description, &b.description);
                proptest::prop_assert_eq!(a.checked, b.checked);
            }
            proptest::prop_assert_eq!(assign_ids(&with_ids), with_ids.clone(), "idempotent");
        }

        #[test]
        fn duplicated_ids_are_made_unique(text in document(), dup in 0usize..8) {
            // Copy an item line (id and all) as a person pasting it would.
            let with_ids = assign_ids(&text);
            let lines: Vec<&str> = with_ids.split('\n').collect();
            let items: Vec<&str> = lines.iter().copied().filter(|l| l.contains("id:wp-")).collect();
            proptest::prop_assume!(!items.is_empty());
            let copy = format!("{with_ids}\n{}\n", items[dup % items.len()].trim_end_matches('\r'));
            let fixed = assign_ids(&copy);
            let plan = Plan::parse(&fixed);
            proptest::prop_assert!(!plan.needs_ids());
            proptest::prop_assert_eq!(plan.ids().len(), plan.items.len());
        }
    }

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

    #[test]
    fn meta_round_trip() {
        let m = Meta::parse(" id:wp-1ab, status:blocked, deps:wp-a wp-b, slice:x ").unwrap();
        assert_eq!(
            m.render(),
            "<!-- id:wp-1ab, status:blocked, deps:wp-a wp-b, slice:x -->"
        );
        assert_eq!(m.deps().len(), 2);
        assert!(Meta::parse("TODO later").is_none());
        assert_eq!(meta_value("a, b\n<!-- c -->"), "a; b c");
    }
}
