//! What braids tells a person is true, complete and the same everywhere; typos are caught; a
//! hung agent never outlives its StallTimeout by more than a scheduling interval. The real
//! binary, real `br`, real git and real workers; the agent is an `sh` script.

use std::time::{Duration, Instant};

use crate::never_stuck::install;
use crate::support::{label, wait_for, Install, ReportExt, Sandbox};

/// Writes its deliverable (`$1`) and a passing status report costing 0.1 USD.
const AGENT: &str = r#"mkdir -p "$(dirname "$1")"
printf '# %s\n\n## Summary\n\nDid %s.\n' "$BRAIDS_BEAD" "$BRAIDS_BEAD" > "$1"
printf 'status: pass\nsummary: did it\ncost_usd: 0.1\n' > "$BRAIDS_RESULT_FILE"
"#;

fn json(sb: &Sandbox, args: &[&str]) -> serde_json::Value {
    let out = sb.ok(args);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: {e}: {out}"))
}

fn workers_end(sb: &Sandbox) {
    wait_for("the workers to end", Duration::from_secs(120), || {
        sb.live_labels().is_empty().then_some(())
    });
}

/// `git status --porcelain` of a project.
fn dirty(sb: &Sandbox, slug: &str) -> String {
    sb.git(&sb.project(slug), &["status", "--porcelain"])
}

/// Commits what the test wrote into a project (its iteration), as a person would have.
fn commit_fixture(sb: &Sandbox, slug: &str) {
    let root = sb.project(slug);
    sb.git(&root, &["add", "-A"]);
    sb.git(
        &root,
        &["commit", "-qm", "the test's project", "--allow-empty"],
    );
    assert_eq!(dirty(sb, slug), "");
}

/// The pid of a live `sleep 623` of this sandbox (its HOME), the hung agent below.
fn hung_agent(sb: &Sandbox) -> Option<u32> {
    let home = format!("HOME={}", sb.home().display());
    crate::support::procs::pids().find(|pid| {
        std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == b"sleep\x00623\x00")
            && std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|e| e.split(|b| *b == 0).any(|v| v == home.as_bytes()))
            && crate::support::procs::alive(*pid)
    })
}

#[test]
fn c2_7_a_hung_agent_is_gone_within_its_stall_timeout_and_the_stop_is_counted_everywhere() {
    // Hangs silently on every attempt; StallTimeout 30 s; ticks every 2 s as a scheduler would
    // run them, never forced, so the idle backoff (15 minutes) applies between them.
    let sb = install("exec sleep 623\n", "[worker]\nretry_backoff = \"1h\"\n");
    let app = sb
        .new_project("app")
        .br()
        .beads(1)
        .field("StallTimeout", "30s")
        .create();
    let bead = app.beads[0].clone();
    let first = sb.tick().run();
    assert_eq!(
        first.spawned_beads(),
        std::slice::from_ref(&bead),
        "{first:#?}"
    );
    wait_for("the agent running", Duration::from_secs(60), || {
        hung_agent(&sb)
    });
    let started = Instant::now();
    let mut skipped = 0;
    while hung_agent(&sb).is_some() {
        let r = sb.tick().run();
        skipped += usize::from(r.run == braids::tick::RunType::Skipped);
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the hung agent outlived its StallTimeout by more than a minute: {r:#?}"
        );
        std::thread::sleep(Duration::from_secs(2));
    }
    workers_end(&sb);
    assert!(
        skipped > 0,
        "no tick was ever skipped: the backoff was not in play"
    );
    // The stop is a failed attempt, with its cause, wherever attempts are shown.
    let events = sb.ok(&["events", "--json"]);
    let failed: Vec<serde_json::Value> = events
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|e| e["type"] == "validation_failed")
        .collect();
    assert_eq!(failed.len(), 1, "{events}");
    assert!(
        failed[0]["cause"].as_str().unwrap().contains("stalled"),
        "{:#}",
        failed[0]
    );
    let history = sb.ok(&["history", "app"]);
    assert!(
        history.contains(
            "attempt 1 failed: stalled: no output and no changed file for its StallTimeout of 30s"
        ),
        "{history}"
    );
    let cost = json(&sb, &["cost", "--json"]);
    assert_eq!(
        cost["total"]["attempts"], 1,
        "the stop is an attempt: {cost:#}"
    );
    let beads = json(&sb, &["beads", "app", "--json"]);
    assert_eq!(beads["beads"][0]["attempts"], 1, "{beads:#}");
    // The worker's log says who stopped it and why, rather than just ending.
    let logs = sb.ok(&["logs", &bead]);
    assert!(
        logs.lines()
            .any(|l| l.contains("worker stopped: by the tick: stalled")),
        "{logs}"
    );
    // The week's chart counts it as a failure.
    let mut served = sb.serve();
    let state = served.get("/api/v1/state").json();
    let failed_today: u64 = state["details"]["app"]["week"]
        .as_array()
        .map(|d| d.iter().filter_map(|d| d["failed"].as_u64()).sum())
        .unwrap_or(0);
    assert_eq!(failed_today, 1, "{:#}", state["details"]);
    served.stop(Duration::from_secs(10));
}

#[test]
fn c1_2_typos_in_durations_numbers_and_field_names_are_caught_with_their_lines() {
    let sb = install(AGENT, "");
    sb.new_project("app").br().beads(1).create();
    let md = sb.project("app").join(".braids/PROJECT.md");
    let text = std::fs::read_to_string(&md).unwrap();
    let text = text.replacen(
        "- **Status:** active\n",
        "- **Status:** active\n- **WorkerTimeout:** 90 minuets\n- **StallTimeout:** 1 hourz\n- **Priorty:** high\n- **MaxWorker:** 2\n- **Owner:** Ana\n- **Workspace:** sharde\n",
        1,
    );
    std::fs::write(&md, &text).unwrap();
    let line = |needle: &str| text.lines().position(|l| l.contains(needle)).unwrap() + 1;
    let out = sb.run(&["check", "--strict"]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{said}");
    for (needle, words) in [
        (
            "90 minuets",
            "WorkerTimeout `90 minuets` is not a positive duration",
        ),
        (
            "1 hourz",
            "StallTimeout `1 hourz` is not a positive duration",
        ),
        ("Priorty", "did you mean `Priority`?"),
        ("MaxWorker:", "did you mean `MaxWorkers`?"),
        ("sharde", "Workspace `sharde` is not worktree or shared"),
    ] {
        let at = format!("PROJECT.md:{}:", line(needle));
        assert!(
            said.lines().any(|l| l.contains(&at) && l.contains(words)),
            "no finding `{words}` at {at}:\n{said}"
        );
    }
    assert!(said.contains("(s, m or h)"), "the accepted forms: {said}");
    assert!(
        !said.contains("Owner"),
        "a person's own field is not a typo: {said}"
    );
    // The tick shows what a typo costs too, not only `check`.
    let status = sb.ok(&["status"]);
    assert!(
        status.contains("Workspace `sharde` is not worktree or shared"),
        "{status}"
    );
    // Never read as 90 seconds: the default stands until it is fixed.
    let r = sb.tick().dry_run().force().json();
    assert_eq!(
        r["spawns"][0]["worker_timeout"], 3600,
        "the default, not 90: {r:#}"
    );
    // An iteration's misspelled Status is named too.
    let it = sb.iteration("app", 2, "planning", &[]).join("ITERATION.md");
    let itext = std::fs::read_to_string(&it)
        .unwrap()
        .replace("Status:", "Statsu:");
    std::fs::write(&it, itext).unwrap();
    let said = String::from_utf8_lossy(&sb.run(&["check"]).stdout).into_owned();
    assert!(
        said.contains("`Statsu`") && said.contains("did you mean `Status`?"),
        "{said}"
    );
}

#[test]
fn c1_2_a_broken_config_toml_is_one_clear_finding_and_reading_commands_still_work() {
    let sb = install(AGENT, "");
    let app = sb.new_project("app").br().beads(1).create();
    let file = sb.braids_dir().join("config.toml");
    let good = std::fs::read_to_string(&file).unwrap();
    let broken = good.replacen("[tick]\n", "[tick]\nmax_workers = \"three\"\n", 1);
    let broken = broken.replace("max_workers = 0\n", "");
    std::fs::write(&file, &broken).unwrap();
    let out = sb.run(&["check"]);
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(2), "unusable input: {said}");
    let findings: Vec<&str> = said.lines().filter(|l| l.contains(": error ")).collect();
    assert_eq!(findings.len(), 1, "only the config's own error: {said}");
    assert!(
        findings[0].contains("config.toml:")
            && findings[0].contains("\"three\"")
            && findings[0].contains("a whole number without quotes, such as `max_workers = 3`"),
        "{said}"
    );
    assert!(
        !said.contains("executor"),
        "no finding from defaults: {said}"
    );
    assert!(!said.to_lowercase().contains("delete"), "{said}");
    // Every command that only reads still answers, with one warning.
    for args in [
        vec!["status"],
        vec!["sessions"],
        vec!["beads", "app"],
        vec!["events"],
        vec!["history"],
        vec!["cost"],
    ] {
        let out = sb.run(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
        assert_eq!(
            err.matches("warning").count(),
            1,
            "{args:?} warns once: {err}"
        );
    }
    // Values braids can check in config.toml are checked there, with their lines.
    let typos = good
        .replace("thinking = \"\"", "thinking = \"extreme\"")
        .replace("model = \"\"", "model = \"nonsense\"");
    std::fs::write(&file, &typos).unwrap();
    let said = String::from_utf8_lossy(&sb.run(&["check"]).stdout).into_owned();
    // The line of `k` in [openclaw] (other tables have a `model` too).
    let line = |k: &str| {
        let table = typos.lines().position(|l| l == "[openclaw]").unwrap();
        table
            + typos
                .lines()
                .skip(table)
                .position(|l| l.starts_with(k))
                .unwrap()
            + 1
    };
    assert!(
        said.contains(&format!(
            "config.toml:{}: error [openclaw]: [openclaw] Thinking `extreme`",
            line("thinking =")
        )),
        "{said}"
    );
    assert!(
        said.contains(&format!(
            "config.toml:{}: error [openclaw]: [openclaw] Model `nonsense`",
            line("model =")
        )),
        "{said}"
    );
    // A tick that found nothing it could start backs off; fixing config.toml ends that.
    std::fs::write(&file, good.replace("executor = [", "executor_typo = [")).unwrap();
    let r = sb.tick().run();
    assert!(r.spawned_beads().is_empty());
    assert_eq!(
        sb.tick().run().run,
        braids::tick::RunType::Skipped,
        "idle backoff"
    );
    std::thread::sleep(Duration::from_millis(1100));
    std::fs::write(&file, &good).unwrap();
    let r = sb.tick().run();
    assert_eq!(
        r.run,
        braids::tick::RunType::Full,
        "the fixed config.toml ended the backoff: {r:#?}"
    );
    assert_eq!(r.spawned_beads(), [app.beads[0].clone()], "{r:#?}");
    workers_end(&sb);
}

#[test]
fn c1_5_status_status_json_status_md_and_the_api_list_the_same_problems() {
    let sb = Install::new().build();
    sb.new_project("app").br().beads(1).create();
    sb.new_project("web").br().beads(1).create();
    let r = sb.tick().run();
    assert!(r.spawned_beads().is_empty(), "no executor: {r:#?}");
    let state = sb.state_json();
    assert_eq!(state["idleReason"], "no-worker-can-start", "{state:#}");
    let problems = |md: &str| -> Vec<String> {
        md.split("\n## Problems\n")
            .nth(1)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.strip_prefix("- "))
            .map(String::from)
            .collect()
    };
    let file = problems(&sb.read(sb.status_path()));
    let shown = problems(&sb.ok(&["status"]));
    assert_eq!(
        file.iter()
            .filter(|p| p.contains("no executor is configured"))
            .count(),
        1,
        "once, not once per project: {file:#?}"
    );
    assert_eq!(shown, file, "`braids status` and STATUS.md");
    let listed: Vec<String> = json(&sb, &["status", "--json"])["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap().to_string())
        .collect();
    assert_eq!(listed, file, "`status --json` and STATUS.md");
    let mut served = sb.serve();
    let api: Vec<String> = served.get("/api/v1/state").json()["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap().to_string())
        .collect();
    assert_eq!(api, file, "the API and STATUS.md");
    let page = served.get("/").body;
    assert!(
        page.contains("no executor is configured"),
        "the dashboard shows it"
    );
    served.stop(Duration::from_secs(10));
}

#[test]
fn c3_10_a_close_the_tracker_refuses_is_a_block_event_and_approve_lands_the_kept_work() {
    let sb = install(AGENT, "");
    let app = sb.new_project("app").br().beads(1).create();
    let parent = app.beads[0].clone();
    commit_fixture(&sb, "app");
    let child = sb
        .br("app", &["q", "A child still open", "--parent", &parent])
        .trim()
        .to_string();
    sb.tick().force().run();
    workers_end(&sb);
    assert_eq!(sb.br_status("app", &parent), "blocked");
    let events = sb.ok(&["events", "--json"]);
    let blocked: serde_json::Value = events
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|e| e["type"] == "bead_blocked" && e["bead"] == parent.as_str())
        .unwrap_or_else(|| panic!("no bead_blocked: {events}"));
    let reason = blocked["reason"].as_str().unwrap();
    assert!(
        reason.contains("the tracker refused to close it"),
        "{reason}"
    );
    assert!(
        reason.contains(&format!("`braids approve {parent}`")),
        "{reason}"
    );
    assert!(
        blocked["kept"]
            .as_str()
            .is_some_and(|k| k.starts_with("braids/kept/")),
        "{blocked:#}"
    );
    // The next command it suggests can work: not a retry that runs the agent again.
    let status = sb.ok(&["status"]);
    assert!(
        !status.contains(&format!("braids retry app:{parent}")),
        "{status}"
    );
    sb.br("app", &["close", &child]);
    let out = sb.ok(&["approve", &parent]);
    assert!(!out.is_empty());
    assert_eq!(sb.br_status("app", &parent), "closed");
    assert_eq!(dirty(&sb, "app"), "", "the checkout is clean");
}

#[test]
fn c9_2_retry_says_what_it_forgot_beads_tells_outages_apart_and_the_checkout_stays_clean() {
    // Exits 75 (try later: a provider outage) once, then fails for real.
    let agent = r#"if [ ! -e "$HOME/outage-once" ]; then touch "$HOME/outage-once"; exit 75; fi
echo "tests fail: 3 of 40" >&2
exit 1
"#;
    let sb = install(agent, "[worker]\nretries = 2\n");
    let app = sb.new_project("app").br().beads(1).create();
    let bead = app.beads[0].clone();
    commit_fixture(&sb, "app");
    sb.tick().force().run();
    workers_end(&sb);
    assert_eq!(dirty(&sb, "app"), "", "after an outage");
    let beads = json(&sb, &["beads", "app", "--json"]);
    assert_eq!(beads["beads"][0]["attempts"], 0, "{beads:#}");
    assert_eq!(beads["beads"][0]["outage_attempts"], 1, "{beads:#}");
    let text = sb.ok(&["beads", "app"]);
    assert!(
        text.contains("1 attempt(s) lost to a provider outage, not counted"),
        "{text}"
    );
    for _ in 0..3 {
        sb.tick().force().run();
        workers_end(&sb);
    }
    assert_eq!(sb.br_status("app", &bead), "blocked");
    assert_eq!(dirty(&sb, "app"), "", "after failures and a block");
    let events = sb.ok(&["events", "--json"]);
    assert!(
        events
            .lines()
            .any(|l| l.contains("\"validation_failed\"") && l.contains("exit 1")),
        "the cause is in the event: {events}"
    );
    let out = sb.ok(&["retry", &bead]);
    assert!(out.contains("(3 failed attempt(s) forgotten)"), "{out}");
    let history = sb.ok(&["history", "app"]);
    assert!(
        history.contains("failed") && history.contains("exit 1"),
        "{history}"
    );
}

#[test]
fn c9_2_what_users_of_a_cli_expect() {
    let sb = install(AGENT, "");
    let version = sb.ok(&["--version"]);
    assert!(
        version.starts_with("braids ")
            && version.contains(" (")
            && version.trim_end().ends_with(')'),
        "{version}"
    );
    for (shell, mark) in [
        ("bash", "_braids()"),
        ("zsh", "#compdef braids"),
        ("fish", "complete -c braids"),
    ] {
        let script = sb.ok(&["completions", shell]);
        assert!(
            script.contains(mark),
            "{shell}: {}",
            &script[..script.len().min(200)]
        );
        assert!(script.contains("retry"), "{shell} completes the commands");
    }
    let man = sb.ok(&["man"]);
    assert!(
        man.contains(".TH braids 1") && man.contains("retry"),
        "{}",
        &man[..200]
    );
    // Money is exact: 0.1 six times is 0.6.
    let app = sb.new_project("app").br().beads(6).max_workers(3).create();
    commit_fixture(&sb, "app");
    while app.beads.iter().any(|b| sb.br_status("app", b) != "closed") {
        sb.tick().force().run();
        workers_end(&sb);
    }
    let cost = sb.ok(&["cost", "--json"]);
    assert!(!cost.contains("0.6000000"), "{cost}");
    let total: serde_json::Value = serde_json::from_str(&cost).unwrap();
    assert_eq!(total["total"]["cost_usd"].as_f64(), Some(0.6), "{cost}");
    assert_eq!(dirty(&sb, "app"), "", "after beads landed");
    // A registry row whose directory is gone is an error, not an empty list.
    sb.new_project("gone").beads(1).create();
    std::fs::remove_dir_all(sb.project("gone")).unwrap();
    let out = sb.run(&["beads", "gone"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not exist"));
    // Long ids keep the columns aligned.
    let beads = sb.ok(&["beads", "app"]);
    let at: Vec<usize> = beads
        .lines()
        .skip(1)
        .filter_map(|l| l.find(" closed"))
        .collect();
    assert!(at.windows(2).all(|w| w[0] == w[1]), "{beads}");
    let _ = label("app", &app.beads[0]);
}
