//! `braids logs` and what the agent wrote: its terminal escapes never reach a person's terminal
//! (a real pseudo-terminal here), in the readable rendering or with `--raw`, followed or not;
//! `--raw` into a pipe is the log byte for byte.

use std::io::Read;
use std::process::Stdio;
use std::time::Duration;

use crate::support::{wait_for, Install, Sandbox};

/// An agent that prints a clipboard write (OSC 52), a window title (OSC 0), a screen clear
/// (CSI 2J), a C1 CSI both as a raw byte and as UTF-8, a bell and a lone ESC, plus a JSON
/// event hiding a title in a string; then waits a little (for `-f`) and does the work.
const AGENT: &str = r#"
printf 'one\033]52;c;cHduZWQ=\007two\033]0;evil title\007three\033[2Jfour\233?25lfive\302\2332Jsix\007seven\033eight\033\n'
printf '{"type":"system","subtype":"init","session_id":"s1\\u001b]52;c;eA==\\u0007","model":"m","cwd":"/w"}\n'
printf 'tab\there\n'
sleep 4
mkdir -p "$(dirname "$1")"
printf '# %s\n\n## Summary\n\nDid it.\n' "$BRAIDS_BEAD" > "$1"
printf 'status: pass\nsummary: did it\n' > "$BRAIDS_RESULT_FILE"
"#;

/// `braids <args>` with its stdout on a new pseudo-terminal: everything the terminal got.
fn on_terminal(sb: &Sandbox, args: &[&str]) -> Vec<u8> {
    let pty = nix::pty::openpty(None, None).unwrap();
    let mut cmd = sb.command(args);
    cmd.stdout(Stdio::from(pty.slave));
    let mut child = cmd.spawn().unwrap();
    // The child holds the only other end now: reading ends (EIO) once it exits.
    drop(cmd);
    let mut master = std::fs::File::from(pty.master);
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = master.read(&mut buf) {
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
    }
    assert!(child.wait().unwrap().success(), "braids {args:?}");
    got
}

/// Whether `out` holds nothing a terminal acts on: no ESC, BEL, C1 control (as a byte or as
/// UTF-8), and no leftover of the sequences' payloads.
fn assert_inert(what: &str, out: &[u8]) {
    let text = String::from_utf8_lossy(out);
    for (bad, name) in [
        (&b"\x1b"[..], "ESC"),
        (b"\x07", "BEL"),
        (b"\x9b", "a C1 CSI byte"),
        (b"\xc2\x9b", "a C1 CSI"),
        (b"cHduZWQ=", "an OSC 52 payload"),
        (b"evil title", "an OSC 0 payload"),
    ] {
        assert!(
            !out.windows(bad.len()).any(|w| w == bad),
            "{what}: {name} reached the terminal:\n{text:?}"
        );
    }
    assert!(
        out.iter()
            .all(|b| *b >= 0x20 || matches!(b, b'\n' | b'\t' | b'\r')),
        "{what}: a control character reached the terminal:\n{text:?}"
    );
    assert!(text.contains("onetwothree"), "{what}: {text:?}");
    assert!(text.contains("tab\there"), "{what}: tabs stay: {text:?}");
}

#[test]
fn c11_7_logs_never_write_the_agents_escapes_to_a_terminal() {
    let sb = Install::new().build();
    let agent = sb.script("bin/agent", AGENT);
    sb.config(&format!(
        "[worker]\nexecutor = [{:?}, \"{{deliverable}}\", \"{{prompt_file}}\"]\nretries = 0\n",
        agent.display().to_string()
    ));
    let app = sb.new_project("app").br().beads(1).create();
    let bead = app.beads[0].as_str();
    sb.tick().force().run();
    wait_for("the agent's output", Duration::from_secs(60), || {
        let o = sb.run(&["logs", "--raw", bead]);
        String::from_utf8_lossy(&o.stdout)
            .contains("tab\there")
            .then_some(())
    });
    // Followed while the worker runs, on a terminal: the same removal.
    let followed = on_terminal(&sb, &["logs", "-f", bead]);
    assert_inert("logs -f", &followed);
    crate::day_two::workers_end(&sb);

    let readable = on_terminal(&sb, &["logs", bead]);
    assert_inert("logs", &readable);
    assert!(
        !String::from_utf8_lossy(&readable).contains("52;c;"),
        "the JSON event's title is removed once its escapes are decoded"
    );
    assert!(
        String::from_utf8_lossy(&readable).contains("● session s1"),
        "the JSON event is rendered: {}",
        String::from_utf8_lossy(&readable)
    );
    assert_inert("logs --raw", &on_terminal(&sb, &["logs", "--raw", bead]));
    assert_inert(
        "logs -f --raw",
        &on_terminal(&sb, &["logs", "-f", "--raw", bead]),
    );
    // Piped, the readable rendering is clean too.
    let piped = sb.run(&["logs", bead]);
    assert!(piped.status.success(), "{piped:?}");
    assert_inert("logs | cat", &piped.stdout);

    // `--raw` into a pipe is the log as written, byte for byte.
    let dir = sb.braids_dir().join("logs/sessions/app");
    let log = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(&format!("{bead}-")))
        })
        .unwrap();
    let raw = sb.run(&["logs", "--raw", bead]);
    assert!(raw.status.success(), "{raw:?}");
    assert_eq!(raw.stdout, std::fs::read(&log).unwrap());
    assert!(
        raw.stdout.windows(5).any(|w| w == b"\x1b]52;"),
        "the raw log keeps what the agent printed"
    );
}
