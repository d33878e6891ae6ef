//! Today's braids files (CONTRACTS 1.7): an installation in the EDN layout — registry.edn, a
//! project's config.edn and iteration.edn — checked, ticked, shown and edited by the real
//! binary, with braids' own `.braids/` (tests/fixtures/braids-edn) as the project.

use std::path::{Path, PathBuf};

use crate::support::{Install, Sandbox};

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/braids-edn/.braids"
);

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}

/// An installation whose registry.edn lists `braids`, a git repository holding braids' own
/// `.braids/` files verbatim (under `dot`, `.braids` or `.project`).
fn edn_install(dot: &str) -> (Sandbox, PathBuf) {
    let s = Install::new()
        .sandboxed()
        .config("[worker]\nexecutor = [\"sh\", \"-c\", \"exit 0\"]\n")
        .build();
    std::fs::remove_file(s.registry_path()).unwrap();
    let root = s.projects().join("braids");
    copy_dir(Path::new(FIXTURE), &root.join(dot));
    s.git(s.home(), &["init", "-q", root.to_str().unwrap()]);
    s.git(&root, &["add", "-A"]);
    s.git(&root, &["commit", "-qm", "braids' own files"]);
    s.write(
        s.braids_dir().join("registry.edn"),
        ";; today's braids\n{:projects [{:slug \"braids\"\n             :status :active :priority :high\n             :path \"$BRAIDS_HOME/braids\"}]}\n",
    );
    (s, root)
}

fn check(s: &Sandbox) -> (i32, Vec<serde_json::Value>) {
    let o = s.run(&["check", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stdout)));
    (
        o.status.code().unwrap(),
        v["findings"].as_array().unwrap().clone(),
    )
}

fn finding<'a>(
    found: &'a [serde_json::Value],
    file_end: &str,
    words: &str,
) -> &'a serde_json::Value {
    found
        .iter()
        .find(|f| {
            f["path"].as_str().unwrap().ends_with(file_end)
                && f["message"].as_str().unwrap().contains(words)
                && !f["fix"].as_str().unwrap().is_empty()
        })
        .unwrap_or_else(|| panic!("no `{words}` at {file_end} in {found:#?}"))
}

#[test]
fn c1_7_braids_own_edn_files_pass_check_and_a_dry_run_tick() {
    let (s, _) = edn_install(".braids");
    let (code, found) = check(&s);
    assert_eq!(found, Vec::<serde_json::Value>::new());
    assert_eq!(code, 0);
    let out = s.ok(&["tick", "--dry-run"]);
    assert!(out.contains("idle: no-active-iterations"), "{out}");
    let status = s.ok(&["status"]);
    assert!(
        status.contains("| braids | active | 009 (complete) | high |"),
        "{status}"
    );
    assert!(
        status.contains("braids-98r: braids list: show projects from registry"),
        "{status}"
    );
    // A dry run writes nothing into the project.
    assert_eq!(s.git(&s.project("braids"), &["status", "--porcelain"]), "");
}

#[test]
fn c1_7_edn_errors_are_reported_by_check_with_file_line_and_fix() {
    let (s, root) = edn_install(".braids");
    s.write(
        s.braids_dir().join("registry.edn"),
        "{:projects [{:slug \"braids\" :status :active :priority :high :path \"$BRAIDS_HOME/braids\"}\n             {:slug \"gone\" :stauts :active\n              :path \"/nowhere\" :priority :urgent}]}\n",
    );
    let config = root.join(".braids/config.edn");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        text.replace(":max-workers 1", ":max-wrokers 1")
            .replace(":worker-timeout 3600", ":worker-timeout \"soon\""),
    )
    .unwrap();
    let (code, found) = check(&s);
    assert_eq!(code, 1, "{found:#?}");
    let typo = finding(&found, "registry.edn", "did you mean `:status`");
    assert_eq!(typo["line"], 2);
    assert_eq!(
        finding(&found, "registry.edn", "priority `urgent`")["line"],
        2
    );
    assert_eq!(
        finding(&found, "registry.edn", "not an existing directory")["line"],
        2
    );
    let key = finding(&found, "config.edn", "max-wrokers");
    assert_eq!(key["line"], 8);
    assert!(
        key["fix"].as_str().unwrap().contains("`:max-workers`"),
        "{key}"
    );
    assert_eq!(
        finding(&found, "config.edn", "WorkerTimeout `soon`")["line"],
        9
    );
    // A file that is not EDN at all: one finding at the line where it breaks.
    std::fs::write(
        &config,
        "{:name \"Braids\"\n :status :active\n :notifications {:question true}\n",
    )
    .unwrap();
    let (_, found) = check(&s);
    assert_eq!(finding(&found, "config.edn", "not valid EDN")["line"], 4);
}

#[test]
fn c1_7_markdown_beside_edn_wins_and_check_warns() {
    let (s, root) = edn_install(".braids");
    s.write(
        s.braids_dir().join("registry.md"),
        "| Slug | Status | Priority | Path |\n|---|---|---|---|\n| braids | paused | low | $BRAIDS_HOME/braids |\n",
    );
    std::fs::write(
        root.join(".braids/PROJECT.md"),
        "# Braids in markdown\n\nStatus: active\nPriority: low\nAutonomy: full\n",
    )
    .unwrap();
    let (code, found) = check(&s);
    assert_eq!(code, 0, "{found:#?}");
    assert!(finding(&found, "registry.edn", "braids reads")["message"]
        .as_str()
        .unwrap()
        .contains("registry.md"));
    finding(&found, ".braids/config.edn", "PROJECT.md");
    let status = s.ok(&["status"]);
    assert!(
        status.contains("| braids | active (registry: paused) |"),
        "{status}"
    );
    assert!(status.contains("Braids in markdown"), "{status}");
}

#[test]
fn c1_7_commands_write_back_the_edn_they_read_byte_for_byte() {
    let (s, root) = edn_install(".project");
    // The newer layout: .project/config.edn and .project/iterations/.
    let dir = root.join(".project/iterations/010");
    let planned = ";; the next one\n{:number \"010\"\n :status   :planning ; not yet\n :owner {:who \"me\"}\n :stories []}\n";
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("iteration.edn"), planned).unwrap();
    s.git(&root, &["add", "-A"]);
    s.git(&root, &["commit", "-qm", "iteration 010"]);
    s.ok(&["iteration", "activate", "braids", "10"]);
    let now = std::fs::read_to_string(dir.join("iteration.edn")).unwrap();
    assert_eq!(now, planned.replace(":planning ;", ":active ;"));
    assert!(s
        .git(&root, &["log", "-1", "--format=%s"])
        .contains("Activate iteration 010"));
    let reg = s.braids_dir().join("registry.edn");
    let before = std::fs::read_to_string(&reg).unwrap();
    s.ok(&["pause", "braids"]);
    assert_eq!(
        std::fs::read_to_string(&reg).unwrap(),
        before.replace(":status :active", ":status :paused")
    );
    let (code, found) = check(&s);
    assert_eq!((code, found), (0, vec![]));
    // A new iteration of an EDN project is EDN.
    s.ok(&["iteration", "new", "braids"]);
    let fresh =
        std::fs::read_to_string(root.join(".project/iterations/011/iteration.edn")).unwrap();
    assert_eq!(
        fresh,
        "{:number \"011\" :status :planning :stories [] :notes []}\n"
    );
}

/// Every file of the installation, `(path under HOME, text)`, sorted.
fn files(s: &Sandbox) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut dirs = vec![s.braids_dir(), s.project("braids").join(".braids")];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if matches!(p.extension().and_then(|x| x.to_str()), Some("md" | "edn"))
                && !p.ends_with("STATUS.md")
            {
                let rel = p.strip_prefix(s.home()).unwrap().display().to_string();
                out.push((rel, std::fs::read_to_string(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

fn edn_value(text: &str) -> String {
    format!("{:?}", clojure_reader::edn::read_string(text).unwrap())
}

#[test]
fn c1_7_migrate_converts_an_installation_both_ways_losing_nothing() {
    let (s, root) = edn_install(".braids");
    let before = files(&s);
    let dry = s.ok(&["migrate", "--to", "md", "--dry-run"]);
    assert!(
        dry.contains("would write") && dry.contains("iterations/009/ITERATION.md"),
        "{dry}"
    );
    assert_eq!(files(&s), before, "a dry run writes nothing");

    let out = s.ok(&["migrate", "--to", "md"]);
    assert!(out.contains("registry.md in place of"), "{out}");
    let md = files(&s);
    assert!(md.iter().all(|(p, _)| p.ends_with(".md")), "{md:#?}");
    assert_eq!(md.len(), before.len());
    assert_eq!(check(&s), (0, vec![]));
    assert!(s
        .ok(&["tick", "--dry-run"])
        .contains("idle: no-active-iterations"));
    // Nothing more to do in that direction.
    assert!(s
        .ok(&["migrate", "--to", "md"])
        .contains("nothing to convert"));

    s.ok(&["migrate", "--to", "edn"]);
    let back = files(&s);
    assert_eq!(back.len(), before.len());
    for ((p0, t0), (p1, t1)) in before.iter().zip(&back) {
        assert_eq!(p0, p1);
        assert_eq!(
            edn_value(t0),
            edn_value(t1),
            "{p0} changed:\n{t0}\n---\n{t1}"
        );
    }
    assert_eq!(check(&s), (0, vec![]));
    let status = s.ok(&["status"]);
    assert!(
        status.contains("| braids | active | 009 (complete) | high |"),
        "{status}"
    );

    // And from markdown: md → edn → md reads the same.
    s.ok(&["migrate", "--to", "md"]);
    let md_again = files(&s);
    s.ok(&["migrate", "--to", "edn"]);
    s.ok(&["migrate", "--to", "md"]);
    assert_eq!(files(&s), md_again);

    // What the other form cannot carry stops the command with nothing changed.
    let project_md = root.join(".braids/PROJECT.md");
    let text = std::fs::read_to_string(&project_md).unwrap();
    std::fs::write(
        &project_md,
        format!("{text}\n## Design\n\nNotes on the design.\n"),
    )
    .unwrap();
    let kept = files(&s);
    let o = s.run(&["migrate", "--to", "edn"]);
    assert_ne!(o.status.code(), Some(0));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("nothing was changed") && err.contains("`## Design`"),
        "{err}"
    );
    assert_eq!(files(&s), kept);
}
