//! `cargo bench --bench issues`: what a forge's issues as the tracker cost a tick, over 100
//! projects (`BRAIDS_BENCH_PROJECTS`) whose repositories hold 10,000 issues each
//! (`BRAIDS_BENCH_ISSUES`), 1,000 of them labelled for braids (`BRAIDS_BENCH_LABELLED`), on
//! the stand-in GitHub (REST v3 over loopback HTTP, with the ETags and rate-limit headers
//! GitHub sends). The labelled issues are assigned to a person, so nothing is ready and no
//! worker starts: what is measured is the reading.
//!
//! The real `braids` binary runs `tick --force --json` as a child process:
//! - **cold**: the first run, with nothing kept: each project lists its labelled issues whole;
//! - **first after**: the run after it asks for the changes since shortly before the cold
//!   listing, a new request (no ETag yet) per project that finds none;
//! - **quiet**: each later run, nothing changed on the forge: one conditional listing of what
//!   changed per project, a `304`, which GitHub does not count against the rate limit.
//!
//! Each is measured for requests made, of them `304`, quota spent, wall time and CPU time
//! (user + system, from wait4). Target for a quiet run: one request per project and no quota.
//! The home is under /dev/shm when there is one (this machine's disk varies tenfold).
//!
//! Environment: `BRAIDS_BENCH_PROJECTS` (100), `BRAIDS_BENCH_ISSUES` (10000),
//! `BRAIDS_BENCH_LABELLED` (1000), `BRAIDS_BENCH_RUNS` (5), `BRAIDS_BENCH_BIN`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[path = "../tests/integration/support/bare_git.rs"]
#[allow(dead_code)]
mod bare_git;
#[path = "../tests/integration/support/forge_github.rs"]
#[allow(dead_code)]
mod forge_github;

#[path = "forge/measured.rs"]
mod measured;

use forge_github::GitHub;
use measured::run;

const TOKEN: &str = "ghp_bench";

fn env_n(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn git(dir: &Path, args: &[&str]) {
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
}

/// A home with `projects` projects whose tracker is the stand-in's issues of `me/app<p>`.
fn build(gh: &GitHub, home: &Path, projects: u64, issues: u64, labelled: u64) {
    let braids = home.join(".openclaw/braids");
    std::fs::create_dir_all(&braids).unwrap();
    std::fs::write(home.join("token"), TOKEN).unwrap();
    std::fs::write(
        braids.join("config.toml"),
        format!(
            "[worker]\nexecutor = [\"/bin/true\"]\n\n[forges.gh]\nkind = \"github\"\napi = \"{}\"\ntoken_file = \"{}\"\n",
            gh.api(),
            home.join("token").display()
        ),
    )
    .unwrap();
    let bare = home.join("up.git");
    git(
        home,
        &["init", "-q", "--bare", "-b", "main", bare.to_str().unwrap()],
    );
    let mut registry = String::from("| Slug | Status | Priority | Path |\n|---|---|---|---|\n");
    let mut names = Vec::new();
    for p in 0..projects {
        let slug = format!("app{p}");
        let repo = format!("me/{slug}");
        gh.repo(&repo, &bare);
        names.push(repo.clone());
        let root = home.join("Projects").join(&slug);
        let it = root.join(".braids/iterations/001");
        std::fs::create_dir_all(&it).unwrap();
        git(&root, &["init", "-q", "-b", "main"]);
        std::fs::write(
            root.join(".braids/PROJECT.md"),
            format!("# {slug}\n\n- **Status:** active\n- **Priority:** normal\n- **Autonomy:** full\n- **Tracker:** github\n- **Forge:** gh {repo}\n"),
        )
        .unwrap();
        std::fs::write(
            it.join("ITERATION.md"),
            "# Iteration 1\n\n- **Status:** active\n\n## Stories\n\n- #1: One\n- #2: Two\n- #3: Three\n",
        )
        .unwrap();
        git(&root, &["add", "-A"]);
        git(&root, &["commit", "-q", "-m", "scaffold"]);
        registry.push_str(&format!(
            "| {slug} | active | normal | {} |\n",
            root.display()
        ));
    }
    std::fs::write(braids.join("registry.md"), registry).unwrap();
    // Every project's repository shows the same 10,000 issues, last changed long ago.
    gh.many_issues(
        "me/app0",
        &names[1..],
        issues,
        labelled,
        "braids",
        "someone",
        "2026-01-01T00:00:00Z",
    );
}

fn main() {
    let bin = std::env::var_os("BRAIDS_BENCH_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_braids")));
    let projects = env_n("BRAIDS_BENCH_PROJECTS", 100);
    let issues = env_n("BRAIDS_BENCH_ISSUES", 10_000);
    let labelled = env_n("BRAIDS_BENCH_LABELLED", 1_000).min(issues);
    let runs = env_n("BRAIDS_BENCH_RUNS", 5);
    let gh = GitHub::start(TOKEN, "braids-bot");
    gh.set_limit(100_000_000);
    let shm = Path::new("/dev/shm");
    let home = match shm.is_dir() {
        true => tempfile::tempdir_in(shm).unwrap(),
        false => tempfile::tempdir().unwrap(),
    };
    eprint!("building {projects} projects over {issues} issues each ({labelled} labelled)… ");
    let t = Instant::now();
    build(&gh, home.path(), projects, issues, labelled);
    eprintln!("{:.1}s", t.elapsed().as_secs_f64());
    let tick = ["tick", "--force", "--json"];
    println!("| run | requests | per project | 304 | quota spent | wall ms | CPU ms |");
    println!("|---|---|---|---|---|---|---|");
    let mut walls = Vec::new();
    for r in 0..=runs + 1 {
        let before = gh.requests().len();
        let quota = gh.remaining();
        let m = run(&bin, home.path(), &tick);
        let report: serde_json::Value =
            serde_json::from_str(&m.stdout).unwrap_or_else(|e| panic!("{e}: {}", m.stdout));
        assert_eq!(
            report["spawns"].as_array().map_or(0, Vec::len),
            0,
            "{report:#}"
        );
        assert!(
            report["errors"].as_array().is_none_or(Vec::is_empty),
            "{report:#}"
        );
        let seen = &gh.requests()[before..];
        let not_modified = seen.iter().filter(|q| q.status == 304).count();
        let spent = quota - gh.remaining();
        let name = match r {
            0 => "cold".to_string(),
            1 => "first after".to_string(),
            r => (r - 1).to_string(),
        };
        println!(
            "| {name} | {} | {:.2} | {not_modified} | {spent} | {:.0} | {:.0} |",
            seen.len(),
            seen.len() as f64 / projects as f64,
            m.wall.as_secs_f64() * 1e3,
            m.cpu.as_secs_f64() * 1e3
        );
        if r > 1 {
            assert!(
                seen.len() as u64 <= projects,
                "more than one request per project when nothing changed"
            );
            assert_eq!(spent, 0, "a quiet run spent quota");
            walls.push(m.wall);
        }
    }
    walls.sort();
    println!(
        "median wall of a quiet run over {projects} projects of {issues} issues: {:.0} ms",
        walls[walls.len() / 2].as_secs_f64() * 1e3
    );
}
