//! Hostile input. Slugs, bead ids, titles, Channel values and paths carrying `:`, `/`, `..`,
//! spaces, quotes, `$()`, backticks, line breaks or bytes that are not UTF-8 must never reach a
//! shell (a marker file that `$(touch …)` would create never appears), never escape the project
//! directory (deliverables, work dirs, session records, logs) and never forge a label or a
//! spawn-message field. Then every reader is fuzzed (proptest) with arbitrary bytes and
//! markdown-ish text: no input makes one panic.
//!
//! `BRAIDS_FUZZ_CASES` sets the cases per reader and generator (default 2000: about 50,000
//! inputs in all, a few seconds); `BRAIDS_FUZZ_SEED` varies them. Each fuzz test prints how many
//! inputs it ran (`cargo test --test integration _fuzz_ -- --nocapture`).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::support::files::walk;
use crate::support::procs::{alive, proc_starttime, Bystander};
use crate::support::{wait_for, Install, ReportExt, Run, Sandbox, SLEEPER};

/// An installation for hostile input: its runs see no `br` but the test's stubs, its workers
/// record their spawn message and sleep, and its registry is a bare table.
fn install() -> Sandbox {
    Install::new()
        .isolated_path()
        .worker(SLEEPER)
        .plain_registry()
        .build()
}

/// `braids tick --json --force`, whatever happens (a hang is killed after a minute).
fn tick(s: &Sandbox) -> Run {
    s.tick().force().limit(Duration::from_secs(60)).output()
}

/// What a worker got on stdin, once it wrote it down (and a moment more).
#[track_caller]
fn message_of(s: &Sandbox, label: &str) -> String {
    let msg = wait_for(
        &format!("{label} to start"),
        Duration::from_secs(20),
        || s.spawn_message(label).filter(|m| !m.is_empty()),
    );
    std::thread::sleep(Duration::from_millis(100));
    msg
}

/// Marker files a shell would create if any hostile text reached one. Unique per test.
struct Markers {
    paths: Vec<PathBuf>,
}

impl Markers {
    fn new(tag: &str, s: &Sandbox) -> Markers {
        let pid = std::process::id();
        Markers {
            paths: vec![
                PathBuf::from(format!("/tmp/braids-pwned-{tag}-{pid}")),
                s.home().join(format!("pwned-{tag}")),
            ],
        }
    }
    /// `$(touch …)` and backtick payloads for every marker.
    fn payloads(&self) -> Vec<String> {
        self.paths
            .iter()
            .flat_map(|p| {
                let p = p.display();
                [
                    format!("$(touch {p})"),
                    format!("`touch {p}`"),
                    format!("; touch {p}"),
                ]
            })
            .collect()
    }
    fn assert_none(&self, what: &str) {
        for p in &self.paths {
            assert!(
                !p.exists(),
                "{what}: hostile text reached a shell: {} exists",
                p.display()
            );
        }
    }
}

impl Drop for Markers {
    fn drop(&mut self) {
        for p in &self.paths {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// Lines as the most eager reader splits them (Python's `str.splitlines`, JavaScript's line
/// terminators): a spawn message must have four by every reader's count, not just Rust's.
fn eager_lines(s: &str) -> usize {
    s.split(|c: char| {
        matches!(
            c,
            '\n' | '\r'
                | '\u{0b}'
                | '\u{0c}'
                | '\u{1c}'
                | '\u{1d}'
                | '\u{1e}'
                | '\u{85}'
                | '\u{2028}'
                | '\u{2029}'
        )
    })
    .filter(|l| !l.is_empty())
    .count()
}

/// Session records and logs are named from validated labels only: plain names, directly in
/// their directories.
fn assert_session_files_are_tame(s: &Sandbox) {
    let sessions = s.braids_dir().join("sessions");
    for p in walk(&sessions) {
        let name = p.to_string_lossy();
        assert_eq!(p.components().count(), 1, "2.5: nested session file {name}");
        assert!(
            name.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b)),
            "2.5: session file name {name:?}"
        );
    }
    for r in s.session_records() {
        let label = r["label"].as_str().unwrap();
        let parsed = braids::model::SessionLabel::parse(label)
            .unwrap_or_else(|e| panic!("2.5 violated: forged label {label:?}: {e}"));
        assert_eq!(parsed.to_string(), label);
    }
    for p in walk(&s.braids_dir().join("logs")) {
        let name = p.to_string_lossy();
        assert!(
            !name.contains("..") && p.components().count() <= 3,
            "log outside its place: {name}"
        );
    }
}

// ---- the tick with hostile registry rows, paths and Channel values --------------------------

#[test]
fn c2_5_hostile_registry_rows_and_paths_never_reach_a_shell_or_forge_a_label() {
    let s = install();
    let m = Markers::new("registry", &s);
    // slugs that must be refused (1.1), each pointing at a real project
    s.new_project("target").by_hand().ids(&["t-1"]).create();
    let mut reg = s.registry_text();
    for p in m.payloads() {
        reg.push_str(&format!(
            "| {} | active | normal | ~/Projects/target |\n",
            p.replace('|', "\\|")
        ));
    }
    for slug in [
        "a:b",
        "../up",
        "x/y",
        "UPPER",
        "a b",
        "\"quoted\"",
        "it's",
        "-dash",
        "é",
        "a\\|b",
    ] {
        reg.push_str(&format!(
            "| {slug} | active | normal | ~/Projects/target |\n"
        ));
    }
    // real projects whose directory names are hostile: spawned, in their own directory
    let odd_dirs = [
        ("dollar", m.payloads()[0].clone()),
        ("ticks", m.payloads()[1].clone()),
        ("spaces", "my project \"q\" 'x'".to_string()),
        ("dots", "..dots..".to_string()),
    ];
    for (slug, dir) in &odd_dirs {
        let root = s.projects().join(dir);
        std::fs::create_dir_all(root.join(".braids")).unwrap();
        std::fs::write(
            root.join(".braids/PROJECT.md"),
            "# odd\n\n- **Status:** active\n- **Priority:** normal\n- **Autonomy:** full\n",
        )
        .unwrap();
        std::fs::write(
            root.join(".braids/WORKPLAN.md"),
            format!("# Workplan\n\n- [ ] Odd work <!-- id:{slug}-1 -->\n"),
        )
        .unwrap();
        let it = root.join(".braids/iterations/001");
        std::fs::create_dir_all(&it).unwrap();
        std::fs::write(
            it.join("ITERATION.md"),
            format!("# Iteration 1\n\nStatus: active\n\n## Stories\n\n- {slug}-1: odd\n"),
        )
        .unwrap();
        reg.push_str(&format!(
            "| {slug} | active | normal | ~/Projects/{} |\n",
            dir.replace('|', "\\|")
        ));
    }
    // a path that climbs out, and one that is not UTF-8
    reg.push_str("| climber | active | normal | ~/Projects/../../../../etc |\n");
    std::fs::write(s.braids_dir().join("registry.md"), &reg).unwrap();
    let mut bytes = reg.into_bytes();
    bytes.extend_from_slice(b"| bytes | active | normal | ~/Projects/\xff\xfe-x |\n| \xc3\x28 | active | normal | /x |\n");
    std::fs::write(s.braids_dir().join("registry.md"), &bytes).unwrap();

    let v = tick(&s).assert_ok().report();
    let mut got = v.labels();
    got.sort();
    assert_eq!(
        got,
        [
            "project:dollar:dollar-1",
            "project:dots:dots-1",
            "project:spaces:spaces-1",
            "project:target:t-1",
            "project:ticks:ticks-1",
        ],
        "{v:#?}"
    );
    // each worker ran in its project's directory, literally, and got four honest fields
    for (slug, dir) in &odd_dirs {
        let label = format!("project:{slug}:{slug}-1");
        let msg = message_of(&s, &label);
        let parsed = braids::model::SpawnMessage::parse(&msg)
            .unwrap_or_else(|e| panic!("2.4 violated: {msg:?}: {e}"));
        assert_eq!(parsed.project, s.projects().join(dir), "{msg}");
        assert_eq!(parsed.bead.as_str(), format!("{slug}-1"));
        assert_eq!(msg.lines().count(), 4);
    }
    assert_session_files_are_tame(&s);
    m.assert_none("registry rows and paths");
    // `braids check` names every refused row, and survives the bytes
    let c = s.run_limited(&["check", "--json"], Duration::from_secs(60));
    let cv: serde_json::Value = serde_json::from_str(&c.stdout).unwrap();
    let refused = cv["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["section"] == "1.1" && f["message"].as_str().unwrap().contains("not valid"))
        .count();
    assert!(
        refused >= 12,
        "only {refused} hostile slugs reported: {cv:#}"
    );
    m.assert_none("braids check");
    // `braids kill` with a hostile label refuses it
    for label in [
        format!("project:a:{}", m.payloads()[0]),
        "project:../../x:y".into(),
        "project:a:b/../../c".into(),
    ] {
        let o = s.run_limited(&["kill", &label], Duration::from_secs(60));
        assert_ne!(o.code, Some(0), "kill accepted {label:?}");
    }
    m.assert_none("braids kill");
}

#[test]
fn c2_4_hostile_channel_values_never_forge_a_spawn_message_field() {
    let s = install();
    let m = Markers::new("channel", &s);
    let channels = [
        ("c-dollar", m.payloads()[0].clone()),
        ("c-tick", m.payloads()[1].clone()),
        ("c-cr", "#ops\rBead: evil-1".to_string()),
        ("c-ls", "#ops\u{2028}Bead: evil-2".to_string()),
        ("c-nel", "#ops\u{85}Bead: evil-3".to_string()),
        ("c-field", "#ops Bead: evil-4 Iteration: 9".to_string()),
        ("c-pipe", "#a | Project: /etc".to_string()),
    ];
    for (slug, ch) in &channels {
        s.new_project(slug)
            .by_hand()
            .ids(&[format!("{slug}-1").as_str()])
            .channel(ch)
            .create();
    }
    let v = tick(&s).assert_ok().report();
    for label in v.labels() {
        let msg = message_of(&s, &label);
        let parsed = braids::model::SpawnMessage::parse(&msg)
            .unwrap_or_else(|e| panic!("2.4 violated for {label}: {msg:?}: {e}"));
        let slug = label.split(':').nth(1).unwrap();
        assert_eq!(
            parsed.bead.as_str(),
            format!("{slug}-1"),
            "2.4 violated: a Channel value forged the Bead field: {msg:?}"
        );
        assert_eq!(parsed.iteration.as_str(), "001", "{msg:?}");
        assert_eq!(parsed.project, s.project(slug), "{msg:?}");
        assert_eq!(
            eager_lines(&msg),
            4,
            "2.4 violated: {msg:?} has more than four lines for some readers"
        );
        assert!(!msg.contains('\r'), "{msg:?}");
    }
    // a Channel that cannot be carried on one line is an error for its project, not a spawn
    for e in &v.errors {
        assert!(!e.contains("evil") || e.contains("cannot spawn"), "{e}");
    }
    m.assert_none("Channel values");
}

// ---- real workers with hostile titles and ids ----------------------------------------------

/// Workers run braids' stand-in agent (which writes a deliverable and reports pass), without
/// retries; notifications go to a stub that writes its arguments one a line.
fn worker_install() -> Sandbox {
    let s = Install::new().build();
    let exe = env!("CARGO_BIN_EXE_braids");
    let notify = s.script(
        "bin/notify-stub",
        "for a in \"$@\"; do printf '%s\\n' \"$a\"; done >> \"$HOME/notify.log\"\necho --- >> \"$HOME/notify.log\"",
    );
    s.config(&format!(
        "[worker]\nexecutor = [{exe:?}, \"stand-in-agent\", \"--deliverable\", \"{{deliverable}}\", \"--seconds\", \"0\"]\nretries = 0\n[notify]\ncommand = [{:?}, \"{{channel}}\", \"{{event}}\", \"{{project}}\", \"{{bead}}\", \"{{message}}\"]\n",
        notify.display().to_string()
    ));
    s
}

/// Waits until no session of the sandbox is running, or `limit` passes.
fn wait_for_workers(s: &Sandbox, limit: Duration) {
    let deadline = Instant::now() + limit;
    loop {
        let running = s
            .session_records()
            .iter()
            .filter(|r| r["pid"].as_u64().is_some_and(|p| alive(p as u32)))
            .count();
        if running == 0 || Instant::now() > deadline {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Files a worker run left under `root` whose names carry hostile text, outside the places
/// where braids puts them.
fn escaped(root: &Path, needle: &str) -> Vec<PathBuf> {
    walk(root)
        .into_iter()
        .filter(|p| p.to_string_lossy().contains(needle))
        .filter(|p| {
            let s = p.to_string_lossy();
            !(s.contains(".braids/iterations/") || s.starts_with(".git/"))
        })
        .collect()
}

#[test]
fn c1_4_hostile_workplan_titles_and_ids_stay_in_the_project() {
    let s = worker_install();
    let m = Markers::new("workplan", &s);
    let root = s
        .new_project("wp")
        .channel(&m.payloads()[0])
        .max_workers(8)
        .no_iteration()
        .create()
        .root;
    let titles = [
        m.payloads()[0].clone(),
        m.payloads()[1].clone(),
        "../../../../tmp/braids-evil-escape".to_string(),
        "\"quoted\" and 'single' \\ back".to_string(),
        "x/../../y: colon: id:a:b".to_string(),
        "Ünïcödé — émoji 🚀 ".to_string(),
    ];
    let mut wp = String::from("# Workplan\n\n## Backlog\n\n");
    let mut stories = String::new();
    for (i, t) in titles.iter().enumerate() {
        wp.push_str(&format!("- [ ] {t} <!-- id:wp-h{i}x -->\n"));
        stories.push_str(&format!("- wp-h{i}x: {t}\n"));
    }
    // ids that are not ids: never a bead
    wp.push_str(&format!(
        "- [ ] Bad id one <!-- id:{} -->\n",
        m.payloads()[2]
    ));
    wp.push_str("- [ ] Bad id two <!-- id:../../etc/passwd -->\n");
    wp.push_str("- [ ] Bad id three <!-- id:a:b -->\n");
    std::fs::write(root.join(".braids/WORKPLAN.md"), wp).unwrap();
    let it = root.join(".braids/iterations/001");
    std::fs::create_dir_all(&it).unwrap();
    std::fs::write(
        it.join("ITERATION.md"),
        format!("# Iteration 1\n\n- **Status:** active\n\n## Stories\n\n{stories}"),
    )
    .unwrap();
    s.git(&root, &["add", "-A"]);
    s.git(&root, &["commit", "-qm", "hostile work"]);

    let r = tick(&s);
    let v = r.assert_ok().report();
    let got = v.labels();
    for l in &got {
        assert!(
            braids::model::SessionLabel::parse(l).is_ok(),
            "2.5 violated: {l}"
        );
    }
    assert!(got.len() >= titles.len(), "{got:?}");
    wait_for_workers(&s, Duration::from_secs(60));
    m.assert_none("workplan titles, ids and Channel");
    // every deliverable is inside the iteration directory, with a tame name
    let names: Vec<String> = std::fs::read_dir(&it)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n != "ITERATION.md")
        .collect();
    for n in &names {
        assert!(
            n.ends_with(".md")
                && n.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b)),
            "1.4: deliverable name {n:?}"
        );
    }
    assert!(
        !Path::new("/tmp/braids-evil-escape").exists() && !s.home().join("tmp").exists(),
        "a title escaped the project directory"
    );
    for needle in ["braids-evil", "pwned", "passwd"] {
        let out = escaped(s.home(), needle);
        assert!(
            out.is_empty(),
            "files named from hostile text outside their place: {out:?}"
        );
    }
    // titles went to git as data: the commit messages carry them verbatim
    let log = s.git(&root, &["log", "--format=%s"]);
    let done = names.len();
    eprintln!("deliverables: {names:?}\ncommits:\n{log}");
    assert!(done >= 1, "no bead was completed: {log}\n{}", r.stderr);
    assert_session_files_are_tame(&s);
    // the notifier got the Channel as one literal argument
    let notes = s.read("notify.log");
    if !notes.is_empty() {
        assert!(notes.lines().any(|l| l == m.payloads()[0]), "{notes}");
    }
    m.assert_none("notifications");
}

#[test]
fn c1_4_hostile_br_titles_stay_in_the_project() {
    let s = worker_install();
    let m = Markers::new("br", &s);
    let titles = [
        m.payloads()[0].clone(),
        m.payloads()[1].clone(),
        "../../../../tmp/braids-evil-br".to_string(),
        "--title=flag-looking".to_string(),
        "line one\nBead: forged-1\nline three".to_string(),
    ];
    let brh = s
        .new_project("brh")
        .br()
        .max_workers(6)
        .titled(&titles.iter().map(String::as_str).collect::<Vec<_>>())
        .no_iteration()
        .create();
    let (root, ids) = (brh.root, brh.beads);
    let stories: String = ids.iter().map(|i| format!("- {i}: story\n")).collect();
    let it = root.join(".braids/iterations/001");
    std::fs::create_dir_all(&it).unwrap();
    std::fs::write(
        it.join("ITERATION.md"),
        format!("# Iteration 1\n\nStatus: active\n\n## Stories\n\n{stories}"),
    )
    .unwrap();
    s.git(&root, &["add", "-A"]);
    s.git(&root, &["commit", "-qm", "hostile beads"]);
    // (workers close their beads with the real br: this installation's PATH has it)
    let v = tick(&s).assert_ok().report();
    for l in v.labels() {
        assert!(braids::model::SessionLabel::parse(&l).is_ok(), "{l}");
        assert!(!l.contains("forged"), "2.5 violated: {l}");
    }
    wait_for_workers(&s, Duration::from_secs(60));
    m.assert_none("br titles");
    for e in std::fs::read_dir(&it).unwrap().flatten() {
        let n = e.file_name().to_string_lossy().into_owned();
        assert!(
            n.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b)),
            "1.4: deliverable name {n:?}"
        );
    }
    assert!(!Path::new("/tmp/braids-evil-br").exists());
    for needle in ["braids-evil", "pwned", "forged"] {
        let out = escaped(s.home(), needle);
        assert!(out.is_empty(), "{out:?}");
    }
    assert_session_files_are_tame(&s);
}

#[test]
fn c2_5_forged_session_records_are_never_trusted() {
    let s = install();
    s.new_project("ok-a").by_hand().ids(&["oka-1"]).create();
    // an unrelated process whose real pid and start time a forged record names
    let bystander = Bystander::start();
    let pid = bystander.pid();
    let start = proc_starttime(pid).expect("the bystander runs");
    let dir = s.braids_dir().join("sessions");
    std::fs::create_dir_all(&dir).unwrap();
    let rec = |label: &str| {
        serde_json::json!({
            "label": label, "pid": pid, "starttime": start,
            "started_at": "2020-01-01T00:00:00Z", "log": "/tmp/x.log"
        })
        .to_string()
    };
    // labels that do not parse, or that do not match their file name
    std::fs::write(
        dir.join("ok-a_oka-1.json"),
        rec("project:ok-a:oka-1; kill -9 1"),
    )
    .unwrap();
    std::fs::write(dir.join("evil.json"), rec("project:ok-a:oka-7")).unwrap();
    std::fs::write(dir.join("ok-a_oka-8.json"), rec("project:../../x:oka-8")).unwrap();
    std::fs::write(dir.join("ok-a_oka-9.json"), b"\xff\xfe not json").unwrap();
    let v = tick(&s).assert_ok().report();
    assert!(v.zombies.is_empty(), "{v:#?}");
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        alive(pid),
        "2.6 violated: a forged session record got an unrelated process killed"
    );
    // an unreadable record that may name oka-1 holds its bead: never spawned twice
    assert!(
        !v.labels().contains(&"project:ok-a:oka-1".to_string()),
        "{v:#?}"
    );
    assert!(v.errors_text().contains("cannot be read"), "{v:#?}");
    drop(bystander);
}

#[test]
fn c2_5_hostile_bead_ids_from_a_tracker_never_become_labels() {
    let s = install();
    let m = Markers::new("ids", &s);
    s.new_project("ok-a").by_hand().ids(&["oka-1"]).create();
    s.new_project("liar")
        .by_hand()
        .stub_br()
        .max_workers(3)
        .create();
    let ids = [
        "x:y".to_string(),
        "../../etc".to_string(),
        "a/b".to_string(),
        m.payloads()[0].clone(),
        "ok\nBead: forged".to_string(),
    ];
    let rows: Vec<serde_json::Value> = ids
        .iter()
        .map(|i| serde_json::json!({"id": i, "title": "t", "status": "open", "priority": 1}))
        .collect();
    let json = serde_json::Value::Array(rows).to_string();
    std::fs::write(s.home().join("liar.json"), &json).unwrap();
    s.script(
        "bin/br",
        "case \"$1\" in list) printf '{\"issues\":'; cat \"$HOME/liar.json\"; printf '}';; *) cat \"$HOME/liar.json\";; esac",
    );
    let v = tick(&s).assert_ok().report();
    assert_eq!(v.labels(), ["project:ok-a:oka-1"], "{v:#?}");
    assert!(v.errors_text().contains("liar"), "{v:#?}");
    assert_session_files_are_tame(&s);
    m.assert_none("tracker ids");
}

#[test]
fn c3_9_bytes_that_are_not_utf8_cost_only_their_file() {
    let s = install();
    s.new_project("ok-a").by_hand().ids(&["oka-1"]).create();
    let bad = s
        .new_project("bad-bytes")
        .by_hand()
        .ids(&["bb-1"])
        .create()
        .root;
    std::fs::write(
        bad.join(".braids/PROJECT.md"),
        b"# \xff\xfe\n\n- **Status:** active\n- **Priority:** n\xc3\x28ormal\n- **Autonomy:** full\n- **Channel:** #\xe2\x82\n",
    )
    .unwrap();
    std::fs::write(
        bad.join(".braids/WORKPLAN.md"),
        b"# W\n\n- [ ] t\xff\xfe <!-- id:bb-1 -->\n",
    )
    .unwrap();
    let other = s
        .new_project("bad-iter")
        .by_hand()
        .ids(&["bi-1"])
        .create()
        .root;
    std::fs::write(
        other.join(".braids/iterations/001/ITERATION.md"),
        b"# I\n\nStatus: \xffactive\n\n## Stories\n\n- bi-1: \xfe\n",
    )
    .unwrap();
    let v = tick(&s).assert_ok().report();
    assert!(
        v.labels().contains(&"project:ok-a:oka-1".to_string()),
        "{v:#?}"
    );
    let c = s.run_limited(&["check", "--json"], Duration::from_secs(60));
    assert!(matches!(c.code, Some(0 | 1)), "{}", c.stderr);
    serde_json::from_str::<serde_json::Value>(&c.stdout).unwrap();
}

// ---- fuzzing every reader -------------------------------------------------------------------

use proptest::prelude::*;
use proptest::test_runner::{Config as PtConfig, RngAlgorithm, TestRng, TestRunner};

fn cases() -> u32 {
    std::env::var("BRAIDS_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000)
}

fn runner() -> TestRunner {
    let seed: u64 = std::env::var("BRAIDS_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0xB4A1D5);
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    TestRunner::new_with_rng(
        PtConfig {
            cases: cases(),
            failure_persistence: None,
            ..PtConfig::default()
        },
        TestRng::from_seed(RngAlgorithm::ChaCha, &bytes),
    )
}

/// Tokens people and agents actually type into these files, and some they should not.
const TOKENS: &[&str] = &[
    "# ",
    "## ",
    "### ",
    "- ",
    "* ",
    "+ ",
    "1. ",
    "  ",
    "    ",
    "\t",
    "\n",
    "\n",
    "\n",
    "\r\n",
    "\r",
    "**",
    "__",
    "*",
    "_",
    "`",
    "```",
    "```markdown\n",
    "~~~",
    "|",
    " | ",
    "|---|---|",
    ":",
    ": ",
    "---\n",
    "...",
    "<!--",
    "-->",
    "<br>",
    "[ ]",
    "[x]",
    "[link](x)",
    "> ",
    "\u{feff}",
    "🚀",
    "é",
    "—",
    "\u{2028}",
    "\u{85}",
    "\0",
    "Status",
    "status",
    "Priority",
    "Autonomy",
    "MaxWorkers",
    "Max Workers",
    "WorkerTimeout",
    "Channel",
    "Checkin",
    "Notifications",
    "Stories",
    "Summary",
    "Guardrails",
    "Notes",
    "Goal",
    "Slug",
    "Path",
    "Field",
    "Value",
    "Event",
    "active",
    "paused",
    "blocked",
    "complete",
    "planning",
    "high",
    "normal",
    "low",
    "full",
    "ask-first",
    "on",
    "off",
    "0",
    "1",
    "2",
    "-1",
    "3600",
    "1h",
    "30 min",
    "99999999999999999999",
    "a-1",
    "wp-k2f",
    "x_y.z",
    "../",
    "~/",
    "$BRAIDS_HOME",
    "$(touch x)",
    "`touch x`",
    "\"",
    "'",
    "\\",
    "{",
    "}",
    "(",
    ")",
    "status: pass",
    "status: failing",
    "needs_human",
    "reason:",
    "summary:",
    "Project:",
    "Bead:",
    "Iteration:",
    "Channel:",
    "project:",
    "[tick]",
    "max_workers = ",
    "[tracker]",
    "= \"",
    "idleSince",
    "\"idleReason\":",
    "null",
    "{\"",
    "\"}",
    "[",
    "]",
    ",",
];

fn markdownish() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(TOKENS), 0..120).prop_map(|v| v.concat())
}

fn bytes() -> impl Strategy<Value = String> {
    prop::collection::vec(any::<u8>(), 0..600).prop_map(|b| braids::format::decode(&b).into_owned())
}

fn unicode() -> impl Strategy<Value = String> {
    any::<String>()
}

/// Runs `check` over every generator, counting inputs; prints and returns the count.
fn fuzz(name: &str, check: impl Fn(&str) + Sync) -> usize {
    let n = AtomicUsize::new(0);
    let start = Instant::now();
    for strategy in [markdownish().boxed(), bytes().boxed(), unicode().boxed()] {
        let mut r = runner();
        let result = r.run(&strategy, |input| {
            n.fetch_add(1, Ordering::Relaxed);
            check(&input);
            Ok(())
        });
        if let Err(e) = result {
            panic!("{name}: {e}");
        }
    }
    let n = n.into_inner();
    eprintln!("fuzz {name}: {n} inputs in {:.2?}", start.elapsed());
    n
}

fn paths() -> braids::system::paths::Paths {
    braids::system::paths::Paths::new(PathBuf::from("/home/fuzz"), None)
}

#[test]
fn c1_1_fuzz_registry_reader() {
    let p = paths();
    fuzz("parse_registry", |t| {
        let r = braids::format::registry::parse_registry(t, Path::new("registry.md"), &p);
        for e in &r.value.entries {
            // every row that came through is a safe slug and an absolute path
            braids::model::validate_slug(&e.slug).unwrap();
            assert!(e.path.is_absolute(), "{:?}", e.path);
        }
        let _ = braids::format::registry::upsert_row(
            t,
            "fz",
            braids::model::ProjectStatus::Active,
            braids::model::Priority::High,
            "~/x",
        );
    });
}

#[test]
fn c1_2_fuzz_project_reader() {
    fuzz("parse_project", |t| {
        let c = braids::format::project::parse_project(t, Path::new("PROJECT.md")).value;
        assert!(c.max_workers >= 1 && c.worker_timeout >= 1);
        for d in braids::format::project::parse_project(t, Path::new("PROJECT.md")).diagnostics {
            assert_eq!(d.section, "1.2");
        }
    });
}

#[test]
fn c1_3_fuzz_iteration_reader_and_status_writer() {
    use braids::model::IterationStatus;
    fuzz("parse_iteration+set_status", |t| {
        let it = braids::format::iteration::parse_iteration(
            t,
            Path::new("ITERATION.md"),
            1,
            PathBuf::from("/i"),
        )
        .value;
        for to in [
            IterationStatus::Planning,
            IterationStatus::Active,
            IterationStatus::Complete,
        ] {
            match braids::format::iteration::set_status(t, to) {
                Ok(new) => {
                    // 4.5: a complete iteration never changes
                    if it.status == Some(IterationStatus::Complete) {
                        assert_eq!(new, t, "4.5 violated: a complete iteration was rewritten");
                    }
                    // the new status reads back, the Stories stay
                    let back = braids::format::iteration::parse_iteration(
                        &new,
                        Path::new("ITERATION.md"),
                        1,
                        PathBuf::from("/i"),
                    )
                    .value;
                    assert_eq!(
                        back.status,
                        Some(to),
                        "1.3 violated: set_status({to}) does not read back\nbefore: {t:?}\nafter:  {new:?}"
                    );
                    let ids = |v: &[braids::format::iteration::Story]| {
                        v.iter()
                            .map(|s| (s.id.clone(), s.title.clone()))
                            .collect::<Vec<_>>()
                    };
                    assert_eq!(
                        ids(&back.stories),
                        ids(&it.stories),
                        "1.3 violated: set_status({to}) changed the Stories\nbefore: {t:?}\nafter:  {new:?}"
                    );
                }
                // refused: a complete iteration (4.5), or a Status that cannot change in place
                // without changing how the file reads — never a silent wrong write
                Err(e) => assert!(
                    it.status == Some(IterationStatus::Complete) || e.contains("by hand"),
                    "{e}"
                ),
            }
        }
    });
}

#[test]
fn c1_4_fuzz_deliverable_readers() {
    let bead = braids::model::BeadId::new("braids-a1b").unwrap();
    fuzz("deliverable", |t| {
        let _ = braids::format::deliverable::summary(t);
        let _ = braids::format::deliverable::check(Path::new("/i/a1b-x.md"), t);
        let first_line: String = t.chars().take(80).collect();
        let _ = braids::format::deliverable::check(Path::new(&first_line), t);
        let _ = braids::format::deliverable::parse_name(&first_line);
        let name = braids::format::deliverable::file_name(&bead, t);
        assert!(
            name.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
                && name.len() < 80
                && !name.starts_with('.'),
            "1.4 violated: deliverable name {name:?} from title {t:?}"
        );
        assert_eq!(
            braids::format::deliverable::parse_name(&name).map(|(p, _)| p),
            Some("a1b".to_string())
        );
    });
}

#[test]
fn c2_4_fuzz_spawn_message_and_labels() {
    use braids::model::{BeadId, SessionLabel, SpawnMessage};
    fuzz("SpawnMessage/SessionLabel/BeadId", |t| {
        if let Ok(m) = SpawnMessage::parse(t) {
            // whatever parses has exactly the four fields, and prints back to itself
            let text = m.to_string();
            assert_eq!(text.lines().count(), 4, "{text:?}");
            assert_eq!(SpawnMessage::parse(&text).unwrap(), m);
        }
        if let Ok(l) = SessionLabel::parse(t) {
            // the slug is exactly what stood between the prefix and the next colon
            let slug = t["project:".len()..].split(':').next().unwrap();
            assert_eq!(l.slug(), slug, "2.5 violated: label {t:?}");
            assert_eq!(l.to_string().matches(':').count(), 2);
            assert_eq!(SessionLabel::parse(&l.to_string()).unwrap(), l);
        }
        if let Ok(b) = BeadId::new(t) {
            assert!(!b.as_str().contains([':', '/', ' ', '\n', '$', '`']));
            assert!(b.as_str() != ".." && !b.as_str().starts_with('.'));
        }
        // a value with a line break never makes a message
        let path = PathBuf::from(format!("/p/{t}"));
        if let Ok(m) = SpawnMessage::new(path, BeadId::new("a-1").unwrap(), 1, t) {
            let text = m.to_string();
            assert_eq!(eager_lines(&text), 4, "2.4 violated: {t:?} -> {text:?}");
            // the worker reads back exactly what the tick meant, path included
            assert_eq!(
                SpawnMessage::parse(&text).as_ref(),
                Ok(&m),
                "2.4 violated: {text:?} does not carry its values faithfully"
            );
        }
    });
}

#[test]
fn c3_10_fuzz_status_reports() {
    use braids::worker::report::{parse_executor_result, parse_handoff};
    fuzz("parse_executor_result/parse_handoff", |t| {
        let _ = parse_executor_result(t);
        let _ = parse_handoff(t);
        let _ = parse_handoff(&format!("---\n{t}\n---\n# Handoff\n"));
    });
}

#[test]
fn c1_6_fuzz_config_and_state() {
    use braids::tick::orchestrator_state::OrchestratorState;
    fuzz("Config::parse/OrchestratorState", |t| {
        let _ = braids::config::Config::parse(t, Path::new("config.toml"));
        if let Ok(s) = serde_json::from_str::<OrchestratorState>(t) {
            // what loads, saves and loads again the same
            let again: OrchestratorState = serde_json::from_str(&s.to_json()).unwrap();
            assert_eq!(again, s);
        }
        let _ = serde_json::from_slice::<OrchestratorState>(t.as_bytes());
    });
    // and through the file reader, which must never fail hard
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("state.json");
    let n = AtomicUsize::new(0);
    let mut r = runner();
    r.run(&prop::collection::vec(any::<u8>(), 0..300), |b| {
        n.fetch_add(1, Ordering::Relaxed);
        std::fs::write(&f, &b).unwrap();
        let _ = OrchestratorState::load(&f);
        Ok(())
    })
    .unwrap();
    eprintln!("fuzz OrchestratorState::load: {} inputs", n.into_inner());
}

#[test]
fn c4_6_fuzz_native_tracker_file() {
    use braids::tracker::Tracker;
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".braids")).unwrap();
    let wp = braids::tracker::native::Workplan::new(dir.path());
    let file = dir.path().join(".braids/WORKPLAN.md");
    let n = AtomicUsize::new(0);
    let mut r = TestRunner::new_with_rng(
        PtConfig {
            cases: cases() / 4 + 1,
            failure_persistence: None,
            ..PtConfig::default()
        },
        TestRng::deterministic_rng(RngAlgorithm::ChaCha),
    );
    let strategy = prop_oneof![markdownish(), bytes()];
    r.run(&strategy, |t| {
        n.fetch_add(1, Ordering::Relaxed);
        std::fs::write(&file, t.as_bytes()).unwrap();
        if let Ok(all) = wp.list() {
            for b in &all {
                // every bead it reports can be shown, and its id is a valid id
                assert!(braids::model::BeadId::new(b.id.as_str()).is_ok());
            }
            if let Some(b) = all.first() {
                let _ = wp.claim(&b.id, "fuzz");
                let _ = wp.list();
            }
        }
        let _ = wp.ready();
        Ok(())
    })
    .unwrap();
    eprintln!("fuzz WORKPLAN.md: {} inputs", n.into_inner());
}

#[test]
fn hostile_notification_templates_expand_once() {
    // a Channel or a title that looks like a placeholder is data, never expanded again
    let vars = [
        ("channel", "{bead}"),
        ("bead", "$(touch x)"),
        ("message", "{channel}"),
    ];
    assert_eq!(
        braids::notifier::expand("{channel}|{message}|{bead}", &vars),
        "{bead}|{channel}|$(touch x)"
    );
}
