//! Check-ins from the tick (PROJECT.md `Checkin`, CONTRACTS 1.2): due by the `[checkin]`
//! time, sent to the Channel through the notifier whatever the Notifications table says, never
//! without a Channel, at most once per period, and remembered across runs in the state file.

mod common;

use chrono::{Datelike, Duration, Utc};
use common::Sandbox;

/// Projects `daily` (Channel #daily), `weekly` (Channel #weekly), `quiet` (daily, no Channel)
/// and `manual` (on-demand, Channel #manual); a notifier that records `{channel} {event}
/// {project} {message}`.
fn setup(sb: &Sandbox, weekday: &str) {
    sb.ok(&["init"]);
    for (slug, checkin, channel) in [
        ("daily", "daily", Some("#daily")),
        ("weekly", "weekly", Some("#weekly")),
        ("quiet", "daily", None),
        ("manual", "on-demand", Some("#manual")),
    ] {
        let mut args = vec!["new", slug, "--tracker", "workplan"];
        if let Some(c) = channel {
            args.extend(["--channel", c]);
        }
        sb.ok(&args);
        sb.set_field(slug, "Checkin", checkin);
    }
    // Every Notifications event off for `daily`: check-ins are not one of them.
    let p = sb.project("daily").join(".braids/PROJECT.md");
    let mut text = std::fs::read_to_string(&p).unwrap();
    text.push_str("\n## Notifications\n\n| Event | Enabled |\n|---|---|\n");
    for e in [
        "iteration-start",
        "bead-start",
        "bead-complete",
        "iteration-complete",
        "no-ready-beads",
        "question",
        "blocker",
    ] {
        text.push_str(&format!("| {e} | off |\n"));
    }
    std::fs::write(&p, text).unwrap();
    sb.write(
        "Projects/daily/.braids/WORKPLAN.md",
        "# WORKPLAN\n\n- [ ] One <!-- id:wp-one -->\n- [x] Two <!-- id:wp-two -->\n",
    );
    sb.iteration(
        "daily",
        2,
        "active",
        &[("wp-one", "One"), ("wp-two", "Two")],
    );
    let notify = sb.script(
        "bin/notify",
        r#"printf '%s|%s|%s|%s\n' "$1" "$2" "$3" "$4" >> "$HOME/notified""#,
    );
    sb.write(
        ".openclaw/braids/config.toml",
        &format!(
            "[worker]\ncommand = [\"/bin/sh\", \"-c\", \"sleep 20\"]\n[notify]\ncommand = [\"{}\", \"{{channel}}\", \"{{event}}\", \"{{project}}\", \"{{message}}\"]\n[checkin]\ntime = \"00:00\"\nweekday = \"{weekday}\"\n",
            notify.display()
        ),
    );
}

fn tick(sb: &Sandbox, args: &[&str]) -> serde_json::Value {
    let mut a = vec!["tick", "--json"];
    a.extend_from_slice(args);
    let o = sb.braids().env("TZ", "UTC").args(&a).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

fn sent(sb: &Sandbox) -> Vec<String> {
    sb.read("notified").lines().map(String::from).collect()
}

fn today() -> &'static str {
    ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
        [Utc::now().weekday().num_days_from_monday() as usize]
}

#[test]
fn c1_2_checkins_go_once_per_period_to_the_channel() {
    let sb = Sandbox::new();
    setup(&sb, today());
    // A dry run sends nothing and records nothing.
    tick(&sb, &["--dry-run"]);
    assert!(sent(&sb).is_empty());

    let r = tick(&sb, &[]);
    assert_eq!(r["checkins"], serde_json::json!(["daily", "weekly"]), "{r}");
    let s = sent(&sb);
    assert_eq!(s.len(), 2, "{s:?}");
    assert_eq!(
        s[0],
        "#daily|checkin|daily|Check-in — daily: iteration 002 (active); beads: 1 open, 1 closed; 1 ready; 1 live worker."
    );
    assert!(
        s[1].starts_with("#weekly|checkin|weekly|Check-in — weekly: "),
        "{s:?}"
    );
    let state = sb.state();
    let at = state["checkins"]["daily"].as_str().expect("recorded");
    assert_eq!(state["checkins"]["weekly"], at);
    assert_eq!(state["lastRunAt"], at);
    assert!(state["checkins"].get("quiet").is_none());
    assert!(state["checkins"].get("manual").is_none());

    // Next runs in the same period (forced past backoff, and as a restarted process would):
    // nothing again.
    tick(&sb, &["--force"]);
    tick(&sb, &["--force"]);
    assert_eq!(sent(&sb).len(), 2);

    // A skipped run sends nothing even when one is due.
    let mut state = sb.state();
    let yesterday = (Utc::now() - Duration::days(1)).to_rfc3339();
    state["checkins"]["daily"] = yesterday.clone().into();
    state["idleSince"] = Utc::now().to_rfc3339().into();
    state["idleReason"] = "no-ready-beads".into();
    state["lastRunAt"] = Utc::now().to_rfc3339().into();
    sb.write(
        ".openclaw/braids/.orchestrator-state.json",
        &serde_json::to_string_pretty(&state).unwrap(),
    );
    let r = tick(&sb, &[]);
    assert_eq!(r["run"], "skipped");
    assert_eq!(sent(&sb).len(), 2);

    // Last sent yesterday: the next full run sends today's, once.
    let r = tick(&sb, &["--force"]);
    assert_eq!(r["checkins"], serde_json::json!(["daily"]), "{r}");
    assert_eq!(sent(&sb).len(), 3);
    assert!(sent(&sb)[2].starts_with("#daily|checkin|daily|"));
    tick(&sb, &["--force"]);
    assert_eq!(sent(&sb).len(), 3);
}

#[test]
fn weekly_waits_for_this_weeks_day() {
    let sb = Sandbox::new();
    // A day later this week; on Sunday there is none, and this week's Monday has passed.
    let later = match today() {
        "sun" => None,
        t => {
            let days = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];
            let i = days.iter().position(|d| *d == t).unwrap();
            Some(days[i + 1])
        }
    };
    setup(&sb, later.unwrap_or("mon"));
    let r = tick(&sb, &[]);
    match later {
        Some(_) => assert_eq!(r["checkins"], serde_json::json!(["daily"]), "{r}"),
        None => assert_eq!(r["checkins"], serde_json::json!(["daily", "weekly"]), "{r}"),
    }
}

#[test]
fn an_undelivered_checkin_is_tried_again() {
    let sb = Sandbox::new();
    setup(&sb, today());
    sb.script("bin/notify", "echo 'channel not found' >&2; exit 1");
    let r = tick(&sb, &[]);
    assert_eq!(r["checkins"], serde_json::json!([]), "{r}");
    assert!(sb.state().get("checkins").is_none());
    sb.script(
        "bin/notify",
        r#"printf '%s|%s\n' "$1" "$2" >> "$HOME/notified""#,
    );
    let r = tick(&sb, &["--force"]);
    assert_eq!(r["checkins"], serde_json::json!(["daily", "weekly"]), "{r}");
    assert_eq!(sent(&sb), ["#daily|checkin", "#weekly|checkin"]);
}
