//! A person's day-two commands: `beads`, `answer`, `retry`, `kill --requeue|--block`,
//! `logs`, `history` and `sessions`, against real ticks, real `braids worker` processes, a real
//! `br` and a scripted agent; and every error a person can run into.

use std::time::Duration;

use crate::support::{wait_for, Install, ReportExt, Sandbox};

/// The agent, by the bead's title in its prompt (`$2`):
/// - "Ask": asks which format until its prompt carries an answer, then does the work and keeps
///   the prompt it was given in `~/answered-prompt`;
/// - "Slow": prints a line and sleeps (for `kill` and `logs -f`);
/// - anything else: fails until `~/fixed` exists, then does the work.
const AGENT: &str = r#"
done_it() {
  mkdir -p "$(dirname "$1")"
  printf '# %s\n\n## Summary\n\nDid %s.\n' "$BRAIDS_BEAD" "$BRAIDS_BEAD" > "$1"
  printf 'status: pass\nsummary: did it\ntokens_in: 48000\ntokens_out: 3100\ncost_usd: 0.84\n' > "$BRAIDS_RESULT_FILE"
}
if grep -q 'Ask the person' "$2"; then
  if grep -q '^Answer: ' "$2"; then cp "$2" "$HOME/answered-prompt"; done_it "$1"; exit 0; fi
  printf 'status: needs_human\nreason: needs_clarification\nsummary: Should the API speak JSON or XML?\ncost_usd: 0.12\n' > "$BRAIDS_RESULT_FILE"
  exit 0
fi
if grep -q 'Slow work' "$2"; then
  echo "slow agent: step one of many"
  sleep 120
  exit 0
fi
if [ -e "$HOME/fixed" ]; then done_it "$1"; exit 0; fi
echo "tests fail: 3 of 40" >&2
exit 1
"#;

/// An installation whose workers run [`AGENT`]; a failed bead is retried `retries` times.
pub fn install(retries: u32) -> Sandbox {
    let sb = Install::new().build();
    let agent = sb.script("bin/agent", AGENT);
    sb.config(&format!(
        "[worker]\nexecutor = [{:?}, \"{{deliverable}}\", \"{{prompt_file}}\"]\nretries = {retries}\n",
        agent.display().to_string()
    ));
    sb
}

fn json(sb: &Sandbox, args: &[&str]) -> serde_json::Value {
    let out = sb.ok(args);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: {e}: {out}"))
}

pub fn workers_end(sb: &Sandbox) {
    wait_for("the workers to end", Duration::from_secs(120), || {
        sb.live_labels().is_empty().then_some(())
    });
}

fn bead_of<'a>(list: &'a serde_json::Value, id: &str) -> &'a serde_json::Value {
    list["beads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["id"] == id)
        .unwrap_or_else(|| panic!("{id} not in {list:#}"))
}

fn err(sb: &Sandbox, args: &[&str]) -> String {
    let out = sb.run(args);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn c9_2_a_question_is_shown_answered_and_the_answer_reaches_the_next_prompt() {
    let sb = install(1);
    let app = sb
        .new_project("app")
        .br()
        .titled(&["Ask the person about the API", "Build the parser"])
        .max_workers(2)
        .create();
    let (ask, build) = (app.beads[0].as_str(), app.beads[1].as_str());
    sb.tick().force().run();
    workers_end(&sb);

    // Both wait for a person, each for its own reason, and `beads` says which.
    let list = json(&sb, &["beads", "app", "--json"]);
    let q = bead_of(&list, ask);
    assert_eq!(q["status"], "blocked", "{list:#}");
    assert_eq!(q["in_scope"], true);
    assert_eq!(q["waiting"]["kind"], "question");
    assert_eq!(q["waiting"]["text"], "Should the API speak JSON or XML?");
    let b = bead_of(&list, build);
    assert_eq!(b["status"], "open", "failed once, retried: {list:#}");
    assert_eq!(b["attempts"], 1, "{list:#}");
    assert!(b.get("waiting").is_none(), "{list:#}");
    let text = sb.ok(&["beads", "app", "--status", "blocked"]);
    assert!(
        text.contains("question: Should the API speak JSON or XML?"),
        "{text}"
    );

    // `status` and STATUS.md list the question with its text and the command that answers it.
    let status = sb.ok(&["status"]);
    assert!(
        status.contains("- Questions waiting for an answer:")
            && status.contains(&format!(
                "  - {ask}: Should the API speak JSON or XML? (`braids answer app:{ask} \"…\"`)"
            )),
        "{status}"
    );
    let sj = json(&sb, &["status", "--json"]);
    let p = &sj["projects"][0];
    assert_eq!(p["waiting"][ask]["kind"], "question", "{p:#}");
    assert_eq!(
        p["iteration"]["name"], "001",
        "named, not positional: {p:#}"
    );
    assert_eq!(p["iteration"]["status"], "active", "{p:#}");
    assert_eq!(p["stories"][0]["id"], *ask, "{p:#}");
    assert_eq!(p["stories"][0]["status"], "blocked", "{p:#}");
    // A full run writes the same into STATUS.md; it also retries the failed bead, which fails
    // a second time and is blocked.
    sb.tick().force().run();
    let md = std::fs::read_to_string(sb.status_path()).unwrap();
    assert!(md.contains("Should the API speak JSON or XML?"), "{md}");
    workers_end(&sb);
    assert_eq!(sb.br_status("app", build), "blocked");

    // A bead that asked nothing cannot be answered; nor can an unknown one.
    let e = err(&sb, &["answer", build, "use JSON"]);
    assert!(
        e.contains("asked nothing: it is blocked because failed 2 times")
            && e.contains(&format!("`braids retry {build}`")),
        "{e}"
    );
    let e = err(&sb, &["answer", "app-nope", "use JSON"]);
    assert!(e.contains("no bead app-nope"), "{e}");

    // Answered by its id's ending: open again, with the answer in the tracker and the prompt.
    let suffix = ask.rsplit_once('-').unwrap().1;
    let out = sb.ok(&["answer", suffix, "JSON, always."]);
    assert!(out.contains("answered"), "{out}");
    assert_eq!(sb.br_status("app", ask), "open");
    let shown = sb.br("app", &["show", ask, "--json"]);
    assert!(shown.contains("JSON, always."), "{shown}");
    let r = sb.tick().force().run();
    assert!(
        r.spawned_beads().iter().any(|b| b == ask),
        "answered means spawned on the next run: {r:#?}"
    );
    workers_end(&sb);
    assert_eq!(sb.br_status("app", ask), "closed");
    let prompt = std::fs::read_to_string(sb.home().join("answered-prompt")).unwrap();
    assert!(
        prompt.contains("Question") && prompt.contains("Should the API speak JSON or XML?"),
        "{prompt}"
    );
    assert!(prompt.contains("Answer: JSON, always."), "{prompt}");

    // A retry forgets the failure and the next run spawns the bead, which now passes.
    std::fs::write(sb.home().join("fixed"), "").unwrap();
    let out = json(&sb, &["retry", build, "--json"]);
    assert_eq!(out["from"], "blocked", "{out:#}");
    let e = err(&sb, &["retry", ask]);
    assert!(e.contains("is closed"), "{e}");
    sb.tick().force().run();
    workers_end(&sb);
    assert_eq!(sb.br_status("app", build), "closed");

    // History, newest first, tells the story.
    let h = sb.ok(&["history", "app"]);
    let pos = |what: &str| {
        h.find(what)
            .unwrap_or_else(|| panic!("{what:?} not in history:\n{h}"))
    };
    assert!(
        pos("retried by a person") < pos("answered: JSON, always."),
        "{h}"
    );
    assert!(
        pos("answered: JSON, always.") < pos("asked: Should the API"),
        "{h}"
    );
    assert!(h.contains("completed"), "{h}");
    let hj = json(&sb, &["history", "--json", "--since", "1h"]);
    let kinds: Vec<&str> = hj
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds[..2],
        ["iteration_complete", "task_complete"],
        "newest first"
    );
    assert!(
        kinds.contains(&"answered") && kinds.contains(&"retried"),
        "{kinds:?}"
    );
}

#[test]
fn c9_3_kill_blocks_or_requeues_and_logs_follow_the_worker() {
    let sb = install(0);
    let app = sb
        .new_project("app")
        .br()
        .titled(&["Slow work one", "Slow work two"])
        .max_workers(2)
        .create();
    let (one, two) = (app.beads[0].as_str(), app.beads[1].as_str());
    sb.tick().force().run();
    wait_for("both agents to print", Duration::from_secs(60), || {
        let out = sb.ok(&["logs", one]);
        (out.contains("slow agent: step one") && sb.ok(&["logs", two]).contains("slow agent"))
            .then_some(())
    });

    // `sessions` shows elapsed time with its units, the title and the step.
    let s = sb.ok(&["sessions"]);
    assert!(
        s.contains("Slow work one") && s.contains("step coding"),
        "{s}"
    );
    assert!(regex_like_elapsed(&s), "elapsed like 12s or 1m02s: {s}");
    let sj = json(&sb, &["sessions", "--json"]);
    assert!(sj[0]["elapsed_seconds"].is_u64(), "{sj:#}");
    assert!(sj[0]["last_output_seconds"].is_u64(), "{sj:#}");

    // `logs -f` follows until the session ends: it ends when the kill does.
    let mut follow = sb.command(&["logs", "-f", one]);
    follow.stdout(std::process::Stdio::piped());
    let follower = follow.spawn().unwrap();

    let out = json(
        &sb,
        &["kill", one, "--block", "the approach is wrong", "--json"],
    );
    assert_eq!(out["then"], "blocked", "{out:#}");
    let followed = follower.wait_with_output().unwrap();
    assert!(followed.status.success(), "{followed:?}");
    assert!(
        String::from_utf8_lossy(&followed.stdout).contains("slow agent: step one"),
        "{followed:?}"
    );
    assert_eq!(sb.br_status("app", one), "blocked");
    let e = err(&sb, &["answer", one, "try again"]);
    assert!(
        e.contains("asked nothing: it is blocked because the approach is wrong")
            && e.contains("braids retry"),
        "{e}"
    );
    let list = json(&sb, &["beads", "app", "--json"]);
    let b = bead_of(&list, one);
    assert_eq!(b["waiting"]["text"], "the approach is wrong", "{list:#}");
    let events = sb.ok(&["events", "--json"]);
    assert!(
        events.lines().any(|l| l.contains("\"bead_blocked\"")
            && l.contains(&format!("\"bead\":\"{one}\""))
            && l.contains("the approach is wrong")),
        "a kill --block is a bead_blocked event: {events}"
    );
    assert!(
        bead_of(&list, two)["worker"]["session"].is_string(),
        "{list:#}"
    );

    // The other by its session label, requeued: open again, and spawned again.
    let label = format!("project:app:{two}");
    let out = sb.ok(&["kill", &label, "--requeue"]);
    assert!(out.contains("open again"), "{out}");
    assert_eq!(sb.br_status("app", two), "open");
    let r = sb.tick().force().run();
    assert_eq!(r.spawned_beads(), vec![two.to_string()], "{r:#?}");
    let e = err(&sb, &["kill", one]);
    assert!(e.contains("has no live worker"), "{e}");
    sb.ok(&["kill", two]);

    // A dead bead's log is still there to read.
    assert!(sb.ok(&["logs", one]).contains("slow agent"));
    let h = sb.ok(&["history"]);
    assert!(
        h.contains("killed by a person and blocked: the approach is wrong"),
        "{h}"
    );
    assert!(h.contains("killed by a person; requeued"), "{h}");
}

/// Whether the text has an elapsed time in braids' units (`42s`, `3m07s`, `1h02m13s`).
fn regex_like_elapsed(s: &str) -> bool {
    s.split_whitespace().any(|w| {
        let w = w.trim_end_matches('s');
        !w.is_empty()
            && w.chars()
                .all(|c| c.is_ascii_digit() || c == 'm' || c == 'h')
            && w.chars().next().unwrap().is_ascii_digit()
    })
}

#[test]
fn c9_1_ambiguous_unknown_and_paused_beads_are_refused_with_the_fix() {
    let sb = install(0);
    sb.new_project("app").ids(&["app-a1", "app-b2"]).create();
    sb.new_project("lib").ids(&["lib-a1"]).create();
    let e = err(&sb, &["retry", "a1"]);
    assert!(
        e.contains("a1 is ambiguous") && e.contains("app:app-a1") && e.contains("lib:lib-a1"),
        "{e}"
    );
    // The project named, or the whole id, settles it.
    let out = sb.ok(&["retry", "lib:a1"]);
    assert!(out.contains("lib-a1: was open"), "{out}");
    let e = err(&sb, &["retry", "zz9"]);
    assert!(e.contains("no bead zz9 in any registered project"), "{e}");
    let e = err(&sb, &["retry", "nope:a1"]);
    assert!(e.contains("no project named nope"), "{e}");
    let e = err(&sb, &["beads", "nope"]);
    assert!(e.contains("no project nope"), "{e}");
    let e = err(&sb, &["beads", "app", "--status", "sleeping"]);
    assert!(e.contains("not a bead status"), "{e}");
    let e = err(&sb, &["answer", "app-b2", "  "]);
    assert!(e.contains("the answer is empty"), "{e}");

    sb.ok(&["pause", "app"]);
    let e = err(&sb, &["retry", "app-a1"]);
    assert!(
        e.contains("project app is paused") && e.contains("braids resume app"),
        "{e}"
    );
    let list = json(&sb, &["beads", "app", "--json"]);
    assert_eq!(list["paused"], true);
    assert_eq!(list["beads"].as_array().unwrap().len(), 2);
    let e = err(&sb, &["kill", "app-a1"]);
    assert!(e.contains("has no live worker"), "{e}");
    let e = err(&sb, &["logs", "app-a1"]);
    assert!(e.contains("has no log"), "{e}");
    let h = sb.ok(&["history", "lib"]);
    assert!(h.contains("retried by a person (was open)"), "{h}");
}

#[test]
fn c9_4_costs_are_recorded_per_attempt_summed_and_a_daily_budget_stops_spawns_with_one_notice() {
    let sb = Install::new().build();
    let agent = sb.script(
        "bin/agent",
        r#"mkdir -p "$(dirname "$1")"
printf '# %s\n\n## Summary\n\nDid %s.\n' "$BRAIDS_BEAD" "$BRAIDS_BEAD" > "$1"
printf 'status: pass\nsummary: did it\ntokens_in: 12,000\ntokens_out: 800\ncost_usd: 0.60\n' > "$BRAIDS_RESULT_FILE"
"#,
    );
    let notified = sb.home().join("notified");
    let notifier = sb.script(
        "bin/notify",
        &format!("printf '%s|%s\\n' \"$1\" \"$2\" >> {:?}\n", notified),
    );
    sb.config(&format!(
        "[worker]\nexecutor = [{:?}, \"{{deliverable}}\"]\n[notify]\ncommand = [{:?}, \"{{event}}\", \"{{message}}\"]\n",
        agent.display().to_string(),
        notifier.display().to_string()
    ));
    let app = sb
        .new_project("app")
        .br()
        .beads(3)
        .channel("ops")
        .field("DailyBudget", "1 USD")
        .create();
    for _ in 0..2 {
        let r = sb.tick().force().run();
        assert_eq!(r.spawned_beads().len(), 1, "{r:#?}");
        workers_end(&sb);
    }
    // 1.20 USD spent: the budget is reached, the third bead waits for tomorrow.
    let r = sb.tick().force().run();
    assert!(r.spawned_beads().is_empty(), "{r:#?}");
    assert_eq!(
        r.idle_reason,
        Some(braids::tick::orchestrator_state::IdleReason::AllAtCapacity),
        "ready work waits as at capacity, checked again in 10 minutes: {r:#?}"
    );
    let status = sb.ok(&["status"]);
    assert!(
        status.contains("daily budget of 1.00 USD is reached"),
        "{status}"
    );
    let notes = std::fs::read_to_string(&notified).unwrap_or_default();
    let budget_notes: Vec<&str> = notes
        .lines()
        .filter(|l| l.contains("daily budget"))
        .collect();
    assert_eq!(budget_notes.len(), 1, "one notification: {notes}");
    assert!(budget_notes[0].starts_with("blocker|[app]"), "{notes}");

    let c = json(&sb, &["cost", "--json"]);
    assert_eq!(c["total"]["attempts"], 2, "{c:#}");
    assert_eq!(c["total"]["tokens_in"], 24_000, "{c:#}");
    assert!(
        (c["total"]["cost_usd"].as_f64().unwrap() - 1.2).abs() < 1e-9,
        "{c:#}"
    );
    assert_eq!(c["budgets"][0]["reached"], true, "{c:#}");
    let by_bead = json(&sb, &["cost", "--by", "bead", "--json", "--since", "1d"]);
    let keys: Vec<&str> = by_bead["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys.len(), 2, "{by_bead:#}");
    assert!(keys.iter().all(|k| k.starts_with("app:app-")), "{keys:?}");
    let text = sb.ok(&["cost", "--by", "day"]);
    assert!(
        text.contains("1.20 USD") && text.contains("budget app: 1.20 of 1.00 USD"),
        "{text}"
    );
    assert_eq!(sb.br_status("app", &app.beads[2]), "open");

    // A budget braids cannot read is a `braids check` error with its line.
    sb.set_field("app", "DailyBudget", "lots");
    let out = sb.run(&["check"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("PROJECT.md:")
            && text.contains("DailyBudget `lots` is not an amount in dollars"),
        "{text}"
    );
}

#[test]
fn c9_2_a_plan_waiting_for_review_is_approved_or_rejected_never_retried_unread() {
    let sb = install(0);
    std::fs::write(sb.home().join("fixed"), "").unwrap();
    let app = sb
        .new_project("app")
        .br()
        .titled(&["Migrate the invoices"])
        .field("Autonomy", "ask-first")
        .create();
    let bead = app.beads[0].as_str();
    sb.tick().force().run();
    workers_end(&sb);
    let list = json(&sb, &["beads", "app", "--json"]);
    assert_eq!(
        bead_of(&list, bead)["waiting"]["kind"],
        "approval",
        "{list:#}"
    );
    let status = sb.ok(&["status"]);
    assert!(
        status.contains("- Waiting for review:")
            && status.contains(&format!("braids approve app:{bead}")),
        "{status}"
    );
    // A retry would approve the plan unread: refused.
    let e = err(&sb, &["retry", bead]);
    assert!(
        e.contains("waits for a review of its plan") && e.contains("braids approve"),
        "{e}"
    );
    let e = err(&sb, &["reject", bead, "--reason", "  "]);
    assert!(e.contains("needs a reason"), "{e}");

    // Rejected: it stays blocked with the reason; a retry then asks for a new plan.
    let out = sb.ok(&["reject", bead, "--reason", "too broad: one table at a time"]);
    assert!(out.contains("stays blocked"), "{out}");
    assert_eq!(sb.br_status("app", bead), "blocked");
    let list = json(&sb, &["beads", "app", "--json"]);
    let w = &bead_of(&list, bead)["waiting"];
    assert_eq!(w["kind"], "blocked", "{list:#}");
    assert_eq!(w["text"], "plan rejected: too broad: one table at a time");
    let e = err(&sb, &["approve", bead]);
    assert!(e.contains("waits for no review"), "{e}");
    sb.ok(&["retry", bead]);
    sb.tick().force().run();
    workers_end(&sb);
    assert_eq!(sb.br_status("app", bead), "blocked", "asked again, not run");
    let list = json(&sb, &["beads", "app", "--json"]);
    assert_eq!(
        bead_of(&list, bead)["waiting"]["kind"],
        "approval",
        "{list:#}"
    );

    // Approved with a note: the next run does the work.
    let out = json(
        &sb,
        &["approve", bead, "--note", "one table at a time", "--json"],
    );
    assert_eq!(out["kind"], "approval", "{out:#}");
    assert_eq!(out["answer"], "Approved. one table at a time");
    let r = sb.tick().force().run();
    assert_eq!(r.spawned_beads(), vec![bead.to_string()], "{r:#?}");
    workers_end(&sb);
    assert_eq!(sb.br_status("app", bead), "closed");
}
