//! `braids tools find-symbol <name>`: every line naming the symbol as a whole word.

use std::path::Path;

use grep::regex::RegexMatcherBuilder;
use grep::searcher::sinks::UTF8;
use grep::searcher::{BinaryDetection, SearcherBuilder};
use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Hit {
    /// Relative to the root.
    pub file: String,
    pub line: u64,
    pub text: String,
}

/// Each line under `root` where `name` appears as a whole word (a literal, never a pattern),
/// sorted by file and line. Binary files are skipped.
pub fn find_symbol(root: &Path, name: &str) -> anyhow::Result<Vec<Hit>> {
    if name.trim().is_empty() {
        anyhow::bail!("find-symbol needs a name to look for");
    }
    let matcher = RegexMatcherBuilder::new()
        .word(true)
        .build(&regex_syntax::escape(name))?;
    let found = super::walk::files(root, |path| {
        let mut searcher = SearcherBuilder::new()
            .line_number(true)
            .binary_detection(BinaryDetection::quit(b'\0'))
            .build();
        let mut hits = Vec::new();
        let _ = searcher.search_path(
            &matcher,
            path,
            UTF8(|line, text| {
                hits.push((line, crate::system::templates::clip(text, 200)));
                Ok(true)
            }),
        );
        (!hits.is_empty()).then_some(hits)
    });
    Ok(found
        .into_iter()
        .flat_map(|(path, hits)| {
            let file = super::walk::rel(root, &path);
            hits.into_iter().map(move |(line, text)| Hit {
                file: file.clone(),
                line,
                text,
            })
        })
        .collect())
}
