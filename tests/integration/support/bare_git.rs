//! Git on the bare repositories behind the forge stand-ins: what they read and write there
//! as the forge would (a merge's tree, a commit made by the forge, a branch's head), and a
//! test's own repository and clone to put behind them.

use std::path::Path;
use std::process::Command;

/// The tree a clean merge of `head` into `base` would have; `None` when they conflict.
pub fn merge_tree(bare: &Path, base: &str, head: &str) -> Option<String> {
    git(bare, &["merge-tree", "--write-tree", base, head])
        .ok()
        .and_then(|t| t.lines().next().map(String::from))
}

/// A commit of `tree` on `parents` made by the forge `by` (its name and address).
pub fn commit_tree(
    bare: &Path,
    tree: &str,
    parents: &[&str],
    message: &str,
    by: (&str, &str),
) -> Result<String, String> {
    let mut args = vec!["commit-tree", tree];
    for p in parents {
        args.extend(["-p", p]);
    }
    args.extend(["-m", message]);
    let mut c = Command::new("git");
    c.args(&args)
        .current_dir(bare)
        .env("GIT_AUTHOR_NAME", by.0)
        .env("GIT_AUTHOR_EMAIL", by.1)
        .env("GIT_COMMITTER_NAME", by.0)
        .env("GIT_COMMITTER_EMAIL", by.1);
    answer(c).map(|o| o.trim().to_string())
}

/// The commit `name` names, if any.
pub fn rev(bare: &Path, name: &str) -> Option<String> {
    git(
        bare,
        &[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("{name}^{{commit}}"),
        ],
    )
    .ok()
    .map(|o| o.trim().to_string())
    .filter(|o| !o.is_empty())
}

/// The branch the repository's HEAD names.
pub fn default_branch(bare: &Path) -> String {
    git(bare, &["symbolic-ref", "--short", "HEAD"])
        .map(|o| o.trim().to_string())
        .unwrap_or_else(|_| "main".into())
}

/// git in `dir`, its output or its complaint; no setting of the machine's is read.
pub fn git(dir: &Path, args: &[&str]) -> Result<String, String> {
    let mut c = Command::new("git");
    c.args(args).current_dir(dir);
    answer(c)
}

fn answer(mut c: Command) -> Result<String, String> {
    let o = c
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .map_err(|e| e.to_string())?;
    match o.status.success() {
        true => Ok(String::from_utf8_lossy(&o.stdout).into_owned()),
        false => Err(String::from_utf8_lossy(&o.stderr).into_owned()),
    }
}

/// Runs git in `dir` as a test's own person would; its output, or a panic with git's words.
pub fn run_git(dir: &Path, args: &[&str]) -> String {
    let o = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "T")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "T")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// A bare repository with `main` holding one commit, and a clone of it.
pub fn world(tmp: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let bare = tmp.join("app.git");
    let work = tmp.join("work");
    run_git(
        tmp,
        &["init", "-q", "--bare", "-b", "main", bare.to_str().unwrap()],
    );
    run_git(
        tmp,
        &[
            "clone",
            "-q",
            bare.to_str().unwrap(),
            work.to_str().unwrap(),
        ],
    );
    std::fs::write(work.join("a.txt"), "one\n").unwrap();
    run_git(&work, &["add", "."]);
    run_git(&work, &["commit", "-qm", "first"]);
    run_git(&work, &["push", "-q", "origin", "HEAD:main"]);
    (bare, work)
}

/// Pushes `branch`, made on `main` with `file` holding `text`, from the clone `work`; its
/// head.
pub fn push_branch(work: &Path, branch: &str, file: &str, text: &str) -> String {
    run_git(work, &["checkout", "-q", "-B", branch, "origin/main"]);
    std::fs::write(work.join(file), text).unwrap();
    run_git(work, &["add", "."]);
    run_git(work, &["commit", "-qm", &format!("change {file}")]);
    run_git(work, &["push", "-q", "-f", "origin", branch]);
    run_git(work, &["rev-parse", "HEAD"])
}

/// The issue numbers `text` names after one of the closing `keywords` (`Closes #12`, `fixes:
/// #3,`), as a forge reads a merged request's description.
pub fn closing_refs(text: &str, keywords: &[&str]) -> Vec<u64> {
    let lower = text.to_ascii_lowercase();
    let tokens: Vec<&str> = lower
        .split(|c: char| c.is_whitespace() || c == ',')
        .collect();
    tokens
        .windows(2)
        .filter(|w| keywords.contains(&w[0].trim_end_matches(':')))
        .filter_map(|w| {
            w[1].strip_prefix('#')
                .and_then(|d| d.trim_end_matches(['.', ')']).parse().ok())
        })
        .collect()
}
