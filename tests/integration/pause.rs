//! `braids pause|resume <project>`: the registry row's Status changed in place, every other
//! byte of the file kept; the tick then leaves the project alone, and takes it up again.

use crate::support::{Install, ReportExt};

#[test]
fn pause_and_resume_change_one_cell_and_the_tick_follows() {
    let sb = Install::new().build();
    sb.new_project("app").beads(2).create();
    sb.new_project("lib").beads(1).create();
    // A hand-edited registry: CRLF, an extra column, aligned cells, prose around the table.
    let text = sb.registry_text().replace('\n', "\r\n").replace(
        "| Slug | Status | Priority | Path |",
        "| Slug | Status | Priority | Path |",
    );
    let text = format!("Notes for people.\r\n\r\n{text}\r\nMore notes.\r\n");
    std::fs::write(sb.registry_path(), &text).unwrap();

    let out = sb.ok(&["pause", "app"]);
    assert!(out.contains("app: active → paused"), "{out}");
    let paused = sb.registry_text();
    let changed: Vec<(&str, &str)> = text
        .split("\r\n")
        .zip(paused.split("\r\n"))
        .filter(|(a, b)| a != b)
        .collect();
    assert_eq!(changed.len(), 1, "one line changes: {changed:?}");
    assert!(
        changed[0].1.contains("paused") && changed[0].1.contains("app"),
        "{changed:?}"
    );
    assert_eq!(
        text.len(),
        paused.len(),
        "`active` → `paused`, nothing else"
    );
    let r = sb.tick().force().run();
    assert!(
        r.spawned_beads().iter().all(|b| !b.starts_with("app")),
        "{r:#?}"
    );

    let again = sb.ok(&["pause", "app"]);
    assert!(again.contains("already paused"), "{again}");
    let out = sb.ok(&["resume", "app"]);
    assert!(out.contains("app: paused → active"), "{out}");
    assert_eq!(sb.registry_text(), text, "byte for byte as it was");

    let err = sb.run(&["pause", "nope"]);
    assert_eq!(err.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&err.stderr).contains("no project named nope"));
}
