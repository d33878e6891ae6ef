//! `braids demo`: the main job on an embedded default. It builds a sample installation (two
//! projects on the native WORKPLAN.md tracker, a scripted stand-in agent), then runs real ticks
//! until the work is done and braids backs off — workers spawned up to capacity, a hung worker
//! killed as a zombie once a person closes its bead, deliverables and commits, the iteration
//! completed, idle backoff, and STATUS.md.
//!
//! `braids stand-in-agent` is the scripted agent: it writes a deliverable and a status report
//! after a short pause, or hangs once when its bead's title says `[hangs]`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use chrono::Utc;

use crate::config::installation;
use crate::system::atomic;
use crate::system::paths::Paths;
use crate::tick::{self, RunType, TickOptions};
use crate::tracker::{native::Workplan, Tracker};

use super::{DemoArgs, NewArgs, Output, StandInArgs, EXIT_OK};

fn say(s: &str) {
    println!("\n== {s}");
}

fn project(paths: &Paths, slug: &str, max: u32, timeout: u64, beads: &[&str]) -> Result<()> {
    super::new::run(
        paths,
        NewArgs {
            slug: slug.into(),
            path: None,
            priority: "normal".into(),
            max_workers: max,
            channel: None,
            tracker: Some("workplan".into()),
            json: false,
        },
    )?;
    let root = paths.braids_home.join(slug);
    let md = root.join(".braids/PROJECT.md");
    let text = std::fs::read_to_string(&md)?.replace(
        "**WorkerTimeout:** 3600",
        &format!("**WorkerTimeout:** {timeout}"),
    );
    atomic::write(&md, text.as_bytes())?;
    let wp = Workplan::new(&root);
    let mut ids = Vec::new();
    for b in beads {
        ids.push(wp.create(b, "", 2).map_err(|e| anyhow::anyhow!("{e}"))?);
    }
    let dir = root.join(".braids/iterations/001");
    let stories: String = ids
        .iter()
        .zip(beads)
        .map(|(id, t)| format!("- {id}: {t}\n"))
        .collect();
    let text =
        crate::system::templates::render(crate::system::templates::ITERATION, &[("number", "001")])
            .replace("**Status:** planning", "**Status:** active");
    let text = text.replace("## Stories\n", &format!("## Stories\n\n{stories}"));
    atomic::write(&dir.join("ITERATION.md"), text.as_bytes())?;
    crate::git::commit_all(&root, "Plan iteration 1")?;
    Ok(())
}

pub fn run(args: DemoArgs) -> Result<i32> {
    let dir = match args.dir {
        Some(d) => d,
        None => tempfile::Builder::new()
            .prefix("braids-demo-")
            .tempdir()?
            .keep(),
    };
    std::fs::create_dir_all(&dir)?;
    let dir = dir.canonicalize()?;
    // The sample's home has no ~/.gitconfig: commits (the agents' work kept on a branch, for
    // one) take the person's identity from here, or the demo's own.
    let identity = [
        ("GIT_AUTHOR_NAME", "user.name", "braids demo"),
        ("GIT_AUTHOR_EMAIL", "user.email", "demo@braids.invalid"),
        ("GIT_COMMITTER_NAME", "user.name", "braids demo"),
        ("GIT_COMMITTER_EMAIL", "user.email", "demo@braids.invalid"),
    ]
    .map(|(var, key, fallback)| {
        let value = std::env::var(var)
            .ok()
            .or_else(|| git_config(key))
            .unwrap_or_else(|| fallback.into());
        (var, value)
    });
    // Everything below — and every worker the ticks start — sees the sample as its home.
    // SAFETY: single-threaded at this point; nothing else reads the environment concurrently.
    unsafe {
        for (var, value) in &identity {
            std::env::set_var(var, value);
        }
        std::env::set_var("HOME", &dir);
        std::env::remove_var("BRAIDS_HOME");
    }
    let paths = Paths::from_env()?;
    say(&format!("a sample installation in {}", dir.display()));
    crate::app::init::ensure(&paths)?.print(false);
    let exe = std::env::current_exe()?.to_string_lossy().into_owned();
    let config = format!(
        "[tracker]\nkind = \"workplan\"\n[sessions]\nkill_grace_secs = 5\nclaim_grace_secs = 5\n[worker]\nexecutor = [{exe:?}, \"stand-in-agent\", \"--deliverable\", \"{{deliverable}}\", \"--seconds\", \"{}\"]\nretries = 0\n",
        args.agent_seconds
    );
    atomic::write(&paths.config(), config.as_bytes())?;
    project(
        &paths,
        "alpha",
        2,
        3600,
        &[
            "Write the README",
            "Add a CLI flag",
            "Fix the parser",
            "Document the API",
        ],
    )?;
    project(
        &paths,
        "beta",
        1,
        3600,
        &["Sketch the design [hangs]", "Write the tests"],
    )?;

    let inst = installation::open(&paths)?;
    let start = Instant::now();
    let mut round = 0;
    loop {
        round += 1;
        let report = tick::run(&inst, TickOptions::default(), Utc::now())?;
        say(&format!("tick {round} at +{}s", start.elapsed().as_secs()));
        report.print(false);
        if report.run == RunType::Skipped {
            break;
        }
        if round == 1 {
            // A person decides beta's hung bead is not needed and closes it by hand: its worker
            // is now a zombie (2.6: bead closed), which the next tick kills.
            let beta = Workplan::new(&paths.braids_home.join("beta"));
            if let Some(b) = beta
                .list()
                .map_err(|e| anyhow::anyhow!("{e}"))?
                .into_iter()
                .find(|b| b.title.contains("[hangs]"))
            {
                say(&format!(
                    "a person closes {} by hand while its worker still runs",
                    b.id
                ));
                beta.close(&b.id, "not needed after all")
                    .map_err(|e| anyhow::anyhow!("{e}"))?;
            }
        }
        if start.elapsed() > Duration::from_secs(args.max_seconds) {
            println!("(stopping after {}s)", args.max_seconds);
            break;
        }
        std::thread::sleep(Duration::from_secs(args.interval));
    }
    say("STATUS.md");
    print!("{}", std::fs::read_to_string(paths.status())?);
    say("what happened in git");
    for slug in ["alpha", "beta"] {
        let out = crate::system::proc::Invocation::new(["git", "log", "--oneline", "--reverse"])
            .cwd(paths.braids_home.join(slug))
            .run();
        if let Ok(o) = out {
            println!("{slug}:\n{}", o.stdout.trim_end());
        }
    }
    println!(
        "\nThe sample stays in {} (HOME={0} braids status, HOME={0} braids events). Delete it when done.",
        dir.display()
    );
    Ok(EXIT_OK)
}

/// The scripted agent.
pub fn stand_in(args: StandInArgs) -> Result<i32> {
    let project = std::env::current_dir()?;
    let prompt_file = std::env::var_os("BRAIDS_PROMPT_FILE").map(PathBuf::from);
    let prompt = prompt_file
        .as_deref()
        .and_then(|p| std::fs::read_to_string(p).ok())
        .unwrap_or_default();
    let title = prompt
        .lines()
        .skip_while(|l| l.trim() != "# The bead")
        .nth(2)
        .unwrap_or("the bead")
        .trim()
        .to_string();
    println!(
        "stand-in agent: working on \"{title}\" in {}",
        project.display()
    );
    if title.contains("[hangs]") {
        let marker = prompt_file
            .as_deref()
            .and_then(Path::parent)
            .map(|d| d.join("hung-once"));
        if let Some(m) = marker.filter(|m| !m.exists()) {
            std::fs::write(&m, b"")?;
            println!("stand-in agent: hanging (the tick will kill me after WorkerTimeout)");
            std::thread::sleep(Duration::from_secs(3600));
        }
    }
    std::thread::sleep(Duration::from_secs(args.seconds));
    let text = format!("# {title}\n\n## Summary\n\n{title}: done by the stand-in agent.\n\n## Details\n\nNothing real was changed; this is a demo.\n");
    atomic::write(&args.deliverable, text.as_bytes()).context("cannot write the deliverable")?;
    let report = std::env::var_os("BRAIDS_RESULT_FILE")
        .map(PathBuf::from)
        .unwrap_or_else(|| project.join(".ai/executor-result"));
    atomic::write(
        &report,
        format!("status: pass\nreason: null\nsummary: {title}\n").as_bytes(),
    )?;
    println!("stand-in agent: wrote {}", args.deliverable.display());
    Ok(EXIT_OK)
}

/// `git config <key>` as the person has it, if set.
fn git_config(key: &str) -> Option<String> {
    let out = std::process::Command::new("git")
        .args(["config", key])
        .output()
        .ok()?;
    let v = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !v.is_empty()).then_some(v)
}
