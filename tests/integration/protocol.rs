//! The protocol pipeline end to end: real ticks, real `braids worker` processes,
//! real `br`, real git with a bare upstream, and a scripted agent that reads each prompt and
//! writes HANDOFF.md. Three stories of one project under MaxWorkers 3:
//! - A walks all ten steps through a rejected review (needs_clarification → bdd, with a note
//!   that reaches one prompt), an impl that fails twice (the failing tests shown in the next
//!   prompt), a constitution_violation routed to sdd-delta, a post_check failure, a timeout
//!   the tick enforces, and lands;
//! - B fails bdd until it runs out of attempts and is blocked, a person told;
//! - C is `[L]`: its impl runs as a team of three roles at once, merged into one HANDOFF.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::support::{wait_for, Install, Sandbox};

/// The agent. Its prompt (`$1`) names the story, step, attempt and, in a team, its role; what
/// it does is looked up by the story's kind (`~/kinds/<story>`) and how often it ran that
/// step (`~/counts/<story>-<step>`). Every prompt is kept in `~/prompts/`.
const AGENT: &str = r##"
P="$1"
story=$(sed -n 's/^  story: //p' "$P" | head -1)
step=$(sed -n 's/^  step: //p' "$P" | head -1)
attempt=$(sed -n 's/^  attempt: //p' "$P" | head -1)
role=$(sed -n 's/^You are the \([a-z]*\) executor of a team.*/\1/p' "$P" | head -1)
kind=$(cat "$HOME/kinds/$story")
mkdir -p "$HOME/prompts" "$HOME/counts"
c="$HOME/counts/$story-$step${role:+-$role}"
n=$(( $(cat "$c" 2>/dev/null || echo 0) + 1 )); echo "$n" > "$c"
cp "$P" "$HOME/prompts/$story-$step-$n${role:+-$role}.md"
echo "$story $step attempt=$attempt n=$n role=$role" >> "$HOME/agent.log"
out=.ai/HANDOFF.md
[ -n "$role" ] && out=".ai/handoffs/$role.md"
handoff() { # status reason "files" tests_pass tests_fail "failing tests"
  mkdir -p "$(dirname "$out")"
  {
    echo ---; echo "story: $story"; echo "step: $step"; echo "attempt: $attempt"
    echo "status: $1"; echo "reason: $2"; echo "files_changed:"
    for f in $3; do echo "  - $f"; done
    echo "tests_pass: ${4:-0}"; echo "tests_fail: ${5:-0}"; echo "tests_skip: 0"
    if [ -n "$6" ]; then echo "failing_tests:"; for t in $6; do echo "  - $t"; done; fi
    echo ---; echo; echo "# HANDOFF — $story $step"; echo; echo "Done by the stand-in ($kind)."
  } > "$out"
}
write() { mkdir -p "$(dirname "$1")"; echo "$2" >> "$1"; }
case "$kind:$step" in
  B:bdd) handoff failing null "" 0 1 "bdd_test:TestScenarios"; exit 0 ;;
  *:bdd) write "docs/bdd/US-$story.md" "Feature: $story (n=$n)"; handoff pass null "docs/bdd/US-$story.md" ;;
  *:sdd-delta) write "docs/deltas/US-$story.md" "ADDED: $story"; handoff pass null "docs/deltas/US-$story.md" ;;
  *:contract) write "docs/api/US-$story.yaml" "# $story"; handoff pass null "docs/api/US-$story.yaml" ;;
  *:scaffold) write "tests/$story.txt" "red"; handoff failing null "tests/$story.txt" 0 3 ;;
  A:impl)
    case $n in
      1) handoff failing null src/a.rs 40 2 "cart_test:TestApplyCoupon cart_test:TestExpiry" ;;
      2) handoff failing null src/a.rs 41 1 "cart_test:TestExpiry" ;;
      3) handoff failing constitution_violation src/a.rs 41 1 ;;
      4) write src/a.rs "fn a() {}"; handoff pass null src/a.rs 42 0 ;;
      5) touch "$HOME/sleeping-$story"; sleep 300; exit 0 ;;
      *) write src/a.rs "fn a2() {}"; touch impl.ok; handoff pass null "src/a.rs impl.ok" 42 0 ;;
    esac ;;
  C:impl)
    write "src/$role.rs" "// $role"; write src/shared.rs "// $role"
    [ "$role" = test ] && touch impl.ok
    handoff pass null "src/$role.rs src/shared.rs" 10 0 ;;
  *:verify) handoff pass null "" 42 0 ;;
  *:update-memory) write PROJECT_MEMORY.md "NOW: $story done"; handoff pass null PROJECT_MEMORY.md 42 0 ;;
  *) handoff pass null "" ;;
esac
"##;

const RULES: &str = "\
steps:
  impl:
    post_check: [test, -f, impl.ok]
    team_roles:
      backend: {claude_reads: [docs/sdd.md], claude_writes: [\"src/*.rs\"]}
      frontend: {claude_reads: [docs/api/openapi.yaml], claude_writes: [\"src/*.rs\"]}
      test: {claude_reads: [\"docs/bdd/US-{story}.md\"], claude_writes: [\"tests/*\"]}
";

struct Story<'a> {
    sb: &'a Sandbox,
    root: PathBuf,
    id: String,
}

impl Story<'_> {
    fn state(&self) -> serde_json::Value {
        let p = self.root.join(format!(".ai/states/{}.json", self.id));
        serde_json::from_str(&std::fs::read_to_string(&p).unwrap_or_else(|_| "{}".into())).unwrap()
    }

    fn at(&self) -> (String, String) {
        let s = self.state();
        (
            s["step"].as_str().unwrap_or("").to_string(),
            s["status"].as_str().unwrap_or("").to_string(),
        )
    }

    fn prompts(&self) -> BTreeMap<String, String> {
        let dir = self.sb.home().join("prompts");
        std::fs::read_dir(&dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| {
                e.file_name()
                    .to_string_lossy()
                    .starts_with(&format!("{}-", self.id))
            })
            .map(|e| {
                (
                    e.file_name().to_string_lossy().into_owned(),
                    std::fs::read_to_string(e.path()).unwrap(),
                )
            })
            .collect()
    }

    fn prompt(&self, step: &str, n: u32) -> String {
        let f = self
            .sb
            .home()
            .join(format!("prompts/{}-{step}-{n}.md", self.id));
        std::fs::read_to_string(&f).unwrap_or_else(|_| panic!("no prompt {}", f.display()))
    }
}

fn notes(sb: &Sandbox) -> Vec<String> {
    std::fs::read_to_string(sb.home().join("notified.txt"))
        .unwrap_or_default()
        .lines()
        .map(String::from)
        .collect()
}

fn setup() -> (Sandbox, PathBuf, Vec<String>) {
    let sb = Install::new().build();
    let agent = sb.script("bin/agent", AGENT);
    let notifier = sb.script(
        "bin/notify",
        &format!(
            "printf '%s|%s\\n' \"$1\" \"$2\" >> {}",
            sb.home().join("notified.txt").display()
        ),
    );
    sb.config(&format!(
        "[worker]\nexecutor = [{:?}, \"{{prompt_file}}\"]\n\
         [notify]\ncommand = [{:?}, \"{{event}}\", \"{{message}}\"]\n\
         [sessions]\nclaim_grace_secs = 5\n",
        agent.display().to_string(),
        notifier.display().to_string()
    ));
    let app = sb
        .new_project("app")
        .br()
        .titled(&["Checkout flow", "Flaky importer", "[L] Payments"])
        .max_workers(3)
        .channel("#app")
        .field("Pipeline", "protocol")
        .create();
    let root = app.root.clone();
    std::fs::create_dir_all(root.join(".ai")).unwrap();
    std::fs::write(root.join(".ai/step-rules.yaml"), RULES).unwrap();
    // A bare upstream, so each landing is pushed.
    let bare = sb.home().join("upstream.git");
    sb.git(sb.home(), &["init", "-q", "--bare", bare.to_str().unwrap()]);
    sb.git(&root, &["add", "-A"]);
    sb.git(
        &root,
        &["commit", "-qm", "protocol project", "--allow-empty"],
    );
    sb.git(&root, &["remote", "add", "origin", bare.to_str().unwrap()]);
    sb.git(&root, &["push", "-q", "-u", "origin", "HEAD"]);
    std::fs::create_dir_all(sb.home().join("kinds")).unwrap();
    for (id, kind) in app.beads.iter().zip(["A", "B", "C"]) {
        std::fs::write(sb.home().join("kinds").join(id), kind).unwrap();
    }
    (sb, root, app.beads)
}

/// Waits until no worker runs, or A's agent sleeps in the step the tick will time out.
fn settle(sb: &Sandbox, sleeping: &Path) {
    wait_for("the workers to end", Duration::from_secs(180), || {
        (sb.live_labels().is_empty() || sleeping.exists()).then_some(())
    });
}

#[test]
fn c10_1_three_stories_walk_the_protocol_in_parallel() {
    let (sb, root, ids) = setup();
    let story = |i: usize| Story {
        sb: &sb,
        root: root.clone(),
        id: ids[i].clone(),
    };
    let (a, b, c) = (story(0), story(1), story(2));
    let sleeping = sb.home().join(format!("sleeping-{}", a.id));
    let note = "Coupons expire at midnight UTC";

    // The first run starts all three: three slots, three single-executor sessions.
    let first = sb.tick().force().run();
    let mut spawned = first
        .spawns
        .iter()
        .map(|s| s.bead.to_string())
        .collect::<Vec<_>>();
    spawned.sort();
    let mut all = ids.clone();
    all.sort();
    assert_eq!(spawned, all, "{first:#?}");

    // A tick; when C waits at its team step, whether that tick spawned it, with how many
    // others, and how many workers ran before.
    let tick = |team_spawn: &mut Option<(usize, usize)>| {
        let c_waits_as_team = c.at() == ("impl".into(), "pending".into());
        let live_before = sb.live_labels().len();
        let r = sb.tick().force().run();
        if c_waits_as_team && r.spawns.iter().any(|s| s.bead.as_str() == c.id) {
            // a worker this tick killed as a zombie held no slot
            *team_spawn = Some((r.spawns.len(), live_before - r.zombies.len()));
        }
        r
    };
    let mut reviews = 0;
    let mut timed_out = false;
    let mut team_spawn = None;
    for round in 0..80 {
        settle(&sb, &sleeping);
        if sleeping.exists() && !timed_out {
            // A's impl runs long: its step started an hour ago, as far as the tick can tell.
            let p = root.join(format!(".ai/states/{}.json", a.id));
            let mut s: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
            assert_eq!(
                (s["step"].as_str(), s["status"].as_str()),
                (Some("impl"), Some("running"))
            );
            let hour_ago = (chrono::Utc::now() - chrono::Duration::hours(1)).to_rfc3339();
            s["dispatched_at"] = hour_ago.into();
            std::fs::write(&p, serde_json::to_string_pretty(&s).unwrap()).unwrap();
            let r = tick(&mut team_spawn);
            let killed: Vec<String> = r
                .zombies
                .iter()
                .map(|z| format!("{} {}", z.label, z.reason))
                .collect();
            assert!(
                killed
                    .iter()
                    .any(|k| k.contains(&a.id) && k.ends_with("step-timeout")),
                "{r:#?}"
            );
            assert_eq!(a.at(), ("impl".into(), "timeout".into()));
            assert!(a.state()["last_error"]
                .as_str()
                .unwrap()
                .contains("timeout"));
            std::fs::remove_file(&sleeping).unwrap();
            timed_out = true;
            wait_for("the killed worker to go", Duration::from_secs(60), || {
                (!sb.live_labels().iter().any(|l| l.contains(&a.id))).then_some(())
            });
            continue;
        }
        for s in [&a, &c] {
            if s.at() == ("review".into(), "needs_human".into()) {
                reviews += 1;
                let out = if s.id == a.id && reviews == 1 {
                    sb.ok(&[
                        "review",
                        "reject",
                        "app",
                        &s.id,
                        "--reason",
                        "needs_clarification",
                        "--note",
                        note,
                    ])
                } else {
                    sb.ok(&["review", "approve", "app", &s.id])
                };
                assert!(out.contains("app"), "{out}");
            }
        }
        if a.at().0 == "done" && c.at().0 == "done" && sb.br_status("app", &b.id) == "blocked" {
            break;
        }
        if round == 79 {
            let logs = |id: &str| sb.run(&["logs", id]);
            panic!(
                "stuck: A {:?}, B {:?}, C {:?}\n{}\nA: {}\nB: {}",
                a.at(),
                b.at(),
                c.at(),
                sb.ok(&["status"]),
                String::from_utf8_lossy(&logs(&a.id).stdout),
                String::from_utf8_lossy(&logs(&b.id).stdout)
            );
        }
        tick(&mut team_spawn);
    }
    wait_for("the last workers to end", Duration::from_secs(120), || {
        sb.live_labels().is_empty().then_some(())
    });

    // A: every step, in order, with its detours.
    let log = std::fs::read_to_string(sb.home().join("agent.log")).unwrap();
    let a_steps: Vec<&str> = log
        .lines()
        .filter(|l| l.starts_with(&a.id))
        .map(|l| l.split(' ').nth(1).unwrap())
        .collect();
    assert_eq!(
        a_steps,
        [
            "bdd",
            "sdd-delta",
            "contract", // review rejected
            "bdd",
            "sdd-delta",
            "contract", // review approved
            "scaffold",
            "impl",
            "impl",
            "impl", // failing, failing, constitution_violation
            "sdd-delta",
            "contract", // review approved
            "scaffold",
            "impl",
            "impl",
            "impl", // post_check failure, timeout, pass
            "verify",
            "update-memory",
        ],
        "{log}"
    );
    // The failing tests of attempt 1 reach attempt 2, and attempt 2's reach attempt 3.
    let p2 = a.prompt("impl", 2);
    assert!(p2.contains("(Attempt 2 of 5)"), "{p2}");
    assert!(
        p2.contains("- cart_test:TestApplyCoupon\n- cart_test:TestExpiry"),
        "{p2}"
    );
    let p3 = a.prompt("impl", 3);
    assert!(
        p3.contains("- cart_test:TestExpiry") && !p3.contains("TestApplyCoupon"),
        "{p3}"
    );
    // The routed sdd-delta starts at attempt 1.
    assert!(
        !a.prompt("sdd-delta", 3).contains("Attempt"),
        "routed: attempt 1"
    );
    // The post_check failure and the timeout reach the next prompts as the last error.
    assert!(
        a.prompt("impl", 5).contains("post_check failed"),
        "{}",
        a.prompt("impl", 5)
    );
    assert!(
        a.prompt("impl", 6).contains("timeout"),
        "{}",
        a.prompt("impl", 6)
    );
    assert!(a.prompt("impl", 6).contains("(Attempt 3 of 5)"));
    // The note of the rejection reaches exactly one prompt: the next one.
    let with_note: Vec<String> = a
        .prompts()
        .into_iter()
        .filter(|(_, p)| p.contains(note))
        .map(|(f, _)| f)
        .collect();
    assert_eq!(with_note, [format!("{}-bdd-2.md", a.id)], "the note, once");
    assert!(a
        .prompt("bdd", 2)
        .contains(&format!("=== Human Instruction ===\n{note}\n")));
    // update-memory is told the results.
    let um = a.prompt("update-memory", 1);
    assert!(
        um.contains("- tests: 42 pass, 0 fail, 0 skip") && um.contains("- commit: "),
        "{um}"
    );

    // A landed: closed, one commit on the project's branch, pushed, its state done with the
    // landed commit, and no story file in any commit.
    let sa = a.state();
    assert_eq!(
        (sa["step"].as_str(), sa["status"].as_str()),
        (Some("done"), Some("pass"))
    );
    assert_eq!(sb.br_status("app", &a.id), "closed");
    let upstream = sb.git(&sb.home().join("upstream.git"), &["log", "--format=%H %s"]);
    let landed = sa["commit_hash"].as_str().unwrap();
    assert!(upstream.contains(landed), "{upstream}");
    assert!(
        upstream.contains(&format!("{landed} Checkout flow ({})", a.id)),
        "one landing commit, titled by the story: {upstream}"
    );
    let files = sb.git(&root, &["log", "--name-only", "--format="]);
    assert!(
        files.contains("src/a.rs") && files.contains(&format!("docs/bdd/US-{}.md", a.id)),
        "{files}"
    );
    assert!(
        !files.contains(".ai/states"),
        "story files are never committed: {files}"
    );
    assert!(!files.contains(".ai/HANDOFF.md"), "{files}");
    let history = std::fs::read_to_string(root.join(".ai/history.md")).unwrap();
    assert!(history.contains(&format!("{} impl", a.id)), "{history}");
    let deliverables = sb.git(&root, &["ls-files", ".braids/iterations"]);
    assert!(
        deliverables.contains(&a.id[a.id.len() - 3..]),
        "{deliverables}"
    );

    // B: three attempts at bdd, then blocked with a blocker notification.
    let b_runs = log
        .lines()
        .filter(|l| l.starts_with(&format!("{} bdd", b.id)))
        .count();
    assert_eq!(b_runs, 3, "{log}");
    assert_eq!(sb.br_status("app", &b.id), "blocked");
    let told = notes(&sb);
    assert!(
        told.iter().any(|n| n.starts_with("blocker|")
            && n.contains(&b.id)
            && n.contains("stuck at bdd after 3 attempts")),
        "{told:#?}"
    );
    // A's timeout was told too, and every review was asked as a question naming what to read.
    assert!(
        told.iter()
            .any(|n| n.starts_with("blocker|") && n.contains(&a.id) && n.contains("timeout")),
        "{told:#?}"
    );
    assert!(
        told.iter()
            .any(|n| n.starts_with("question|") && n.contains(&format!("docs/bdd/US-{}.md", a.id))),
        "{told:#?}"
    );

    // C: impl ran as a team of three at once, alone in the project's three slots.
    for role in ["backend", "frontend", "test"] {
        assert!(
            log.contains(&format!("{} impl attempt=1 n=1 role={role}", c.id)),
            "{log}"
        );
    }
    let (spawned_with, live_before) = team_spawn.expect("C's team step was spawned by a tick");
    assert_eq!(spawned_with, 1, "the team took every slot");
    assert_eq!(live_before, 0, "three slots free at once");
    assert_eq!(c.at(), ("done".into(), "pass".into()));
    assert_eq!(sb.br_status("app", &c.id), "closed");
    let files = sb.git(&root, &["log", "--name-only", "--format="]);
    assert!(
        files.contains("src/backend.rs") && files.contains("src/frontend.rs"),
        "{files}"
    );
    // Each role had its own prompt and handoff file; the three all wrote src/shared.rs, and
    // the merged handoff, archived in the history that landed, says so.
    let role_prompt = std::fs::read_to_string(
        sb.home()
            .join(format!("prompts/{}-impl-1-frontend.md", c.id)),
    )
    .unwrap();
    assert!(
        role_prompt.contains("You are the frontend executor of a team")
            && role_prompt.contains(".ai/handoffs/frontend.md"),
        "{role_prompt}"
    );
    let history = std::fs::read_to_string(root.join(".ai/history.md")).unwrap();
    assert!(
        history.contains("- src/shared.rs: written by backend and frontend and test"),
        "{history}"
    );
    assert!(
        history.contains(&format!("{} impl attempt 1 — pass", c.id)),
        "{history}"
    );

    // STATUS.md lists the blocked story with what it waits for.
    let md = std::fs::read_to_string(sb.status_path()).unwrap();
    assert!(
        md.contains(&format!(
            "  - {}: bdd (failing), attempt 3 of 3; waits for a person: stuck after 3 attempts",
            b.id
        )),
        "{md}"
    );
}

#[test]
fn c10_3_a_bad_rules_file_is_a_check_error_and_holds_only_its_project() {
    let (sb, root, ids) = setup();
    let other = sb.new_project("web").br().titled(&["Plain bead"]).create();
    std::fs::write(
        root.join(".ai/step-rules.yaml"),
        "steps:\n  impl:\n    post_check: \"go vet ./...\"\n  implement:\n    max_attempts: 2\n",
    )
    .unwrap();
    let out = sb.run(&["check"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        text.contains("step-rules.yaml:3") && text.contains("is a plain string"),
        "{text}"
    );
    assert!(
        text.contains("step-rules.yaml:4") && text.contains("unknown step `implement`"),
        "{text}"
    );
    // the tick claims nothing for it, and goes on with the other project
    let r = sb.tick().force().run();
    let spawned: Vec<String> = r.spawns.iter().map(|s| s.bead.to_string()).collect();
    assert_eq!(spawned, [other.beads[0].clone()], "{r:#?}");
    for id in &ids {
        assert_eq!(sb.br_status("app", id), "open");
    }
    let status = sb.ok(&["status"]);
    assert!(status.contains(".ai/step-rules.yaml:3:"), "{status}");
    // an unknown pipeline is named with its line
    sb.set_field("web", "Pipeline", "waterfall");
    let out = sb.run(&["check"]);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        text.contains("`Pipeline: waterfall` is not a pipeline"),
        "{text}"
    );
}

#[test]
fn c10_8_a_person_drives_a_story_by_hand() {
    let (sb, root, ids) = setup();
    let a = Story {
        sb: &sb,
        root: root.clone(),
        id: ids[0].clone(),
    };
    // Not started: show says so and what to do.
    let shown: serde_json::Value =
        serde_json::from_str(&sb.ok(&["story", "show", "app", &a.id, "--json"])).unwrap();
    assert_eq!(shown["next"], "not_started", "{shown:#}");
    assert_eq!(shown["next_step"], "bdd");
    sb.ok(&["story", "start", "app", &a.id]);
    let shown: serde_json::Value =
        serde_json::from_str(&sb.ok(&["story", "show", "app", &a.id, "--json"])).unwrap();
    assert_eq!(
        (shown["next"].as_str(), shown["next_step"].as_str()),
        (Some("dispatched"), Some("bdd"))
    );
    assert!(
        shown["caller_instruction"]
            .as_str()
            .unwrap()
            .contains(&format!("braids story dispatch app {}", a.id)),
        "{shown:#}"
    );
    // Level 1: one step in the foreground, then the story waits for the tick (or the next
    // dispatch by hand) with its bead open.
    sb.ok(&["story", "note", "app", &a.id, "Write it in Gherkin"]);
    let out = sb.ok(&["story", "dispatch", "app", &a.id]);
    assert!(out.contains("handed back"), "{out}");
    assert_eq!(a.at(), ("sdd-delta".into(), "pending".into()));
    assert_eq!(sb.br_status("app", &a.id), "open");
    assert!(a.prompt("bdd", 1).contains("Write it in Gherkin"));
    let log = std::fs::read_to_string(sb.home().join("agent.log")).unwrap();
    assert_eq!(log.lines().count(), 1, "exactly one step ran: {log}");
    let sj: serde_json::Value = serde_json::from_str(&sb.ok(&["status", "--json"])).unwrap();
    let line = &sj["projects"][0]["protocol"][0];
    assert_eq!(
        (
            line["bead"].as_str(),
            line["step"].as_str(),
            line["status"].as_str()
        ),
        (Some(a.id.as_str()), Some("sdd-delta"), Some("pending")),
        "{sj:#}"
    );
    // Errors a person can make, each with the fix.
    let e = sb.run(&["review", "approve", "app", &a.id]);
    assert_eq!(e.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&e.stderr).contains("waits for no review"));
    let e = sb.run(&["review", "reject", "app", &a.id, "--reason", "flaky"]);
    assert!(String::from_utf8_lossy(&e.stderr).contains("not a reason; use one of"));
    let e = sb.run(&["story", "reset", "app", &a.id, "--step", "deploy"]);
    assert!(String::from_utf8_lossy(&e.stderr).contains("not a step to reset to"));
    sb.ok(&[
        "report-error",
        "app",
        &a.id,
        "the executor's API key expired",
    ]);
    assert_eq!(
        a.state()["last_error"].as_str(),
        Some("the executor's API key expired")
    );
    // A running story is not restarted without --force, nor a done one.
    let p = root.join(format!(".ai/states/{}.json", a.id));
    let mut s = a.state();
    s["status"] = "running".into();
    s["dispatched_at"] = chrono::Utc::now().to_rfc3339().into();
    std::fs::write(&p, serde_json::to_string(&s).unwrap()).unwrap();
    let e = sb.run(&["story", "start", "app", &a.id]);
    assert!(
        String::from_utf8_lossy(&e.stderr).contains("add --force"),
        "{e:?}"
    );
    sb.ok(&["story", "start", "app", &a.id, "--force"]);
    assert_eq!(a.at(), ("bdd".into(), "pending".into()));
    let mut s = a.state();
    s["step"] = "done".into();
    s["status"] = "pass".into();
    std::fs::write(&p, serde_json::to_string(&s).unwrap()).unwrap();
    let e = sb.run(&["story", "start", "app", &a.id]);
    assert!(
        !e.status.success()
            && String::from_utf8_lossy(&e.stderr).contains(&format!(
                "{} is done; add --force to restart it anyway",
                a.id
            )),
        "{e:?}"
    );
    assert_eq!(a.at(), ("done".into(), "pass".into()), "left as it was");
    sb.ok(&["story", "start", "app", &a.id, "--force"]);
    assert_eq!(a.at(), ("bdd".into(), "pending".into()));
    // A hand-edited file with a value braids does not know holds the story, named.
    std::fs::write(&p, r#"{"step": "impl", "status": "passing"}"#).unwrap();
    let e = sb.run(&["story", "show", "app", &a.id]);
    let err = String::from_utf8_lossy(&e.stderr);
    assert!(
        err.contains(&format!(
            ".ai/states/{}.json: field `status` is `passing`",
            a.id
        )),
        "{err}"
    );
    let out = sb.run(&["check"]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("(the story is held)"),
        "{out:?}"
    );
}

#[test]
fn c10_6_a_stop_during_a_team_step_ends_every_role() {
    let sb = Install::new().build();
    let agent = sb.script(
        "bin/agent",
        &format!(
            "role=$(sed -n 's/^You are the \\([a-z]*\\) executor of a team.*/\\1/p' \"$1\" | head -1)\n\
             echo $$ > {}/pid-$role\nexec sleep 300\n",
            sb.home().display()
        ),
    );
    sb.config(&format!(
        "[worker]\nexecutor = [{:?}, \"{{prompt_file}}\"]\n[sessions]\nkill_grace_secs = 5\n",
        agent.display().to_string()
    ));
    let app = sb
        .new_project("app")
        .br()
        .titled(&["[L] Big story"])
        .max_workers(2)
        .field("Pipeline", "protocol")
        .create();
    std::fs::create_dir_all(app.root.join(".ai")).unwrap();
    std::fs::write(
        app.root.join(".ai/step-rules.yaml"),
        "steps:\n  bdd:\n    team_roles:\n      writer: {}\n      reviewer: {}\n",
    )
    .unwrap();
    let r = sb.tick().force().run();
    assert_eq!(r.spawns.len(), 1, "{r:#?}");
    let pids: Vec<i32> = wait_for("both roles to run", Duration::from_secs(60), || {
        let read = |role: &str| {
            std::fs::read_to_string(sb.home().join(format!("pid-{role}")))
                .ok()?
                .trim()
                .parse()
                .ok()
        };
        Some(vec![read("writer")?, read("reviewer")?])
    });
    // The bead is closed by hand: the tick stops the session, and every role's agent goes.
    sb.br("app", &["close", &app.beads[0], "--reason", "not needed"]);
    let r = sb.tick().force().run();
    assert_eq!(r.zombies.len(), 1, "{r:#?}");
    wait_for("every role's agent to end", Duration::from_secs(30), || {
        pids.iter()
            .all(|p| nix::sys::signal::kill(nix::unistd::Pid::from_raw(*p), None).is_err())
            .then_some(())
    });
}
