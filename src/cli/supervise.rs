//! `braids supervise --exec <argv…>`.

use anyhow::Result;

use super::{SuperviseArgs, EXIT_FINDINGS, EXIT_OK};
use crate::app::supervise::{self, Handled, Options};
use crate::system::paths::Paths;

pub fn run(paths: &Paths, a: SuperviseArgs) -> Result<i32> {
    let sources = crate::app::event_feed::sources(paths, a.project.as_deref())?;
    let Some(_single) = supervise::single(paths)? else {
        if a.once {
            tracing::info!(
                "another braids supervise is running for this installation; it handles the events"
            );
            return Ok(EXIT_OK);
        }
        anyhow::bail!(
            "another braids supervise is running for this installation ({}); two would run each event's command twice",
            paths.braids_dir.join(".supervise.lock").display()
        );
    };
    let opts = Options {
        argv: a.exec,
        timeout: a.timeout,
        once: a.once,
    };
    let stop = super::stop_flag::stop_on_signals();
    let totals = supervise::run(&sources, &opts, stop, |h| match h {
        Handled::Acknowledged {
            event,
            stdout,
            stderr,
        } => {
            print!("{stdout}");
            eprint!("{stderr}");
            tracing::info!(
                "{}#{} {}: acknowledged",
                event.project,
                event.id,
                event.kind
            );
        }
        Handled::Failed {
            event,
            why,
            retry_in,
        } => tracing::warn!(
            "{}#{} {}: the command failed ({why}); {}",
            event.project,
            event.id,
            event.kind,
            match retry_in {
                Some(d) => format!("retrying in {}", humantime::format_duration(d)),
                None => "it and the project's later events wait for the next run".into(),
            }
        ),
    })?;
    tracing::info!(
        "supervise stopped: {} acknowledged, {} failed runs, {} waiting",
        totals.acknowledged,
        totals.failed,
        totals.waiting
    );
    Ok(if a.once && totals.waiting > 0 {
        EXIT_FINDINGS
    } else {
        EXIT_OK
    })
}
