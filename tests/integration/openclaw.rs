//! The OpenClaw recipes in README.md, docs/*.md and config.toml's template, and the `openclaw` executor
//! preset's command, against the installed
//! `openclaw` CLI: every flag a recipe passes must be one the CLI's help lists, so a
//! recipe cannot rot silently when OpenClaw changes.
//!
//! `.ci/run` installs Node 24 and `openclaw` into /opt/openclaw (the machine's own Node is too
//! old) and sets `BRAIDS_REQUIRE_OPENCLAW=1`, so there a missing CLI fails the test. Elsewhere
//! the test says it is skipped, and why, on stderr.

use std::path::{Path, PathBuf};
use std::process::Command;

/// `openclaw` on PATH or in /opt/openclaw, with the Node it needs first on PATH.
fn openclaw() -> Option<(PathBuf, String)> {
    let private = Path::new("/opt/openclaw/bin");
    let path = format!(
        "{}:{}",
        private.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let found = std::env::split_paths(&path)
        .map(|d| d.join("openclaw"))
        .find(|p| p.is_file())?;
    Some((found, path))
}

/// The flags of every `openclaw` recipe in `text`: the quoted argv elements after `"openclaw"`
/// that start with `--`, with the subcommand words before them.
fn recipes(text: &str) -> Vec<(Vec<String>, Vec<String>)> {
    let mut out = Vec::new();
    for line in text.lines() {
        let Some(start) = line.find("\"openclaw\"") else {
            continue;
        };
        let Some(end) = line[start..].find(']') else {
            continue;
        };
        let words: Vec<String> = line[start..start + end]
            .split(',')
            .map(|w| w.trim().trim_matches('"').to_string())
            .filter(|w| !w.is_empty())
            .collect();
        let sub: Vec<String> = words[1..]
            .iter()
            .take_while(|w| !w.starts_with('-') && !w.starts_with('{'))
            .cloned()
            .collect();
        let flags = words
            .iter()
            .filter(|w| w.starts_with("--"))
            .cloned()
            .collect();
        out.push((sub, flags));
    }
    out
}

#[test]
fn the_openclaw_recipes_use_only_flags_the_installed_cli_has() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut all = Vec::new();
    let mut files = vec!["README.md".to_string(), "templates/config.toml".to_string()];
    for page in std::fs::read_dir(root.join("docs")).unwrap() {
        let name = page.unwrap().file_name().to_string_lossy().into_owned();
        if name.ends_with(".md") {
            files.push(format!("docs/{name}"));
        }
    }
    for file in &files {
        let text = std::fs::read_to_string(root.join(file)).unwrap();
        // The template's recipe is a comment folded over two lines.
        let text = text.replace("\n#               ", " ");
        all.extend(recipes(&text).into_iter().map(|r| (file.as_str(), r)));
    }
    // The `openclaw` executor preset's own command.
    let preset = braids::agent::Preset::OpenClaw.command(
        &braids::agent::PresetSettings::default(),
        &braids::agent::Launch {
            prompt_file: Path::new("/w/prompt.md"),
            workspace: Path::new("/w"),
            model: Some("standin/m1"),
            resume: None,
            timeout_secs: 600,
            title: "app-1",
            provider: None,
            contained: false,
        },
    );
    assert_eq!(preset.program, "openclaw");
    let sub: Vec<String> = preset
        .args
        .iter()
        .take_while(|w| !w.starts_with('-'))
        .cloned()
        .collect();
    let flags: Vec<String> = preset
        .args
        .iter()
        .filter(|w| w.starts_with("--"))
        .cloned()
        .collect();
    all.push(("the openclaw preset", (sub, flags)));
    let exec: Vec<_> = all
        .iter()
        .filter(|(_, (sub, _))| sub == &["agent", "exec"])
        .collect();
    assert!(
        !exec.is_empty(),
        "the preset runs `openclaw agent exec`: {all:?}"
    );
    for (_, (_, flags)) in &exec {
        for want in ["--message-file", "--cwd", "--timeout", "--json", "--model"] {
            assert!(flags.iter().any(|f| f == want), "{want} in {flags:?}");
        }
    }

    let Some((program, path)) = openclaw() else {
        assert!(
            std::env::var("BRAIDS_REQUIRE_OPENCLAW").as_deref() != Ok("1"),
            "BRAIDS_REQUIRE_OPENCLAW=1 but `openclaw` is not installed"
        );
        eprintln!("SKIPPED: `openclaw` is not installed (.ci/run installs it into /opt/openclaw)");
        return;
    };
    let home = tempfile::tempdir().unwrap();
    for (file, (sub, flags)) in &all {
        let out = Command::new(&program)
            .args(sub)
            .arg("--help")
            .env("PATH", &path)
            .env("OPENCLAW_HOME", home.path())
            .env("OPENCLAW_STATE_DIR", home.path().join("state"))
            .env("OPENCLAW_CONFIG_PATH", home.path().join("openclaw.json5"))
            .env("OPENCLAW_NO_AUTO_UPDATE", "1")
            .env("OPENCLAW_NO_RESPAWN", "1")
            .output()
            .unwrap();
        let help = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "openclaw {sub:?} --help: {out:?}");
        for f in flags {
            assert!(
                help.contains(&format!("{f} ")) || help.contains(&format!("{f},")),
                "{file}: `openclaw {}` has no {f} in this version:\n{help}",
                sub.join(" ")
            );
        }
    }
}
