//! Left alone for a month: a stalled agent is stopped, a provider outage pauses spawning instead
//! of blocking every bead, a failed attempt waits out its backoff, and a backend that briefly
//! reports every worker gone releases nothing. Real ticks, real `braids worker` processes, the
//! native tracker; the agent is an `sh` script.

use std::time::Duration;

use crate::support::{label, poll_until, wait_for, Install, ReportExt, Sandbox, SLEEPER};

/// The agent: fails with a rate-limit message while `$HOME/outage` exists, else writes its
/// deliverable (`$1`) and a passing status report.
const AGENT: &str = r#"echo "agent: $BRAIDS_BEAD" >> "$HOME/agent-calls"
if [ -e "$HOME/outage" ]; then
  echo "Error: 429 Too Many Requests (rate limit exceeded)" >&2
  exit 1
fi
mkdir -p "$(dirname "$1")"
printf '# %s\n\n## Summary\n\nDid %s.\n' "$BRAIDS_BEAD" "$BRAIDS_BEAD" > "$1"
printf 'status: pass\nsummary: did it\n' > "$BRAIDS_RESULT_FILE"
"#;

/// An installation whose workers are real `braids worker` processes running `agent` (an `sh`
/// body getting the deliverable path as `$1`), with a notifier writing `event|message` lines
/// to `$HOME/notified`.
fn install(agent: &str, extra: &str) -> Sandbox {
    let sb = Install::new().build();
    let agent = sb.script("bin/agent", agent);
    let notify = sb.script(
        "bin/notify",
        &format!(
            "printf '%s|%s\\n' \"$1\" \"$2\" >> {:?}",
            sb.home().join("notified")
        ),
    );
    sb.config(&format!(
        "[worker]\nexecutor = [{:?}, \"{{deliverable}}\"]\n\
         [notify]\ncommand = [{:?}, \"{{event}}\", \"{{message}}\"]\n",
        agent.display().to_string(),
        notify.display().to_string()
    ));
    sb.config(extra);
    sb
}

fn notified(sb: &Sandbox) -> Vec<String> {
    std::fs::read_to_string(sb.home().join("notified"))
        .unwrap_or_default()
        .lines()
        .map(String::from)
        .collect()
}

/// Ticks until no worker runs, then once more; at most `runs` ticks.
fn settle(sb: &Sandbox) {
    wait_for("the workers to end", Duration::from_secs(120), || {
        sb.live_labels().is_empty().then_some(())
    });
}

#[test]
fn c2_6_a_silent_agent_is_stopped_as_stalled_and_its_bead_waits_to_retry() {
    let sb = install("sleep 600\n", "[worker]\nretry_backoff = \"1h\"\n");
    // About StallTimeout itself: 5 s of silence against an agent that would sleep ten minutes.
    let app = sb
        .new_project("app")
        .beads(1)
        .field("StallTimeout", "5s")
        .create();
    let bead = &app.beads[0];
    let r = sb.tick().force().run();
    assert_eq!(r.spawned_beads(), [bead.clone()], "{r:#?}");
    let l = label("app", bead);
    let mut killed = None;
    assert!(
        poll_until(Duration::from_secs(90), || {
            std::thread::sleep(Duration::from_secs(1));
            let r = sb.tick().force().run();
            killed = r.zombies.iter().find(|z| z.label == l).map(|z| z.reason);
            killed.is_some()
        }),
        "the silent agent was never stopped"
    );
    assert_eq!(killed, Some(braids::tick::decide::ZombieReason::Stalled));
    settle(&sb);
    // The stop is a failed attempt: recorded with its reason, and the bead waits an hour.
    let attempts = std::fs::read_to_string(sb.braids_dir().join("attempts.json")).unwrap();
    assert!(
        attempts.contains("stalled: no output and no changed file for its StallTimeout of 5s"),
        "{attempts}"
    );
    let r = sb.tick().force().run();
    assert!(
        r.spawned_beads().is_empty(),
        "respawned inside its backoff: {r:#?}"
    );
    assert_ne!(
        sb.workplan("app")[bead].0,
        "blocked",
        "one failure blocks nothing"
    );
}

#[test]
fn c2_14_a_provider_outage_pauses_spawning_blocks_no_bead_and_ends_with_a_probe() {
    // retries = 0: any failure that counted would block its bead at once.
    let sb = install(
        AGENT,
        "[worker]\nretries = 0\n[breaker]\nwindow = 5\nprobe = \"0s\"\n",
    );
    let slugs = ["p1", "p2", "p3", "p4", "p5"];
    for s in slugs {
        sb.new_project(s).beads(2).channel("#ops").create();
    }
    std::fs::write(sb.home().join("outage"), "").unwrap();

    // The outage: every spawn fails with a rate-limit message.
    let mut paused_seen = false;
    let mut most_live = 0;
    for _ in 0..6 {
        let r = sb.tick().force().run();
        most_live = most_live.max(sb.live_labels().len());
        settle(&sb);
        let status = std::fs::read_to_string(sb.braids_dir().join("STATUS.md")).unwrap();
        paused_seen |= status.contains("spawning paused: provider failing since");
        if paused_seen {
            assert!(r.spawned_beads().len() <= 1, "one probe at a time: {r:#?}");
        }
    }
    assert!(paused_seen, "STATUS.md never said spawning was paused");
    let opened: Vec<String> = notified(&sb)
        .into_iter()
        .filter(|n| n.contains("spawning paused"))
        .collect();
    assert_eq!(
        opened.len(),
        1,
        "told once when it opened: {:?}",
        notified(&sb)
    );
    for s in slugs {
        let plan = sb.workplan(s);
        assert!(
            plan.values().all(|(status, _)| status != "blocked"),
            "{s}: an outage blocked a bead: {plan:?}"
        );
    }

    // The provider is back: the next probe succeeds and every bead gets done.
    std::fs::remove_file(sb.home().join("outage")).unwrap();
    let done = |sb: &Sandbox| {
        slugs.iter().all(|s| {
            sb.workplan(s)
                .values()
                .all(|(status, _)| status == "closed")
        })
    };
    for _ in 0..15 {
        if done(&sb) {
            break;
        }
        sb.tick().force().run();
        settle(&sb);
    }
    assert!(done(&sb), "not every bead got done after the outage");
    let closed: Vec<String> = notified(&sb)
        .into_iter()
        .filter(|n| n.contains("spawning resumed"))
        .collect();
    assert_eq!(
        closed.len(),
        1,
        "told once when it closed: {:?}",
        notified(&sb)
    );
    let status = std::fs::read_to_string(sb.braids_dir().join("STATUS.md")).unwrap();
    assert!(!status.contains("spawning paused"), "{status}");
    assert!(most_live <= 5);
}

#[test]
fn c2_12_a_backend_that_reports_every_worker_gone_for_one_run_releases_and_spawns_nothing() {
    let sb = Install::new()
        .worker(SLEEPER)
        .config("[sessions]\nclaim_grace_secs = 5\n")
        .build();
    let app = sb.new_project("app").max_workers(3).beads(4).create();
    let r = sb.tick().force().run();
    assert_eq!(r.spawned_beads().len(), 3, "{r:#?}");
    let pids: Vec<u32> = sb.live_labels().iter().map(|l| sb.pid_of(l)).collect();
    assert_eq!(pids.len(), 3);
    // Past the claim grace, the session records vanish for one run: to braids, every worker
    // seems gone although all three still run.
    std::thread::sleep(Duration::from_secs(6));
    let records = sb.braids_dir().join("sessions");
    let aside = sb.home().join("sessions-aside");
    std::fs::rename(&records, &aside).unwrap();
    let r = sb.tick().force().run();
    std::fs::rename(&aside, &records).unwrap();
    assert!(
        r.released_pairs().is_empty(),
        "released on one bad look: {r:#?}"
    );
    assert!(
        r.spawned_beads().is_empty(),
        "spawned past MaxWorkers: {r:#?}"
    );
    assert!(r.zombies.is_empty());
    let warned = r.errors.iter().any(|e| e.contains("release-storm guard"));
    assert!(warned, "the held releases are shown: {:?}", r.errors);
    // The records are back: nothing was lost, nobody runs twice.
    let r = sb.tick().force().run();
    assert!(
        r.released_pairs().is_empty() && r.spawned_beads().is_empty(),
        "{r:#?}"
    );
    let now: Vec<u32> = sb.live_labels().iter().map(|l| sb.pid_of(l)).collect();
    assert_eq!(now, pids, "the same three workers, none added");
    for b in &app.beads[..3] {
        assert_eq!(sb.workplan("app")[b].0, "in_progress", "{b}");
    }
}

/// Rust's Debug text, which must never reach a person: `Option`/`Result` wrappers and the
/// names of derived enum variants.
const DEBUG_TEXT: &[&str] = &[
    "Some(",
    "None",
    "Ok(",
    "Err(",
    "InProgress",
    "NoReadyBeads",
    "AllAtCapacity",
    "NoActiveIterations",
    "BeadClosed",
    "SessionEnded",
    "WorkerGone",
    "NeedsHuman",
    "NeedsClarification",
    "GuardrailConflict",
    "OnDemand",
    "AskFirst",
    "Failing",
    "Stalled",
    "IterationName(",
    "BeadId(",
    "Duration(",
    "Timeout",
];

/// Where `word` occurs in `text` as a word of its own (`Timeout` but not `WorkerTimeout`).
fn debug_text(text: &str) -> Vec<&'static str> {
    let is_word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    DEBUG_TEXT
        .iter()
        .copied()
        .filter(|w| {
            // `Some(` ends a word itself; `Timeout` must end where the word does.
            let open_end = !is_word(w.chars().next_back());
            text.match_indices(w).any(|(i, _)| {
                !is_word(text[..i].chars().next_back())
                    && (open_end || !is_word(text[i + w.len()..].chars().next()))
            })
        })
        .collect()
}

#[test]
fn c2_15_no_message_a_person_reads_carries_rust_debug_text() {
    let sb = install(
        "printf 'status: failing\\nsummary: the tests fail\\n' > \"$BRAIDS_RESULT_FILE\"\nexit 3\n",
        "[worker]\nretries = 0\n",
    );
    sb.new_project("fails").beads(1).channel("#fails").create();
    sb.new_project("typo")
        .beads(1)
        .field("MaxWorkers", "lots")
        .field("WorkerTimeout", "soon")
        .create();
    sb.new_project("noexec")
        .beads(1)
        .field("Executor", "no-such-agent --go")
        .channel("#noexec")
        .create();
    let two = sb.new_project("two").beads(1).create();
    sb.iteration("two", 2, "active", &[(two.beads[0].as_str(), "story")]);

    let mut seen = String::new();
    let mut out = |o: std::process::Output| {
        seen.push_str(&String::from_utf8_lossy(&o.stdout));
        seen.push_str(&String::from_utf8_lossy(&o.stderr));
    };
    out(sb.run(&["check"]));
    out(sb.run(&["-v", "tick", "--force"]));
    settle(&sb);
    for _ in 0..2 {
        out(sb.run(&["-v", "tick", "--force"]));
        settle(&sb);
    }
    out(sb.run(&["tick", "--dry-run", "--force"]));
    out(sb.run(&["status"]));
    out(sb.run(&["sessions"]));
    seen.push_str(&std::fs::read_to_string(sb.braids_dir().join("STATUS.md")).unwrap());
    seen.push_str(&notified(&sb).join("\n"));
    for (_, bytes) in crate::support::files::contents(&sb.braids_dir().join("logs")) {
        seen.push_str(&String::from_utf8_lossy(&bytes));
    }
    seen.push_str(
        &std::fs::read_to_string(sb.project("fails").join(".braids/WORKPLAN.md")).unwrap(),
    );

    // The scenario said what it should: the problems and the failure are all there …
    for expected in [
        "MaxWorkers",
        "2 active iterations",
        "no-such-agent",
        "the tests fail",
    ] {
        assert!(
            seen.contains(expected),
            "no message mentions {expected:?}:\n{seen}"
        );
    }
    // A problem is a WARN line when it first appears, not on every run.
    let warned = seen
        .lines()
        .filter(|l| l.contains(" WARN ") && l.contains("2 active iterations"))
        .count();
    assert_eq!(warned, 1, "warned once across three runs:\n{seen}");
    // … and none in Rust's Debug form.
    let found = debug_text(&seen);
    assert!(
        found.is_empty(),
        "Debug text {found:?} in what a person reads:\n{seen}"
    );
    assert_eq!(
        debug_text("WorkerTimeout is Some(3)"),
        ["Some("],
        "the check itself works"
    );
}

#[test]
fn c2_15_retention_removes_old_logs_and_prompts_but_never_a_running_or_blocked_beads() {
    let sb = Install::new()
        .worker(SLEEPER)
        .config("[retention]\nmax_age = \"30d\"\nmax_total_mb = 500\n")
        .build();
    let app = sb.new_project("app").max_workers(1).beads(3).create();
    let r = sb.tick().force().run();
    let running = r.spawned_beads()[0].clone();
    // app-w3 is blocked; every bead has a log and a prompt from 40 days ago
    let wp = sb.project("app").join(".braids/WORKPLAN.md");
    let text = std::fs::read_to_string(&wp).unwrap();
    let blocked = app.beads[2].clone();
    let text = text.replace(
        &format!("id:{blocked} "),
        &format!("id:{blocked}, status:blocked "),
    );
    std::fs::write(&wp, text).unwrap();
    let old = std::time::SystemTime::now() - Duration::from_secs(40 * 24 * 3600);
    let mut files = Vec::new();
    for b in &app.beads {
        let log = sb
            .braids_dir()
            .join(format!("logs/sessions/app/{b}-20260101T000000Z.log"));
        let prompt = sb.braids_dir().join(format!("work/app/{b}/prompt.md"));
        for f in [&log, &prompt] {
            std::fs::create_dir_all(f.parent().unwrap()).unwrap();
            std::fs::write(f, "old").unwrap();
            std::fs::File::options()
                .write(true)
                .open(f)
                .unwrap()
                .set_modified(old)
                .unwrap();
        }
        files.push((b.clone(), log, prompt));
    }
    assert_eq!(sb.workplan("app")[&blocked].0, "blocked");
    // The last run's retention was just now: the next one waits an hour.
    sb.tick().force().run();
    assert!(files.iter().all(|(_, l, p)| l.exists() && p.exists()));
    let mut state = sb.state_json();
    state["retentionAt"] = serde_json::json!("2026-01-01T00:00:00Z");
    std::fs::write(sb.state_path(), state.to_string()).unwrap();
    sb.tick().force().run();
    for (b, log, prompt) in &files {
        let kept = *b == running || *b == blocked;
        assert_eq!(log.exists(), kept, "{b}: {}", log.display());
        assert_eq!(prompt.exists(), kept, "{b}: {}", prompt.display());
    }
    // the live worker's own log is young and stays
    assert!(sb.live_labels().contains(&label("app", &running)));
}
