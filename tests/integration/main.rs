//! The integration tests: one binary (one link on a small machine), a module per suite, and
//! one support module ([`support`]) every suite builds its installations with.
//!
//! Tests checking a contract are named after its section (contracts/CONTRACTS.md names them by
//! their function name; `scripts/contracts` matches the tail of the test path).
//!
//! - `check`, `checkin`, `cli`, `logging`, `push_retry`, `read_only`, `tick_notices`: commands
//!   as a person runs them.
//! - `tick_e2e`, `contracts`, `worker_e2e`: the tick and the worker end to end, with a real `br`,
//!   real git and real processes.
//! - `faults`, `hostile`, `corpus`: faults, hostile input and fuzzing, the real-world corpus.
//! - `sessions`, `trackers`, `formats`: the session backends, tracker adapters and file formats
//!   against real processes and files.
//! - `schedule`, `daemon`, `schedule_cron`: scheduling; `schedule_cron` drives the real cron
//!   daemon and is ignored by default (root only: `scripts/test` runs it).

mod support;

mod agents;
mod backend_switch;
mod br_differential;
mod br_native_ticks;
mod browser;
mod chaos;
mod check;
mod checkin;
mod claw_events;
mod claw_loop;
mod claw_tools;
mod cli;
mod containment;
mod contracts;
mod corpus;
mod daemon;
mod day_two;
mod docs_paths;
mod edn_layout;
mod escape;
mod events;
mod faults;
mod forge_client;
mod forge_gitlab;
mod forge_standin;
mod formats;
mod hooks;
mod hostile;
mod issue_tracker;
mod issue_tracker_gitlab;
mod iteration_names;
mod landing_trust;
mod logging;
mod logs_terminal;
mod never_stuck;
mod openclaw;
mod openclaw_sessions;
mod operator;
mod pause;
mod protocol;
mod protocol_hand;
mod protocol_rules;
mod push_retry;
mod read_only;
mod repository;
mod review_landing;
mod review_landing_gitlab;
mod sandbox;
mod schedule;
mod schedule_cron;
mod seed_supervisors;
mod serve;
mod serve_load;
mod sessions;
mod slurm;
mod test_counts;
mod tick_e2e;
mod tick_notices;
mod trackers;
mod unattended;
mod upstream;
mod worker_e2e;
mod workspace_pool;
