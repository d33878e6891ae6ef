//! One project's entry in the observation cache: what a tick read of PROJECT.md, the
//! iterations and the tracker, with the fingerprints that say whether it still holds.
//!
//! Only what a tick reads is kept, so the entry stays small and quick to load: PROJECT.md
//! without Goal and Guardrails (workers read those themselves), and of the iterations their
//! names and statuses, with Stories only for those a run can show (every active one, and the
//! last). Observing from a slim entry and from the files gives the same view and report; the
//! observe step slims what it read the same way before using it, so the two cannot drift.

use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::Path;

use chrono::{DateTime, Utc};

use super::codec::{Dec, Enc};
use crate::format::fields::Field;
use crate::format::iteration::{iterations_dir, Iteration, Story};
use crate::format::project::{NotificationSetting, Notifications, ProjectConfig};
use crate::model::{
    Autonomy, Bead, BeadId, BeadStatus, Checkin, IterationName, IterationStatus, NotificationEvent,
    Priority, ProjectStatus,
};
use crate::tick::observe::cache::reuse::Answers;
use crate::tracker::TrackerKind;

const STATUSES: &[BeadStatus] = &[
    BeadStatus::Open,
    BeadStatus::InProgress,
    BeadStatus::Blocked,
    BeadStatus::Deferred,
    BeadStatus::Closed,
    BeadStatus::Unknown,
];

const KINDS: &[TrackerKind] = &[
    TrackerKind::Auto,
    TrackerKind::Br,
    TrackerKind::Bd,
    TrackerKind::Workplan,
];

#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// Fingerprint of PROJECT.md, the iterations directory and each listed ITERATION.md.
    pub files: u64,
    /// The names in `.braids/iterations/` when the stamps were taken, sorted: the next run
    /// stamps the same files without listing the directory (whose stamp vouches for it).
    pub listing: Vec<OsString>,
    pub config: ProjectConfig,
    pub iterations: Vec<Iteration>,
    /// The tracker's answers and which tracker gave them (their fingerprint covers its files).
    pub answers: Option<(TrackerKind, Answers)>,
    /// What the readers found wrong in those files (`ProjectReport::problems`).
    pub problems: Vec<String>,
}

/// The fields PROJECT.md's reader turns into members of [`ProjectConfig`]: a tick reads those
/// members, never the fields.
const TYPED: &[&str] = &[
    "status",
    "priority",
    "autonomy",
    "checkin",
    "maxworkers",
    "workertimeout",
    "channel",
];

/// PROJECT.md as a tick uses it: Goal and Guardrails are for workers, which read the file, and
/// of the fields only those without a member of their own (`Tracker`, `Workspace`, `Executor`,
/// and any a person added), which a tick looks up by name.
pub fn slim_config(mut config: ProjectConfig) -> ProjectConfig {
    config.goal = None;
    config.guardrails = None;
    config.fields.retain(|f| !TYPED.contains(&f.key.as_str()));
    config
}

/// Iterations as a tick uses them: every name and status, and the Stories of those a run may
/// show (an active one when the project is eligible, else the last).
pub fn slim_iterations(mut its: Vec<Iteration>) -> Vec<Iteration> {
    let last = its.len().saturating_sub(1);
    for (i, it) in its.iter_mut().enumerate() {
        it.guardrails = None;
        it.notes = None;
        if i != last && it.status != Some(IterationStatus::Active) {
            it.stories = Vec::new();
            it.maybe_stories = Vec::new();
        }
    }
    its
}

impl Entry {
    pub fn encode(&self) -> Vec<u8> {
        let mut e = Enc(Vec::with_capacity(1024));
        e.u64_fixed(self.files);
        e.uint(self.listing.len() as u64);
        for name in &self.listing {
            e.bytes(name.as_bytes());
        }
        config(&mut e, &self.config);
        e.uint(self.iterations.len() as u64);
        for it in &self.iterations {
            e.str(it.name.as_str());
            e.choice(IterationStatus::ALL, it.status.as_ref());
            stories(&mut e, &it.stories);
            stories(&mut e, &it.maybe_stories);
            e.opt_str(it.milestone.as_deref());
        }
        e.bool(self.answers.is_some());
        if let Some((kind, a)) = &self.answers {
            e.choice(KINDS, Some(kind));
            e.u64_fixed(a.fingerprint);
            e.bool(a.until.is_some());
            if let Some(t) = a.until {
                e.i64(t.timestamp());
                e.uint(u64::from(t.timestamp_subsec_nanos()));
            }
            e.uint(a.beads.len() as u64);
            for (id, status) in &a.beads {
                e.str(id.as_str());
                e.choice(STATUSES, Some(status));
            }
            e.bool(a.ready.is_some());
            if let Some(list) = &a.ready {
                e.uint(list.len() as u64);
                for b in list {
                    e.str(b.id.as_str());
                    e.str(&b.title);
                    e.choice(STATUSES, Some(&b.status));
                }
            }
        }
        e.uint(self.problems.len() as u64);
        for p in &self.problems {
            e.str(p);
        }
        e.0
    }

    /// The entry of the project at `root`, or `None` when the bytes are not one. Without
    /// `titles` the Stories come without their titles (empty), which only the dashboards show:
    /// a dry run over 10,000 projects need not make 200,000 strings it never reads.
    pub fn decode(bytes: &[u8], root: &Path, titles: bool) -> Option<Entry> {
        let mut d = Dec::new(bytes);
        let files = d.u64_fixed()?;
        let n = d.len()?;
        let mut listing = Vec::with_capacity(n);
        for _ in 0..n {
            listing.push(OsString::from_vec(d.bytes()?.to_vec()));
        }
        let config = read_config(&mut d)?;
        let dir = iterations_dir(root);
        let n = d.len()?;
        let mut iterations = Vec::with_capacity(n);
        for _ in 0..n {
            let raw = d.str()?;
            let name = IterationName::new(raw).ok()?;
            iterations.push(Iteration {
                name,
                dir: dir.join(raw),
                status: d.choice(IterationStatus::ALL)?,
                stories: read_stories(&mut d, titles)?,
                maybe_stories: read_stories(&mut d, titles)?,
                guardrails: None,
                notes: None,
                milestone: d.opt_string()?,
            });
        }
        let answers = match d.bool()? {
            false => None,
            true => Some((d.some_choice(KINDS)?, read_answers(&mut d)?)),
        };
        let mut problems = Vec::new();
        for _ in 0..d.len()? {
            problems.push(d.string()?);
        }
        d.is_empty().then_some(Entry {
            files,
            listing,
            config,
            iterations,
            answers,
            problems,
        })
    }
}

fn config(e: &mut Enc, c: &ProjectConfig) {
    e.opt_str(c.name.as_deref());
    e.choice(ProjectStatus::ALL, c.status.as_ref());
    e.choice(Priority::ALL, Some(&c.priority));
    e.choice(Autonomy::ALL, Some(&c.autonomy));
    e.uint(u64::from(c.max_workers));
    e.uint(c.worker_timeout);
    e.uint(c.stall_timeout);
    e.choice(Checkin::ALL, Some(&c.checkin));
    e.opt_str(c.channel.as_deref());
    e.uint(c.notifications.events.len() as u64);
    for (event, setting) in &c.notifications.events {
        e.choice(NotificationEvent::ALL, Some(event));
        e.bool(setting.on);
        e.opt_str(setting.mention.as_deref());
    }
    e.uint(c.fields.len() as u64);
    for f in &c.fields {
        e.str(&f.key);
        e.str(&f.value);
        e.uint(f.line as u64);
    }
}

fn read_config(d: &mut Dec<'_>) -> Option<ProjectConfig> {
    let mut c = ProjectConfig {
        name: d.opt_string()?,
        status: d.choice(ProjectStatus::ALL)?,
        priority: d.some_choice(Priority::ALL)?,
        autonomy: d.some_choice(Autonomy::ALL)?,
        max_workers: u32::try_from(d.uint()?).ok()?,
        worker_timeout: d.uint()?,
        stall_timeout: d.uint()?,
        checkin: d.some_choice(Checkin::ALL)?,
        channel: d.opt_string()?,
        notifications: Notifications::default(),
        guardrails: None,
        goal: None,
        fields: Vec::new(),
    };
    for _ in 0..d.len()? {
        let event = d.some_choice(NotificationEvent::ALL)?;
        let setting = NotificationSetting {
            on: d.bool()?,
            mention: d.opt_string()?,
        };
        c.notifications.events.insert(event, setting);
    }
    let n = d.len()?;
    c.fields.reserve_exact(n);
    for _ in 0..n {
        c.fields.push(Field {
            key: d.string()?,
            value: d.string()?,
            line: usize::try_from(d.uint()?).ok()?,
        });
    }
    Some(c)
}

fn stories(e: &mut Enc, list: &[Story]) {
    e.uint(list.len() as u64);
    for s in list {
        e.str(s.id.as_str());
        e.str(&s.title);
        e.uint(s.line as u64);
    }
}

fn read_stories(d: &mut Dec<'_>, titles: bool) -> Option<Vec<Story>> {
    let n = d.len()?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let id = BeadId::new(d.str()?).ok()?;
        let title = d.str()?;
        out.push(Story {
            id,
            title: if titles {
                title.to_string()
            } else {
                String::new()
            },
            line: usize::try_from(d.uint()?).ok()?,
        });
    }
    Some(out)
}

fn read_answers(d: &mut Dec<'_>) -> Option<Answers> {
    let fingerprint = d.u64_fixed()?;
    let until = match d.bool()? {
        false => None,
        true => {
            let secs = d.i64()?;
            let nanos = u32::try_from(d.uint()?).ok()?;
            Some(DateTime::<Utc>::from_timestamp(secs, nanos)?)
        }
    };
    let n = d.len()?;
    let mut beads = Vec::with_capacity(n);
    for _ in 0..n {
        beads.push((BeadId::new(d.str()?).ok()?, d.some_choice(STATUSES)?));
    }
    let ready = match d.bool()? {
        false => None,
        true => {
            let n = d.len()?;
            let mut list = Vec::with_capacity(n);
            for _ in 0..n {
                let id = BeadId::new(d.str()?).ok()?;
                let title = d.string()?;
                list.push(Bead::new(id, title, d.some_choice(STATUSES)?));
            }
            Some(list)
        }
    };
    Some(Answers {
        fingerprint,
        until,
        beads,
        ready,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn id(s: &str) -> BeadId {
        BeadId::new(s).unwrap()
    }

    fn sample(root: &Path) -> Entry {
        let story = |i: &str, line| Story {
            id: id(i),
            title: format!("story {i}"),
            line,
        };
        let mut config = ProjectConfig {
            name: Some("Web".into()),
            status: Some(ProjectStatus::Active),
            max_workers: 3,
            channel: Some("#web".into()),
            fields: vec![Field {
                key: "executor".into(),
                value: "claude -p".into(),
                line: 7,
            }],
            ..ProjectConfig::default()
        };
        config.notifications.events.insert(
            NotificationEvent::ALL[0],
            NotificationSetting {
                on: false,
                mention: Some("<@1>".into()),
            },
        );
        let it = |name: &str, status| Iteration {
            name: IterationName::new(name).unwrap(),
            dir: iterations_dir(root).join(name),
            status,
            stories: vec![story("w-1", 9), story("w-2", 10)],
            maybe_stories: vec![story("readme", 11)],
            guardrails: None,
            notes: None,
            milestone: (name == "2").then(|| "v1.2".to_string()),
        };
        Entry {
            files: 0x1234_5678_9abc_def0,
            listing: vec!["001".into(), "2".into(), "notes.md".into()],
            config,
            iterations: vec![it("001", Some(IterationStatus::Complete)), it("2", None)],
            answers: Some((
                TrackerKind::Workplan,
                Answers {
                    fingerprint: 42,
                    until: Some(Utc.timestamp_opt(1_800_000_000, 5).unwrap()),
                    beads: vec![
                        (id("w-1"), BeadStatus::Open),
                        (id("w-2"), BeadStatus::Closed),
                    ],
                    ready: Some(vec![Bead::new(id("w-1"), "one", BeadStatus::Open)]),
                },
            )),
            problems: vec!["PROJECT.md:6: error [1.2]: MaxWorkers `lots` is not …".into()],
        }
    }

    #[test]
    fn c5_2_an_entry_round_trips() {
        let root = Path::new("/p/web");
        let e = sample(root);
        assert_eq!(Entry::decode(&e.encode(), root, true), Some(e.clone()));
        let untitled = Entry::decode(&e.encode(), root, false).unwrap();
        assert!(untitled.iterations[0]
            .stories
            .iter()
            .all(|s| s.title.is_empty()));
        assert_eq!(
            untitled.iterations[0].stories[1].id,
            e.iterations[0].stories[1].id
        );
        let bare = Entry {
            answers: None,
            iterations: Vec::new(),
            listing: Vec::new(),
            config: ProjectConfig::default(),
            ..e
        };
        assert_eq!(Entry::decode(&bare.encode(), root, true), Some(bare));
    }

    #[test]
    fn c5_2_a_damaged_entry_is_no_entry() {
        let root = Path::new("/p/web");
        let bytes = sample(root).encode();
        for cut in 0..bytes.len() {
            assert_eq!(
                Entry::decode(&bytes[..cut], root, true),
                None,
                "cut at {cut}"
            );
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert_eq!(Entry::decode(&longer, root, true), None, "trailing bytes");
        // every single flipped byte either still decodes or is refused, never a panic
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0xff;
            let _ = Entry::decode(&b, root, true);
        }
    }

    #[test]
    fn slimming_keeps_what_a_run_can_show() {
        let root = Path::new("/p/web");
        let mut its = sample(root).iterations;
        its[0].status = Some(IterationStatus::Active);
        its.insert(1, its[0].clone());
        its[1].status = Some(IterationStatus::Complete);
        its[1].notes = Some("n".into());
        let slim = slim_iterations(its);
        assert_eq!(slim[0].stories.len(), 2, "active");
        assert!(slim[1].stories.is_empty() && slim[1].maybe_stories.is_empty());
        assert_eq!(slim[1].notes, None);
        assert_eq!(slim[2].maybe_stories.len(), 1, "the last");
        let field = |key: &str| Field {
            key: key.into(),
            value: "v".into(),
            line: 3,
        };
        let c = ProjectConfig {
            goal: Some("g".into()),
            guardrails: Some("x".into()),
            fields: vec![field("maxworkers"), field("executor"), field("status")],
            ..ProjectConfig::default()
        };
        let slim = slim_config(c);
        assert_eq!(slim.fields, [field("executor")]);
        assert_eq!((slim.goal, slim.guardrails), (None, None));
    }
}
