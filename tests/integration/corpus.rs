//! The real-world corpus: complete installations in `tests/corpus/<name>/home/` written the way
//! people and agents write these files (bold bullets and plain fields, CRLF, BOMs, front matter,
//! tables with extra columns, stale tables and sections, emoji, mentions, field tables, code
//! blocks and HTML comments full of decoy fields, nested lists, trailing commentary), each with
//! `expected.json`: what `braids check --json` finds (section, file, line, words), what the
//! readers read (registry rows, project settings, iterations and Stories, tracker beads), and
//! what `braids tick --dry-run` would spawn. Decoys inside code blocks, comments and quotes
//! must never be read: the expected values say what the real fields say.
//!
//! `BRAIDS_CORPUS_PRINT=1` prints what braids actually read, to write a new expected.json.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use braids::format::{iteration, project, registry};
use braids::model::NotificationEvent;
use braids::system::paths::Paths;
use braids::tracker::Tracker;
use serde_json::{json, Value};

use crate::support::files::{contents, copy_tree};
use crate::support::{ReportExt, Sandbox};

fn corpus() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/corpus")
}

fn rel(home: &Path, p: &str) -> String {
    p.strip_prefix(&format!("{}/", home.display()))
        .unwrap_or(p)
        .to_string()
}

/// What the readers make of one installation, in expected.json's shape.
fn read_installation(home: &Path) -> Value {
    let paths = Paths::new(home.to_path_buf(), None);
    let reg = registry::read_registry(&paths).value;
    let mut rows = Vec::new();
    let mut projects = serde_json::Map::new();
    for e in &reg.entries {
        rows.push(json!({
            "slug": e.slug,
            "status": e.status.map(|s| s.as_str()),
            "priority": e.priority.map(|p| p.as_str()),
            "path": rel(home, &e.path.display().to_string()),
        }));
        if !e.path.join(".braids/PROJECT.md").is_file() {
            continue;
        }
        let c = project::read_project(&e.path).value;
        let off: Vec<&str> = NotificationEvent::ALL
            .iter()
            .filter(|ev| !c.notifications.is_on(**ev))
            .map(|ev| ev.as_str())
            .collect();
        let mentions: BTreeMap<&str, &str> = NotificationEvent::ALL
            .iter()
            .filter_map(|ev| c.notifications.mention(*ev).map(|m| (ev.as_str(), m)))
            .collect();
        let its: Vec<Value> = iteration::read_iterations(&e.path)
            .value
            .iter()
            .map(|it| {
                json!({
                    "number": it.name.number(),
                    "status": it.status.map(|s| s.as_str()),
                    "stories": it.stories.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(),
                })
            })
            .collect();
        let mut beads = BTreeMap::new();
        if e.path.join(".braids/WORKPLAN.md").is_file() {
            let wp = braids::tracker::native::Workplan::new(&e.path);
            for b in wp.list().unwrap() {
                beads.insert(b.id.to_string(), b.status.as_str());
            }
        }
        projects.insert(
            e.slug.clone(),
            json!({
                "name": c.name,
                "status": c.status.map(|s| s.as_str()),
                "priority": c.priority.as_str(),
                "autonomy": c.autonomy.as_str(),
                "max_workers": c.max_workers,
                "worker_timeout": c.worker_timeout,
                "checkin": c.checkin.as_str(),
                "channel": c.channel,
                "notifications_off": off,
                "mentions": mentions,
                "iterations": its,
                "beads": beads,
            }),
        );
    }
    json!({ "registry": rows, "projects": projects })
}

fn installations() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(corpus())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("expected.json").is_file())
        .collect();
    v.sort();
    assert!(v.len() >= 2, "the corpus is missing: {v:?}");
    v
}

/// One installation, copied into a sandbox HOME; its commands see no `br` but a stub's.
fn setup(dir: &Path) -> (Sandbox, Value) {
    let s = Sandbox::new().isolated();
    copy_tree(&dir.join("home"), s.home());
    let expected: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("expected.json")).unwrap()).unwrap();
    (s, expected)
}

#[test]
fn c1_corpus_readers_read_what_people_meant() {
    for dir in installations() {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let (s, expected) = setup(&dir);
        let got = read_installation(s.home());
        if std::env::var_os("BRAIDS_CORPUS_PRINT").is_some() {
            eprintln!("{name}:\n{got:#}");
        }
        assert_eq!(
            got["registry"], expected["registry"],
            "{name}: 1.1 registry rows"
        );
        let want = expected["projects"].as_object().unwrap();
        let have = got["projects"].as_object().unwrap();
        assert_eq!(
            have.keys().collect::<Vec<_>>(),
            want.keys().collect::<Vec<_>>(),
            "{name}: projects read"
        );
        for (slug, w) in want {
            for (k, v) in w.as_object().unwrap() {
                let section = match k.as_str() {
                    "iterations" => "1.3",
                    "beads" => "4.3",
                    _ => "1.2",
                };
                assert_eq!(
                    &have[slug][k], v,
                    "{section} violated: {name}/{slug}: {k} read as {} (expected {v})",
                    have[slug][k]
                );
            }
        }
    }
}

#[test]
fn c1_corpus_check_finds_exactly_the_violations() {
    for dir in installations() {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let (s, expected) = setup(&dir);
        let r = s.run_limited(&["check", "--json"], Duration::from_secs(60));
        let v: Value = serde_json::from_str(&r.stdout)
            .unwrap_or_else(|e| panic!("{name}: {e}: {}{}", r.stdout, r.stderr));
        assert_eq!(
            r.code,
            expected["check_exit"].as_i64().map(|c| c as i32),
            "{name}: exit code\n{v:#}"
        );
        let found: Vec<(String, String, Option<u64>, String)> = v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| {
                (
                    f["section"].as_str().unwrap().to_string(),
                    rel(s.home(), f["path"].as_str().unwrap()),
                    f["line"].as_u64(),
                    f["message"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        if std::env::var_os("BRAIDS_CORPUS_PRINT").is_some() {
            for f in &found {
                eprintln!("{name}: {f:?}");
            }
        }
        let want = expected["findings"].as_array().unwrap();
        for w in want {
            let hit = found.iter().any(|(sec, file, line, msg)| {
                w["section"] == sec.as_str()
                    && w["file"] == file.as_str()
                    && w["line"].as_u64() == *line
                    && msg.contains(w["contains"].as_str().unwrap())
            });
            assert!(
                hit,
                "{} violated: {name}: `braids check` did not report {w} among {found:#?}",
                w["section"].as_str().unwrap()
            );
        }
        assert_eq!(
            found.len(),
            want.len(),
            "{name}: `braids check` reported more than expected (a decoy read, or a finding twice): {found:#?}"
        );
    }
}

#[test]
fn c4_3_corpus_dry_run_spawns_from_the_tracker_in_stories_order() {
    for dir in installations() {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let (s, expected) = setup(&dir);
        let before = contents(s.home());
        let r = s.tick().dry_run().limit(Duration::from_secs(60)).output();
        assert_eq!(r.code, Some(0), "{name}: {}", r.stderr);
        let v = r.report();
        assert_eq!(
            v.labels(),
            expected["dry_run_spawns"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_str().unwrap().to_string())
                .collect::<Vec<_>>(),
            "{name}: what a tick would spawn\n{v:#?}"
        );
        // and `braids check` and a dry run change nothing at all
        let _ = s.run_limited(&["check"], Duration::from_secs(60));
        let after = contents(s.home());
        let changed: Vec<&PathBuf> = after
            .iter()
            .filter(|(p, b)| before.get(*p) != Some(*b))
            .map(|(p, _)| p)
            .chain(before.keys().filter(|p| !after.contains_key(*p)))
            .collect();
        assert!(
            changed.is_empty(),
            "{name}: a dry run or a check wrote {changed:?}"
        );
    }
}
