//! The integrity checks the fault and hostile-input suites run after every run: nothing braids
//! owns is corrupt, and no bead is stranded.

use super::Sandbox;

/// STATUS.md is one whole dashboard: the title once, one `Updated:` line, a section per slug.
pub fn status_md_whole(text: &str, slugs: &[&str]) -> Result<(), String> {
    if !text.starts_with("# braids status\n") {
        let first: String = text.chars().take(60).collect();
        return Err(format!("does not start with the title: {first:?}"));
    }
    if text.matches("# braids status").count() != 1 || text.matches("\nUpdated: ").count() > 1 {
        return Err("two dashboards in one file".into());
    }
    if !text.contains("\nUpdated: ") {
        return Err("no `Updated:` line: not a dashboard a run wrote".into());
    }
    if !text.ends_with('\n') || text.contains('\0') {
        return Err("cut short or binary".into());
    }
    for slug in slugs {
        if !text.contains(&format!("\n## {slug} — ")) {
            return Err(format!("no section for {slug}"));
        }
    }
    Ok(())
}

/// Nothing braids owns is corrupt: the state is JSON with the contract fields, STATUS.md is
/// whole, the registry is as the test wrote it, and each native tracker file still has its
/// items. `slugs` are the projects STATUS.md must show.
#[track_caller]
pub fn assert_intact(s: &Sandbox, registry: &str, slugs: &[&str], items: &[(&str, usize)]) {
    let st = std::fs::read_to_string(s.state_path())
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .expect("1.6 violated: the state file is missing or not JSON");
    for k in ["idleSince", "idleReason", "lastRunAt"] {
        assert!(
            st.get(k).is_some(),
            "1.6 violated: the state lacks {k}: {st}"
        );
    }
    let status = std::fs::read_to_string(s.status_path()).unwrap_or_default();
    if let Err(e) = status_md_whole(&status, slugs) {
        panic!("1.5 violated: STATUS.md is not whole ({e}):\n{status}");
    }
    assert_eq!(
        s.registry_text(),
        registry,
        "1.1: the tick changed the registry"
    );
    for (slug, n) in items {
        assert_eq!(
            s.workplan(slug).len(),
            *n,
            "4.6: {slug}'s WORKPLAN.md lost items:\n{}",
            std::fs::read_to_string(s.project(slug).join(".braids/WORKPLAN.md")).unwrap()
        );
    }
    let leftovers: Vec<String> = std::fs::read_dir(s.braids_dir())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".braids-tmp-"))
        .collect();
    assert!(
        leftovers.is_empty(),
        "temp files left behind: {leftovers:?}"
    );
}

/// Every in_progress native-tracker item is held: by a session record, or by a claim the
/// state remembers (so a later run releases it). Otherwise it is stranded for good.
#[track_caller]
pub fn assert_no_stranded_beads(s: &Sandbox, slugs: &[&str]) {
    let records = s.session_records();
    let claims = s.try_state().map(|st| st.claims).unwrap_or_default();
    for slug in slugs {
        for (id, (status, _)) in s.workplan(slug) {
            if status != "in_progress" {
                continue;
            }
            let label = format!("project:{slug}:{id}");
            let held = records.iter().any(|r| r["label"] == label.as_str());
            let remembered = claims
                .iter()
                .any(|c| c.project == *slug && c.bead.as_str() == id);
            assert!(
                held || remembered,
                "2.1 violated: {label} is in_progress with no worker and no remembered claim, \
                 so no run will ever release it"
            );
        }
    }
}
