//! br's read semantics over its JSONL export: the beads `br list --all` shows and the ones
//! `br ready` offers, in its order, computed from `.beads/issues.jsonl` without starting br.
//!
//! br rewrites that file (atomically) after every mutation, and it is br's documented
//! interchange format, so reading it costs a file read instead of a process that starts a
//! database engine. br stays the authority: this module only answers for the subset of the
//! format br itself writes. Anything else (a custom status, an `external:` or dangling
//! dependency, a wisp row, a duplicate id, a row br would not import) is [`Unsupported`], and
//! the caller asks br instead. Pure: text and the clock in, beads out.
//!
//! The rules, as br 0.7.6 implements them (`storage/sqlite.rs`, `get_ready_issues` and
//! `compute_blocked_issues_map_impl`):
//! - ready = status `open`, not blocked, `defer_until` unset or not after now (compared to the
//!   second, as SQLite's `datetime()` does), not pinned, not ephemeral, not a template, and no
//!   `-wisp-` in the id. The assignee does not matter.
//! - blocked = a `blocks`, `conditional-blocks` or `waits-for` dependency on a bead that is
//!   neither closed, deleted (`tombstone`) nor a template; or a parent (`parent-child`) that is
//!   blocked that way, transitively; or, for an epic, a child that is neither closed, deleted nor
//!   a template. An epic blocked only by its children does not pass that on to them.
//! - order ("hybrid"): P0 and P1 first, then the rest; oldest first in each group; then by id.
//! - `list --all` leaves out deleted beads and templates, and sorts by priority, newest first,
//!   then id.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use serde::Deserialize;

use crate::model::{Bead, BeadId, BeadStatus};

/// Why the file cannot be answered from; the caller asks br.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unsupported(pub String);

impl std::fmt::Display for Unsupported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// One JSONL row, with the fields br's ready and list read. Required fields are the ones br's
/// own importer requires, so a row br would refuse is refused here too.
#[derive(Deserialize)]
struct Row {
    id: String,
    title: String,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    priority: Option<i64>,
    #[serde(default)]
    issue_type: Option<String>,
    #[serde(default)]
    assignee: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    labels: Vec<String>,
    created_at: DateTime<Utc>,
    #[allow(dead_code)] // required by br's importer, so required here
    updated_at: DateTime<Utc>,
    #[serde(default)]
    closed_at: Option<DateTime<Utc>>,
    #[serde(default)]
    defer_until: Option<DateTime<Utc>>,
    #[serde(default)]
    ephemeral: bool,
    #[serde(default)]
    pinned: bool,
    #[serde(default)]
    is_template: bool,
    #[serde(default)]
    dependencies: Vec<DepRow>,
}

#[derive(Deserialize)]
struct DepRow {
    issue_id: String,
    depends_on_id: String,
    #[serde(rename = "type")]
    dep_type: String,
    #[allow(dead_code)] // required by br's importer
    created_at: DateTime<Utc>,
}

/// br's status vocabulary, as its database stores it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    Open,
    InProgress,
    Blocked,
    Deferred,
    Draft,
    Closed,
    Tombstone,
    Pinned,
}

impl Status {
    fn parse(raw: &str) -> Option<Status> {
        Some(match raw.to_ascii_lowercase().as_str() {
            "open" => Status::Open,
            "in_progress" | "inprogress" => Status::InProgress,
            "blocked" => Status::Blocked,
            "deferred" => Status::Deferred,
            "draft" => Status::Draft,
            "closed" => Status::Closed,
            "tombstone" => Status::Tombstone,
            "pinned" => Status::Pinned,
            _ => return None,
        })
    }

    /// The spelling br prints, read the way the br adapter reads `br list --json`.
    fn bead_status(self) -> BeadStatus {
        BeadStatus::parse(match self {
            Status::Open => "open",
            Status::InProgress => "in_progress",
            Status::Blocked => "blocked",
            Status::Deferred => "deferred",
            Status::Draft => "draft",
            Status::Closed => "closed",
            Status::Tombstone => "tombstone",
            Status::Pinned => "pinned",
        })
    }

    /// Closed or deleted: never blocks, never holds an epic open.
    fn is_terminal(self) -> bool {
        matches!(self, Status::Closed | Status::Tombstone)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DepKind {
    /// `blocks`, `conditional-blocks`, `waits-for`.
    Blocking,
    ParentChild,
}

#[derive(Debug, Clone)]
struct Issue {
    /// The bead as `br list --json` / `br ready --json` prints it, read by the br adapter.
    bead: Bead,
    status: Status,
    epic: bool,
    created_at: DateTime<Utc>,
    defer_until: Option<DateTime<Utc>>,
    pinned: bool,
    template: bool,
    /// Dependencies that matter for readiness, as indices into [`Graph::issues`].
    deps: Vec<(usize, DepKind)>,
}

/// A parsed export: every row, with its dependencies resolved.
#[derive(Debug, Clone)]
pub struct Graph {
    issues: Vec<Issue>,
}

/// Reads br's JSONL export. Blank lines are skipped, as br skips them.
pub fn parse(text: &str) -> Result<Graph, Unsupported> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut rows = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let row: Row =
            serde_json::from_str(line).map_err(|e| Unsupported(format!("line {}: {e}", n + 1)))?;
        rows.push(row);
    }
    let mut index: HashMap<&str, usize> = HashMap::with_capacity(rows.len());
    for (i, r) in rows.iter().enumerate() {
        if index.insert(r.id.as_str(), i).is_some() {
            return Err(Unsupported(format!("bead {} appears twice", r.id)));
        }
    }
    let mut issues = Vec::with_capacity(rows.len());
    for r in &rows {
        issues.push(issue(r, &index)?);
    }
    Ok(Graph { issues })
}

/// One row, checked against what br writes and imports.
fn issue(r: &Row, index: &HashMap<&str, usize>) -> Result<Issue, Unsupported> {
    let bad = |why: String| Unsupported(format!("bead {}: {why}", r.id));
    let id = BeadId::new(&r.id).map_err(|e| bad(e.to_string()))?;
    if r.ephemeral || r.id.to_ascii_lowercase().contains("-wisp-") {
        return Err(bad("a wisp (br never exports them)".into()));
    }
    let raw_status = r.status.as_deref().unwrap_or("open");
    let status = Status::parse(raw_status)
        .ok_or_else(|| bad(format!("status `{raw_status}` is not one of br's own")))?;
    let priority = match r.priority {
        None => 2,
        Some(p @ 0..=4) => p as u8,
        Some(p) => return Err(bad(format!("priority {p} is not 0-4"))),
    };
    if r.title.trim().is_empty() || r.title.contains('\0') {
        return Err(bad("a title br would not import".into()));
    }
    if (status == Status::Closed) != r.closed_at.is_some() && status != Status::Tombstone {
        return Err(bad("closed_at does not match the status".into()));
    }
    let mut deps = Vec::new();
    for d in &r.dependencies {
        if d.issue_id != r.id {
            return Err(bad(format!("a dependency row of {}", d.issue_id)));
        }
        let kind = match d.dep_type.to_ascii_lowercase().as_str() {
            "blocks" | "conditional-blocks" | "waits-for" => DepKind::Blocking,
            "parent-child" => DepKind::ParentChild,
            _ => continue,
        };
        if d.depends_on_id.starts_with("external:") {
            return Err(bad(
                "an external dependency (br resolves it in another project)".into(),
            ));
        }
        // The database may hold what the file cannot (a wisp, a pruned tombstone).
        let Some(&target) = index.get(d.depends_on_id.as_str()) else {
            return Err(bad(format!(
                "depends on {}, which is not in the file",
                d.depends_on_id
            )));
        };
        deps.push((target, kind));
    }
    let bead = Bead {
        id,
        title: r.title.clone(),
        status: status.bead_status(),
        priority,
        description: r.description.clone().unwrap_or_default(),
        dependencies: Vec::new(),
        assignee: r
            .assignee
            .as_deref()
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .map(str::to_string),
        labels: r.labels.clone(),
        url: None,
    };
    Ok(Issue {
        bead,
        status,
        epic: r
            .issue_type
            .as_deref()
            .is_some_and(|t| t.eq_ignore_ascii_case("epic")),
        created_at: r.created_at,
        defer_until: r.defer_until,
        pinned: r.pinned,
        template: r.is_template,
        deps,
    })
}

impl Graph {
    /// `br list --json --all`: every bead but deleted ones and templates, by priority, newest
    /// first, then id.
    pub fn list(&self) -> Vec<Bead> {
        let mut shown: Vec<&Issue> = self
            .issues
            .iter()
            .filter(|i| i.status != Status::Tombstone && !i.template)
            .collect();
        shown.sort_by(|a, b| {
            (a.bead.priority, b.created_at, a.bead.id.as_str()).cmp(&(
                b.bead.priority,
                a.created_at,
                b.bead.id.as_str(),
            ))
        });
        shown.into_iter().map(|i| i.bead.clone()).collect()
    }

    /// `br ready --json`: the ready beads at `now`, in br's default ("hybrid") order.
    pub fn ready(&self, now: DateTime<Utc>) -> Vec<Bead> {
        let blocked = self.blocked();
        let mut ready: Vec<&Issue> = self
            .issues
            .iter()
            .enumerate()
            .filter(|(i, x)| {
                x.status == Status::Open
                    && !blocked.contains(i)
                    && x.defer_until
                        .is_none_or(|d| d.timestamp() <= now.timestamp())
                    && !x.pinned
                    && !x.template
            })
            .map(|(_, x)| x)
            .collect();
        ready.sort_by(|a, b| {
            let bucket = |x: &Issue| u8::from(x.bead.priority > 1);
            (bucket(a), a.created_at, a.bead.id.as_str()).cmp(&(
                bucket(b),
                b.created_at,
                b.bead.id.as_str(),
            ))
        });
        ready.into_iter().map(|i| i.bead.clone()).collect()
    }

    /// The first moment after `now` at which a deferral ends, so [`Graph::ready`] may answer
    /// differently from then on; `None` when only a change to the file can change it.
    pub fn next_change(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.issues
            .iter()
            .filter(|i| i.status == Status::Open)
            .filter_map(|i| i.defer_until)
            .filter(|d| d.timestamp() > now.timestamp())
            .filter_map(|d| DateTime::from_timestamp(d.timestamp(), 0))
            .min()
    }

    /// Indices of the blocked beads.
    fn blocked(&self) -> HashSet<usize> {
        let blocks = |t: &Issue| !t.status.is_terminal() && !t.template;
        let mut children: HashMap<usize, Vec<usize>> = HashMap::new();
        let mut blocked: HashSet<usize> = HashSet::new();
        for (i, x) in self.issues.iter().enumerate() {
            for &(t, kind) in &x.deps {
                match kind {
                    DepKind::Blocking if blocks(&self.issues[t]) => {
                        blocked.insert(i);
                    }
                    DepKind::ParentChild => children.entry(t).or_default().push(i),
                    DepKind::Blocking => {}
                }
            }
        }
        // A blocked parent blocks its children, and theirs.
        let mut queue: Vec<usize> = blocked.iter().copied().collect();
        let mut seen = HashSet::new();
        while let Some(p) = queue.pop() {
            if !seen.insert(p) {
                continue;
            }
            for &c in children.get(&p).into_iter().flatten() {
                blocked.insert(c);
                queue.push(c);
            }
        }
        // An epic waits for its children; this is not passed down.
        for (p, kids) in &children {
            let live = |c: &usize| {
                let c = &self.issues[*c];
                !c.status.is_terminal() && !c.template
            };
            if self.issues[*p].epic && kids.iter().any(live) {
                blocked.insert(*p);
            }
        }
        blocked
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at(h: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 1, 1, h, 0, 0).unwrap()
    }

    /// A row: `id`, then `key=value` settings; `dep=<type>:<target>` adds a dependency.
    fn row(id: &str, hour: u32, settings: &[&str]) -> String {
        let mut o = serde_json::json!({
            "id": id, "title": format!("title {id}"), "status": "open", "priority": 2,
            "issue_type": "task", "created_at": at(hour), "updated_at": at(hour),
        });
        let mut deps = Vec::new();
        for s in settings {
            let (k, v) = s.split_once('=').unwrap();
            let value = match k {
                "dep" => {
                    let (t, target) = v.split_once(':').unwrap();
                    deps.push(serde_json::json!({"issue_id": id, "depends_on_id": target,
                        "type": t, "created_at": at(hour)}));
                    continue;
                }
                "priority" => serde_json::json!(v.parse::<i64>().unwrap()),
                "pinned" | "is_template" | "ephemeral" => serde_json::json!(v == "true"),
                _ => serde_json::json!(v),
            };
            o[k] = value;
        }
        if o["status"] == "closed" {
            o["closed_at"] = serde_json::json!(at(hour));
        }
        if !deps.is_empty() {
            o["dependencies"] = serde_json::Value::Array(deps);
        }
        o.to_string()
    }

    fn ids(beads: &[Bead]) -> Vec<&str> {
        beads.iter().map(|b| b.id.as_str()).collect()
    }

    fn graph(rows: &[String]) -> Graph {
        parse(&rows.join("\n")).unwrap()
    }

    #[test]
    fn c5_1_ready_follows_brs_rules() {
        let g = graph(&[
            row("t-open", 1, &[]),
            row("t-closed", 2, &["status=closed"]),
            row("t-wip", 3, &["status=in_progress", "assignee=bob"]),
            row("t-blocked", 4, &["dep=blocks:t-wip"]),
            row("t-free", 5, &["dep=blocks:t-closed", "dep=related:t-wip"]),
            row("t-waits", 6, &["dep=waits-for:t-open"]),
            row("t-later", 7, &["defer_until=2026-01-01T12:00:00Z"]),
            row("t-sooner", 8, &["defer_until=2026-01-01T09:00:00.900Z"]),
            row("t-pinned", 9, &["pinned=true"]),
            row("t-tpl", 10, &["is_template=true"]),
            row("t-onTpl", 11, &["dep=blocks:t-tpl"]),
            row("t-mine", 12, &["assignee=someone"]),
            row("t-gone", 13, &["status=tombstone"]),
            row("t-onGone", 14, &["dep=conditional-blocks:t-gone"]),
        ]);
        let now = Utc.with_ymd_and_hms(2026, 1, 1, 9, 0, 0).unwrap();
        assert_eq!(
            ids(&g.ready(now)),
            ["t-open", "t-free", "t-sooner", "t-onTpl", "t-mine", "t-onGone"],
            "deferral compared to the second; assignee ignored"
        );
        assert_eq!(g.next_change(now), Some(at(12)));
        let listed = ids(&g.list()).len();
        assert_eq!(listed, 12, "deleted beads and templates are not listed");
    }

    #[test]
    fn c5_1_parents_epics_and_the_hybrid_order() {
        let g = graph(&[
            row("t-blocker", 1, &["status=in_progress"]),
            row("t-parent", 2, &["dep=blocks:t-blocker"]),
            row("t-child", 3, &["dep=parent-child:t-parent"]),
            row("t-grandchild", 4, &["dep=parent-child:t-child"]),
            row("t-epic", 5, &["issue_type=epic", "priority=1"]),
            row("t-kid", 6, &["dep=parent-child:t-epic", "priority=4"]),
            row("t-epic2", 7, &["issue_type=Epic", "priority=0"]),
            row("t-done", 8, &["status=closed", "dep=parent-child:t-epic2"]),
            row("t-p3", 0, &["priority=3"]),
            row("t-p0", 9, &["priority=0"]),
        ]);
        // the epic with an open child waits; its child is ready; a blocked parent blocks down
        assert_eq!(ids(&g.ready(at(12))), ["t-epic2", "t-p0", "t-p3", "t-kid"]);
        let list = g.list();
        assert_eq!(ids(&list)[..3], ["t-p0", "t-epic2", "t-epic"]);
    }

    #[test]
    fn c5_1_what_br_alone_can_answer_is_refused() {
        let refused = |rows: &[String]| parse(&rows.join("\n")).is_err();
        assert!(
            refused(&[row("t-a", 1, &["status=review"])]),
            "custom status"
        );
        assert!(refused(&[row("t-a", 1, &["dep=blocks:external:x:t-b"])]));
        assert!(refused(&[row("t-a", 1, &["dep=parent-child:t-missing"])]));
        assert!(refused(&[row("t-a", 1, &["ephemeral=true"])]));
        assert!(refused(&[row("t-wisp-a", 1, &[])]));
        assert!(
            refused(&[row("t-a", 1, &[]), row("t-a", 2, &[])]),
            "duplicate"
        );
        assert!(refused(&[row("t-a", 1, &["priority=7"])]));
        assert!(refused(&["{\"id\":\"t-a\"}".to_string()]), "no title");
        assert!(refused(&["not json".to_string()]));
        assert!(refused(&[row("bad id", 1, &[])]));
        // a dangling dependency that does not gate readiness is fine
        assert!(!refused(&[row("t-a", 1, &["dep=related:t-nowhere"])]));
        assert!(parse("\n\n").unwrap().list().is_empty());
    }

    #[test]
    fn c5_1_beads_read_as_the_br_adapter_reads_brs_output() {
        let g = graph(&[row(
            "t-a",
            1,
            &[
                "status=InProgress",
                "assignee= ",
                "description=d",
                "priority=0",
            ],
        )]);
        let b = &g.list()[0];
        assert_eq!(
            (
                b.status,
                b.assignee.as_deref(),
                b.description.as_str(),
                b.priority
            ),
            (BeadStatus::InProgress, None, "d", 0)
        );
        let g = graph(&[
            row("t-p", 1, &["status=pinned"]),
            row("t-d", 1, &["status=draft"]),
        ]);
        let statuses: Vec<BeadStatus> = g.list().iter().map(|b| b.status).collect();
        assert_eq!(statuses, [BeadStatus::Unknown, BeadStatus::Deferred]);
    }
}
