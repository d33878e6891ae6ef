//! `cargo bench --bench agents`: what braids adds around an agent run with each preset, on a
//! small repository with a bare upstream and a stand-in model, the real CLI doing its own tool
//! call:
//!
//! - spawn → agent: from starting `braids worker` (what a tick's spawn starts) to the agent CLI's
//!   process starting (claim, context, worktree, prompt);
//! - agent exit → landed: from the CLI's exit to the worker's (report, deliverable, close, one
//!   commit fast-forwarded, push, worktree removed).
//!
//! The program braids runs is a two-line `sh` wrapper around the real CLI that notes the time
//! when it starts and when the CLI exits. A CLI that is not installed where `.ci/run` puts it is
//! skipped with the reason. Median and maximum of `RUNS` beads each; target: under 300 ms p50.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

#[path = "../tests/integration/support/agent_model.rs"]
#[allow(dead_code)]
mod agent_model;

#[path = "../tests/integration/support/agent_cli.rs"]
#[allow(dead_code)]
mod agent_cli;

use agent_cli::Cli;
use agent_model::{AgentModel, Script};

const RUNS: usize = 10;

fn br() -> PathBuf {
    let home = std::env::var("HOME").unwrap_or_default();
    std::env::var_os("PATH")
        .map(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join("br"))
                .collect::<Vec<_>>()
        })
        .unwrap_or_default()
        .into_iter()
        .chain([PathBuf::from(home).join(".cargo/bin/br")])
        .find(|p| p.is_file())
        .expect("`br` is not installed")
}

struct Bench {
    home: tempfile::TempDir,
    path: String,
}

impl Bench {
    fn new() -> Bench {
        let home = tempfile::Builder::new()
            .prefix("braids-bench-agents-")
            .tempdir()
            .unwrap();
        std::fs::write(
            home.path().join(".gitconfig"),
            "[user]\n\tname = bench\n\temail = bench@braids.invalid\n[init]\n\tdefaultBranch = main\n",
        )
        .unwrap();
        let br_dir = br().parent().unwrap().to_path_buf();
        let path = format!(
            "{}:{}",
            br_dir.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        Bench { home, path }
    }

    fn home(&self) -> &Path {
        self.home.path()
    }

    fn cmd(&self, program: impl AsRef<std::ffi::OsStr>, args: &[&str], dir: &Path) -> Command {
        let mut c = Command::new(program);
        c.args(args)
            .current_dir(dir)
            .env("HOME", self.home())
            .env("PATH", &self.path)
            .env("BRAIDS_LOG", "warn")
            .env_remove("BRAIDS_HOME")
            .env("GIT_CONFIG_GLOBAL", self.home().join(".gitconfig"));
        c
    }

    fn run(&self, program: impl AsRef<std::ffi::OsStr>, args: &[&str], dir: &Path) -> String {
        let o = self.cmd(program, args, dir).output().unwrap();
        assert!(
            o.status.success(),
            "{args:?}: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    fn braids(&self, args: &[&str]) -> String {
        self.run(env!("CARGO_BIN_EXE_braids"), args, self.home())
    }
}

fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

fn stamps(file: &Path) -> Vec<u128> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn measure(cli: Cli) {
    let model = AgentModel::start(Script::Write {
        files: vec![("hello.txt".into(), "hi\n".into())],
        final_text: "Created hello.txt.".into(),
    });
    let b = Bench::new();
    b.braids(&["init"]);
    let config = b.home().join(".openclaw/braids/config.toml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    merge(&mut text, "[worker]\nretry_backoff = \"0s\"\n");
    // The CLI's own settings, then the wrapper that notes when it starts and ends.
    let setup = cli.config(b.home(), &model.url(), &b.path);
    // Under the agents' sandbox (the default) the wrapper runs inside it: its notes go where
    // the sandbox lets it write.
    let notes = b.home().join("stamps");
    std::fs::create_dir_all(&notes).unwrap();
    // The sandbox reads the program it runs and that program's interpreter; behind the
    // wrapper the CLI's interpreter (aider's virtualenv python, installed under the real
    // home) is named here, as a person with such a wrapper would.
    let interpreter = std::fs::read_to_string(cli.program())
        .ok()
        .and_then(|t| {
            t.lines()
                .next()?
                .strip_prefix("#!")
                .map(str::trim)
                .map(PathBuf::from)
        })
        .and_then(|p| p.canonicalize().ok())
        .and_then(|p| Some(p.parent()?.parent()?.to_path_buf()))
        .map(|p| format!(", {:?}", p.display().to_string()))
        .unwrap_or_default();
    // `BRAIDS_BENCH_SANDBOX=off` measures the same without the sandbox, for its share.
    if let Ok(kind) = std::env::var("BRAIDS_BENCH_SANDBOX") {
        merge(&mut text, &format!("[worker]\nsandbox = {kind:?}\n"));
    }
    merge(
        &mut text,
        &format!(
            "[worker]\nsandbox_write = [{:?}]\nsandbox_read = [{:?}{interpreter}]\n",
            notes.display().to_string(),
            notes.display().to_string()
        ),
    );
    let stamp = notes.join("stamp");
    let wrapper = b.home().join("agent-wrapper");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\ndate +%s%N >> {s}.start\n{p} \"$@\"\nrc=$?\ndate +%s%N >> {s}.end\nexit $rc\n",
            s = stamp.display(),
            p = cli.program().display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    let setup = setup.replace(
        &format!("program = {:?}", cli.program().display().to_string()),
        &format!("program = {:?}", wrapper.display().to_string()),
    );
    merge(&mut text, &setup);
    std::fs::write(&config, text).unwrap();
    b.braids(&["new", "app", "--tracker", "br"]);
    b.braids(&["iteration", "new", "app"]);
    b.braids(&["iteration", "activate", "app", "1"]);
    let root = b.home().join("Projects/app");
    let bare = b.home().join("upstream.git");
    b.run(
        "git",
        &["init", "-q", "--bare", bare.to_str().unwrap()],
        b.home(),
    );
    b.run(
        "git",
        &["remote", "add", "origin", bare.to_str().unwrap()],
        &root,
    );
    b.run("git", &["push", "-q", "-u", "origin", "HEAD"], &root);

    let (mut before, mut after) = (Vec::new(), Vec::new());
    for i in 0..RUNS {
        let out = b.run(
            br(),
            &[
                "create",
                &format!("--title=bench bead {i}"),
                "--json",
                "--actor=bench",
            ],
            &root,
        );
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        let bead = v["id"]
            .as_str()
            .or(v[0]["id"].as_str())
            .unwrap()
            .to_string();
        let message = format!(
            "Project: {}\nBead: {bead}\nIteration: 001\nChannel: #dev\n",
            root.display()
        );
        let mut worker = b.cmd(env!("CARGO_BIN_EXE_braids"), &["worker"], b.home());
        worker
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let t0 = now_ns();
        let mut child = worker.spawn().unwrap();
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(message.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        let t_exit = now_ns();
        assert!(
            out.status.success(),
            "{} worker for {bead}: {}\n{}",
            cli.preset(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        let (starts, ends) = (
            stamps(&stamp.with_extension("start")),
            stamps(&stamp.with_extension("end")),
        );
        let (s, e) = (starts[i], ends[i]);
        before.push(Duration::from_nanos((s - t0) as u64));
        after.push(Duration::from_nanos((t_exit - e) as u64));
        let pushed = b.run("git", &["log", "--format=%s", "main"], &bare);
        assert!(
            pushed.contains(&bead),
            "{bead} not on the upstream: {pushed}"
        );
    }
    let max = |v: &[Duration]| v.iter().max().copied().unwrap();
    println!(
        "{:<12} spawn → agent  p50 {:>7.1} ms  max {:>7.1} ms   agent exit → landed  p50 {:>7.1} ms  max {:>7.1} ms   ({RUNS} beads)",
        cli.preset(),
        median(before.clone()).as_secs_f64() * 1e3,
        max(&before).as_secs_f64() * 1e3,
        median(after.clone()).as_secs_f64() * 1e3,
        max(&after).as_secs_f64() * 1e3,
    );
}

/// Appends `more` to config.toml's text, its tables replacing any of the same name.
fn merge(text: &mut String, more: &str) {
    let mut doc: toml::Table = toml::from_str(text).unwrap();
    let add: toml::Table = toml::from_str(more).unwrap();
    for (k, v) in add {
        match (doc.get_mut(&k), v) {
            (Some(toml::Value::Table(t)), toml::Value::Table(n)) => t.extend(n),
            (_, v) => {
                doc.insert(k, v);
            }
        }
    }
    *text = toml::to_string(&doc).unwrap();
}

fn main() {
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "agents bench: load {}",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    let started = Instant::now();
    for cli in Cli::ALL {
        if cli.present() {
            measure(cli);
        } else {
            println!(
                "{:<12} skipped: not installed at {}",
                cli.preset(),
                cli.program().display()
            );
        }
    }
    println!("({:.0} s in all)", started.elapsed().as_secs_f64());
}
