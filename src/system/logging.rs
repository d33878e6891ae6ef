//! tracing setup: human-readable by default, JSON lines with `--log-format json`, level from
//! `BRAIDS_LOG` or `-v`. Logs go to stderr so `--json` output on stdout stays clean.

use std::sync::atomic::{AtomicBool, Ordering};

use tracing_subscriber::EnvFilter;

/// How log lines are written on stderr (`--log-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

static JSON: AtomicBool = AtomicBool::new(false);

/// Whether logs are JSON lines: events then carry their numbers as fields, where text logs
/// keep to the sentence.
pub fn is_json() -> bool {
    JSON.load(Ordering::Relaxed)
}

pub fn init(verbose: u8, format: LogFormat) {
    JSON.store(format == LogFormat::Json, Ordering::Relaxed);
    let default = match verbose {
        0 => "info",
        1 => "debug",
        _ => "trace",
    };
    let filter = EnvFilter::try_from_env("BRAIDS_LOG").unwrap_or_else(|_| EnvFilter::new(default));
    use std::io::IsTerminal;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    let _ = match format {
        LogFormat::Text => builder.with_target(false).try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
}
