//! The `braids` binary: everything is in the library, so tests drive what a user runs.

fn main() -> std::process::ExitCode {
    let _armed = braids::system::failpoint::arm();
    braids::cli::run()
}
