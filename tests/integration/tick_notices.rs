//! The tick's own notifications: `no-ready-beads` once per dry spell (1.2, 3.8), never without
//! a Channel or when the event is off.

use braids::tick::decide::ZombieReason;
use braids::tick::orchestrator_state::IdleReason;
use braids::tick::Action;

use crate::support::Sandbox;

fn setup(channel: &str) -> (Sandbox, std::path::PathBuf) {
    let s = Sandbox::new();
    s.new_project("app").channel(channel).create();
    let log = s.home().join("notified.txt");
    let notifier = s.script(
        "bin/notify",
        &format!(
            "printf '%s|%s|%s\\n' \"$1\" \"$2\" \"$3\" >> {}",
            log.display()
        ),
    );
    let worker = s.script("bin/worker", "cat >/dev/null; sleep 30");
    s.config(&format!("[notify]\ncommand = [{:?}, \"{{event}}\", \"{{channel}}\", \"{{message}}\"]\n[worker]\ncommand = [{:?}]\n", notifier.to_str().unwrap(), worker.to_str().unwrap()));
    (s, log)
}

fn lines(log: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(String::from)
        .collect()
}

#[test]
fn c3_8_no_ready_beads_once_per_dry_spell() {
    let (s, log) = setup("#app");
    assert_eq!(
        s.tick().force().run().idle_reason,
        Some(IdleReason::NoReadyBeads)
    );
    assert_eq!(lines(&log).len(), 1, "{:?}", lines(&log));
    assert!(
        lines(&log)[0].starts_with("no-ready-beads|#app|[app] No ready beads in iteration 001"),
        "{:?}",
        lines(&log)
    );
    s.tick().force().run();
    assert_eq!(lines(&log).len(), 1, "not repeated while still dry");

    // work arrives: the dry spell ends, a worker runs; when it is dry again, one more notice
    let wp = s.project("app").join(".braids/WORKPLAN.md");
    let mut text = std::fs::read_to_string(&wp).unwrap();
    text.push_str("- [ ] Something to do\n");
    std::fs::write(&wp, text).unwrap();
    assert_eq!(s.tick().force().run().action, Action::Spawn);
    let text = std::fs::read_to_string(&wp)
        .unwrap()
        .replace("- [ ] Something", "- [x] Something");
    std::fs::write(&wp, text).unwrap();
    let r = s.tick().force().run();
    assert_eq!(r.zombies[0].reason, ZombieReason::BeadClosed, "{r:#?}");
    s.tick().force().run();
    let got = lines(&log);
    assert_eq!(
        got.iter()
            .filter(|l| l.starts_with("no-ready-beads"))
            .count(),
        2,
        "{got:?}"
    );
}

#[test]
fn c3_8_no_channel_or_event_off_means_silence() {
    let (s, log) = setup("none");
    s.tick().force().run();
    assert!(lines(&log).is_empty(), "no Channel: {:?}", lines(&log));

    let (s, log) = setup("#app");
    let pm = s.project("app").join(".braids/PROJECT.md");
    let text = std::fs::read_to_string(&pm)
        .unwrap()
        .replace("| no-ready-beads | on |", "| no-ready-beads | off |");
    std::fs::write(&pm, text).unwrap();
    s.tick().force().run();
    assert!(lines(&log).is_empty(), "event off: {:?}", lines(&log));
}
