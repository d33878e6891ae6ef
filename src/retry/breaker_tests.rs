use super::*;
use chrono::TimeZone;

fn t(min: i64) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 1, 12, 0, 0).unwrap() + Duration::minutes(min)
}

fn out(min: i64, project: &str, sig: Option<&str>) -> Outcome {
    Outcome {
        at: t(min),
        project: project.into(),
        passed: sig.is_none(),
        signature: sig.map(str::to_string),
        retry_after_secs: None,
        seen_by_tick: false,
    }
}

const RL: Option<&str> = Some("provider: rate limit");

#[test]
fn c2_14_opens_on_a_shared_signature_and_only_then() {
    let p = BreakerPolicy::default();
    let closed = Breaker::default();
    let cases: Vec<(&str, Vec<Outcome>, bool)> = vec![
        (
            "five rate limits, one project",
            (0..5).map(|i| out(i, "a", RL)).collect(),
            true,
        ),
        (
            "four are not enough",
            (0..4).map(|i| out(i, "a", RL)).collect(),
            false,
        ),
        (
            "a success among them",
            vec![
                out(0, "a", RL),
                out(1, "a", RL),
                out(2, "a", None),
                out(3, "a", RL),
                out(4, "a", RL),
            ],
            false,
        ),
        (
            "two signatures",
            vec![
                out(0, "a", RL),
                out(1, "b", Some("exit 1")),
                out(2, "a", RL),
                out(3, "a", RL),
                out(4, "a", RL),
            ],
            false,
        ),
        (
            "exit 1 in one project is its own",
            (0..5).map(|i| out(i, "a", Some("exit 1"))).collect(),
            false,
        ),
        (
            "exit 1 across projects",
            (0..5)
                .map(|i| out(i, if i % 2 == 0 { "a" } else { "b" }, Some("exit 1")))
                .collect(),
            true,
        ),
        (
            "failures that say nothing",
            (0..5)
                .map(|i| out(i, "a", Some("x")).clone())
                .map(|mut o| {
                    o.signature = None;
                    o.passed = false;
                    o
                })
                .collect(),
            false,
        ),
    ];
    for (name, recent, opens) in cases {
        let (b, tr) = assess(&closed, &recent, &p, t(10));
        assert_eq!(b.open_since.is_some(), opens, "{name}");
        assert_eq!(tr.is_some(), opens, "{name}");
        if opens {
            assert_eq!(b.open_since, Some(recent[recent.len() - 5].at), "{name}");
            assert_eq!(
                b.gate(t(10)),
                Gate::Shut,
                "{name}: no spawn until the first probe"
            );
            assert_eq!(b.gate(t(11)), Gate::Probe, "{name}");
        }
    }
    let off = BreakerPolicy {
        window: 0,
        ..BreakerPolicy::default()
    };
    let five: Vec<Outcome> = (0..5).map(|i| out(i, "a", RL)).collect();
    assert_eq!(
        assess(&closed, &five, &off, t(10)).0,
        closed,
        "window 0 turns it off"
    );
}

#[test]
fn c2_14_probes_at_growing_intervals_and_a_success_closes() {
    let p = BreakerPolicy::default();
    let mut recent: Vec<Outcome> = (0..5).map(|i| out(i, "a", RL)).collect();
    let (mut b, _) = assess(&Breaker::default(), &recent, &p, t(5));
    assert_eq!(b.next_probe, Some(t(6)));
    // the tick lets a probe through at 6 and records it
    b.probing_since = Some(t(6));
    assert_eq!(b.gate(t(7)), Gate::Shut, "one probe in flight at a time");
    assert_eq!(
        assess(&b, &recent, &p, t(7)).0,
        b,
        "no outcome yet: unchanged"
    );
    recent.push(out(8, "b", RL));
    let (b2, tr) = assess(&b, &recent, &p, t(8));
    assert!(tr.is_none());
    assert_eq!(
        (b2.probes, b2.next_probe, b2.probing_since),
        (1, Some(t(10)), None)
    );
    let mut b3 = b2.clone();
    b3.probing_since = Some(t(10));
    recent.push(out(11, "b", RL));
    let (b4, _) = assess(&b3, &recent, &p, t(11));
    assert_eq!(
        (b4.probes, b4.next_probe),
        (2, Some(t(15))),
        "the interval doubles"
    );
    let mut b5 = b4.clone();
    b5.probing_since = Some(t(15));
    recent.push(out(16, "c", None));
    let (b6, tr) = assess(&b5, &recent, &p, t(16));
    assert_eq!(b6, Breaker::default());
    assert_eq!(tr, Some(Transition::Closed { since: t(0) }));
    assert!(tr.unwrap().message(t(16)).contains("16m"));
}

#[test]
fn c2_14_probe_interval_honours_retry_after_and_the_cap() {
    let p = BreakerPolicy::default();
    let mut recent: Vec<Outcome> = (0..5).map(|i| out(i, "a", RL)).collect();
    recent[4].retry_after_secs = Some(900);
    let (b, _) = assess(&Breaker::default(), &recent, &p, t(5));
    assert_eq!(
        b.next_probe,
        Some(t(20)),
        "Retry-After over the one-minute base"
    );
    let mut b = Breaker {
        probes: 20,
        probing_since: Some(t(30)),
        ..b
    };
    recent.push(out(31, "a", RL));
    b = assess(&b, &recent, &p, t(31)).0;
    assert_eq!(b.next_probe, Some(t(61)), "capped at 30 minutes");
}

#[test]
fn c2_14_signatures() {
    let pats: Vec<String> = DEFAULT_PATTERNS.iter().map(|s| s.to_string()).collect();
    let table: Vec<(Option<i32>, bool, &str, Option<&str>, Option<u64>)> = vec![
        (
            Some(1),
            false,
            "Error: 429 Too Many Requests\nRetry-After: 120",
            Some("provider: too many requests"),
            Some(120),
        ),
        (
            Some(1),
            false,
            "anthropic API: Overloaded",
            Some("provider: overloaded"),
            None,
        ),
        (
            Some(75),
            false,
            "",
            Some("provider: exit 75 (try later)"),
            None,
        ),
        (
            Some(75),
            false,
            "retry_after=30",
            Some("provider: exit 75 (try later)"),
            Some(30),
        ),
        (None, true, "working...", Some("timed out"), None),
        (Some(2), false, "tests failed", Some("exit 2"), None),
        (None, false, "", None, None),
    ];
    for (code, timed_out, tail, sig, after) in table {
        let (s, a) = signature(code, timed_out, tail, &pats);
        assert_eq!((s.as_deref(), a), (sig, after), "{tail}");
    }
    assert!(is_provider("provider: overloaded"));
    assert!(!is_provider("exit 1"));
    // What an agent CLI reported: one signature per status, whichever CLI and words.
    assert_eq!(
        provider_signature(Some(429), "API Error: 429 rate_limit_error"),
        "provider: HTTP 429"
    );
    assert_eq!(
        provider_signature(Some(429), "exceeded retry limit"),
        "provider: HTTP 429"
    );
    assert_eq!(
        provider_signature(None, "Overloaded"),
        "provider: overloaded"
    );
    assert!(is_provider(&provider_signature(Some(529), "")));
}

#[test]
fn c2_14_what_the_tick_saw_ends_a_probe_but_never_opens_and_a_lost_probe_is_let_go() {
    let p = BreakerPolicy::default();
    // five stalls and crashes the tick saw, between agents' answers: no outage for the breaker
    let mut recent: Vec<Outcome> = (0..5)
        .map(|i| Outcome {
            seen_by_tick: true,
            ..out(i, "a", Some("stalled"))
        })
        .collect();
    assert_eq!(
        assess(&Breaker::default(), &recent, &p, t(5)).0,
        Breaker::default()
    );
    // rate limits with the tick's observations in between still open it
    for i in 5..10 {
        recent.push(out(i, if i % 2 == 0 { "a" } else { "b" }, RL));
    }
    let (mut b, tr) = assess(&Breaker::default(), &recent, &p, t(10));
    assert!(tr.is_some());
    // the probe's worker hung and was stopped by the tick: that ends the probe as failed
    b.probing_since = Some(t(11));
    recent.push(Outcome {
        seen_by_tick: true,
        ..out(30, "a", Some("stalled"))
    });
    let (b2, _) = assess(&b, &recent, &p, t(30));
    assert_eq!((b2.probing_since, b2.probes), (None, 1));
    // a probe that leaves no outcome at all is let go after PROBE_LOST
    let mut b3 = b2.clone();
    b3.probing_since = Some(t(40));
    let later = t(40) + PROBE_LOST + Duration::minutes(1);
    let (b4, _) = assess(&b3, &recent, &p, later);
    assert_eq!((b4.probing_since, b4.next_probe), (None, Some(later)));
    assert_eq!(b4.gate(later), Gate::Probe);
}

#[test]
fn c2_14_a_probe_whose_worker_is_gone_without_an_answer_is_let_go_at_once() {
    let probing = Breaker {
        open_since: Some(t(0)),
        signature: Some("provider: HTTP 429".into()),
        next_probe: Some(t(5)),
        probing_since: Some(t(5)),
        probes: 1,
    };
    // Its worker still runs: wait for its answer.
    assert_eq!(probe_gone(&probing, &[], true), None);
    // It answered (whatever the answer): the usual assessment decides.
    assert_eq!(probe_gone(&probing, &[out(6, "a", Some("x"))], false), None);
    // Gone without an answer: another probe may go now, not after PROBE_LOST.
    let next = probe_gone(&probing, &[out(4, "a", Some("x"))], false).unwrap();
    assert_eq!(next.probing_since, None);
    assert_eq!(next.gate(t(6)), Gate::Probe);
    assert_eq!(
        next.open_since, probing.open_since,
        "still open until a probe succeeds"
    );
    // Not probing: nothing to let go.
    assert_eq!(probe_gone(&Breaker::default(), &[], false), None);
}
