//! The command line: raw arguments (clap derive) in, exit code out.
//!
//! `main.rs` calls [`run`] and nothing else. Each subcommand lives in its own file and receives
//! resolved inputs (a [`Paths`] read once from the environment), never raw environment lookups.
//!
//! Exit codes are documented once, in [`crate::system::exit`].

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

pub use crate::system::logging::LogFormat;
use crate::system::paths::Paths;
pub use schedule_args::{
    DaemonArgs, ScheduleCommand, ScheduleInstallArgs, ScheduleRemoveArgs, ScheduleShowArgs,
};

mod beads;
mod check;
mod cost;
mod daemon;
mod demo;
mod event_feed;
mod executors;
mod held;
mod init;
mod iteration;
mod migrate;
mod new;
mod output;
mod pause;
mod sandbox_exec;
mod schedule;
mod serve;
mod sessions;
mod stop_flag;
mod story;
pub use story::{
    ReportErrorArgs, ReviewArgs, ReviewCommand, StoryCommand, StoryNoteArgs, StoryResetArgs,
    StoryStartArgs, StoryTarget,
};
mod reference;
mod schedule_args;
mod supervise;
mod tick;
mod tools;
mod worker;

pub use output::Output;

pub use crate::system::exit::{EXIT_FINDINGS, EXIT_OK, EXIT_STOPPED, EXIT_USAGE};

/// The version with the commit it was built from (`0.1.0 (3f2a9c1)`).
pub const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (", env!("BRAIDS_COMMIT"), ")");

#[derive(Debug, Parser)]
#[command(name = "braids", version = VERSION, about = "A deterministic scheduler that keeps AI coding agents working on many projects at once", long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// More log output (repeat for more); BRAIDS_LOG=debug also works.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Log format on stderr.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create ~/.openclaw/braids/ (registry, config) and BRAIDS_HOME; never overwrites.
    Init(JsonFlag),
    /// Scaffold a project and register it.
    New(NewArgs),
    /// Plan, activate or complete an iteration.
    #[command(subcommand)]
    Iteration(IterationCommand),
    /// Validate the installation against every contract that can be checked statically.
    Check(CheckArgs),
    /// One orchestrator run: observe, kill zombies, claim and spawn, back off, write STATUS.md.
    Tick(TickArgs),
    /// Show what STATUS.md would say, without changing anything.
    Status(JsonFlag),
    /// List live worker sessions: elapsed time, bead title, step, last output.
    Sessions(JsonFlag),
    /// Stop a bead's worker (by bead id or session label), then requeue the bead (default) or
    /// block it with a reason.
    Kill(KillArgs),
    /// A project's beads: status, iteration scope, attempts, what each waits for, its worker.
    Beads(BeadsArgs),
    /// Answer the question a bead asked (or approve its plan): recorded for its next prompt,
    /// and the bead is open again.
    Answer(AnswerArgs),
    /// Make a failed or blocked bead eligible now: its failure count and backoff forgotten.
    Retry(BeadArgs),
    /// Approve a plan waiting for review (ask-first), with an optional note for the agent; or
    /// a bead's work held for you (`braids diff` shows it): it lands, closed and pushed.
    Approve(ApproveArgs),
    /// Reject a plan waiting for review, or a bead's held work (its branch deleted): the bead
    /// stays blocked with the reason.
    Reject(RejectArgs),
    /// What a bead's work held for you would change (its `braids/kept/…` branch against the
    /// project's branch): the files, braids' control files among them, and the patch.
    Diff(BeadArgs),
    /// The output of a bead's worker and agent; `-f` follows it live.
    Logs(LogsArgs),
    /// What happened, newest first: spawned, completed, blocked, killed, answered.
    History(HistoryArgs),
    /// What the agents cost (tokens and dollars their reports gave), by project, bead or day.
    Cost(CostArgs),
    /// The agent CLI presets (claude-code, codex, opencode, aider, openclaw): the settings each
    /// reads and the command it runs, as this installation would run it.
    Executors(ExecutorsArgs),
    /// A local web server: a live dashboard, a JSON API, server-sent events and the actions
    /// (answer, retry, kill, approve, reject, pause, resume), each needing the server's token.
    Serve(ServeArgs),
    /// A protocol story (`Pipeline: protocol`): start, show, dispatch one step now (Level 1),
    /// reset, or leave a note for its next prompt.
    #[command(subcommand)]
    Story(StoryCommand),
    /// Approve or reject a protocol story waiting for a person (a review or a question).
    #[command(subcommand)]
    Review(ReviewCommand),
    /// Record an error on a protocol story (its `last_error`), e.g. an executor crash seen
    /// outside braids.
    ReportError(ReportErrorArgs),
    /// Run one bead to completion (started by the tick with the four-line spawn message on stdin).
    Worker(WorkerArgs),
    /// Install, show or remove the schedule that runs `braids tick` (crontab line or systemd
    /// user timer).
    #[command(subcommand)]
    Schedule(ScheduleCommand),
    /// Run the tick on an internal schedule until SIGTERM or SIGINT, for machines with neither
    /// cron nor systemd (containers); a run in progress always finishes.
    Daemon(DaemonArgs),
    /// Every project's events (`.claw/events/`), earliest first; `--follow` waits for more.
    Events(EventsArgs),
    /// Run a command once per new event and mark it processed when the command succeeds.
    Supervise(SuperviseArgs),
    /// Exploration tools for agents (claw-builder): slices, contracts, dependencies, symbols.
    Tools(ToolsArgs),
    /// Stop scheduling a project: its registry row becomes `paused` (nothing else in the file
    /// changes); running workers finish.
    Pause(PauseArgs),
    /// Let a project go on: its registry row `active` again and, for a claw project, its loop
    /// resumed (optionally with a note for the next task's coder).
    Resume(ResumeArgs),
    /// Convert the whole installation (registry, projects' settings, iterations) to markdown
    /// or to the EDN layout of today's braids, losing nothing, or change nothing and say why.
    Migrate(MigrateArgs),
    /// Build a sample installation and run real ticks on it, with a scripted stand-in agent.
    Demo(DemoArgs),
    /// Print a shell completion script: `braids completions bash > ~/.local/share/bash-completion/completions/braids`.
    Completions(CompletionsArgs),
    /// Print the man page (roff), or write every page, one per command, into a folder:
    /// `braids man --dir ~/.local/share/man/man1`.
    Man(ManArgs),
    /// The scripted agent the demo and the tests use in place of an LLM.
    #[command(hide = true)]
    StandInAgent(StandInArgs),
    /// Runs a program limited by Landlock to writing beneath the `--write` paths (the worker
    /// wraps a sandboxed agent in it).
    #[command(hide = true)]
    SandboxExec(sandbox_exec::SandboxExecArgs),
}

#[derive(Debug, Args)]
pub struct EventsArgs {
    /// Keep going: print each new event as it is written, until interrupted.
    #[arg(short, long)]
    pub follow: bool,
    /// Only this project's events.
    #[arg(long, value_name = "SLUG")]
    pub project: Option<String>,
    /// Only events after this id (ids are per project: with several projects, after this id in
    /// each).
    #[arg(long, value_name = "ID")]
    pub since: Option<u64>,
    /// One JSON object per line instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct SuperviseArgs {
    /// Only this project's events.
    #[arg(long, value_name = "SLUG")]
    pub project: Option<String>,
    /// A command still running after this long is killed and counts as failed.
    #[arg(long, default_value = "10m", value_parser = humantime::parse_duration)]
    pub timeout: std::time::Duration,
    /// Handle the events waiting now, then exit (1 when a command failed), instead of
    /// following.
    #[arg(long)]
    pub once: bool,
    /// The command and its arguments (no shell): the event's JSON on stdin, its fields in
    /// BRAIDS_EVENT_ID, _TYPE, _PROJECT, _BEAD, _TIMESTAMP and _FILE, and in the arguments'
    /// {id} {type} {project} {bead} {timestamp} {file} {message} {json}.
    #[arg(long, required = true, num_args = 1.., allow_hyphen_values = true, value_name = "ARGV")]
    pub exec: Vec<String>,
}

#[derive(Debug, Args)]
pub struct PauseArgs {
    /// The project's slug.
    pub project: String,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct MigrateArgs {
    /// The form to convert to: `md` (registry.md, PROJECT.md, ITERATION.md) or `edn`
    /// (registry.edn, .braids/config.edn, iteration.edn).
    #[arg(long, value_enum)]
    pub to: FormArg,
    /// Print what would be written, and write nothing.
    #[arg(long)]
    pub dry_run: bool,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum FormArg {
    Md,
    Edn,
}

#[derive(Debug, Args)]
pub struct ResumeArgs {
    /// The project's slug.
    pub project: String,
    /// Shown to the coder in the next task's context packet, once.
    #[arg(long)]
    pub note: Option<String>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ToolsArgs {
    #[command(subcommand)]
    pub tool: ToolsCommand,
    /// The source tree to look in (default: the current directory).
    #[arg(long, global = true, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Print JSON instead of text.
    #[arg(long, global = true)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum ToolsCommand {
    /// Every slice: a directory holding a slice.md.
    ListSlices,
    /// A file's header docblock: the contract its author wrote for readers.
    ShowContract { file: PathBuf },
    /// What a slice imports, and who imports it.
    SliceDeps { slice: String },
    /// Every line naming a symbol as a whole word (`file:line`).
    FindSymbol { name: String },
    /// Ask the cheap agent of config.toml's `[ask]` a question over a few files; it prints a
    /// short answer (off until `[ask] executor` names a preset).
    Ask {
        question: String,
        /// The files it may read, relative to --dir (cut to `[ask] max_bytes` together).
        #[arg(long, num_args = 1.., value_name = "FILE")]
        files: Vec<PathBuf>,
    },
}

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Where to build the sample (default: a new temporary directory, kept afterwards).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Seconds between ticks.
    #[arg(long, default_value_t = 4)]
    pub interval: u64,
    /// Seconds the stand-in agent works on each bead.
    #[arg(long, default_value_t = 3)]
    pub agent_seconds: u64,
    /// Stop after this many seconds even if work remains.
    #[arg(long, default_value_t = 120)]
    pub max_seconds: u64,
}

#[derive(Debug, Args)]
pub struct StandInArgs {
    #[arg(long)]
    pub deliverable: PathBuf,
    #[arg(long, default_value_t = 1)]
    pub seconds: u64,
}

#[derive(Debug, Args)]
pub struct WorkerArgs {
    /// Read the spawn message from this file instead of stdin.
    #[arg(long)]
    pub message_file: Option<PathBuf>,
    /// Print the run (steps and ending) as JSON when done.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct JsonFlag {
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct NewArgs {
    /// The project slug: lowercase letters, digits and `-`, starting with a letter or digit.
    pub slug: String,
    /// Where the project lives (default: $BRAIDS_HOME/<slug>).
    #[arg(long)]
    pub path: Option<PathBuf>,
    #[arg(long, default_value = "normal")]
    pub priority: String,
    #[arg(long, default_value_t = 1)]
    pub max_workers: u32,
    /// Where notifications go (default: none).
    #[arg(long)]
    pub channel: Option<String>,
    /// Tracker to set up: br, workplan, or auto (br when installed, else workplan).
    #[arg(long)]
    pub tracker: Option<String>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum IterationCommand {
    /// Create the next iteration directory with ITERATION.md in `planning`.
    New(IterationArgs),
    /// Set an iteration active; refuses while another is active (1.3).
    Activate(IterationArgs),
    /// Set an iteration complete; it is immutable afterwards (4.5).
    Complete(IterationArgs),
}

#[derive(Debug, Args)]
pub struct IterationArgs {
    pub slug: String,
    /// The iteration, `8` or `008` (default: the next for `new`, the first in planning for
    /// `activate`, the active one for `complete`).
    pub number: Option<crate::model::IterationName>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    #[arg(long)]
    pub json: bool,
    /// Exit 1 on warnings too, not only on errors.
    #[arg(long)]
    pub strict: bool,
}

#[derive(Debug, Args)]
pub struct TickArgs {
    /// Observe and decide, but kill, claim, spawn and write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Print the run as one JSON object.
    #[arg(long)]
    pub json: bool,
    /// Run fully even if idle backoff says to skip.
    #[arg(long)]
    pub force: bool,
    /// Kill the zombies even when they are more than half of the running sessions (the
    /// kill-storm guard otherwise holds such a run's kills), this run only.
    #[arg(long)]
    pub allow_mass_kill: bool,
}

#[derive(Debug, Args)]
pub struct KillArgs {
    /// A bead id (`app-a1b`, `a1b`, `app:a1b`) or a session label (`project:app:app-a1b`).
    pub target: String,
    /// Open the bead again afterwards, eligible at once (the default).
    #[arg(long, conflicts_with = "block")]
    pub requeue: bool,
    /// Block the bead afterwards, with this reason, for a person.
    #[arg(long, value_name = "REASON")]
    pub block: Option<String>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct BeadsArgs {
    /// The project's slug.
    pub project: String,
    /// Only beads with this status (repeat or comma-separate: open, in_progress, blocked,
    /// deferred, closed).
    #[arg(long, value_delimiter = ',')]
    pub status: Vec<String>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct AnswerArgs {
    /// The bead that asked (`app-a1b`, `a1b`, `app:a1b`).
    pub bead: String,
    /// The answer, in quotes; the bead's next prompt carries it.
    pub text: String,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct BeadArgs {
    /// A bead id (`app-a1b`, `a1b`, `app:a1b`).
    pub bead: String,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ApproveArgs {
    /// The bead whose plan or held work waits (`app-a1b`, `a1b`, `app:a1b`).
    pub bead: String,
    /// A note the agent reads in its next prompt.
    #[arg(long)]
    pub note: Option<String>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct RejectArgs {
    /// The bead whose plan or held work waits (`app-a1b`, `a1b`, `app:a1b`).
    pub bead: String,
    /// Why, for the person who reworks the bead.
    #[arg(long)]
    pub reason: String,
}

#[derive(Debug, Args)]
pub struct LogsArgs {
    /// A bead id (`app-a1b`, `a1b`, `app:a1b`).
    pub bead: String,
    /// Keep printing what the worker writes until its session ends.
    #[arg(short, long)]
    pub follow: bool,
    /// The log as written: an agent CLI's JSON events as it printed them, not one readable
    /// line each; byte for byte to a file or pipe. To a terminal, escape sequences and
    /// control characters are still removed (the agent wrote them).
    #[arg(long)]
    pub raw: bool,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Where to listen (port 0: any free port, printed at start). An address other machines
    /// can reach needs --token-file.
    #[arg(long, default_value = "127.0.0.1:7878")]
    pub listen: std::net::SocketAddr,
    /// The token actions must carry; by default serve.token in braids' directory, made (mode
    /// 0600) on first start.
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<std::path::PathBuf>,
    /// Print a fresh one-time login link for the browser (from the server running at
    /// --listen) and exit; each link works once, for five minutes.
    #[arg(long)]
    pub login: bool,
}

#[derive(Debug, Args)]
pub struct ExecutorsArgs {
    /// Every preset at its default settings, ignoring config.toml.
    #[arg(long)]
    pub defaults: bool,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct CostArgs {
    /// How to group the sums.
    #[arg(long, value_enum, default_value = "project")]
    pub by: crate::cost::By,
    /// How far back: 7d, 24h, 30d.
    #[arg(long, default_value = "7d", value_parser = humantime::parse_duration)]
    pub since: std::time::Duration,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write `braids.1` and a page per command (`braids-tick.1`, …) into this folder.
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Args)]
pub struct HistoryArgs {
    /// Only this project.
    pub project: Option<String>,
    /// How far back: 7d, 12h, 30m.
    #[arg(long, default_value = "7d", value_parser = humantime::parse_duration)]
    pub since: std::time::Duration,
    /// At most this many events.
    #[arg(long, default_value_t = 200)]
    pub limit: usize,
    #[arg(long)]
    pub json: bool,
}

/// [`crate::config::installation::open_to_read`], its warning (a config.toml that does not load) on
/// stderr.
fn open_to_read(paths: &Paths) -> crate::config::installation::Installation {
    let (inst, warning) = crate::config::installation::open_to_read(paths);
    if let Some(w) = warning {
        eprintln!("braids: warning: {w}");
    }
    inst
}

/// Parses the process arguments, runs the command, returns the exit code.
pub fn run() -> std::process::ExitCode {
    let cli = Cli::parse();
    match &cli.command {
        Command::Completions(a) => return reference::completions(a.shell),
        Command::Man(a) => return reference::man(a.dir.as_deref()),
        _ => {}
    }
    crate::system::logging::init(cli.verbose, cli.log_format);
    let paths = match Paths::from_env() {
        Ok(p) => p,
        Err(e) => {
            return crate::system::exit::from_result(Err(e));
        }
    };
    let result = match cli.command {
        Command::Init(a) => init::run(&paths, a.json),
        Command::New(a) => new::run(&paths, a),
        Command::Iteration(c) => iteration::run(&paths, c),
        Command::Check(a) => check::run(&paths, a),
        Command::Tick(a) => tick::run(&paths, a),
        Command::Status(a) => tick::status(&paths, a.json),
        Command::Sessions(a) => sessions::list(&paths, a.json),
        Command::Kill(a) => sessions::kill(&paths, a),
        Command::Beads(a) => beads::list(&paths, a),
        Command::Answer(a) => beads::answer(&paths, a),
        Command::Retry(a) => beads::retry(&paths, a),
        Command::Approve(a) => beads::approve(&paths, a),
        Command::Reject(a) => beads::reject(&paths, a),
        Command::Diff(a) => held::diff(&paths, a),
        Command::Logs(a) => beads::logs(&paths, a),
        Command::History(a) => beads::history(&paths, a),
        Command::Cost(a) => cost::run(&paths, a),
        Command::Executors(a) => executors::run(&paths, a),
        Command::Serve(a) => serve::run(&paths, a),
        Command::Story(c) => story::run(&paths, c),
        Command::Review(c) => story::review(&paths, c),
        Command::ReportError(a) => story::report_error(&paths, a),
        Command::Worker(a) => worker::run(&paths, a),
        Command::Schedule(c) => schedule::run(&paths, c, cli.log_format),
        Command::Daemon(a) => daemon::run(&paths, a),
        Command::Events(a) => event_feed::run(&paths, a),
        Command::Supervise(a) => supervise::run(&paths, a),
        Command::Tools(a) => tools::run(&paths, a),
        Command::Pause(a) => pause::pause(&paths, a),
        Command::Resume(a) => pause::resume(&paths, a),
        Command::Migrate(a) => migrate::run(&paths, a),
        Command::Demo(a) => demo::run(a),
        Command::StandInAgent(a) => demo::stand_in(a),
        Command::SandboxExec(a) => sandbox_exec::run(a),
        Command::Completions(_) | Command::Man(_) => unreachable!("answered before the paths"),
    };
    crate::system::exit::from_result(result)
}
