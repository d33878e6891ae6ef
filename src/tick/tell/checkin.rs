//! Check-ins: a short progress summary a project sends to its Channel on its own, daily or
//! weekly (PROJECT.md `Checkin`, CONTRACTS 1.2), at most once per period.
//!
//! A check-in is due when the local time has passed the `[checkin] time` today (daily), or this
//! week's `[checkin] weekday` at that time (weekly; weeks start on Monday), and the last one was
//! sent before that instant. `on-demand` is never due. Whether one is due is a pure function
//! ([`is_due`]) of the kind, the last time sent, now, the configured time and a time zone; the
//! tick passes the machine's local zone, tests pass fixed offsets. The last time sent per
//! project is in `.orchestrator-state.json` (`checkins`), written with the rest of the state, so
//! a restart neither repeats a check-in nor skips one.
//!
//! A check-in is its own message, not one of the Notifications-table events: it goes to the
//! project's Channel through the configured notifier whatever that table says (a project that
//! asked for check-ins wants them), and never anywhere without a Channel.

use chrono::{
    DateTime, Datelike, Duration, LocalResult, NaiveDate, NaiveDateTime, NaiveTime, TimeZone, Utc,
    Weekday,
};

use crate::config::CheckinConfig;
use crate::model::Checkin;
use crate::tick::observe::ProjectReport;
use crate::tick::orchestrator_state::OrchestratorState;

/// `[checkin] time` and `weekday`, read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckinTime {
    pub time: NaiveTime,
    pub weekday: Weekday,
}

impl Default for CheckinTime {
    fn default() -> Self {
        CheckinTime {
            time: NaiveTime::from_hms_opt(9, 0, 0).expect("valid"),
            weekday: Weekday::Mon,
        }
    }
}

impl CheckinTime {
    /// Reads the config; a value that cannot be read falls back to its default, with a warning.
    pub fn from_config(c: &CheckinConfig) -> (CheckinTime, Vec<String>) {
        let mut out = CheckinTime::default();
        let mut warnings = Vec::new();
        match NaiveTime::parse_from_str(c.time.trim(), "%H:%M") {
            Ok(t) => out.time = t,
            Err(_) => warnings.push(format!(
                "[checkin] time = {:?} is not HH:MM (24-hour); using 09:00",
                c.time
            )),
        }
        match c.weekday.trim().parse::<Weekday>() {
            Ok(w) => out.weekday = w,
            Err(_) => warnings.push(format!(
                "[checkin] weekday = {:?} is not a day of the week (mon … sun); using mon",
                c.weekday
            )),
        }
        (out, warnings)
    }
}

/// A paused project (in the registry or PROJECT.md) is left alone, check-ins included.
fn paused(r: &ProjectReport) -> bool {
    use crate::model::ProjectStatus;
    r.registry_status == Some(ProjectStatus::Paused)
        || r.project_status == Some(ProjectStatus::Paused)
}

/// A local date and time as an instant. An ambiguous time (the clock went back) is its first
/// occurrence; a time that does not exist (the clock jumped forward) is the first instant
/// after the gap.
pub fn resolve_local<Tz: TimeZone>(tz: &Tz, local: NaiveDateTime) -> DateTime<Utc> {
    let mut t = local;
    for _ in 0..(26 * 60) {
        match tz.from_local_datetime(&t) {
            LocalResult::Single(x) => return x.with_timezone(&Utc),
            LocalResult::Ambiguous(a, b) => return a.min(b).with_timezone(&Utc),
            LocalResult::None => t += Duration::minutes(1),
        }
    }
    // No real zone has a gap this long; treat the time as UTC rather than never firing.
    Utc.from_utc_datetime(&local)
}

/// The instant this period's check-in becomes due: today at `time` (daily), this week's
/// `weekday` at `time` (weekly). `None` for on-demand. It may lie in the future.
pub fn period_start<Tz: TimeZone>(
    kind: Checkin,
    now: DateTime<Utc>,
    at: &CheckinTime,
    tz: &Tz,
) -> Option<DateTime<Utc>> {
    let today: NaiveDate = now.with_timezone(tz).date_naive();
    let day = match kind {
        Checkin::OnDemand => return None,
        Checkin::Daily => today,
        Checkin::Weekly => {
            let monday = today - Duration::days(today.weekday().num_days_from_monday() as i64);
            monday + Duration::days(at.weekday.num_days_from_monday() as i64)
        }
    };
    Some(resolve_local(tz, day.and_time(at.time)))
}

/// Whether a check-in is due now: this period's instant has passed and the last check-in (if
/// any) was sent before it.
pub fn is_due<Tz: TimeZone>(
    kind: Checkin,
    last: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
    at: &CheckinTime,
    tz: &Tz,
) -> bool {
    match period_start(kind, now, at, tz) {
        Some(start) => now >= start && last.is_none_or(|l| l < start),
        None => false,
    }
}

/// The message: `Check-in — My App: iteration 3 (active); beads: 2 open, 1 in_progress,
/// 5 closed; 2 ready; 1 live worker.`
pub fn message(r: &ProjectReport, live_workers: usize) -> String {
    let mut parts: Vec<String> = Vec::new();
    match r.iteration {
        Some((n, Some(s))) => parts.push(format!("iteration {n} ({s})")),
        Some((n, None)) => parts.push(format!("iteration {n}")),
        None => parts.push("no iteration".into()),
    }
    if let Some(counts) = &r.counts {
        let order = ["open", "in_progress", "blocked", "closed"];
        let mut shown: Vec<String> = order
            .iter()
            .filter_map(|k| counts.get(*k).map(|n| format!("{n} {k}")))
            .collect();
        shown.extend(
            counts
                .iter()
                .filter(|(k, _)| !order.contains(&k.as_str()))
                .map(|(k, n)| format!("{n} {k}")),
        );
        if shown.is_empty() {
            parts.push("no beads".into());
        } else {
            parts.push(format!("beads: {}", shown.join(", ")));
        }
    }
    if r.ready > 0 {
        parts.push(format!("{} ready", r.ready));
    }
    parts.push(format!(
        "{live_workers} live worker{}",
        if live_workers == 1 { "" } else { "s" }
    ));
    let mut s = format!("Check-in — {}: {}.", r.name, parts.join("; "));
    if let Some(note) = r.error.as_ref().or(r.note.as_ref()) {
        s.push_str(&format!(" Note: {note}."));
    }
    s
}

/// Sends the check-ins that are due  and returns, per project sent, the
/// time to record. A check-in that could not be delivered is not recorded, so the next full
/// run tries again.
pub fn send_due(
    inst: &crate::config::installation::Installation,
    reports: &[ProjectReport],
    sessions: &[crate::session::Session],
    state: &OrchestratorState,
    now: DateTime<Utc>,
    notifier: &dyn crate::notifier::Notifier,
) -> Vec<(String, DateTime<Utc>)> {
    let wanted: Vec<&ProjectReport> = reports
        .iter()
        .filter(|r| r.checkin != Checkin::OnDemand && !paused(r))
        .collect();
    if wanted.is_empty() {
        return vec![];
    }
    let (at, warnings) = CheckinTime::from_config(&inst.config.checkin);
    for w in warnings {
        tracing::warn!("{w}");
    }
    let mut sent = Vec::new();
    for r in wanted {
        let last = state.checkins.get(&r.slug).copied();
        if !is_due(r.checkin, last, now, &at, &chrono::Local) {
            continue;
        }
        if r.channel.as_deref().is_none_or(|c| c.trim().is_empty()) {
            tracing::debug!(slug = %r.slug, "check-in due but the project has no Channel");
            continue;
        }
        let live = sessions
            .iter()
            .filter(|s| s.running && s.label.slug() == r.slug)
            .count();
        let text = message(r, live);
        if crate::notifier::send_checkin(notifier, r.channel.as_deref(), &r.slug, &text) {
            sent.push((r.slug.clone(), now));
        }
    }
    sent
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::FixedOffset;

    fn utc(d: u32, h: u32, m: u32) -> DateTime<Utc> {
        // March 2026: the 2nd is a Monday.
        Utc.with_ymd_and_hms(2026, 3, d, h, m, 0).unwrap()
    }

    fn at(h: u32, m: u32, w: Weekday) -> CheckinTime {
        CheckinTime {
            time: NaiveTime::from_hms_opt(h, m, 0).unwrap(),
            weekday: w,
        }
    }

    #[test]
    fn due_table_daily_weekly_on_demand() {
        let nine = at(9, 0, Weekday::Mon);
        let wed = at(9, 0, Weekday::Wed);
        let z = FixedOffset::east_opt(0).unwrap();
        use Checkin::*;
        // (kind, last sent, now, config, due)
        type Row = (
            Checkin,
            Option<DateTime<Utc>>,
            DateTime<Utc>,
            CheckinTime,
            bool,
        );
        let table: &[Row] = &[
            (Daily, None, utc(3, 8, 59), nine, false),
            (Daily, None, utc(3, 9, 0), nine, true),
            (Daily, None, utc(3, 23, 59), nine, true),
            (Daily, Some(utc(3, 9, 5)), utc(3, 17, 0), nine, false),
            (Daily, Some(utc(2, 9, 5)), utc(3, 8, 0), nine, false),
            (Daily, Some(utc(2, 9, 5)), utc(3, 9, 1), nine, true),
            (Daily, Some(utc(1, 12, 0)), utc(3, 10, 0), nine, true),
            // A clock set back below the last send: nothing repeats.
            (Daily, Some(utc(3, 9, 5)), utc(3, 9, 2), nine, false),
            // Weekly on Monday (the 2nd and the 9th are Mondays).
            (Weekly, None, utc(2, 8, 0), nine, false),
            (Weekly, None, utc(2, 9, 0), nine, true),
            (Weekly, None, utc(6, 9, 0), nine, true),
            (Weekly, Some(utc(2, 9, 0)), utc(8, 23, 0), nine, false),
            (Weekly, Some(utc(2, 9, 0)), utc(9, 9, 0), nine, true),
            (Weekly, Some(utc(8, 10, 0)), utc(9, 8, 59), nine, false),
            // Weekly on Wednesday: Monday and Tuesday are before this week's instant.
            (Weekly, Some(utc(1, 9, 0)), utc(3, 12, 0), wed, false),
            (Weekly, Some(utc(1, 9, 0)), utc(4, 9, 0), wed, true),
            (Weekly, Some(utc(4, 9, 30)), utc(8, 12, 0), wed, false),
            (OnDemand, None, utc(3, 12, 0), nine, false),
            (OnDemand, Some(utc(1, 0, 0)), utc(30, 12, 0), nine, false),
        ];
        for (i, (kind, last, now, cfg, want)) in table.iter().enumerate() {
            assert_eq!(
                is_due(*kind, *last, *now, cfg, &z),
                *want,
                "row {i}: {kind} last={last:?} now={now}"
            );
        }
    }

    #[test]
    fn local_time_is_the_zone_of_the_offset() {
        let nine = at(9, 0, Weekday::Mon);
        // UTC+10: 09:00 local on the 3rd is 23:00 UTC on the 2nd.
        let east = FixedOffset::east_opt(10 * 3600).unwrap();
        assert!(!is_due(Checkin::Daily, None, utc(2, 22, 59), &nine, &east));
        assert!(is_due(Checkin::Daily, None, utc(2, 23, 0), &nine, &east));
        // UTC-5: 09:00 local is 14:00 UTC.
        let west = FixedOffset::west_opt(5 * 3600).unwrap();
        assert!(!is_due(Checkin::Daily, None, utc(3, 13, 59), &nine, &west));
        assert!(is_due(Checkin::Daily, None, utc(3, 14, 0), &nine, &west));
        // Monday 09:00 in UTC+10 is Sunday 23:00 UTC.
        assert!(is_due(Checkin::Weekly, None, utc(1, 23, 0), &nine, &east));
    }

    /// A zone with a daylight-saving switch, for the DST cases: UTC+1, and UTC+2 from
    /// 2026-03-29 02:00 local (clocks forward) to 2026-10-25 03:00 local (clocks back).
    #[derive(Debug, Clone, Copy)]
    struct Cet;

    impl Cet {
        fn offset_at_utc(utc: &NaiveDateTime) -> FixedOffset {
            let start = NaiveDate::from_ymd_opt(2026, 3, 29)
                .unwrap()
                .and_hms_opt(1, 0, 0)
                .unwrap();
            let end = NaiveDate::from_ymd_opt(2026, 10, 25)
                .unwrap()
                .and_hms_opt(1, 0, 0)
                .unwrap();
            let h = if *utc >= start && *utc < end { 2 } else { 1 };
            FixedOffset::east_opt(h * 3600).unwrap()
        }
    }

    impl TimeZone for Cet {
        type Offset = FixedOffset;
        fn from_offset(_: &FixedOffset) -> Self {
            Cet
        }
        fn offset_from_local_date(&self, _: &NaiveDate) -> LocalResult<FixedOffset> {
            unimplemented!("not used")
        }
        fn offset_from_local_datetime(&self, local: &NaiveDateTime) -> LocalResult<FixedOffset> {
            let one = FixedOffset::east_opt(3600).unwrap();
            let two = FixedOffset::east_opt(7200).unwrap();
            let fits = |o: FixedOffset| {
                Self::offset_at_utc(&(*local - Duration::seconds(o.local_minus_utc() as i64))) == o
            };
            match (fits(one), fits(two)) {
                (true, true) => LocalResult::Ambiguous(two, one),
                (true, false) => LocalResult::Single(one),
                (false, true) => LocalResult::Single(two),
                (false, false) => LocalResult::None,
            }
        }
        fn offset_from_utc_date(&self, _: &NaiveDate) -> FixedOffset {
            unimplemented!("not used")
        }
        fn offset_from_utc_datetime(&self, utc: &NaiveDateTime) -> FixedOffset {
            Self::offset_at_utc(utc)
        }
    }

    fn cet(mo: u32, d: u32, h: u32, m: u32) -> DateTime<Utc> {
        resolve_local(
            &Cet,
            NaiveDate::from_ymd_opt(2026, mo, d)
                .unwrap()
                .and_hms_opt(h, m, 0)
                .unwrap(),
        )
    }

    #[test]
    fn dst_days_fire_once_at_local_time() {
        let nine = at(9, 0, Weekday::Mon);
        // The day the clocks go forward: 09:00 local is 07:00 UTC (it was 08:00 UTC the day before).
        assert_eq!(
            cet(3, 29, 9, 0),
            Utc.with_ymd_and_hms(2026, 3, 29, 7, 0, 0).unwrap()
        );
        assert_eq!(
            cet(3, 28, 9, 0),
            Utc.with_ymd_and_hms(2026, 3, 28, 8, 0, 0).unwrap()
        );
        let sent_28 = cet(3, 28, 9, 0);
        assert!(!is_due(
            Checkin::Daily,
            Some(sent_28),
            cet(3, 29, 8, 59),
            &nine,
            &Cet
        ));
        assert!(is_due(
            Checkin::Daily,
            Some(sent_28),
            cet(3, 29, 9, 0),
            &nine,
            &Cet
        ));
        // The day the clocks go back, 09:00 is after the fold: once.
        let sent = cet(10, 25, 9, 0);
        assert!(!is_due(
            Checkin::Daily,
            Some(sent),
            cet(10, 25, 20, 0),
            &nine,
            &Cet
        ));
        assert!(is_due(
            Checkin::Daily,
            Some(sent),
            cet(10, 26, 9, 0),
            &nine,
            &Cet
        ));
    }

    #[test]
    fn a_time_inside_the_gap_or_the_fold() {
        // 02:30 does not exist on 29 March: the first instant after the gap (03:00 CEST).
        assert_eq!(
            cet(3, 29, 2, 30),
            Utc.with_ymd_and_hms(2026, 3, 29, 1, 0, 0).unwrap()
        );
        // 02:30 happens twice on 25 October: the first time (CEST, 00:30 UTC).
        assert_eq!(
            cet(10, 25, 2, 30),
            Utc.with_ymd_and_hms(2026, 10, 25, 0, 30, 0).unwrap()
        );
        let two_thirty = at(2, 30, Weekday::Sun);
        let first = cet(10, 25, 2, 30);
        assert!(is_due(Checkin::Daily, None, first, &two_thirty, &Cet));
        // Sent at the first 02:30; the repeated 02:30 an hour later is not a new period.
        let second = first + Duration::hours(1);
        assert!(!is_due(
            Checkin::Daily,
            Some(first),
            second,
            &two_thirty,
            &Cet
        ));
        assert!(!is_due(
            Checkin::Weekly,
            Some(first),
            second,
            &two_thirty,
            &Cet
        ));
    }

    #[test]
    fn config_is_read_with_fallbacks() {
        let (t, w) = CheckinTime::from_config(&CheckinConfig {
            time: "17:30".into(),
            weekday: "Friday".into(),
        });
        assert_eq!(t, at(17, 30, Weekday::Fri));
        assert!(w.is_empty());
        let (t, w) = CheckinTime::from_config(&CheckinConfig {
            time: "5pm".into(),
            weekday: "someday".into(),
        });
        assert_eq!(t, CheckinTime::default());
        assert_eq!(w.len(), 2);
    }

    #[test]
    fn message_is_short_and_says_the_numbers() {
        let mut r = ProjectReport {
            slug: "app".into(),
            name: "My App".into(),
            path: "/p/app".into(),
            registry_status: None,
            project_status: None,
            priority: Default::default(),
            autonomy: Default::default(),
            max_workers: 2,
            iteration: Some((
                "003".parse().unwrap(),
                Some(crate::model::IterationStatus::Active),
            )),
            tracker: Some("br"),
            counts: Some(
                [("closed", 5), ("open", 2), ("in_progress", 1)]
                    .iter()
                    .map(|(k, v)| (k.to_string(), *v))
                    .collect(),
            ),
            stories: vec![],
            unknown_stories: None,
            ready: 2,
            ready_out_of_scope: 0,
            note: None,
            error: None,
            problems: vec![],
            blocked: vec![],
            waiting: Default::default(),
            protocol: Vec::new(),
            reviews: Vec::new(),
            checkin: Checkin::Daily,
            channel: Some("#app".into()),
            push_pending: false,
            not_pushed: None,
            pool: None,
            loop_paused: None,
            claw_phase: None,
            config: None,
        };
        assert!(!paused(&r));
        r.registry_status = Some(crate::model::ProjectStatus::Paused);
        assert!(paused(&r), "a paused project sends no check-in");
        r.registry_status = None;
        r.project_status = Some(crate::model::ProjectStatus::Paused);
        assert!(paused(&r));
        r.project_status = None;
        assert_eq!(
            message(&r, 1),
            "Check-in — My App: iteration 003 (active); beads: 2 open, 1 in_progress, 5 closed; 2 ready; 1 live worker."
        );
        r.iteration = None;
        r.counts = None;
        r.ready = 0;
        r.note = Some("no active iteration".into());
        assert_eq!(
            message(&r, 0),
            "Check-in — My App: no iteration; 0 live workers. Note: no active iteration."
        );
    }
}
