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

pub fn man(dir: Option<&std::path::Path>) -> ExitCode {
    if let Some(dir) = dir {
        return match clap_mangen::generate_to(Cli::command(), dir) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!(
                    "braids: cannot write the man pages into {}: {e}",
                    dir.display()
                );
                ExitCode::from(2)
            }
        };
    }
    let mut out = Vec::new();
    match clap_mangen::Man::new(Cli::command()).render(&mut out) {
        Ok(()) => print(&out),
        Err(e) => {
            eprintln!("braids: cannot render the man page: {e}");
            ExitCode::from(2)
        }
    }
}

/// Writes `bytes` to stdout; a reader that went away (`| head`) ends it quietly, any other
/// failure (a full disk) is an error.
fn print(bytes: &[u8]) -> ExitCode {
    use std::io::Write as _;
    match std::io::stdout().lock().write_all(bytes) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("braids: cannot write to standard output: {e}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The README's command table, the rows that start with a command.
    fn table() -> String {
        let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
            .expect("README.md");
        let start = readme.find("## Commands").expect("a Commands section");
        let end = readme[start + 3..]
            .find("\n## ")
            .map_or(readme.len(), |e| start + 3 + e);
        readme[start..end].to_string()
    }

    /// Every command and flag a person can type, as `braids <command> …` and `--flag`.
    fn visible(cmd: &clap::Command, path: &str, out: &mut Vec<(String, Vec<String>)>) {
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            let here = format!("{path} {}", sub.get_name());
            let flags = sub
                .get_arguments()
                .filter(|a| !a.is_hide_set() && !a.is_global_set())
                .filter_map(|a| a.get_long().map(|l| format!("--{l}")))
                .filter(|l| l != "--help" && l != "--version")
                .collect();
            out.push((here.clone(), flags));
            visible(sub, &here, out);
        }
    }

    #[test]
    fn every_command_and_flag_is_in_the_readme_command_table() {
        let table = table();
        let mut all = Vec::new();
        visible(&Cli::command(), "braids", &mut all);
        let mut missing = Vec::new();
        for (command, flags) in &all {
            // `braids iteration new|activate|complete`: a row may list siblings with `|`.
            let words: Vec<&str> = command.split(' ').collect();
            let (parent, last) = (words[..words.len() - 1].join(" "), words[words.len() - 1]);
            let names = |l: &str| {
                l.contains(&format!("`{command}`"))
                    || l.contains(&format!("{command} "))
                    || (l.contains(&format!("`{parent} "))
                        && l.split(['`', ' ', '|', '\\']).any(|w| w == last))
            };
            let rows: Vec<&str> = table.lines().filter(|l| names(l)).collect();
            if rows.is_empty() {
                missing.push(command.clone());
                continue;
            }
            for f in flags {
                if !rows.iter().any(|r| r.contains(f.as_str())) {
                    missing.push(format!("{command} {f}"));
                }
            }
        }
        assert!(
            missing.is_empty(),
            "not in the README's command table: {missing:#?}"
        );
    }
}
