//! The supervisor's stream (CONTRACTS 8): events written atomically, in order, never reused,
//! never lost; `braids events --follow` sees them live; `braids supervise` acknowledges each
//! exactly once across restarts. Real ticks, real `braids worker` processes, real signals.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use braids::events::journal::parse_name;
use braids::events::{Draft, Journal, Kind};

use crate::support::{poll_until, wait_for, Install, ReportExt, Sandbox, QUITTER};

/// The agent: writes its deliverable (`$1`) and a passing report.
const AGENT: &str = r#"mkdir -p "$(dirname "$1")"
printf '# %s\n\n## Summary\n\nDid %s.\n' "$BRAIDS_BEAD" "$BRAIDS_BEAD" > "$1"
printf 'status: pass\nsummary: did it\n' > "$BRAIDS_RESULT_FILE"
"#;

fn install() -> Sandbox {
    let sb = Install::new().build();
    let agent = sb.script("bin/agent", AGENT);
    sb.config(&format!(
        "[worker]\nexecutor = [{:?}, \"{{deliverable}}\"]\n",
        agent.display().to_string()
    ));
    sb
}

/// Every event file of a project: id → (type, bytes). Panics on a file that is not a whole
/// event whose id is its name's.
fn events_of(root: &Path) -> BTreeMap<u64, (String, Vec<u8>)> {
    let dir = Journal::of_project(root).dir;
    let mut out = BTreeMap::new();
    let Ok(rd) = std::fs::read_dir(&dir) else {
        return out;
    };
    for e in rd.map(Result::unwrap) {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(id) = parse_name(&name) else {
            continue;
        };
        let bytes = std::fs::read(e.path()).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&bytes)
            .unwrap_or_else(|err| panic!("{name} is not a whole event ({err}): {bytes:?}"));
        assert_eq!(v["id"], id, "{name}");
        let kind = v["type"].as_str().unwrap().to_string();
        assert!(
            name.ends_with(&format!("-{}.event", kind.replace('_', "-"))),
            "{name}"
        );
        assert!(out.insert(id, (kind, bytes)).is_none());
    }
    out
}

fn show(events: &BTreeMap<u64, (String, Vec<u8>)>) -> String {
    events
        .values()
        .map(|(_, b)| String::from_utf8_lossy(b).replace('\n', " "))
        .collect::<Vec<_>>()
        .join("\n")
}

fn kinds_for(events: &BTreeMap<u64, (String, Vec<u8>)>, bead: &str) -> Vec<String> {
    events
        .values()
        .filter(|(_, b)| serde_json::from_slice::<serde_json::Value>(b).unwrap()["bead"] == bead)
        .map(|(k, _)| k.clone())
        .collect()
}

#[test]
fn c8_1_a_bead_is_told_from_claim_to_commit_and_braids_files_never_reach_a_commit() {
    let sb = install();
    let app = sb.new_project("app").beads(2).max_workers(2).create();
    let r = sb.tick().force().run();
    assert_eq!(r.spawned_beads().len(), 2, "{r:#?}");
    wait_for("the workers to end", Duration::from_secs(120), || {
        sb.live_labels().is_empty().then_some(())
    });
    sb.tick().force().run();
    let events = events_of(&app.root);
    for bead in &app.beads {
        assert_eq!(
            kinds_for(&events, bead),
            [
                "bead_claimed",
                "worker_spawned",
                "task_started",
                "task_complete"
            ],
            "{bead}: {}",
            show(&events)
        );
    }
    assert!(
        events.values().any(|(k, _)| k == "iteration_complete"),
        "{}",
        show(&events)
    );
    let status: serde_json::Value =
        serde_json::from_slice(&std::fs::read(app.root.join(".claw/status.json")).unwrap())
            .unwrap();
    assert_eq!(status["state"], "COMPLETE", "{status:#}");
    assert_eq!(status["phase_progress"]["done"], 2, "{status:#}");
    assert_eq!(status["loop_iteration"], 2, "{status:#}");
    assert_eq!(status["current_task"], serde_json::Value::Null);
    // Nothing of .claw/ was committed, and nothing of it shows as untracked either.
    let tracked = sb.git(&app.root, &["log", "--all", "--name-only", "--format="]);
    assert!(!tracked.contains(".claw"), "{tracked}");
    let untracked = sb.git(
        &app.root,
        &["status", "--porcelain", "--untracked-files=all"],
    );
    assert!(!untracked.contains(".claw"), "{untracked}");
    // `braids events` lists them in order, as text and as JSON lines.
    let text = sb.ok(&["events", "--project", "app"]);
    assert_eq!(text.lines().count(), events.len(), "{text}");
    let json = sb.ok(&["events", "--json", "--since", "2"]);
    let ids: Vec<u64> = json
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["id"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(ids, (3..=events.len() as u64).collect::<Vec<_>>());
    let unknown = sb.run(&["events", "--project", "nope"]);
    assert!(!unknown.status.success());
    let err = String::from_utf8_lossy(&unknown.stderr);
    assert!(err.contains("no project named nope"), "{err}");
}

/// A tiny deterministic generator for the kill delays (the seed is printed on failure).
struct Lcg(u64);
impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

#[test]
fn c8_2_ticks_killed_at_200_random_points_leave_whole_events_and_never_reuse_an_id() {
    // Workers that quit at once: every tick releases the last one's claims and claims again,
    // so each run writes dozens of events while it is being killed.
    let sb = Install::new()
        .worker(QUITTER)
        .config("[sessions]\nclaim_grace_secs = 0\n[worker]\nretries = 1000000\n[breaker]\nwindow = 0\n")
        .build();
    let app = sb.new_project("app").beads(30).max_workers(30).create();
    let seed = std::env::var("BRAIDS_KILL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_u64);
    let mut rng = Lcg(seed);
    let mut seen: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
    let mut killed_mid_run = 0;
    // Kill points are spread over a whole tick's length as measured now, on this machine and
    // under this load, so they land everywhere in it however slow the machine is.
    let tick_ms = || {
        let t = Instant::now();
        sb.tick().force().run();
        (t.elapsed().as_millis() as u64).max(20)
    };
    let mut span = tick_ms();
    // Until 200 ticks were killed while running (a kill after a tick ended is no kill point).
    let mut round = 0;
    while killed_mid_run < 200 {
        round += 1;
        assert!(
            round <= 1000,
            "only {killed_mid_run} kill points in 1000 rounds"
        );
        if round % 50 == 0 {
            span = tick_ms();
        }
        let mut child = sb
            .command(&["tick", "--force"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(rng.below(span)));
        if child.try_wait().unwrap().is_none() {
            killed_mid_run += 1;
        }
        let _ = child.kill();
        child.wait().unwrap();
        let now = events_of(&app.root);
        let before_max = seen.keys().last().copied().unwrap_or(0);
        for (id, (_, bytes)) in &now {
            match seen.get(id) {
                Some(old) => {
                    assert_eq!(old, bytes, "seed {seed} round {round}: event {id} changed")
                }
                None => {
                    assert!(
                        *id > before_max,
                        "seed {seed} round {round}: id {id} reused (max was {before_max})"
                    );
                    seen.insert(*id, bytes.clone());
                }
            }
        }
        assert_eq!(
            now.len(),
            seen.len(),
            "seed {seed} round {round}: an event vanished"
        );
    }
    let temps = std::fs::read_dir(Journal::of_project(&app.root).dir)
        .unwrap()
        .filter(|e| {
            let n = e.as_ref().unwrap().file_name();
            n.to_string_lossy().starts_with(".braids-tmp-")
        })
        .count();
    eprintln!(
        "seed {seed}: {killed_mid_run} of {round} ticks killed while running (span {span} ms), {} events, {temps} half-written temp files left (never read as events)",
        seen.len()
    );
    assert!(
        seen.len() > 200,
        "too few events to mean anything: {}",
        seen.len()
    );
    // And a tick that is let finish goes on after the largest id there ever was.
    sb.tick().force().run();
    let after = events_of(&app.root);
    let max_before = *seen.keys().last().unwrap();
    assert!(after
        .keys()
        .filter(|id| !seen.contains_key(id))
        .all(|id| *id > max_before));
}

/// `braids events --follow --json`, with a reader thread sending each line.
fn follow(sb: &Sandbox) -> (Child, std::sync::mpsc::Receiver<String>) {
    let mut child = sb
        .command(&["events", "--follow", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let out = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    (child, rx)
}

#[test]
fn c8_5_events_follow_prints_each_projects_events_as_they_are_written() {
    let sb = install();
    let a = sb.new_project("a").beads(1).create();
    let b = sb.new_project("b").beads(1).create();
    let ja = Journal::of_project(&a.root);
    // `b` has no events folder yet: its first event must be seen too.
    ja.append(
        "a",
        vec![Draft::new(Kind::Error).with("message", "ready")],
        chrono::Utc::now(),
    )
    .unwrap();
    let (mut child, rx) = follow(&sb);
    let first = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("the backlog");
    assert!(first.contains("ready"), "{first}");
    for i in 0..6 {
        let (slug, root) = if i % 2 == 0 {
            ("a", &a.root)
        } else {
            ("b", &b.root)
        };
        let msg = format!("event {i}");
        Journal::of_project(root)
            .append(
                slug,
                vec![Draft::new(Kind::Error).with("message", &msg)],
                chrono::Utc::now(),
            )
            .unwrap();
        let line = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("a followed event");
        assert!(
            line.contains(&msg) && line.contains(&format!("\"project\":\"{slug}\"")),
            "{line}"
        );
    }
    let _ = child.kill();
    child.wait().unwrap();
}

/// Starts `braids supervise` running `cmd`.
fn supervise(sb: &Sandbox, cmd: &Path) -> Child {
    sb.command(&["supervise", "--exec", &cmd.display().to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

fn stop(mut child: Child) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        assert!(
            Instant::now() < deadline,
            "supervise did not stop on SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn acks(sb: &Sandbox) -> Vec<String> {
    std::fs::read_to_string(sb.home().join("acks"))
        .unwrap_or_default()
        .lines()
        .map(String::from)
        .collect()
}

#[test]
fn c8_6_supervise_acknowledges_every_event_exactly_once_across_two_restarts() {
    let sb = install();
    let roots: Vec<_> = ["a", "b"]
        .iter()
        .map(|s| sb.new_project(s).beads(1).create().root)
        .collect();
    let put = |n: usize| {
        for i in 0..n {
            let (slug, root) = if i % 2 == 0 {
                ("a", &roots[0])
            } else {
                ("b", &roots[1])
            };
            Journal::of_project(root)
                .append(
                    slug,
                    vec![Draft::new(Kind::Error).with("message", i)],
                    chrono::Utc::now(),
                )
                .unwrap();
        }
    };
    // Fails every third run; records the events it acknowledges (a success) and checks that
    // the JSON on stdin is the event the variables name.
    let cmd = sb.script(
        "bin/supervisor",
        &format!(
            r#"n=$(cat "$HOME/runs" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "$HOME/runs"
json=$(cat)
case "$json" in *"\"id\":$BRAIDS_EVENT_ID,"*) ;; *) echo "stdin is not event $BRAIDS_EVENT_ID" >&2; exit 2;; esac
if [ $((n % 3)) -eq 0 ]; then echo "failing on purpose" >&2; exit 1; fi
echo "$BRAIDS_EVENT_PROJECT#$BRAIDS_EVENT_ID" >> {:?}"#,
            sb.home().join("acks")
        ),
    );
    // Three supervisors in turn, each stopped (SIGTERM) once it acknowledged some, with more
    // events written while none runs.
    for (written, acked, secs) in [(12, 5, 120), (12, 15, 120), (6, 30, 180)] {
        put(written);
        let running = supervise(&sb, &cmd);
        assert!(
            poll_until(Duration::from_secs(secs), || acks(&sb).len() >= acked),
            "{:?}",
            acks(&sb)
        );
        if acked == 30 {
            // Let a few more rounds pass: nothing more may come.
            std::thread::sleep(Duration::from_secs(3));
        }
        stop(running);
    }
    let got = acks(&sb);
    let unique: BTreeSet<&String> = got.iter().collect();
    assert_eq!(got.len(), 30, "an event was acknowledged twice: {got:?}");
    assert_eq!(unique.len(), 30);
    for (slug, root) in [("a", &roots[0]), ("b", &roots[1])] {
        let ids: Vec<u64> = got
            .iter()
            .filter_map(|l| l.strip_prefix(&format!("{slug}#"))?.parse().ok())
            .collect();
        assert_eq!(
            ids,
            (1..=15).collect::<Vec<_>>(),
            "{slug}: out of order or missing"
        );
        assert!(Journal::of_project(root)
            .entries()
            .iter()
            .all(|e| e.is_processed()));
    }
    let runs: u64 = sb.read("runs").trim().parse().unwrap();
    assert!(
        runs >= 44,
        "every third run fails, so 30 successes take 44 runs or more: {runs}"
    );
}

/// An installation with one project, `app`, whose journal holds `drafts`.
fn app_with(drafts: Vec<Draft>) -> (Sandbox, crate::support::project::Project) {
    let sb = install();
    let app = sb.new_project("app").beads(1).create();
    Journal::of_project(&app.root)
        .append("app", drafts, chrono::Utc::now())
        .unwrap();
    (sb, app)
}

#[test]
fn c8_6_supervise_once_handles_the_backlog_and_says_when_some_is_left() {
    let (sb, app) = app_with(vec![Draft::new(Kind::Error), Draft::new(Kind::Error)]);
    let ok = sb.script("bin/ok", "cat > /dev/null");
    let out = sb.run(&["supervise", "--once", "--exec", &ok.display().to_string()]);
    assert!(out.status.success(), "{out:?}");
    assert!(Journal::of_project(&app.root)
        .entries()
        .iter()
        .all(|e| e.is_processed()));
    Journal::of_project(&app.root)
        .append("app", vec![Draft::new(Kind::Error)], chrono::Utc::now())
        .unwrap();
    let fail = sb.script("bin/fail", "exit 3");
    let out = sb.run(&["supervise", "--once", "--exec", &fail.display().to_string()]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(!Journal::of_project(&app.root).entries()[2].is_processed());
}

#[test]
fn c8_6_supervise_hands_each_event_to_a_chat_cli_as_arguments_without_a_shell() {
    let (sb, app) = app_with(vec![Draft::new(Kind::Question)
        .bead("app-w1")
        .with("message", "which API? $(touch pwned) `id`")]);
    // A stand-in for `openclaw message send`: one line per argument.
    let openclaw = sb.script(
        "bin/openclaw",
        &format!(
            "for a in \"$@\"; do printf '%s\\n' \"$a\"; done >> {:?}",
            sb.home().join("sent")
        ),
    );
    let out = sb.run(&[
        "supervise",
        "--once",
        "--exec",
        &openclaw.display().to_string(),
        "message",
        "send",
        "--channel",
        "irc",
        "--target",
        "#braids",
        "-m",
        "{project}: {type} {bead} {message}",
    ]);
    assert!(out.status.success(), "{out:?}");
    let sent = sb.read("sent");
    let args: Vec<&str> = sent.lines().collect();
    assert_eq!(
        args,
        [
            "message",
            "send",
            "--channel",
            "irc",
            "--target",
            "#braids",
            "-m",
            "app: question app-w1 which API? $(touch pwned) `id`"
        ]
    );
    assert!(!sb.home().join("pwned").exists() && !app.root.join("pwned").exists());
}

#[test]
fn c8_6_a_second_supervisor_refuses_and_a_once_run_leaves_the_events_to_the_first() {
    let (sb, app) = app_with(vec![Draft::new(Kind::Error)]);
    // The first holds its command until released, so both are certainly running at once.
    let gate = sb.home().join("release");
    let slow = sb.script(
        "bin/slow",
        &format!("cat > /dev/null\nwhile [ ! -e {gate:?} ]; do sleep 0.1; done"),
    );
    let first = supervise(&sb, &slow);
    let lock = sb.braids_dir().join(".supervise.lock");
    wait_for(
        "the first supervisor to start",
        Duration::from_secs(60),
        || {
            braids::system::lock::TickLock::holder(&lock)
                .filter(|pid| *pid == first.id())
                .map(|_| ())
        },
    );
    let second = sb.run(&["supervise", "--exec", "true"]);
    assert_eq!(second.status.code(), Some(2), "{second:?}");
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(err.contains("another braids supervise is running"), "{err}");
    let once = sb.run(&["supervise", "--once", "--exec", "true"]);
    assert!(once.status.success(), "{once:?}");
    assert!(
        !Journal::of_project(&app.root).entries()[0].is_processed(),
        "the --once run took it"
    );
    std::fs::write(&gate, "").unwrap();
    wait_for("the first to acknowledge", Duration::from_secs(60), || {
        Journal::of_project(&app.root).entries()[0]
            .is_processed()
            .then_some(())
    });
    stop(first);
}

#[test]
fn c8_1_a_crash_after_the_counter_leaves_a_gap_and_never_a_repeated_id() {
    let sb = Install::new().worker(QUITTER).build();
    let app = sb.new_project("app").beads(3).max_workers(3).create();
    // The tick dies (SIGKILL) right after writing the counter for its first events.
    let died = sb
        .tick()
        .force()
        .env("FAILPOINTS", "events::after_seq=return")
        .output();
    assert_ne!(
        died.code,
        Some(0),
        "the crash point did not fire: {}",
        died.stderr
    );
    let seq: u64 = std::fs::read_to_string(Journal::of_project(&app.root).dir.join(".seq"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(seq >= 1);
    assert!(events_of(&app.root).keys().all(|id| *id <= seq));
    let before: BTreeSet<u64> = events_of(&app.root).keys().copied().collect();
    assert!(
        !before.contains(&seq),
        "the event the counter covers was never written"
    );
    // The next run goes on after the gap.
    sb.tick().force().run();
    let after = events_of(&app.root);
    let new: Vec<u64> = after
        .keys()
        .filter(|id| !before.contains(id))
        .copied()
        .collect();
    assert!(!new.is_empty());
    assert!(
        new.iter().all(|id| *id > seq),
        "{new:?} after a counter at {seq}"
    );
}
