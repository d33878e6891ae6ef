//! Workers whose agent is an OpenClaw session, against the real OpenClaw CLI and a
//! real gateway on loopback: the real `braids` binary, real `br` and git, and a stand-in model
//! ([`crate::support::standin_model`]) that the gateway calls as a custom provider.
//!
//! `.ci/run` installs Node 24 and `openclaw` into /opt/openclaw and sets
//! `BRAIDS_REQUIRE_OPENCLAW=1`, so there a missing CLI fails these tests; elsewhere each says
//! it is skipped, and why, on stderr. Each test starts its own gateway (its own state, config
//! and token; 15 to 60 s to be ready on two busy cores) and they take a lock one at a time:
//! three Node gateways at once would starve the rest of the suite.

use std::ops::Deref;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use serde_json::json;

use crate::support::claw::{free_port, Claw};
use crate::support::{label, wait_for, Install, ReportExt, Sandbox};

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// A gateway of the test's own, one test at a time.
struct Held {
    claw: Claw,
    _lock: MutexGuard<'static, ()>,
}

impl Deref for Held {
    type Target = Claw;
    fn deref(&self) -> &Claw {
        &self.claw
    }
}

/// A ready gateway, or `None` (with the reason on stderr) where OpenClaw is not installed.
fn gateway() -> Option<Held> {
    let lock = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    if let Err(why) = crate::support::claw::install_dir() {
        assert!(
            std::env::var("BRAIDS_REQUIRE_OPENCLAW").as_deref() != Ok("1"),
            "BRAIDS_REQUIRE_OPENCLAW=1 but {why}"
        );
        eprintln!("SKIPPED: {why}");
        return None;
    }
    let claw = Claw::start().unwrap_or_else(|e| panic!("{e}"));
    Some(Held { claw, _lock: lock })
}

fn install(claw: &Claw) -> Sandbox {
    Install::new()
        .config(&claw.config())
        .config("[sessions]\nkill_grace_secs = 5\n")
        .build()
}

#[test]
fn two_beads_run_as_openclaw_sessions_are_counted_and_finished_by_braids() {
    let Some(claw) = gateway() else {
        return;
    };
    let sb = install(&claw);
    // Two beads on one project with one slot, one on another with its own model and thinking
    // level.
    let app = sb
        .new_project("app")
        .br()
        .beads(2)
        .max_workers(1)
        .field("Backend", "openclaw")
        .create();
    let web = sb
        .new_project("web")
        .br()
        .beads(1)
        .field("Backend", "openclaw")
        .field("Model", "standin/m2")
        .field("Thinking", "high")
        .create();
    let first = label("app", &app.beads[0]);
    let other = label("web", &web.beads[0]);

    let report = sb.tick().force().run();
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert_eq!(report.labels(), [first.clone(), other.clone()]);

    // Each worker made its gateway session, keyed and labelled by the session label; the
    // model holds both runs live.
    wait_for(
        "both sessions live at the gateway",
        Duration::from_secs(120),
        || {
            let s = claw.sessions();
            [&first, &other]
                .iter()
                .all(|l| {
                    s.iter()
                        .any(|r| &&r.label == l && r.live && r.key == format!("agent:main:{l}"))
                })
                .then_some(s)
        },
    );
    // Counted: the next run sees both live, so app's second bead waits for its slot.
    let report = sb.tick().force().run();
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert!(report.spawned_beads().is_empty(), "{report:#?}");
    let live = sb.live();
    for l in [&first, &other] {
        assert_eq!(live[l]["backend"], "openclaw", "{live:?}");
    }
    // The project's model and thinking level reached its session, and the defaults the other.
    let sessions = claw.sessions();
    let runs = |label: &str| {
        sessions
            .iter()
            .find(|s| s.label == label)
            .map(|s| (s.model.as_str(), s.thinking.as_deref()))
    };
    assert_eq!(
        runs(&other),
        Some(("standin/m2", Some("high"))),
        "{sessions:?}"
    );
    assert_eq!(runs(&first), Some(("standin/m1", None)), "{sessions:?}");

    claw.model.open();
    for (slug, bead) in [("app", &app.beads[0]), ("web", &web.beads[0])] {
        wait_for(
            &format!("{slug} {bead} closed"),
            Duration::from_secs(180),
            || (sb.br_status(slug, bead) == "closed").then_some(()),
        );
    }
    let asked = claw.model.asked();
    let model_of = |bead: &str| {
        asked
            .iter()
            .find(|a| a.prompt.contains(bead))
            .map(|a| a.model.clone())
    };
    assert_eq!(model_of(&web.beads[0]).as_deref(), Some("m2"));
    assert_eq!(model_of(&app.beads[0]).as_deref(), Some("m1"));
    // Closed before it is committed (3.5, 3.6): the commit follows.
    for (slug, bead) in [("app", &app.beads[0]), ("web", &web.beads[0])] {
        wait_for(
            &format!("{bead} committed"),
            Duration::from_secs(60),
            || {
                sb.git(&sb.project(slug), &["log", "--format=%s", "main"])
                    .contains(bead.as_str())
                    .then_some(())
            },
        );
    }
    // Done at the gateway, so not live: the slot is free for app's second bead, and the ended
    // workers are forgotten without an error.
    wait_for("the workers to exit", Duration::from_secs(60), || {
        sb.live_labels().is_empty().then_some(())
    });
    let report = sb.tick().force().run();
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert_eq!(report.spawned_beads(), [app.beads[1].clone()]);
    wait_for("app's second bead closed", Duration::from_secs(180), || {
        (sb.br_status("app", &app.beads[1]) == "closed").then_some(())
    });
}

/// Whether a process whose command line is `sleep 617` runs on this machine.
fn held_sleep_runs() -> bool {
    crate::support::procs::pids().any(|pid| {
        std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == b"sleep\x00617\x00")
            && crate::support::procs::alive(pid)
    })
}

#[test]
fn a_zombie_session_is_aborted_and_deleted() {
    let Some(claw) = gateway() else {
        return;
    };
    claw.model.open();
    let sb = install(&claw);
    let app = sb
        .new_project("app")
        .br()
        .titled(&["hold-on: a long task"])
        .field("Backend", "openclaw")
        .create();
    let l = label("app", &app.beads[0]);
    let report = sb.tick().force().run();
    assert_eq!(
        report.labels(),
        std::slice::from_ref(&l),
        "{:?}",
        report.errors
    );
    wait_for("the agent's tool to run", Duration::from_secs(120), || {
        held_sleep_runs().then_some(())
    });
    assert!(claw.sessions().iter().any(|s| s.label == l && s.live));

    // Closed by hand: the session is a zombie.
    sb.br(
        "app",
        &["close", app.beads[0].as_str(), "--reason", "done by hand"],
    );
    let report = sb.tick().force().run();
    assert_eq!(report.killed().len(), 1, "{report:#?}");
    assert_eq!(report.killed()[0].0, app.beads[0]);
    // Aborted and deleted: the gateway has no session of the label, and its tool is gone.
    assert!(
        !claw.sessions().iter().any(|s| s.label == l),
        "{:?}",
        claw.sessions()
    );
    wait_for("the tool process to end", Duration::from_secs(30), || {
        (!held_sleep_runs()).then_some(())
    });
    let report = sb.tick().force().run();
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert!(sb.live_labels().is_empty());
}

/// A local IRC server (Debian's ngircd) on a free loopback port.
struct Ngircd {
    _dir: tempfile::TempDir,
    port: u16,
    child: Child,
}

impl Ngircd {
    fn start() -> Result<Ngircd, String> {
        let program = ["/usr/sbin/ngircd", "/usr/bin/ngircd"]
            .into_iter()
            .find(|p| Path::new(p).is_file())
            .ok_or("ngircd is not installed (.ci/run installs Debian's ngircd)")?;
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let conf = dir.path().join("ngircd.conf");
        // The sender connects as `<nick>_`, so nicks must be allowed past 9 characters.
        std::fs::write(
            &conf,
            format!(
                "[Global]\nName = irc.braids.test\nInfo = braids test\nListen = 127.0.0.1\nPorts = {port}\nPidFile = {}/ngircd.pid\n[Limits]\nMaxNickLength = 30\n[Options]\nPAM = no\nIdent = no\nDNS = no\n",
                dir.path().display()
            ),
        )
        .unwrap();
        let mut cmd = Command::new(program);
        cmd.args(["-n", "-f"])
            .arg(&conf)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        let child = cmd
            .spawn()
            .map_err(|e| format!("cannot start ngircd: {e}"))?;
        let irc = Ngircd {
            _dir: dir,
            port,
            child,
        };
        wait_for("ngircd to listen", Duration::from_secs(30), || {
            std::net::TcpStream::connect(("127.0.0.1", port))
                .ok()
                .map(|_| ())
        });
        Ok(irc)
    }
}

impl Drop for Ngircd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An IRC client in `#braids`, keeping every message said there.
struct Watcher {
    said: std::sync::Arc<Mutex<Vec<String>>>,
    joined: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Watcher {
    fn join(port: u16) -> Watcher {
        use std::io::{BufRead, Write};
        let said = std::sync::Arc::new(Mutex::new(Vec::new()));
        let joined = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let mut conn = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        conn.write_all(b"NICK watcher\r\nUSER watcher 0 * :braids test\r\n")
            .unwrap();
        let (s, j) = (said.clone(), joined.clone());
        std::thread::spawn(move || {
            let reader = std::io::BufReader::new(conn.try_clone().unwrap());
            for line in reader.lines() {
                let Ok(line) = line else { break };
                if let Some(rest) = line.strip_prefix("PING") {
                    let _ = conn.write_all(format!("PONG{rest}\r\n").as_bytes());
                } else if line.contains(" 001 ") {
                    let _ = conn.write_all(b"JOIN #braids\r\n");
                } else if line.contains(" 366 ") {
                    j.store(true, std::sync::atomic::Ordering::SeqCst);
                } else if line.contains(" PRIVMSG #braids :") {
                    s.lock().unwrap().push(line);
                }
            }
        });
        let w = Watcher { said, joined };
        wait_for("the watcher in #braids", Duration::from_secs(30), || {
            w.joined
                .load(std::sync::atomic::Ordering::SeqCst)
                .then_some(())
        });
        w
    }

    fn said(&self) -> Vec<String> {
        self.said.lock().unwrap().clone()
    }
}

/// The notifier recipe through OpenClaw that docs/backends.md shows, as an argv.
fn docs_notify_recipe() -> Vec<String> {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/backends.md"))
            .unwrap();
    let line = readme
        .lines()
        .find(|l| l.contains("\"openclaw\", \"message\", \"send\""))
        .expect("docs/backends.md has the `openclaw message send` recipe");
    let list = &line[line.find('[').unwrap()..=line.find(']').unwrap()];
    serde_json::from_str(list).unwrap()
}

#[test]
fn a_bead_complete_notification_reaches_an_irc_channel_through_openclaw_message_send() {
    let irc = match Ngircd::start() {
        Ok(irc) => irc,
        Err(why) => {
            assert!(
                std::env::var("BRAIDS_REQUIRE_OPENCLAW").as_deref() != Ok("1"),
                "BRAIDS_REQUIRE_OPENCLAW=1 but {why}"
            );
            eprintln!("SKIPPED: {why}");
            return;
        }
    };
    let Some(claw) = gateway() else {
        return;
    };
    // The IRC channel plugin, from the npm registry, into this gateway's state.
    let out = claw.cli(&["plugins", "install", "@openclaw/irc@2026.9.5"]);
    assert!(
        out.status.success(),
        "openclaw plugins install: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let channel = json!({"enabled": true, "host": "127.0.0.1", "port": irc.port, "tls": false,
                         "nick": "braidsbot", "channels": ["#braids"]});
    let out = claw.cli(&[
        "config",
        "set",
        "channels.irc",
        &channel.to_string(),
        "--strict-json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let watcher = Watcher::join(irc.port);

    let sb = Install::new().build();
    // `openclaw` as a person has it on PATH: this gateway's CLI.
    let env: String = Claw::env_of(claw.dir.path(), claw.port)
        .iter()
        .map(|(k, v)| format!("export {k}='{v}'\n"))
        .collect();
    sb.script(
        "bin/openclaw",
        &format!(
            "{env}exec {} \"$@\"\n",
            claw.dir.path().join("bin/openclaw").display()
        ),
    );
    let agent = sb.script(
        "bin/agent",
        "mkdir -p \"$(dirname \"$1\")\"\nprintf '# Done\\n\\n## Summary\\n\\nDid it.\\n' > \"$1\"\nprintf 'status: pass\\nsummary: did it\\n' > \"$BRAIDS_RESULT_FILE\"\n",
    );
    sb.config(&format!(
        "[worker]\nexecutor = [{:?}, \"{{deliverable}}\"]\n[notify]\ncommand = {}\ntimeout_secs = 120\n",
        agent.display().to_string(),
        serde_json::to_string(&docs_notify_recipe()).unwrap()
    ));
    let app = sb
        .new_project("app")
        .br()
        .beads(1)
        .channel("#braids")
        .create();
    let report = sb.tick().force().run();
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    let want = format!("Completed {}", app.beads[0]);
    let said = wait_for(
        "the bead-complete message in #braids",
        Duration::from_secs(400),
        || {
            let said = watcher.said();
            said.iter().any(|l| l.contains(&want)).then_some(said)
        },
    );
    let line = said.iter().find(|l| l.contains(&want)).unwrap();
    assert!(
        line.starts_with(":braidsbot"),
        "sent by OpenClaw's IRC nick: {line}"
    );
    assert!(line.contains("[app]"), "{line}");
}
