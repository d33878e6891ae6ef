//! Observers that promise to change nothing — `tick --dry-run` and `status` — write nothing,
//! not even the ids the native tracker assigns, yet report the ids a real run will write.

use crate::support::{ReportExt, Sandbox};

#[test]
fn dry_run_and_status_change_no_file() {
    let s = Sandbox::new();
    s.new_project("app").max_workers(2).no_iteration().create();
    let worker = s.script("bin/worker", "cat >/dev/null; sleep 30");
    s.config(&format!(
        "[worker]\ncommand = [{:?}]\n",
        worker.to_str().unwrap()
    ));
    let wp = s.project("app").join(".braids/WORKPLAN.md");
    std::fs::write(&wp, "# Workplan\n\n- [ ] First thing\n- [ ] Second thing\n").unwrap();
    s.iteration("app", 1, "active", &[]);
    let before = std::fs::read(&wp).unwrap();

    let dry = s.tick().dry_run().run();
    let ids = dry.spawned_beads();
    assert_eq!(ids.len(), 2, "{dry:#?}");
    s.ok(&["status"]);
    s.ok(&["status", "--json"]);
    assert_eq!(std::fs::read(&wp).unwrap(), before, "WORKPLAN.md untouched");
    assert!(!s.braids_dir().join(".orchestrator-state.json").exists());
    assert!(
        !s.braids_dir().join("sessions").exists()
            || std::fs::read_dir(s.braids_dir().join("sessions"))
                .unwrap()
                .next()
                .is_none()
    );

    let real_ids = s.tick().run().spawned_beads();
    assert_eq!(
        real_ids, ids,
        "the dry run showed the ids the real run uses"
    );
    let text = std::fs::read_to_string(&wp).unwrap();
    for id in &ids {
        assert!(text.contains(&format!("id:{id}")), "{text}");
    }
}
