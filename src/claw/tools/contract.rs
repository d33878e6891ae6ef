//! `braids tools show-contract <file>`: a file's header docblock, the contract its author
//! wrote for readers, found by comment syntax alone.

use std::path::Path;

/// The file's header docblock, or a sentence saying why there is none.
pub fn show_contract(root: &Path, file: &Path) -> anyhow::Result<Option<String>> {
    let path = if file.is_absolute() {
        file.to_path_buf()
    } else {
        root.join(file)
    };
    let bytes = crate::system::atomic::read(&path)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
    let text = String::from_utf8_lossy(&bytes);
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    Ok(header_docblock(&text, ext))
}

/// The comment block at the top of `text` (after a shebang and blank lines): `/** … */` or
/// `/* … */`, a run of `//!`, `///` or `//` lines, of `#` lines (where `#` starts a comment),
/// of `--` lines, or a Python docstring. Comment markers are stripped; `None` when the file
/// does not start with a comment.
pub fn header_docblock(text: &str, ext: &str) -> Option<String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines: Vec<&str> = text.lines().collect();
    if lines.first().is_some_and(|l| l.starts_with("#!")) {
        lines.remove(0);
    }
    let start = lines.iter().position(|l| !l.trim().is_empty())?;
    let lines = &lines[start..];
    let first = lines[0].trim_start();
    let hash_comments = matches!(
        ext,
        "py" | "sh"
            | "bash"
            | "zsh"
            | "rb"
            | "pl"
            | "r"
            | "yaml"
            | "yml"
            | "toml"
            | "cfg"
            | "conf"
            | "mk"
            | "cmake"
            | "nix"
            | "tf"
            | "ps1"
            | "jl"
            | "ex"
            | "exs"
    ) || ext.is_empty();
    let out: Vec<String> = if first.starts_with("/*") {
        let mut block = Vec::new();
        for l in lines {
            let done = l.contains("*/");
            let t = l.split("*/").next().unwrap_or("").trim();
            let t = t
                .trim_start_matches("/**")
                .trim_start_matches("/*")
                .trim_start();
            let t = t.strip_prefix('*').map(str::trim_start).unwrap_or(t);
            block.push(t.to_string());
            if done {
                break;
            }
        }
        block
    } else if let Some(marker) = ["//!", "///", "//"]
        .into_iter()
        .find(|m| first.starts_with(m))
    {
        run(lines, marker)
    } else if first.starts_with('#') && !first.starts_with("#[") && hash_comments {
        run(lines, "#")
    } else if first.starts_with("--") && matches!(ext, "sql" | "lua" | "hs" | "elm" | "ada") {
        run(lines, "--")
    } else if ext == "py" && (first.starts_with("\"\"\"") || first.starts_with("'''")) {
        docstring(lines, &first[..3])
    } else {
        return None;
    };
    let trimmed: Vec<&str> = out
        .iter()
        .map(String::as_str)
        .skip_while(|l| l.is_empty())
        .collect();
    let end = trimmed.iter().rposition(|l| !l.is_empty())?;
    Some(trimmed[..=end].join("\n"))
}

/// The lines starting with `marker` from the top, marker and one space stripped.
fn run(lines: &[&str], marker: &str) -> Vec<String> {
    lines
        .iter()
        .map(|l| l.trim_start())
        .take_while(|l| l.starts_with(marker))
        .map(|l| {
            let t = &l[marker.len()..];
            t.strip_prefix(' ').unwrap_or(t).trim_end().to_string()
        })
        .collect()
}

fn docstring(lines: &[&str], quote: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let t = if i == 0 { &l.trim_start()[3..] } else { l };
        if let Some(end) = t.find(quote) {
            out.push(t[..end].trim().to_string());
            break;
        }
        out.push(t.trim().to_string());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docblocks_of_each_comment_style() {
        let cases: &[(&str, &str, Option<&str>)] = &[
            (
                "/**\n * The window store.\n *\n * Owns z-order.\n */\nexport const x = 1;\n",
                "ts",
                Some("The window store.\n\nOwns z-order."),
            ),
            ("/* one line */\ncode", "c", Some("one line")),
            (
                "//! Why this module.\n//! More.\n\nuse x;\n",
                "rs",
                Some("Why this module.\nMore."),
            ),
            (
                "// Header.\n// Two.\nconst a = 1; // not this\n",
                "js",
                Some("Header.\nTwo."),
            ),
            (
                "#!/usr/bin/env python3\n# The tool.\n# Usage: x\nimport os\n",
                "py",
                Some("The tool.\nUsage: x"),
            ),
            (
                "\"\"\"Docstring\nsecond line.\n\"\"\"\nimport os\n",
                "py",
                Some("Docstring\nsecond line."),
            ),
            ("'''One.'''\n", "py", Some("One.")),
            (
                "-- The schema.\nCREATE TABLE t();\n",
                "sql",
                Some("The schema."),
            ),
            ("#include <stdio.h>\n", "c", None),
            ("#[derive(Debug)]\nstruct A;\n", "rs", None),
            ("export const x = 1;\n", "ts", None),
            ("", "ts", None),
            ("\u{feff}\n\n// After a BOM.\n", "js", Some("After a BOM.")),
            ("/**\n */\n", "ts", None),
        ];
        for (text, ext, want) in cases {
            assert_eq!(header_docblock(text, ext).as_deref(), *want, "{text:?}");
        }
    }
}
