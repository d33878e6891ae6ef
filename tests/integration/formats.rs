//! The format readers against realistic files, written the way people and agents write them
//! (tests/fixtures/formats): emoji, mentions, stale sections, extra columns, CRLF, BOMs, code
//! blocks that show `Status: complete` as an example.

use std::path::{Path, PathBuf};

use braids::format::{decode, deliverable, fields, iteration, project, registry};
use braids::model::{
    Autonomy, BeadId, Checkin, IterationStatus, NotificationEvent as Ev, Priority, ProjectStatus,
};
use braids::system::diag::{Diagnostic, Severity};
use braids::system::paths::Paths;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/formats")
}

fn read(rel: &str) -> (PathBuf, String) {
    let p = fixtures().join(rel);
    let bytes = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    (p, decode(&bytes).into_owned())
}

fn paths() -> Paths {
    Paths::new("/home/u".into(), None)
}

/// `(line, severity)` of each diagnostic, to compare in one assertion.
fn where_(d: &[Diagnostic]) -> Vec<(Option<usize>, Severity)> {
    d.iter().map(|d| (d.line, d.severity)).collect()
}

fn every_diagnostic_is_complete(d: &[Diagnostic], section: &str) {
    for d in d {
        assert!(d.section == section || d.section == "4.1", "{d}");
        assert!(!d.message.is_empty() && !d.fix.is_empty(), "{d}");
        assert!(
            !d.message.contains('\n') && !d.fix.contains('\n'),
            "one sentence each: {d}"
        );
    }
}

#[test]
fn c1_1_realistic_registry() {
    let (file, text) = read("registry/registry.md");
    let p = registry::parse_registry(&text, &file, &paths());
    let e: Vec<(&str, Option<ProjectStatus>, Option<Priority>, &str)> = p
        .value
        .entries
        .iter()
        .map(|e| {
            (
                e.slug.as_str(),
                e.status,
                e.priority,
                e.path.to_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        e,
        [
            (
                "braids",
                Some(ProjectStatus::Active),
                Some(Priority::High),
                "/home/u/Projects/braids"
            ),
            (
                "website",
                Some(ProjectStatus::Active),
                Some(Priority::Normal),
                "/home/u/Projects/website"
            ),
            (
                "pipeline",
                Some(ProjectStatus::Paused),
                Some(Priority::Low),
                "/srv/work/pipeline"
            ),
            (
                "mobile",
                Some(ProjectStatus::Blocked),
                Some(Priority::High),
                "/home/u/code/mobile"
            ),
            (
                "old-cli",
                None,
                Some(Priority::Low),
                "/home/u/Projects/old-cli"
            ),
            (
                "docs",
                Some(ProjectStatus::Active),
                Some(Priority::Normal),
                "/home/u/Projects/docs"
            ),
        ]
    );
    let braids = p.value.get("braids").unwrap();
    assert_eq!(
        (braids.raw_path.as_str(), braids.line),
        ("~/Projects/braids", 18)
    );
    assert_eq!(
        where_(&p.diagnostics),
        [
            (Some(22), Severity::Error),
            (Some(24), Severity::Error),
            (Some(25), Severity::Error)
        ]
    );
    assert!(
        p.diagnostics[0].message.contains("never complete"),
        "{}",
        p.diagnostics[0]
    );
    assert!(
        p.diagnostics[1].fix.contains("`website2`"),
        "{}",
        p.diagnostics[1]
    );
    assert!(
        p.diagnostics[2].message.contains("lines 19 and 25"),
        "{}",
        p.diagnostics[2]
    );
    every_diagnostic_is_complete(&p.diagnostics, "1.1");
}

#[test]
fn c1_1_registry_with_crlf_and_bom() {
    let (file, text) = read("registry/registry-crlf-bom.md");
    let p = registry::parse_registry(&text, &file, &paths());
    assert!(p.diagnostics.is_empty(), "{:?}", p.diagnostics);
    let slugs: Vec<&str> = p.value.entries.iter().map(|e| e.slug.as_str()).collect();
    assert_eq!(slugs, ["alpha", "beta"]);
    assert_eq!(p.value.entries[1].line, 6);

    // adding a row keeps CRLF and every existing byte
    let out = registry::upsert_row(
        &text,
        "gamma",
        ProjectStatus::Active,
        Priority::Low,
        "~/Projects/gamma",
    )
    .unwrap();
    assert_eq!(
        out,
        format!("{text}gamma | active | low | ~/Projects/gamma\r\n")
    );
}

#[test]
fn c1_2_bold_bullet_project_with_traps() {
    let (file, text) = read("projects/alpha/.braids/PROJECT.md");
    let p = project::parse_project(&text, &file);
    let c = &p.value;
    assert_eq!(c.name.as_deref(), Some("🚀 Alpha — Realtime Sync Service"));
    assert_eq!(
        c.status,
        Some(ProjectStatus::Active),
        "the code block, comment and quote are not fields"
    );
    assert_eq!(c.priority, Priority::High);
    assert_eq!(c.autonomy, Autonomy::AskFirst);
    assert_eq!((c.max_workers, c.worker_timeout), (2, 5400));
    assert_eq!(c.checkin, Checkin::Weekly);
    assert_eq!(c.channel.as_deref(), Some("discord:#alpha-dev"));
    assert_eq!(c.field("owner").unwrap().value, "@ana");
    assert_eq!(
        c.field("Repo").unwrap().value,
        "https://github.com/example/alpha"
    );
    assert_eq!(
        c.field("autonomy").unwrap().value,
        "ask-first (confirm anything touching prod)"
    );
    assert_eq!(
        c.goal.as_deref(),
        Some("Ship the v1 sync protocol with offline support.\nTarget: end of Q2.")
    );
    assert!(c
        .guardrails
        .as_deref()
        .unwrap()
        .starts_with("- Never force-push to `main`.\n"));
    let n = &c.notifications;
    assert!(n.is_on(Ev::IterationStart) && !n.is_on(Ev::BeadStart) && n.is_on(Ev::BeadComplete));
    assert!(n.is_on(Ev::NoReadyBeads) && n.is_on(Ev::Question) && n.is_on(Ev::Blocker));
    assert_eq!(n.mention(Ev::IterationComplete), Some("<@123>"));
    assert_eq!(n.mention(Ev::BeadComplete), None);
    // only the unknown `deploy` event is reported
    assert_eq!(where_(&p.diagnostics), [(Some(38), Severity::Warning)]);
    assert!(p.diagnostics[0].message.contains("`deploy`"));
    // what a reader sees as fields: the nine at the top, nothing from the traps
    let keys: Vec<&str> = c.fields.iter().map(|f| f.key.as_str()).collect();
    assert_eq!(
        keys,
        [
            "status",
            "priority",
            "autonomy",
            "maxworkers",
            "workertimeout",
            "checkin",
            "channel",
            "owner",
            "repo"
        ]
    );
}

#[test]
fn c1_2_plain_fields_crlf() {
    let (file, text) = read("project/plain-crlf.md");
    assert!(text.contains("\r\n"));
    let p = project::parse_project(&text, &file);
    assert!(p.diagnostics.is_empty(), "{:?}", p.diagnostics);
    let c = &p.value;
    assert_eq!(
        (c.status, c.priority, c.autonomy),
        (Some(ProjectStatus::Paused), Priority::Low, Autonomy::Full)
    );
    assert_eq!(
        (c.max_workers, c.worker_timeout, c.channel.as_deref()),
        (1, 1800, None)
    );
    assert_eq!(c.goal.as_deref(), Some("Keep the marketing site building."));
    assert!(!c.notifications.is_on(Ev::BeadStart) && !c.notifications.is_on(Ev::BeadComplete));
    assert!(c.notifications.is_on(Ev::Question) && c.notifications.is_on(Ev::Blocker));
    assert_eq!(c.field("Status").unwrap().line, 3);
}

#[test]
fn c1_2_field_table_project() {
    let (file, text) = read("project/field-table.md");
    let p = project::parse_project(&text, &file);
    assert!(p.diagnostics.is_empty(), "{:?}", p.diagnostics);
    let c = &p.value;
    assert_eq!(c.name.as_deref(), Some("Mobile App"));
    assert_eq!(
        (c.status, c.priority, c.autonomy),
        (
            Some(ProjectStatus::Blocked),
            Priority::High,
            Autonomy::ResearchOnly
        )
    );
    assert_eq!((c.max_workers, c.worker_timeout), (3, 7200));
    assert_eq!(c.channel.as_deref(), Some("slack:#mobile"));
    assert_eq!(c.field("team").unwrap().value, "mobile-squad");
    assert_eq!(c.field("status").unwrap().line, 8);
    let n = &c.notifications;
    assert!(!n.is_on(Ev::BeadStart));
    assert_eq!(n.mention(Ev::Question), Some("@mobile-lead"));
    assert_eq!(n.mention(Ev::Blocker), Some("<@U999>"));
    assert!(c
        .guardrails
        .as_deref()
        .unwrap()
        .starts_with("1. Research only"));
}

#[test]
fn c1_2_broken_project_gets_defaults_and_line_numbered_errors() {
    let (file, text) = read("project/broken.md");
    let p = project::parse_project(&text, &file);
    let c = &p.value;
    assert_eq!(c.status, None);
    assert_eq!(
        (c.priority, c.autonomy, c.max_workers, c.worker_timeout),
        (Priority::Normal, Autonomy::Full, 1, 3600)
    );
    assert_eq!((c.checkin, c.channel.as_deref()), (Checkin::OnDemand, None));
    assert_eq!(
        c.field("favourite colour").unwrap().value,
        "teal",
        "unknown fields are kept"
    );
    assert!(c.notifications.is_on(Ev::Question) && c.notifications.is_on(Ev::Blocker));
    assert_eq!(
        where_(&p.diagnostics),
        [
            (None, Severity::Error),       // Autonomy missing
            (Some(3), Severity::Error),    // Status complete
            (Some(4), Severity::Error),    // Priority urgent
            (Some(5), Severity::Error),    // MaxWorkers 0
            (Some(6), Severity::Error),    // WorkerTimeout soon
            (Some(7), Severity::Error),    // Checkin hourly
            (Some(9), Severity::Warning),  // Status repeated
            (Some(16), Severity::Error),   // question maybe
            (Some(17), Severity::Warning), // party-time unknown
            (Some(18), Severity::Warning), // blocker empty
        ]
    );
    let m = |i: usize| p.diagnostics[i].to_string();
    assert!(
        m(0).contains("Autonomy") && m(0).contains("default full"),
        "{}",
        m(0)
    );
    assert!(
        m(2).contains("high normal low") && m(2).contains("default normal"),
        "{}",
        m(2)
    );
    assert!(
        m(3).contains("`0`") && m(3).contains("default 1"),
        "{}",
        m(3)
    );
    assert!(
        m(4).contains("`soon`") && m(4).contains("default 3600"),
        "{}",
        m(4)
    );
    assert!(
        m(0).starts_with(&format!("{}: error [1.2]", file.display())),
        "{}",
        m(0)
    );
    assert!(
        m(1).starts_with(&format!("{}:3: error [1.2]", file.display())),
        "{}",
        m(1)
    );
    every_diagnostic_is_complete(&p.diagnostics, "1.2");
}

#[test]
fn c1_2_front_matter_and_bom() {
    let (file, text) = read("project/front-matter.md");
    let p = project::parse_project(&text, &file);
    assert!(p.diagnostics.is_empty(), "{:?}", p.diagnostics);
    assert_eq!(
        (p.value.status, p.value.max_workers),
        (Some(ProjectStatus::Active), 4)
    );
    assert_eq!(p.value.name.as_deref(), Some("Docs"));

    let (file, text) = read("project/bom-only-status.md");
    let p = project::parse_project(&text, &file);
    assert!(p.diagnostics.is_empty(), "{:?}", p.diagnostics);
    assert_eq!(
        (p.value.status, p.value.priority),
        (Some(ProjectStatus::Active), Priority::Low)
    );
    // a BOM the caller did not strip is tolerated too
    let p = project::parse_project(&format!("\u{feff}{text}"), &file);
    assert_eq!(p.value.name.as_deref(), Some("Tiny"));
    assert_eq!(p.value.status, Some(ProjectStatus::Active));
}

#[test]
fn c1_3_iterations_of_a_project() {
    let root = fixtures().join("projects/alpha");
    let dirs: Vec<u32> = iteration::list_iteration_dirs(&root)
        .into_iter()
        .map(|(n, _)| n.number())
        .collect();
    assert_eq!(dirs, [1, 2, 3, 10]);

    let p = iteration::read_iterations(&root);
    let its: Vec<(u32, Option<IterationStatus>)> = p
        .value
        .iter()
        .map(|i| (i.name.number(), i.status))
        .collect();
    assert_eq!(
        its,
        [
            (1, Some(IterationStatus::Complete)),
            (2, Some(IterationStatus::Active)),
            (10, Some(IterationStatus::Planning))
        ]
    );
    assert!(p.value[0].dir.ends_with("iterations/001"));

    let two = &p.value[1];
    let stories: Vec<(&str, &str)> = two
        .stories
        .iter()
        .map(|s| (s.id.as_str(), s.title.as_str()))
        .collect();
    assert_eq!(
        stories,
        [
            ("alpha-g4h", "Local write-ahead log"),
            (
                "alpha-i5j",
                "Conflict resolution (last-writer-wins for now)"
            ),
            ("alpha-k6l", "Resync after reconnect"),
            ("alpha-m7n", "Storage quota warnings"),
            ("alpha-o8p", "Offline indicator in the UI 📴"),
            ("alpha-q9r", "Telemetry for offline sessions"),
        ]
    );
    // `TBD:` may be a bead id or prose: only the tracker can tell (check and the tick ask it)
    let maybe: Vec<(&str, usize)> = two
        .maybe_stories
        .iter()
        .map(|s| (s.id.as_str(), s.line))
        .collect();
    assert_eq!(maybe, [("TBD", 17)]);
    assert_eq!(
        two.guardrails.as_deref(),
        Some("- No schema migrations without a backup.")
    );
    assert!(two.notes.as_deref().unwrap().contains("half capacity"));
    let ten = &p.value[2];
    let ids: Vec<&str> = ten.stories.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, ["alpha-t1u", "alpha-v2w"]);

    let d: Vec<(String, Option<usize>, Severity)> = p
        .diagnostics
        .iter()
        .map(|d| {
            (
                d.path.strip_prefix(&root).unwrap().display().to_string(),
                d.line,
                d.severity,
            )
        })
        .collect();
    assert_eq!(
        d,
        [
            (
                ".braids/iterations/2/ITERATION.md".into(),
                Some(16),
                Severity::Error
            ), // `alpha s10`
            (
                ".braids/iterations/2/ITERATION.md".into(),
                Some(18),
                Severity::Warning
            ), // repeated story
            (
                ".braids/iterations/3/ITERATION.md".into(),
                None,
                Severity::Error
            ), // missing file
        ]
    );
    every_diagnostic_is_complete(&p.diagnostics, "1.3");
}

#[test]
fn c1_3_status_writer_on_real_files() {
    let root = fixtures().join("projects/alpha/.braids/iterations");
    let (_, two) = read("projects/alpha/.braids/iterations/2/ITERATION.md");
    let out = iteration::set_status(&two, IterationStatus::Complete).unwrap();
    assert_eq!(
        out,
        two.replacen("- **Status:** active", "- **Status:** complete", 1)
    );

    let (_, ten) = read("projects/alpha/.braids/iterations/10/ITERATION.md");
    let out = iteration::set_status(&ten, IterationStatus::Active).unwrap();
    assert_eq!(
        out,
        ten.replacen("| Status | planning |", "| Status | active   |", 1)
    );

    let (_, one) = read("projects/alpha/.braids/iterations/001/ITERATION.md");
    assert!(
        iteration::set_status(&one, IterationStatus::Active).is_err(),
        "complete is immutable (4.5)"
    );

    // the file writer, on a copy
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("ITERATION.md");
    std::fs::copy(root.join("2/ITERATION.md"), &copy).unwrap();
    iteration::write_status(&copy, IterationStatus::Complete).unwrap();
    let p = iteration::parse_iteration(
        &std::fs::read_to_string(&copy).unwrap(),
        &copy,
        2,
        dir.path().into(),
    );
    assert_eq!(p.value.status, Some(IterationStatus::Complete));
}

#[test]
fn c1_4_deliverables_of_a_complete_iteration() {
    let dir = fixtures().join("projects/alpha/.braids/iterations/001");
    let bead = |s: &str| BeadId::new(s).unwrap();
    let found = deliverable::find(&dir, &bead("alpha-a1b"));
    assert_eq!(found, [dir.join("a1b-wire-protocol-draft.md")]);
    assert_eq!(
        deliverable::find(&dir, &bead("alpha-zzz")),
        Vec::<PathBuf>::new()
    );

    let (p, text) = read("projects/alpha/.braids/iterations/001/a1b-wire-protocol-draft.md");
    assert!(deliverable::check(&p, &text).is_empty());
    assert_eq!(
        deliverable::summary(&text).as_deref(),
        Some("Drafted the v1 wire protocol: framing, versioning and the resync handshake.\nSee `docs/protocol.md`.")
    );

    let (p, text) = read("projects/alpha/.braids/iterations/001/c2d-Status_Page.md");
    let d = deliverable::check(&p, &text);
    assert_eq!(
        where_(&d),
        [(None, Severity::Error)],
        "a lowercase `## summary` counts; the name does not"
    );
    assert!(d[0].fix.contains("c2d-status-page.md"), "{}", d[0]);

    let (p, text) = read("projects/alpha/.braids/iterations/001/e3f-tick-loop.md");
    let d = deliverable::check(&p, &text);
    assert_eq!(
        where_(&d),
        [(Some(7), Severity::Error)],
        "a Summary with only a TODO comment is empty"
    );
    every_diagnostic_is_complete(&d, "1.4");

    assert_eq!(
        deliverable::file_name(&bead("alpha-a1b"), "Wire protocol draft"),
        "a1b-wire-protocol-draft.md"
    );
}

#[test]
fn fields_helpers_on_real_files() {
    let (file, text) = read("projects/alpha/.braids/PROJECT.md");
    let f = fields::extract(&text, &file, "1.2").value;
    assert_eq!(fields::get(&f, "Max_Workers").unwrap().value, "2");
    assert_eq!(fields::get(&f, "status").unwrap().line, 6);
    assert_eq!(
        fields::section_text(&text, "guardrails").unwrap(),
        "- Never force-push to `main`.\n- Never touch the production database.\n- Ask before adding dependencies."
    );
}
