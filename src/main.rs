//! The `braids` binary: everything is in the library, so tests drive what a user runs.

fn main() -> std::process::ExitCode {
    braids::cli::run()
}
