//! The native br read path against the real br: random bead graphs (every status, every
//! dependency type, parent/child chains, epics, deferrals in the past and the future,
//! priorities and timestamp ties, assignees, pinned beads, templates, deleted beads, wisps),
//! each built with the real `br`, then `br ready --json` and `br list --json --all` compared
//! with what `braids::tracker::br_jsonl` computes from the `.beads/issues.jsonl` br left.
//!
//! Most graphs are written as a JSONL file that br imports, then changed through br's own
//! commands (claims, closes, deletes, status and deferral changes, new dependencies, new beads
//! and wisps), so the file compared is br's own export; one in eight is built with br's commands
//! alone. A file the native reader refuses (it would ask br) is counted, not compared.
//!
//! - `BRAIDS_BR_DIFF_GRAPHS` — how many graphs (default 200; the long local run is 5000);
//! - `BRAIDS_BR_DIFF_SEED` — the first graph's seed (default 1); graph `i` uses seed + i;
//! - `BRAIDS_BR_DIFF_THREADS` — graphs built at once (default 2).
//!
//! A divergence prints its seed; `BRAIDS_BR_DIFF_SEED=<seed> BRAIDS_BR_DIFF_GRAPHS=1` replays
//! it. `-- --nocapture` prints the counts.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use braids::model::BeadStatus;
use braids::tracker::br_jsonl;
use braids::tracker::br_native::{trust_jsonl, BeadsDir};
use braids::tracker::{self, TrackerKind, TrackerOptions};
use chrono::{DateTime, Duration, SecondsFormat, Utc};
use serde_json::{json, Value};

fn env_num(key: &str, default: u64) -> u64 {
    std::env::var(key)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

/// The real `br`: on PATH or in `/root/.cargo/bin`.
fn br_program() -> PathBuf {
    std::env::var_os("PATH")
        .and_then(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join("br"))
                .find(|p| p.is_file())
        })
        .or_else(|| Some(PathBuf::from("/root/.cargo/bin/br")).filter(|p| p.is_file()))
        .expect("the real `br` (beads_rust) is not installed")
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

/// A project with br initialised, and how to run br in it.
struct Project {
    _dir: tempfile::TempDir,
    root: PathBuf,
    br: PathBuf,
}

struct Out {
    ok: bool,
    stdout: String,
}

impl Project {
    /// A project with `br init --prefix=g` done.
    fn init(br: &Path) -> Project {
        let p = Project::empty(br);
        let out = p.run_with(&["init", "--prefix=g", "--json"], true);
        assert!(out.ok, "br init failed: {}", out.stdout);
        p
    }

    fn empty(br: &Path) -> Project {
        let dir = tempfile::Builder::new()
            .prefix("braids-brdiff-")
            .tempdir()
            .unwrap();
        Project {
            root: dir.path().to_path_buf(),
            _dir: dir,
            br: br.to_path_buf(),
        }
    }

    /// A copy of `template`'s freshly initialised `.beads` (cheaper than `br init`).
    fn copy_of(template: &Project) -> Project {
        let p = Project::empty(&template.br);
        std::fs::create_dir_all(p.beads()).unwrap();
        for e in std::fs::read_dir(template.beads()).unwrap().flatten() {
            let name = e.file_name();
            if e.file_type().unwrap().is_file() && !name.to_string_lossy().ends_with(".lock") {
                std::fs::copy(e.path(), p.beads().join(name)).unwrap();
            }
        }
        p
    }

    fn beads(&self) -> PathBuf {
        self.root.join(".beads")
    }

    fn run(&self, args: &[&str]) -> Out {
        self.run_with(args, false)
    }

    fn run_with(&self, args: &[&str], init: bool) -> Out {
        let mut cmd = Command::new(&self.br);
        cmd.args(args)
            .current_dir(&self.root)
            .env("HOME", &self.root)
            .env("NO_COLOR", "1")
            .env("RUST_LOG", "error")
            .env_remove("BEADS_CACHE_DIR");
        for k in ["BD_DB", "BD_DATABASE", "BEADS_DB", "BEADS_JSONL"] {
            cmd.env(k, "");
        }
        if init {
            cmd.env("BEADS_DIR", "");
        } else {
            cmd.env("BEADS_DIR", self.beads());
        }
        let o = cmd.output().expect("run br");
        Out {
            ok: o.status.success(),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        }
    }
}

const STATUSES: [(&str, u64); 8] = [
    ("open", 45),
    ("in_progress", 13),
    ("blocked", 8),
    ("deferred", 7),
    ("closed", 13),
    ("tombstone", 6),
    ("draft", 4),
    ("pinned", 4),
];
const DEP_TYPES: [&str; 11] = [
    "blocks",
    "parent-child",
    "conditional-blocks",
    "waits-for",
    "related",
    "discovered-from",
    "replies-to",
    "relates-to",
    "duplicates",
    "supersedes",
    "caused-by",
];
const TYPES: [&str; 6] = ["task", "bug", "feature", "epic", "chore", "docs"];
const TITLES: [&str; 6] = [
    "Fix the thing",
    "  spaced title  ",
    "quote \" and \\ backslash",
    "Ünïcödé ✓ 日本",
    "-starts with a dash",
    "tab\tinside",
];
const ASSIGNEES: [&str; 4] = ["alice", "braids", "bob smith", " "];

fn weighted(rng: &mut Rng, table: &[(&'static str, u64)]) -> &'static str {
    let total: u64 = table.iter().map(|(_, w)| w).sum();
    let mut r = rng.below(total);
    for (v, w) in table {
        if r < *w {
            return v;
        }
        r -= w;
    }
    table[0].0
}

/// A timestamp in one of the spellings br's importer accepts.
fn spell(t: DateTime<Utc>, rng: &mut Rng) -> String {
    match rng.below(4) {
        0 => t.to_rfc3339_opts(SecondsFormat::Secs, true),
        1 => t.to_rfc3339_opts(SecondsFormat::Millis, true),
        2 => t.to_rfc3339_opts(SecondsFormat::Nanos, true),
        _ => t.to_rfc3339_opts(SecondsFormat::AutoSi, false),
    }
}

/// Hours away from now: never within the time a comparison takes.
fn deferral(rng: &mut Rng, now: DateTime<Utc>) -> DateTime<Utc> {
    let hours = 1 + rng.below(24 * 30) as i64;
    match rng.below(5) {
        0 => DateTime::from_timestamp(1_577_836_800, 0).unwrap(), // 2020-01-01
        1 | 2 => now - Duration::hours(hours),
        _ => now + Duration::hours(hours),
    }
}

/// What the generator made: ids, which are epics, and which are wisps (ephemeral beads). br
/// never exports wisps, so they are in `br list` but not in the file: the list comparison
/// leaves them out (and counts them), and a wisp is never made an epic's child, the read
/// path's one blind spot for readiness (see `tracker::br_native`).
struct Shape {
    ids: Vec<String>,
    epics: Vec<String>,
    wisps: Vec<String>,
}

/// A random export, as br writes it, for br to import.
fn jsonl_graph(rng: &mut Rng, now: DateTime<Utc>) -> (String, Shape) {
    let n = 3 + rng.below(12) as usize;
    let mut ids: Vec<String> = Vec::new();
    while ids.len() < n {
        let mut id = format!("g-{:03}", radix36(rng.below(36 * 36 * 36)));
        if !ids.is_empty() && rng.chance(10) {
            id = format!("{}.{}", rng.pick(&ids).clone(), 1 + rng.below(3));
        }
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
    let base = now - Duration::days(20);
    let mut rows = Vec::new();
    let mut epics = Vec::new();
    let mut last = base;
    for (i, id) in ids.iter().enumerate() {
        // Ties on purpose: the same instant orders by id.
        let created = if i > 0 && rng.chance(20) {
            last
        } else {
            base + Duration::seconds(rng.below(86_400 * 10) as i64)
                + Duration::nanoseconds(if rng.chance(30) {
                    0
                } else {
                    rng.below(1_000_000_000) as i64
                })
        };
        last = created;
        let status = weighted(rng, &STATUSES);
        let kind = if rng.chance(15) {
            "epic"
        } else {
            *rng.pick(&TYPES)
        };
        if kind == "epic" {
            epics.push(id.clone());
        }
        let mut row = json!({
            "id": id,
            "title": rng.pick(&TITLES),
            "status": status,
            "priority": rng.below(5),
            "issue_type": kind,
            "created_at": spell(created, rng),
            "created_by": "gen",
            "updated_at": spell(created + Duration::seconds(5), rng),
            "compaction_level": 0,
            "original_size": 0,
        });
        if rng.chance(30) {
            row["assignee"] = json!(rng.pick(&ASSIGNEES));
        }
        if rng.chance(30) {
            row["description"] = json!("line one\nline two");
        }
        if status == "closed" {
            row["closed_at"] = json!(spell(created + Duration::seconds(9), rng));
            row["close_reason"] = json!("done");
        }
        if status == "tombstone" {
            row["deleted_at"] = json!(spell(created + Duration::seconds(9), rng));
            row["deleted_by"] = json!("gen");
            row["delete_reason"] = json!("delete");
            row["original_type"] = json!(kind);
        }
        if rng.chance(25) {
            row["defer_until"] = json!(spell(deferral(rng, now), rng));
        }
        if rng.chance(5) {
            row["pinned"] = json!(true);
        }
        if rng.chance(4) {
            row["is_template"] = json!(true);
        }
        let mut deps = Vec::new();
        let mut targets = Vec::new();
        for _ in 0..rng.below(4) {
            let target = rng.pick(&ids).clone();
            if target == *id || targets.contains(&target) {
                continue;
            }
            // Chains: a parent is more often an earlier bead.
            let t = if rng.chance(30) {
                "parent-child"
            } else {
                *rng.pick(&DEP_TYPES)
            };
            deps.push(json!({"issue_id": id, "depends_on_id": target, "type": t,
                "created_at": spell(created, rng), "created_by": "gen", "metadata": "{}",
                "thread_id": ""}));
            targets.push(target);
        }
        if !deps.is_empty() {
            row["dependencies"] = Value::Array(deps);
        }
        rows.push(row.to_string());
    }
    let mut text = rows.join("\n");
    text.push('\n');
    (
        text,
        Shape {
            ids,
            epics,
            wisps: Vec::new(),
        },
    )
}

fn radix36(mut n: u64) -> String {
    let digits = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut s = Vec::new();
    for _ in 0..3 {
        s.push(digits[(n % 36) as usize]);
        n /= 36;
    }
    s.reverse();
    String::from_utf8(s).unwrap()
}

/// One change through br's own commands; br may refuse it, which is fine.
fn mutate(p: &Project, rng: &mut Rng, shape: &mut Shape, now: DateTime<Utc>) {
    if shape.ids.is_empty() {
        return;
    }
    let id = rng.pick(&shape.ids).clone();
    let other = rng.pick(&shape.ids).clone();
    let when = deferral(rng, now).to_rfc3339_opts(SecondsFormat::Secs, true);
    let args: Vec<String> = match rng.below(12) {
        0 => vec![
            "update".into(),
            id,
            "--claim".into(),
            "--actor=agent-x".into(),
        ],
        1 => vec!["close".into(), id],
        2 => vec!["delete".into(), id, "--force".into()],
        3 => {
            let s = rng.pick(&["open", "in_progress", "blocked", "deferred"]);
            vec!["update".into(), id, format!("--status={s}")]
        }
        4 => vec!["update".into(), id, format!("--defer={when}")],
        5 => vec!["update".into(), id, "--defer=".into()],
        6 => vec!["update".into(), id, format!("--priority={}", rng.below(5))],
        7 => {
            let t = if rng.chance(40) {
                "parent-child"
            } else {
                *rng.pick(&DEP_TYPES)
            };
            vec!["dep".into(), "add".into(), id, other, format!("--type={t}")]
        }
        8 => vec!["dep".into(), "remove".into(), id, other],
        9 => vec!["reopen".into(), id],
        10 => vec![
            "update".into(),
            id,
            format!("--assignee={}", rng.pick(&ASSIGNEES)),
        ],
        _ => {
            let kind = if rng.chance(25) {
                "epic"
            } else {
                *rng.pick(&TYPES)
            };
            let mut a = vec![
                "create".to_string(),
                format!("--title={}", rng.pick(&TITLES)),
                format!("--priority={}", rng.below(5)),
                format!("--type={kind}"),
            ];
            let parent = rng.chance(40).then_some(other);
            if let Some(p) = &parent {
                a.push(format!("--parent={p}"));
            }
            let parent_is_epic = parent.as_ref().is_some_and(|p| shape.epics.contains(p));
            let wisp = rng.chance(12) && !parent_is_epic && kind != "epic";
            if wisp {
                a.push("--ephemeral".into());
            }
            if rng.chance(20) {
                a.push(format!("--defer={when}"));
            }
            if rng.chance(20) {
                a.push(format!("--assignee={}", rng.pick(&ASSIGNEES)));
            }
            a.push("--json".into());
            let argv: Vec<&str> = a.iter().map(String::as_str).collect();
            let out = p.run(&argv);
            if let Ok(v) = serde_json::from_str::<Value>(&out.stdout) {
                if let Some(new) = v["id"].as_str().or(v[0]["id"].as_str()) {
                    shape.ids.push(new.to_string());
                    if kind == "epic" {
                        shape.epics.push(new.to_string());
                    }
                    if wisp {
                        shape.wisps.push(new.to_string());
                    }
                }
            }
            return;
        }
    };
    let mut argv: Vec<&str> = args.iter().map(String::as_str).collect();
    argv.push("--json");
    p.run(&argv);
}

/// A graph made with br's commands alone.
fn command_graph(p: &Project, rng: &mut Rng, now: DateTime<Utc>) -> Shape {
    let mut shape = Shape {
        ids: Vec::new(),
        epics: Vec::new(),
        wisps: Vec::new(),
    };
    for _ in 0..(3 + rng.below(4)) {
        let kind = if rng.chance(25) {
            "epic"
        } else {
            *rng.pick(&TYPES)
        };
        let mut a = vec![
            "create".to_string(),
            format!("--title={}", rng.pick(&TITLES)),
            format!("--priority={}", rng.below(5)),
            format!("--type={kind}"),
            "--json".to_string(),
        ];
        if !shape.ids.is_empty() && rng.chance(35) {
            a.push(format!("--parent={}", rng.pick(&shape.ids)));
        }
        if rng.chance(20) {
            let when = deferral(rng, now).to_rfc3339_opts(SecondsFormat::Secs, true);
            a.push(format!("--defer={when}"));
        }
        let argv: Vec<&str> = a.iter().map(String::as_str).collect();
        let out = p.run(&argv);
        if let Ok(v) = serde_json::from_str::<Value>(&out.stdout) {
            if let Some(id) = v["id"].as_str().or(v[0]["id"].as_str()) {
                shape.ids.push(id.to_string());
                if kind == "epic" {
                    shape.epics.push(id.to_string());
                }
            }
        }
    }
    for _ in 0..(2 + rng.below(5)) {
        mutate(p, rng, &mut shape, now);
    }
    shape
}

/// What one graph came to.
enum Verdict {
    Agreed {
        ready: usize,
        listed: usize,
        wisps: usize,
    },
    /// The native reader refused the file (the tick asks br); why.
    Refused(String),
    /// br itself refused the graph (not a comparison).
    BrRefused,
    Diverged(String),
}

/// The kind of a refusal, without the bead ids in it.
fn kind_of_refusal(why: &str) -> String {
    [
        ("not in the file", "dangling dependency"),
        ("wisp", "wisp"),
        ("external", "external dependency"),
        ("twice", "duplicate id"),
        ("status", "status"),
        ("priority", "priority"),
        ("closed_at", "closed_at"),
        ("title", "title"),
    ]
    .iter()
    .find(|(k, _)| why.contains(k))
    .map_or_else(|| why.to_string(), |(_, kind)| kind.to_string())
}

fn ids_of(v: &[Value]) -> Vec<String> {
    v.iter()
        .map(|x| x["id"].as_str().unwrap_or("?").to_string())
        .collect()
}

/// `br ready --json` (br's own order) against the native ready list; the br adapter's reading
/// of `br list --json --all` against the native list, bead for bead (what the tick sees); and,
/// with `adapter_ready`, the adapter's `ready` too.
fn compare(p: &Project, wisps: &[String], adapter_ready: bool, now: DateTime<Utc>) -> Verdict {
    let ready = p.run(&["ready", "--json", "--limit=0"]);
    if !ready.ok {
        return Verdict::BrRefused;
    }
    let br_ready: Vec<Value> = serde_json::from_str(&ready.stdout).expect("br ready --json");
    let br = tracker::open(
        TrackerKind::Br,
        TrackerOptions {
            project: p.root.clone(),
            timeout: std::time::Duration::from_secs(60),
            program: Some(p.br.clone()),
            installation: None,
        },
    )
    .unwrap();
    let Ok(mut br_list) = br.list() else {
        return Verdict::BrRefused;
    };
    let listed_wisps = br_list.len();
    br_list.retain(|b| !wisps.iter().any(|w| w == b.id.as_str()));
    let listed_wisps = listed_wisps - br_list.len();
    let text = std::fs::read_to_string(p.beads().join("issues.jsonl")).unwrap_or_default();
    let graph = match br_jsonl::parse(&text) {
        Ok(g) => g,
        Err(e) => return Verdict::Refused(kind_of_refusal(&e.0)),
    };
    let mut problems = Vec::new();
    let native_ready = graph.ready(now);
    let want: Vec<String> = ids_of(&br_ready);
    let got: Vec<String> = native_ready.iter().map(|b| b.id.to_string()).collect();
    if want != got {
        problems.push(format!("ready: br {want:?}\n       native {got:?}"));
    }
    let native_list = graph.list();
    let statuses = |l: &[braids::model::Bead]| -> Vec<(String, BeadStatus)> {
        l.iter().map(|b| (b.id.to_string(), b.status)).collect()
    };
    if br_list != native_list {
        problems.push(format!(
            "list: br {:?}\n      native {:?}\n(bead for bead: {br_list:#?}\nnative {native_list:#?})",
            statuses(&br_list),
            statuses(&native_list)
        ));
    }
    if adapter_ready && problems.is_empty() {
        // As the adapter orders br's answer: most urgent first, br's order within.
        let mut urgent = native_ready.clone();
        urgent.sort_by_key(|b| b.priority);
        match br.ready() {
            Ok(r) if r != urgent => {
                problems.push(format!("adapter ready: {r:#?}\nnative {urgent:#?}"));
            }
            Ok(_) => {}
            Err(e) => problems.push(format!("the br adapter failed: {e}")),
        }
    }
    if problems.is_empty() {
        Verdict::Agreed {
            ready: native_ready.len(),
            listed: native_list.len(),
            wisps: listed_wisps,
        }
    } else {
        Verdict::Diverged(format!("{}\nJSONL:\n{text}", problems.join("\n")))
    }
}

#[derive(Default)]
struct Tally {
    graphs: usize,
    agreed: usize,
    ready: usize,
    listed: usize,
    wisps: usize,
    refused: BTreeMap<String, usize>,
    br_refused: usize,
    trusted: usize,
    untrusted: BTreeMap<String, usize>,
    divergences: Vec<String>,
}

fn one_graph(template: &Project, seed: u64, tally: &Mutex<Tally>) {
    let mut rng = Rng(seed);
    let now = Utc::now();
    let p = Project::copy_of(template);
    let commands_only = rng.chance(12);
    let mut shape = if commands_only {
        command_graph(&p, &mut rng, now)
    } else {
        let (text, shape) = jsonl_graph(&mut rng, now);
        std::fs::write(p.beads().join("issues.jsonl"), text).unwrap();
        shape
    };
    if !commands_only {
        for _ in 0..rng.below(3) {
            mutate(&p, &mut rng, &mut shape, now);
        }
    }
    let verdict = compare(&p, &shape.wisps, seed % 8 == 0, now);
    let trust = trust_jsonl(&BeadsDir {
        br_installed: true, // this test's br may be found off PATH
        ..BeadsDir::read(&p.beads())
    });
    let mut t = tally.lock().unwrap();
    t.graphs += 1;
    match trust {
        Ok(()) => t.trusted += 1,
        Err(why) => *t.untrusted.entry(why).or_default() += 1,
    }
    match verdict {
        Verdict::Agreed {
            ready,
            listed,
            wisps,
        } => {
            t.agreed += 1;
            t.ready += ready;
            t.listed += listed;
            t.wisps += wisps;
        }
        Verdict::Refused(why) => *t.refused.entry(why).or_default() += 1,
        Verdict::BrRefused => t.br_refused += 1,
        Verdict::Diverged(d) => t.divergences.push(format!(
            "seed {seed} (replay: BRAIDS_BR_DIFF_SEED={seed} BRAIDS_BR_DIFF_GRAPHS=1):\n{d}"
        )),
    }
}

#[test]
fn c5_1_br_native_reads_agree_with_br_ready_and_list() {
    let template = Project::init(&br_program());
    let graphs = env_num("BRAIDS_BR_DIFF_GRAPHS", 200) as usize;
    let first = env_num("BRAIDS_BR_DIFF_SEED", 1);
    let threads = env_num("BRAIDS_BR_DIFF_THREADS", 2).max(1) as usize;
    let next = AtomicUsize::new(0);
    let tally = Mutex::new(Tally::default());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                if i >= graphs {
                    break;
                }
                if graphs >= 1000 && i % 500 == 0 {
                    eprintln!("br differential: graph {i} of {graphs}");
                }
                one_graph(&template, first + i as u64, &tally);
            });
        }
    });
    let t = tally.into_inner().unwrap();
    println!(
        "br differential: {} graphs, {} compared and agreed ({} listed beads, {} ready; \
         {} wisps listed by br and not exported, left out), \
         {} refused by the native reader {:?}, {} refused by br, {} divergences; \
         the JSONL br left was trusted in {} ({:?} otherwise)",
        t.graphs,
        t.agreed,
        t.listed,
        t.ready,
        t.wisps,
        t.refused.values().sum::<usize>(),
        t.refused,
        t.br_refused,
        t.divergences.len(),
        t.trusted,
        t.untrusted
    );
    assert!(
        t.divergences.is_empty(),
        "the native br read path diverged from br in {} of {} graphs:\n\n{}",
        t.divergences.len(),
        t.graphs,
        t.divergences
            .iter()
            .take(5)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n\n")
    );
    assert!(
        t.agreed * 10 >= t.graphs * 7,
        "too few graphs compared ({} of {}) for the differential to mean much",
        t.agreed,
        t.graphs
    );
}
