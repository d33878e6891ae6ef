use super::*;
use chrono::TimeZone;
use std::path::Path;

fn t(min: i64) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 1, 12, 0, 0).unwrap() + Duration::minutes(min)
}

fn policy(retries: u32) -> Policy {
    Policy {
        retries,
        base: Duration::minutes(1),
        cap: Duration::hours(1),
    }
}

fn bead(s: &str) -> BeadId {
    BeadId::new(s).unwrap()
}

#[test]
fn c2_13_delay_doubles_from_the_base_up_to_the_cap() {
    let p = policy(2);
    let table = [(1, 1), (2, 2), (3, 4), (4, 8), (6, 32), (7, 60), (40, 60)];
    for (n, minutes) in table {
        assert_eq!(p.delay(n), Duration::minutes(minutes), "failure {n}");
    }
    let zero = Policy {
        base: Duration::zero(),
        ..p
    };
    assert_eq!(zero.delay(5), Duration::zero());
}

#[test]
fn c2_13_failures_back_off_then_the_breaker_blocks_with_the_last_failures() {
    let p = policy(2);
    let mut a = Attempts::default();
    let dir = Path::new("/p/app");
    let b = bead("app-1");
    let v1 = a.fail(
        dir,
        &b,
        Failure::new(t(0), "exit 1, status failing"),
        &p,
        true,
    );
    assert_eq!(
        v1,
        AfterFailure::Retry {
            not_before: t(1),
            failures: 1
        }
    );
    assert_eq!(a.not_before(dir, &b), Some(t(1)));
    let v2 = a.fail(dir, &b, Failure::new(t(2), "timed out"), &p, true);
    assert_eq!(
        v2,
        AfterFailure::Retry {
            not_before: t(4),
            failures: 2
        }
    );
    match a.fail(dir, &b, Failure::new(t(5), "stalled"), &p, true) {
        AfterFailure::Block { reason, failures } => {
            assert!(reason.starts_with("failed 3 times in a row"), "{reason}");
            assert_eq!(failures.len(), 3);
            for why in ["exit 1, status failing", "timed out", "stalled"] {
                assert!(reason.contains(why), "{reason} lists {why}");
            }
        }
        other => panic!("expected a block, got {other:?}"),
    }
    let after = a.record(dir, &b).cloned().unwrap_or_default();
    assert_eq!(
        (after.failures.len(), after.counted(), after.not_before),
        (0, 0, None),
        "a blocked bead starts afresh when unblocked"
    );
    assert_eq!(after.since_success(), 3, "what a retry forgets");
}

#[test]
fn c2_13_a_success_forgets_and_other_beads_are_apart() {
    let p = policy(1);
    let mut a = Attempts::default();
    let (dir, other) = (Path::new("/p/app"), Path::new("/p/other"));
    let b = bead("app-1");
    let _ = a.fail(dir, &b, Failure::new(t(0), "exit 1"), &p, true);
    let _ = a.fail(other, &b, Failure::new(t(0), "exit 1"), &p, true);
    a.succeed(dir, &b, t(3));
    assert_eq!(a.record(dir, &b), None);
    assert!(
        a.record(other, &b).is_some(),
        "same id, other project: its own record"
    );
    // after the success the next failure is the first again, not the breaker's second
    assert!(matches!(
        a.fail(dir, &b, Failure::new(t(4), "exit 1"), &p, true),
        AfterFailure::Retry { failures: 1, .. }
    ));
}

#[test]
fn c2_13_provider_failures_and_retry_after() {
    let p = policy(0);
    let mut a = Attempts::default();
    let dir = Path::new("/p/app");
    let b = bead("app-1");
    let mut f = Failure::new(t(0), "exit 75");
    f.signature = Some("provider: exit 75 (try later)".into());
    f.retry_after_secs = Some(600);
    // retries 0 would block at the first counted failure; a provider failure never counts
    assert_eq!(
        a.fail(dir, &b, f, &p, true),
        AfterFailure::Retry {
            not_before: t(10),
            failures: 1
        },
        "Retry-After beats the one-minute backoff"
    );
    // while the provider breaker is open no failure counts
    a.breaker.open_since = Some(t(0));
    assert!(matches!(
        a.fail(dir, &b, Failure::new(t(11), "exit 1"), &p, true),
        AfterFailure::Retry { failures: 2, .. }
    ));
    a.breaker.open_since = None;
    assert!(matches!(
        a.fail(dir, &b, Failure::new(t(20), "exit 1"), &p, true),
        AfterFailure::Block { .. }
    ));
}

#[test]
fn failed_since_prune_and_old_files() {
    let p = policy(5);
    let mut a = Attempts::default();
    let dir = Path::new("/p/app");
    let (b1, b2) = (bead("app-1"), bead("app-2"));
    let _ = a.fail(dir, &b1, Failure::new(t(0), "exit 1"), &p, true);
    let _ = a.fail(dir, &b2, Failure::new(t(100), "exit 1"), &p, true);
    assert!(a.failed_since(dir, &b1, t(0)));
    assert!(!a.failed_since(dir, &b1, t(1)));
    a.prune(t(100), Duration::days(1));
    assert!(a.record(dir, &b1).is_some(), "young: kept");
    a.prune(t(100) + Duration::days(2), Duration::days(1));
    assert!(a.beads.is_empty(), "old and not waiting: pruned");
    // unknown fields survive, missing fields default
    let old: Attempts = serde_json::from_str(r#"{"future":{"x":1}}"#).unwrap();
    assert!(old.beads.is_empty());
    assert!(serde_json::to_string(&old).unwrap().contains("future"));
    assert_eq!(a.recent.len(), 2);
    for _ in 0..100 {
        a.succeed(dir, &b1, t(200));
    }
    assert_eq!(a.recent.len(), RECENT, "outcomes are bounded");
}

#[test]
fn store_updates_under_its_lock_and_ignores_garbage() {
    let dir = tempfile::tempdir().unwrap();
    let store = store::Store::in_dir(dir.path());
    assert_eq!(store.load(), Attempts::default());
    std::fs::write(&store.file, "{not json").unwrap();
    assert_eq!(store.load(), Attempts::default(), "garbage reads as empty");
    let v = store
        .update(|a| {
            a.fail(
                Path::new("/p"),
                &bead("p-1"),
                Failure::new(t(0), "x"),
                &policy(3),
                true,
            )
        })
        .unwrap();
    assert!(matches!(v, AfterFailure::Retry { .. }));
    assert_eq!(
        store.load().not_before(Path::new("/p"), &bead("p-1")),
        Some(t(1))
    );
}
