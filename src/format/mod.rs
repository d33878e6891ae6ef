//! Tolerant readers and byte-preserving writers for the markdown files people and agents edit:
//! registry.md, PROJECT.md, ITERATION.md and deliverables (CONTRACTS 1.1–1.4), and the native
//! tracker's WORKPLAN.md.
//!
//! Readers take text and return a typed model plus line-numbered [`crate::system::diag::Diagnostic`]s;
//! they never panic and never fail on a missing or unknown field (3.9). Structure (tables,
//! headings, lists, code blocks) comes from pulldown-cmark, so `Status: complete` inside a code
//! block is never mistaken for a field. Writers change one thing and leave every other byte.

pub mod deliverable;
pub mod edn;
pub mod fields;
pub mod iteration;
pub mod layout;
mod md;
pub mod project;
pub mod registry;
pub mod workplan;

/// Decodes file bytes for the readers: strips a UTF-8 BOM and replaces invalid UTF-8, so binary
/// garbage yields diagnostics rather than an error.
pub fn decode(bytes: &[u8]) -> std::borrow::Cow<'_, str> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    String::from_utf8_lossy(bytes)
}

#[cfg(test)]
mod robustness {
    //! Every reader and writer against hostile input: no panic, no hang, and writers that
    //! succeed produce text their reader agrees with.

    use std::path::{Path, PathBuf};
    use std::time::Duration;

    use proptest::prelude::*;

    use super::*;
    use crate::model::{BeadId, IterationStatus, Priority, ProjectStatus};
    use crate::system::paths::Paths;

    fn read_everything(text: &str) {
        let paths = Paths::new("/home/u".into(), None);
        let file = Path::new("/x/file.md");
        let _ = registry::parse_registry(text, file, &paths);
        let _ = project::parse_project(text, file);
        let _ = iteration::parse_iteration(text, file, 1, PathBuf::from("/x"));
        let _ = fields::extract(text, file, "1.2");
        let _ = fields::section_text(text, "Stories");
        let _ = deliverable::summary(text);
        let _ = deliverable::check(Path::new("/x/a1b-x.md"), text);
        let _ = workplan::Checklist::parse(text);
        for line in text.lines().take(50) {
            let _ = fields::parse_line(line);
        }
    }

    fn write_everything(text: &str) {
        let paths = Paths::new("/home/u".into(), None);
        let file = Path::new("/x/file.md");
        for s in IterationStatus::ALL {
            if let Ok(out) = iteration::set_status(text, *s) {
                let p = iteration::parse_iteration(&out, file, 1, PathBuf::from("/x"));
                assert_eq!(
                    p.value.status,
                    Some(*s),
                    "set_status({text:?}, {s}) gave {out:?}"
                );
            }
        }
        if let Ok(out) =
            registry::upsert_row(text, "zz-top", ProjectStatus::Paused, Priority::Low, "~/zz")
        {
            let reg = registry::parse_registry(&out, file, &paths).value;
            let e = reg
                .get("zz-top")
                .unwrap_or_else(|| panic!("upsert_row({text:?}) lost the row: {out:?}"));
            assert_eq!(
                (e.status, e.priority, e.raw_path.as_str()),
                (Some(ProjectStatus::Paused), Some(Priority::Low), "~/zz")
            );
        }
    }

    const FRAGMENTS: &[&str] = &[
        "# Title",
        "Title",
        "===",
        "---",
        "## Stories",
        "## Notifications",
        "## Summary",
        "### Notes",
        "- **Status:** active",
        "Status: complete",
        "**Status**: planning",
        "- Status:",
        "## Status: active",
        "```",
        "~~~",
        "    indented: code",
        "> Status: quoted",
        "<!--",
        "-->",
        "<!-- Status: complete -->",
        "<details>",
        "| Slug | Status | Priority | Path |",
        "|---|---|---|---|",
        "| zz-top | active | high | ~/a |",
        "| a | complete | urgent | |",
        "| Field | Value |",
        "| Status | planning |",
        "| Event | Enabled |",
        "| question | on (mention <@1>) |",
        "|",
        "||",
        "\\|",
        "- [ ] a-1: title",
        "- [x] **b-2**: title",
        "  - nested: x",
        "1. c-3 — title",
        "* x",
        "",
        "   ",
        "\t",
        "MaxWorkers: 0",
        "WorkerTimeout: 1h",
        "🚦 Status: ✅",
        "\u{feff}",
        "[link](x): y",
        "Status: active\\",
    ];

    fn markdownish() -> impl Strategy<Value = String> {
        let line = prop_oneof![
            4 => proptest::sample::select(FRAGMENTS).prop_map(str::to_string),
            1 => "[ -~]{0,24}",
            1 => any::<String>().prop_map(|s| s.chars().take(12).collect()),
        ];
        (
            proptest::collection::vec(line, 0..24),
            proptest::sample::select(&["\n", "\r\n", "\r"][..]),
            any::<bool>(),
        )
            .prop_map(|(lines, eol, trailing)| {
                let mut s = lines.join(eol);
                if trailing {
                    s.push_str(eol);
                }
                s
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let text = decode(&bytes);
            read_everything(&text);
            write_everything(&text);
        }

        #[test]
        fn markdownish_text_never_panics_and_writers_round_trip(text in markdownish()) {
            read_everything(&text);
            write_everything(&text);
        }

        #[test]
        fn file_names_are_always_valid(title in any::<String>(), id in "[a-z0-9]{1,8}(-[a-z0-9]{1,5}){0,2}") {
            let bead = BeadId::new(&id).unwrap();
            let name = deliverable::file_name(&bead, &title);
            let (prefix, desc) = deliverable::parse_name(&name).unwrap();
            prop_assert!(bead.matches_prefix(&prefix));
            prop_assert!(desc.len() <= 50 && !desc.is_empty());
            prop_assert!(deliverable::check(Path::new(&name), "## Summary\nok\n").is_empty(), "{}", name);
        }
    }

    /// This thread's CPU time: unlike the wall clock, other processes' load does not move it,
    /// so the bound below catches a quadratic reader and not a busy machine.
    fn cpu_time() -> Duration {
        let t = nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID).unwrap();
        Duration::new(t.tv_sec() as u64, t.tv_nsec() as u32)
    }

    fn quick(label: &str, text: &str) {
        let start = cpu_time();
        read_everything(text);
        write_everything(text);
        let spent = cpu_time() - start;
        assert!(
            spent < Duration::from_secs(20),
            "{label} took {spent:?} of CPU"
        );
    }

    #[test]
    fn hostile_shapes() {
        quick("empty", "");
        quick("lone pipe", "|");
        quick("lone pipes", "|\n|\n|");
        quick("unterminated fence", "# T\n```\nStatus: complete\n");
        quick("unterminated comment", "<!--\nStatus: complete\n");
        quick("huge line", &"Status: active ".repeat(70_000));
        quick(
            "huge table line",
            &format!("{}\n|---|\n", "| a ".repeat(20_000)),
        );
        quick("deep list", &format!("{}Status: x\n", "- ".repeat(3_000)));
        quick(
            "deep list lines",
            &(0..1_000)
                .map(|i| format!("{}- x: {i}\n", "  ".repeat(i)))
                .collect::<String>(),
        );
        quick("deep quote", &format!("{}Status: x\n", "> ".repeat(3_000)));
        quick("brackets", &"[".repeat(50_000));
        quick("emphasis", &"**_`".repeat(20_000));
        quick("many headings", &"## Notes\nStatus: x\n".repeat(5_000));
        quick(
            "many rows",
            &format!(
                "| Slug | Status | Priority | Path |\n|-|-|-|-|\n{}",
                "| a | active | high | /a |\n".repeat(5_000)
            ),
        );
        quick(
            "nul and controls",
            "\0\u{1}\u{7f}Status:\u{0} active\r\r\n\u{2028}",
        );
        let garbage: Vec<u8> = (0..200_000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        quick("binary garbage", &decode(&garbage));
        let p = project::parse_project(&decode(&garbage), Path::new("/x/PROJECT.md"));
        assert_eq!(p.value.status, None);
        assert!(p.has_errors());
    }

    #[test]
    fn decode_strips_bom_and_replaces_invalid_utf8() {
        assert_eq!(decode(b"\xEF\xBB\xBFStatus: active"), "Status: active");
        assert_eq!(decode(b"a\xffb"), "a\u{fffd}b");
    }
}
