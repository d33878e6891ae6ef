//! Use cases shared by the CLI, the daemon, the worker and the web server: each takes resolved
//! inputs, does the work through the library, and returns a value the caller prints or serves.
//! Nothing here parses arguments or prints.

pub mod check;
pub mod init;
pub mod project;
pub mod schedule;
pub mod sessions;
pub mod status;
