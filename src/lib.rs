//! braids: a deterministic scheduler for AI coding agents.
//!
//! The library holds everything; `main.rs` only parses arguments and calls [`cli::run`], so tests
//! drive the same code a user runs. The tick is one straight line — lock → load → observe →
//! decide → act → persist — with every side effect behind a small trait ([`tracker::Tracker`],
//! [`session::SessionBackend`]) and the decision itself a pure function ([`tick::decide`]).

pub mod agent;
pub mod answers;
pub mod app;
pub mod claw;
pub mod cli;
pub mod config;
pub mod cost;
pub mod events;
pub mod forge;
pub mod format;
pub mod git;
pub mod lifecycle;
pub mod model;
pub mod notifier;
pub mod protocol;
pub mod retry;
pub mod review;
pub mod review_records;
pub mod schedule;
pub mod serve;
pub mod session;
pub mod system;
pub mod testrun;
pub mod tick;
pub mod tracker;
pub mod worker;
pub mod workspace;
