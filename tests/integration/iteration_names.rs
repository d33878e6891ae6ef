//! Iterations by their names, and Stories by what the tracker knows (CONTRACTS 1.3), end to
//! end: the real `braids` binary, a real `br`, real git and real files; only the agent, the
//! notifier and the worker that a tick starts are `sh` scripts.
//!
//! - An iteration's name is its directory's name as written: `008` is `008` in the spawn
//!   message, `tick --json`, STATUS.md, `braids status`, notifications and the completion
//!   commit, and `9` still sorts before `10`. A worker given `Iteration: 8` by an older braids
//!   still finds `008`.
//! - A Stories entry may name any bead the tracker accepts, the native tracker's `readme` too.
//! - A story the tracker does not know is a `braids check` error at its file and line, a
//!   problem on STATUS.md, and one WARN in the tick log, not one per run.
//!
//! Self-contained: the helpers below are this file's own.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use assert_cmd::Command;
use serde_json::Value;

// ---------------------------------------------------------------------------------------------
// Helpers: a throwaway HOME with an installation in it
// ---------------------------------------------------------------------------------------------

/// A worker stand-in for the tick: records its spawn message under the session label, exits.
const CAPTURE: &str = r#"cat > "$HOME/got-$BRAIDS_LABEL.part"
mv "$HOME/got-$BRAIDS_LABEL.part" "$HOME/got-$BRAIDS_LABEL""#;

/// The agent: keeps its prompt, writes the deliverable (`$1`) with a Summary, reports `pass`.
const AGENT: &str = r#"cp "$2" "$HOME/prompts/prompt-$BRAIDS_BEAD"
cat > "$1" <<EOF
# Work on $BRAIDS_BEAD

## Summary

Did $BRAIDS_BEAD.
EOF
printf 'status: pass\nreason: null\nsummary: did it\n' > "$BRAIDS_RESULT_FILE""#;

struct Home {
    dir: tempfile::TempDir,
}

impl Home {
    /// `braids init`, a capturing worker command, the scripted agent, and a notifier that
    /// appends `event|message` to `~/notified`.
    fn new() -> Home {
        let dir = tempfile::Builder::new()
            .prefix("braids-iter-")
            .tempdir()
            .unwrap();
        let h = Home { dir };
        h.write(
            ".gitconfig",
            "[user]\n\tname = Tester\n\temail = tester@example.com\n[init]\n\tdefaultBranch = main\n",
        );
        h.ok(&["init"]);
        // Where the agent keeps what it was asked, for the tests to read: its sandbox allows it.
        std::fs::create_dir_all(h.path("prompts")).unwrap();
        let worker = h.script("capture.sh", CAPTURE);
        let agent = h.script("agent.sh", AGENT);
        let notifier = h.script(
            "notify.sh",
            &format!(
                "printf '%s|%s\\n' \"$1\" \"$2\" >> {:?}",
                h.path("notified")
            ),
        );
        h.write(
            ".openclaw/braids/config.toml",
            &format!(
                "[worker]\ncommand = [{worker:?}]\nexecutor = [{agent:?}, \"{{deliverable}}\", \"{{prompt_file}}\"]\nretries = 0\nsandbox_write = [\"~/prompts\"]\n\
                 [notify]\ncommand = [{notifier:?}, \"{{event}}\", \"{{message}}\"]\n"
            ),
        );
        h
    }

    fn home(&self) -> &Path {
        self.dir.path()
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.home().join(rel)
    }

    fn project(&self, slug: &str) -> PathBuf {
        self.home().join("Projects").join(slug)
    }

    fn write(&self, rel: impl AsRef<Path>, text: &str) -> PathBuf {
        let p = self.home().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
        p
    }

    fn read(&self, rel: impl AsRef<Path>) -> String {
        std::fs::read_to_string(self.home().join(rel)).unwrap_or_default()
    }

    fn script(&self, rel: &str, body: &str) -> String {
        use std::os::unix::fs::PermissionsExt;
        let p = self.write(rel, &format!("#!/bin/sh\n{body}\n"));
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p.to_string_lossy().into_owned()
    }

    /// PATH: `~/bin` (stubs), cargo's bin directory (`br`), then the system's.
    fn path_var(&self) -> String {
        let mut dirs = vec![self.path("bin")];
        let home = std::env::var("HOME").unwrap_or_default();
        dirs.push(PathBuf::from(home).join(".cargo/bin"));
        if let Some(p) = std::env::var_os("PATH") {
            dirs.extend(std::env::split_paths(&p));
        }
        std::env::join_paths(dirs)
            .unwrap()
            .to_string_lossy()
            .into_owned()
    }

    fn env(&self, c: &mut std::process::Command) {
        c.env("HOME", self.home())
            .env_remove("BRAIDS_HOME")
            .env_remove("BEADS_DIR")
            .env("PATH", self.path_var())
            .env("BRAIDS_LOG", "info")
            .env("GIT_CONFIG_GLOBAL", self.path(".gitconfig"));
    }

    fn braids(&self, args: &[&str], stdin: Option<&str>) -> Output {
        let mut c = Command::cargo_bin("braids").unwrap();
        c.env("HOME", self.home())
            .env_remove("BRAIDS_HOME")
            .env_remove("BEADS_DIR")
            .env("PATH", self.path_var())
            .env("BRAIDS_LOG", "info")
            .env("GIT_CONFIG_GLOBAL", self.path(".gitconfig"))
            .current_dir(self.home())
            .args(args)
            .timeout(Duration::from_secs(120));
        if let Some(s) = stdin {
            c.write_stdin(s);
        }
        c.output().unwrap()
    }

    fn run(&self, args: &[&str]) -> Output {
        self.braids(args, None)
    }

    /// Runs and asserts success; stdout.
    fn ok(&self, args: &[&str]) -> String {
        let o = self.run(args);
        assert!(
            o.status.success(),
            "braids {args:?} failed ({:?}):\n{}\n{}",
            o.status.code(),
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    fn json(&self, args: &[&str]) -> Value {
        let out = self.ok(args);
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
    }

    /// `braids tick --force --json`: the report and the log (stderr).
    fn tick(&self) -> (Value, String) {
        let o = self.run(&["tick", "--force", "--json"]);
        let out = String::from_utf8_lossy(&o.stdout);
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
        (serde_json::from_str(&out).unwrap(), err)
    }

    /// A program run in a project directory, as a person would run it.
    fn cmd(&self, program: &str, dir: &Path, args: &[&str]) -> String {
        let mut c = std::process::Command::new(program);
        self.env(&mut c);
        let o = c.args(args).current_dir(dir).output().unwrap();
        assert!(
            o.status.success(),
            "{program} {args:?}: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    fn br_create(&self, slug: &str, title: &str) -> String {
        let out = self.cmd(
            "br",
            &self.project(slug),
            &[
                "create",
                &format!("--title={title}"),
                "--json",
                "--actor=test",
            ],
        );
        let v: Value = serde_json::from_str(&out).unwrap();
        v["id"]
            .as_str()
            .or(v[0]["id"].as_str())
            .unwrap()
            .to_string()
    }

    fn commit(&self, slug: &str, msg: &str) {
        let root = self.project(slug);
        self.cmd("git", &root, &["add", "-A"]);
        self.cmd("git", &root, &["commit", "-q", "--allow-empty", "-m", msg]);
    }

    /// Commit subjects of a project, newest first.
    fn log(&self, slug: &str) -> Vec<String> {
        self.cmd("git", &self.project(slug), &["log", "--format=%s"])
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// Writes ITERATION.md of iteration directory `name` with the given Stories lines.
    fn iteration(&self, slug: &str, name: &str, status: &str, stories: &[String]) -> PathBuf {
        let list: String = stories.iter().map(|s| format!("{s}\n")).collect();
        self.write(
            self.project(slug)
                .join(format!(".braids/iterations/{name}/ITERATION.md")),
            &format!("# Iteration {name}\n\n- **Status:** {status}\n\n## Stories\n\n{list}"),
        )
    }

    /// The spawn message the tick gave the worker labelled `label`, once it has it.
    fn spawn_message(&self, label: &str) -> String {
        let file = self.path(&format!("got-{label}"));
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(m) = std::fs::read_to_string(&file) {
                return m;
            }
            assert!(
                Instant::now() < deadline,
                "no spawn message for {label} after 30s"
            );
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// `braids worker --json` with `message` on stdin, as the session would run it.
    fn worker(&self, message: &str) -> Value {
        let o = self.braids(&["worker", "--json"], Some(message));
        let out = String::from_utf8_lossy(&o.stdout);
        let v: Value = serde_json::from_str(&out)
            .unwrap_or_else(|e| panic!("{e}: {out}\n{}", String::from_utf8_lossy(&o.stderr)));
        assert_eq!(o.status.code(), Some(0), "{v:#}");
        assert_eq!(v["ending"]["ending"], "completed", "{v:#}");
        v
    }

    fn notified(&self) -> Vec<String> {
        self.read("notified").lines().map(str::to_string).collect()
    }

    fn state(&self) -> Value {
        serde_json::from_str(&self.read(".openclaw/braids/.orchestrator-state.json")).unwrap()
    }
}

fn line_of(file: &Path, needle: &str) -> u64 {
    let text = std::fs::read_to_string(file).unwrap();
    text.lines().position(|l| l.contains(needle)).unwrap() as u64 + 1
}

/// The findings of `braids check --json` and its exit code.
fn check(h: &Home) -> (i32, Vec<Value>) {
    let o = h.run(&["check", "--json"]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    (
        o.status.code().unwrap(),
        v["findings"].as_array().unwrap().clone(),
    )
}

// ---------------------------------------------------------------------------------------------
// 4. The iteration's name is its directory name as written
// ---------------------------------------------------------------------------------------------

#[test]
fn c1_3_the_directory_name_008_is_shown_as_written_everywhere() {
    let h = Home::new();
    h.ok(&["new", "app", "--tracker", "br", "--channel", "#app"]);
    let bead = h.br_create("app", "Write the thing");
    // `iteration new` takes `8` and names the directory `008`
    let made = h.ok(&["iteration", "new", "app", "8"]);
    assert!(made.contains("app iteration 008 is now planning"), "{made}");
    h.iteration(
        "app",
        "008",
        "planning",
        &[format!("- {bead}: Write the thing")],
    );
    h.commit("app", "Plan iteration 008");
    let activated = h.ok(&["iteration", "activate", "app", "008"]);
    assert!(
        activated.contains("iteration 008 is now active"),
        "{activated}"
    );
    assert_eq!(h.log("app")[0], "Activate iteration 008");
    assert!(
        h.notified()
            .contains(&"iteration-start|[app] Iteration 008 started.".to_string()),
        "{:?}",
        h.notified()
    );

    // the tick: the spawn message and --json
    let (r, _) = h.tick();
    let label = format!("project:app:{bead}");
    assert_eq!(r["spawns"][0]["label"], label.as_str(), "{r:#}");
    assert_eq!(
        r["spawns"][0]["iteration"], "008",
        "a string, as written: {r:#}"
    );
    let message = h.spawn_message(&label);
    assert_eq!(
        message,
        format!(
            "Project: {}\nBead: {bead}\nIteration: 008\nChannel: #app\n",
            h.project("app").display()
        )
    );

    // STATUS.md and `braids status`
    let status_md = h.read(".openclaw/braids/STATUS.md");
    assert!(status_md.contains("| 008 (active) |"), "{status_md}");
    assert!(
        status_md.contains("- Iteration: 008 (active)"),
        "{status_md}"
    );
    let shown = h.ok(&["status"]);
    assert!(shown.contains("- Iteration: 008 (active)"), "{shown}");
    let v = h.json(&["status", "--json"]);
    assert_eq!(v["projects"][0]["iteration"]["name"], "008", "{v:#}");

    // the worker: the prompt, the completion commit and the notification
    h.worker(&message);
    let prompt = h.read(format!("prompts/prompt-{bead}"));
    assert!(prompt.contains("iteration 008."), "{prompt}");
    let log = h.log("app");
    assert_eq!(log[0], "Complete iteration 008", "{log:?}");
    assert!(
        h.notified()
            .contains(&"iteration-complete|[app] Iteration 008 is complete.".to_string()),
        "{:?}",
        h.notified()
    );
    let it = std::fs::read_to_string(h.project("app").join(".braids/iterations/008/ITERATION.md"))
        .unwrap();
    assert!(it.contains("- **Status:** complete"), "{it}");
}

#[test]
fn c1_3_iteration_9_sorts_before_10_and_8_or_008_name_one_iteration() {
    let h = Home::new();
    h.ok(&["new", "app", "--tracker", "workplan"]);
    h.iteration("app", "10", "planning", &[]);
    h.iteration("app", "9", "planning", &[]);
    h.commit("app", "Plan 9 and 10");
    // the first in planning, by number: 9, not 10 (which sorts first as text)
    let out = h.ok(&["iteration", "activate", "app"]);
    assert!(out.contains("app iteration 9 is now active"), "{out}");
    assert!(h.ok(&["status"]).contains("- Iteration: 9 (active)"));
    // `010` names `10`; the one active iteration refuses a second (1.3)
    let o = h.run(&["iteration", "activate", "app", "010"]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("iteration 9 of app is active"), "{err}");
    h.ok(&["iteration", "complete", "app", "09"]);
    assert_eq!(h.log("app")[0], "Complete iteration 9");
    // with none active, STATUS shows the newest: 10
    assert!(h.ok(&["status"]).contains("- Iteration: 10 (planning)"));
    // the next after 10 is 11, as `011`
    let made = h.ok(&["iteration", "new", "app"]);
    assert!(made.contains("app iteration 011 is now planning"), "{made}");
    // `8` and `008` are one iteration: a directory `008` exists once `8` is made
    h.ok(&["iteration", "new", "app", "8"]);
    let o = h.run(&["iteration", "new", "app", "008"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("already exists"));
    let o = h.run(&["iteration", "activate", "app", "eight"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("`eight`"));
}

#[test]
fn c2_4_an_old_numeric_spawn_message_still_finds_its_iteration() {
    let h = Home::new();
    h.ok(&["new", "app", "--tracker", "br", "--channel", "#app"]);
    let bead = h.br_create("app", "Old worker");
    h.iteration("app", "008", "active", &[format!("- {bead}: Old worker")]);
    h.commit("app", "Plan iteration 008");
    // a worker started by a braids that wrote the number
    let message = format!(
        "Project: {}\nBead: {bead}\nIteration: 8\nChannel: #app\n",
        h.project("app").display()
    );
    let run = h.worker(&message);
    let steps = run["steps"].to_string();
    assert!(
        steps.contains("008/ITERATION.md"),
        "read its context: {run:#}"
    );
    assert!(h
        .read(format!("prompts/prompt-{bead}"))
        .contains("iteration 008."));
    assert_eq!(h.log("app")[0], "Complete iteration 008");
    let delivered: Vec<_> = std::fs::read_dir(h.project("app").join(".braids/iterations/008"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n != "ITERATION.md")
        .collect();
    assert_eq!(delivered.len(), 1, "its deliverable in 008: {delivered:?}");
}

// ---------------------------------------------------------------------------------------------
// 5. Story ids: every id the tracker accepts
// ---------------------------------------------------------------------------------------------

#[test]
fn c1_3_native_tracker_ids_like_readme_are_stories_and_spawned() {
    let h = Home::new();
    h.ok(&["new", "app", "--tracker", "workplan"]);
    let wp = h.project("app").join(".braids/WORKPLAN.md");
    let plan = std::fs::read_to_string(&wp).unwrap();
    std::fs::write(
        &wp,
        plan
            + "- [ ] Write the README <!-- id:readme -->\n- [ ] Not this time <!-- id:wp-x1y -->\n",
    )
    .unwrap();
    let it = h.iteration(
        "app",
        "001",
        "active",
        &[
            "- readme: Write the README".into(),
            "- TBD: more after the review".into(),
        ],
    );
    h.commit("app", "Plan");

    // check: `readme` is a story; `TBD` is no bead, so it is prose (a warning, not an error)
    let (code, findings) = check(&h);
    assert_eq!(code, 0, "{findings:#?}");
    assert_eq!(findings.len(), 1, "{findings:#?}");
    assert_eq!(findings[0]["severity"], "warning");
    assert_eq!(findings[0]["line"], line_of(&it, "TBD"));
    assert!(findings[0]["message"].as_str().unwrap().contains("`TBD`"));

    // the tick spawns it (and nothing outside the Stories), the worker completes it
    let (r, _) = h.tick();
    let labels: Vec<&str> = r["spawns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["label"].as_str().unwrap())
        .collect();
    assert_eq!(labels, ["project:app:readme"], "{r:#}");
    let status_md = h.read(".openclaw/braids/STATUS.md");
    assert!(
        status_md.contains("readme: Write the README (in_progress)"),
        "{status_md}"
    );
    assert!(
        !status_md.contains("TBD"),
        "prose is not a story: {status_md}"
    );
    h.worker(&h.spawn_message("project:app:readme"));
    let log = h.log("app");
    assert_eq!(
        log[0], "Complete iteration 001",
        "TBD is not a story: {log:?}"
    );
    assert!(std::fs::read_to_string(&wp)
        .unwrap()
        .contains("- [x] Write the README"));
}

// ---------------------------------------------------------------------------------------------
// 3. Stories that cannot complete are errors
// ---------------------------------------------------------------------------------------------

#[test]
fn c1_3_a_story_the_tracker_does_not_know_is_a_check_error_a_status_problem_and_one_warning() {
    let h = Home::new();
    h.ok(&["new", "app", "--tracker", "br"]);
    let real = h.br_create("app", "Real work");
    let stories = [format!("- {real}: Real work"), "- e-404: Gone".to_string()];
    let it = h.iteration("app", "001", "active", &stories);
    h.commit("app", "Plan");
    let line = line_of(&it, "e-404");

    // check: an error at file:line, with a fix, asking br
    let (code, findings) = check(&h);
    assert_eq!(code, 1, "{findings:#?}");
    assert_eq!(findings.len(), 1, "{findings:#?}");
    let f = &findings[0];
    assert_eq!(
        (&f["severity"], &f["section"], f["line"].as_u64()),
        (&Value::from("error"), &Value::from("1.3"), Some(line))
    );
    assert_eq!(f["path"], it.to_string_lossy().as_ref());
    assert!(
        f["message"].as_str().unwrap().contains("e-404")
            && f["message"].as_str().unwrap().contains("never complete"),
        "{f}"
    );
    assert!(f["fix"].as_str().unwrap().contains("br create"), "{f}");
    let text = String::from_utf8_lossy(&h.run(&["check"]).stdout).into_owned();
    assert!(
        text.contains(&format!("ITERATION.md:{line}: error [1.3]: story e-404")),
        "{text}"
    );

    // the tick: one WARN, on the first run only; STATUS.md lists the problem on every run
    let warns = |log: &str| {
        log.lines()
            .filter(|l| l.contains("WARN") && l.contains("e-404"))
            .count()
    };
    let (r, log) = h.tick();
    assert_eq!(warns(&log), 1, "{log}");
    assert_eq!(r["warnings"].as_array().unwrap().len(), 1, "{r:#}");
    assert!(r["warnings"][0]
        .as_str()
        .unwrap()
        .starts_with(&format!("app: {}:{line}:", it.display())));
    assert_eq!(r["errors"], serde_json::json!([]), "not a run error: {r:#}");
    assert_eq!(
        h.state()["unknownStories"]["app"]["001"],
        serde_json::json!(["e-404"])
    );
    for _ in 0..3 {
        let (r, log) = h.tick();
        assert_eq!(warns(&log), 0, "warned again: {log}");
        assert_eq!(r["warnings"], serde_json::json!([]));
        let status_md = h.read(".openclaw/braids/STATUS.md");
        let problems = status_md
            .split("- Problems:\n")
            .nth(1)
            .unwrap_or_else(|| panic!("no Problems for app: {status_md}"));
        assert!(
            problems.starts_with(&format!(
                "  - {}:{line}: error [1.3]: story e-404",
                it.display()
            )),
            "{status_md}"
        );
    }
    assert!(h.ok(&["status"]).contains("story e-404 is not a bead"));

    // fixed: forgotten, and no problem shown; broken again: warned again
    h.iteration("app", "001", "active", &stories[..1]);
    let (_, log) = h.tick();
    assert_eq!(warns(&log), 0);
    assert!(h.state().get("unknownStories").is_none(), "{}", h.state());
    assert!(!h.read(".openclaw/braids/STATUS.md").contains("- Problems:"));
    h.iteration("app", "001", "active", &stories);
    let (_, log) = h.tick();
    assert_eq!(warns(&log), 1, "{log}");

    // a tracker that cannot be asked is a warning, not an error
    h.script("bin/br", "echo 'database is on fire' >&2\nexit 1");
    let (code, findings) = check(&h);
    assert_eq!(code, 0, "{findings:#?}");
    assert_eq!(findings.len(), 1, "{findings:#?}");
    assert_eq!(findings[0]["severity"], "warning");
    assert!(
        findings[0]["message"]
            .as_str()
            .unwrap()
            .contains("cannot be asked"),
        "{findings:#?}"
    );
}
