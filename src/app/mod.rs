//! Use cases shared by the CLI, the daemon, the worker and the web server: each one enforces the
//! contract it is about in one place, so no front end can skip a rule or a lock.

pub mod iteration;
