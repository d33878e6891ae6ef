//! Session backends against real processes, real signals and real process groups (CONTRACTS
//! 2.2, 2.5, 2.6). Nothing here is mocked: workers are `sh` scripts, the tick lock is a real
//! `flock`, and the tmux tests run a private tmux server per test.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use braids::model::{BeadId, SessionLabel, SpawnMessage};
use braids::session::process::ProcessBackend;
use braids::session::tmux::TmuxBackend;
use braids::session::{KillOutcome, Session, SessionBackend, SessionError, SpawnSpec};
use braids::system::lock::TickLock;

use crate::support::procs::{alive, group_members, stat, Bystander};
use crate::support::{test_name, wait_for};

// ---------------------------------------------------------------------------------------------
// helpers

const WAIT: Duration = Duration::from_secs(30);

fn label(bead: &str) -> SessionLabel {
    SessionLabel::new("t", BeadId::new(bead).unwrap()).unwrap()
}

fn message(bead: &str) -> SpawnMessage {
    SpawnMessage::new("/p/app".into(), BeadId::new(bead).unwrap(), 3, "#dev").unwrap()
}

/// A worker running `script` under `sh -c`, in `dir`, logging to `dir/logs/<bead>.log`.
fn spec(dir: &Path, bead: &str, script: &str) -> SpawnSpec {
    argv_spec(dir, bead, &["sh", "-c", script])
}

fn argv_spec(dir: &Path, bead: &str, argv: &[&str]) -> SpawnSpec {
    SpawnSpec {
        label: label(bead),
        message: message(bead),
        argv: argv.iter().map(OsString::from).collect(),
        cwd: dir.to_path_buf(),
        env: vec![("BRAIDS_TEST_VAR".into(), "x y;".into())],
        log: dir.join("logs").join(format!("{bead}.log")),
        placement: Default::default(),
    }
}

#[track_caller]
fn wait_until(what: &str, mut ok: impl FnMut() -> bool) {
    wait_for(what, WAIT, || ok().then_some(()));
}

fn fds(pid: u32) -> BTreeSet<String> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

fn only(sessions: Vec<Session>, bead: &str) -> Session {
    let mut mine: Vec<Session> = sessions
        .into_iter()
        .filter(|s| s.label == label(bead))
        .collect();
    assert_eq!(mine.len(), 1, "{mine:?}");
    mine.remove(0)
}

/// `flock -n <path> true`: whether another process can take the lock right now.
fn other_process_can_lock(path: &Path) -> bool {
    let status = Command::new("flock")
        .arg("-n")
        .arg(path)
        .arg("true")
        .status()
        .unwrap();
    match status.code() {
        Some(0) => true,
        Some(1) => false,
        other => panic!("flock failed: {other:?}"),
    }
}

/// Kills every running session of `backend`, so a failing test leaves no worker behind.
fn stop_all(backend: &dyn SessionBackend) {
    for s in backend.list().unwrap_or_default() {
        if s.running {
            let _ = backend.kill(&s, Duration::ZERO);
        }
    }
}

/// A process backend whose running workers are killed when the test ends, pass or fail.
struct Workers(ProcessBackend);

impl Workers {
    fn new(sessions_dir: PathBuf) -> Workers {
        Workers(ProcessBackend::new(sessions_dir))
    }
}

impl std::ops::Deref for Workers {
    type Target = ProcessBackend;
    fn deref(&self) -> &ProcessBackend {
        &self.0
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        stop_all(&self.0);
    }
}

// ---------------------------------------------------------------------------------------------
// process backend

#[test]
fn c2_5_process_worker_gets_the_message_is_listed_by_label_and_exit_is_seen() {
    let dir = tempfile::tempdir().unwrap();
    let backend = Workers::new(dir.path().join("sessions"));
    let script =
        "cat > got.txt; echo out; echo err >&2; printf %s \"$BRAIDS_TEST_VAR\" > env.txt; \
                  while [ ! -e go ]; do sleep 0.05; done";
    let spec = spec(dir.path(), "t-a1", script);
    let spawned = backend.spawn(&spec).unwrap();
    assert!(spawned.running);
    assert_eq!(spawned.label.to_string(), "project:t:t-a1");
    let pid = spawned.pid.unwrap();

    let got = dir.path().join("got.txt");
    wait_until("the message on stdin", || {
        std::fs::read_to_string(&got).is_ok_and(|t| t.ends_with("\n"))
    });
    let text = std::fs::read_to_string(&got).unwrap();
    assert_eq!(
        text,
        "Project: /p/app\nBead: t-a1\nIteration: 3\nChannel: #dev\n"
    );
    assert_eq!(text.lines().count(), 4);
    wait_until("env", || {
        std::fs::read_to_string(dir.path().join("env.txt")).is_ok_and(|t| t == "x y;")
    });

    // Its own session and process group, detached from ours.
    let st = stat(pid).unwrap();
    let (pgrp, sid, starttime) = (st.pgrp, st.session, st.starttime);
    assert_eq!((pgrp, sid), (pid as i32, pid as i32));
    assert_eq!(spawned.id, format!("{pid}:{starttime}"));

    let listed = only(backend.list().unwrap(), "t-a1");
    assert!(listed.running);
    assert_eq!(listed, spawned);
    assert!(backend.record_path(&label("t-a1")).unwrap().is_file());

    std::fs::write(dir.path().join("go"), "").unwrap();
    wait_until("exit to be seen", || {
        !only(backend.list().unwrap(), "t-a1").running
    });
    // Listing reaped it: no defunct zombie is left behind in a long-lived spawner.
    wait_until("the worker to be reaped", || {
        backend.list().unwrap();
        // (pids wrap at 32768 here: a new process with this pid is not the worker)
        stat(pid).is_none_or(|st| st.starttime != starttime)
    });

    let log = std::fs::read_to_string(&spec.log).unwrap();
    assert!(log.contains("out\n") && log.contains("err\n"), "{log:?}");

    let ended = only(backend.list().unwrap(), "t-a1");
    backend.forget(&ended).unwrap();
    assert!(backend.list().unwrap().is_empty());
    assert!(!backend.record_path(&label("t-a1")).unwrap().exists());
    assert!(!backend.message_path(&label("t-a1")).unwrap().exists());
    assert!(spec.log.exists(), "forget keeps the log");
    backend.forget(&ended).unwrap(); // idempotent
}

#[test]
fn c2_6_process_kill_takes_down_the_whole_process_tree() {
    let dir = tempfile::tempdir().unwrap();
    let backend = Workers::new(dir.path().join("sessions"));
    let s = backend
        .spawn(&spec(dir.path(), "t-k1", "sleep 300 & sleep 300 & wait"))
        .unwrap();
    let pid = s.pid.unwrap();
    wait_until("the grandchildren", || group_members(pid).len() == 3);

    assert_eq!(
        backend.kill(&s, Duration::from_secs(5)).unwrap(),
        KillOutcome::Terminated
    );
    assert_eq!(
        group_members(pid),
        Vec::<u32>::new(),
        "a process of the group survived"
    );
    assert!(!only(backend.list().unwrap(), "t-k1").running);
    // Killing again signals nothing.
    assert_eq!(
        backend.kill(&s, Duration::from_secs(5)).unwrap(),
        KillOutcome::AlreadyGone
    );
}

#[test]
fn c2_6_process_worker_ignoring_sigterm_is_killed_after_the_grace() {
    let dir = tempfile::tempdir().unwrap();
    let backend = Workers::new(dir.path().join("sessions"));
    let script = "trap '' TERM; sleep 300 & touch ready; wait";
    let s = backend.spawn(&spec(dir.path(), "t-k2", script)).unwrap();
    let pid = s.pid.unwrap();
    wait_until("the trap", || {
        dir.path().join("ready").exists() && group_members(pid).len() == 2
    });

    let start = Instant::now();
    let grace = Duration::from_millis(400);
    assert_eq!(backend.kill(&s, grace).unwrap(), KillOutcome::Killed);
    assert!(start.elapsed() >= grace);
    assert_eq!(group_members(pid), Vec::<u32>::new());
    assert!(!only(backend.list().unwrap(), "t-k2").running);
}

#[test]
fn c2_6_process_reused_pid_is_never_signalled() {
    let dir = tempfile::tempdir().unwrap();
    let sessions = dir.path().join("sessions");
    let backend = Workers::new(sessions.clone());
    let mut other = Bystander::start();
    let pid = other.pid();
    let real_start = stat(pid).unwrap().starttime;

    // A record whose pid now belongs to an unrelated process that started at another time.
    let write_record = |starttime: u64| {
        let rec = serde_json::json!({
            "label": "project:t:t-r1",
            "pid": pid,
            "starttime": starttime,
            "started_at": "2026-01-01T00:00:00Z",
            "log": dir.path().join("r1.log"),
        });
        std::fs::create_dir_all(&sessions).unwrap();
        std::fs::write(
            backend.record_path(&label("t-r1")).unwrap(),
            rec.to_string(),
        )
        .unwrap();
    };
    write_record(real_start - 1);
    let s = only(backend.list().unwrap(), "t-r1");
    assert!(!s.running, "a reused pid was taken for the worker");
    assert_eq!(
        backend.kill(&s, Duration::from_secs(5)).unwrap(),
        KillOutcome::AlreadyGone
    );
    std::thread::sleep(Duration::from_millis(100));
    assert!(
        alive(pid) && other.0.try_wait().unwrap().is_none(),
        "the unrelated process was signalled"
    );
    // A spawn is not refused because of it, and forgetting it leaves the process alone.
    backend.forget(&s).unwrap();
    assert!(backend.list().unwrap().is_empty());
    assert!(alive(pid));

    // Control: with the right start time the same pid is the worker, and kill reaches it.
    write_record(real_start);
    let s = only(backend.list().unwrap(), "t-r1");
    assert!(s.running);
    assert_eq!(
        backend.kill(&s, Duration::from_secs(5)).unwrap(),
        KillOutcome::Terminated
    );
    assert!(
        other.0.wait().unwrap().code().is_none(),
        "killed by a signal"
    );
}

#[test]
fn c2_6_process_corrupt_records_are_reported_not_fatal() {
    let dir = tempfile::tempdir().unwrap();
    let sessions = dir.path().join("sessions");
    let backend = Workers::new(sessions.clone());
    let good = backend
        .spawn(&argv_spec(dir.path(), "t-c1", &["sleep", "300"]))
        .unwrap();
    std::fs::write(backend.record_path(&label("t-c2")).unwrap(), "{ not json").unwrap();
    std::fs::write(sessions.join("stray.json"), "[]").unwrap();
    std::fs::write(sessions.join(".braids-tmp-x.json"), "").unwrap();
    std::fs::write(sessions.join("notes.txt"), "").unwrap();

    let survey = backend.survey().unwrap();
    assert_eq!(survey.sessions.len(), 1);
    assert_eq!(survey.sessions[0].label, good.label);
    let labels: Vec<Option<String>> = survey.problems.iter().map(|p| p.label.clone()).collect();
    assert_eq!(
        labels,
        vec![None, Some("project:t:t-c2".into())],
        "{:?}",
        survey.problems
    );
    assert_eq!(backend.list().unwrap().len(), 1);

    // The label of an unreadable record is not spawned over: its worker may be running.
    let err = backend
        .spawn(&argv_spec(dir.path(), "t-c2", &["sleep", "300"]))
        .unwrap_err();
    assert!(matches!(err, SessionError::Spawn { .. }), "{err}");
    assert_eq!(
        backend.kill(&good, Duration::from_secs(5)).unwrap(),
        KillOutcome::Terminated
    );
}

#[test]
fn c2_2_process_second_worker_for_a_running_label_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let backend = Workers::new(dir.path().join("sessions"));
    let first = backend
        .spawn(&argv_spec(dir.path(), "t-d1", &["sleep", "300"]))
        .unwrap();
    let err = backend
        .spawn(&argv_spec(dir.path(), "t-d1", &["sleep", "300"]))
        .unwrap_err();
    assert!(err.to_string().contains("already running"), "{err}");
    assert!(
        backend.forget(&first).is_err(),
        "a running session cannot be forgotten"
    );
    assert_eq!(only(backend.list().unwrap(), "t-d1"), first);

    assert_eq!(
        backend.kill(&first, Duration::from_secs(5)).unwrap(),
        KillOutcome::Terminated
    );
    let second = backend
        .spawn(&argv_spec(dir.path(), "t-d1", &["sleep", "300"]))
        .unwrap();
    assert_ne!(second.id, first.id);
    // Forgetting the old session leaves the new one's record alone.
    backend.forget(&first).unwrap();
    assert_eq!(only(backend.list().unwrap(), "t-d1"), second);
    assert_eq!(
        backend.kill(&second, Duration::from_secs(5)).unwrap(),
        KillOutcome::Terminated
    );
}

#[test]
fn process_spawn_errors_leave_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let backend = Workers::new(dir.path().join("sessions"));
    let missing = argv_spec(dir.path(), "t-e1", &["/nonexistent/braids-worker"]);
    assert!(matches!(
        backend.spawn(&missing),
        Err(SessionError::Spawn { .. })
    ));
    let mut nodir = argv_spec(dir.path(), "t-e2", &["sleep", "1"]);
    nodir.cwd = dir.path().join("nope");
    assert!(matches!(
        backend.spawn(&nodir),
        Err(SessionError::Spawn { .. })
    ));
    let mut empty = argv_spec(dir.path(), "t-e3", &[]);
    empty.argv.clear();
    assert!(backend.spawn(&empty).is_err());
    assert!(backend.list().unwrap().is_empty());
    let left: Vec<_> = std::fs::read_dir(dir.path().join("sessions"))
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn c2_2_process_workers_inherit_no_descriptors() {
    let dir = tempfile::tempdir().unwrap();
    let backend = Workers::new(dir.path().join("sessions"));
    // A descriptor braids did not open close-on-exec (one inherited from cron, say).
    let leaky = std::fs::File::create(dir.path().join("leaky")).unwrap();
    let fd = std::os::fd::AsRawFd::as_raw_fd(&leaky);
    nix::fcntl::fcntl(
        &leaky,
        nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::empty()),
    )
    .unwrap();
    let lock = TickLock::try_acquire(&dir.path().join(".tick.lock"))
        .unwrap()
        .unwrap();

    let s = backend
        .spawn(&argv_spec(dir.path(), "t-f1", &["sleep", "300"]))
        .unwrap();
    let pid = s.pid.unwrap();
    // Just after exec the dynamic loader briefly holds a descriptor of its own (ld.so.cache,
    // libc), so wait for the set to settle; a leaked descriptor would stay forever.
    let expected: BTreeSet<String> = ["0", "1", "2"].map(String::from).into();
    let mut seen = BTreeSet::new();
    let settled = (0..500).any(|_| {
        seen = fds(pid);
        seen == expected || {
            std::thread::sleep(Duration::from_millis(20));
            false
        }
    });
    assert!(
        settled,
        "fd {fd} or the lock leaked into the worker: {seen:?}"
    );
    drop(lock);
    drop(leaky);
    assert_eq!(
        backend.kill(&s, Duration::from_secs(5)).unwrap(),
        KillOutcome::Terminated
    );
}

#[test]
fn c2_2_worker_does_not_inherit_the_tick_lock() {
    let dir = tempfile::tempdir().unwrap();
    let backend = Workers::new(dir.path().join("sessions"));
    let path = dir.path().join(".tick.lock");
    let lock = TickLock::try_acquire(&path).unwrap().expect("free");
    let s = backend
        .spawn(&argv_spec(dir.path(), "t-l1", &["sleep", "300"]))
        .unwrap();
    assert!(!other_process_can_lock(&path));
    drop(lock);
    assert!(
        other_process_can_lock(&path),
        "the worker holds the tick lock"
    );
    assert!(only(backend.list().unwrap(), "t-l1").running);
    assert_eq!(
        backend.kill(&s, Duration::from_secs(5)).unwrap(),
        KillOutcome::Terminated
    );
}

/// The real failure mode: a tick that dies (never unlocking) while its worker runs. The spawner
/// is a separate process (this test binary, re-run as `helper_spawner_process`) that takes the
/// tick lock and also a lock on a descriptor it leaks without close-on-exec, spawns a worker
/// and exits. Both locks must be free while the worker runs on.
#[test]
fn c2_2_a_dead_spawner_leaves_no_lock_behind_in_its_worker() {
    let dir = tempfile::tempdir().unwrap();
    let status = Command::new(std::env::current_exe().unwrap())
        .args([
            &test_name(module_path!(), "helper_spawner_process"),
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("BRAIDS_TEST_HELPER_DIR", dir.path())
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let backend = Workers::new(dir.path().join("sessions"));
    let s = only(backend.list().unwrap(), "t-h1");
    assert!(s.running, "the worker outlives its spawner");
    assert!(
        other_process_can_lock(&dir.path().join(".tick.lock")),
        "tick lock held by the worker"
    );
    assert!(
        other_process_can_lock(&dir.path().join("leaky.lock")),
        "leaked lock held by the worker"
    );
    assert_eq!(
        backend.kill(&s, Duration::from_secs(5)).unwrap(),
        KillOutcome::Terminated
    );
}

#[test]
fn helper_spawner_process() {
    let Some(dir) = std::env::var_os("BRAIDS_TEST_HELPER_DIR").map(PathBuf::from) else {
        return; // only does something when run by the test above
    };
    let lock = TickLock::try_acquire(&dir.join(".tick.lock"))
        .unwrap()
        .unwrap();
    let fd = nix::fcntl::open(
        &dir.join("leaky.lock"),
        nix::fcntl::OFlag::O_RDWR | nix::fcntl::OFlag::O_CREAT,
        nix::sys::stat::Mode::from_bits_truncate(0o600),
    )
    .unwrap();
    let leaky = nix::fcntl::Flock::lock(fd, nix::fcntl::FlockArg::LockExclusiveNonblock).unwrap();
    let backend = ProcessBackend::new(dir.join("sessions"));
    backend
        .spawn(&argv_spec(&dir, "t-h1", &["sleep", "300"]))
        .unwrap();
    // Die without unlocking anything, as a crashed tick would.
    std::mem::forget(lock);
    std::mem::forget(leaky);
    std::process::exit(0);
}

// ---------------------------------------------------------------------------------------------
// tick lock

#[test]
fn c2_2_tick_lock_excludes_other_processes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("braids/.tick.lock");
    let lock = TickLock::try_acquire(&path).unwrap().expect("free");
    assert!(!other_process_can_lock(&path));
    assert!(TickLock::try_acquire(&path).unwrap().is_none());
    drop(lock);
    assert!(other_process_can_lock(&path));

    // Held by another process (for 5 s: the checks below must all happen while it holds the
    // lock, however loaded the machine): try fails, a short acquire gives up, a long one waits.
    let held = dir.path().join("held");
    let mut holder = Command::new("flock")
        .arg(&path)
        .args(["sh", "-c", "touch \"$0\"; sleep 5", held.to_str().unwrap()])
        .spawn()
        .unwrap();
    wait_until("the other holder", || held.exists());
    assert!(TickLock::try_acquire(&path).unwrap().is_none());
    assert!(TickLock::acquire(&path, Duration::from_millis(50))
        .unwrap()
        .is_none());
    let waited = TickLock::acquire(&path, Duration::from_secs(30)).unwrap();
    assert!(waited.is_some());
    assert!(holder.wait().unwrap().success());
}

// ---------------------------------------------------------------------------------------------
// tmux backend

/// A private tmux server (`-L braids-test-<pid>-<n>`) for one test, killed at the end even when
/// the test fails, and its socket file removed.
struct Server {
    backend: TmuxBackend,
    name: String,
    socket: PathBuf,
}

impl Server {
    fn new(dir: &Path) -> Server {
        static N: AtomicUsize = AtomicUsize::new(0);
        let name = format!(
            "braids-test-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        );
        let tmpdir = std::env::var_os("TMUX_TMPDIR").unwrap_or_else(|| "/tmp".into());
        let socket = Path::new(&tmpdir)
            .join(format!("tmux-{}", nix::unistd::getuid()))
            .join(&name);
        let backend = TmuxBackend::new(dir.join("sessions")).with_socket_name(&name);
        Server {
            backend,
            name,
            socket,
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        stop_all(&self.backend);
        let _ = self.backend.kill_server();
        let _ = std::fs::remove_file(&self.socket);
    }
}

#[test]
fn c2_5_tmux_spawn_lists_the_exact_label_and_detects_exit() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::new(dir.path());
    let tmux = &server.backend;
    assert!(
        tmux.list().unwrap().is_empty(),
        "no server yet means no sessions"
    );

    let script = "cat > got.txt; echo out; echo err >&2; while [ ! -e go ]; do sleep 0.05; done";
    let spec = spec(dir.path(), "t-x1.b_c", script);
    let spawned = tmux.spawn(&spec).unwrap();
    assert!(spawned.running);
    let pid = spawned.pid.unwrap();
    let got = dir.path().join("got.txt");
    wait_until("the message on stdin", || {
        std::fs::read_to_string(&got).is_ok_and(|t| t.ends_with("\n"))
    });
    assert_eq!(
        std::fs::read_to_string(&got).unwrap(),
        message("t-x1.b_c").to_string()
    );

    let listed = only(tmux.list().unwrap(), "t-x1.b_c");
    assert_eq!(
        listed.label.to_string(),
        "project:t:t-x1.b_c",
        "label read back exactly"
    );
    assert_eq!(listed, spawned);
    let st = stat(pid).unwrap();
    let (pgrp, sid) = (st.pgrp, st.session);
    assert_eq!(
        (pgrp, sid),
        (pid as i32, pid as i32),
        "the pane leads its own group"
    );

    let err = tmux.spawn(&spec).unwrap_err();
    assert!(err.to_string().contains("already running"), "{err}");
    assert!(
        tmux.forget(&listed).is_err(),
        "a running session cannot be forgotten"
    );

    std::fs::write(dir.path().join("go"), "").unwrap();
    wait_until("exit to be seen", || {
        !only(tmux.list().unwrap(), "t-x1.b_c").running
    });
    let log = std::fs::read_to_string(&spec.log).unwrap();
    assert!(log.contains("out\n") && log.contains("err\n"), "{log:?}");

    let ended = only(tmux.list().unwrap(), "t-x1.b_c");
    assert_eq!(ended.log.as_deref(), Some(spec.log.as_path()));
    tmux.forget(&ended).unwrap();
    assert!(tmux.list().unwrap().is_empty());
    assert!(spec.log.exists());
}

#[test]
fn c2_5_tmux_passes_argv_env_and_cwd_verbatim() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::new(dir.path());
    let cwd = dir.path().join("odd #{dir};");
    std::fs::create_dir(&cwd).unwrap();
    let odd = [
        ";",
        "a;",
        "a\\;",
        "#{pane_pid}",
        "$HOME",
        "it's",
        "",
        " sp ",
        "-t",
        "\\",
        "x\ny",
    ];
    let script =
        "printf '<%s>' \"$@\" > args.txt; printf %s \"$BRAIDS_TEST_VAR\" > env.txt; pwd > pwd.txt";
    let mut argv = vec!["sh", "-c", script, "worker"];
    argv.extend(odd);
    let mut spec = argv_spec(&cwd, "t-v1", &argv);
    spec.env = vec![("BRAIDS_TEST_VAR".into(), "#{session_name};".into())];
    let s = server.backend.spawn(&spec).unwrap();
    wait_until("the worker to finish", || {
        !only(server.backend.list().unwrap(), "t-v1").running
    });
    let expected: String = odd.iter().map(|a| format!("<{a}>")).collect();
    assert_eq!(
        std::fs::read_to_string(cwd.join("args.txt")).unwrap(),
        expected
    );
    assert_eq!(
        std::fs::read_to_string(cwd.join("env.txt")).unwrap(),
        "#{session_name};"
    );
    assert_eq!(
        std::fs::read_to_string(cwd.join("pwd.txt"))
            .unwrap()
            .trim_end(),
        cwd.to_str().unwrap()
    );
    assert_eq!(
        server.backend.kill(&s, Duration::from_secs(5)).unwrap(),
        KillOutcome::AlreadyGone
    );
    assert!(
        server.backend.list().unwrap().is_empty(),
        "kill removes the ended session"
    );
}

#[test]
fn c2_6_tmux_kill_takes_down_the_tree_and_the_session() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::new(dir.path());
    let tmux = &server.backend;
    let s = tmux
        .spawn(&spec(dir.path(), "t-k1", "sleep 300 & sleep 300 & wait"))
        .unwrap();
    let pid = s.pid.unwrap();
    // The pane's shell (and its subshells and `tee`), the worker's shell and two sleeps.
    wait_until("the grandchildren", || {
        group_members(pid)
            .iter()
            .filter(|p| proc_cmdline(**p).starts_with("sleep"))
            .count()
            == 2
    });
    assert_eq!(
        tmux.kill(&s, Duration::from_secs(5)).unwrap(),
        KillOutcome::Terminated
    );
    assert_eq!(group_members(pid), Vec::<u32>::new());
    assert!(tmux.list().unwrap().is_empty());
    assert_eq!(
        tmux.kill(&s, Duration::from_secs(5)).unwrap(),
        KillOutcome::AlreadyGone
    );
}

#[test]
fn tmux_pane_shows_the_output_live_and_the_log_keeps_it() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::new(dir.path());
    let tmux = &server.backend;
    let s = tmux
        .spawn(&spec(
            dir.path(),
            "t-out",
            "echo hello from the agent; echo to stderr >&2; sleep 300",
        ))
        .unwrap();
    let log = dir.path().join("logs/t-out.log");
    wait_until("the pane to show the output", || {
        let pane = std::process::Command::new("tmux")
            .args([
                "-L",
                &server.name,
                "capture-pane",
                "-p",
                "-t",
                s.id.split('/').next().unwrap(),
            ])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&pane.stdout).into_owned();
        text.contains("hello from the agent") && text.contains("to stderr")
    });
    // The wrapper writes each chunk to the pane and to the log, one after the other: on a
    // busy machine the log may be a moment behind what the pane shows.
    wait_until("the log to keep the output", || {
        let logged = std::fs::read_to_string(&log).unwrap_or_default();
        logged.contains("hello from the agent") && logged.contains("to stderr")
    });
    assert_eq!(
        tmux.kill(&s, Duration::from_secs(5)).unwrap(),
        KillOutcome::Terminated
    );
}

#[test]
fn c2_6_tmux_worker_ignoring_sigterm_is_killed_after_the_grace() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::new(dir.path());
    let tmux = &server.backend;
    // Ignores SIGHUP too: tmux hangs the pane up once the pane's shell has died of SIGTERM.
    let script = "trap '' TERM HUP; sleep 300 & touch ready; wait";
    let s = tmux.spawn(&spec(dir.path(), "t-k2", script)).unwrap();
    let pid = s.pid.unwrap();
    wait_until("the trap", || {
        dir.path().join("ready").exists()
            && group_members(pid)
                .iter()
                .any(|p| proc_cmdline(*p).starts_with("sleep"))
    });
    assert_eq!(
        tmux.kill(&s, Duration::from_millis(300)).unwrap(),
        KillOutcome::Killed
    );
    assert_eq!(group_members(pid), Vec::<u32>::new());
    assert!(tmux.list().unwrap().is_empty());
}

#[test]
fn c2_6_tmux_stale_identity_is_never_signalled() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::new(dir.path());
    let tmux = &server.backend;
    let s = tmux
        .spawn(&argv_spec(dir.path(), "t-s1", &["sleep", "300"]))
        .unwrap();
    let pid = s.pid.unwrap();
    // The same pane pid with another start time is not this worker: nothing is touched.
    let (sid, rest) = s.id.split_once('/').unwrap();
    let start: u64 = rest.split_once(':').unwrap().1.parse().unwrap();
    let stale = Session {
        id: format!("{sid}/{pid}:{}", start - 1),
        ..s.clone()
    };
    assert_eq!(
        tmux.kill(&stale, Duration::from_secs(5)).unwrap(),
        KillOutcome::AlreadyGone
    );
    assert!(alive(pid));
    assert!(only(tmux.list().unwrap(), "t-s1").running);
    assert_eq!(
        tmux.kill(&s, Duration::from_secs(5)).unwrap(),
        KillOutcome::Terminated
    );
}

#[test]
fn c2_6_tmux_foreign_sessions_are_reported_and_a_missing_program_ends_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::new(dir.path());
    let tmux = &server.backend;
    // tmux cannot fail the spawn for a missing program (the pane's shell reports it), but the
    // session is seen to end and the log says why.
    let spec = argv_spec(dir.path(), "t-m1", &["/nonexistent/braids-worker", "x"]);
    let s = tmux.spawn(&spec).unwrap();
    wait_until("the pane to die", || {
        !only(tmux.list().unwrap(), "t-m1").running
    });
    let log = std::fs::read_to_string(&spec.log).unwrap();
    assert!(log.contains("/nonexistent/braids-worker"), "{log:?}");

    // A session somebody started by hand on braids' socket is no worker, but it is reported.
    let status = Command::new("tmux")
        .args([
            "-L",
            &server.name,
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-s",
            "foreign",
            "sleep",
            "300",
        ])
        .status()
        .unwrap();
    assert!(status.success());
    let survey = tmux.survey().unwrap();
    assert_eq!(survey.sessions.len(), 1);
    assert_eq!(survey.problems.len(), 1, "{:?}", survey.problems);
    assert!(survey.problems[0].location.contains("foreign"));
    tmux.forget(&s).unwrap();
    assert!(tmux.list().unwrap().is_empty());
}

/// A process's command line, arguments joined by spaces ("" once it is gone).
fn proc_cmdline(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            String::from_utf8_lossy(&b)
                .replace('\0', " ")
                .trim()
                .to_string()
        })
        .unwrap_or_default()
}
