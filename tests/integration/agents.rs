//! The agent CLI presets against the real CLIs — Claude Code, Codex, opencode and aider — through
//! real ticks and `braids worker`, real `br`, git and a bare upstream. Only the model is
//! scripted: [`AgentModel`] speaks each CLI's wire protocol on loopback, and the CLI runs its
//! own tools.
//!
//! `.ci/run` installs the CLIs (the three npm packages under /opt/openclaw, aider in /opt/aider)
//! and, as root, sets `BRAIDS_REQUIRE_AGENTS=1`, so a missing CLI fails these tests there;
//! elsewhere each says it is skipped, and why.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use crate::support::agent_cli::Cli;
use crate::support::agent_model::{AgentModel, Script};
use crate::support::{label, wait_for, Install, ReportExt, Sandbox};

/// An installation whose agent is `cli`, a model that writes `hello.txt`, and the config a
/// test adds.
fn world(cli: Cli, more: &str) -> (Sandbox, AgentModel) {
    let model = AgentModel::start(Script::Write {
        files: vec![("hello.txt".into(), "hi\n".into())],
        final_text: "Created hello.txt.".into(),
    });
    let sb = Install::new()
        .sandboxed()
        .config("[sessions]\nkill_grace_secs = 5\n")
        .build();
    sb.config(&cli.config(sb.home(), &model.url(), &sb.path_var()));
    if !more.is_empty() {
        sb.config(more);
    }
    (sb, model)
}

/// A br project with `beads` beads, its iteration active, pushed to a bare upstream of its own.
fn project(
    sb: &Sandbox,
    slug: &str,
    beads: usize,
    fields: &[(&str, &str)],
) -> (Vec<String>, PathBuf) {
    let mut p = sb.new_project(slug).br().beads(beads);
    for (k, v) in fields {
        p = p.field(k, v);
    }
    let p = p.create();
    let bare = sb.home().join(format!("{slug}-upstream.git"));
    sb.git(sb.home(), &["init", "-q", "--bare", bare.to_str().unwrap()]);
    sb.git(
        &p.root,
        &["remote", "add", "origin", bare.to_str().unwrap()],
    );
    sb.git(&p.root, &["push", "-q", "-u", "origin", "HEAD"]);
    (p.beads, bare)
}

fn attempts(sb: &Sandbox) -> Value {
    std::fs::read(sb.braids_dir().join("attempts.json"))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or(Value::Null)
}

/// The failures recorded for `bead`, oldest first.
fn failures(sb: &Sandbox, bead: &str) -> Vec<Value> {
    let a = attempts(sb);
    a["beads"]
        .as_object()
        .into_iter()
        .flat_map(|p| p.values())
        .filter_map(|beads| beads[bead]["failures"].as_array())
        .flatten()
        .cloned()
        .collect()
}

/// The ledger's sums for one bead: tokens in, tokens out, dollars.
fn cost_of(sb: &Sandbox, slug: &str, bead: &str) -> (u64, u64, f64) {
    let out: Value = serde_json::from_str(&sb.ok(&["cost", "--by", "bead", "--json"])).unwrap();
    let key = format!("{slug}:{bead}");
    let row = out["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["key"] == key.as_str())
        .unwrap_or_else(|| panic!("no cost row for {key}: {out}"))
        .clone();
    (
        row["tokens_in"].as_u64().unwrap(),
        row["tokens_out"].as_u64().unwrap(),
        row["cost_usd"].as_f64().unwrap(),
    )
}

fn closed(sb: &Sandbox, slug: &str, bead: &str, limit: Duration) {
    if !crate::support::poll_until(limit, || sb.br_status(slug, bead) == "closed") {
        let log = sb.run(&["logs", "--raw", bead]);
        panic!(
            "{slug} {bead} not closed after {limit:?}: {}\n{}{}\nattempts: {}",
            sb.br_status(slug, bead),
            String::from_utf8_lossy(&log.stdout),
            String::from_utf8_lossy(&log.stderr),
            attempts(sb)
        );
    }
}

/// The bead lands as one commit with the agent's file, on the upstream.
fn landed_on_upstream(sb: &Sandbox, bare: &Path, bead: &str) {
    // The tracker's own records (`braids: <bead> attempt 1 failed`) are not landings.
    let landing = |subject: &str| subject.contains(bead) && !subject.contains("braids: ");
    wait_for(&format!("{bead} pushed"), Duration::from_secs(120), || {
        sb.git(bare, &["log", "--format=%s", "main"])
            .lines()
            .any(landing)
            .then_some(())
    });
    let log = sb.git(bare, &["log", "--format=%H %s", "main"]);
    let landing: Vec<&str> = log
        .lines()
        .filter(|l| landing(l))
        .filter_map(|l| l.split(' ').next())
        .collect();
    assert_eq!(landing.len(), 1, "one landing commit: {log}");
    let files = sb.git(bare, &["show", "--name-only", "--format=", landing[0]]);
    assert!(
        files.lines().any(|f| f == "hello.txt"),
        "{files}\n{}",
        sb.ok(&["logs", "--raw", bead])
    );
    assert!(
        !files.contains(".aider"),
        "the CLI's own state never lands: {files}"
    );
    assert_eq!(sb.git(bare, &["show", "main:hello.txt"]), "hi\n");
}

fn closes_a_bead(cli: Cli, expect: (u64, u64, f64)) {
    let Some(cli) = cli.installed() else {
        return;
    };
    let (sb, model) = world(cli, "");
    let (beads, bare) = project(&sb, "app", 1, &[]);
    let report = sb.tick().force().run();
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert_eq!(report.labels(), [label("app", &beads[0])]);
    closed(&sb, "app", &beads[0], Duration::from_secs(240));
    landed_on_upstream(&sb, &bare, &beads[0]);
    let seen = model.seen();
    assert!(seen.iter().all(|s| s.status == 200), "{seen:?}");
    // The CLI spoke its own protocol, for the model the preset asked for.
    let (api, asked) = match cli {
        Cli::Claude => ("messages", None),
        Cli::Codex => ("responses", Some("gpt-5.5")),
        Cli::Opencode => ("chat", Some("standin")),
        Cli::Aider => ("chat", Some("standin")),
    };
    assert!(seen.iter().all(|s| s.api == api), "{seen:?}");
    if let Some(m) = asked {
        assert!(seen.iter().all(|s| s.model == m), "{seen:?}");
    }
    let (tin, tout, usd) = cost_of(&sb, "app", &beads[0]);
    assert_eq!(
        (tin, tout),
        (expect.0, expect.1),
        "tokens as the CLI counted them"
    );
    assert!(
        (usd - expect.2).abs() < 1e-9,
        "{usd} USD, expected {}",
        expect.2
    );
    // The agent's words became the deliverable's summary: it wrote none.
    let log = sb.ok(&["logs", &beads[0]]);
    assert!(
        !log.contains("{\"type\""),
        "logs shows events readably:\n{log}"
    );
    let raw = sb.ok(&["logs", "--raw", &beads[0]]);
    if cli != Cli::Aider {
        assert!(raw.contains("{\"type\""), "--raw keeps the JSON:\n{raw}");
    }
}

#[test]
fn claude_code_closes_a_bead_with_its_own_write_tool() {
    // Two calls of 100 in / 20 out; Claude Code prices them itself.
    closes_a_bead(Cli::Claude, (200, 40, 0.0016));
}

#[test]
fn codex_closes_a_bead_priced_from_the_prices_table() {
    // Two calls; no cost from Codex, so [prices]: 200 × 1.25 + 40 × 10 per million.
    closes_a_bead(Cli::Codex, (200, 40, 0.00065));
}

#[test]
fn opencode_closes_a_bead_with_its_own_cost() {
    // Two steps at its configured 3 and 15 USD per million.
    closes_a_bead(Cli::Opencode, (200, 40, 0.0012));
}

#[test]
fn aider_closes_a_bead_from_its_whole_file_edit() {
    // One call, priced by its model metadata (3e-6 and 15e-6 a token).
    closes_a_bead(Cli::Aider, (100, 20, 0.0006));
}

#[test]
fn a_write_claude_code_was_refused_is_a_failed_attempt_with_the_refusal_in_the_next_prompt() {
    let Some(cli) = Cli::Claude.installed() else {
        return;
    };
    let (sb, model) = world(cli, "");
    let (beads, _) = project(&sb, "app", 1, &[]);
    let outside = sb.home().join("outside/x.txt");
    model.set_default(Script::Write {
        files: vec![(outside.display().to_string(), "outside\n".into())],
        final_text: "Wrote it.".into(),
    });
    let report = sb.tick().force().run();
    assert_eq!(report.spawned_beads(), [beads[0].clone()]);
    let failed = wait_for("the attempt recorded", Duration::from_secs(180), || {
        failures(&sb, &beads[0]).first().cloned()
    });
    let why = failed["why"].as_str().unwrap();
    assert!(
        why.contains("refused an action: Write") && why.contains("outside/x.txt"),
        "{why}"
    );
    assert!(!outside.exists());
    assert_ne!(
        sb.br_status("app", &beads[0]),
        "closed",
        "Claude Code exited 0, yet it failed"
    );
    // The next attempt is told what was refused.
    wait_for("the worker gone", Duration::from_secs(60), || {
        sb.live_labels().is_empty().then_some(())
    });
    let report = sb.tick().force().run();
    assert_eq!(report.spawned_beads(), [beads[0].clone()], "{report:#?}");
    wait_for("a second conversation", Duration::from_secs(180), || {
        model
            .seen()
            .iter()
            .any(|s| s.first_user.contains("refused an action: Write"))
            .then_some(())
    });
}

fn storm_opens_the_breaker_and_a_probe_closes_it(cli: Cli) {
    let Some(cli) = cli.installed() else {
        return;
    };
    let (sb, model) = world(
        cli,
        "[breaker]\nwindow = 2\nprobe = \"5s\"\nprobe_max = \"5s\"\n",
    );
    model.set_default(Script::Fail {
        status: 429,
        retry_after: Some(1),
    });
    let (app, _) = project(&sb, "app", 1, &[]);
    let (web, web_up) = project(&sb, "web", 1, &[]);
    let report = sb.tick().force().run();
    assert_eq!(report.spawned_beads().len(), 2, "{report:#?}");
    for bead in [&app[0], &web[0]] {
        let f = wait_for(
            &format!("{bead}'s rate-limited attempt"),
            Duration::from_secs(300),
            || failures(&sb, bead).first().cloned(),
        );
        assert_eq!(
            f["signature"],
            "provider: HTTP 429",
            "{f}\n{}",
            String::from_utf8_lossy(&sb.run(&["logs", "--raw", bead]).stdout)
        );
        assert_eq!(
            f["counts"], false,
            "a provider failure never counts against the bead: {f}"
        );
    }
    wait_for("the workers gone", Duration::from_secs(60), || {
        sb.live_labels().is_empty().then_some(())
    });
    let report = sb.tick().force().run();
    assert!(
        report.spawned_beads().is_empty(),
        "the breaker holds spawns: {report:#?}"
    );
    let breaker = attempts(&sb)["breaker"].clone();
    assert!(breaker["openSince"].is_string(), "{breaker}");
    assert_eq!(breaker["signature"], "provider: HTTP 429");
    for (slug, bead) in [("app", &app[0]), ("web", &web[0])] {
        assert_eq!(
            sb.br_status(slug, bead),
            "open",
            "no bead is blocked for an outage"
        );
    }
    // The provider is back: one probe, and its success closes the breaker.
    model.set_default(Script::Write {
        files: vec![("hello.txt".into(), "hi\n".into())],
        final_text: "Created hello.txt.".into(),
    });
    let probe = wait_for("a probe spawn", Duration::from_secs(60), || {
        let r = sb.tick().force().run();
        r.spawned_beads().first().cloned()
    });
    let slug = if app.contains(&probe) { "app" } else { "web" };
    closed(&sb, slug, &probe, Duration::from_secs(240));
    wait_for("the breaker closed", Duration::from_secs(120), || {
        let _ = sb.tick().force().run();
        attempts(&sb)["breaker"]["openSince"]
            .is_null()
            .then_some(())
    });
    // Spawning again: the other bead runs at the next ticks and lands.
    let (other_slug, other) = if slug == "app" {
        ("web", &web[0])
    } else {
        ("app", &app[0])
    };
    wait_for(
        &format!("{other_slug} {other} closed"),
        Duration::from_secs(240),
        || {
            let _ = sb.tick().force().run();
            (sb.br_status(other_slug, other) == "closed")
                .then_some(())
                .or_else(|| {
                    std::thread::sleep(Duration::from_secs(2));
                    None
                })
        },
    );
    if other_slug == "web" {
        landed_on_upstream(&sb, &web_up, other);
    }
}

#[test]
fn a_429_storm_with_claude_code_opens_the_breaker_and_a_probe_closes_it() {
    storm_opens_the_breaker_and_a_probe_closes_it(Cli::Claude);
}

#[test]
fn a_429_storm_with_codex_opens_the_breaker_and_a_probe_closes_it() {
    storm_opens_the_breaker_and_a_probe_closes_it(Cli::Codex);
}

#[test]
fn a_429_storm_with_opencode_opens_the_breaker_and_a_probe_closes_it() {
    storm_opens_the_breaker_and_a_probe_closes_it(Cli::Opencode);
}

#[test]
fn a_429_storm_with_aider_opens_the_breaker_and_a_probe_closes_it() {
    storm_opens_the_breaker_and_a_probe_closes_it(Cli::Aider);
}

fn an_answer_resumes_the_agents_session(cli: Cli) {
    let Some(cli) = cli.installed() else {
        return;
    };
    let (sb, model) = world(cli, "");
    let (beads, bare) = project(&sb, "app", 1, &[]);
    let bead = &beads[0];
    let report_file = format!(".ai/executor-results/{bead}");
    model.script(
        bead,
        Script::Write {
            files: vec![(
                report_file,
                "status: needs_human\nreason: needs_clarification\nsummary: Which greeting, hi or hello?\n".into(),
            )],
            final_text: "I asked which greeting.".into(),
        },
    );
    sb.tick().force().run();
    wait_for("the question", Duration::from_secs(180), || {
        (sb.br_status("app", bead) == "blocked").then_some(())
    });
    let asked: Vec<String> = model
        .seen()
        .iter()
        .filter_map(|s| s.session.clone())
        .collect();
    let first = asked.first().cloned().expect("the CLI sent its session id");
    wait_for("the worker gone", Duration::from_secs(60), || {
        sb.live_labels().is_empty().then_some(())
    });
    sb.ok(&["answer", bead, "hi"]);
    // The resumed conversation holds both turns of the question already, so the model's next
    // answer is its closing text: the CLI succeeds and the bead closes.
    let report = sb.tick().force().run();
    assert_eq!(report.spawned_beads(), [bead.clone()], "{report:#?}");
    closed(&sb, "app", bead, Duration::from_secs(240));
    let later: Vec<_> = model.seen().into_iter().skip(asked.len()).collect();
    assert!(!later.is_empty());
    assert!(
        later
            .iter()
            .all(|s| s.session.as_deref() == Some(first.as_str())),
        "resumed {first}: {later:?}"
    );
    assert!(
        later.iter().all(|s| s.turns >= 2),
        "the session's history came along: {later:?}"
    );
    wait_for(&format!("{bead} landed"), Duration::from_secs(120), || {
        sb.git(&bare, &["log", "--format=%s", "main"])
            .lines()
            .any(|s| s.contains(bead.as_str()) && !s.starts_with("braids: "))
            .then_some(())
    });
}

#[test]
fn an_answer_resumes_claude_codes_session() {
    an_answer_resumes_the_agents_session(Cli::Claude);
}

#[test]
fn an_answer_resumes_codexs_thread() {
    an_answer_resumes_the_agents_session(Cli::Codex);
}

fn a_hung_stream_is_stopped_as_stalled(cli: Cli) {
    let Some(cli) = cli.installed() else {
        return;
    };
    let (sb, model) = world(cli, "");
    model.set_default(Script::Hang);
    let (beads, _) = project(&sb, "app", 1, &[("StallTimeout", "20s")]);
    let report = sb.tick().force().run();
    assert_eq!(report.spawned_beads(), [beads[0].clone()]);
    let pid = sb.pid_of(&label("app", &beads[0]));
    let f = wait_for("the stall kill", Duration::from_secs(240), || {
        sb.tick().force().run();
        let f = failures(&sb, &beads[0]).first().cloned();
        if f.is_none() {
            std::thread::sleep(Duration::from_secs(2));
        }
        f
    });
    assert!(
        f["why"].as_str().unwrap_or_default().contains("stall"),
        "{f}"
    );
    wait_for(
        "the worker and its agent gone",
        Duration::from_secs(60),
        || (!crate::support::procs::alive(pid)).then_some(()),
    );
    assert!(model.seen().iter().all(|s| s.status == 200));
}

#[test]
fn a_claude_code_stream_that_hangs_is_stopped_as_stalled() {
    a_hung_stream_is_stopped_as_stalled(Cli::Claude);
}

#[test]
fn a_codex_stream_that_hangs_is_stopped_as_stalled() {
    a_hung_stream_is_stopped_as_stalled(Cli::Codex);
}

#[test]
fn an_opencode_stream_that_hangs_is_stopped_as_stalled() {
    a_hung_stream_is_stopped_as_stalled(Cli::Opencode);
}

#[test]
fn an_aider_stream_that_hangs_is_stopped_as_stalled() {
    a_hung_stream_is_stopped_as_stalled(Cli::Aider);
}

#[test]
fn a_claude_code_session_that_is_gone_is_started_afresh_with_the_answer_in_the_prompt() {
    let Some(cli) = Cli::Claude.installed() else {
        return;
    };
    let (sb, model) = world(cli, "");
    let (beads, _) = project(&sb, "app", 1, &[]);
    let bead = &beads[0];
    model.script(
        bead,
        Script::Write {
            files: vec![(
                format!(".ai/executor-results/{bead}"),
                "status: needs_human\nreason: needs_clarification\nsummary: Which greeting?\n"
                    .into(),
            )],
            final_text: "I asked.".into(),
        },
    );
    sb.tick().force().run();
    wait_for("the question", Duration::from_secs(180), || {
        (sb.br_status("app", bead) == "blocked").then_some(())
    });
    let first = model.seen().iter().find_map(|s| s.session.clone()).unwrap();
    wait_for("the worker gone", Duration::from_secs(60), || {
        sb.live_labels().is_empty().then_some(())
    });
    // Claude Code's own record of the session is lost (a new machine, a cleaned HOME).
    std::fs::remove_dir_all(sb.home().join(".claude/projects")).unwrap();
    sb.ok(&["answer", bead, "say hi"]);
    model.script(
        bead,
        Script::Write {
            files: vec![("hello.txt".into(), "hi\n".into())],
            final_text: "Created hello.txt.".into(),
        },
    );
    let seen_before = model.seen().len();
    sb.tick().force().run();
    closed(&sb, "app", bead, Duration::from_secs(240));
    let fresh: Vec<_> = model.seen().into_iter().skip(seen_before).collect();
    assert!(
        fresh
            .iter()
            .all(|s| s.session.as_deref() != Some(first.as_str())),
        "{fresh:?}"
    );
    assert!(
        fresh.iter().any(|s| s.first_user.contains("say hi")),
        "the answer is in the fresh prompt: {fresh:?}"
    );
}

/// `braids check --json`: its exit code and findings.
fn check(sb: &Sandbox) -> (i32, Vec<Value>) {
    let o = sb.run(&["check", "--json"]);
    let v: Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stdout)));
    (
        o.status.code().unwrap(),
        v["findings"].as_array().cloned().unwrap_or_default(),
    )
}

/// The one finding about config.toml that says `words`, with its line and a fix.
fn finding(findings: &[Value], words: &str) -> Value {
    findings
        .iter()
        .find(|f| {
            f["path"]
                .as_str()
                .unwrap_or_default()
                .ends_with("config.toml")
                && f["message"].as_str().unwrap_or_default().contains(words)
        })
        .cloned()
        .unwrap_or_else(|| panic!("no finding saying {words:?}: {findings:#?}"))
}

#[test]
fn configuration_mistakes_in_presets_are_named_with_their_line_and_fix() {
    // Each mistake alone, in an otherwise clean installation: (config, words, line).
    let cases: [(&str, &str, usize); 4] = [
        (
            "[worker]\nexecutor = \"cluade-code\"\n",
            "did you mean `claude-code`",
            2,
        ),
        (
            "[worker]\nexecutor = \"codex\"\n[executors.codex]\nenv = \"OPENAI_BASE_URL=x\"\n",
            "expected a map",
            4,
        ),
        (
            "[prices.\"gpt-5.5\"]\ninput = \"cheap\"\noutput = 10\n",
            "expected f64",
            2,
        ),
        (
            "[executors.gpt]\nmodel = \"x\"\n",
            "not an executor preset",
            1,
        ),
    ];
    for (toml, words, line) in cases {
        let sb = Install::new().build();
        std::fs::write(sb.braids_dir().join("config.toml"), toml).unwrap();
        let (code, findings) = check(&sb);
        let f = finding(&findings, words);
        assert_eq!(f["line"], line, "{toml}: {f}");
        assert!(
            !f["fix"].as_str().unwrap().contains("delete"),
            "never advises deleting settings: {f}"
        );
        assert_ne!(code, 0, "{toml}");
    }
}

#[test]
fn a_preset_whose_program_is_missing_holds_its_beads_and_check_names_the_line() {
    let sb = Install::new()
        .config(
            "[worker]\nexecutor = \"codex\"\n\n[executors.codex]\nprogram = \"/nowhere/codex\"\n",
        )
        .build();
    let text = sb.read(sb.braids_dir().join("config.toml"));
    let line = text
        .lines()
        .position(|l| l.contains("/nowhere/codex"))
        .unwrap()
        + 1;
    let (beads, _) = project(&sb, "app", 1, &[]);
    let (code, findings) = check(&sb);
    let f = finding(&findings, "`/nowhere/codex` is not an executable file");
    assert_eq!(f["line"], line, "{f}");
    assert!(
        f["message"].as_str().unwrap().contains("[executors.codex]"),
        "{f}"
    );
    assert_eq!(code, 1);
    // The tick's preflight holds the bead: nothing claimed, nothing blocked.
    let report = sb.tick().force().run();
    assert!(report.spawned_beads().is_empty(), "{report:#?}");
    assert_eq!(sb.br_status("app", &beads[0]), "open");
    // A misspelt preset in PROJECT.md gets the same treatment, with a hint.
    let sb = Install::new().build();
    let (beads, _) = project(&sb, "app", 1, &[("Executor", "cluade")]);
    let (_, findings) = check(&sb);
    let f = findings
        .iter()
        .find(|f| {
            f["message"]
                .as_str()
                .unwrap_or_default()
                .contains("did you mean the preset `claude-code`")
        })
        .unwrap_or_else(|| panic!("{findings:#?}"));
    assert!(f["path"].as_str().unwrap().ends_with("PROJECT.md"), "{f}");
    assert!(f["line"].is_u64(), "{f}");
    sb.tick().force().run();
    assert_eq!(sb.br_status("app", &beads[0]), "open");
}

#[test]
fn check_runs_each_preset_in_use_and_a_cli_that_prints_garbage_fails_with_the_fix() {
    let sb = Install::new().build();
    // A "claude" that is not Claude Code: no version, no JSON.
    let fake = sb.script(
        "bin/fake-claude",
        "echo 'Segmentation fault (core dumped)'\nexit 0\n",
    );
    sb.config(&format!(
        "[worker]\nexecutor = \"claude-code\"\n\n[executors.claude-code]\nprogram = {:?}\n",
        fake.display().to_string()
    ));
    let (beads, _) = project(&sb, "app", 1, &[]);
    let (code, findings) = check(&sb);
    let f = finding(&findings, "printed no version");
    assert!(
        f["line"].is_u64()
            && f["fix"]
                .as_str()
                .unwrap()
                .contains("[executors.claude-code]"),
        "{f}"
    );
    assert_eq!(code, 1);
    // Run anyway: the attempt fails and says what to fix; the bead is retried, not blocked.
    let report = sb.tick().force().run();
    assert_eq!(report.spawned_beads(), [beads[0].clone()]);
    let failed = wait_for("the failed attempt", Duration::from_secs(120), || {
        failures(&sb, &beads[0]).first().cloned()
    });
    let why = failed["why"].as_str().unwrap();
    assert!(
        why.contains("claude-code printed no JSON events")
            && why.contains("Segmentation fault")
            && why.contains("config.toml"),
        "{why}"
    );
    wait_for("the bead open again", Duration::from_secs(60), || {
        (sb.br_status("app", &beads[0]) == "open").then_some(())
    });
    // Each installed CLI, at the version braids was tested with, passes the check.
    for cli in Cli::ALL.into_iter().filter_map(Cli::installed) {
        let model = AgentModel::start(Script::Hang);
        let sb = Install::new().build();
        sb.config(&cli.config(sb.home(), &model.url(), &sb.path_var()));
        project(&sb, "app", 1, &[]);
        let (_, findings) = check(&sb);
        assert!(
            !findings
                .iter()
                .any(|f| f["section"] == "agents" || f["section"] == "preflight"),
            "{}: {findings:#?}",
            cli.preset()
        );
    }
}

#[test]
fn executors_prints_the_recipes_the_docs_show() {
    let sb = Install::new().build();
    let recipes = sb.ok(&["executors", "--defaults"]);
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/agents.md")).unwrap();
    assert!(
        readme.contains(recipes.trim()),
        "docs/agents.md differs from `braids executors --defaults`; paste its output there:\n{recipes}"
    );
    for preset in ["claude-code", "codex", "opencode", "aider", "openclaw"] {
        assert!(
            recipes.contains(&format!("executor = \"{preset}\"")),
            "{recipes}"
        );
    }
}

/// The CLI closes its bead inside the sandbox `kind`, its own state folders writable.
fn closes_a_bead_sandboxed(cli: Cli, kind: &str) {
    let Some(cli) = cli.installed() else {
        return;
    };
    let bwrap = if kind == "bwrap" {
        let Some(b) = crate::support::bwrap() else {
            return;
        };
        b
    } else {
        "bwrap".into()
    };
    let (sb, _model) = world(
        cli,
        &format!("[worker]\nsandbox = \"{kind}\"\nbwrap = {bwrap:?}\n"),
    );
    let (beads, bare) = project(&sb, "app", 1, &[]);
    let report = sb.tick().force().run();
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    closed(&sb, "app", &beads[0], Duration::from_secs(240));
    landed_on_upstream(&sb, &bare, &beads[0]);
}

#[test]
fn c11_6_claude_code_closes_a_bead_in_the_landlock_sandbox() {
    closes_a_bead_sandboxed(Cli::Claude, "landlock");
}

#[test]
fn c11_6_codex_closes_a_bead_in_the_landlock_sandbox() {
    closes_a_bead_sandboxed(Cli::Codex, "landlock");
}

#[test]
fn c11_6_opencode_closes_a_bead_in_the_landlock_sandbox() {
    closes_a_bead_sandboxed(Cli::Opencode, "landlock");
}

#[test]
fn c11_6_aider_closes_a_bead_in_the_landlock_sandbox() {
    closes_a_bead_sandboxed(Cli::Aider, "landlock");
}

#[test]
fn c11_6_claude_code_closes_a_bead_in_the_bwrap_sandbox() {
    closes_a_bead_sandboxed(Cli::Claude, "bwrap");
}

#[test]
fn c11_6_codex_closes_a_bead_in_the_bwrap_sandbox() {
    closes_a_bead_sandboxed(Cli::Codex, "bwrap");
}
