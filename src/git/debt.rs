//! Work that is committed but not on the upstream yet (CONTRACTS 4.4): a failed push is
//! remembered in the repository (`.git/braids-push-pending`, never committed) with when it
//! started, how often it failed and git's words, so every view can say "closed, not pushed
//! (since …, why)" and the tick retries with a backoff instead of every run.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Result;
use chrono::{DateTime, Utc};
use git2::Repository;
use serde::{Deserialize, Serialize};

use super::Pushed;

/// A push braids owes the upstream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PushDebt {
    /// When the first push that failed was tried (or the commit that needs a push began).
    pub since: DateTime<Utc>,
    /// Failed pushes in a row; 0 while a commit's push has not been tried yet.
    pub failures: u32,
    /// When the last one failed.
    pub last: DateTime<Utc>,
    /// git's words for the last failure.
    pub why: String,
    /// Notifications that wait for the push: an iteration is announced complete once its
    /// commits are on the upstream.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub owed: Vec<Owed>,
}

/// A notification sent when the debt is paid.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Owed {
    /// The [`crate::model::NotificationEvent`], as PROJECT.md's Notifications table names it.
    pub event: String,
    pub text: String,
}

/// Keeps `text` for when the push this repository owes succeeds.
pub fn owe(root: &Path, event: crate::model::NotificationEvent, text: &str) -> Result<()> {
    let Some(mut debt) = push_debt(root) else {
        anyhow::bail!("{} owes no push", root.display());
    };
    debt.owed.push(Owed {
        event: event.as_str().to_string(),
        text: text.to_string(),
    });
    remember(root, &debt)
}

/// The first wait after a failed push, doubled after each further one, up to [`MAX_WAIT`]: an
/// unreachable remote is asked a few times an hour, not by every run.
const FIRST_WAIT: Duration = Duration::from_secs(60);
const MAX_WAIT: Duration = Duration::from_secs(30 * 60);

impl PushDebt {
    /// When the next retry is due.
    #[must_use]
    pub fn next_try(&self) -> DateTime<Utc> {
        if self.failures == 0 {
            return self.last;
        }
        let doubled = FIRST_WAIT.saturating_mul(1 << (self.failures - 1).min(16));
        let wait = chrono::Duration::from_std(doubled.min(MAX_WAIT)).unwrap_or_default();
        self.last + wait
    }
}

/// Where the debt is remembered, inside `.git/` so it is never committed.
fn marker(root: &Path) -> PathBuf {
    root.join(".git/braids-push-pending")
}

/// The push this repository owes, if any. A marker in the older plain-text form (git's words
/// only) counts as one failure, dated by the file.
pub fn push_debt(root: &Path) -> Option<PushDebt> {
    let path = marker(root);
    // Never through a link (a shared work tree's agent can write `.git`).
    if !std::fs::symlink_metadata(&path).ok()?.is_file() {
        return None;
    }
    let bytes = std::fs::read(&path).ok()?;
    if let Ok(d) = serde_json::from_slice(&bytes) {
        return Some(d);
    }
    let at: DateTime<Utc> = std::fs::metadata(&path)
        .and_then(|m| m.modified())
        .map_or_else(|_| Utc::now(), DateTime::from);
    Some(PushDebt {
        since: at,
        failures: 1,
        last: at,
        why: String::from_utf8_lossy(&bytes).trim().to_string(),
        owed: Vec::new(),
    })
}

fn remember(root: &Path, debt: &PushDebt) -> Result<()> {
    crate::system::atomic::write(&marker(root), &serde_json::to_vec(debt)?)
}

/// Pushes `branch` and remembers the outcome: a failure adds to the debt the next tick finds
/// with one `stat` and retries when due (4.4); a success clears it.
pub fn push_recorded(root: &Path, branch: &str, timeout: Duration) -> Result<Pushed> {
    let result = super::push(root, branch, timeout);
    match &result {
        Ok(_) => {
            // Whoever paid the debt, the notifications it held are the tick's to send.
            if let Some(owed) = push_debt(root).map(|d| d.owed).filter(|o| !o.is_empty()) {
                let mut all = read_owed(root);
                all.extend(owed);
                if let Err(e) = serde_json::to_vec(&all)
                    .map_err(anyhow::Error::from)
                    .and_then(|b| crate::system::atomic::write(&owed_file(root), &b))
                {
                    tracing::warn!(root = %root.display(), "cannot keep the notifications a push owed: {e:#}");
                }
            }
            clear_push_mark(root);
        }
        Err(e) => {
            let now = Utc::now();
            let before = push_debt(root);
            let debt = PushDebt {
                since: before.as_ref().map_or(now, |d| d.since),
                failures: before.as_ref().map_or(0, |d| d.failures) + 1,
                last: now,
                why: format!("{e:#}"),
                owed: before.map(|d| d.owed).unwrap_or_default(),
            };
            if let Err(w) = remember(root, &debt) {
                tracing::warn!(root = %root.display(), "cannot remember the failed push: {w:#}");
            }
        }
    }
    result
}

/// Marks the repository as owing a push, before the commit that needs it: a worker killed
/// between its commit and its push leaves the mark, and the next tick pushes (4.4). A debt
/// already owed keeps its history.
pub fn expect_push(root: &Path) -> Result<()> {
    if push_debt(root).is_some() {
        return Ok(());
    }
    let now = Utc::now();
    remember(
        root,
        &PushDebt {
            since: now,
            failures: 0,
            last: now,
            why: "a commit was being made; its push had not happened yet".into(),
            owed: Vec::new(),
        },
    )
}

/// Where notifications a paid debt held wait for the tick to send them.
fn owed_file(root: &Path) -> PathBuf {
    root.join(".git/braids-owed-notices")
}

fn read_owed(root: &Path) -> Vec<Owed> {
    let path = owed_file(root);
    if !std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file()) {
        return Vec::new();
    }
    std::fs::read(&path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

/// The notifications pushes that succeeded were holding, taken: the caller sends them.
pub fn take_owed(root: &Path) -> Vec<Owed> {
    let owed = read_owed(root);
    if !owed.is_empty() {
        let _ = std::fs::remove_file(owed_file(root));
    }
    owed
}

/// Takes back an [`expect_push`] whose commit was not made, or a debt paid.
pub fn clear_push_mark(root: &Path) {
    let _ = std::fs::remove_file(marker(root));
}

/// Whether the repository owes its upstream a push.
pub fn push_pending(root: &Path) -> bool {
    marker(root).exists()
}

/// What a project shows while it owes a push: the debt, and the beads whose landing commits
/// are on `branch` but not on its upstream ("closed, not pushed").
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NotPushed {
    #[serde(flatten)]
    pub debt: PushDebt,
    pub next_try: DateTime<Utc>,
    pub beads: Vec<String>,
}

impl NotPushed {
    /// Whether a run at `now` leaves the push for later: its backoff has not run out, and
    /// nobody forced the run.
    #[must_use]
    pub fn waits(&self, now: DateTime<Utc>, forced: bool) -> bool {
        !forced && self.next_try > now
    }

    /// The project's one line for it, the same in STATUS.md, on the dashboard and in the
    /// tick's problems: since when, how often, the next try, why, and the beads it holds back.
    pub fn line(&self) -> String {
        let beads = match self.beads.is_empty() {
            true => String::new(),
            false => format!(" Closed, not pushed: {}.", self.beads.join(", ")),
        };
        format!(
            "not pushed since {} ({} failed pushes, next try after {}): {}.{beads}",
            self.debt.since.format("%Y-%m-%d %H:%M UTC"),
            self.debt.failures,
            self.next_try.format("%Y-%m-%d %H:%M:%S UTC"),
            self.debt.why.lines().next().unwrap_or_default()
        )
    }

    /// How a bead of it is shown: `closed, not pushed (since …, why)`.
    pub fn describe(&self) -> String {
        format!(
            "closed, not pushed (since {}, {})",
            self.debt.since.format("%Y-%m-%d %H:%M UTC"),
            self.debt.why.lines().next().unwrap_or_default()
        )
    }
}

/// The push `root` owes for `branch`, with the beads it holds back; `None` when it owes none.
/// One `stat` when nothing is owed.
pub fn not_pushed(root: &Path, branch: &str) -> Option<NotPushed> {
    let debt = push_debt(root)?;
    let beads = (|| {
        let repo = Repository::open(root).ok()?;
        let local = repo.find_branch(branch, git2::BranchType::Local).ok()?;
        let tip = local.get().target()?;
        let upstream = local.upstream().ok()?.get().target()?;
        let mut walk = repo.revwalk().ok()?;
        walk.push(tip).ok()?;
        walk.hide(upstream).ok()?;
        let mut beads = Vec::new();
        for oid in walk.flatten() {
            let commit = repo.find_commit(oid).ok()?;
            if let Some(b) = commit.summary().and_then(super::bead_of) {
                beads.push(b.to_string());
            }
        }
        Some(beads)
    })()
    .unwrap_or_default();
    Some(NotPushed {
        next_try: debt.next_try(),
        debt,
        beads,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c4_4_a_failed_push_waits_longer_each_time_up_to_half_an_hour() {
        let at = Utc::now();
        let debt = |failures| PushDebt {
            since: at,
            failures,
            last: at,
            why: "x".into(),
            owed: Vec::new(),
        };
        let wait = |f| (debt(f).next_try() - at).num_seconds();
        assert_eq!(wait(0), 0, "a push not tried yet is due at once");
        assert_eq!(wait(1), 60);
        assert_eq!(wait(2), 120);
        assert_eq!(wait(5), 960);
        assert_eq!(wait(6), 1800);
        assert_eq!(wait(40), 1800);
    }

    #[test]
    fn c4_4_a_run_waits_for_the_backoff_unless_forced() {
        let at = Utc::now();
        let debt = PushDebt {
            since: at,
            failures: 2,
            last: at,
            why: "x".into(),
            owed: Vec::new(),
        };
        let n = NotPushed {
            next_try: debt.next_try(),
            debt,
            beads: Vec::new(),
        };
        assert!(n.waits(at + chrono::Duration::seconds(119), false));
        assert!(!n.waits(at + chrono::Duration::seconds(119), true));
        assert!(!n.waits(at + chrono::Duration::seconds(120), false));
    }

    #[test]
    fn an_older_plain_marker_still_reads_and_the_debt_keeps_its_start() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join(".git")).unwrap();
        std::fs::write(marker(tmp.path()), "git push failed: no route\n").unwrap();
        let d = push_debt(tmp.path()).unwrap();
        assert_eq!(
            (d.failures, d.why.as_str()),
            (1, "git push failed: no route")
        );
        expect_push(tmp.path()).unwrap();
        assert_eq!(push_debt(tmp.path()).unwrap().since, d.since, "kept");
        clear_push_mark(tmp.path());
        assert!(!push_pending(tmp.path()));
    }
}
