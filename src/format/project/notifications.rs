//! The Notifications section of PROJECT.md (CONTRACTS 1.2, 3.8): a table of events and on/off
//! values in whatever column order and spelling it was written, or a `- event: on` list.
//! Events not listed are on; a value may carry a mention (`on (mention <@123>)`).

use std::collections::{BTreeMap, HashMap};

use crate::model::NotificationEvent;
use crate::system::diag::Diags;

use super::super::fields::{self, clean_value, normalize_key};
use super::super::md::{Doc, Table, FIELD};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotificationSetting {
    pub on: bool,
    /// Such as `<@123>`, appended to the message.
    pub mention: Option<String>,
}

/// The Notifications table; events not listed are on (1.2).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Notifications {
    pub events: BTreeMap<NotificationEvent, NotificationSetting>,
}

impl Notifications {
    /// Whether `event` should be sent; events not listed are on (1.2, 3.8).
    pub fn is_on(&self, event: NotificationEvent) -> bool {
        self.events.get(&event).is_none_or(|s| s.on)
    }

    /// Who to mention with `event`, such as `<@123>`.
    pub fn mention(&self, event: NotificationEvent) -> Option<&str> {
        self.events.get(&event).and_then(|s| s.mention.as_deref())
    }
}

/// Reads `on`/`off` and their spellings, plus a mention: `on (mention <@123>)`.
pub(crate) fn parse_switch(raw: &str) -> Option<(bool, Option<String>)> {
    let s = clean_value(raw);
    let first = s.chars().next()?;
    let end = if !first.is_ascii() && !first.is_alphanumeric() {
        // an emoji, maybe with a variation selector
        s.char_indices()
            .find(|&(i, c)| i > 0 && c != '\u{fe0f}')
            .map(|(i, _)| i)
            .unwrap_or(s.len())
    } else {
        s.find(|c: char| c.is_whitespace() || matches!(c, '(' | ',' | ';' | '—' | '–' | '['))
            .unwrap_or(s.len())
    };
    let (tok, rest) = s.split_at(end);
    let tok: String = tok
        .chars()
        .filter(|&c| c != '\u{fe0f}')
        .collect::<String>()
        .trim_matches(|c| matches!(c, '*' | '_' | '`' | '.' | ':' | '!'))
        .to_lowercase();
    let on = match tok.as_str() {
        "on" | "yes" | "y" | "true" | "enabled" | "enable" | "1" | "✅" | "✔" | "✓" | "☑"
        | "🟢" | "🔔" | "x" => true,
        "off" | "no" | "n" | "false" | "disabled" | "disable" | "0" | "❌" | "✖" | "✗" | "✘"
        | "🚫" | "🔕" | "⛔" | "🔴" => false,
        _ => return None,
    };
    Some((on, find_mention(rest)))
}

fn find_word(hay: &str, word: &str) -> Option<usize> {
    let b = hay.as_bytes();
    let mut from = 0;
    while let Some(i) = hay[from..].find(word) {
        let at = from + i;
        let end = at + word.len();
        let before_ok = at == 0 || !b[at - 1].is_ascii_alphanumeric();
        let after_ok = end == b.len() || !b[end].is_ascii_alphanumeric();
        if before_ok && after_ok {
            return Some(at);
        }
        from = end;
    }
    None
}

/// `(mention <@123>)`, `(ping @alice)`, `<@123>`, `@alice`.
fn find_mention(rest: &str) -> Option<String> {
    let lower = rest.to_ascii_lowercase();
    for kw in ["mention", "ping", "cc"] {
        if let Some(i) = find_word(&lower, kw) {
            let after = rest[i + kw.len()..].trim_start_matches([':', ' ', '\t']);
            let m = after.split([')', ',', ';']).next().unwrap_or("").trim();
            let m = clean_value(m);
            if !m.is_empty() {
                return Some(m.to_string());
            }
        }
    }
    for open in ["<@", "<!", "<#"] {
        if let Some(i) = rest.find(open) {
            if let Some(j) = rest[i..].find('>') {
                return Some(rest[i..=i + j].to_string());
            }
        }
    }
    rest.split_whitespace()
        .find(|w| w.starts_with('@') && w.len() > 1)
        .map(|w| w.trim_end_matches([')', ',', ';', '.']).to_string())
}

pub(super) fn parse_notifications(doc: &Doc, diags: &mut Diags) -> Notifications {
    let mut n = Notifications::default();
    let Some(h) = doc.find_heading("notifications") else {
        return n;
    };
    let body = doc.section_body(h);
    let mut lines: HashMap<NotificationEvent, usize> = HashMap::new();
    if let Some(t) = doc
        .tables(body.clone())
        .into_iter()
        .find(|t| t.header.cells.len() >= 2)
    {
        read_table(doc, &t, diags, &mut n, &mut lines);
    } else {
        // a list instead of a table: `- bead-start: off`
        for i in body {
            if doc.has(i, FIELD) {
                if let Some(f) = fields::line_field(doc, i) {
                    add_event(
                        &f.raw_key,
                        &f.field.value,
                        None,
                        f.field.line,
                        diags,
                        &mut n,
                        &mut lines,
                    );
                }
            }
        }
    }
    n
}

fn read_table(
    doc: &Doc,
    t: &Table,
    diags: &mut Diags,
    n: &mut Notifications,
    lines: &mut HashMap<NotificationEvent, usize>,
) {
    let names: Vec<String> = t
        .header
        .cells
        .iter()
        .map(|c| normalize_key(clean_value(doc.cell(c))))
        .collect();
    let find = |set: &[&str]| names.iter().position(|h| set.contains(&h.as_str()));
    let event_col = find(&[
        "event",
        "events",
        "notification",
        "notifications",
        "type",
        "name",
        "trigger",
    ])
    .unwrap_or(0);
    let mention_col = names
        .iter()
        .position(|h| h.contains("mention") || h == "ping");
    let value_col = find(&[
        "enabled", "enable", "status", "on", "onoff", "state", "value", "active", "send", "notify",
        "setting",
    ])
    .filter(|&c| c != event_col)
    .or_else(|| (0..names.len()).find(|&c| c != event_col && Some(c) != mention_col));
    let Some(value_col) = value_col else {
        diags.error(
            Some(t.header.line + 1),
            "the Notifications table has no on/off column, so every event stays on",
            "add an `Enabled` column with on or off for each event",
        );
        return;
    };
    for row in &t.rows {
        let cell = |i: usize| row.cells.get(i).map(|c| doc.cell(c)).unwrap_or("");
        let event = clean_value(cell(event_col));
        if event.is_empty() {
            continue;
        }
        let mention = mention_col.map(cell);
        add_event(
            event,
            cell(value_col),
            mention,
            row.line + 1,
            diags,
            n,
            lines,
        );
    }
}

fn add_event(
    event_raw: &str,
    value: &str,
    mention_cell: Option<&str>,
    line: usize,
    diags: &mut Diags,
    n: &mut Notifications,
    lines: &mut HashMap<NotificationEvent, usize>,
) {
    let known = NotificationEvent::EXPECTED.trim_end();
    let event = match NotificationEvent::parse(fields::strip_decor(event_raw)) {
        Ok(e) => e,
        Err(_) => {
            diags.warn(
                Some(line),
                format!(
                    "notification event `{}` is unknown, so this row is ignored",
                    clean_value(event_raw)
                ),
                format!("use one of {known}"),
            );
            return;
        }
    };
    if let Some(first) = lines.get(&event) {
        diags.warn(
            Some(line),
            format!("notification event {event} is listed again; the row on line {first} is used"),
            format!("delete line {line} or line {first}"),
        );
        return;
    }
    lines.insert(event, line);
    let value = value.trim();
    let mut setting = match parse_switch(value) {
        Some((on, mention)) => NotificationSetting { on, mention },
        None if value.is_empty() => {
            diags.warn(
                Some(line),
                format!("notification event {event} has no value, so it stays on"),
                "write on or off",
            );
            NotificationSetting {
                on: true,
                mention: None,
            }
        }
        None => {
            diags.error(
                Some(line),
                format!("notification event {event} has value `{value}`, which is not on or off, so it stays on"),
                "write on or off (yes/no, true/false and ✅/❌ also work)",
            );
            NotificationSetting {
                on: true,
                mention: None,
            }
        }
    };
    if let Some(m) = mention_cell.map(clean_value) {
        let lower = m.to_ascii_lowercase();
        if !m.is_empty() && !matches!(lower.as_str(), "-" | "—" | "none" | "n/a" | "no") {
            setting.mention = Some(m.to_string());
        }
    }
    n.events.insert(event, setting);
}

#[cfg(test)]
mod tests {
    use super::super::tests::parse;
    use super::*;
    use crate::system::diag::Severity;

    #[test]
    fn notification_tables_in_many_shapes() {
        let t = "## 🔔 Notifications\n\n| Event | Status | Notes |\n|---|---|---|\n| Iteration start | ✅ | |\n| `bead-complete` | ❌ no | noisy |\n| no_ready_beads | yes | |\n| blocker | on (mention <@&42>) | |\n| deploy | on | |\n| question | maybe | |\n| question | off | |\n";
        let p = parse(t);
        let n = &p.value.notifications;
        assert!(n.is_on(NotificationEvent::IterationStart));
        assert!(!n.is_on(NotificationEvent::BeadComplete));
        assert!(n.is_on(NotificationEvent::NoReadyBeads));
        assert_eq!(n.mention(NotificationEvent::Blocker), Some("<@&42>"));
        assert!(
            n.is_on(NotificationEvent::Question),
            "invalid value keeps the default"
        );
        let notif: Vec<_> = p
            .diagnostics
            .iter()
            .filter(|d| d.line.is_some())
            .map(|d| (d.line.unwrap(), d.severity))
            .collect();
        assert_eq!(
            notif,
            [
                (9, Severity::Warning),
                (10, Severity::Error),
                (11, Severity::Warning)
            ]
        );

        let m = parse("## Notifications\n| Enabled | Event | Mention |\n|-|-|-|\n| false | question | @ana |\n| true | blocker | - |\n");
        let n = &m.value.notifications;
        assert!(!n.is_on(NotificationEvent::Question));
        assert_eq!(n.mention(NotificationEvent::Question), Some("@ana"));
        assert_eq!(n.mention(NotificationEvent::Blocker), None);

        let l = parse("## Notifications\n- bead-start: off\n- question: on (ping @bo)\n");
        assert!(!l.value.notifications.is_on(NotificationEvent::BeadStart));
        assert_eq!(
            l.value.notifications.mention(NotificationEvent::Question),
            Some("@bo")
        );
    }

    #[test]
    fn switches() {
        assert_eq!(parse_switch("✅️"), Some((true, None)));
        assert_eq!(parse_switch("**Off**"), Some((false, None)));
        assert_eq!(
            parse_switch("on (mention <@123>)"),
            Some((true, Some("<@123>".into())))
        );
        assert_eq!(
            parse_switch("yes, cc: @team"),
            Some((true, Some("@team".into())))
        );
        assert_eq!(parse_switch("sometimes"), None);
        assert_eq!(parse_switch(""), None);
    }
}
