//! The files braids writes for people, embedded in the binary so a fresh install needs nothing
//! beside the executable. Placeholders are `{name}` and are filled in one pass by [`expand`],
//! so a value can never inject another placeholder; notifications and executor argv use the
//! same function.

pub const PROJECT: &str = include_str!("../../templates/PROJECT.md");
pub const ITERATION: &str = include_str!("../../templates/ITERATION.md");
pub const DELIVERABLE: &str = include_str!("../../templates/deliverable.md");
pub const AGENTS: &str = include_str!("../../templates/AGENTS.md");
pub const STATUS: &str = include_str!("../../templates/STATUS.md");
pub const REGISTRY: &str = include_str!("../../templates/registry.md");
pub const WORKPLAN: &str = include_str!("../../templates/WORKPLAN.md");
pub const CONFIG: &str = include_str!("../../templates/config.toml");
pub const PROMPT: &str = include_str!("../../templates/prompt.md");
/// The rules every agent works under, a bead's or a protocol story's step: autonomy,
/// guardrails, the project's context.
pub const RULES: &str = include_str!("../../templates/rules.md");

/// `s` trimmed, on one line, with no control character, at most `max` characters (an ellipsis
/// marks a cut): how text from a file, a tracker or an agent goes into a log line, an event or
/// a commit subject.
pub fn clip(s: &str, max: usize) -> String {
    let one = printable(s)
        .split(|c: char| c.is_whitespace() || c.is_control())
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    let mut out: String = one.chars().take(max).collect();
    if one.chars().count() > max {
        out.push('…');
    }
    out
}

/// `s` as a terminal may show it: every escape sequence removed whole (CSI, OSC, DCS, SOS,
/// PM, APC and the short ESC forms, in their 7-bit and C1 spellings), every other control
/// character but newline and tab dropped, and the bidirectional overrides and isolates that
/// make text read other than it is. What an agent printed can otherwise set the clipboard
/// (OSC 52), the window title or clear the screen of whoever reads it.
pub fn printable(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        let kind = match c {
            '\u{1b}' => match chars.next() {
                Some('[') => Seq::Csi,
                Some(']' | 'P' | 'X' | '^' | '_') => Seq::Str,
                // nF: intermediates, then one final character.
                Some(' '..='/') => {
                    while chars.next_if(|c| matches!(c, ' '..='/')).is_some() {}
                    chars.next();
                    continue;
                }
                // Fp, Fe, Fs: one character; a lone ESC at the end is dropped too.
                _ => continue,
            },
            '\u{9b}' => Seq::Csi,
            '\u{90}' | '\u{98}' | '\u{9d}' | '\u{9e}' | '\u{9f}' => Seq::Str,
            '\n' | '\t' => {
                out.push(c);
                continue;
            }
            c if c.is_control() || is_bidi(c) => continue,
            c => {
                out.push(c);
                continue;
            }
        };
        match kind {
            // Parameters and intermediates, up to the final character.
            Seq::Csi => {
                while chars
                    .next_if(|c| matches!(c, '0'..='?' | ' '..='/'))
                    .is_some()
                {}
                chars.next_if(|c| matches!(c, '@'..='~'));
            }
            // A string ends at BEL or ST (ESC \ or C1 ST); one left open ends with the text.
            Seq::Str => {
                while let Some(c) = chars.next() {
                    match c {
                        '\u{7}' | '\u{9c}' => break,
                        '\u{1b}' => {
                            chars.next_if_eq(&'\\');
                            break;
                        }
                        _ => {}
                    }
                }
            }
        }
    }
    out
}

enum Seq {
    Csi,
    Str,
}

/// The bidirectional formatting characters (embeddings, overrides, isolates, marks).
fn is_bidi(c: char) -> bool {
    matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}' | '\u{61c}')
        || matches!(c, '\u{2028}' | '\u{2029}')
}

/// A span of seconds as people read it, every unit named: `42s`, `3m07s`, `1h02m13s`,
/// `2d04h`.
pub fn elapsed(secs: u64) -> String {
    let (d, h, m, s) = (secs / 86_400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
    match (d, h, m) {
        (0, 0, 0) => format!("{s}s"),
        (0, 0, _) => format!("{m}m{s:02}s"),
        (0, _, _) => format!("{h}h{m:02}m{s:02}s"),
        _ => format!("{d}d{h:02}h"),
    }
}

/// Replaces `{name}` placeholders in one pass, so a value that contains `{…}` is never expanded
/// again. Unknown placeholders are kept as written.
pub fn expand(template: &str, vars: &[(&str, &str)]) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(start) = rest.find('{') {
        out.push_str(&rest[..start]);
        let after = &rest[start + 1..];
        match after.find('}').map(|end| (&after[..end], end)) {
            Some((name, end)) if vars.iter().any(|(k, _)| *k == name) => {
                out.push_str(
                    vars.iter()
                        .find(|(k, _)| *k == name)
                        .map(|(_, v)| *v)
                        .unwrap_or_default(),
                );
                rest = &after[end + 1..];
            }
            _ => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// Fills a template's placeholders.
pub fn render(template: &str, vars: &[(&str, &str)]) -> String {
    expand(template, vars)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printable_removes_every_escape_and_control_but_newline_and_tab() {
        let hostile = "a\u{1b}]52;c;ZWNobyBwd25lZA==\u{7}b\u{1b}]0;title\u{1b}\\c\u{1b}[2Jd\u{1b}[1;31me\u{9b}2Jf\u{7}g\u{1b}h\u{1b}Pq#0\u{1b}\\i\u{1b}(Bj\r\u{0}\u{7f}k\u{202e}l\u{2067}m\tn\no\u{1b}";
        // `\u{1b}h` is a whole escape (RIS-like Fs form), so the `h` goes with it.
        assert_eq!(printable(hostile), "abcdefgijklm\tn\no");
        assert_eq!(printable("\u{9d}0;x\u{9c}y"), "y");
        assert_eq!(printable("open \u{1b}]52;c;never ended"), "open ");
        assert_eq!(printable("plain — text ✓"), "plain — text ✓");
        assert_eq!(clip("a\u{1b}]0;t\u{7} b\u{1b}[2J", 10), "a b");
    }

    #[test]
    fn elapsed_names_every_unit() {
        assert_eq!(elapsed(0), "0s");
        assert_eq!(elapsed(42), "42s");
        assert_eq!(elapsed(187), "3m07s");
        assert_eq!(elapsed(3733), "1h02m13s");
        assert_eq!(elapsed(2 * 86_400 + 4 * 3600 + 59), "2d04h");
    }
}
