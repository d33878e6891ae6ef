//! `braids completions <shell>` and `braids man`: generated from the same clap definitions the
//! parser uses, so they never lag behind a flag.

use std::process::ExitCode;

use clap::CommandFactory as _;

use super::Cli;

pub fn completions(shell: clap_complete::Shell) -> ExitCode {
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "braids", &mut out);
    print(&out)
}

pub fn man() -> ExitCode {
    let mut out = Vec::new();
    match clap_mangen::Man::new(Cli::command()).render(&mut out) {
        Ok(()) => print(&out),
        Err(e) => {
            eprintln!("braids: cannot render the man page: {e}");
            ExitCode::from(2)
        }
    }
}

/// Writes `bytes` to stdout; a reader that went away (`| head`) ends it quietly.
fn print(bytes: &[u8]) -> ExitCode {
    use std::io::Write as _;
    let _ = std::io::stdout().lock().write_all(bytes);
    ExitCode::SUCCESS
}
