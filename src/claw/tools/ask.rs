//! The question packet of `braids tools ask` (seed 003's exploration subagent): a person's or an
//! agent's question and the files it names, cut to a byte budget, so a cheap model answers from a
//! bounded context and the asker reads a summary instead of the files.

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};

/// One file of the packet, as read from the tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    /// The path relative to the tree's root.
    pub rel: String,
    pub text: String,
}

/// Reads `files` (relative to `root`, or absolute inside it) without following a link.
pub fn gather(root: &Path, files: &[PathBuf]) -> Result<Vec<Source>> {
    let mut out = Vec::with_capacity(files.len());
    for f in files {
        if f.components().any(|c| c == std::path::Component::ParentDir) {
            bail!(
                "{} climbs out with `..`; --files names files inside {} by their path within it",
                f.display(),
                root.display()
            );
        }
        let abs = if f.is_absolute() {
            f.clone()
        } else {
            root.join(f)
        };
        let Ok(rel) = abs.strip_prefix(root) else {
            bail!(
                "{} is outside {}; --files names files of the tree --dir names",
                f.display(),
                root.display()
            );
        };
        let bytes = match crate::system::beneath::read(root, &abs) {
            Ok(b) => b,
            Err(e) => bail!(
                "cannot read {} ({e}): --files names regular files inside {}, reached through no link, so name the file itself",
                f.display(),
                root.display()
            ),
        };
        out.push(Source {
            rel: rel.display().to_string(),
            text: String::from_utf8_lossy(&bytes).into_owned(),
        });
    }
    Ok(out)
}

/// The prompt: what is asked, how to answer, then the files in order, each cut where the budget
/// of `max_bytes` for the whole packet runs out. A file cut or left out says so, so the answer
/// can say what it did not see; only the question and those notes may take the packet past its
/// budget, when the budget is too small for even them.
#[must_use]
pub fn packet(question: &str, files: &[Source], max_bytes: usize) -> String {
    let mut out = format!(
        "Answer a question about a code base for another agent, who will read only your answer.\n\
         Answer from the files below; do not run commands and do not change any file. Keep the\n\
         answer under 500 words: the facts, with the file and symbol names that hold them, and\n\
         say plainly what the files do not show.\n\n\
         Question: {}\n",
        question.trim()
    );
    if files.is_empty() {
        return out;
    }
    out.push_str("\nFiles:\n");
    let left_out = |f: &Source| {
        format!(
            "\n=== {} === (left out: the packet is at its {max_bytes} bytes)\n",
            f.rel
        )
    };
    let cut_note = |f: &Source, n: usize| format!("\n[… {n} more bytes of {} left out]\n", f.rel);
    for (i, f) in files.iter().enumerate() {
        // Room is kept for saying that each later file was left out.
        let later: usize = files[i + 1..].iter().map(|g| left_out(g).len()).sum();
        let head = format!("\n=== {} ===\n", f.rel);
        let budget = max_bytes.saturating_sub(out.len() + later + head.len());
        let whole = f.text.len() + usize::from(!f.text.ends_with('\n'));
        if whole <= budget {
            out.push_str(&head);
            out.push_str(&f.text);
            if !f.text.ends_with('\n') {
                out.push('\n');
            }
            continue;
        }
        let note = cut_note(f, f.text.len()).len();
        // A few bytes of a file tell the agent nothing: below this it is left out.
        const LEAST: usize = 200;
        if budget < note + LEAST {
            out.push_str(&left_out(f));
            continue;
        }
        let mut cut = budget - note;
        while !f.text.is_char_boundary(cut) {
            cut -= 1;
        }
        out.push_str(&head);
        out.push_str(&f.text[..cut]);
        out.push_str(&cut_note(f, f.text.len() - cut));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn src(rel: &str, text: &str) -> Source {
        Source {
            rel: rel.into(),
            text: text.into(),
        }
    }

    #[test]
    fn c8_7_the_packet_holds_the_question_and_files_within_its_budget() {
        let small = packet("How?", &[src("a.rs", "fn a() {}\n")], 10_000);
        assert!(small.contains("Question: How?"), "{small}");
        assert!(small.contains("=== a.rs ===\nfn a() {}\n"), "{small}");
        let big = "é".repeat(5_000);
        let files = [
            src("a.rs", "fn a() {}"),
            src("big.rs", &big),
            src("c.rs", "c"),
        ];
        let p = packet("How does a call big?", &files, 2_000);
        assert!(p.len() <= 2_000, "{} bytes", p.len());
        assert!(p.contains("=== a.rs ===\nfn a() {}\n"), "{p}");
        assert!(p.contains("more bytes of big.rs left out]"), "{p}");
        assert!(
            p.contains("=== c.rs ===\nc\n"),
            "a small file after a cut one: {p}"
        );
        let two = [src("big.rs", &big), src("more.rs", &big)];
        let p = packet("q", &two, 1_000);
        assert!(p.len() <= 1_000, "{} bytes", p.len());
        assert!(p.contains("more bytes of big.rs left out]"), "{p}");
        assert!(p.contains("=== more.rs === (left out"), "{p}");
        assert_eq!(packet("q", &[], 10), packet("q", &[], 10_000), "no files");
    }

    #[test]
    fn gather_reads_inside_the_tree_and_through_no_link() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::write(root.join("src/a.rs"), "fn a() {}\n").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", root.join("src/link.rs")).unwrap();
        let got = gather(root, &[PathBuf::from("src/a.rs")]).unwrap();
        assert_eq!(got, [src("src/a.rs", "fn a() {}\n")]);
        let e = gather(root, &[PathBuf::from("src/link.rs")]).unwrap_err();
        assert!(format!("{e}").contains("cannot read src/link.rs"), "{e}");
        let e = gather(root, &[PathBuf::from("/etc/passwd")]).unwrap_err();
        assert!(format!("{e}").contains("is outside"), "{e}");
        let e = gather(root, &[PathBuf::from("../x")]).unwrap_err();
        assert!(format!("{e}").contains("../x climbs out with `..`"), "{e}");
    }
}
