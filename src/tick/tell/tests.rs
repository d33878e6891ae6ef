use super::*;
use crate::tick::orchestrator_state::IdleReason;

fn now() -> DateTime<Utc> {
    "2026-03-01T12:00:00Z".parse().unwrap()
}

fn told(retention_at: Option<DateTime<Utc>>) -> Told {
    let plan_report = TickReport {
        run: crate::tick::RunType::Full,
        action: crate::tick::Action::Idle,
        idle_reason: Some(IdleReason::NoReadyBeads),
        spawns: vec![],
        zombies: vec![],
        released: vec![],
        pushed: vec![],
        errors: vec!["app: tracker down".into()],
        warnings: vec!["app: story b-9 unknown".into()],
        dry_run: false,
        skip: None,
        next_full_run: None,
        checkins: vec!["app".into()],
        told_before: Default::default(),
    };
    Told {
        report: plan_report,
        sessions: Vec::new(),
        told_no_ready: ["app".to_string()].into(),
        unknown_stories: Default::default(),
        orphans: ["x:1 id".to_string()].into(),
        kill_storm_told: true,
        preflight: [("app".to_string(), "no agent".to_string())].into(),
        retention_at,
        checkins: vec![("app".into(), now())],
    }
}

#[test]
fn what_was_told_is_remembered_in_the_next_state() {
    let before = now() - chrono::Duration::hours(3);
    // (retention ran this run, retention_at before the run, retention_at after)
    let table = [
        (Some(now()), Some(before), Some(now())),
        (None, Some(before), Some(before)),
        (None, None, None),
    ];
    for (ran, was, want) in table {
        let mut next = OrchestratorState {
            retention_at: was,
            ..OrchestratorState::default()
        };
        let (report, _) = told(ran).remember(&mut next);
        assert_eq!(next.retention_at, want, "{ran:?} {was:?}");
        assert_eq!(next.told_no_ready, ["app".to_string()].into());
        assert_eq!(next.orphans, ["x:1 id".to_string()].into());
        assert!(next.kill_storm_told);
        assert_eq!(
            next.preflight.get("app").map(String::as_str),
            Some("no agent")
        );
        assert_eq!(next.checkins.get("app"), Some(&now()));
        // the next run logs at WARN only what is new: this run's errors and warnings
        let told: Vec<&str> = next.told.iter().map(String::as_str).collect();
        assert_eq!(told, ["app: story b-9 unknown", "app: tracker down"]);
        assert_eq!(report.checkins, ["app"]);
    }
}

#[test]
fn a_state_file_written_with_dry_still_loads_the_projects_told_no_ready() {
    let old = r#"{"claims":[],"dry":["app","web"]}"#;
    let state: OrchestratorState = serde_json::from_str(old).unwrap();
    let want: BTreeSet<String> = ["app".to_string(), "web".to_string()].into();
    assert_eq!(state.told_no_ready, want);
    let written = state.to_json();
    assert!(written.contains("\"toldNoReady\""), "{written}");
    assert!(!written.contains("\"dry\""), "{written}");
}
