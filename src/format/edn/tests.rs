use std::path::{Path, PathBuf};

use super::*;
use crate::model::{IterationName, IterationStatus, NotificationEvent, Priority, ProjectStatus};
use crate::system::diag::Severity;
use crate::system::paths::Paths;

fn fixture(rel: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/braids-edn/.braids")
        .join(rel);
    std::fs::read_to_string(p).unwrap()
}

fn lines(d: &[crate::system::diag::Diagnostic]) -> Vec<(Severity, Option<usize>, String)> {
    d.iter()
        .map(|d| (d.severity, d.line, d.message.clone()))
        .collect()
}

#[test]
fn c1_7_braids_own_config_edn_reads_into_the_project_model() {
    let p = parse_project(&fixture("config.edn"), Path::new("/p/.braids/config.edn"));
    assert!(p.diagnostics.is_empty(), "{:?}", lines(&p.diagnostics));
    let c = p.value;
    assert_eq!(c.name.as_deref(), Some("Braids"));
    assert_eq!(c.status, Some(ProjectStatus::Active));
    assert_eq!(c.priority, Priority::High);
    assert_eq!((c.max_workers, c.worker_timeout), (1, 3600));
    assert_eq!(c.channel.as_deref(), Some("1471680593497554998"));
    assert!(c.notifications.is_on(NotificationEvent::NoReadyBeads));
    assert_eq!(
        c.notifications.mention(NotificationEvent::Question),
        Some("<@274692642116337664>")
    );
    // An unknown key is kept for overrides, on its own line.
    let agent = c.field("worker-agent").unwrap();
    assert_eq!((agent.value.as_str(), agent.line), ("scrapper", 1));
}

#[test]
fn c1_7_braids_own_iterations_read_with_their_stories() {
    for n in 1..=9 {
        let name = format!("{n:03}");
        let file = PathBuf::from(format!("/p/.braids/iterations/{name}/iteration.edn"));
        let p = parse_iteration(
            &fixture(&format!("iterations/{name}/iteration.edn")),
            &file,
            IterationName::new(&name).unwrap(),
            PathBuf::from("/p"),
        );
        assert!(
            p.diagnostics.is_empty(),
            "{name}: {:?}",
            lines(&p.diagnostics)
        );
        assert_eq!(p.value.status, Some(IterationStatus::Complete), "{name}");
        assert!(!p.value.stories.is_empty(), "{name}");
    }
    let nine = parse_iteration(
        &fixture("iterations/009/iteration.edn"),
        Path::new("/x"),
        IterationName::new("009").unwrap(),
        PathBuf::new(),
    )
    .value;
    assert_eq!(nine.stories[0].id.as_str(), "braids-98r");
    assert_eq!(
        nine.stories[0].title,
        "braids list: show projects from registry"
    );
    assert_eq!(nine.stories.len(), 6);
    assert!(nine.notes.unwrap().contains("6 beads, all unblocked"));
}

const REGISTRY: &str = r#";; projects braids schedules
{:projects [{:slug "app" :status :active :priority :high :path "~/Projects/app"}
            {:slug "web",   :status :paused
             :priority :low :path "/srv/web" :owner "ops"}]
 :extra {:kept true}}
"#;

#[test]
fn c1_7_registry_edn_reads_with_lines() {
    let paths = Paths::new("/home/u".into(), None);
    let p = parse_registry(REGISTRY, Path::new("/b/registry.edn"), &paths);
    assert!(p.diagnostics.is_empty(), "{:?}", lines(&p.diagnostics));
    let r = p.value;
    assert_eq!(r.entries.len(), 2);
    let app = r.get("app").unwrap();
    assert_eq!(
        (app.status, app.priority, app.line),
        (Some(ProjectStatus::Active), Some(Priority::High), 2)
    );
    assert_eq!(app.path, PathBuf::from("/home/u/Projects/app"));
    let web = r.get("web").unwrap();
    assert_eq!(
        (web.status, web.line, web.raw_path.as_str()),
        (Some(ProjectStatus::Paused), 3, "/srv/web")
    );
}

#[test]
fn c1_7_bad_edn_is_one_sentence_with_file_line_and_fix() {
    let paths = Paths::new("/home/u".into(), None);
    let cases: &[(&str, Option<usize>, &str)] = &[
        // (text, line, a word the message or fix must hold)
        (
            "{:projects [{:slug \"a\" :status :active\n :path \"/a\"}\n",
            Some(3),
            "not valid EDN",
        ),
        ("[1 2]", Some(1), "not an EDN map"),
        (
            "{:projects [{:slug \"a\" :status :done :priority :high :path \"/a\"}]}",
            Some(1),
            "never complete",
        ),
        (
            "{:projects [{:slug \"a\"\n :status :active :priority :urgent :path \"/a\"}]}",
            Some(1),
            "priority `urgent`",
        ),
        (
            "{:projects [{:slug \"a\" :stauts :active :path \"/a\"}]}",
            Some(1),
            "did you mean `:status`",
        ),
        ("{:projects [\"a\"]}", Some(1), "not a map"),
        ("{:projects []} {:x 1}", Some(1), "single map"),
    ];
    for (text, line, word) in cases {
        let d = parse_registry(text, Path::new("/b/registry.edn"), &paths).diagnostics;
        let hit = d
            .iter()
            .find(|d| d.message.contains(word) || d.fix.contains(word));
        let hit = hit.unwrap_or_else(|| panic!("{text:?}: no `{word}` in {:?}", lines(&d)));
        assert_eq!(hit.line, *line, "{text:?}: {hit}");
        assert_eq!(hit.path, PathBuf::from("/b/registry.edn"));
        assert!(!hit.fix.is_empty());
    }
}

#[test]
fn c1_7_config_edn_typos_and_bad_values_name_the_edn_line_and_key() {
    let text = "{:name \"X\"\n :status :active\n :max-wrokers 2\n :worker-timeout \"soon\"\n :autonomy :sometimes}";
    let d = parse_project(text, Path::new("/p/.braids/config.edn")).diagnostics;
    let find = |w: &str| {
        d.iter()
            .find(|d| d.message.contains(w))
            .unwrap_or_else(|| panic!("no `{w}` in {:?}", lines(&d)))
    };
    let typo = find("max-wrokers");
    assert_eq!(typo.line, Some(3));
    assert!(typo.message.contains("did you mean `MaxWorkers`"), "{typo}");
    assert!(typo.fix.contains("`:max-workers`"), "{typo}");
    let bad = find("WorkerTimeout `soon`");
    assert_eq!(bad.line, Some(4));
    assert_eq!(find("Autonomy `sometimes`").line, Some(5));
    let missing = parse_project("{:name \"X\"}", Path::new("/c.edn")).diagnostics;
    assert!(
        missing
            .iter()
            .any(|d| d.fix.contains("add `:status active` to the map")),
        "{:?}",
        lines(&missing)
    );
}

#[test]
fn c1_7_iteration_status_edit_changes_only_that_value() {
    let text = "; iteration notes\n{:number  \"003\" ,\n :status   :active ; still going\n :owner {:who \"me\"}\n :stories [{:id \"a-1\" :title \"x\"}]}\n";
    let out = edit::set_iteration_status(text, IterationStatus::Complete).unwrap();
    assert_eq!(out, text.replace(":active ;", ":complete ;"));
    let back = parse_iteration(
        &out,
        Path::new("/i.edn"),
        IterationName::new("003").unwrap(),
        PathBuf::new(),
    )
    .value;
    assert_eq!(back.status, Some(IterationStatus::Complete));
    // Complete iterations never change; a missing status is added before the closing brace.
    assert!(edit::set_iteration_status(&out, IterationStatus::Active).is_err());
    assert_eq!(
        edit::set_iteration_status("{:number \"1\"} ; c\n", IterationStatus::Active).unwrap(),
        "{:number \"1\" :status :active} ; c\n"
    );
    assert_eq!(
        edit::set_iteration_status("{}", IterationStatus::Planning).unwrap(),
        "{:status :planning}"
    );
}

#[test]
fn c1_7_registry_edit_changes_only_that_project() {
    let out = edit::upsert_project(
        REGISTRY,
        "web",
        ProjectStatus::Active,
        Priority::Low,
        "/srv/web",
    )
    .unwrap();
    assert_eq!(out, REGISTRY.replace(":status :paused", ":status :active"));
    let out = edit::upsert_project(
        REGISTRY,
        "app",
        ProjectStatus::Paused,
        Priority::Normal,
        "~/Projects/app",
    )
    .unwrap();
    assert_eq!(
        out,
        REGISTRY.replace(":active :priority :high", ":paused :priority :normal")
    );
    let added = edit::upsert_project(
        REGISTRY,
        "new-one",
        ProjectStatus::Active,
        Priority::Normal,
        "~/n",
    )
    .unwrap();
    assert!(
        added.starts_with(&REGISTRY[..REGISTRY.find(":owner \"ops\"}").unwrap() + 13]),
        "{added}"
    );
    assert!(
        added.contains(
            "\n            {:slug \"new-one\" :status :active :priority :normal :path \"~/n\"}]"
        ),
        "{added}"
    );
    let paths = Paths::new("/home/u".into(), None);
    let reg = parse_registry(&added, Path::new("/r.edn"), &paths).value;
    assert_eq!(reg.entries.len(), 3);
    let fresh = edit::upsert_project("", "a", ProjectStatus::Active, Priority::High, "/a").unwrap();
    assert_eq!(
        parse_registry(&fresh, Path::new("/r.edn"), &paths)
            .value
            .entries
            .len(),
        1
    );
}

fn value_of(text: &str) -> clojure_reader::edn::Edn<'static> {
    clojure_reader::edn::read_string(text).unwrap().into_owned()
}

#[test]
fn c1_7_edn_to_md_to_edn_keeps_every_value() {
    let file = Path::new("/p/.braids/config.edn");
    let rich = "; mine\n{:name \"X\" :status :paused :priority :low :autonomy :ask-first :checkin :weekly\n :worker-agent \"scrapper\" :tags [\"a\" \"b\"] :n 3 :owner {:who \"me\"} :odd \"12\"\n :goal \"Ship it.\" :guardrails [\"no force push\" \"small diffs\"]}\n";
    for text in [fixture("config.edn"), rich.to_string()] {
        let md = convert::project_to_md(&text, file).unwrap();
        let back = convert::project_to_edn(&md, Path::new("/p/.braids/PROJECT.md")).unwrap();
        assert_eq!(value_of(&back), value_of(&text), "{md}\n{back}");
    }
    for n in 1..=9 {
        let name = IterationName::new(&format!("{n:03}")).unwrap();
        let text = fixture(&format!("iterations/{name}/iteration.edn"));
        let file = PathBuf::from(format!("/p/.braids/iterations/{name}/iteration.edn"));
        let md = convert::iteration_to_md(&text, &file, name).unwrap();
        let back =
            convert::iteration_to_edn(&md, &file.with_file_name("ITERATION.md"), name).unwrap();
        assert_eq!(value_of(&back), value_of(&text), "{md}\n{back}");
    }
    let paths = Paths::new("/home/u".into(), None);
    let reg =
        "{:projects [{:slug \"app\" :status :active :priority :high :path \"~/Projects/app\"}]}";
    let md = convert::registry_to_md(reg, Path::new("/r.edn"), &paths).unwrap();
    let back = convert::registry_to_edn(&md, Path::new("/r.md"), &paths).unwrap();
    assert_eq!(value_of(&back), value_of(reg));
}

#[test]
fn c1_7_md_to_edn_to_md_keeps_every_value() {
    let project = crate::system::templates::render(
        crate::system::templates::PROJECT,
        &[
            ("name", "My app"),
            ("priority", "high"),
            ("max_workers", "2"),
            ("channel", "#my-app"),
        ],
    ) + "\n";
    let with_extra = project.replace(
        "- **Checkin:** on-demand\n",
        "- **Checkin:** on-demand\n- **Executor:** codex\n- Owner: the ops team\n",
    );
    for text in [project, with_extra] {
        let file = Path::new("/p/.braids/PROJECT.md");
        let edn = convert::project_to_edn(&text, file).unwrap();
        let md = convert::project_to_md(&edn, Path::new("/p/.braids/config.edn")).unwrap();
        let (a, b) = (
            crate::format::project::parse_project(&text, file).value,
            crate::format::project::parse_project(&md, file).value,
        );
        assert_eq!(
            (
                a.name,
                a.status,
                a.priority,
                a.max_workers,
                a.channel.clone(),
                a.notifications.clone()
            ),
            (
                b.name,
                b.status,
                b.priority,
                b.max_workers,
                b.channel,
                b.notifications
            )
        );
        let values = |c: &crate::format::project::ProjectConfig| {
            c.fields
                .iter()
                .map(|f| (f.key.clone(), f.clean_value().to_string()))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            values(&crate::format::project::parse_project(&text, file).value),
            values(&crate::format::project::parse_project(&md, file).value),
            "{edn}\n{md}"
        );
    }
    let it = "# Iteration 3\n\n- **Status:** active\n\n## Stories\n\n<!-- one per bead -->\n- wp-1: First\n- wp-2: Second \"quoted\"\n\n## Notes\n\n- keep it small\n";
    let file = Path::new("/p/.braids/iterations/3/ITERATION.md");
    let name = IterationName::new("3").unwrap();
    let edn = convert::iteration_to_edn(it, file, name).unwrap();
    let md = convert::iteration_to_md(&edn, &file.with_file_name("iteration.edn"), name).unwrap();
    assert_eq!(md, "# Iteration 3\n\n- **Status:** active\n\n## Stories\n\n- wp-1: First\n- wp-2: Second \"quoted\"\n\n## Notes\n\n- keep it small\n");
    let paths = Paths::new("/home/u".into(), None);
    let reg = format!(
        "{}| app | paused | low | ~/a |\n",
        crate::format::registry::REGISTRY_TEMPLATE
    );
    let edn = convert::registry_to_edn(&reg, Path::new("/r.md"), &paths).unwrap();
    assert_eq!(
        convert::registry_to_md(&edn, Path::new("/r.edn"), &paths).unwrap(),
        reg
    );
}

#[test]
fn c1_7_migrate_refuses_what_the_other_form_cannot_carry() {
    let paths = Paths::new("/home/u".into(), None);
    let refused = |r: Result<String, String>, word: &str| {
        let e = r.unwrap_err();
        assert!(e.contains(word), "{e}");
    };
    refused(
        convert::project_to_edn(
            "# X\nStatus: active\nPriority: low\nAutonomy: full\n\n## Design\n\ntext\n",
            Path::new("/P.md"),
        ),
        "`## Design`",
    );
    refused(
        convert::project_to_edn(
            "# X\nStatus: bogus\nPriority: low\nAutonomy: full\n",
            Path::new("/P.md"),
        ),
        "has errors",
    );
    refused(
        convert::registry_to_md(
            "{:projects [{:slug \"a\" :status :active :path \"/a\" :owner \"me\"}]}",
            Path::new("/r.edn"),
            &paths,
        ),
        "`:owner`",
    );
    refused(convert::registry_to_edn("| Slug | Status | Priority | Path | Owner |\n|-|-|-|-|-|\n| a | active | high | /a | me |\n", Path::new("/r.md"), &paths), "columns beyond");
    refused(
        convert::iteration_to_md(
            "{:status :active :stories [{:id \"a-1\" :title \"x\" :points 3}]}",
            Path::new("/i.edn"),
            IterationName::new("1").unwrap(),
        ),
        "`:points`",
    );
}
