//! Deliverable files (CONTRACTS 1.4, 3.4): `.braids/iterations/<N>/<id-suffix>-<name>.md`, one
//! per bead per iteration, with a `## Summary` section at the minimum.
//!
//! The id suffix is [`BeadId::suffix`]; when looking a deliverable up, a prefix matches a bead
//! as [`BeadId::matches_prefix`] says (the suffix, the last three characters, or the whole id),
//! so files written by hand under the letter of 1.4 are found too.

use std::path::{Path, PathBuf};

use crate::model::BeadId;
use crate::system::diag::{Diagnostic, Diags};

use super::md::Doc;

const SECTION: &str = "1.4";
/// The longest descriptive name [`file_name`] writes.
const MAX_NAME: usize = 50;

/// The deliverable file name for a bead: `<suffix>-<kebab-title>.md`, ASCII, the name part at
/// most 50 characters and never empty.
pub fn file_name(bead: &BeadId, title: &str) -> String {
    format!("{}-{}.md", bead.suffix(), kebab(title))
}

/// A kebab-case rendering of `title`: lowercase ASCII letters and digits joined by single
/// dashes, common accents folded, apostrophes dropped, cut at a word boundary to 50
/// characters; `deliverable` when nothing is left.
pub fn kebab(title: &str) -> String {
    let mut out = String::new();
    let mut pending_dash = false;
    for c in title.chars().flat_map(char::to_lowercase) {
        if matches!(c, '\'' | '’' | '`') {
            continue;
        }
        let folded = fold(c);
        if folded.is_empty() {
            pending_dash = true;
            continue;
        }
        if pending_dash && !out.is_empty() {
            out.push('-');
        }
        pending_dash = false;
        out.push_str(folded);
    }
    if out.len() > MAX_NAME {
        let cut = out[..=MAX_NAME]
            .rfind('-')
            .filter(|&i| i > 0)
            .unwrap_or(MAX_NAME);
        out.truncate(cut);
    }
    let out = out.trim_matches('-');
    if out.is_empty() {
        "deliverable".to_string()
    } else {
        out.to_string()
    }
}

/// ASCII for a lowercase character: itself, a folded accent, or nothing (a separator).
fn fold(c: char) -> &'static str {
    const ASCII: &str = "abcdefghijklmnopqrstuvwxyz0123456789";
    if c.is_ascii_alphanumeric() {
        let i = ASCII.find(c).unwrap_or(0);
        return &ASCII[i..i + 1];
    }
    match c {
        'à' | 'á' | 'â' | 'ã' | 'ä' | 'å' | 'ā' => "a",
        'æ' => "ae",
        'ç' | 'ć' | 'č' => "c",
        'è' | 'é' | 'ê' | 'ë' | 'ē' | 'ę' | 'ě' => "e",
        'ì' | 'í' | 'î' | 'ï' | 'ī' => "i",
        'ñ' | 'ń' | 'ň' => "n",
        'ò' | 'ó' | 'ô' | 'õ' | 'ö' | 'ø' | 'ō' => "o",
        'œ' => "oe",
        'ù' | 'ú' | 'û' | 'ü' | 'ū' | 'ů' => "u",
        'ý' | 'ÿ' => "y",
        'ß' => "ss",
        'ł' => "l",
        'š' | 'ś' => "s",
        'ž' | 'ź' | 'ż' => "z",
        'ř' => "r",
        'ť' => "t",
        'ď' => "d",
        _ => "",
    }
}

/// Splits a deliverable file name into its prefix (the bead id suffix) and descriptive name:
/// `a1b-parser-design.md` → `("a1b", "parser-design")`. `None` for other names (ITERATION.md,
/// no dash, not `.md`).
pub fn parse_name(file_name: &str) -> Option<(String, String)> {
    let n = file_name.len();
    if n < 3
        || !file_name.is_char_boundary(n - 3)
        || !file_name[n - 3..].eq_ignore_ascii_case(".md")
    {
        return None;
    }
    let stem = &file_name[..n - 3];
    let (prefix, name) = stem.split_once('-')?;
    if prefix.is_empty()
        || name.is_empty()
        || !prefix
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.')
    {
        return None;
    }
    Some((prefix.to_string(), name.to_string()))
}

/// The deliverables of `bead` in an iteration directory, sorted: `.md` files whose prefix
/// refers to the bead, or that start with the whole id and a dash.
pub fn find(iteration_dir: &Path, bead: &BeadId) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(iteration_dir) else {
        return Vec::new();
    };
    let id = bead.as_str();
    let mut out: Vec<PathBuf> = rd
        .flatten()
        .filter_map(|e| {
            let name = e.file_name();
            let name = name.to_str()?;
            if name.eq_ignore_ascii_case("ITERATION.md") {
                return None;
            }
            let whole = name.len() > id.len() + 4
                && name
                    .get(..id.len())
                    .is_some_and(|p| p.eq_ignore_ascii_case(id))
                && name.as_bytes()[id.len()] == b'-'
                && name.to_ascii_lowercase().ends_with(".md");
            let by_prefix = parse_name(name).is_some_and(|(p, _)| bead.matches_prefix(&p));
            let p = e.path();
            ((whole || by_prefix) && p.is_file()).then_some(p)
        })
        .collect();
    out.sort();
    out
}

/// The text of the Summary section (any heading level, any case), without surrounding blank
/// lines; `None` when there is none or it is empty (an HTML comment alone is empty). A
/// top-level `Summary: …` field is accepted when there is no heading.
pub fn summary(text: &str) -> Option<String> {
    let doc = Doc::new(text);
    match summary_heading(&doc) {
        Some(h) => {
            let body = doc.section_body(h);
            let has_content = body.clone().any(|i| !doc.is_blank(i));
            Some(doc.raw_lines(body)).filter(|s| has_content && !s.is_empty())
        }
        None => summary_field(&doc),
    }
}

fn summary_heading(doc: &Doc) -> Option<usize> {
    doc.find_heading("summary")
        .or_else(|| doc.find_heading("tl dr"))
}

fn summary_field(doc: &Doc) -> Option<String> {
    let raw = super::fields::scan(doc, &[]);
    raw.into_iter()
        .find(|f| f.field.key == "summary")
        .map(|f| f.field.value)
        .filter(|v| !v.trim().is_empty())
}

fn is_kebab(s: &str) -> bool {
    !s.is_empty()
        && s.split('-').all(|w| {
            !w.is_empty()
                && w.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        })
}

/// Checks a deliverable's name and content against 1.4: `<id-suffix>-<kebab-name>.md` and a
/// non-empty Summary section.
pub fn check(path: &Path, text: &str) -> Vec<Diagnostic> {
    let mut out = Diags::new(path, SECTION);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    match parse_name(&name) {
        None => {
            out.error(
                None,
                format!("deliverable file name `{name}` is not of the form `<id-suffix>-<descriptive-name>.md`"),
                "rename it to the bead id's suffix, a dash and a short kebab-case name, such as `a1b-parser-design.md`",
            );
        }
        Some((prefix, desc)) if !is_kebab(&desc) => {
            out.error(
                None,
                format!("the descriptive part `{desc}` of deliverable `{name}` is not kebab-case"),
                format!("rename the file to `{prefix}-{}.md`", kebab(&desc)),
            );
        }
        Some(_) => {}
    }
    let doc = Doc::new(text);
    match summary_heading(&doc) {
        Some(h) => {
            if summary(text).is_none() {
                out.error(
                    Some(doc.headings[h].first + 1),
                    "the Summary section of this deliverable is empty",
                    "write a few sentences under the Summary heading saying what was done and where",
                );
            }
        }
        None if summary_field(&doc).is_some() => {}
        None => {
            out.error(
                None,
                "this deliverable has no Summary section",
                "add a `## Summary` heading followed by a few sentences saying what was done",
            );
        }
    }
    out.into_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(s: &str) -> BeadId {
        BeadId::new(s).unwrap()
    }

    #[test]
    fn c1_4_file_names() {
        assert_eq!(
            file_name(&id("braids-a1b"), "Parse the registry!"),
            "a1b-parse-the-registry.md"
        );
        assert_eq!(
            file_name(&id("proj-x9k2q"), "  Don't   panic: café  "),
            "x9k2q-dont-panic-cafe.md"
        );
        assert_eq!(file_name(&id("abcdef"), "🎉🎉"), "def-deliverable.md");
        let long = file_name(&id("a-1b2"), &"word ".repeat(40));
        let (_, name) = parse_name(&long).unwrap();
        assert!(
            name.len() <= 50 && !name.ends_with('-') && is_kebab(&name),
            "{long}"
        );
        assert_eq!(kebab(&"x".repeat(80)).len(), 50);
    }

    #[test]
    fn c1_4_parse_name() {
        assert_eq!(
            parse_name("a1b-parser-design.md"),
            Some(("a1b".into(), "parser-design".into()))
        );
        assert_eq!(parse_name("a1b-x.MD"), Some(("a1b".into(), "x".into())));
        for bad in [
            "ITERATION.md",
            "a1b.md",
            "-x.md",
            "a1b-.md",
            "a1b-x.txt",
            "",
            ".md",
            "é-x.md",
            "a b-x.md",
        ] {
            assert_eq!(parse_name(bad), None, "{bad}");
        }
    }

    #[test]
    fn c1_4_find() {
        let dir = tempfile::tempdir().unwrap();
        for f in [
            "a1b-design.md",
            "A1B-notes.md",
            "braids-a1b-full.md",
            "c2d-other.md",
            "ITERATION.md",
            "a1b-data.json",
        ] {
            std::fs::write(dir.path().join(f), "x").unwrap();
        }
        std::fs::create_dir(dir.path().join("a1b-dir.md")).unwrap();
        let names: Vec<String> = find(dir.path(), &id("braids-a1b"))
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            ["A1B-notes.md", "a1b-design.md", "braids-a1b-full.md"]
        );
        let long = find(dir.path(), &id("proj-xa1b"));
        assert_eq!(long.len(), 2, "last three characters match too: {long:?}");
        assert!(find(&dir.path().join("missing"), &id("a-1")).is_empty());
    }

    #[test]
    fn c1_4_summary() {
        assert_eq!(
            summary("# D\n\n## Summary\n\nDid it.\n\n## Details\nx\n").as_deref(),
            Some("Did it.")
        );
        assert_eq!(
            summary("### SUMMARY\r\nline one\r\nline two\r\n").as_deref(),
            Some("line one\nline two")
        );
        assert_eq!(summary("# Summary\n").as_deref(), None);
        assert_eq!(summary("## Summary\n<!-- write here -->\n## Next\n"), None);
        assert_eq!(summary("## Summary\n\n<!--\nTODO\n-->\n"), None);
        assert_eq!(summary("```\n## Summary\ntext\n```\n"), None);
        assert_eq!(
            summary("**Summary:** short and sweet\n").as_deref(),
            Some("short and sweet")
        );
        assert_eq!(summary(""), None);
    }

    #[test]
    fn c1_4_check() {
        assert!(check(Path::new("/i/001/a1b-parser.md"), "## Summary\nok\n").is_empty());
        let bad = check(Path::new("/i/001/a1b-Parser_Design.md"), "# x\n");
        assert_eq!(bad.len(), 2);
        assert!(
            bad[0].fix.contains("a1b-parser-design.md"),
            "{}",
            bad[0].fix
        );
        assert!(bad[1].message.contains("no Summary"));
        assert!(bad.iter().all(|d| d.section == "1.4"));
        let empty = check(Path::new("/i/001/notes.md"), "# T\n\n## Summary\n\n");
        assert_eq!(empty.len(), 2);
        assert_eq!(empty[1].line, Some(3));
    }
}
