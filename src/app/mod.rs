//! Use cases shared by the CLI, the daemon, the worker and the web server: each takes resolved
//! inputs, enforces the contract it is about in one place (so no front end can skip a rule or a
//! lock), and returns a value the caller prints or serves. Nothing here parses arguments or
//! prints.

pub mod agents;
pub mod answer;
pub mod beads;
pub mod check;
mod check_config;
pub mod check_issues;
mod check_review;
pub mod claw;
pub mod cost;
pub mod dashboard;
pub mod event_feed;
pub mod held;
pub mod history;
pub mod init;
pub mod issue_replies;
pub mod iteration;
pub mod logs;
pub mod migrate;
pub mod pause;
pub mod project;
pub mod retry;
pub mod schedule;
pub mod sessions;
pub mod status;
pub mod story;
pub mod story_layout;
pub mod supervise;
