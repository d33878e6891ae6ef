//! What braids knows of a repository's issues between runs, and the pure rules that make
//! beads of them: which issues are the project's, their state, their dependencies, and which
//! are ready. Kept in one file per project so a run asks the forge only what changed since the
//! last one.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};

use crate::forge::issues::{Issue, Listing};
use crate::forge::Conditional;
use crate::model::{Bead, BeadId, BeadStatus};

/// How far before a full listing's start the next listing looks, for a forge whose clock runs
/// behind braids'.
const CLOCK_MARGIN_MINUTES: i64 = 5;

/// How long after a whole listing the next one is whole again.
pub const WHOLE_EVERY_MINUTES: i64 = 60;

/// The labels that make an issue the project's, and those braids sets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Labels {
    /// All must be on an issue for it to be a bead.
    pub wanted: Vec<String>,
    /// Set on a claimed issue.
    pub progress: String,
    /// Set on a blocked issue.
    pub blocked: String,
}

/// The kept state of one project's issues.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Mirror {
    /// The forge, repository and labels this was read for: another key starts over.
    #[serde(default)]
    pub key: String,
    /// The labels the issues were listed by.
    #[serde(default)]
    pub wanted: Vec<String>,
    /// Changes since this instant are what the next listing asks for; `None`: a full listing.
    #[serde(default)]
    pub since: Option<String>,
    /// The token's user, once asked.
    #[serde(default)]
    pub me: Option<String>,
    /// Issues by number: the labelled ones and any other a dependency named.
    #[serde(default)]
    pub issues: BTreeMap<u64, Issue>,
    #[serde(default)]
    pub cache: Conditional,
    /// Whether braids' own labels were made in the repository.
    #[serde(default)]
    pub labels_made: bool,
    /// For each issue whose comments were read, its `updated` and comment count then: they
    /// are read again only once either changed.
    #[serde(default)]
    pub heard: BTreeMap<u64, String>,
    /// The comments whose author braids told their ruling was not acted on: told once.
    #[serde(default)]
    pub told: std::collections::BTreeSet<u64>,
    /// When every labelled issue was last listed: a listing of changes cannot see an issue
    /// deleted or moved away, so an hour after it the next listing is whole again.
    #[serde(default)]
    pub full_at: Option<DateTime<Utc>>,
}

impl Mirror {
    /// Takes in what a listing read at `read_at` (its `unchanged`: the numbers on its pages
    /// answered `304`, kept as they are): each issue replaces what was kept of it (keeping
    /// its blockers when the listing cannot tell them), and
    /// the next listing asks for what changed since the newest change seen (after a full
    /// listing, since shortly before it started).
    pub fn absorb(&mut self, listing: Listing, full: bool, read_at: DateTime<Utc>) {
        let Listing {
            mut issues,
            unchanged,
            blockers_unread,
            ..
        } = listing;
        if blockers_unread {
            for i in &mut issues {
                if let Some(kept) = self.issues.get(&i.number) {
                    i.blocked_by = kept.blocked_by.clone();
                }
            }
        }
        let newest = issues.iter().map(|i| i.updated.clone()).max();
        if full {
            // What a whole listing leaves out is no longer the project's: deleted, moved away
            // or unlabelled. Issues kept as dependencies only are not in it, and stay.
            let listed: std::collections::BTreeSet<u64> = issues
                .iter()
                .map(|i| i.number)
                .chain(unchanged.iter().copied())
                .collect();
            let wanted = self.wanted.clone();
            self.issues
                .retain(|n, i| listed.contains(n) || !wanted.iter().all(|w| has(i, w)));
            self.full_at = Some(read_at);
        }
        for i in issues {
            self.issues.insert(i.number, i);
        }
        if full {
            // An issue that is not the project's is kept only while one of its issues waits
            // on it: anyone may open issues, and the mirror must not grow with them.
            let wanted = &self.wanted;
            let ours = |i: &Issue| wanted.iter().all(|w| has(i, w));
            let needed: std::collections::BTreeSet<u64> = self
                .issues
                .values()
                .filter(|i| ours(i))
                .flat_map(dependencies)
                .collect();
            self.issues.retain(|n, i| ours(i) || needed.contains(n));
        }
        let floor = full.then(|| {
            (read_at - Duration::minutes(CLOCK_MARGIN_MINUTES))
                .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        });
        self.since = [self.since.take(), newest, floor]
            .into_iter()
            .flatten()
            .max_by_key(|t| instant(t));
        // A listing of changes since an earlier instant is never asked again.
        let current = self.since.as_deref().map(crate::forge::gitlab::encode);
        self.cache.forget_where(|k| {
            ["since=", "updated_after="].iter().any(|p| {
                k.split_once(p).is_some_and(|(_, v)| {
                    current
                        .as_deref()
                        .is_none_or(|c| v.split('&').next() != Some(c))
                })
            })
        });
    }
}

fn instant(t: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(t)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// The bead id of issue `number`.
pub fn bead_id(number: u64) -> BeadId {
    BeadId::of_issue(number)
}

/// The issue number a bead id names (`issue-12`, or `12`), if any.
pub fn number_of(id: &BeadId) -> Option<u64> {
    id.issue_number()
}

fn has(issue: &Issue, label: &str) -> bool {
    issue.labels.iter().any(|l| l.eq_ignore_ascii_case(label))
}

/// Whether `issue` is one of the project's: every wanted label on it.
pub fn is_ours(issue: &Issue, labels: &Labels) -> bool {
    labels.wanted.iter().all(|w| has(issue, w))
}

/// An issue's state as a bead's: closed; blocked or claimed by braids' labels; held by someone
/// else when assigned to anyone but the token's user (never ready, never released by braids);
/// else open. A locked conversation is held too: a person locked it, and questions asked
/// there could not be answered by everyone.
pub fn status_of(issue: &Issue, labels: &Labels, me: &str) -> BeadStatus {
    if !issue.open {
        BeadStatus::Closed
    } else if has(issue, &labels.blocked) {
        BeadStatus::Blocked
    } else if has(issue, &labels.progress) {
        BeadStatus::InProgress
    } else if issue.locked || issue.assignees.iter().any(|a| !a.eq_ignore_ascii_case(me)) {
        BeadStatus::Deferred
    } else {
        BeadStatus::Open
    }
}

/// At most this many dependencies are read of one issue: each unknown one costs a request,
/// and a body is anyone's to write.
pub const MOST_DEPENDENCIES: usize = 20;

/// The issues `issue` depends on: the forge's own "blocked by", and each `#n` on a line of its
/// body starting `Depends on` or `Blocked by`; the first [`MOST_DEPENDENCIES`] of them.
pub fn dependencies(issue: &Issue) -> Vec<u64> {
    let mut out = issue.blocked_by.clone();
    for line in issue.body.lines() {
        let l = line
            .trim()
            .trim_start_matches(['-', '*', ' '])
            .to_ascii_lowercase();
        let Some(rest) = l
            .strip_prefix("depends on")
            .or_else(|| l.strip_prefix("blocked by"))
        else {
            continue;
        };
        for part in rest.split('#').skip(1) {
            let digits: String = part.chars().take_while(char::is_ascii_digit).collect();
            if let Ok(n) = digits.parse() {
                if n != issue.number && !out.contains(&n) {
                    out.push(n);
                }
            }
        }
    }
    out.truncate(MOST_DEPENDENCIES);
    out
}

/// A priority from a `P0`…`P4` or `priority: N` label; 2 without one.
fn priority(issue: &Issue) -> u8 {
    issue
        .labels
        .iter()
        .find_map(|l| {
            let l = l.to_ascii_lowercase();
            let n = l
                .strip_prefix("priority:")
                .or_else(|| l.strip_prefix("priority "))
                .or_else(|| l.strip_prefix('p'))?;
            n.trim().parse::<u8>().ok().filter(|p| *p <= 4)
        })
        .unwrap_or(2)
}

/// `issue` as a bead.
pub fn bead_of(issue: &Issue, labels: &Labels, me: &str) -> Bead {
    let mut b = Bead::new(
        bead_id(issue.number),
        issue.title.clone(),
        status_of(issue, labels, me),
    );
    b.priority = priority(issue);
    b.description = issue.body.clone();
    b.dependencies = dependencies(issue).into_iter().map(bead_id).collect();
    b.assignee = issue.assignees.first().cloned();
    b.labels = issue.labels.clone();
    b.url = (!issue.url.is_empty()).then(|| issue.url.clone());
    if let Some(m) = &issue.milestone {
        b.labels
            .push(format!("{}{m}", crate::format::iteration::MILESTONE_LABEL));
    }
    b
}

/// The project's beads, oldest issue first.
pub fn beads(mirror: &Mirror, labels: &Labels, me: &str) -> Vec<Bead> {
    mirror
        .issues
        .values()
        .filter(|i| is_ours(i, labels))
        .map(|i| bead_of(i, labels, me))
        .collect()
}

/// Of `beads`, those that can start now: open, and every issue they depend on closed (one
/// braids has not seen counts as open), most urgent first, then oldest.
pub fn ready(beads: &[Bead], mirror: &Mirror) -> Vec<Bead> {
    let closed = |id: &BeadId| {
        number_of(id)
            .and_then(|n| mirror.issues.get(&n))
            .is_some_and(|i| !i.open)
    };
    let mut out: Vec<Bead> = beads
        .iter()
        .filter(|b| b.status == BeadStatus::Open && b.dependencies.iter().all(closed))
        .cloned()
        .collect();
    out.sort_by_key(|b| (b.priority, number_of(&b.id)));
    out
}

/// What braids keeps of a dependency that is gone: closed, carrying no label.
pub fn gone(number: u64) -> Issue {
    Issue {
        number,
        title: String::new(),
        body: String::new(),
        open: false,
        labels: Vec::new(),
        assignees: Vec::new(),
        author: String::new(),
        url: String::new(),
        milestone: None,
        created: String::new(),
        updated: String::new(),
        comments: 0,
        locked: false,
        blocked_by: Vec::new(),
    }
}

/// The numbers `beads` depend on that braids has never read.
pub fn unknown_dependencies(beads: &[Bead], mirror: &Mirror) -> Vec<u64> {
    let mut out: Vec<u64> = beads
        .iter()
        .filter(|b| b.status == BeadStatus::Open)
        .flat_map(|b| b.dependencies.iter().filter_map(number_of))
        .filter(|n| !mirror.issues.contains_key(n))
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// The open, labelled issues of milestone `title`, oldest first: an iteration's Stories when
/// its ITERATION.md names a milestone.
pub fn milestone(mirror: &Mirror, labels: &Labels, title: &str) -> Vec<(BeadId, String)> {
    let mut of: Vec<&Issue> = mirror
        .issues
        .values()
        .filter(|i| i.open && is_ours(i, labels))
        .filter(|i| {
            i.milestone
                .as_deref()
                .is_some_and(|m| m.trim().eq_ignore_ascii_case(title.trim()))
        })
        .collect();
    of.sort_by(|a, b| (instant(&a.created), a.number).cmp(&(instant(&b.created), b.number)));
    of.into_iter()
        .map(|i| (bead_id(i.number), i.title.clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels() -> Labels {
        Labels {
            wanted: vec!["braids".into()],
            progress: "braids:in-progress".into(),
            blocked: "braids:blocked".into(),
        }
    }

    fn issue(n: u64, labels: &[&str]) -> Issue {
        Issue {
            number: n,
            title: format!("Issue {n}"),
            body: String::new(),
            open: true,
            labels: labels.iter().map(|l| l.to_string()).collect(),
            assignees: Vec::new(),
            author: "ana".into(),
            url: format!("https://github.example/me/app/issues/{n}"),
            milestone: None,
            created: format!("2026-11-0{}T00:00:00Z", n % 9 + 1),
            updated: "2026-11-29T00:00:00Z".into(),
            comments: 0,
            locked: false,
            blocked_by: Vec::new(),
        }
    }

    fn listing(issues: Vec<Issue>, unchanged: &[u64]) -> Listing {
        Listing {
            issues,
            unchanged: unchanged.to_vec(),
            ..Listing::default()
        }
    }

    #[test]
    fn a_listing_that_cannot_tell_blockers_keeps_those_a_single_read_found() {
        let at = Utc::now();
        let mut m = Mirror::default();
        let mut read = issue(1, &["braids"]);
        read.blocked_by = vec![7];
        m.issues.insert(1, read);
        let mut gitlab = listing(vec![issue(1, &["braids"]), issue(2, &["braids"])], &[]);
        gitlab.blockers_unread = true;
        m.absorb(gitlab, false, at);
        assert_eq!(m.issues[&1].blocked_by, [7]);
        assert!(m.issues[&2].blocked_by.is_empty());
        // GitHub's listing says what blocks each issue: its word replaces what was kept.
        m.absorb(listing(vec![issue(1, &["braids"])], &[]), false, at);
        assert!(m.issues[&1].blocked_by.is_empty());
    }

    #[test]
    fn the_state_of_an_issue_is_read_from_its_labels_its_assignees_and_its_lock() {
        let l = labels();
        let cases: Vec<(Issue, BeadStatus)> = vec![
            (issue(1, &["braids"]), BeadStatus::Open),
            (
                Issue {
                    open: false,
                    ..issue(2, &["braids", "braids:in-progress"])
                },
                BeadStatus::Closed,
            ),
            (issue(3, &["braids", "Braids:Blocked"]), BeadStatus::Blocked),
            (
                issue(4, &["braids", "braids:in-progress"]),
                BeadStatus::InProgress,
            ),
            (
                Issue {
                    assignees: vec!["bob".into()],
                    ..issue(5, &["braids"])
                },
                BeadStatus::Deferred,
            ),
            (
                Issue {
                    assignees: vec!["Braids-Bot".into()],
                    ..issue(6, &["braids"])
                },
                BeadStatus::Open,
            ),
            (
                Issue {
                    locked: true,
                    ..issue(7, &["braids"])
                },
                BeadStatus::Deferred,
            ),
        ];
        for (i, want) in cases {
            assert_eq!(status_of(&i, &l, "braids-bot"), want, "#{}", i.number);
        }
    }

    #[test]
    fn only_issues_carrying_every_wanted_label_are_beads() {
        let mut l = labels();
        l.wanted = vec!["braids".into(), "backend".into()];
        assert!(is_ours(&issue(1, &["Backend", "braids", "bug"]), &l));
        assert!(!is_ours(&issue(2, &["braids"]), &l));
        assert!(!is_ours(&issue(3, &[]), &l));
    }

    #[test]
    fn dependencies_come_from_body_lines_and_the_forge() {
        let i = Issue {
            body: "Fix it.\n\nDepends on #4, #5\n- blocked by #9\nSee #7 too\nDepends on #1".into(),
            blocked_by: vec![12],
            ..issue(1, &["braids"])
        };
        assert_eq!(dependencies(&i), vec![12, 4, 5, 9]);
        let many = Issue {
            body: format!(
                "Depends on {}",
                (1000..9000)
                    .map(|n| format!("#{n}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            ),
            ..issue(3, &["braids"])
        };
        assert_eq!(dependencies(&many), (1000..1020).collect::<Vec<u64>>());
    }

    #[test]
    fn ready_needs_every_dependency_closed_and_orders_by_priority_then_number() {
        let l = labels();
        let mut m = Mirror::default();
        for i in [
            Issue {
                body: "Depends on #2".into(),
                ..issue(1, &["braids"])
            },
            issue(2, &["braids"]),
            issue(3, &["braids", "P1"]),
            Issue {
                body: "Depends on #40".into(),
                ..issue(4, &["braids"])
            },
        ] {
            m.issues.insert(i.number, i);
        }
        let all = beads(&m, &l, "me");
        let ids = |v: Vec<Bead>| v.into_iter().map(|b| b.id.to_string()).collect::<Vec<_>>();
        assert_eq!(ids(ready(&all, &m)), ["issue-3", "issue-2"]);
        assert_eq!(unknown_dependencies(&all, &m), vec![40]);
        m.issues.get_mut(&2).unwrap().open = false;
        m.issues.insert(
            40,
            Issue {
                open: false,
                ..issue(40, &[])
            },
        );
        let all = beads(&m, &l, "me");
        assert_eq!(ids(ready(&all, &m)), ["issue-3", "issue-1", "issue-4"]);
    }

    #[test]
    fn a_listing_moves_since_to_the_newest_change_and_never_back() {
        let mut m = Mirror::default();
        let at = DateTime::parse_from_rfc3339("2026-11-29T12:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        m.absorb(listing(vec![issue(1, &["braids"])], &[]), true, at);
        assert_eq!(m.since.as_deref(), Some("2026-11-29T11:55:00Z"));
        let mut later = issue(2, &[]);
        later.updated = "2026-11-29T12:03:00Z".into();
        m.absorb(listing(vec![later], &[]), false, at);
        assert_eq!(m.since.as_deref(), Some("2026-11-29T12:03:00Z"));
        let old = "/repos/me/app/issues?state=all&since=2026-11-29T11%3A55%3A00Z";
        let now = "/repos/me/app/issues?state=all&since=2026-11-29T12%3A03%3A00Z&page=2";
        let whole = "/repos/me/app/issues?state=all&labels=braids";
        for k in [old, now, whole] {
            m.cache.keep(k, "\"t\"", serde_json::json!([]));
        }
        m.absorb(listing(vec![issue(3, &[])], &[]), false, at);
        assert_eq!(m.since.as_deref(), Some("2026-11-29T12:03:00Z"));
        assert_eq!(m.issues.len(), 3);
        // Only the listing the next run asks again keeps its answer.
        assert!(m.cache.etag(old).is_none());
        assert!(m.cache.etag(now).is_some() && m.cache.etag(whole).is_some());
    }

    #[test]
    fn a_whole_listing_drops_the_labelled_issues_it_left_out_and_keeps_dependencies() {
        let mut m = Mirror {
            wanted: vec!["braids".into()],
            ..Mirror::default()
        };
        let at = Utc::now();
        m.absorb(
            listing(
                vec![
                    issue(1, &["braids"]),
                    issue(2, &["braids"]),
                    issue(3, &[]),
                    issue(4, &["braids"]),
                ],
                &[],
            ),
            false,
            at,
        );
        m.issues.get_mut(&4).unwrap().body = "Depends on #3".into();
        // #2 was deleted, moved or unlabelled; #3 is only #4's dependency; #4 is on a page
        // answered 304; #5 is no one's.
        m.issues.insert(5, issue(5, &["bug"]));
        m.absorb(listing(vec![issue(1, &["braids"])], &[4]), true, at);
        assert_eq!(m.issues.keys().copied().collect::<Vec<_>>(), [1, 3, 4]);
        assert_eq!(m.full_at, Some(at));
    }

    #[test]
    fn a_milestone_is_its_open_labelled_issues_oldest_first() {
        let l = labels();
        let mut m = Mirror::default();
        for (n, created, open, lab) in [
            (5, "2026-11-03T00:00:00Z", true, "braids"),
            (3, "2026-11-05T00:00:00Z", true, "braids"),
            (4, "2026-11-01T00:00:00Z", false, "braids"),
            (6, "2026-11-01T00:00:00Z", true, "other"),
        ] {
            let mut i = issue(n, &[lab]);
            i.created = created.into();
            i.open = open;
            i.milestone = Some("v1".into());
            m.issues.insert(n, i);
        }
        let ids: Vec<String> = milestone(&m, &l, "V1 ")
            .into_iter()
            .map(|(id, _)| id.to_string())
            .collect();
        assert_eq!(ids, ["issue-5", "issue-3"]);
    }

    #[test]
    fn ids_and_numbers_round_trip() {
        assert_eq!(bead_id(12).as_str(), "issue-12");
        assert_eq!(number_of(&bead_id(12)), Some(12));
        assert_eq!(number_of(&BeadId::new("12").unwrap()), Some(12));
        assert_eq!(number_of(&BeadId::new("wp-12").unwrap()), None);
    }
}
