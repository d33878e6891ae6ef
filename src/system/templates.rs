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
    let one = s
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
    fn elapsed_names_every_unit() {
        assert_eq!(elapsed(0), "0s");
        assert_eq!(elapsed(42), "42s");
        assert_eq!(elapsed(187), "3m07s");
        assert_eq!(elapsed(3733), "1h02m13s");
        assert_eq!(elapsed(2 * 86_400 + 4 * 3600 + 59), "2d04h");
    }
}
