//! The repository's own commit hooks on a bead's landing commit, as git runs them on the
//! person's commits: a refusal is a failed attempt whose output the next prompt shows, a
//! formatter's changes and a commit-msg trailer are in the commit, and `Hooks: off` skips
//! them. Real git hooks, real ticks, real workers, real `br`.

use std::path::Path;
use std::time::Duration;

use crate::day_two::workers_end;
use crate::support::{wait_for, Install, ReportExt, Sandbox};

/// Writes `main.rs` indented with a tab and the deliverable, and keeps every prompt it is
/// given (`$HOME/prompt-<bead>-<n>`).
const AGENT: &str = r#"
n=$(ls "$HOME" | grep -c "^prompt-$BRAIDS_BEAD-")
cp "$2" "$HOME/prompt-$BRAIDS_BEAD-$n"
printf 'fn main() {\n\tprintln!("hi");\n}\n' > main.rs
mkdir -p "$(dirname "$1")"
printf '# %s\n\n## Summary\n\nWrote main.rs.\n' "$BRAIDS_BEAD" > "$1"
printf 'status: pass\nsummary: wrote main.rs\n' > "$BRAIDS_RESULT_FILE"
"#;

/// Refuses the first two commits it sees, then turns tabs into four spaces in what is staged.
fn pre_commit(marker: &Path) -> String {
    format!(
        r#"#!/bin/sh
if [ "$(cat {m} 2>/dev/null | wc -l)" -lt 2 ]; then
  echo refused >> {m}
  echo "lint: main.rs line 2 is indented with a tab; indent with spaces" >&2
  exit 1
fi
git diff --cached --name-only --diff-filter=AM | while read -r f; do
  sed -i 's/\t/    /g' "$f"
  git add "$f"
done
"#,
        m = marker.display()
    )
}

const COMMIT_MSG: &str = "#!/bin/sh\nprintf '\\nChecked-by: the commit-msg hook\\n' >> \"$1\"\n";

fn hook(root: &Path, name: &str, body: &str) {
    use std::os::unix::fs::PermissionsExt;
    let p = root.join(".git/hooks").join(name);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(&p, body).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn closed(sb: &Sandbox, slug: &str, bead: &str) {
    wait_for("the bead closed", Duration::from_secs(120), || {
        (sb.br_status(slug, bead) == "closed").then_some(())
    });
}

#[test]
fn commit_hooks_refuse_reformat_and_sign_the_landing_and_hooks_off_skips_them() {
    let sb = Install::new().build();
    let agent = sb.script("bin/agent", AGENT);
    sb.config(&format!(
        "[worker]\nexecutor = [{:?}, \"{{deliverable}}\", \"{{prompt_file}}\"]\nretries = 2\nretry_backoff = \"0s\"\n",
        agent.display().to_string()
    ));
    let app = sb.new_project("app").br().beads(1).create();
    let app_up = sb.bare_upstream("app");
    hook(
        &app.root,
        "pre-commit",
        &pre_commit(&sb.home().join("refused-app")),
    );
    hook(&app.root, "commit-msg", COMMIT_MSG);
    let web = sb
        .new_project("web")
        .br()
        .beads(1)
        .field("Hooks", "off")
        .create();
    let web_up = sb.bare_upstream("web");
    hook(
        &web.root,
        "pre-commit",
        "#!/bin/sh\necho never >&2\nexit 1\n",
    );
    let (a, w) = (&app.beads[0], &web.beads[0]);

    let r = sb.tick().force().run();
    assert_eq!(r.spawned_beads().len(), 2, "{r:#?}");
    workers_end(&sb);
    // `web` skips its hooks and lands at once; `app`'s hook refused the first attempt.
    closed(&sb, "web", w);
    assert_eq!(
        sb.br_status("app", a),
        "open",
        "a refusal is a failed attempt"
    );
    let log = sb.git(&web_up, &["log", "--format=%s", "main"]);
    assert!(log.contains(w.as_str()), "{log}");

    // Refused again: the failures add up (a pass the hook refuses is no success).
    let r = sb.tick().force().run();
    assert_eq!(r.spawned_beads(), [a.clone()], "{r:#?}");
    workers_end(&sb);
    let beads: serde_json::Value =
        serde_json::from_str(&sb.ok(&["beads", "app", "--json"])).unwrap();
    assert_eq!(beads["beads"][0]["attempts"], 2, "{beads:#}");

    let r = sb.tick().force().run();
    assert_eq!(r.spawned_beads(), [a.clone()], "{r:#?}");
    workers_end(&sb);
    closed(&sb, "app", a);
    let second = std::fs::read_to_string(sb.home().join(format!("prompt-{a}-2"))).unwrap();
    assert!(
        second.contains("line 2 is indented with a tab"),
        "the hook's output reaches the next prompt: {second}"
    );
    let landed = sb.git(&app_up, &["show", "main:main.rs"]);
    assert_eq!(
        landed, "fn main() {\n    println!(\"hi\");\n}\n",
        "reformatted"
    );
    let grep = format!("--grep=({a})");
    let message = sb.git(
        &app_up,
        &["log", "--fixed-strings", &grep, "--format=%B", "main"],
    );
    assert!(message.contains(a.as_str()), "{message}");
    assert!(
        message.contains("Checked-by: the commit-msg hook"),
        "{message}"
    );
    let project = std::fs::read_to_string(app.root.join("main.rs")).unwrap();
    assert!(
        project.contains("    println"),
        "the person's tree has the landed file"
    );
}

#[test]
fn c11_6_with_the_sandbox_on_the_commit_hooks_run_inside_it() {
    // A hook runs what the worktree holds, which is the agent's: it gets no more than the
    // agent. This one writes in the worktree (staged, it lands: the hook ran) and tries the
    // person's home, which it cannot.
    let sb = Install::new().build();
    let agent = sb.script("bin/agent", AGENT);
    sb.config(&format!(
        "[worker]\nexecutor = [{:?}, \"{{deliverable}}\", \"{{prompt_file}}\"]\nretries = 0\nsandbox = \"landlock\"\n",
        agent.display().to_string()
    ));
    let app = sb.new_project("app").br().beads(1).create();
    let escaped = sb.home().join("escaped");
    hook(
        &app.root,
        "pre-commit",
        &format!(
            "#!/bin/sh\ntouch {} 2>/dev/null\necho ran > hook-ran.txt\ngit add hook-ran.txt\nexit 0\n",
            escaped.display()
        ),
    );
    let r = sb.tick().force().run();
    assert_eq!(r.spawned_beads().len(), 1, "{r:#?}");
    workers_end(&sb);
    closed(&sb, "app", &app.beads[0]);
    let grep = format!("--grep=({})", app.beads[0]);
    let landing = sb.git(&app.root, &["log", "--fixed-strings", &grep, "--format=%H"]);
    let ran = sb.git(
        &app.root,
        &["show", &format!("{}:hook-ran.txt", landing.trim())],
    );
    assert_eq!(ran, "ran\n", "the hook ran, and its change landed");
    assert!(!escaped.exists(), "the hook wrote outside the sandbox");
}
