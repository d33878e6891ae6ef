//! crontab(5) expressions: five fields, names, `@` macros, and the day rule of Vixie cron.
//!
//! braids reads the expression itself, field by field, because the same text goes to three
//! places that must agree: the user's crontab (written back in a plain numeric form every cron
//! accepts), a systemd `OnCalendar=` (which needs the fields, not a matcher) and the daemon's
//! next-run search. The search is [`croner`]'s, which reads crontab(5) syntax natively (0 and 7
//! are Sunday, day-of-month and day-of-week are ORed) and walks DST changes correctly. Only
//! plain crontab(5) syntax is accepted: no seconds or years, and none of croner's `L`, `W`, `#`,
//! `?` extensions, which cron would reject.
//!
//! The day rule, as Debian's cron implements it: when the day-of-month or the day-of-week field
//! starts with `*` (including `*/2`), a day must match both; when neither does, a day matching
//! either fires (`30 4 1,15 * 5` runs on the 1st, the 15th and every Friday).

use std::fmt;

use chrono::{Datelike, NaiveDateTime, TimeZone, Timelike};

/// What is wrong with an expression, in words fit for an error message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{expr}` is not a crontab schedule: {reason}")]
pub struct CronError {
    pub expr: String,
    pub reason: String,
}

/// The five fields, in crontab order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Minute,
    Hour,
    DayOfMonth,
    Month,
    DayOfWeek,
}

impl Kind {
    const ALL: [Kind; 5] = [
        Kind::Minute,
        Kind::Hour,
        Kind::DayOfMonth,
        Kind::Month,
        Kind::DayOfWeek,
    ];

    fn name(self) -> &'static str {
        match self {
            Kind::Minute => "minute",
            Kind::Hour => "hour",
            Kind::DayOfMonth => "day of month",
            Kind::Month => "month",
            Kind::DayOfWeek => "day of week",
        }
    }

    /// Accepted numbers, inclusive; day-of-week accepts 7 for Sunday.
    fn bounds(self) -> (u32, u32) {
        match self {
            Kind::Minute => (0, 59),
            Kind::Hour => (0, 23),
            Kind::DayOfMonth => (1, 31),
            Kind::Month => (1, 12),
            Kind::DayOfWeek => (0, 7),
        }
    }

    fn names(self) -> &'static [&'static str] {
        match self {
            Kind::Month => &[
                "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
            ],
            Kind::DayOfWeek => &["sun", "mon", "tue", "wed", "thu", "fri", "sat"],
            _ => &[],
        }
    }
}

/// One parsed field: the values it allows and how it was written.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Field {
    /// Bit `n` set when value `n` matches (day-of-week: 0..=6, Sunday 0).
    bits: u64,
    /// The text starts with `*`: "unrestricted" for the day rule, as cron decides it.
    star: bool,
    /// The field in numbers (names replaced), as written to a crontab.
    numeric: String,
}

impl Field {
    fn has(&self, v: u32) -> bool {
        self.bits & (1u64 << v) != 0
    }

    fn values(&self, kind: Kind) -> Vec<u32> {
        let (lo, hi) = kind.bounds();
        let hi = if kind == Kind::DayOfWeek { 6 } else { hi };
        (lo..=hi).filter(|v| self.has(*v)).collect()
    }
}

/// A parsed crontab(5) schedule.
#[derive(Clone)]
pub struct CronExpr {
    /// As the user wrote it, whitespace collapsed.
    source: String,
    fields: [Field; 5],
    cron: croner::Cron,
}

impl fmt::Debug for CronExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CronExpr")
            .field("source", &self.source)
            .field("crontab", &self.crontab())
            .finish()
    }
}

/// Equal when they fire at the same times (`0 9 * * 0` and `0 9 * * 7` are equal).
impl PartialEq for CronExpr {
    fn eq(&self, other: &Self) -> bool {
        let key = |e: &CronExpr| {
            e.fields
                .iter()
                .map(|f| (f.bits, f.star))
                .collect::<Vec<_>>()
        };
        key(self) == key(other)
    }
}

impl fmt::Display for CronExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

/// The `@` forms cron knows, as five fields. `@reboot` is not a schedule and is refused.
fn macro_fields(word: &str) -> Option<&'static str> {
    Some(match word.to_ascii_lowercase().as_str() {
        "@yearly" | "@annually" => "0 0 1 1 *",
        "@monthly" => "0 0 1 * *",
        "@weekly" => "0 0 * * 0",
        "@daily" | "@midnight" => "0 0 * * *",
        "@hourly" => "0 * * * *",
        _ => return None,
    })
}

impl CronExpr {
    /// Parses five fields or an `@` macro.
    pub fn parse(text: &str) -> Result<CronExpr, CronError> {
        let source = text.split_whitespace().collect::<Vec<_>>().join(" ");
        let err = |reason: String| CronError {
            expr: source.clone(),
            reason,
        };
        if source.is_empty() {
            return Err(err("it is empty".into()));
        }
        let body = if source.starts_with('@') {
            match macro_fields(&source) {
                Some(f) => f.to_string(),
                None if source.eq_ignore_ascii_case("@reboot") => {
                    return Err(err("@reboot runs once at boot, not on a schedule".into()))
                }
                None => {
                    return Err(err(
                        "the @ forms are @hourly, @daily, @midnight, @weekly, @monthly, @yearly and @annually"
                            .into(),
                    ))
                }
            }
        } else {
            source.clone()
        };
        let parts: Vec<&str> = body.split(' ').collect();
        if parts.len() != 5 {
            return Err(err(format!(
                "it has {} field{}; crontab schedules have five (minute hour day-of-month month day-of-week), without seconds",
                parts.len(),
                if parts.len() == 1 { "" } else { "s" }
            )));
        }
        let mut fields = Vec::with_capacity(5);
        for (kind, part) in Kind::ALL.iter().zip(&parts) {
            fields
                .push(parse_field(*kind, part).map_err(|r| err(format!("{}: {r}", kind.name())))?);
        }
        let fields: [Field; 5] = fields.try_into().expect("five fields");
        if let Some(why) = never_fires(&fields) {
            return Err(err(why));
        }
        let pattern = croner_pattern(&fields);
        let cron = croner::parser::CronParser::builder()
            .seconds(croner::parser::Seconds::Disallowed)
            .year(croner::parser::Year::Disallowed)
            .build()
            .parse(&pattern)
            .map_err(|e| err(format!("croner refused `{pattern}`: {e}")))?;
        Ok(CronExpr {
            source,
            fields,
            cron,
        })
    }

    /// The five fields in numbers, for a crontab line: names replaced, `@` macros expanded.
    pub fn crontab(&self) -> String {
        self.fields
            .iter()
            .map(|f| f.numeric.as_str())
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Whether both day fields are restricted, so that a day matching either one fires.
    pub fn days_ored(&self) -> bool {
        !self.fields[2].star && !self.fields[4].star
    }

    /// Whether a wall-clock minute matches (seconds are ignored): the reference the other
    /// evaluators (croner, systemd) are tested against.
    pub fn matches(&self, t: NaiveDateTime) -> bool {
        let [min, hour, dom, mon, dow] = &self.fields;
        if !(min.has(t.minute()) && hour.has(t.hour()) && mon.has(t.month())) {
            return false;
        }
        let d = dom.has(t.day());
        let w = dow.has(t.weekday().num_days_from_sunday());
        if self.days_ored() {
            d || w
        } else {
            d && w
        }
    }

    /// The first matching minute strictly after `after`, in `after`'s time zone.
    pub fn next_after<Tz: TimeZone>(
        &self,
        after: &chrono::DateTime<Tz>,
    ) -> Option<chrono::DateTime<Tz>> {
        self.cron.find_next_occurrence(after, false).ok()
    }

    /// systemd `OnCalendar=` expressions that together fire exactly when this does (several
    /// `OnCalendar=` lines in one timer are ORed, which is how the day rule's OR is written).
    pub fn on_calendar(&self) -> Vec<String> {
        let [min, hour, dom, mon, dow] = &self.fields;
        let time = format!(
            "{}:{}:00",
            compact(&hour.values(Kind::Hour), 0, 23),
            compact(&min.values(Kind::Minute), 0, 59)
        );
        let month = compact(&mon.values(Kind::Month), 1, 12);
        let days = compact(&dom.values(Kind::DayOfMonth), 1, 31);
        let weekdays = weekday_list(&dow.values(Kind::DayOfWeek));
        let with_weekdays = |w: &Option<String>, d: &str| match w {
            Some(w) => format!("{w} *-{month}-{d} {time}"),
            None => format!("*-{month}-{d} {time}"),
        };
        if self.days_ored() {
            vec![with_weekdays(&weekdays, "*"), with_weekdays(&None, &days)]
        } else {
            vec![with_weekdays(&weekdays, &days)]
        }
    }
}

fn parse_field(kind: Kind, text: &str) -> Result<Field, String> {
    let (lo, hi) = kind.bounds();
    let mut bits = 0u64;
    let mut numeric = Vec::new();
    for item in text.split(',') {
        if item.is_empty() {
            return Err(format!("`{text}` has an empty list item"));
        }
        let (range, step) = match item.split_once('/') {
            Some((r, s)) => {
                let step: u32 = s
                    .parse()
                    .map_err(|_| format!("`{s}` in `{item}` is not a step (a positive number)"))?;
                if step == 0 {
                    return Err(format!("`{item}` has a step of 0"));
                }
                (r, Some(step))
            }
            None => (item, None),
        };
        let (start, end, shown) = if range == "*" {
            (lo, hi, "*".to_string())
        } else if let Some((a, b)) = range.split_once('-') {
            let a = value(kind, a)?;
            let mut b = value(kind, b)?;
            // `fri-sun`: Sunday closing a range is 7.
            if kind == Kind::DayOfWeek && b == 0 && a > 0 {
                b = 7;
            }
            if a > b {
                return Err(format!("`{range}` runs backwards; write it as a list"));
            }
            (a, b, format!("{a}-{b}"))
        } else {
            if step.is_some() {
                return Err(format!(
                    "`{item}`: a step needs a range or `*` before it (`{range}-{hi}/…` or `*/…`)"
                ));
            }
            let v = value(kind, range)?;
            (v, v, v.to_string())
        };
        let step_v = step.unwrap_or(1);
        let mut v = start;
        while v <= end {
            let bit = if kind == Kind::DayOfWeek && v == 7 {
                0
            } else {
                v
            };
            bits |= 1u64 << bit;
            v += step_v;
        }
        numeric.push(match step {
            Some(s) => format!("{shown}/{s}"),
            None => shown,
        });
    }
    Ok(Field {
        bits,
        star: text.starts_with('*'),
        numeric: numeric.join(","),
    })
}

/// A number or (month, day of week) a three-letter name, within the field's bounds.
fn value(kind: Kind, s: &str) -> Result<u32, String> {
    let (lo, hi) = kind.bounds();
    let lower = s.to_ascii_lowercase();
    if let Some(i) = kind.names().iter().position(|n| *n == lower) {
        return Ok(i as u32 + if kind == Kind::Month { 1 } else { 0 });
    }
    let v: u32 = s.parse().map_err(|_| {
        if kind.names().is_empty() {
            format!("`{s}` is not a number")
        } else {
            format!(
                "`{s}` is neither a number nor a name ({})",
                kind.names().join(", ")
            )
        }
    })?;
    if v < lo || v > hi {
        return Err(format!("{v} is outside {lo}-{hi}"));
    }
    Ok(v)
}

/// Why a schedule can never fire, e.g. `0 0 30 2 *`.
fn never_fires(f: &[Field; 5]) -> Option<String> {
    let (dom, mon, dow) = (&f[2], &f[3], &f[4]);
    let ored = !dom.star && !dow.star;
    if ored || dow.bits & 0x7f == 0 {
        return None;
    }
    // ANDed: some selected month must have a selected day.
    let longest = |m: u32| match m {
        2 => 29,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    };
    let possible = mon
        .values(Kind::Month)
        .into_iter()
        .any(|m| (1..=longest(m)).any(|d| dom.has(d)));
    (!possible).then(|| "no selected month has any of the selected days".to_string())
}

/// The pattern croner reads. croner treats only a bare `*` as unrestricted, where cron treats
/// any field starting with `*` that way; croner's `+` day-of-week prefix (AND) closes the gap.
fn croner_pattern(f: &[Field; 5]) -> String {
    let (dom, dow) = (&f[2], &f[4]);
    let and = (dom.star || dow.star) && dom.numeric != "*" && dow.numeric != "*";
    format!(
        "{} {} {} {} {}{}",
        f[0].numeric,
        f[1].numeric,
        dom.numeric,
        f[3].numeric,
        if and { "+" } else { "" },
        dow.numeric
    )
}

/// A set of values as systemd writes a calendar component: `*`, `start/step`, or a list of
/// values and `a..b` runs.
fn compact(values: &[u32], lo: u32, hi: u32) -> String {
    if values.len() as u32 == hi - lo + 1 {
        return "*".into();
    }
    if values.len() >= 2 {
        let step = values[1] - values[0];
        let regular = values.windows(2).all(|w| w[1] - w[0] == step);
        let last = *values.last().expect("non-empty");
        if regular && step > 1 && last + step > hi {
            return format!("{:02}/{step}", values[0]);
        }
    }
    runs(values, |v| format!("{v:02}"))
}

/// Consecutive runs of three or more as `a..b`, others listed.
fn runs(values: &[u32], show: impl Fn(u32) -> String) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < values.len() {
        let mut j = i;
        while j + 1 < values.len() && values[j + 1] == values[j] + 1 {
            j += 1;
        }
        if j - i >= 2 {
            out.push(format!("{}..{}", show(values[i]), show(values[j])));
        } else {
            out.extend(values[i..=j].iter().map(|v| show(*v)));
        }
        i = j + 1;
    }
    out.join(",")
}

/// Days of the week (0 = Sunday) in systemd's Monday-first order; `None` for every day.
fn weekday_list(days: &[u32]) -> Option<String> {
    if days.len() == 7 {
        return None;
    }
    const NAMES: [&str; 7] = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];
    let monday_first: Vec<u32> = days.iter().map(|d| (d + 6) % 7).collect::<Vec<_>>();
    let mut sorted = monday_first;
    sorted.sort_unstable();
    Some(runs(&sorted, |i| NAMES[i as usize].to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{FixedOffset, NaiveDate, Utc};

    fn at(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> chrono::DateTime<Utc> {
        Utc.with_ymd_and_hms(y, mo, d, h, mi, 0).unwrap()
    }

    fn next_n(expr: &str, from: chrono::DateTime<Utc>, n: usize) -> Vec<String> {
        let e = CronExpr::parse(expr).unwrap();
        let mut t = from;
        let mut out = vec![];
        for _ in 0..n {
            t = e.next_after(&t).unwrap();
            out.push(t.format("%a %Y-%m-%d %H:%M").to_string());
        }
        out
    }

    // 2026-01-01 is a Thursday.
    fn base() -> chrono::DateTime<Utc> {
        at(2026, 1, 1, 0, 0)
    }

    #[test]
    fn every_five_minutes() {
        assert_eq!(
            next_n("*/5 * * * *", at(2026, 1, 1, 0, 3), 3),
            [
                "Thu 2026-01-01 00:05",
                "Thu 2026-01-01 00:10",
                "Thu 2026-01-01 00:15"
            ]
        );
    }

    #[test]
    fn sunday_is_0_and_7() {
        let sun = ["Sun 2026-01-04 09:00", "Sun 2026-01-11 09:00"];
        assert_eq!(next_n("0 9 * * 0", base(), 2), sun);
        assert_eq!(next_n("0 9 * * 7", base(), 2), sun);
        assert_eq!(next_n("0 9 * * sun", base(), 2), sun);
        assert_eq!(next_n("0 9 * * SUN", base(), 2), sun);
        assert_eq!(
            CronExpr::parse("0 9 * * 0").unwrap(),
            CronExpr::parse("0 9 * * 7").unwrap()
        );
    }

    #[test]
    fn weekdays_one_to_five() {
        assert_eq!(
            next_n("30 8 * * 1-5", base(), 4),
            [
                "Thu 2026-01-01 08:30",
                "Fri 2026-01-02 08:30",
                "Mon 2026-01-05 08:30",
                "Tue 2026-01-06 08:30"
            ]
        );
        assert_eq!(
            next_n("30 8 * * mon-fri", base(), 4),
            next_n("30 8 * * 1-5", base(), 4)
        );
    }

    #[test]
    fn weekend_lists_and_ranges_through_sunday() {
        let weekend = [
            "Sat 2026-01-03 12:00",
            "Sun 2026-01-04 12:00",
            "Sat 2026-01-10 12:00",
        ];
        assert_eq!(next_n("0 12 * * sun,sat", base(), 3), weekend);
        assert_eq!(next_n("0 12 * * 6,0", base(), 3), weekend);
        assert_eq!(next_n("0 12 * * 6-7", base(), 3), weekend);
        assert_eq!(next_n("0 12 * * sat-sun", base(), 3), weekend);
        assert_eq!(
            next_n("0 12 * * fri-sun", base(), 3),
            [
                "Fri 2026-01-02 12:00",
                "Sat 2026-01-03 12:00",
                "Sun 2026-01-04 12:00"
            ]
        );
    }

    #[test]
    fn day_of_month_or_day_of_week_when_both_restricted() {
        // crontab(5): "30 4 1,15 * 5" runs on the 1st and 15th of each month, plus every Friday.
        assert_eq!(
            next_n("30 4 1,15 * 5", base(), 5),
            [
                "Thu 2026-01-01 04:30",
                "Fri 2026-01-02 04:30",
                "Fri 2026-01-09 04:30",
                "Thu 2026-01-15 04:30",
                "Fri 2026-01-16 04:30"
            ]
        );
        let e = CronExpr::parse("30 4 1,15 * 5").unwrap();
        assert!(e.days_ored());
        assert_eq!(
            e.on_calendar(),
            ["Fri *-*-* 04:30:00", "*-*-01,15 04:30:00"]
        );
    }

    #[test]
    fn a_star_day_field_means_and_even_with_a_step() {
        // Only one field restricted: the other is `*`, so just that field counts.
        assert_eq!(
            next_n("0 0 13 * *", base(), 2),
            ["Tue 2026-01-13 00:00", "Fri 2026-02-13 00:00"]
        );
        assert_eq!(next_n("0 0 * * 5", base(), 1), ["Fri 2026-01-02 00:00"]);
        // cron treats `*/2` as unrestricted for the day rule, so this is odd days AND Fridays.
        let e = CronExpr::parse("0 0 */2 * 5").unwrap();
        assert!(!e.days_ored());
        assert_eq!(
            next_n("0 0 */2 * 5", base(), 3),
            [
                "Fri 2026-01-09 00:00",
                "Fri 2026-01-23 00:00",
                "Fri 2026-02-13 00:00"
            ]
        );
        assert_eq!(e.on_calendar(), ["Fri *-*-01/2 00:00:00"]);
    }

    #[test]
    fn friday_the_13th_needs_both_only_with_a_star() {
        // Both restricted: the 13th OR any Friday.
        assert_eq!(
            next_n("0 0 13 * fri", base(), 3),
            [
                "Fri 2026-01-02 00:00",
                "Fri 2026-01-09 00:00",
                "Tue 2026-01-13 00:00"
            ]
        );
    }

    #[test]
    fn months_names_and_macros() {
        assert_eq!(
            next_n("0 6 1 jan,jul *", base(), 2),
            ["Thu 2026-01-01 06:00", "Wed 2026-07-01 06:00"]
        );
        let m = |s: &str| CronExpr::parse(s).unwrap().crontab();
        assert_eq!(m("@hourly"), "0 * * * *");
        assert_eq!(m("@daily"), "0 0 * * *");
        assert_eq!(m("@midnight"), "0 0 * * *");
        assert_eq!(m("@weekly"), "0 0 * * 0");
        assert_eq!(m("@monthly"), "0 0 1 * *");
        assert_eq!(m("@yearly"), "0 0 1 1 *");
        assert_eq!(m("@annually"), "0 0 1 1 *");
        assert_eq!(m("0 9 * JAN-mar Mon,Wed-fri"), "0 9 * 1-3 1,3-5");
        assert_eq!(m("*/15   9-17  *  *  sun-sat"), "*/15 9-17 * * 0-6");
        assert_eq!(next_n("@weekly", base(), 1), ["Sun 2026-01-04 00:00"]);
    }

    #[test]
    fn steps_on_ranges_and_lists() {
        assert_eq!(
            next_n("0-10/5,30 1 * * *", base(), 4),
            [
                "Thu 2026-01-01 01:00",
                "Thu 2026-01-01 01:05",
                "Thu 2026-01-01 01:10",
                "Thu 2026-01-01 01:30"
            ]
        );
    }

    #[test]
    fn leap_day() {
        assert_eq!(
            next_n("0 0 29 2 *", base(), 2),
            ["Tue 2028-02-29 00:00", "Sun 2032-02-29 00:00"]
        );
    }

    #[test]
    fn fixed_offsets() {
        let tz = FixedOffset::east_opt(5 * 3600 + 1800).unwrap();
        let from = tz.with_ymd_and_hms(2026, 1, 1, 8, 59, 0).unwrap();
        let e = CronExpr::parse("0 9 * * *").unwrap();
        let n = e.next_after(&from).unwrap();
        assert_eq!(n.to_rfc3339(), "2026-01-01T09:00:00+05:30");
    }

    #[test]
    fn refusals_say_why() {
        for (bad, why) in [
            ("", "empty"),
            ("* * * *", "four fields"),
            ("0 * * * * *", "six fields"),
            ("60 * * * *", "outside 0-59"),
            ("* 24 * * *", "outside 0-23"),
            ("* * 0 * *", "outside 1-31"),
            ("* * * 13 *", "outside 1-12"),
            ("* * * * 8", "outside 0-7"),
            ("*/0 * * * *", "step of 0"),
            ("5/10 * * * *", "needs a range"),
            ("10-5 * * * *", "backwards"),
            ("* * * * mon-sux", "neither a number nor a name"),
            ("* * L * *", "not a number"),
            ("* * * * 5#3", "neither a number"),
            ("* * ? * *", "not a number"),
            ("1,,2 * * * *", "empty list item"),
            ("0 0 30 2 *", "no selected month"),
            ("@reboot", "once at boot"),
            ("@often", "@ forms"),
        ] {
            let e = CronExpr::parse(bad).unwrap_err().to_string();
            assert!(
                e.contains(why)
                    || (why == "four fields" && e.contains("4 fields"))
                    || (why == "six fields" && e.contains("6 fields")),
                "{bad}: {e}"
            );
        }
        // Impossible as a day-of-month, but ORed with a weekday it still fires.
        assert!(CronExpr::parse("0 0 30 2 mon").is_ok());
    }

    #[test]
    fn on_calendar_forms() {
        let c = |s: &str| CronExpr::parse(s).unwrap().on_calendar();
        assert_eq!(c("*/5 * * * *"), ["*-*-* *:00/5:00"]);
        assert_eq!(c("* * * * *"), ["*-*-* *:*:00"]);
        assert_eq!(c("0 9 * * 1-5"), ["Mon..Fri *-*-* 09:00:00"]);
        assert_eq!(c("0 12 * * 0,6"), ["Sat,Sun *-*-* 12:00:00"]);
        assert_eq!(c("0 12 * * 0,1,2,6"), ["Mon,Tue,Sat,Sun *-*-* 12:00:00"]);
        assert_eq!(c("15,45 8-18 1 1,4,7,10 *"), ["*-01/3-01 08..18:15/30:00"]);
        assert_eq!(
            c("5,6,7,20 1,2 * 2,3,5 *"),
            ["*-02,03,05-* 01,02:05..07,20:00"]
        );
        assert_eq!(c("@monthly"), ["*-*-01 00:00:00"]);
        assert_eq!(c("0 */6 * * *"), ["*-*-* 00/6:00:00"]);
        assert_eq!(c("0 1-23/2 * * *"), ["*-*-* 01/2:00:00"]);
    }

    #[test]
    fn matcher_agrees_with_croner_over_a_year() {
        // The reference matcher (cron's rule) against croner's search, minute by minute where
        // it matters: every fire time croner finds matches, and nothing in between does.
        for expr in [
            "30 4 1,15 * 5",
            "0 0 */2 * 5",
            "0 0 13 * */1",
            "*/20 9-17 * * mon-fri",
            "0 12 * * sun,sat",
            "0 0 1-7 * 1",
            "0 0 29 2 *",
            "59 23 31 * *",
        ] {
            let e = CronExpr::parse(expr).unwrap();
            let mut t = at(2026, 1, 1, 0, 0);
            let end = at(2027, 1, 1, 0, 0);
            let mut prev = t;
            while let Some(n) = e.next_after(&t).filter(|n| *n < end) {
                assert!(e.matches(n.naive_utc()), "{expr}: croner fired at {n}");
                // Spot-check a minute just before and after each fire.
                for probe in [
                    n - chrono::Duration::minutes(1),
                    n + chrono::Duration::minutes(1),
                ] {
                    if probe > prev && probe < n {
                        assert!(!e.matches(probe.naive_utc()), "{expr}: skipped {probe}");
                    }
                }
                prev = n;
                t = n;
            }
            // And every matching day start in the year was found.
            let mut day = NaiveDate::from_ymd_opt(2026, 1, 1).unwrap();
            while day.year() == 2026 {
                let first = day.and_hms_opt(0, 0, 0).unwrap();
                let day_matches =
                    (0..24 * 60).any(|m| e.matches(first + chrono::Duration::minutes(m)));
                let found = e
                    .next_after(&Utc.from_utc_datetime(&(first - chrono::Duration::minutes(1))))
                    .is_some_and(|n| n.date_naive() == day);
                assert_eq!(day_matches, found, "{expr} on {day}");
                day = day.succ_opt().unwrap();
            }
        }
    }
}
