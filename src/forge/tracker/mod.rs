//! A forge's issues as the project's beads (`Tracker: github` or `Tracker: gitlab`): the
//! repository's issues carrying the project's labels (`Labels:`, `braids` by default), read
//! through the forge of its pull requests (`Forge:` or the remote's host) with that forge's
//! token.
//!
//! States live on the issue, where the team sees them: claimed is assigned to the token's user
//! and labelled in progress, blocked is labelled blocked with a comment giving the reason,
//! done is closed with a comment. Every read starts from [`Mirror`], kept in braids' own
//! `work/issues/`: one conditional listing of what changed since the last read is all
//! a run asks, so a run where nothing changed costs a `304` (free of quota on GitHub).

use std::path::PathBuf;
use std::sync::Mutex;

use chrono::Utc;

use crate::forge::issues::{Found, IssueForge};
use crate::forge::ForgeError;
use crate::model::{Bead, BeadId, BeadStatus};
use crate::tracker::said::Said;
use crate::tracker::{ClaimOutcome, Tracker, TrackerError, TrackerKind, TrackerOptions};

mod kept;
pub mod mirror;
pub mod settings;
pub mod talk;

pub use kept::next_run;
use kept::{keep_this_run, kept_this_run};

use mirror::{bead_id, number_of};
pub use mirror::{Labels, Mirror};

/// Colours of the labels braids makes.
const PROGRESS_COLOR: &str = "1d76db";
const BLOCKED_COLOR: &str = "b60205";

/// One project's issues.
pub struct IssueTracker {
    kind: TrackerKind,
    forge: Box<dyn IssueForge + Send + Sync>,
    /// `forge <name>`, for errors.
    name: String,
    /// The forge's own name, its breaker's key.
    forge_name: String,
    paths: crate::system::paths::Paths,
    labels: Labels,
    /// Who braids mentions when it asks: PROJECT.md's `Owner:`, else the issue's author.
    owner: Option<String>,
    file: PathBuf,
    key: String,
    mirror: Mutex<Mirror>,
    /// Opened by a command that only looks (`check`, `beads`, `status`, a dry run): what the
    /// forge answers never moves its breaker.
    looks_only: bool,
}

impl IssueTracker {
    /// The tracker of `opts.project`, whose PROJECT.md says `Tracker: github` or `gitlab`.
    pub fn open(
        kind: TrackerKind,
        opts: &TrackerOptions,
        looks_only: bool,
    ) -> Result<IssueTracker, TrackerError> {
        let source = settings::source(kind, opts).map_err(TrackerError::Io)?;
        let file = source.file.clone();
        let key = format!(
            "{} {} {}",
            source.forge_name,
            source.repository,
            source.labels.wanted.join(",")
        );
        let mirror = kept_this_run(&file)
            .or_else(|| {
                crate::system::atomic::read(&file)
                    .ok()
                    .and_then(|b| serde_json::from_slice::<Mirror>(&b).ok())
            })
            .filter(|m| m.key == key)
            .unwrap_or_else(|| Mirror {
                key: key.clone(),
                ..Mirror::default()
            });
        Ok(IssueTracker {
            kind,
            forge: source.forge,
            name: format!("forge `{}`", source.forge_name),
            forge_name: source.forge_name.clone(),
            paths: source.paths.clone(),
            labels: source.labels,
            owner: source.owner,
            file,
            key,
            mirror: Mutex::new(mirror),
            looks_only,
        })
    }

    fn failed(&self, doing: &str, e: ForgeError) -> TrackerError {
        // An outage is the forge's, shared with its pull requests: its breaker pauses both.
        if e.is_outage() && !self.looks_only {
            let _ = crate::forge::health::heard(
                &self.paths,
                &self.forge_name,
                &Err::<(), _>(e.clone()),
                Utc::now(),
            );
        }
        match e {
            e if e.is_outage() => TrackerError::Io(format!("{} {doing}: {e}", self.name)),
            e => TrackerError::Failed {
                command: format!("{} {doing}", self.name),
                code: "refused".into(),
                message: e.to_string(),
            },
        }
    }

    fn save(&self, m: &Mirror) {
        keep_this_run(&self.file, m, false);
        if let Ok(bytes) = serde_json::to_vec(m) {
            if let Some(dir) = self.file.parent() {
                let _ = std::fs::create_dir_all(dir);
            }
            if let Err(e) = crate::system::atomic::write(&self.file, &bytes) {
                tracing::warn!("cannot keep {}: {e}", self.file.display());
            }
        }
    }

    /// The token's user, asked once.
    fn me(&self, m: &mut Mirror) -> Result<String, TrackerError> {
        if let Some(me) = &m.me {
            return Ok(me.clone());
        }
        let me = self
            .forge
            .me()
            .map_err(|e| self.failed("asking who the token is", e))?;
        m.me = Some(me.clone());
        Ok(me)
    }

    /// Reads what changed since the last read (everything labelled, the first time), and any
    /// issue a dependency names that braids never read.
    fn refresh(&self, m: &mut Mirror) -> Result<String, TrackerError> {
        let at = Utc::now();
        if let crate::retry::forge_breaker::Look::Paused { .. } =
            crate::forge::health::look(&self.paths, &self.forge_name, at)
        {
            return Err(TrackerError::Io(format!(
                "{} is paused after an outage: its issues are read again once a probe finds it answering",
                self.name
            )));
        }
        if kept_this_run(&self.file).is_some() {
            return self.me(m);
        }
        let full = m.since.is_none()
            || m.full_at.is_none_or(|t| {
                at.signed_duration_since(t) > chrono::Duration::minutes(mirror::WHOLE_EVERY_MINUTES)
            });
        // A token may change hands: who it is, is asked again with each whole listing.
        if full {
            m.me = None;
        }
        let knew_me = m.me.is_some();
        let me = self.me(m)?;
        m.wanted = self.labels.wanted.clone();
        let since = if full { None } else { m.since.clone() };
        let listing = self
            .forge
            .issues(&self.labels.wanted, since.as_deref(), &mut m.cache);
        if listing.is_ok() && !self.looks_only {
            let _ = crate::forge::health::heard(&self.paths, &self.forge_name, &listing, at);
        }
        let listing = listing.map_err(|e| self.failed("listing issues", e))?;
        let since_before = m.since.clone();
        // A page read anew, even an empty one, brought an ETag worth keeping.
        let read_anew = listing.requests > listing.not_modified;
        m.absorb(listing, full, at);
        let beads = mirror::beads(m, &self.labels, &me);
        let unknown = mirror::unknown_dependencies(&beads, m);
        let changed =
            read_anew || full || !knew_me || !unknown.is_empty() || m.since != since_before;
        self.read_dependencies(m, unknown)?;
        // A run where nothing changed writes nothing.
        if changed {
            self.save(m);
        }
        keep_this_run(&self.file, m, true);
        Ok(me)
    }

    /// Reads and keeps the issues `numbers` that beads depend on. One that is gone (deleted,
    /// moved away, or a pull request) is kept as closed: nothing could ever close it, so
    /// nothing waits for it.
    fn read_dependencies(&self, m: &mut Mirror, numbers: Vec<u64>) -> Result<(), TrackerError> {
        for n in numbers {
            let read = match self.forge.issue(n, &mut m.cache) {
                Ok(Found::Issue(i)) => i,
                Ok(Found::Gone | Found::Moved) => mirror::gone(n),
                Err(e) => return Err(self.failed(&format!("reading #{n}"), e)),
            };
            m.issues.insert(n, read);
        }
        Ok(())
    }

    /// Issue `number` read now, kept; `None` when it is gone or moved (then forgotten).
    fn fresh(&self, m: &mut Mirror, number: u64) -> Result<Option<Bead>, TrackerError> {
        let me = self.me(m)?;
        match self.forge.issue(number, &mut m.cache) {
            Ok(Found::Issue(i)) => {
                let bead = mirror::bead_of(&i, &self.labels, &me);
                m.issues.insert(number, i);
                self.save(m);
                Ok(Some(bead))
            }
            Ok(Found::Gone | Found::Moved) => {
                m.issues.remove(&number);
                self.save(m);
                Ok(None)
            }
            Err(e) => Err(self.failed(&format!("reading #{number}"), e)),
        }
    }

    /// Whether `bead`, just read, waits for an issue still open: a blocker its listing could
    /// not show (GitLab's links) or one added since, read now when braids never saw it.
    fn waits(&self, m: &mut Mirror, bead: &Bead) -> Result<bool, TrackerError> {
        let unknown = mirror::unknown_dependencies(std::slice::from_ref(bead), m);
        self.read_dependencies(m, unknown)?;
        Ok(mirror::ready(std::slice::from_ref(bead), m).is_empty())
    }

    fn number(&self, id: &BeadId) -> Result<u64, TrackerError> {
        number_of(id).ok_or_else(|| TrackerError::NoSuchBead(id.clone()))
    }

    /// Makes braids' own labels once per repository.
    fn own_labels(&self, m: &mut Mirror) -> Result<(), TrackerError> {
        if m.labels_made {
            return Ok(());
        }
        for (label, color) in [
            (&self.labels.progress, PROGRESS_COLOR),
            (&self.labels.blocked, BLOCKED_COLOR),
        ] {
            self.forge
                .ensure_label(label, color)
                .map_err(|e| self.failed(&format!("making the label {label}"), e))?;
        }
        m.labels_made = true;
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Mirror> {
        self.mirror.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Posts `body` on `number`.
    pub fn say(&self, id: &BeadId, body: &str) -> Result<(), TrackerError> {
        let n = self.number(id)?;
        self.forge
            .comment(n, body)
            .map_err(|e| self.failed(&format!("commenting on #{n}"), e))
    }
}

impl Tracker for IssueTracker {
    fn kind(&self) -> TrackerKind {
        self.kind
    }

    fn ready(&self) -> Result<Vec<Bead>, TrackerError> {
        let listed = self.list()?;
        self.ready_among(&listed)
    }

    fn list(&self) -> Result<Vec<Bead>, TrackerError> {
        let mut m = self.lock();
        let me = self.refresh(&mut m)?;
        Ok(mirror::beads(&m, &self.labels, &me))
    }

    fn ready_among(&self, listed: &[Bead]) -> Result<Vec<Bead>, TrackerError> {
        Ok(mirror::ready(listed, &self.lock()))
    }

    fn show(&self, id: &BeadId) -> Result<Option<Bead>, TrackerError> {
        let Some(n) = number_of(id) else {
            return Ok(None);
        };
        let mut m = self.lock();
        if let (Some(i), Some(me)) = (m.issues.get(&n), m.me.as_deref()) {
            return Ok(Some(mirror::bead_of(i, &self.labels, me)));
        }
        self.fresh(&mut m, n)
    }

    fn claim(&self, id: &BeadId, actor: &str) -> Result<ClaimOutcome, TrackerError> {
        let _ = actor;
        let n = self.number(id)?;
        let mut m = self.lock();
        let me = self.me(&mut m)?;
        let Some(now) = self.fresh(&mut m, n)? else {
            return Err(TrackerError::NoSuchBead(id.clone()));
        };
        // Its labels taken off since the listing: no longer the project's, never touched.
        let ours = m
            .issues
            .get(&n)
            .is_some_and(|i| mirror::is_ours(i, &self.labels));
        match now.status {
            status if !ours => {
                return Ok(ClaimOutcome::Refused {
                    status,
                    holder: now.assignee,
                })
            }
            BeadStatus::Open if self.waits(&mut m, &now)? => {
                self.save(&m);
                return Ok(ClaimOutcome::Refused {
                    status: BeadStatus::Open,
                    holder: None,
                });
            }
            BeadStatus::Open => {}
            BeadStatus::InProgress if now.assignee.as_deref() == Some(me.as_str()) => {
                return Ok(ClaimOutcome::Claimed)
            }
            status => {
                return Ok(ClaimOutcome::Refused {
                    status,
                    holder: now.assignee,
                })
            }
        }
        self.own_labels(&mut m)?;
        self.forge
            .assign(n, &me, true)
            .and_then(|()| {
                self.forge
                    .relabel(n, std::slice::from_ref(&self.labels.progress), &[])
            })
            .map_err(|e| self.failed(&format!("claiming #{n}"), e))?;
        if let Some(i) = m.issues.get_mut(&n) {
            i.assignees = vec![me];
            i.labels.push(self.labels.progress.clone());
        }
        self.save(&m);
        Ok(ClaimOutcome::Claimed)
    }

    fn close(&self, id: &BeadId, reason: &str) -> Result<(), TrackerError> {
        let n = self.number(id)?;
        let mut m = self.lock();
        let Some(now) = self.fresh(&mut m, n)? else {
            return Err(TrackerError::NoSuchBead(id.clone()));
        };
        let drop_labels = [self.labels.progress.clone(), self.labels.blocked.clone()];
        let result = if now.status == BeadStatus::Closed {
            // Closed by the forge when its pull request merged: the labels are tidied only.
            self.forge.relabel(n, &[], &drop_labels)
        } else {
            self.forge
                .comment(
                    n,
                    &format!("Done by braids: {}", talk::one_paragraph(reason)),
                )
                .and_then(|()| self.forge.set_open(n, false))
                .and_then(|()| self.forge.relabel(n, &[], &drop_labels))
        };
        result.map_err(|e| self.failed(&format!("closing #{n}"), e))?;
        if let Some(i) = m.issues.get_mut(&n) {
            i.open = false;
            i.labels
                .retain(|l| !drop_labels.iter().any(|d| d.eq_ignore_ascii_case(l)));
        }
        // What was kept of a closed issue's own reads is not asked again: its mirror entry,
        // changed by a listing if it reopens, is enough.
        let own = format!("/issues/{n}");
        m.cache.forget_where(|k| {
            k.split_once(own.as_str())
                .is_some_and(|(_, rest)| rest.is_empty() || rest.starts_with(['/', '?']))
        });
        m.heard.remove(&n);
        self.save(&m);
        Ok(())
    }

    fn block(&self, id: &BeadId, reason: &str) -> Result<(), TrackerError> {
        let n = self.number(id)?;
        let mut m = self.lock();
        self.own_labels(&mut m)?;
        let author = m.issues.get(&n).map(|i| i.author.clone());
        let mention = self.owner.clone().or(author);
        // Closed by its worker, then its landing failed: not done, so open again, held.
        let closed = m.issues.get(&n).is_some_and(|i| !i.open);
        self.forge
            .comment(n, &talk::blocked_comment(reason, mention.as_deref()))
            .and_then(|()| match closed {
                true => self.forge.set_open(n, true),
                false => Ok(()),
            })
            .and_then(|()| {
                self.forge.relabel(
                    n,
                    std::slice::from_ref(&self.labels.blocked),
                    std::slice::from_ref(&self.labels.progress),
                )
            })
            .map_err(|e| self.failed(&format!("blocking #{n}"), e))?;
        if let Some(i) = m.issues.get_mut(&n) {
            i.open = true;
            i.labels
                .retain(|l| !l.eq_ignore_ascii_case(&self.labels.progress));
            i.labels.push(self.labels.blocked.clone());
        }
        self.save(&m);
        Ok(())
    }

    fn reopen(&self, id: &BeadId, reason: &str) -> Result<(), TrackerError> {
        let _ = reason;
        let n = self.number(id)?;
        let mut m = self.lock();
        let me = self.me(&mut m)?;
        let drop_labels = [self.labels.progress.clone(), self.labels.blocked.clone()];
        self.forge
            .relabel(n, &[], &drop_labels)
            .and_then(|()| self.forge.assign(n, &me, false))
            .map_err(|e| self.failed(&format!("releasing #{n}"), e))?;
        if let Some(i) = m.issues.get_mut(&n) {
            i.labels
                .retain(|l| !drop_labels.iter().any(|d| d.eq_ignore_ascii_case(l)));
            i.assignees.retain(|a| !a.eq_ignore_ascii_case(&me));
        }
        self.save(&m);
        Ok(())
    }

    fn create(&self, title: &str, description: &str, priority: u8) -> Result<BeadId, TrackerError> {
        let mut labels = self.labels.wanted.clone();
        if priority != 2 {
            labels.push(format!("P{priority}"));
        }
        let n = self
            .forge
            .create(title, description, &labels)
            .map_err(|e| self.failed("opening an issue", e))?;
        Ok(bead_id(n))
    }

    fn add_dependency(&self, id: &BeadId, on: &BeadId) -> Result<(), TrackerError> {
        let (n, dep) = (self.number(id)?, self.number(on)?);
        let mut m = self.lock();
        let Some(_) = self.fresh(&mut m, n)? else {
            return Err(TrackerError::NoSuchBead(id.clone()));
        };
        let body = m.issues.get(&n).map(|i| i.body.clone()).unwrap_or_default();
        let body = format!("{}\n\nDepends on #{dep}\n", body.trim_end());
        self.forge
            .edit_body(n, &body)
            .map_err(|e| self.failed(&format!("editing #{n}"), e))?;
        if let Some(i) = m.issues.get_mut(&n) {
            i.body = body;
        }
        self.save(&m);
        Ok(())
    }

    fn tell(&self, id: &BeadId, text: &str) -> Result<(), TrackerError> {
        self.say(id, text)
    }

    fn said_since_asked(&self, id: &BeadId) -> Result<Vec<Said>, TrackerError> {
        let n = self.number(id)?;
        let mut m = self.lock();
        let me = self.me(&mut m)?;
        // Comments are read again only when the issue changed since they last were.
        let updated = m
            .issues
            .get(&n)
            .map(|i| format!("{} {}", i.updated, i.comments))
            .unwrap_or_default();
        if !updated.is_empty() && m.heard.get(&n) == Some(&updated) {
            return Ok(Vec::new());
        }
        let comments = self
            .forge
            .comments(n, &mut m.cache)
            .map_err(|e| self.failed(&format!("reading the comments of #{n}"), e))?;
        m.heard.insert(n, updated);
        let issue_author = m.issues.get(&n).map(|i| i.author.clone());
        let mut writes = std::collections::BTreeMap::new();
        let mut out = Vec::new();
        for (comment, said) in talk::replies(&comments, &me) {
            let author = said.author().to_string();
            let named = [self.owner.as_ref(), issue_author.as_ref()]
                .into_iter()
                .flatten()
                .any(|a| a.eq_ignore_ascii_case(&author));
            let ruling = matches!(said, Said::Approve { .. } | Said::Reject { .. });
            if !ruling && named {
                out.push(said);
                continue;
            }
            let may = match writes.get(&author) {
                Some(may) => *may,
                None => {
                    let may = self
                        .forge
                        .can_write(&author)
                        .map_err(|e| self.failed(&format!("asking what {author} may do"), e))?;
                    writes.insert(author.clone(), may);
                    may
                }
            };
            match (may, ruling) {
                (true, _) => out.push(said),
                // A ruling from someone without write access is told once it was not acted
                // on; anyone's words but the named people's and writers' answer nothing.
                (false, true) if m.told.insert(comment) => out.push(Said::NotAllowed { author }),
                (false, _) => {}
            }
        }
        self.save(&m);
        Ok(out)
    }

    fn read_path(&self) -> Option<String> {
        Some(format!("{} ({})", self.kind.as_str(), self.key))
    }
}

/// Opens the tracker `kind` names: a forge's issues here, any other through
/// [`crate::tracker::open`].
pub fn open(kind: TrackerKind, opts: TrackerOptions) -> Result<Box<dyn Tracker>, TrackerError> {
    match kind {
        TrackerKind::Github | TrackerKind::Gitlab => {
            Ok(Box::new(IssueTracker::open(kind, &opts, false)?))
        }
        k => crate::tracker::open(k, opts),
    }
}

/// As [`open`], for a caller that only reads ([`crate::tracker::open_read_only`]).
pub fn open_read_only(
    kind: TrackerKind,
    opts: TrackerOptions,
) -> Result<Box<dyn Tracker>, TrackerError> {
    match kind {
        TrackerKind::Github | TrackerKind::Gitlab => {
            Ok(Box::new(IssueTracker::open(kind, &opts, true)?))
        }
        k => crate::tracker::open_read_only(k, opts),
    }
}

/// As [`open`], for the tick's observation ([`crate::tracker::open_observing`]).
pub fn open_observing(
    kind: TrackerKind,
    opts: TrackerOptions,
    read_only: bool,
) -> Result<Box<dyn Tracker>, TrackerError> {
    match kind {
        TrackerKind::Github | TrackerKind::Gitlab => {
            Ok(Box::new(IssueTracker::open(kind, &opts, read_only)?))
        }
        k => crate::tracker::open_observing(k, opts, read_only),
    }
}
