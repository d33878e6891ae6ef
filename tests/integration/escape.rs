//! An agent cannot reach past its workspace under the default configuration (`sandbox =
//! "auto"`) nor under bubblewrap: it reads none of the person's secrets, braids' folder or
//! another project; it reaches no loopback port but its provider's; and no process it starts
//! outlives its bead, however it leaves the bead's session, even when its worker is killed.
//! Real ticks, real `braids worker` processes, real git, the real kernel sandboxes and cgroups;
//! the agent is a shell script.

use std::net::TcpListener;
use std::time::Duration;

use crate::support::{wait_for, Install, Sandbox};

/// Records what it could read and reach, then does its bead's work. `$2` is a port nothing but
/// braids' dashboard would listen on, `$3` the provider's.
const PROBE: &str = r#"tryread() { if cat "$2" >/dev/null 2>&1; then echo "$1 read"; else echo "$1 unread"; fi; }
tryconnect() { if bash -c "exec 3<>/dev/tcp/127.0.0.1/$2" 2>/dev/null; then echo "$1 reached"; else echo "$1 refused"; fi; }
{
  tryread ssh-key "$HOME/.ssh/id_ed25519"
  tryread aws "$HOME/.aws/credentials"
  tryread braids-config "$HOME/.openclaw/braids/config.toml"
  tryread serve-token "$HOME/.openclaw/braids/serve.token"
  tryread other-project "$HOME/Projects/other/.braids/PROJECT.md"
  tryread home-file "$HOME/notes.txt"
  tryread shadow /etc/shadow
  tryread prompt "$BRAIDS_PROMPT_FILE"
  tryread gitconfig "$HOME/.gitconfig"
  tryread own-file "$PWD/.braids/PROJECT.md"
  tryconnect dashboard "$2"
  tryconnect provider "$3"
  cat "$HOME/.ssh/id_ed25519" "$HOME/notes.txt" > leaked.txt 2>/dev/null
} > sandbox-results.txt
mkdir -p "$(dirname "$1")"
printf '# %s\n\n## Summary\n\nDid %s.\n' "$BRAIDS_BEAD" "$BRAIDS_BEAD" > "$1"
printf 'status: pass\nsummary: did it\n' > "$BRAIDS_RESULT_FILE"
"#;

const SECRET: &str = "SECRET-MARKER-5bd1";

/// An installation whose agent is `body`, with `sandbox` (none: the default) in config.toml.
fn install(body: &str, args: &[String], sandbox: Option<&str>) -> Sandbox {
    let sb = Install::new()
        .sandboxed()
        .config("[sessions]\nkill_grace_secs = 5\n")
        .build();
    let agent = sb.script("bin/agent", body);
    let mut argv = vec![
        format!("{:?}", agent.display().to_string()),
        "\"{deliverable}\"".to_string(),
    ];
    argv.extend(args.iter().map(|a| format!("{a:?}")));
    let mut config = format!("[worker]\nexecutor = [{}]\n", argv.join(", "));
    if let Some(kind) = sandbox {
        config.push_str(&format!("sandbox = \"bwrap\"\nbwrap = {kind:?}\n"));
    }
    sb.config(&config);
    sb
}

/// The bubblewrap program, or why the bubblewrap variant is skipped.
fn bwrap() -> Option<String> {
    let found = crate::support::bwrap();
    if found.is_none() {
        eprintln!("skipping the bubblewrap variant: bwrap is not installed");
    }
    found
}

fn settle(sb: &Sandbox, slug: &str, bead: &str) {
    wait_for("the bead done", Duration::from_secs(120), || {
        (sb.workplan(slug)[bead].0 == "closed" && sb.live_labels().is_empty()).then_some(())
    });
}

fn reads_and_connections(bwrap: Option<&str>) {
    let dashboard = TcpListener::bind("127.0.0.1:0").unwrap();
    let provider = TcpListener::bind("127.0.0.1:0").unwrap();
    let (d, p) = (
        dashboard.local_addr().unwrap().port(),
        provider.local_addr().unwrap().port(),
    );
    let sb = install(PROBE, &[d.to_string(), p.to_string()], bwrap);
    sb.config(&format!("[worker]\nsandbox_connect = [{p}]\n"));
    for (rel, text) in [
        (".ssh/id_ed25519", SECRET),
        (".aws/credentials", SECRET),
        ("notes.txt", SECRET),
        (".openclaw/braids/serve.token", SECRET),
    ] {
        let f = sb.home().join(rel);
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(f, text).unwrap();
    }
    let app = sb.new_project("app").beads(1).create();
    sb.new_project("other").create();
    sb.tick().force().run();
    settle(&sb, "app", &app.beads[0]);
    let results = sb.read("Projects/app/sandbox-results.txt");
    let kind = bwrap.map_or("auto", |_| "bwrap");
    let expected = [
        "ssh-key unread",
        "aws unread",
        "braids-config unread",
        "serve-token unread",
        "other-project unread",
        "home-file unread",
        "prompt read",
        "gitconfig read",
        "own-file read",
        "dashboard refused",
        "provider reached",
        // Root reads /etc/shadow whatever its mode: only the sandbox stops it.
        "shadow unread",
    ];
    for line in expected {
        assert!(results.contains(line), "{kind}: {line}: {results}");
    }
    // No secret left its file: not in the workspace's files, not in any commit.
    let log = sb.git(&sb.project("app"), &["log", "--all", "-p"]);
    assert!(!log.contains(SECRET), "{kind}: a secret landed");
    drop((dashboard, provider));
}

#[test]
fn c11_6_by_default_the_agent_reads_no_secret_and_reaches_only_its_provider() {
    reads_and_connections(None);
}

#[test]
fn c11_6_under_bubblewrap_the_agent_reads_no_secret_and_reaches_only_its_provider() {
    if let Some(b) = bwrap() {
        reads_and_connections(Some(&b));
    }
}

/// Leaves four processes that try to outlive the bead: one that drops braids' session mark,
/// calls `setsid`, leaves for `/` and keeps writing into the workspace through a descriptor;
/// one that holds nothing of the workspace at all; one that double-forks under `nohup`; and
/// braids itself (`$2`), following events from an installation of its own in the workspace,
/// which says in `braids-ran.txt` whether it was still running a second later.
const ESCAPER: &str = r#"WS="$PWD"
if [ "$BRAIDS_BEAD" = app-w1 ]; then
HOME="$WS/h" "$2" init >/dev/null 2>&1
HOME="$WS/h" env -u BRAIDS_SESSION setsid bash -c 'exec -a braids-MARK "$0" events --follow' "$2" </dev/null >/dev/null 2>&1 &
braids=$!
cd /
env -u BRAIDS_SESSION setsid bash -c '( exec 3<"$0"; trap "" TERM HUP; while :; do date +%s%N > /proc/$BASHPID/fd/3/planted.txt; sleep 1; done ) &' "$WS" writer-MARK
env -u BRAIDS_SESSION setsid bash -c 'exec -a escaper-bare-MARK sleep 600' </dev/null >/dev/null 2>&1 &
env -u BRAIDS_SESSION nohup bash -c '( exec -a escaper-nohup-MARK sleep 600 ) & exit 0' </dev/null >/dev/null 2>&1 &
sleep 1
cd "$WS"
if kill -0 "$braids" 2>/dev/null; then echo running > braids-ran.txt; else echo ended > braids-ran.txt; fi
fi
mkdir -p "$(dirname "$1")"
printf '# %s\n\n## Summary\n\nDid %s.\n' "$BRAIDS_BEAD" "$BRAIDS_BEAD" > "$1"
printf 'status: pass\nsummary: did it\n' > "$BRAIDS_RESULT_FILE"
"#;

/// Pids of processes whose command line holds `needle`.
fn running(needle: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let pid: u32 = e.file_name().to_str()?.parse().ok()?;
            let cmd = std::fs::read(e.path().join("cmdline")).ok()?;
            String::from_utf8_lossy(&cmd)
                .contains(needle)
                .then_some(pid)
        })
        .filter(|p| *p != std::process::id())
        .collect()
}

fn processes_end_with_the_bead(bwrap: Option<&str>) {
    let mark = format!("{:08x}", rand_u32());
    let body = ESCAPER.replace("MARK", &mark);
    let sb = install(&body, &[env!("CARGO_BIN_EXE_braids").to_string()], bwrap);
    let app = sb.new_project("app").beads(2).create();
    sb.tick().force().run();
    settle(&sb, "app", &app.beads[0]);
    let kind = bwrap.map_or("auto", |_| "bwrap");
    let ran = sb.git(&sb.project("app"), &["show", "HEAD:braids-ran.txt"]);
    assert_eq!(
        ran.trim(),
        "running",
        "{kind}: braids never ran in the workspace"
    );
    wait_for("the escapers stopped", Duration::from_secs(10), || {
        running(&mark).is_empty().then_some(())
    });
    // Nothing wrote into the workspace after its bead: the planted file, which the first
    // bead's own work holds, changes in no later commit.
    sb.tick().force().run();
    settle(&sb, "app", &app.beads[1]);
    let touched = sb.git(
        &sb.project("app"),
        &["log", "--all", "--format=%s", "--", "planted.txt"],
    );
    assert!(touched.lines().count() <= 1, "{kind}: {touched}");
    assert!(running(&mark).is_empty(), "{kind}");
}

fn rand_u32() -> u32 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    t.subsec_nanos() ^ std::process::id()
}

#[test]
fn c11_10_by_default_no_process_of_a_bead_outlives_it() {
    processes_end_with_the_bead(None);
}

#[test]
fn c11_10_under_bubblewrap_no_process_of_a_bead_outlives_it() {
    if let Some(b) = bwrap() {
        processes_end_with_the_bead(Some(&b));
    }
}

/// Leaves a process outside its session, then hangs until its worker is killed.
const HANGS: &str = r#"env -u BRAIDS_SESSION setsid bash -c 'cd /; exec -a orphan-MARK sleep 600' </dev/null >/dev/null 2>&1 &
exec bash -c 'exec -a hang-MARK sleep 600'
"#;

/// A worker SIGKILLed while its agent hangs, having left a process outside its session: the
/// next run, whatever it decides about the backoff, stops what the worker left (`bwrap`: the
/// bubblewrap program, else the default sandbox).
fn a_killed_workers_leftovers_are_stopped(bwrap: Option<&str>) {
    let mark = format!("{:08x}", rand_u32());
    let sb = install(&HANGS.replace("MARK", &mark), &[], bwrap);
    sb.new_project("app").beads(1).create();
    sb.tick().force().run();
    let orphan = wait_for("the orphan running", Duration::from_secs(60), || {
        running(&format!("orphan-{mark}")).first().copied()
    });
    wait_for("the agent hanging", Duration::from_secs(60), || {
        running(&format!("hang-{mark}")).first().copied()
    });
    let label = sb.live_labels().into_iter().next().expect("a live worker");
    let worker = sb.pid_of(&label);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(worker as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    if bwrap.is_none() {
        // Another installation's run on the machine leaves it be: it ends its own containers
        // only. (Under bubblewrap the PID namespace dies with the worker, orphan and all.)
        let other = Install::new().sandboxed().build();
        other.tick().force().run();
        assert!(
            running(&format!("orphan-{mark}")).contains(&orphan),
            "another installation's run stopped what this one's worker left"
        );
    }
    sb.tick().run();
    wait_for("the orphan stopped", Duration::from_secs(10), || {
        (!std::path::Path::new(&format!("/proc/{orphan}")).exists()
            || running(&format!("orphan-{mark}")).is_empty())
        .then_some(())
    });
    wait_for("the agent stopped", Duration::from_secs(10), || {
        running(&format!("hang-{mark}")).is_empty().then_some(())
    });
}

#[test]
fn c11_10_what_a_killed_workers_agent_left_is_stopped_by_the_next_run() {
    a_killed_workers_leftovers_are_stopped(None);
}

#[test]
fn c11_10_under_bubblewrap_what_a_killed_workers_agent_left_is_stopped_by_the_next_run() {
    if let Some(b) = bwrap() {
        a_killed_workers_leftovers_are_stopped(Some(&b));
    }
}
