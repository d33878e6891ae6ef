//! Workspaces ready to work in, through real ticks and workers on real `br` and git: the
//! project's untracked `.env` copied in and never landed, a setup command whose failure is a
//! failed attempt with its output in the next prompt, the pooled workspace reused with its
//! stable id, and the pool shown by `braids status`. Beside them, a `cargo build` in a pooled
//! workspace compiles only the crate the bead changed, not its dependency.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::day_two::workers_end;
use crate::support::{wait_for, Install, ReportExt};

/// Keeps every prompt (`$HOME/prompt-<bead>-<n>`) and what it found of the workspace, writes
/// a file and the deliverable.
const AGENT: &str = r#"
n=$(ls "$HOME" | grep -c "^prompt-$BRAIDS_BEAD-")
cp "$2" "$HOME/prompt-$BRAIDS_BEAD-$n"
printf '%s %s\n' "$BRAIDS_WORKSPACE_ID" "$(cat .env 2>/dev/null)" >> "$HOME/seen"
echo "work of $BRAIDS_BEAD" > "work-$BRAIDS_BEAD.txt"
echo "SECRET=changed by the agent" > .env
mkdir -p "$(dirname "$1")"
printf '# %s\n\n## Summary\n\nDone.\n' "$BRAIDS_BEAD" > "$1"
printf 'status: pass\nsummary: done\n' > "$BRAIDS_RESULT_FILE"
"#;

#[test]
fn c6_7_a_ready_workspace_gets_env_and_setup_and_a_failed_setup_is_a_failed_attempt_told_to_the_next(
) {
    let sb = Install::new().build();
    let agent = sb.script("bin/agent", AGENT);
    sb.config(&format!(
        "[worker]\nexecutor = [{:?}, \"{{deliverable}}\", \"{{prompt_file}}\"]\nretries = 2\nretry_backoff = \"0s\"\n",
        agent.display().to_string()
    ));
    let ok = sb.home().join("setup-may-pass");
    let setup = format!(
        "sh -c \"echo setup >> {runs}; test -f {ok} || {{ echo 'npm ERR! the lockfile is missing' >&2; exit 1; }}\"",
        runs = sb.home().join("setup-runs").display(),
        ok = ok.display()
    );
    let app = sb
        .new_project("app")
        .br()
        .beads(2)
        .field("Copy", ".env")
        .field("Setup", &setup)
        .create();
    std::fs::write(app.root.join(".gitignore"), ".env\n").unwrap();
    sb.git(&app.root, &["add", ".gitignore"]);
    sb.git(&app.root, &["commit", "-qm", "ignore .env"]);
    std::fs::write(app.root.join(".env"), "SECRET=the person's\n").unwrap();
    let (a, b) = (&app.beads[0], &app.beads[1]);

    // The setup fails: a failed attempt, the bead open again, not blocked; no agent ran.
    let r = sb.tick().force().run();
    assert_eq!(r.spawned_beads(), std::slice::from_ref(a), "{r:#?}");
    workers_end(&sb);
    assert_eq!(sb.br_status("app", a), "open");
    assert!(
        !sb.home().join("seen").exists(),
        "the agent does not run after a failed setup"
    );
    let beads: serde_json::Value =
        serde_json::from_str(&sb.ok(&["beads", "app", "--json"])).unwrap();
    let first = beads["beads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["id"] == a.as_str())
        .unwrap();
    assert_eq!(first["attempts"], 1, "{beads:#}");

    // It passes now; the next prompt shows what it printed, and `.env` is there.
    std::fs::write(&ok, "").unwrap();
    let r = sb.tick().force().run();
    assert_eq!(r.spawned_beads(), std::slice::from_ref(a), "{r:#?}");
    workers_end(&sb);
    wait_for("the first bead closed", Duration::from_secs(60), || {
        (sb.br_status("app", a) == "closed").then_some(())
    });
    let prompt = std::fs::read_to_string(sb.home().join(format!("prompt-{a}-0"))).unwrap();
    assert!(
        prompt.contains("npm ERR! the lockfile is missing"),
        "{prompt}"
    );
    // The second bead reuses the pooled workspace: same id, the setup not run again.
    let r = sb.tick().force().run();
    assert_eq!(r.spawned_beads(), std::slice::from_ref(b), "{r:#?}");
    workers_end(&sb);
    wait_for("the second bead closed", Duration::from_secs(60), || {
        (sb.br_status("app", b) == "closed").then_some(())
    });
    let seen = std::fs::read_to_string(sb.home().join("seen")).unwrap();
    let seen: Vec<&str> = seen.lines().collect();
    assert_eq!(seen.len(), 2, "{seen:?}");
    for line in &seen {
        assert!(
            line.ends_with("SECRET=the person's"),
            "the project's .env each time: {line}"
        );
    }
    assert_eq!(
        seen[0].split(' ').next(),
        seen[1].split(' ').next(),
        "one workspace, one id"
    );
    let runs = std::fs::read_to_string(sb.home().join("setup-runs")).unwrap();
    assert_eq!(
        runs.lines().count(),
        2,
        "failed once, passed once, not run on reuse"
    );
    // `.env` never lands, and the person's copy is untouched.
    for bead in [a, b] {
        let files = sb.git(
            &app.root,
            &["log", "--format=", "--name-only", "--grep", bead],
        );
        assert!(!files.contains(".env"), "{files}");
        assert!(files.contains(&format!("work-{bead}.txt")), "{files}");
    }
    assert_eq!(
        std::fs::read_to_string(app.root.join(".env")).unwrap(),
        "SECRET=the person's\n"
    );
    // The pool holds the one workspace, and status says so.
    let status = sb.ok(&["status"]);
    assert!(status.contains("1 of 2 pooled workspace(s)"), "{status}");
    let json: serde_json::Value = serde_json::from_str(&sb.ok(&["status", "--json"])).unwrap();
    let pool = &json["projects"][0]["pool"];
    assert_eq!(
        pool["members"].as_array().map(Vec::len),
        Some(1),
        "{pool:#}"
    );
    assert!(pool["bytes"].as_u64().is_some_and(|b| b > 0), "{pool:#}");
}

fn cargo(dir: &Path) -> usize {
    let out = Command::new(env!("CARGO"))
        .args(["build", "--offline", "--quiet", "--message-format=json"])
        .current_dir(dir)
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("RUSTFLAGS")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // One `compiler-artifact` a unit, `"fresh":false` when it was compiled this time.
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains("\"reason\":\"compiler-artifact\"") && l.contains("\"fresh\":false"))
        .count()
}

fn write(p: &Path, text: &str) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

#[test]
fn c6_6_a_second_beads_cargo_build_in_a_pooled_workspace_compiles_only_its_crate() {
    use braids::workspace::{GitWorktrees, Landing, Pooling, Retired, Workspaces};
    let tmp = tempfile::tempdir().unwrap();
    let project = tmp.path().join("crates");
    write(
        &project.join("Cargo.toml"),
        "[workspace]\nmembers = [\"app\", \"dep\"]\nresolver = \"2\"\n",
    );
    write(
        &project.join("dep/Cargo.toml"),
        "[package]\nname = \"dep\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    );
    write(
        &project.join("dep/src/lib.rs"),
        "pub fn answer() -> u32 { 42 }\n",
    );
    write(
        &project.join("app/Cargo.toml"),
        "[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\ndep = { path = \"../dep\" }\n",
    );
    write(
        &project.join("app/src/main.rs"),
        "fn main() { println!(\"{}\", dep::answer()); }\n",
    );
    write(&project.join(".gitignore"), "target/\n");
    let git = |dir: &Path, args: &[&str]| {
        let out = Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .current_dir(dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    };
    git(&project, &["init", "-q", "-b", "main"]);
    git(&project, &["config", "user.name", "t"]);
    git(&project, &["config", "user.email", "t@t"]);
    git(&project, &["add", "-A"]);
    git(&project, &["commit", "-qm", "two crates"]);
    let wss = GitWorktrees {
        root: tmp.path().join("workspaces"),
        sandbox: Default::default(),
        pooling: Pooling {
            size: 2,
            ..Default::default()
        },
    };
    let mut compiled = Vec::new();
    for i in 0..2 {
        let bead = braids::model::BeadId::new(&format!("c{i}")).unwrap();
        let ws = wss.create(&project, &bead).unwrap();
        assert_eq!(wss.make_ready(&ws).unwrap().reused, i == 1);
        write(
            &ws.dir.join("app/src/main.rs"),
            &format!("fn main() {{ println!(\"{{}} {i}\", dep::answer()); }}\n"),
        );
        compiled.push(cargo(&ws.dir));
        let _lock = braids::git::RepoLock::acquire(&project).unwrap();
        let p = wss.prepare_landing(&ws, &bead, &[], None).unwrap();
        assert!(
            matches!(p, braids::workspace::Prepared::Ready { .. }),
            "{p:?}"
        );
        let landing = Landing {
            message: format!("bead {i} ({bead})"),
            ..Landing::default()
        };
        wss.land(&ws, &landing).unwrap().unwrap();
        drop(_lock);
        assert_eq!(wss.retire(&ws).unwrap(), Retired::Pooled);
    }
    assert_eq!(
        compiled,
        [2, 1],
        "the first build compiles dep and app, the second only app"
    );
}
