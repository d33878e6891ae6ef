//! Check-ins from the tick (PROJECT.md `Checkin`, CONTRACTS 1.2): due by the `[checkin]`
//! time, sent to the Channel through the notifier whatever the Notifications table says, never
//! without a Channel, at most once per period, and remembered across runs in the state file.

use braids::tick::orchestrator_state::IdleReason;
use braids::tick::{RunType, TickReport};
use chrono::{Datelike, Duration, Utc};

use crate::support::{Install, Sandbox};

/// Projects `daily` (Channel #daily), `weekly` (Channel #weekly), `quiet` (daily, no Channel)
/// and `manual` (on-demand, Channel #manual); a notifier that records `{channel} {event}
/// {project} {message}`.
fn setup(weekday: &str) -> Sandbox {
    let sb = Install::new().build();
    for (slug, checkin, channel) in [
        ("daily", "daily", Some("#daily")),
        ("weekly", "weekly", Some("#weekly")),
        ("quiet", "daily", None),
        ("manual", "on-demand", Some("#manual")),
    ] {
        let p = sb
            .new_project(slug)
            .field("Checkin", checkin)
            .no_iteration();
        match channel {
            Some(c) => p.channel(c),
            None => p,
        }
        .create();
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
    sb
}

/// A tick as the check-in times read: in UTC.
#[track_caller]
fn tick(sb: &Sandbox, force: bool) -> TickReport {
    let t = sb.tick().utc();
    if force {
        t.force().run()
    } else {
        t.run()
    }
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
    let sb = setup(today());
    // A dry run sends nothing and records nothing.
    sb.tick().utc().dry_run().run();
    assert!(sent(&sb).is_empty());

    let r = tick(&sb, false);
    assert_eq!(r.checkins, ["daily", "weekly"], "{r:#?}");
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
    let at = *state.checkins.get("daily").expect("recorded");
    assert_eq!(state.checkins.get("weekly"), Some(&at));
    assert_eq!(state.last_run_at, Some(at));
    assert!(!state.checkins.contains_key("quiet"));
    assert!(!state.checkins.contains_key("manual"));

    // Next runs in the same period (forced past backoff, and as a restarted process would):
    // nothing again.
    tick(&sb, true);
    tick(&sb, true);
    assert_eq!(sent(&sb).len(), 2);

    // A skipped run sends nothing even when one is due.
    let mut state = sb.state();
    state
        .checkins
        .insert("daily".into(), Utc::now() - Duration::days(1));
    state.idle_since = Some(Utc::now());
    state.idle_reason = Some(IdleReason::NoReadyBeads);
    state.last_run_at = Some(Utc::now());
    std::fs::write(sb.state_path(), state.to_json()).unwrap();
    let r = tick(&sb, false);
    assert_eq!(r.run, RunType::Skipped);
    assert_eq!(sent(&sb).len(), 2);

    // Last sent yesterday: the next full run sends today's, once.
    let r = tick(&sb, true);
    assert_eq!(r.checkins, ["daily"], "{r:#?}");
    assert_eq!(sent(&sb).len(), 3);
    assert!(sent(&sb)[2].starts_with("#daily|checkin|daily|"));
    tick(&sb, true);
    assert_eq!(sent(&sb).len(), 3);
}

#[test]
fn weekly_waits_for_this_weeks_day() {
    // A day later this week; on Sunday there is none, and this week's Monday has passed.
    let later = match today() {
        "sun" => None,
        t => {
            let days = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];
            let i = days.iter().position(|d| *d == t).unwrap();
            Some(days[i + 1])
        }
    };
    let sb = setup(later.unwrap_or("mon"));
    let r = tick(&sb, false);
    match later {
        Some(_) => assert_eq!(r.checkins, ["daily"], "{r:#?}"),
        None => assert_eq!(r.checkins, ["daily", "weekly"], "{r:#?}"),
    }
}

#[test]
fn an_undelivered_checkin_is_tried_again() {
    let sb = setup(today());
    sb.script("bin/notify", "echo 'channel not found' >&2; exit 1");
    let r = tick(&sb, false);
    assert!(r.checkins.is_empty(), "{r:#?}");
    assert!(sb.state_json().get("checkins").is_none());
    sb.script(
        "bin/notify",
        r#"printf '%s|%s\n' "$1" "$2" >> "$HOME/notified""#,
    );
    let r = tick(&sb, true);
    assert_eq!(r.checkins, ["daily", "weekly"], "{r:#?}");
    assert_eq!(sent(&sb), ["#daily|checkin", "#weekly|checkin"]);
}
