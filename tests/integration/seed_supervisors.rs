//! The claw-builder seed's two supervisor recipes, run verbatim beside a project braids works on:
//! each must print every event braids writes, whole, exactly once.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use braids::events::{Draft, Journal, Kind};

use crate::support::procs::KillGroup;
use crate::support::{poll_until, wait_for, Install, ReportExt, Sandbox};

/// Seed 003, "Supervisor with inotify (more efficient)".
const INOTIFY: &str = r#"inotifywait -m -e create .claw/events/ | while read dir action file; do
  [[ "$file" == *.event ]] && cat ".claw/events/$file"
done"#;

/// Seed 003, "Supervisor polling (bash)".
const POLLING: &str = r#"# Simple polling supervisor
while true; do
  for event in .claw/events/*.event; do
    [[ -f "$event.processed" ]] && continue
    cat "$event"
    touch "$event.processed"
  done
  sleep 30
done"#;

/// The agent: writes its deliverable (`$1`) and a passing report.
const AGENT: &str = r#"mkdir -p "$(dirname "$1")"
printf '# %s\n\nDid it.\n' "$BRAIDS_BEAD" > "$1"
printf 'status: pass\nsummary: did it\n' > "$BRAIDS_RESULT_FILE"
"#;

/// A recipe running in `dir` in a process group of its own, its output collected line by line.
struct Recipe {
    lines: Arc<Mutex<Vec<String>>>,
    _group: KillGroup,
    _child: std::process::Child,
}

impl Recipe {
    fn start(sb: &Sandbox, dir: &Path, script: &str) -> Recipe {
        use std::os::unix::process::CommandExt;
        let mut child = Command::new("bash")
            .args(["-c", script])
            .current_dir(dir)
            .env("PATH", sb.path_var())
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("bash");
        let group = KillGroup(child.id());
        let lines = Arc::new(Mutex::new(Vec::new()));
        let out = child.stdout.take().unwrap();
        let sink = Arc::clone(&lines);
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                sink.lock().unwrap().push(line);
            }
        });
        // inotifywait says on stderr when its watch is set; events before that are not its.
        let (tx, rx) = std::sync::mpsc::channel();
        let err = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                if line.contains("Watches established") {
                    let _ = tx.send(());
                }
            }
        });
        if script.starts_with("inotifywait") {
            rx.recv_timeout(Duration::from_secs(30))
                .expect("inotifywait to set its watch");
        }
        Recipe {
            lines,
            _group: group,
            _child: child,
        }
    }

    /// How many times the recipe printed each event id; panics on a line that is not a whole
    /// event.
    fn seen(&self) -> BTreeMap<u64, usize> {
        let mut seen = BTreeMap::new();
        for line in self.lines.lock().unwrap().iter() {
            let v: serde_json::Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("not a whole event ({e}): {line}"));
            *seen.entry(v["id"].as_u64().unwrap()).or_insert(0) += 1;
        }
        seen
    }
}

fn ids(root: &Path) -> Vec<u64> {
    Journal::of_project(root)
        .entries()
        .into_iter()
        .map(|e| e.id)
        .collect()
}

#[test]
fn c8_1_the_seeds_inotify_and_polling_supervisors_see_every_event_exactly_once() {
    assert!(
        Command::new("inotifywait").arg("--help").output().is_ok(),
        "inotifywait is missing: apt-get install inotify-tools (.ci/run does)"
    );
    let sb = Install::new().build();
    let agent = sb.script("bin/agent", AGENT);
    sb.config(&format!(
        "[worker]\nexecutor = [{:?}, \"{{deliverable}}\"]\n",
        agent.display().to_string()
    ));
    // The polling recipe's `sleep 30`, shortened by a stub first on PATH: the recipe's text is
    // the seed's own.
    sb.script("bin/sleep", "exec /bin/sleep 1\n");
    let app = sb.new_project("app").beads(2).max_workers(2).create();
    // The folder the recipes watch exists before braids' first tick, with one event in it.
    Journal::of_project(&app.root)
        .append(
            "app",
            vec![Draft::new(Kind::Error).with("message", "before the watch")],
            chrono::Utc::now(),
        )
        .unwrap();
    let inotify = Recipe::start(&sb, &app.root, INOTIFY);
    let polling = Recipe::start(&sb, &app.root, POLLING);

    let r = sb.tick().force().run();
    assert_eq!(r.spawned_beads().len(), 2, "{r:#?}");
    wait_for("the workers to end", Duration::from_secs(120), || {
        sb.live_labels().is_empty().then_some(())
    });
    sb.tick().force().run();
    assert!(
        ids(&app.root).len() >= 10,
        "claims, spawns, starts, completions: {:?}",
        ids(&app.root)
    );
    let every = |r: &Recipe, from: u64| {
        let seen = r.seen();
        ids(&app.root)
            .iter()
            .filter(|id| **id >= from)
            .all(|id| seen.contains_key(id))
    };
    assert!(
        poll_until(Duration::from_secs(60), || every(&inotify, 2)
            && every(&polling, 1)),
        "inotify saw {:?}, polling saw {:?}, events {:?}",
        inotify.seen(),
        polling.seen(),
        ids(&app.root)
    );
    // A moment more for a late duplicate to show, then each was printed exactly once.
    std::thread::sleep(Duration::from_secs(3));
    let once = |r: &Recipe, want: &[u64]| {
        let seen = r.seen();
        assert_eq!(
            seen.keys().copied().collect::<Vec<_>>(),
            want,
            "every event and nothing else"
        );
        assert!(seen.values().all(|n| *n == 1), "exactly once: {seen:?}");
    };
    let all = ids(&app.root);
    once(&inotify, &all[1..]);
    once(&polling, &all);
}
