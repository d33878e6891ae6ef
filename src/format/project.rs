//! PROJECT.md (CONTRACTS 1.2): a project's configuration, as a person or an agent wrote it.
//!
//! The H1 is the name. Fields are read by [`super::fields`] in any of their written forms;
//! Status, Priority and Autonomy are required (a missing one is an error, but defaults still
//! apply: Priority normal, Autonomy full, Status unset), everything else has the defaults of
//! 1.2, and unknown fields are kept, never an error (3.9). An invalid value is an error naming
//! the line, the valid values and the default used instead. `## Goal` and `## Guardrails` are
//! kept as text; `## Notifications` is read in `notifications.rs`.

mod notifications;
pub mod test_command;

use std::fmt;
use std::path::Path;

use crate::model::{Autonomy, Checkin, ParseEnumError, Priority, ProjectStatus};
use crate::system::diag::{Diags, Parsed};

use super::fields::{self, clean_value, normalize_key, Field, RawField};
use super::md::Doc;

pub use notifications::{NotificationSetting, Notifications};

const SECTION: &str = "1.2";

/// MaxWorkers when missing or invalid (1.2).
pub const DEFAULT_MAX_WORKERS: u32 = 1;
/// WorkerTimeout in seconds when missing or invalid (1.2).
pub const DEFAULT_WORKER_TIMEOUT: u64 = 3600;

/// StallTimeout in seconds when missing or invalid: a worker whose agent printed nothing and
/// changed no file for this long is stopped as stalled. 0 turns it off.
pub const DEFAULT_STALL_TIMEOUT: u64 = 15 * 60;

/// Sections whose lines are content, not fields.
const CONTENT_SECTIONS: &[&str] = &["notifications", "goal", "guardrails"];

/// Every field braids reads from PROJECT.md, as docs/files.md spells it.
pub const FIELDS: &[&str] = &[
    "Status",
    "Priority",
    "Autonomy",
    "MaxWorkers",
    "WorkerTimeout",
    "StallTimeout",
    "Checkin",
    "Channel",
    "Workspace",
    "Branch",
    "Hooks",
    "Pipeline",
    "ProtocolState",
    "Tracker",
    "Executor",
    "Backend",
    "Agent",
    "Model",
    "Thinking",
    "Cpus",
    "Memory",
    "Gpus",
    "DailyBudget",
    "Copy",
    "Setup",
    "Sparse",
    "Keep",
    "TestCommand",
    "TestReport",
    "Labels",
    "ProgressLabel",
    "BlockedLabel",
];

/// Settings braids reads from the field list that a person may append at the end of the file,
/// under a content section, where they are not read. Words common in prose (Status, Memory,
/// Channel) are left out: a warning must not cry wolf over a Goal's sentence.
const SETTING_KEYS: &[&str] = &[
    "maxworkers",
    "workertimeout",
    "stalltimeout",
    "autonomy",
    "checkin",
    "workspace",
    "pipeline",
    "backend",
    "cpus",
    "gpus",
    "thinking",
    "dailybudget",
    "tracker",
    "executor",
    "copy",
    "setup",
    "sparse",
    "keep",
];

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectConfig {
    /// The H1.
    pub name: Option<String>,
    pub status: Option<ProjectStatus>,
    pub priority: Priority,
    pub autonomy: Autonomy,
    pub max_workers: u32,
    /// Seconds.
    pub worker_timeout: u64,
    /// Seconds; 0 means no stall detection.
    pub stall_timeout: u64,
    pub checkin: Checkin,
    /// `None` when missing or `none`: notifications are skipped (3.8).
    pub channel: Option<String>,
    pub notifications: Notifications,
    pub guardrails: Option<String>,
    pub goal: Option<String>,
    /// Every field as written, including unknown ones, for per-project overrides.
    pub fields: Vec<Field>,
}

impl Default for ProjectConfig {
    /// The defaults of 1.2, with no status.
    fn default() -> Self {
        ProjectConfig {
            name: None,
            status: None,
            priority: Priority::Normal,
            autonomy: Autonomy::Full,
            max_workers: DEFAULT_MAX_WORKERS,
            worker_timeout: DEFAULT_WORKER_TIMEOUT,
            stall_timeout: DEFAULT_STALL_TIMEOUT,
            checkin: Checkin::OnDemand,
            channel: None,
            notifications: Notifications::default(),
            guardrails: None,
            goal: None,
            fields: Vec::new(),
        }
    }
}

impl ProjectConfig {
    /// The field called `key` (any spelling: `max_workers`, `Max Workers`), known or not.
    pub fn field(&self, key: &str) -> Option<&Field> {
        fields::get(&self.fields, key)
    }

    /// `TestCommand:` (with `TestReport:`), when written and valid; an invalid one is
    /// `braids check`'s error and reads as none here.
    pub fn test_command(&self) -> Option<test_command::TestCommand> {
        let f = self.field("testcommand")?;
        let report = self.field("testreport").map(|r| r.value.as_str());
        test_command::parse_field(&f.value, report).ok()
    }
}

/// Reads `<project_root>/.braids/PROJECT.md`; a missing or unreadable file is an error and the
/// defaults.
pub fn read_project(project_root: &Path) -> Parsed<ProjectConfig> {
    let file = super::layout::project_file(project_root);
    match crate::system::atomic::read(&file) {
        Ok(bytes) => super::layout::parse_project(&super::decode(&bytes), &file),
        Err(e) => {
            let msg = if e.kind() == std::io::ErrorKind::NotFound {
                "PROJECT.md does not exist, so the project's status is unknown and defaults apply"
                    .to_string()
            } else {
                format!("PROJECT.md cannot be read ({e}), so the project's status is unknown and defaults apply")
            };
            let mut diags = Diags::new(&file, SECTION);
            diags.error(
                None,
                msg,
                "create .braids/PROJECT.md with at least Status, Priority and Autonomy (`braids new` writes one)",
            );
            diags.parsed(ProjectConfig::default())
        }
    }
}

/// Reads PROJECT.md text. Never fails; what is missing or invalid gets a default and a
/// diagnostic.
pub fn parse_project(text: &str, file: &Path) -> Parsed<ProjectConfig> {
    let doc = Doc::new(text);
    let mut diags = Diags::new(file, SECTION);
    let raw = fields::first_only(fields::scan(&doc, CONTENT_SECTIONS), &mut diags);
    fields::misspelled(&raw, FIELDS, &mut diags);
    for f in fields::misplaced(&doc, CONTENT_SECTIONS, SETTING_KEYS) {
        diags.warn(
            Some(f.field.line),
            format!(
                "`{}: {}` is inside a section whose lines are text, so it is not read as a setting",
                f.raw_key, f.field.value
            ),
            "move the line up into the field list beside MaxWorkers, above the first `##` section",
        );
    }
    let find = |key: &str| raw.iter().find(|f| f.field.key == key);
    let name = doc
        .headings
        .iter()
        .find(|h| h.level == 1)
        .map(|h| clean_value(doc.heading_title(h)).to_string())
        .filter(|n| !n.is_empty());

    let status = read_enum(
        find("status"),
        "Status",
        "active",
        ProjectStatus::EXPECTED,
        None,
        ProjectStatus::parse,
        &mut diags,
    );
    let priority = read_enum(
        find("priority"),
        "Priority",
        "normal",
        Priority::EXPECTED,
        Some(Priority::Normal),
        Priority::parse,
        &mut diags,
    )
    .unwrap_or_default();
    let autonomy = read_enum(
        find("autonomy"),
        "Autonomy",
        "full",
        Autonomy::EXPECTED,
        Some(Autonomy::Full),
        Autonomy::parse,
        &mut diags,
    )
    .unwrap_or_default();
    let checkin = match find("checkin") {
        None => Checkin::OnDemand,
        f => read_enum(
            f,
            "Checkin",
            "on-demand",
            Checkin::EXPECTED,
            Some(Checkin::OnDemand),
            Checkin::parse,
            &mut diags,
        )
        .unwrap_or_default(),
    };
    let max_workers = read_number(
        find("maxworkers"),
        "MaxWorkers",
        DEFAULT_MAX_WORKERS as u64,
        false,
        u32::MAX as u64,
        &mut diags,
    ) as u32;
    let worker_timeout = read_number(
        find("workertimeout"),
        "WorkerTimeout",
        DEFAULT_WORKER_TIMEOUT,
        true,
        u64::MAX,
        &mut diags,
    );
    let stall = find("stalltimeout");
    let stall_timeout = match stall.map(|f| f.field.value.trim().to_ascii_lowercase()) {
        Some(v) if v == "0" || v == "off" => 0,
        _ => read_number(
            stall,
            "StallTimeout",
            DEFAULT_STALL_TIMEOUT,
            true,
            u64::MAX,
            &mut diags,
        ),
    };
    let channel = find("channel").and_then(|f| parse_channel(&f.field.value));
    if let Some(f) = find("testcommand") {
        if let Err((message, fix)) = test_command::parse_field(&f.field.value, None) {
            diags.error(Some(f.field.line), format!("TestCommand {message}"), fix);
        }
    }

    let notifications = notifications::parse_notifications(&doc, &mut diags);
    let goal = section(&doc, "goal");
    let guardrails = section(&doc, "guardrails");
    let cfg = ProjectConfig {
        name,
        status,
        priority,
        autonomy,
        max_workers,
        worker_timeout,
        stall_timeout,
        checkin,
        channel,
        notifications,
        guardrails,
        goal,
        fields: raw.into_iter().map(|f| f.field).collect(),
    };
    diags.by_line(cfg)
}

fn section(doc: &Doc, name: &str) -> Option<String> {
    let h = doc.find_heading(name)?;
    Some(doc.raw_lines(doc.section_body(h))).filter(|s| !s.is_empty())
}

/// `none`, `-`, empty and the like mean no channel; a trailing `(comment)` is not part of it.
fn parse_channel(raw: &str) -> Option<String> {
    let v = clean_value(raw);
    let v = match v.find(" (") {
        Some(i) if i > 0 => clean_value(&v[..i]),
        _ => v,
    };
    let first = v
        .split(|c: char| c.is_whitespace() || c == '(')
        .next()
        .unwrap_or("")
        .to_ascii_lowercase();
    if v.is_empty()
        || matches!(
            first.as_str(),
            "none" | "-" | "—" | "–" | "n/a" | "na" | "null" | "nil" | "~"
        )
    {
        None
    } else {
        Some(v.to_string())
    }
}

fn is_complete_word(raw: &str) -> bool {
    let n = normalize_key(
        raw.split(|c: char| c.is_whitespace() || c == '(')
            .next()
            .unwrap_or(""),
    );
    matches!(
        n.as_str(),
        "complete" | "completed" | "done" | "finished" | "closed"
    )
}

/// Reads an enumerated field. `default` is `None` only for Status, which has no default.
fn read_enum<T: Copy + fmt::Display>(
    f: Option<&RawField>,
    name: &str,
    example: &str,
    expected: &str,
    default: Option<T>,
    parse: fn(&str) -> Result<T, ParseEnumError>,
    diags: &mut Diags,
) -> Option<T> {
    let expected = expected.trim_end();
    let consequence = match default {
        Some(d) => format!("the default {d} is used"),
        None => "the project's status is unknown".to_string(),
    };
    let Some(f) = f else {
        diags.error(
            None,
            format!("required field {name} is missing, so {consequence}"),
            format!("add the line `{name}: {example}` below the title (valid values: {expected})"),
        );
        return default;
    };
    let value = f.field.value.trim();
    if value.is_empty() {
        diags.error(
            Some(f.field.line),
            format!("field {name} is empty, so {consequence}"),
            format!("write one of {expected} after `{}:`", f.raw_key),
        );
        return default;
    }
    match parse(fields::strip_decor(value)) {
        Ok(v) => Some(v),
        Err(e) => {
            let (message, fix) = if default.is_none() && is_complete_word(value) {
                (
                    format!("{name} `{}` is not valid because a project is never complete (valid: {expected}), so {consequence}", e.value),
                    "write paused to stop scheduling the project".to_string(),
                )
            } else {
                (
                    format!(
                        "{name} `{}` is not one of {expected}, so {consequence}",
                        e.value
                    ),
                    format!("write one of {expected} after `{}:`", f.raw_key),
                )
            };
            diags.error(Some(f.field.line), message, fix);
            default
        }
    }
}

/// Reads a positive integer field; the timeout also takes `s`, `m` and `h` units.
fn read_number(
    f: Option<&RawField>,
    name: &str,
    default: u64,
    seconds: bool,
    max: u64,
    diags: &mut Diags,
) -> u64 {
    let Some(f) = f else {
        return default;
    };
    match parse_positive(&f.field.value, seconds).filter(|&n| n <= max) {
        Some(n) => n,
        None => {
            let (what, fix) = if seconds {
                (
                    "a positive duration",
                    format!(
                        "write seconds or a number with a unit (s, m or h), such as `{name}: 3600`, `90m`, `2h30m` or `1h 30min`"
                    ),
                )
            } else {
                (
                    "a positive integer",
                    format!("write a whole number of 1 or more, such as `{name}: 2`"),
                )
            };
            diags.error(
                Some(f.field.line),
                format!(
                    "{name} `{}` is not {what}, so the default {default} is used",
                    f.field.value.trim()
                ),
                fix,
            );
            default
        }
    }
}

/// `3`, `3600`, `3600s`, `3,600`, `60 min`, `90m`, `1h`, `2h30m`, `2 (keep it low)`; `0`, `-1`,
/// `abc` → `None`.
pub(crate) fn parse_positive(raw: &str, units: bool) -> Option<u64> {
    // `90 minutes, for now`: what follows a comma and a space is a comment.
    let v = clean_value(raw);
    let v = v.split_once(", ").map_or(v, |(head, _)| head);
    if units {
        // `1h 30min`: a duration in several words, read whole rather than cut at the first.
        let all: Vec<&str> = v.split_whitespace().collect();
        for n in (2..=all.len().min(4)).rev() {
            if let Ok(d) = humantime::parse_duration(&all[..n].join(" ")) {
                let rest = all[n..].join(" ");
                return (d.as_secs() > 0 && is_comment(&rest)).then_some(d.as_secs());
            }
        }
    }
    // A number, an optional unit, and then nothing but a comment: `90 minuets` or `3 workers`
    // is a typo to report, never 90 seconds or 3.
    let (first, rest) = split_word(v);
    let first = first.trim_matches(['*', '_', '`']);
    let digits_len = first
        .bytes()
        .take_while(|b| b.is_ascii_digit() || *b == b',' || *b == b'_')
        .count();
    let (num, unit) = first.split_at(digits_len);
    let num = thousands(num)?;
    let (unit, rest) = match (unit.is_empty(), split_word(rest)) {
        (true, (w, after)) if units && multiplier(w).is_some() => (w, after),
        // A count says what it counts: `3 workers`.
        (true, (w, after))
            if !units && matches!(w.to_ascii_lowercase().as_str(), "worker" | "workers") =>
        {
            ("", after)
        }
        (_, _) => (unit, rest),
    };
    if !is_comment(rest) {
        return None;
    }
    let n = if unit.is_empty() {
        num
    } else if units {
        match multiplier(unit) {
            Some(m) => num.checked_mul(m)?,
            // `2h30m`: several units in one word, read by humantime.
            None => humantime::parse_duration(first).ok()?.as_secs(),
        }
    } else {
        return None;
    };
    (n > 0).then_some(n)
}

/// The first word of `v` (cut at white space, `(` or `;`) and what follows it.
fn split_word(v: &str) -> (&str, &str) {
    let v = v.trim_start();
    let end = v
        .find(|c: char| c.is_whitespace() || matches!(c, '(' | ';'))
        .unwrap_or(v.len());
    (&v[..end], v[end..].trim_start())
}

/// What may follow a number: nothing, or a comment in parentheses or after `;`, `#` or a dash.
fn is_comment(rest: &str) -> bool {
    let rest = rest.trim_matches(['*', '_', '`', ' ']);
    rest.is_empty() || rest.starts_with(['(', ';', '#', '-', '\u{2014}', '\u{2013}'])
}

/// Digits with optional `,` thousands separators (`3,600`) or `_`.
fn thousands(s: &str) -> Option<u64> {
    if s.is_empty() || s.starts_with([',', '_']) || s.ends_with([',', '_']) {
        return None;
    }
    if s.contains(',') && !s.split(',').skip(1).all(|g| g.len() == 3) {
        return None;
    }
    let digits: String = s.chars().filter(|c| c.is_ascii_digit()).collect();
    digits.parse().ok()
}

fn multiplier(unit: &str) -> Option<u64> {
    match unit
        .trim_end_matches(['.', ','])
        .to_ascii_lowercase()
        .as_str()
    {
        "s" | "sec" | "secs" | "second" | "seconds" => Some(1),
        "m" | "min" | "mins" | "minute" | "minutes" => Some(60),
        "h" | "hr" | "hrs" | "hour" | "hours" => Some(3600),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::NotificationEvent;
    use crate::system::diag::Severity;

    pub(super) fn parse(text: &str) -> Parsed<ProjectConfig> {
        parse_project(text, Path::new("/p/.braids/PROJECT.md"))
    }

    const FULL: &str = "# My App\n\n- **Status:** active\n- **Priority:** high\n- **Autonomy:** ask-first\n- **MaxWorkers:** 3\n- **WorkerTimeout:** 1800s\n- **Checkin:** daily\n- **Channel:** `#dev`\n- **Owner:** Ana\n\n## Goal\n\nShip v1.\n\n## Guardrails\n\n- Never push to main.\n\n## Notifications\n\n| Event | Enabled |\n|---|---|\n| bead-start | off |\n| question | on (mention <@123>) |\n";

    #[test]
    fn c1_2_a_setting_written_under_a_content_section_is_a_warning() {
        let text = format!("{FULL}- **Backend:** slurm\n- **Memory:** 8G\n");
        let p = parse(&text);
        assert_eq!(p.value.field("backend"), None, "not read as a field");
        let lines = text.lines().count();
        let d: Vec<_> = p
            .diagnostics
            .iter()
            .map(|d| (d.line, d.message.clone()))
            .collect();
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].0, Some(lines - 1));
        assert!(
            d[0].1
                .contains("`Backend: slurm` is inside a section whose lines are text"),
            "{d:?}"
        );
        // Prose in a Goal is not mistaken for a setting.
        let p = parse(&FULL.replace("Ship v1.", "Ship v1. Status: early. Memory: 8G is plenty."));
        assert!(p.diagnostics.is_empty(), "{:?}", p.diagnostics);
    }

    #[test]
    fn c1_2_full_project() {
        let p = parse(FULL);
        assert!(p.diagnostics.is_empty(), "{:?}", p.diagnostics);
        let c = p.value;
        assert_eq!(c.name.as_deref(), Some("My App"));
        assert_eq!(c.status, Some(ProjectStatus::Active));
        assert_eq!(c.priority, Priority::High);
        assert_eq!(c.autonomy, Autonomy::AskFirst);
        assert_eq!((c.max_workers, c.worker_timeout), (3, 1800));
        assert_eq!(c.checkin, Checkin::Daily);
        assert_eq!(c.channel.as_deref(), Some("#dev"));
        assert_eq!(c.goal.as_deref(), Some("Ship v1."));
        assert_eq!(c.guardrails.as_deref(), Some("- Never push to main."));
        assert!(!c.notifications.is_on(NotificationEvent::BeadStart));
        assert!(c.notifications.is_on(NotificationEvent::Question));
        assert!(
            c.notifications.is_on(NotificationEvent::Blocker),
            "not listed means on"
        );
        assert_eq!(
            c.notifications.mention(NotificationEvent::Question),
            Some("<@123>")
        );
        assert_eq!(c.field("owner").map(|f| f.value.as_str()), Some("Ana"));
        assert_eq!(c.field("Max Workers").map(|f| f.line), Some(6));
    }

    #[test]
    fn c1_2_project_defaults() {
        let p = parse("# P\n\nStatus: paused\nPriority: low\nAutonomy: full\n");
        assert!(p.diagnostics.is_empty(), "{:?}", p.diagnostics);
        let c = p.value;
        assert_eq!(
            c,
            ProjectConfig {
                name: Some("P".into()),
                status: Some(ProjectStatus::Paused),
                priority: Priority::Low,
                fields: c.fields.clone(),
                ..ProjectConfig::default()
            }
        );
        assert_eq!(
            (
                c.max_workers,
                c.worker_timeout,
                c.checkin,
                c.channel.clone()
            ),
            (1, 3600, Checkin::OnDemand, None)
        );
        for e in NotificationEvent::ALL {
            assert!(c.notifications.is_on(*e));
        }
    }

    #[test]
    fn c1_2_required_fields_missing() {
        let p = parse("# P\n\nChannel: #x\n");
        let c = &p.value;
        assert_eq!(
            (c.status, c.priority, c.autonomy),
            (None, Priority::Normal, Autonomy::Full)
        );
        let msgs: Vec<&str> = p.diagnostics.iter().map(|d| d.message.as_str()).collect();
        assert_eq!(p.diagnostics.len(), 3, "{msgs:?}");
        assert!(p
            .diagnostics
            .iter()
            .all(|d| d.severity == Severity::Error && d.section == "1.2" && d.line.is_none()));
        assert!(
            msgs[0].contains("Status")
                && msgs[1].contains("Priority")
                && msgs[2].contains("Autonomy")
        );
        assert!(p.diagnostics[1].message.contains("default normal"));
    }

    #[test]
    fn c1_2_invalid_values_use_defaults() {
        let t = "Status: complete\nPriority: urgent\nAutonomy: yolo\nMaxWorkers: 0\nWorkerTimeout: -1\nCheckin: hourly\n";
        let p = parse(t);
        let c = &p.value;
        assert_eq!(c.status, None);
        assert_eq!(
            (c.priority, c.autonomy, c.max_workers, c.worker_timeout),
            (Priority::Normal, Autonomy::Full, 1, 3600)
        );
        assert_eq!(c.checkin, Checkin::OnDemand);
        let lines: Vec<Option<usize>> = p.diagnostics.iter().map(|d| d.line).collect();
        assert_eq!(
            lines,
            [Some(1), Some(2), Some(3), Some(4), Some(5), Some(6)]
        );
        assert!(p.diagnostics[0].message.contains("never complete"));
        assert!(
            p.diagnostics[1].message.contains("high normal low")
                && p.diagnostics[1].message.contains("default normal")
        );
        assert!(p.diagnostics[3].message.contains("default 1"));
        assert!(p.diagnostics[4].message.contains("default 3600"));
        assert!(parse("MaxWorkers: abc\n")
            .diagnostics
            .iter()
            .any(|d| d.message.contains("`abc`")));
    }

    #[test]
    fn c1_2_emoji_before_values() {
        let p =
            parse("- **Status:** 🟢 Active\n- **Priority:** 🔥 high\n- **Autonomy:** ✅ full\n");
        assert!(p.diagnostics.is_empty(), "{:?}", p.diagnostics);
        assert_eq!(
            (p.value.status, p.value.priority),
            (Some(ProjectStatus::Active), Priority::High)
        );
    }

    #[test]
    fn numbers() {
        assert_eq!(parse_positive("3600", true), Some(3600));
        assert_eq!(parse_positive("3600s", true), Some(3600));
        assert_eq!(parse_positive("**3,600** seconds", true), Some(3600));
        assert_eq!(parse_positive("90 min; for now", true), Some(5400));
        assert_eq!(parse_positive("2 — at most", false), Some(2));
        assert_eq!(parse_positive("90 minutes, for now", true), Some(5400));
        assert_eq!(
            parse_positive("4 hours, builds are slow", true),
            Some(14400)
        );
        assert_eq!(parse_positive("2, at most", false), Some(2));
        assert_eq!(parse_positive("1h 30min, a long job", true), Some(5400));
        assert_eq!(parse_positive("60 min", true), Some(3600));
        assert_eq!(parse_positive("1h", true), Some(3600));
        assert_eq!(parse_positive("2 (keep it low)", false), Some(2));
        assert_eq!(parse_positive("2s", false), None);
        // Durations as people write them.
        assert_eq!(parse_positive("90m", true), Some(5400));
        assert_eq!(parse_positive("2h30m", true), Some(9000));
        assert_eq!(parse_positive("1h30min", true), Some(5400));
        assert_eq!(parse_positive("1h 30min", true), Some(5400));
        assert_eq!(parse_positive("1h 30min (long job)", true), Some(5400));
        assert_eq!(parse_positive("2h30m", false), None);
        assert_eq!(parse_positive("3 workers", false), Some(3));
        assert_eq!(parse_positive("3 wrokers", false), None);
        for bad in [
            "0",
            "-1",
            "abc",
            "",
            "1,00",
            "2h30x",
            "0h0m",
            "99999999999999999999999",
            "3.5",
            "90 minuets",
            "1 hourz",
            "1hourz",
            "90 minutes please",
        ] {
            assert_eq!(parse_positive(bad, true), None, "{bad}");
        }
    }

    #[test]
    fn channel_none_forms() {
        for v in ["none", "", "-", "None (skip)", "`none`", "n/a"] {
            assert_eq!(parse(&format!("Channel: {v}\n")).value.channel, None, "{v}");
        }
        assert_eq!(
            parse("Channel: discord:#braids (main)\n")
                .value
                .channel
                .as_deref(),
            Some("discord:#braids")
        );
    }

    #[test]
    fn content_sections_are_not_fields() {
        let p = parse("Status: active\nPriority: high\nAutonomy: full\n\n## Goal\nStatus: complete one day\n\n## Guardrails\n- Priority: safety\n");
        assert_eq!(p.value.status, Some(ProjectStatus::Active));
        assert!(p.diagnostics.is_empty(), "{:?}", p.diagnostics);
        assert_eq!(p.value.fields.len(), 3);
    }
}
