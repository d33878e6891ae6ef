//! The system edge: everything braids asks of the operating system, each behind one small
//! module so no other room touches a path, a file descriptor or a process directly. Resolved
//! paths, temp + rename writes, `flock`, process groups with deadlines, the agent's sandbox,
//! opening files beneath a workspace without following links, tracing setup, the embedded
//! templates, diagnostics, crash points and exit codes.

pub mod atomic;
pub mod beneath;
pub mod container;
pub mod diag;
pub mod exit;
pub mod failpoint;
pub mod lock;
pub mod logging;
pub mod paths;
pub mod proc;
pub mod sandbox;
pub mod templates;
