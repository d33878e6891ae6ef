//! Tracker adapters against real parts: the real `br` binary in temp projects, a stub `bd`
//! serving recorded outputs (and recording the argv it was sent), real WORKPLAN.md files,
//! concurrent threads and processes.
//!
//! Tests checking a contract are named after its section (CONTRACTS.md): `c3_2_claim_…`,
//! `c3_3_…` (dependencies), `c4_6_…` (lifecycle).

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use braids::model::{Bead, BeadId, BeadStatus};
use braids::tracker::{self, ClaimOutcome, Tracker, TrackerError, TrackerKind, TrackerOptions};

use crate::support::files::write_script;
use crate::support::{br_init, br_path, test_name};

fn id(s: &str) -> BeadId {
    BeadId::new(s).unwrap()
}

fn opts(project: &Path, program: Option<PathBuf>, timeout: Duration) -> TrackerOptions {
    TrackerOptions {
        project: project.to_path_buf(),
        timeout,
        program,
        installation: None,
    }
}

fn ids(beads: &[Bead]) -> Vec<String> {
    beads.iter().map(|b| b.id.to_string()).collect()
}

fn refused(status: BeadStatus, holder: Option<&str>) -> ClaimOutcome {
    ClaimOutcome::Refused {
        status,
        holder: holder.map(str::to_string),
    }
}

/// A shell script at `dir/name`, executable.
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let p = dir.join(name);
    write_script(&p, body);
    p
}

// ---------------------------------------------------------------------------------------------
// br: the real binary
// ---------------------------------------------------------------------------------------------

/// A fresh project with `br init --prefix t` done, and its br adapter.
fn br_project() -> (tempfile::TempDir, Box<dyn Tracker>) {
    let dir = tempfile::tempdir().unwrap();
    br_init(dir.path(), "t", None);
    let t = tracker::open(
        TrackerKind::Br,
        opts(dir.path(), Some(br_path()), Duration::from_secs(30)),
    )
    .unwrap();
    assert_eq!(t.kind(), TrackerKind::Br);
    (dir, t)
}

#[test]
fn c4_6_br_lifecycle_claim_close() {
    let (_dir, br) = br_project();
    let low = br.create("Low priority", "", 3).unwrap();
    let urgent = br
        .create("Urgent", "the description\nsecond line", 0)
        .unwrap();
    let mid = br.create("-starts with a dash", "", 1).unwrap();

    let ready = br.ready().unwrap();
    assert_eq!(
        ids(&ready),
        [urgent.to_string(), mid.to_string(), low.to_string()],
        "most urgent first"
    );
    let u = br.show(&urgent).unwrap().unwrap();
    assert_eq!(
        (u.title.as_str(), u.status, u.priority),
        ("Urgent", BeadStatus::Open, 0)
    );
    assert_eq!(u.description, "the description\nsecond line");
    assert_eq!(br.show(&mid).unwrap().unwrap().title, "-starts with a dash");

    // open → in_progress (claim)
    assert_eq!(
        br.claim(&urgent, "worker-1").unwrap(),
        ClaimOutcome::Claimed
    );
    let u = br.show(&urgent).unwrap().unwrap();
    assert_eq!(
        (u.status, u.assignee.as_deref()),
        (BeadStatus::InProgress, Some("worker-1"))
    );
    assert!(
        !ids(&br.ready().unwrap()).contains(&urgent.to_string()),
        "a claimed bead is not ready"
    );

    // in_progress → closed
    br.close(&urgent, "done").unwrap();
    assert_eq!(
        br.show(&urgent).unwrap().unwrap().status,
        BeadStatus::Closed
    );
    br.close(&urgent, "again")
        .expect("closing a closed bead is a no-op");
    // closed is final
    assert_eq!(
        br.claim(&urgent, "worker-1").unwrap(),
        refused(BeadStatus::Closed, Some("worker-1"))
    );
    assert!(matches!(
        br.block(&urgent, "x"),
        Err(TrackerError::Failed { .. })
    ));
    br.reopen(&urgent, "release").unwrap();
    assert_eq!(
        br.show(&urgent).unwrap().unwrap().status,
        BeadStatus::Closed,
        "reopen never undoes a close"
    );

    let all = br.list().unwrap();
    assert_eq!(all.len(), 3, "list includes closed beads");
    assert_eq!(
        all.iter().find(|b| b.id == urgent).unwrap().status,
        BeadStatus::Closed
    );
}

#[test]
fn c3_2_claim_br_other_actor_refused_same_actor_idempotent() {
    let (_dir, br) = br_project();
    let b = br.create("Contended", "", 2).unwrap();
    assert_eq!(br.claim(&b, "alice").unwrap(), ClaimOutcome::Claimed);
    assert_eq!(
        br.claim(&b, "bob").unwrap(),
        refused(BeadStatus::InProgress, Some("alice"))
    );
    assert_eq!(
        br.claim(&b, "alice").unwrap(),
        ClaimOutcome::Claimed,
        "a claim by the holder is idempotent"
    );
    let now = br.show(&b).unwrap().unwrap();
    assert_eq!(
        (now.status, now.assignee.as_deref()),
        (BeadStatus::InProgress, Some("alice"))
    );
    assert!(matches!(
        br.claim(&id("t-nope"), "alice"),
        Err(TrackerError::NoSuchBead(_))
    ));
}

#[test]
fn c3_2_claim_br_concurrent_claims_one_winner() {
    let (_dir, br) = br_project();
    let b = br.create("Race", "", 1).unwrap();
    let br: Arc<dyn Tracker> = Arc::from(br);
    let gate = Arc::new(Barrier::new(6));
    let handles: Vec<_> = (0..6)
        .map(|n| {
            let (br, gate, b) = (br.clone(), gate.clone(), b.clone());
            std::thread::spawn(move || {
                gate.wait();
                br.claim(&b, &format!("w{n}")).unwrap()
            })
        })
        .collect();
    let outcomes: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(
        outcomes
            .iter()
            .filter(|o| **o == ClaimOutcome::Claimed)
            .count(),
        1,
        "{outcomes:?}"
    );
    let holder = br.show(&b).unwrap().unwrap().assignee.unwrap();
    for o in outcomes.iter().filter(|o| **o != ClaimOutcome::Claimed) {
        assert_eq!(o, &refused(BeadStatus::InProgress, Some(&holder)));
    }
}

#[test]
fn c4_6_br_block_and_reopen() {
    let (_dir, br) = br_project();
    let b = br.create("Needs an API key", "", 2).unwrap();
    assert_eq!(br.claim(&b, "w1").unwrap(), ClaimOutcome::Claimed);
    br.block(&b, "waiting for the API key").unwrap();
    let now = br.show(&b).unwrap().unwrap();
    assert_eq!(now.status, BeadStatus::Blocked);
    assert!(
        br.ready().unwrap().is_empty(),
        "a blocked bead is not ready"
    );
    // br itself would let anyone claim an unassigned blocked bead; the adapter refuses (4.6).
    assert_eq!(
        br.claim(&b, "w2").unwrap(),
        refused(BeadStatus::Blocked, Some("w1"))
    );
    br.reopen(&b, "key arrived").unwrap();
    let now = br.show(&b).unwrap().unwrap();
    assert_eq!(
        (now.status, now.assignee),
        (BeadStatus::Open, None),
        "reopen releases the claim"
    );
    assert_eq!(ids(&br.ready().unwrap()), [b.to_string()]);
    assert_eq!(br.claim(&b, "w2").unwrap(), ClaimOutcome::Claimed);
    // open → blocked directly, then blocked → open
    let c = br.create("Blocked before start", "", 2).unwrap();
    br.block(&c, "").unwrap();
    assert_eq!(
        br.claim(&c, "w3").unwrap(),
        refused(BeadStatus::Blocked, None)
    );
    br.reopen(&c, "").unwrap();
    assert_eq!(br.show(&c).unwrap().unwrap().status, BeadStatus::Open);
}

#[test]
fn c3_3_br_dependencies_gate_readiness() {
    let (_dir, br) = br_project();
    let schema = br.create("Database schema", "", 2).unwrap();
    let auth = br.create("Auth", "", 0).unwrap();
    br.add_dependency(&auth, &schema).unwrap();
    br.add_dependency(&auth, &schema)
        .expect("adding an existing dependency is fine");
    assert_eq!(
        ids(&br.ready().unwrap()),
        [schema.to_string()],
        "a bead with an open blocker is not ready"
    );
    assert_eq!(
        br.show(&auth).unwrap().unwrap().dependencies,
        std::slice::from_ref(&schema)
    );
    assert!(
        br.show(&schema).unwrap().unwrap().dependencies.is_empty(),
        "dependents are not dependencies"
    );
    // br refuses to claim a bead with open blockers; the adapter reports it as refused.
    assert_eq!(
        br.claim(&auth, "w1").unwrap(),
        refused(BeadStatus::Open, None)
    );
    assert_eq!(br.claim(&schema, "w1").unwrap(), ClaimOutcome::Claimed);
    br.close(&schema, "done").unwrap();
    assert_eq!(ids(&br.ready().unwrap()), [auth.to_string()]);
    match br.add_dependency(&auth, &id("t-zzz")) {
        Err(TrackerError::NoSuchBead(missing)) => assert_eq!(missing, id("t-zzz")),
        other => panic!("expected NoSuchBead, got {other:?}"),
    }
}

#[test]
fn br_show_missing_is_none() {
    let (_dir, br) = br_project();
    assert_eq!(br.show(&id("t-zzz")).unwrap(), None);
    assert!(matches!(
        br.close(&id("t-zzz"), "x"),
        Err(TrackerError::NoSuchBead(_))
    ));
}

#[test]
fn br_never_reads_a_parent_directorys_beads() {
    let (parent, parent_br) = br_project();
    parent_br.create("Parent's bead", "", 2).unwrap();
    let child = parent.path().join("child");
    std::fs::create_dir(&child).unwrap();
    let br = tracker::open(
        TrackerKind::Br,
        opts(&child, Some(br_path()), Duration::from_secs(30)),
    )
    .unwrap();
    match br.ready() {
        Err(TrackerError::Failed { message, code, .. }) => {
            assert!(
                message.contains("BEADS_DIR"),
                "br's own message is kept: {message}"
            );
            assert_eq!(code, "7");
        }
        other => panic!("a project without .beads must fail, not borrow the parent's: {other:?}"),
    }
}

#[test]
fn br_hanging_tracker_times_out() {
    // About the timeout itself: 300 ms against a tracker that would answer in five minutes;
    // however slow the machine, a call cut off at the timeout ends far sooner.
    let dir = tempfile::tempdir().unwrap();
    let stub = script(dir.path(), "br", "sleep 300");
    let br = tracker::open(
        TrackerKind::Br,
        opts(dir.path(), Some(stub), Duration::from_millis(300)),
    )
    .unwrap();
    let start = Instant::now();
    assert!(matches!(br.ready(), Err(TrackerError::Timeout { .. })));
    assert!(
        start.elapsed() < Duration::from_secs(60),
        "took {:?}",
        start.elapsed()
    );
}

#[test]
fn br_garbage_output_is_garbage() {
    let dir = tempfile::tempdir().unwrap();
    let stub = script(
        dir.path(),
        "br",
        "echo 'Ready work:'; echo '  t-1 something'",
    );
    let br = tracker::open(
        TrackerKind::Br,
        opts(dir.path(), Some(stub), Duration::from_secs(10)),
    )
    .unwrap();
    assert!(matches!(br.ready(), Err(TrackerError::Garbage { .. })));
    assert!(matches!(
        br.show(&id("t-1")),
        Err(TrackerError::Garbage { .. })
    ));
    let stub = script(
        dir.path(),
        "br2",
        r#"echo '[{"id":"../../etc","title":"x","status":"open","priority":1}]'"#,
    );
    let br = tracker::open(
        TrackerKind::Br,
        opts(dir.path(), Some(stub), Duration::from_secs(10)),
    )
    .unwrap();
    assert!(
        matches!(br.list(), Err(TrackerError::Garbage { .. })),
        "a hostile id is garbage"
    );
}

#[test]
fn br_nonzero_exit_is_failed_with_message() {
    let dir = tempfile::tempdir().unwrap();
    let stub = script(dir.path(), "br", "echo 'database is locked' >&2; exit 1");
    let br = tracker::open(
        TrackerKind::Br,
        opts(dir.path(), Some(stub), Duration::from_secs(10)),
    )
    .unwrap();
    match br.list() {
        Err(TrackerError::Failed {
            code,
            message,
            command,
        }) => {
            assert_eq!(
                (code.as_str(), message.as_str()),
                ("1", "database is locked")
            );
            assert!(command.starts_with("br list"), "{command}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn br_missing_binary_is_not_installed() {
    let dir = tempfile::tempdir().unwrap();
    let br = tracker::open(
        TrackerKind::Br,
        opts(
            dir.path(),
            Some(dir.path().join("no-such-br")),
            Duration::from_secs(5),
        ),
    )
    .unwrap();
    assert!(matches!(br.ready(), Err(TrackerError::NotInstalled { .. })));
}

// ---------------------------------------------------------------------------------------------
// bd: a stub serving recorded outputs
// ---------------------------------------------------------------------------------------------

fn fixture(name: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/bd")
        .join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// What the stub answers to its n-th call.
struct Reply {
    stdout: String,
    stderr: String,
    code: i32,
}

fn ok(fixture_name: &str) -> Reply {
    Reply {
        stdout: fixture(fixture_name),
        stderr: String::new(),
        code: 0,
    }
}

fn reply(stdout: &str, stderr: &str, code: i32) -> Reply {
    Reply {
        stdout: stdout.into(),
        stderr: stderr.into(),
        code,
    }
}

/// A stub `bd` answering its calls in order from `replies` and recording each argv (and its
/// cwd and environment). A call beyond the script exits 99.
struct StubBd {
    dir: tempfile::TempDir,
    project: tempfile::TempDir,
    tracker: Box<dyn Tracker>,
}

impl StubBd {
    fn new(replies: Vec<Reply>) -> StubBd {
        let dir = tempfile::tempdir().unwrap();
        let project = tempfile::tempdir().unwrap();
        std::fs::create_dir(project.path().join(".beads")).unwrap();
        for (n, r) in replies.iter().enumerate() {
            let n = n + 1;
            std::fs::write(dir.path().join(format!("{n}.out")), &r.stdout).unwrap();
            std::fs::write(dir.path().join(format!("{n}.err")), &r.stderr).unwrap();
            std::fs::write(dir.path().join(format!("{n}.code")), r.code.to_string()).unwrap();
        }
        let d = dir.path().display();
        let program = script(
            dir.path(),
            "bd",
            &format!(
                r#"d='{d}'
n=$(cat "$d/n" 2>/dev/null || echo 0); n=$((n+1)); echo "$n" > "$d/n"
for a in "$@"; do printf '%s\037' "$a"; done >> "$d/calls.log"; printf '\036' >> "$d/calls.log"
printf '%s|%s|%s\n' "$(pwd -P)" "$BEADS_DIR" "$BEADS_NO_DAEMON" >> "$d/env.log"
[ -f "$d/$n.out" ] && cat "$d/$n.out"
[ -f "$d/$n.err" ] && cat "$d/$n.err" >&2
exit "$(cat "$d/$n.code" 2>/dev/null || echo 99)""#
            ),
        );
        let tracker = tracker::open(
            TrackerKind::Bd,
            opts(project.path(), Some(program), Duration::from_secs(10)),
        )
        .unwrap();
        assert_eq!(tracker.kind(), TrackerKind::Bd);
        StubBd {
            dir,
            project,
            tracker,
        }
    }

    fn calls(&self) -> Vec<Vec<String>> {
        let log = std::fs::read_to_string(self.dir.path().join("calls.log")).unwrap_or_default();
        let calls = log.split('\u{1e}').filter(|c| !c.is_empty());
        calls
            .map(|c| {
                c.strip_suffix('\u{1f}')
                    .unwrap_or(c)
                    .split('\u{1f}')
                    .map(str::to_string)
                    .collect()
            })
            .collect()
    }

    fn assert_calls(&self, expected: &[&[&str]]) {
        let expected: Vec<Vec<String>> = expected
            .iter()
            .map(|c| c.iter().map(|a| a.to_string()).collect())
            .collect();
        assert_eq!(self.calls(), expected);
        let env = std::fs::read_to_string(self.dir.path().join("env.log")).unwrap();
        let root = self.project.path().canonicalize().unwrap();
        for line in env.lines() {
            let parts: Vec<&str> = line.split('|').collect();
            assert_eq!(
                Path::new(parts[0]).canonicalize().unwrap(),
                root,
                "bd runs in the project"
            );
            assert_eq!(
                Path::new(parts[1]),
                self.project.path().join(".beads"),
                "BEADS_DIR pins the project's .beads"
            );
            assert_eq!(parts[2], "1", "no daemon");
        }
    }
}

#[test]
fn bd_ready_keeps_open_beads_most_urgent_first() {
    let s = StubBd::new(vec![ok("ready.json")]);
    let ready = s.tracker.ready().unwrap();
    assert_eq!(
        ids(&ready),
        ["bd-c2d", "bd-x9z", "bd-e3f"],
        "in_progress dropped, sorted by priority"
    );
    assert_eq!(
        ready[0].description,
        "Tables for users and sessions.\nUse migrations."
    );
    assert_eq!((ready[0].priority, ready[0].status), (0, BeadStatus::Open));
    s.assert_calls(&[&["ready", "--json", "--sort=priority", "--limit=0"]]);
}

#[test]
fn bd_ready_reads_the_json_envelope() {
    let s = StubBd::new(vec![ok("ready_envelope.json")]);
    assert_eq!(
        ids(&s.tracker.ready().unwrap()),
        ["bd-c2d", "bd-x9z", "bd-e3f"]
    );
}

#[test]
fn c3_3_bd_list_and_show_map_blocking_dependencies() {
    let s = StubBd::new(vec![ok("list.json"), ok("show_open.json")]);
    let all = s.tracker.list().unwrap();
    let by_id: HashMap<String, &Bead> = all.iter().map(|b| (b.id.to_string(), b)).collect();
    assert_eq!(all.len(), 5);
    assert_eq!(
        by_id["bd-a1b"].dependencies,
        [id("bd-c2d")],
        "parent-child is not a blocker"
    );
    assert_eq!(by_id["bd-k5m"].status, BeadStatus::Closed);
    assert_eq!(by_id["bd-e3f"].status, BeadStatus::Deferred);
    assert_eq!(by_id["bd-g4h"].assignee.as_deref(), Some("alice"));
    let a = s.tracker.show(&id("bd-a1b")).unwrap().unwrap();
    assert_eq!(
        (a.title.as_str(), a.priority, a.status),
        ("Add login form", 1, BeadStatus::Open)
    );
    assert_eq!(
        a.dependencies,
        [id("bd-c2d")],
        "dependents and parent-child links are left out"
    );
    assert_eq!(a.assignee, None);
    s.assert_calls(&[
        &["list", "--json", "--all", "--limit=0"],
        &["show", "bd-a1b", "--json"],
    ]);
}

#[test]
fn bd_show_missing_is_none_in_old_and_new_shapes() {
    // Old bd: nothing on stdout, exit 0, the complaint on stderr. New bd: a JSON error, exit 1.
    let s = StubBd::new(vec![
        reply("", &fixture("show_missing.stderr"), 0),
        reply(&fixture("show_missing.json"), "", 1),
    ]);
    assert_eq!(s.tracker.show(&id("bd-zzz")).unwrap(), None);
    assert_eq!(s.tracker.show(&id("bd-zzz")).unwrap(), None);
    s.assert_calls(&[&["show", "bd-zzz", "--json"], &["show", "bd-zzz", "--json"]]);
}

#[test]
fn c3_2_claim_bd_claims_an_open_bead() {
    let s = StubBd::new(vec![ok("show_open.json"), ok("update_claimed.json")]);
    assert_eq!(
        s.tracker.claim(&id("bd-a1b"), "worker-1").unwrap(),
        ClaimOutcome::Claimed
    );
    s.assert_calls(&[
        &["show", "bd-a1b", "--json"],
        &["update", "bd-a1b", "--claim", "--actor=worker-1", "--json"],
    ]);
}

#[test]
fn c3_2_claim_bd_lost_race_is_refused_even_when_bd_exits_0() {
    // Old bd reports a failed claim on stderr and exits 0; the adapter re-reads the bead.
    let s = StubBd::new(vec![
        ok("show_open.json"),
        reply("", &fixture("claim_taken.stderr"), 0),
        ok("show_in_progress_alice.json"),
    ]);
    assert_eq!(
        s.tracker.claim(&id("bd-a1b"), "worker-1").unwrap(),
        refused(BeadStatus::InProgress, Some("alice"))
    );
    s.assert_calls(&[
        &["show", "bd-a1b", "--json"],
        &["update", "bd-a1b", "--claim", "--actor=worker-1", "--json"],
        &["show", "bd-a1b", "--json"],
    ]);
}

#[test]
fn c3_2_claim_bd_held_by_another_or_same_actor() {
    let s = StubBd::new(vec![
        ok("show_in_progress_alice.json"),
        ok("show_in_progress_worker.json"),
    ]);
    assert_eq!(
        s.tracker.claim(&id("bd-a1b"), "worker-1").unwrap(),
        refused(BeadStatus::InProgress, Some("alice"))
    );
    assert_eq!(
        s.tracker.claim(&id("bd-a1b"), "worker-1").unwrap(),
        ClaimOutcome::Claimed,
        "idempotent, no update sent"
    );
    s.assert_calls(&[&["show", "bd-a1b", "--json"], &["show", "bd-a1b", "--json"]]);
}

#[test]
fn c4_6_bd_closed_and_blocked_beads_are_not_claimed() {
    let s = StubBd::new(vec![
        ok("show_closed.json"),
        ok("show_blocked.json"),
        ok("show_closed.json"),
    ]);
    assert_eq!(
        s.tracker.claim(&id("bd-a1b"), "w").unwrap(),
        refused(BeadStatus::Closed, Some("worker-1"))
    );
    assert_eq!(
        s.tracker.claim(&id("bd-a1b"), "w").unwrap(),
        refused(BeadStatus::Blocked, Some("worker-1"))
    );
    assert!(
        matches!(
            s.tracker.block(&id("bd-a1b"), "x"),
            Err(TrackerError::Failed { .. })
        ),
        "closed is final"
    );
    assert_eq!(s.calls().len(), 3, "nothing but reads was sent");
}

#[test]
fn c4_6_bd_close() {
    let s = StubBd::new(vec![
        ok("close.json"),
        // Closing again: a newer bd complains; the bead is closed, so that is a no-op.
        reply(&fixture("close_already_closed.json"), "", 1),
        ok("show_closed.json"),
    ]);
    s.tracker.close(&id("bd-a1b"), "Done").unwrap();
    s.tracker.close(&id("bd-a1b"), "Done\nreally").unwrap();
    s.assert_calls(&[
        &["close", "bd-a1b", "--reason=Done", "--json"],
        &["close", "bd-a1b", "--reason=Done really", "--json"],
        &["show", "bd-a1b", "--json"],
    ]);
}

#[test]
fn bd_close_failure_carries_bds_message() {
    let s = StubBd::new(vec![
        reply("", "Error closing bd-a1b: database is locked\n", 1),
        ok("show_in_progress_worker.json"),
    ]);
    match s.tracker.close(&id("bd-a1b"), "") {
        Err(TrackerError::Failed { message, .. }) => {
            assert_eq!(message, "Error closing bd-a1b: database is locked")
        }
        other => panic!("{other:?}"),
    }
    s.assert_calls(&[
        &["close", "bd-a1b", "--json"],
        &["show", "bd-a1b", "--json"],
    ]);
}

#[test]
fn c4_6_bd_block_then_reopen() {
    let s = StubBd::new(vec![
        ok("show_in_progress_worker.json"),
        ok("update_blocked.json"),
        reply("Comment added to bd-a1b\n", "", 0),
        ok("show_blocked.json"),
        ok("update_reopened.json"),
        reply("Comment added to bd-a1b\n", "", 0),
    ]);
    s.tracker
        .block(&id("bd-a1b"), "waiting for the API key")
        .unwrap();
    s.tracker.reopen(&id("bd-a1b"), "-key arrived").unwrap();
    s.assert_calls(&[
        &["show", "bd-a1b", "--json"],
        &["update", "bd-a1b", "--status=blocked", "--json"],
        &[
            "comments",
            "add",
            "bd-a1b",
            "Blocked: waiting for the API key",
        ],
        &["show", "bd-a1b", "--json"],
        &["update", "bd-a1b", "--status=open", "--assignee=", "--json"],
        &["comments", "add", "bd-a1b", "Reopened: -key arrived"],
    ]);
}

#[test]
fn bd_create_and_add_dependency() {
    let s = StubBd::new(vec![
        ok("create.json"),
        ok("dep_add.json"),
        reply(&fixture("show_missing.json"), "", 1),
    ]);
    let new = s
        .tracker
        .create(
            "-v flag prints the version",
            "Add --version/-v.\nPrint semver.",
            1,
        )
        .unwrap();
    assert_eq!(new, id("bd-n7p"));
    s.tracker
        .add_dependency(&id("bd-a1b"), &id("bd-c2d"))
        .unwrap();
    assert!(
        matches!(s.tracker.add_dependency(&id("bd-a1b"), &id("bd-zzz")), Err(TrackerError::NoSuchBead(m)) if m == id("bd-zzz"))
    );
    s.assert_calls(&[
        &[
            "create",
            "--title=-v flag prints the version",
            "--priority=1",
            "--description=Add --version/-v.\nPrint semver.",
            "--json",
        ],
        &["dep", "add", "bd-a1b", "bd-c2d", "--json"],
        &["dep", "add", "bd-a1b", "bd-zzz", "--json"],
    ]);
}

#[test]
fn bd_garbage_and_missing_binary() {
    let s = StubBd::new(vec![reply(
        "📋 Ready work (2 issues with no blockers):\n",
        "",
        0,
    )]);
    assert!(matches!(
        s.tracker.ready(),
        Err(TrackerError::Garbage { .. })
    ));
    let dir = tempfile::tempdir().unwrap();
    let bd = tracker::open(
        TrackerKind::Bd,
        opts(
            dir.path(),
            Some(dir.path().join("bd")),
            Duration::from_secs(5),
        ),
    )
    .unwrap();
    assert!(matches!(bd.list(), Err(TrackerError::NotInstalled { .. })));
}

// ---------------------------------------------------------------------------------------------
// open() / detect()
// ---------------------------------------------------------------------------------------------

#[test]
fn open_builds_the_adapter_for_the_kind() {
    let dir = tempfile::tempdir().unwrap();
    let o = || opts(dir.path(), None, Duration::from_secs(5));
    assert_eq!(
        tracker::open(TrackerKind::Auto, o()).unwrap().kind(),
        TrackerKind::Workplan
    );
    assert_eq!(
        tracker::open(TrackerKind::Workplan, o()).unwrap().kind(),
        TrackerKind::Workplan
    );
    assert_eq!(
        tracker::open(TrackerKind::Bd, o()).unwrap().kind(),
        TrackerKind::Bd
    );
    std::fs::create_dir(dir.path().join(".beads")).unwrap();
    assert_eq!(
        tracker::open(TrackerKind::Auto, o()).unwrap().kind(),
        tracker::detect(dir.path())
    );
    assert_ne!(tracker::detect(dir.path()), TrackerKind::Workplan);
}

// ---------------------------------------------------------------------------------------------
// WORKPLAN.md
// ---------------------------------------------------------------------------------------------

fn workplan(text: &str) -> (tempfile::TempDir, Box<dyn Tracker>, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join(".braids/WORKPLAN.md");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, text).unwrap();
    let t = tracker::open(
        TrackerKind::Workplan,
        opts(dir.path(), None, Duration::from_secs(20)),
    )
    .unwrap();
    (dir, t, file)
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap()
}

/// Removes exactly what id assignment adds: ` <!-- id:wp-x -->` and `id:wp-x, `.
fn strip_ids(s: &str) -> String {
    let mut out = s.to_string();
    let mut from = 0;
    while let Some(rel) = out[from..].find("id:wp-") {
        let at = from + rel;
        let end = at
            + 6
            + out[at + 6..]
                .chars()
                .take_while(char::is_ascii_alphanumeric)
                .count();
        if out[end..].starts_with(", ") {
            out.replace_range(at..end + 2, "");
        } else if out[end..].starts_with(" -->") && out[..at].ends_with(" <!-- ") {
            out.replace_range(at - 6..end + 4, "");
        } else {
            from = end;
            continue;
        }
        from = at.saturating_sub(6);
    }
    out
}

/// Lines that differ between two texts, by index (same line count expected).
fn changed_lines(a: &str, b: &str) -> Vec<usize> {
    let (a, b): (Vec<_>, Vec<_>) = (a.split('\n').collect(), b.split('\n').collect());
    assert_eq!(a.len(), b.len());
    (0..a.len()).filter(|&i| a[i] != b[i]).collect()
}

const MESSY: &str = "\u{feff}# WORKPLAN\r\n\r\nIntro prose with a [ ] bracket.\r\n\r\n## Phase 1: Foundation\r\n\r\n- [ ] Set up project structure\r\n  Create the folders.\r\n\r\n    ```sh\r\n    - [ ] inside the description's code\r\n    ```\r\n* [X] Implement window store <!-- slice:windows, touches:windowStore,shellStore -->\r\n- [x] Already done\t\r\n\r\n```markdown\r\n- [ ] Example item inside a fence\r\n```\r\n\r\n## Phase 2: Features\r\n+ [ ] Add window snapping <!-- priority:1 -->\r\nSome prose.\r\n   - [ ] three spaces in, after prose: an item\r\n- [ ] Build taskbar <!-- a plain note -->\r\n~~~\r\n- [ ] tilde fence\r\n~~~\r\n1. [ ] numbered lists are prose\r\n- [ ]\r\n";

#[test]
fn workplan_ids_are_written_once_and_every_other_byte_is_kept() {
    let (_d, wp, file) = workplan(MESSY);
    let beads = wp.list().unwrap();
    let titles: Vec<&str> = beads.iter().map(|b| b.title.as_str()).collect();
    assert_eq!(
        titles,
        [
            "Set up project structure",
            "Implement window store",
            "Already done",
            "Add window snapping",
            "three spaces in, after prose: an item",
            "Build taskbar <!-- a plain note -->",
            "",
        ]
    );
    let after = read(&file);
    assert_eq!(strip_ids(&after), MESSY, "only ids were added");
    let unique: BTreeSet<_> = beads.iter().map(|b| b.id.clone()).collect();
    assert_eq!(unique.len(), beads.len());
    assert!(beads
        .iter()
        .all(|b| b.id.as_str().starts_with("wp-") && b.id.as_str().len() >= 6));
    assert!(after.contains(&format!(
        "<!-- id:{}, slice:windows, touches:windowStore,shellStore -->",
        beads[1].id
    )));
    assert_eq!(
        beads[0].description,
        "Create the folders.\n\n  ```sh\n  - [ ] inside the description's code\n  ```"
    );
    assert_eq!(
        beads.iter().map(|b| b.status).collect::<Vec<_>>()[..3],
        [BeadStatus::Open, BeadStatus::Closed, BeadStatus::Closed]
    );
    assert_eq!(beads[3].priority, 1);
    // Reading again changes nothing and yields the same ids.
    assert_eq!(wp.list().unwrap(), beads);
    assert_eq!(read(&file), after);
}

#[test]
fn workplan_ids_survive_retitling_and_insertions() {
    let (_d, wp, file) = workplan("# Plan\n\n- [ ] Alpha\n- [ ] Beta\n- [ ] Gamma\n");
    let first: HashMap<String, BeadId> = wp
        .list()
        .unwrap()
        .into_iter()
        .map(|b| (b.title, b.id))
        .collect();
    // A person retitles Beta and inserts two items above everything.
    let edited = read(&file)
        .replace("- [ ] Beta", "- [ ] Beta, renamed")
        .replace("# Plan\n\n", "# Plan\n\n- [ ] New one\n- [ ] Alpha\n");
    std::fs::write(&file, &edited).unwrap();
    let second = wp.list().unwrap();
    let by_title: HashMap<&str, &BeadId> =
        second.iter().map(|b| (b.title.as_str(), &b.id)).collect();
    assert_eq!(by_title["Beta, renamed"], &first["Beta"]);
    assert_eq!(by_title["Gamma"], &first["Gamma"]);
    assert_eq!(
        second[2].id, first["Alpha"],
        "the original Alpha keeps its id"
    );
    let unique: BTreeSet<_> = second.iter().map(|b| &b.id).collect();
    assert_eq!(unique.len(), 5, "the inserted twin 'Alpha' got its own id");
    assert_eq!(strip_ids(&read(&file)), strip_ids(&edited));
}

#[test]
fn workplan_ready_order_status_and_deps() {
    let text = "\
- [x] Done <!-- id:wp-d01 -->
- [ ] First open <!-- id:wp-a01 -->
- [ ] Waits on second <!-- id:wp-a02, deps:wp-a03 -->
- [ ] Second open <!-- id:wp-a03 -->
- [ ] Taken <!-- id:wp-a04, status:in_progress, assignee:w1 -->
- [ ] Stuck <!-- id:wp-a05, status:blocked, reason:no key -->
- [ ] Later <!-- id:wp-a06, status:deferred -->
- [ ] Needs done <!-- id:wp-a07, deps:wp-d01 -->
- [ ] Urgent at the end <!-- id:wp-a08, priority:0 -->
- [ ] Unknown dep <!-- id:wp-a09, deps:wp-zzz -->
- [ ] Stale status <!-- id:wp-a10, status:closed -->
";
    let (_d, wp, file) = workplan(text);
    assert_eq!(
        ids(&wp.ready().unwrap()),
        ["wp-a08", "wp-a01", "wp-a03", "wp-a07", "wp-a10"]
    );
    let show = wp.show(&id("wp-a02")).unwrap().unwrap();
    assert_eq!(
        (show.dependencies.clone(), show.status),
        (vec![id("wp-a03")], BeadStatus::Open)
    );
    let s = |i: &str| wp.show(&id(i)).unwrap().unwrap().status;
    assert_eq!(
        [s("wp-a04"), s("wp-a05"), s("wp-a06"), s("wp-d01")],
        [
            BeadStatus::InProgress,
            BeadStatus::Blocked,
            BeadStatus::Deferred,
            BeadStatus::Closed
        ]
    );
    assert_eq!(
        wp.show(&id("wp-a04")).unwrap().unwrap().assignee.as_deref(),
        Some("w1")
    );
    assert_eq!(wp.show(&id("wp-nope")).unwrap(), None);
    assert_eq!(
        read(&file),
        text,
        "reads never write a file that has its ids"
    );
}

#[test]
fn c3_3_workplan_dependencies() {
    let (_d, wp, file) =
        workplan("- [ ] Schema <!-- id:wp-s01 -->\n- [ ] Auth <!-- id:wp-a01 -->\n");
    wp.add_dependency(&id("wp-a01"), &id("wp-s01")).unwrap();
    wp.add_dependency(&id("wp-a01"), &id("wp-s01")).unwrap();
    assert_eq!(
        read(&file),
        "- [ ] Schema <!-- id:wp-s01 -->\n- [ ] Auth <!-- id:wp-a01, deps:wp-s01 -->\n"
    );
    assert_eq!(ids(&wp.ready().unwrap()), ["wp-s01"]);
    assert!(
        matches!(wp.add_dependency(&id("wp-a01"), &id("wp-x")), Err(TrackerError::NoSuchBead(m)) if m == id("wp-x"))
    );
    assert!(
        matches!(wp.add_dependency(&id("wp-x"), &id("wp-a01")), Err(TrackerError::NoSuchBead(m)) if m == id("wp-x"))
    );
    assert!(wp.add_dependency(&id("wp-a01"), &id("wp-a01")).is_err());
    assert_eq!(wp.claim(&id("wp-s01"), "w").unwrap(), ClaimOutcome::Claimed);
    wp.close(&id("wp-s01"), "done").unwrap();
    assert_eq!(ids(&wp.ready().unwrap()), ["wp-a01"]);
}

#[test]
fn c4_6_workplan_lifecycle_touches_only_the_item_line() {
    let (_d, wp, file) = workplan("# Plan\r\n\r\n- [ ] One <!-- id:wp-001, slice:ui -->\r\n  details\r\n- [ ] Two <!-- id:wp-002 -->\r\n");
    let one = id("wp-001");
    let mut before = read(&file);
    let mut step = |expect: &str| {
        let now = read(&file);
        assert_eq!(
            changed_lines(&before, &now),
            [2],
            "only the item's line changes"
        );
        assert!(now.contains(expect), "{now:?} lacks {expect:?}");
        before = now;
    };
    assert_eq!(wp.claim(&one, "w1").unwrap(), ClaimOutcome::Claimed);
    step("- [ ] One <!-- id:wp-001, slice:ui, status:in_progress, assignee:w1 -->\r\n");
    assert_eq!(
        wp.claim(&one, "w2").unwrap(),
        refused(BeadStatus::InProgress, Some("w1"))
    );
    assert_eq!(wp.claim(&one, "w1").unwrap(), ClaimOutcome::Claimed);
    wp.block(&one, "waiting, on a key").unwrap();
    step("- [ ] One <!-- id:wp-001, slice:ui, status:blocked, assignee:w1, reason:waiting; on a key -->\r\n");
    assert_eq!(
        wp.claim(&one, "w2").unwrap(),
        refused(BeadStatus::Blocked, Some("w1"))
    );
    assert!(wp.ready().unwrap().iter().all(|b| b.id != one));
    wp.reopen(&one, "key arrived").unwrap();
    step("- [ ] One <!-- id:wp-001, slice:ui -->\r\n");
    assert_eq!(wp.claim(&one, "w2").unwrap(), ClaimOutcome::Claimed);
    step("assignee:w2");
    wp.close(&one, "done").unwrap();
    step("- [x] One <!-- id:wp-001, slice:ui, assignee:w2 -->\r\n");
    let unchanged = read(&file);
    wp.close(&one, "again").unwrap();
    wp.reopen(&one, "no").unwrap();
    assert_eq!(
        read(&file),
        unchanged,
        "closed is final: close and reopen are no-ops"
    );
    assert!(matches!(
        wp.block(&one, "x"),
        Err(TrackerError::Failed { .. })
    ));
    assert_eq!(
        wp.claim(&one, "w3").unwrap(),
        refused(BeadStatus::Closed, Some("w2"))
    );
    assert!(matches!(
        wp.claim(&id("wp-404"), "w"),
        Err(TrackerError::NoSuchBead(_))
    ));
}

#[test]
fn workplan_create_appends_items() {
    let dir = tempfile::tempdir().unwrap();
    let wp = tracker::open(
        TrackerKind::Workplan,
        opts(dir.path(), None, Duration::from_secs(5)),
    )
    .unwrap();
    assert!(wp.list().unwrap().is_empty(), "no file is an empty plan");
    assert!(
        !dir.path().join(".braids/WORKPLAN.md").exists(),
        "reading does not create the file"
    );
    let a = wp
        .create("First <!-- sneaky -->", "Line one\n\n  indented\n", 2)
        .unwrap();
    let b = wp.create("Second", "", 0).unwrap();
    let file = dir.path().join(".braids/WORKPLAN.md");
    assert_eq!(
        read(&file),
        format!("# WORKPLAN\n\n- [ ] First  sneaky <!-- id:{a} -->\n  Line one\n\n    indented\n- [ ] Second <!-- id:{b}, priority:0 -->\n")
    );
    let first = wp.show(&a).unwrap().unwrap();
    assert_eq!(
        (first.description.as_str(), first.priority),
        ("Line one\n\n  indented", 2)
    );
    assert_eq!(ids(&wp.ready().unwrap()), [b.to_string(), a.to_string()]);
    // A file without a final newline gets one before the new item.
    std::fs::write(&file, "- [ ] Tail <!-- id:wp-t01 -->").unwrap();
    let c = wp.create("After", "", 2).unwrap();
    assert_eq!(
        read(&file),
        format!("- [ ] Tail <!-- id:wp-t01 -->\n- [ ] After <!-- id:{c} -->\n")
    );
}

#[test]
fn c3_2_claim_workplan_twenty_threads_one_winner() {
    let (_d, wp, file) =
        workplan("- [ ] Contended <!-- id:wp-c01 -->\n- [ ] Other <!-- id:wp-c02 -->\n");
    let wp: Arc<dyn Tracker> = Arc::from(wp);
    let gate = Arc::new(Barrier::new(20));
    let handles: Vec<_> = (0..20)
        .map(|n| {
            let (wp, gate) = (wp.clone(), gate.clone());
            std::thread::spawn(move || {
                gate.wait();
                (n, wp.claim(&id("wp-c01"), &format!("w{n}")).unwrap())
            })
        })
        .collect();
    let outcomes: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let winners: Vec<_> = outcomes
        .iter()
        .filter(|(_, o)| *o == ClaimOutcome::Claimed)
        .collect();
    assert_eq!(winners.len(), 1, "{outcomes:?}");
    let winner = format!("w{}", winners[0].0);
    assert!(read(&file).contains(&format!("status:in_progress, assignee:{winner} -->")));
    for (_, o) in outcomes.iter().filter(|(_, o)| *o != ClaimOutcome::Claimed) {
        assert_eq!(o, &refused(BeadStatus::InProgress, Some(&winner)));
    }
}

#[test]
fn workplan_concurrent_threads_closing_different_items_lose_nothing() {
    let text: String = (0..24)
        .map(|n| format!("- [ ] Item {n} <!-- id:wp-t{n:02} -->\n"))
        .collect();
    let (_d, wp, file) = workplan(&text);
    let wp: Arc<dyn Tracker> = Arc::from(wp);
    let handles: Vec<_> = (0..24)
        .map(|n| {
            let wp = wp.clone();
            std::thread::spawn(move || wp.close(&id(&format!("wp-t{n:02}")), "done").unwrap())
        })
        .collect();
    handles.into_iter().for_each(|h| h.join().unwrap());
    let expected: String = (0..24)
        .map(|n| format!("- [x] Item {n} <!-- id:wp-t{n:02} -->\n"))
        .collect();
    assert_eq!(read(&file), expected);
}

/// Runs inside a child process started by `workplan_two_processes_close_different_items`.
#[test]
#[ignore = "child process of workplan_two_processes_close_different_items"]
fn workplan_child_closer() {
    let (Ok(project), Ok(list)) = (
        std::env::var("WP_CHILD_PROJECT"),
        std::env::var("WP_CHILD_IDS"),
    ) else {
        return;
    };
    let wp = tracker::open(
        TrackerKind::Workplan,
        opts(Path::new(&project), None, Duration::from_secs(60)),
    )
    .unwrap();
    for raw in list.split(',') {
        wp.close(&id(raw), "closed by a child process").unwrap();
    }
}

#[test]
fn workplan_two_processes_close_different_items() {
    let text: String = (0..40)
        .map(|n| format!("- [ ] Item {n} <!-- id:wp-p{n:02} -->\n"))
        .collect();
    let (dir, _wp, file) = workplan(&text);
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..2)
        .map(|k| {
            let mine: Vec<String> = (0..40)
                .filter(|n| n % 2 == k)
                .map(|n| format!("wp-p{n:02}"))
                .collect();
            Command::new(&exe)
                .args([
                    "--exact",
                    &test_name(module_path!(), "workplan_child_closer"),
                    "--ignored",
                    "--test-threads=1",
                    "--quiet",
                ])
                .env("WP_CHILD_PROJECT", dir.path())
                .env("WP_CHILD_IDS", mine.join(","))
                .spawn()
                .unwrap()
        })
        .collect();
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
    let expected: String = (0..40)
        .map(|n| format!("- [x] Item {n} <!-- id:wp-p{n:02} -->\n"))
        .collect();
    assert_eq!(
        read(&file),
        expected,
        "both processes' updates are recorded"
    );
}
