//! Every repository path the documentation names exists: README.md, CONTRIBUTING.md,
//! ARCHITECTURE.md and docs/*.md, read as a newcomer would follow them.
//!
//! A named path is a relative markdown link (resolved from the page's folder), or a word of an
//! inline code span that looks like a path (it has a `/` or ends in a known extension) and
//! starts at something the repository holds: a top-level entry (`src/tick/`, `scripts/test`,
//! `Cargo.toml`) or, for ARCHITECTURE.md's room-relative names, a room of `src/`
//! (`tick/observe.rs`). Fenced code blocks, URLs, placeholders (`<slug>`), globs and home paths
//! (`~/.openclaw`) are not repository paths; neither is a bare file name of a person's project
//! (`PROJECT.md`).

use std::path::{Path, PathBuf};

const EXTENSIONS: &[&str] = &[
    ".rs", ".md", ".toml", ".yaml", ".yml", ".json", ".sh", ".png", ".edn", ".txt", ".lock",
];

/// A path a page names: its line, the text as written, and where it resolves to.
#[derive(Debug, PartialEq)]
struct Named {
    line: usize,
    text: String,
    path: PathBuf,
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The word as a repository path, if it looks like one: trailing punctuation and a `:line`
/// suffix dropped; nothing with a placeholder, a glob, a URL or a home directory.
fn path_like(word: &str) -> Option<&str> {
    let word = word
        .trim_start_matches(['(', '"', '\''])
        .trim_end_matches([',', '.', ';', ')', '"', '\'']);
    // `app/beads.rs::Opened::open` names an item in a file
    let word = word.split_once("::").map_or(word, |(path, _)| path);
    let word = match word.split_once(':') {
        Some((path, rest)) if rest.chars().all(|c| c.is_ascii_digit() || c == ':') => path,
        Some(_) => return None,
        None => word,
    };
    let word = word.strip_prefix("./").unwrap_or(word);
    if word.is_empty()
        || word.starts_with(['/', '~', '-'])
        || word.contains([
            '<', '>', '*', '?', '{', '}', '[', ']', '$', '|', '=', '@', '…', '%',
        ])
    {
        return None;
    }
    (word.contains('/') || EXTENSIONS.iter().any(|e| word.ends_with(e))).then_some(word)
}

/// Where a path in a code span points in the repository, or `None` when it names no part of
/// it: its first component must be a top-level entry of `tops`, or (room-relative, with
/// `rooms`) one of `src/`'s rooms.
fn resolve(word: &str, tops: &[String], rooms: &[String]) -> Option<PathBuf> {
    let first = word.split('/').next()?;
    if tops.iter().any(|t| t == first) {
        return Some(PathBuf::from(word));
    }
    let room = first.trim_end_matches(".rs");
    (word.contains('/') && (word.ends_with(".rs") || word.ends_with('/')))
        .then_some(())
        .filter(|()| rooms.iter().any(|r| r == room))
        .map(|()| Path::new("src").join(word))
}

/// Every repository path `text` names, relative to the repository; `dir` is the page's folder
/// (relative), from which its links resolve.
fn named_paths(text: &str, dir: &Path, tops: &[String], rooms: &[String]) -> Vec<Named> {
    let mut out = Vec::new();
    let mut fenced = false;
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        // links: `](target)`
        for (at, _) in line.match_indices("](") {
            let rest = &line[at + 2..];
            let Some(end) = rest.find(')') else { continue };
            let target = rest[..end].split('#').next().unwrap_or_default();
            if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            out.push(Named {
                line: i + 1,
                text: rest[..end].to_string(),
                path: dir.join(target),
            });
        }
        // code spans: the odd pieces between backticks
        for span in line.split('`').skip(1).step_by(2) {
            for word in span.split_whitespace() {
                if let Some(path) = path_like(word).and_then(|w| resolve(w, tops, rooms)) {
                    out.push(Named {
                        line: i + 1,
                        text: word.to_string(),
                        path,
                    });
                }
            }
        }
    }
    out
}

fn entries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != "target" && n != ".git")
        .collect()
}

/// The repository paths `text` (the page `page`, relative to the repository) names.
fn named_in(page: &Path, text: &str) -> Vec<Named> {
    let root = root();
    let tops = entries(root);
    let rooms: Vec<String> = entries(&root.join("src"))
        .into_iter()
        .map(|n| n.trim_end_matches(".rs").to_string())
        .collect();
    named_paths(text, page.parent().unwrap_or(Path::new("")), &tops, &rooms)
}

/// `page:line: path` for each path `text` (the page `page`, relative to the repository) names
/// that does not exist.
fn missing_in(page: &Path, text: &str) -> Vec<String> {
    named_in(page, text)
        .into_iter()
        .filter(|n| !root().join(&n.path).exists())
        .map(|n| {
            format!(
                "{}:{}: `{}` ({} does not exist)",
                page.display(),
                n.line,
                n.text,
                n.path.display()
            )
        })
        .collect()
}

fn missing(pages: &[PathBuf]) -> Vec<String> {
    pages
        .iter()
        .flat_map(|page| missing_in(page, &std::fs::read_to_string(root().join(page)).unwrap()))
        .collect()
}

fn user_pages() -> Vec<PathBuf> {
    let mut pages = vec![PathBuf::from("README.md"), PathBuf::from("CONTRIBUTING.md")];
    let mut docs: Vec<PathBuf> = entries(&root().join("docs"))
        .into_iter()
        .filter(|n| n.ends_with(".md"))
        .map(|n| Path::new("docs").join(n))
        .collect();
    docs.sort();
    assert!(docs.len() >= 5, "docs/ has its pages: {docs:?}");
    pages.extend(docs);
    pages
}

#[test]
fn every_path_the_readme_contributing_and_docs_name_exists() {
    let pages = user_pages();
    let named: usize = pages
        .iter()
        .map(|p| named_in(p, &std::fs::read_to_string(root().join(p)).unwrap()).len())
        .sum();
    assert!(
        named >= 40,
        "the pages name only {named} paths: is the extraction broken?"
    );
    let missing = missing(&pages);
    assert!(
        missing.is_empty(),
        "paths the documentation names that do not exist (fix the path or the page):\n{}",
        missing.join("\n")
    );
}

#[test]
fn every_path_architecture_md_names_exists() {
    let missing = missing(&[PathBuf::from("ARCHITECTURE.md")]);
    assert!(
        missing.is_empty(),
        "paths ARCHITECTURE.md names that do not exist (fix the path or the page):\n{}",
        missing.join("\n")
    );
}

#[test]
fn the_paths_a_page_names_are_found_and_nothing_else() {
    let tops: Vec<String> = [
        ".ci",
        "src",
        "tests",
        "scripts",
        "docs",
        "Cargo.toml",
        "README.md",
    ]
    .map(String::from)
    .to_vec();
    let rooms: Vec<String> = ["tick", "worker", "state"].map(String::from).to_vec();
    let page = "\
See `src/tick/run.rs` and `tests/integration/`, run `scripts/test --fast`, read
[the README](../README.md#commands) and [ops](ops.md); `Cargo.toml`, `tick/observe.rs:12`, `src/a.rs::Item`.
Not these: `~/.braids/x.md`, `<project>/.braids/PROJECT.md`, `PROJECT.md`, `src/*.rs`,
`.claw/events/`, `braids/kept/<bead>`, `cargo test`, [web](https://example.com/a.md), `a::b`,
`.ci/run`, `config/app.yml` (no such top-level entry), `worker/{bead,claw}`, [here](#anchor).
```sh
scripts/not-checked-in-a-fence
```
";
    let got: Vec<(usize, String, String)> = named_paths(page, Path::new("docs"), &tops, &rooms)
        .into_iter()
        .map(|n| (n.line, n.text, n.path.display().to_string()))
        .collect();
    let want: Vec<(usize, String, String)> = [
        (2, "../README.md#commands", "docs/../README.md"),
        (2, "ops.md", "docs/ops.md"),
        (1, "src/tick/run.rs", "src/tick/run.rs"),
        (1, "tests/integration/", "tests/integration/"),
        (1, "scripts/test", "scripts/test"),
        (2, "Cargo.toml", "Cargo.toml"),
        (2, "tick/observe.rs:12", "src/tick/observe.rs"),
        (2, "src/a.rs::Item", "src/a.rs"),
        (5, ".ci/run", ".ci/run"),
    ]
    .into_iter()
    .map(|(l, t, p)| (l, t.to_string(), p.to_string()))
    .collect();
    let mut got_sorted = got.clone();
    got_sorted.sort();
    let mut want_sorted = want;
    want_sorted.sort();
    assert_eq!(got_sorted, want_sorted, "{got:#?}");
}

#[test]
fn a_missing_path_is_reported_with_its_page_and_line() {
    let page = "# x\n\nSee `src/no_such_room/gone.rs`, `.ci/run` and [c](../CONTRIBUTING.md).\n";
    assert_eq!(
        missing_in(Path::new("docs/page.md"), page),
        vec![
            "docs/page.md:3: `src/no_such_room/gone.rs` (src/no_such_room/gone.rs does not exist)"
        ]
    );
    assert_eq!(
        missing_in(Path::new("page.md"), page),
        vec![
            "page.md:3: `../CONTRIBUTING.md` (../CONTRIBUTING.md does not exist)",
            "page.md:3: `src/no_such_room/gone.rs` (src/no_such_room/gone.rs does not exist)",
        ]
    );
}
