//! A protocol story keeps the bead pipeline's rules (CONTRACTS 10.13), asks a person when its
//! executor asks at any step (10.14), and a team's verification runs after the implementers'
//! merge (10.6): real ticks, real `braids worker` processes, real `br`, real git with a bare
//! upstream, and a scripted agent that writes HANDOFF.md.

use std::path::PathBuf;
use std::time::Duration;

use crate::support::{wait_for, Install, Sandbox};

/// The agent: what it does is looked up by `~/kind` and how often it ran the step; every
/// prompt is kept in `~/prompts/`, and every run's start and end (ns) in `~/agent.log`.
const AGENT: &str = r##"
P="$1"
story=$(sed -n 's/^  story: //p' "$P" | head -1)
step=$(sed -n 's/^  step: //p' "$P" | head -1)
attempt=$(sed -n 's/^  attempt: //p' "$P" | head -1)
role=$(sed -n 's/^You are the \([a-z]*\) executor of a team.*/\1/p' "$P" | head -1)
kind=$(cat "$HOME/kind")
mkdir -p "$HOME/prompts" "$HOME/counts"
c="$HOME/counts/$step${role:+-$role}"
n=$(( $(cat "$c" 2>/dev/null || echo 0) + 1 )); echo "$n" > "$c"
cp "$P" "$HOME/prompts/$step-$n${role:+-$role}.md"
echo "start $step ${role:-single} attempt=$attempt $(date +%s%N)" >> "$HOME/agent.log"
out=.ai/HANDOFF.md
[ -n "$role" ] && out=".ai/handoffs/$role.md"
handoff() { # status reason summary "files"
  mkdir -p "$(dirname "$out")"
  {
    echo ---; echo "story: $story"; echo "step: $step"; echo "attempt: $attempt"
    echo "status: $1"; echo "reason: $2"; echo "summary: $3"; echo "files_changed:"
    for f in $4; do echo "  - $f"; done
    echo "tests_pass: 1"; echo "tests_fail: 0"; echo "tests_skip: 0"
    echo ---; echo; echo "# HANDOFF — $story $step"
  } > "$out"
}
write() { mkdir -p "$(dirname "$1")"; echo "$2" >> "$1"; }
case "$kind:$step:$n" in
  guard:sdd-delta:*) handoff needs_human guardrail_conflict "Never touch the billing schema" ;;
  ask:sdd-delta:1) handoff needs_human needs_clarification "Should coupons stack?" ;;
  team:impl:*) sleep 2; write "src/$role.rs" "// $role"; handoff pass null "" "src/$role.rs" ;;
  research:impl:*) write src/code.rs "fn code() {}"; handoff pass null "" src/code.rs ;;
  *) handoff pass null "" ;;
esac
echo "end $step ${role:-single} attempt=$attempt $(date +%s%N)" >> "$HOME/agent.log"
"##;

struct Setup {
    sb: Sandbox,
    root: PathBuf,
    bead: String,
    bare: PathBuf,
}

impl Setup {
    /// One protocol project with one story titled `title`, the agent running as `kind`.
    fn new(kind: &str, title: &str, fields: &[(&str, &str)]) -> Setup {
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
        std::fs::write(sb.home().join("kind"), kind).unwrap();
        let mut p = sb
            .new_project("app")
            .br()
            .titled(&[title])
            .max_workers(3)
            .channel("#app")
            .field("Pipeline", "protocol");
        for (k, v) in fields {
            p = p.field(k, v);
        }
        let app = p.create();
        let root = app.root.clone();
        let bare = sb.home().join("upstream.git");
        sb.git(sb.home(), &["init", "-q", "--bare", bare.to_str().unwrap()]);
        sb.git(&root, &["add", "-A"]);
        sb.git(
            &root,
            &["commit", "-qm", "protocol project", "--allow-empty"],
        );
        sb.git(&root, &["remote", "add", "origin", bare.to_str().unwrap()]);
        sb.git(&root, &["push", "-q", "-u", "origin", "HEAD"]);
        let bead = app.beads[0].clone();
        Setup {
            sb,
            root,
            bead,
            bare,
        }
    }

    fn state(&self) -> serde_json::Value {
        let p = self.root.join(format!(".ai/states/{}.json", self.bead));
        serde_json::from_str(&std::fs::read_to_string(p).unwrap_or_else(|_| "{}".into())).unwrap()
    }

    fn at(&self) -> (String, String, u64) {
        let s = self.state();
        (
            s["step"].as_str().unwrap_or("").into(),
            s["status"].as_str().unwrap_or("").into(),
            s["attempt"].as_u64().unwrap_or(0),
        )
    }

    fn prompt(&self, name: &str) -> String {
        let f = self.sb.home().join(format!("prompts/{name}.md"));
        std::fs::read_to_string(&f).unwrap_or_else(|_| panic!("no prompt {}", f.display()))
    }

    fn agent_log(&self) -> Vec<String> {
        std::fs::read_to_string(self.sb.home().join("agent.log"))
            .unwrap_or_default()
            .lines()
            .map(String::from)
            .collect()
    }

    fn notes(&self) -> Vec<String> {
        std::fs::read_to_string(self.sb.home().join("notified.txt"))
            .unwrap_or_default()
            .lines()
            .map(String::from)
            .collect()
    }

    fn events(&self) -> Vec<serde_json::Value> {
        self.sb
            .ok(&["events", "--project", "app", "--json"])
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// One tick, then until its workers end.
    fn tick(&self) -> usize {
        let r = self.sb.tick().force().run();
        wait_for("the workers to end", Duration::from_secs(180), || {
            self.sb.live_labels().is_empty().then_some(())
        });
        r.spawns.len()
    }

    fn bead_status(&self) -> String {
        self.sb.br_status("app", &self.bead)
    }
}

#[test]
fn c10_13_a_story_keeps_the_guardrails_and_the_context_order_of_a_bead() {
    let t = Setup::new("guard", "Checkout", &[]);
    let md = t.root.join(".braids/PROJECT.md");
    let mut text = std::fs::read_to_string(&md).unwrap();
    text.push_str("\n## Guardrails\n\n- Never touch the billing schema.\n");
    std::fs::write(&md, text).unwrap();
    std::fs::write(t.root.join("AGENTS.md"), "AGENTS-MARKER: use tabs.\n").unwrap();
    t.sb.git(&t.root, &["add", "-A"]);
    t.sb.git(&t.root, &["commit", "-qm", "guardrails"]);
    assert_eq!(t.tick(), 1);
    // the step's prompt: PROJECT.md (its guardrail), then AGENTS.md, then the step
    let p = t.prompt("bdd-1");
    let at = |needle: &str| p.find(needle).unwrap_or_else(|| panic!("{needle} in {p}"));
    assert!(at("Never touch the billing schema.") < at("AGENTS-MARKER"));
    assert!(at(".braids/PROJECT.md") < at("AGENTS-MARKER"));
    assert!(at("AGENTS-MARKER") < at("# Your step"));
    assert!(at("# Your step") < at("You are executing step BDD"));
    assert!(p.contains("reason: guardrail_conflict"), "{p}");
    // sdd-delta's executor reported a conflict: blocked at once, named, a person told
    assert_eq!(t.bead_status(), "blocked");
    let reason = t.sb.br_show("app", &t.bead).to_string();
    assert!(
        reason.contains("guardrail conflict: Never touch the billing schema"),
        "{reason}"
    );
    assert!(
        t.notes().iter().any(|n| n.starts_with("blocker|")
            && n.contains("guardrail conflict: Never touch the billing schema")),
        "{:?}",
        t.notes()
    );
    assert!(
        t.events().iter().any(|e| e["type"] == "bead_blocked"
            && e["reason"]
                .as_str()
                .is_some_and(|r| r.contains("guardrail conflict"))),
        "{:?}",
        t.events()
    );
    // never retried: the next tick runs nothing
    assert_eq!(t.tick(), 0);
    let runs = t.agent_log();
    assert_eq!(
        runs.iter()
            .filter(|l| l.starts_with("start sdd-delta"))
            .count(),
        1,
        "{runs:?}"
    );
}

#[test]
fn c10_13_a_research_only_story_lands_only_its_deliverable() {
    let t = Setup::new("research", "Survey", &[("Autonomy", "research-only")]);
    t.sb.ok(&["story", "reset", "app", &t.bead, "--step", "impl"]);
    for _ in 0..3 {
        if t.bead_status() == "closed" {
            break;
        }
        t.tick();
    }
    assert_eq!(t.bead_status(), "closed", "{:?}", t.at());
    assert!(t.prompt("impl-1").contains("Research only"));
    let landed = t.sb.git(&t.bare, &["ls-tree", "-r", "--name-only", "HEAD"]);
    assert!(
        !landed.contains("src/code.rs") && !landed.contains("PROJECT_MEMORY.md"),
        "{landed}"
    );
    assert!(
        landed
            .lines()
            .any(|l| l.starts_with(".braids/iterations/001/")
                && l.ends_with(".md")
                && l.contains(t.bead.trim_start_matches("app-"))),
        "{landed}"
    );
}

#[test]
fn c10_13_an_ask_first_story_waits_for_approval_once() {
    let t = Setup::new("plain", "Checkout", &[("Autonomy", "ask-first")]);
    t.tick();
    assert!(t.agent_log().is_empty(), "nothing runs before approval");
    assert_eq!(t.bead_status(), "blocked");
    let asked = |t: &Setup| {
        t.notes()
            .iter()
            .filter(|n| n.starts_with("question|") && n.contains("Approval needed"))
            .count()
    };
    assert_eq!(asked(&t), 1, "{:?}", t.notes());
    t.sb.ok(&["approve", &format!("app:{}", t.bead)]);
    t.tick();
    assert_eq!(
        t.at(),
        ("review".into(), "needs_human".into(), 1),
        "{:?}",
        t.agent_log()
    );
    // the story's later sessions go on under the one approval
    t.sb.ok(&["review", "approve", "app", &t.bead]);
    for _ in 0..3 {
        if t.bead_status() == "closed" {
            break;
        }
        t.tick();
    }
    assert_eq!(t.bead_status(), "closed", "{:?}", t.at());
    assert_eq!(asked(&t), 1, "{:?}", t.notes());
}

#[test]
fn c10_14_a_question_at_a_step_asks_a_person_and_the_answer_resumes_it() {
    let t = Setup::new("ask", "Coupons", &[]);
    assert_eq!(t.tick(), 1);
    assert_eq!(t.at(), ("sdd-delta".into(), "needs_human".into(), 1));
    assert!(
        t.notes().iter().any(|n| n.starts_with("question|")
            && n.contains("Should coupons stack?")
            && n.contains("braids answer")),
        "{:?}",
        t.notes()
    );
    assert!(
        t.events().iter().any(|e| e["type"] == "question"
            && e["message"]
                .as_str()
                .is_some_and(|m| m.contains("Should coupons stack?"))),
        "{:?}",
        t.events()
    );
    // it holds its claim and no slot: nothing is spawned while it waits
    assert_eq!(t.bead_status(), "in_progress");
    assert_eq!(t.tick(), 0);
    let out =
        t.sb.ok(&["answer", &format!("app:{}", t.bead), "No, never."]);
    assert!(out.contains("No, never."), "{out}");
    assert_eq!(t.at(), ("sdd-delta".into(), "pending".into(), 1));
    assert_eq!(t.tick(), 1);
    let again = t.prompt("sdd-delta-2");
    assert!(
        again.contains("You asked: Should coupons stack?")
            && again.contains("A person answered: No, never."),
        "{again}"
    );
    assert!(
        again.contains("  attempt: 1\n"),
        "no attempt spent: {again}"
    );
    assert_eq!(t.at(), ("review".into(), "needs_human".into(), 1));
}

#[test]
fn c10_6_an_l_story_verifies_after_every_implementer_ended() {
    // the default roles: no step-rules.yaml
    let t = Setup::new("team", "[L] Payments", &[]);
    t.sb.ok(&["story", "reset", "app", &t.bead, "--step", "impl"]);
    for _ in 0..3 {
        if t.bead_status() == "closed" {
            break;
        }
        t.tick();
    }
    assert_eq!(t.bead_status(), "closed", "{:?}", t.at());
    let log = t.agent_log();
    let time = |l: &String| -> u128 { l.rsplit(' ').next().unwrap().parse().unwrap() };
    let impl_roles: Vec<&String> = log
        .iter()
        .filter(|l| l.starts_with("start impl "))
        .collect();
    let mut roles: Vec<&str> = impl_roles
        .iter()
        .map(|l| l.split(' ').nth(2).unwrap())
        .collect();
    roles.sort();
    assert_eq!(roles, ["backend", "frontend", "test"], "{log:?}");
    let impl_ended = log
        .iter()
        .filter(|l| l.starts_with("end impl "))
        .map(time)
        .collect::<Vec<_>>();
    assert_eq!(impl_ended.len(), 3, "{log:?}");
    let verify: Vec<&String> = log
        .iter()
        .filter(|l| l.starts_with("start verify "))
        .collect();
    assert_eq!(verify.len(), 1, "one verifier: {log:?}");
    assert!(verify[0].starts_with("start verify single"), "{log:?}");
    assert!(
        time(verify[0]) > *impl_ended.iter().max().unwrap(),
        "verify starts after every implementer ended: {log:?}"
    );
    // the implementers ran at once
    let started = impl_roles.iter().map(|l| time(l)).max().unwrap();
    assert!(started < *impl_ended.iter().min().unwrap(), "{log:?}");
}
