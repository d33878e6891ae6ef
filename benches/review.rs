//! `cargo bench --bench review`: what watching pull requests costs a tick when nothing
//! changed, the case of nearly every run: 1,000 open pull requests across 100 projects
//! (`BRAIDS_BENCH_PROJECTS`, `BRAIDS_BENCH_PRS` per project), each bead in review waiting for
//! a person's merge, on the stand-in GitHub (REST v3 over loopback HTTP, with the ETags and
//! rate-limit headers GitHub sends) backed by one real bare repository.
//!
//! The real `braids` binary runs `tick --force --json` as a child process. The first run
//! reads everything and keeps the forge's answers; then each timed run is measured for:
//! requests made, of them `304 Not Modified`, the quota they spent (GitHub counts no `304`),
//! wall time and CPU time (user + system, from wait4). Target: at most 3 requests per open
//! pull request and no quota spent when nothing changed.
//!
//! Environment: `BRAIDS_BENCH_PROJECTS` (100), `BRAIDS_BENCH_PRS` (10), `BRAIDS_BENCH_RUNS` (5),
//! `BRAIDS_BENCH_BIN` (the braids executable to measure).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[path = "../tests/integration/support/bare_git.rs"]
#[allow(dead_code)]
mod bare_git;
#[path = "../tests/integration/support/forge_github.rs"]
#[allow(dead_code)]
mod forge_github;

use forge_github::GitHub;

const TOKEN: &str = "ghp_bench";

fn env_n(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=bench",
            "-c",
            "user.email=bench@example.com",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A home with `projects` projects landing through pull requests on the stand-in, each with
/// `prs` beads in review whose requests are open.
fn build(gh: &GitHub, home: &Path, projects: usize, prs: usize) {
    let braids = home.join(".openclaw/braids");
    std::fs::create_dir_all(&braids).unwrap();
    // One bare repository behind every project's name; a branch per pull request.
    let seed = home.join("seed");
    std::fs::create_dir_all(&seed).unwrap();
    git(&seed, &["init", "-q", "-b", "main"]);
    std::fs::write(seed.join("a.txt"), "a\n").unwrap();
    git(&seed, &["add", "a.txt"]);
    git(&seed, &["commit", "-q", "-m", "start"]);
    std::fs::write(seed.join("b.txt"), "b\n").unwrap();
    git(&seed, &["checkout", "-q", "-b", "work"]);
    git(&seed, &["add", "b.txt"]);
    git(&seed, &["commit", "-q", "-m", "work"]);
    let head = git(&seed, &["rev-parse", "HEAD"]);
    let bare = home.join("up.git");
    git(
        home,
        &[
            "clone",
            "-q",
            "--bare",
            seed.to_str().unwrap(),
            bare.to_str().unwrap(),
        ],
    );
    let mut refs = String::new();
    let mut registry = String::from("| Slug | Status | Priority | Path |\n|---|---|---|---|\n");
    std::fs::write(home.join("token"), TOKEN).unwrap();
    let config = format!(
        "[forges.gh]\nkind = \"github\"\napi = \"{}\"\ntoken_file = \"{}\"\n",
        gh.api(),
        home.join("token").display()
    );
    std::fs::write(braids.join("config.toml"), config).unwrap();
    for p in 0..projects {
        let slug = format!("app{p}");
        let repo = format!("me/{slug}");
        gh.repo(&repo, &bare);
        let root = home.join("Projects").join(&slug);
        std::fs::create_dir_all(root.join(".braids")).unwrap();
        git(&root, &["init", "-q", "-b", "main"]);
        std::fs::write(
            root.join(".braids/PROJECT.md"),
            format!("# {slug}\n\n- **Status:** active\n- **Priority:** normal\n- **Landing:** pull-request\n- **Merge:** person\n- **Forge:** gh {repo}\n"),
        )
        .unwrap();
        git(&root, &["add", "-A"]);
        git(&root, &["commit", "-q", "-m", "scaffold"]);
        registry.push_str(&format!(
            "| {slug} | active | normal | {} |\n",
            root.display()
        ));
        for k in 0..prs {
            let bead = format!("{slug}-{k}");
            let branch = format!("braids/{bead}");
            refs.push_str(&format!("create refs/heads/{branch} {head}\n"));
            let record = serde_json::json!({
                "bead": bead, "forge": "gh", "repository": repo, "number": k + 1,
                "url": format!("https://github.example/{repo}/pull/{}", k + 1),
                "branch": branch, "base": "main", "head": head,
                "openedAt": "2026-11-29T00:00:00Z", "last": "opened",
            });
            let dir = braids.join("work").join(&slug).join(&bead);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("review.json"), record.to_string()).unwrap();
        }
    }
    let mut update = Command::new("git")
        .args(["update-ref", "--stdin"])
        .current_dir(&bare)
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    update
        .stdin
        .take()
        .unwrap()
        .write_all(refs.as_bytes())
        .unwrap();
    assert!(update.wait().unwrap().success());
    for p in 0..projects {
        let repo = format!("me/app{p}");
        for k in 0..prs {
            let n = gh.open(&repo, &format!("braids/app{p}-{k}"), "main", "bench");
            assert_eq!(n, k as u64 + 1);
            gh.check(&head, "ci", "completed", Some("success"), "");
        }
    }
    std::fs::write(braids.join("registry.md"), registry).unwrap();
}

struct Measured {
    wall: Duration,
    cpu: Duration,
    stdout: String,
}

/// `braids <args>` in `home`, with its wall and CPU time.
#[allow(clippy::zombie_processes)] // reaped by wait4(2) below
fn run(bin: &Path, home: &Path, args: &[&str]) -> Measured {
    let start = Instant::now();
    let child = Command::new(bin)
        .args(args)
        .env_clear()
        .env("HOME", home)
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    let mut out = String::new();
    use std::io::Read;
    child.stdout.unwrap().read_to_string(&mut out).unwrap();
    let mut status = 0;
    let mut usage: nix::libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: wait4 on our own child, writing into a zeroed rusage.
    unsafe { nix::libc::wait4(pid.as_raw(), &mut status, 0, &mut usage) };
    let wall = start.elapsed();
    let tv = |t: nix::libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    Measured {
        wall,
        cpu: tv(usage.ru_utime) + tv(usage.ru_stime),
        stdout: out,
    }
}

fn main() {
    let bin = std::env::var_os("BRAIDS_BENCH_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_braids")));
    let projects = env_n("BRAIDS_BENCH_PROJECTS", 100);
    let prs = env_n("BRAIDS_BENCH_PRS", 10);
    let runs = env_n("BRAIDS_BENCH_RUNS", 5);
    let open = projects * prs;
    let gh = GitHub::start(TOKEN, "braids-bot");
    gh.set_limit(1_000_000);
    let home = tempfile::tempdir().unwrap();
    eprint!("building {projects} projects with {prs} open pull requests each… ");
    let t = Instant::now();
    build(&gh, home.path(), projects, prs);
    eprintln!("{:.1}s", t.elapsed().as_secs_f64());
    let tick = ["tick", "--force", "--json"];
    // The first run reads everything and keeps the answers.
    let first_before = gh.requests().len();
    let first = run(&bin, home.path(), &tick);
    let report: serde_json::Value = serde_json::from_str(&first.stdout).unwrap();
    assert_eq!(
        report["spawns"].as_array().map_or(0, Vec::len),
        0,
        "{report:#}"
    );
    let first_requests = gh.requests().len() - first_before;
    println!(
        "first look at {open} pull requests: {first_requests} requests, {:.0} ms wall, {:.0} ms CPU",
        first.wall.as_secs_f64() * 1e3,
        first.cpu.as_secs_f64() * 1e3
    );
    println!("| run | requests | per PR | 304 | quota spent | wall ms | CPU ms |");
    println!("|---|---|---|---|---|---|---|");
    let mut walls = Vec::new();
    for r in 1..=runs {
        let before = gh.requests().len();
        let quota = gh.remaining();
        let m = run(&bin, home.path(), &tick);
        let seen = &gh.requests()[before..];
        let not_modified = seen.iter().filter(|q| q.status == 304).count();
        let spent = quota - gh.remaining();
        println!(
            "| {r} | {} | {:.2} | {not_modified} | {spent} | {:.0} | {:.0} |",
            seen.len(),
            seen.len() as f64 / open as f64,
            m.wall.as_secs_f64() * 1e3,
            m.cpu.as_secs_f64() * 1e3
        );
        assert!(
            seen.len() <= 3 * open,
            "more than 3 requests per open pull request"
        );
        assert_eq!(spent, 0, "a quiet run spent quota");
        walls.push(m.wall);
    }
    walls.sort();
    println!(
        "median wall of a quiet run over {open} open pull requests: {:.0} ms",
        walls[walls.len() / 2].as_secs_f64() * 1e3
    );
}
