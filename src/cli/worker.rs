//! `braids worker`: reads the four-line spawn message (stdin or `--message-file`) and runs the
//! bead to completion. Exit 0 when the bead was completed, 3 when the worker stopped without
//! completing it (claim refused, dependencies open, question, approval, blocked, an error after
//! the claim), 2 when the message or the project could not be used.

use std::io::Read;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, Context, Result};

use crate::config::Config;
use crate::format;
use crate::model::SpawnMessage;
use crate::system::paths::Paths;
use crate::tick::observe::tracker_kind;
use crate::tracker::{self, TrackerOptions};
use crate::worker::{self, Ending, Worker};

use super::{WorkerArgs, EXIT_OK, EXIT_STOPPED};

pub fn run(paths: &Paths, args: WorkerArgs) -> Result<i32> {
    let text = match &args.message_file {
        Some(f) => std::fs::read_to_string(f)
            .with_context(|| format!("cannot read the spawn message {}", f.display()))?,
        None => {
            let mut s = String::new();
            std::io::stdin()
                .read_to_string(&mut s)
                .context("cannot read the spawn message from stdin")?;
            s
        }
    };
    let msg = SpawnMessage::parse(&text).map_err(|e| anyhow!("{e}"))?;
    let loaded = Config::load(&paths.config())?;
    let config = loaded.config;
    let project_md = format::layout::project_file(&msg.project);
    let project = std::fs::read(&project_md)
        .map(|b| format::layout::parse_project(&format::decode(&b), &project_md).value)
        .unwrap_or_default();
    let kind = tracker_kind(&project, config.tracker.kind, &msg.project);
    let tracker: Arc<dyn tracker::Tracker> = Arc::from(
        crate::forge::tracker::open(
            kind,
            TrackerOptions {
                project: msg.project.clone(),
                timeout: Duration::from_secs(config.tracker.timeout_secs),
                program: None,
                installation: Some(paths.clone()),
            },
        )
        .map_err(|e| anyhow!("{e}"))?,
    );
    let notifier = crate::notifier::from_config(&config.notify);
    let slug = worker::slug_for(paths, &msg.project);
    let executor = worker::executor_for(&config, &project, &slug, &msg.bead);
    let w = Worker {
        paths,
        config: &config,
        tracker: tracker.as_ref(),
        notifier: &notifier,
        executor: executor.as_ref(),
    };
    if crate::claw::is_claw(&project, &msg.project) {
        return claw_turn(
            paths,
            &config,
            &project,
            tracker.as_ref(),
            executor.as_ref(),
            &msg,
            args.json,
        );
    }
    tracing::info!(bead = %msg.bead, project = %msg.project.display(), iteration = %msg.iteration, "worker starting");
    let run = w.run(&msg)?;
    let line = serde_json::to_string(&run.ending).unwrap_or_default();
    tracing::info!(bead = %msg.bead, "worker finished: {line}");
    if args.json {
        println!("{}", serde_json::to_string_pretty(&run)?);
    }
    Ok(if matches!(run.ending, Ending::Completed { .. }) {
        EXIT_OK
    } else {
        EXIT_STOPPED
    })
}

/// A claw project's worker: one turn of the loop (`worker::claw`).
fn claw_turn(
    paths: &Paths,
    config: &Config,
    project: &crate::format::project::ProjectConfig,
    tracker: &dyn tracker::Tracker,
    executor: &dyn worker::Executor,
    msg: &SpawnMessage,
    json: bool,
) -> Result<i32> {
    let slug = worker::slug_for(paths, &msg.project);
    let turn = crate::worker::claw::Turn {
        tracker,
        executor,
        actor: &config.tracker.actor,
        slug: &slug,
        worker_timeout: Duration::from_secs(project.worker_timeout),
        activity: paths.activity(&slug, &msg.bead),
    };
    tracing::info!(bead = %msg.bead, project = %msg.project.display(), "claw turn starting");
    let end = turn.run(msg)?;
    let line = serde_json::to_string(&end).unwrap_or_default();
    tracing::info!(bead = %msg.bead, "claw turn finished: {line}");
    if json {
        println!("{line}");
    }
    Ok(match end {
        crate::worker::claw::TurnEnd::Completed { .. } => EXIT_OK,
        _ => EXIT_STOPPED,
    })
}
