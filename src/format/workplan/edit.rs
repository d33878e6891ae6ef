//! The WORKPLAN.md writers: each changes one item's line, or appends an item, and keeps every
//! other byte of the file.

use std::collections::HashSet;

use crate::model::BeadId;

use super::{Checklist, Item, Meta, DEFAULT_PRIORITY};

/// `text` with `item`'s checkbox set to `checked` and its metadata replaced by `meta`; nothing
/// outside that line changes.
pub fn rewrite_item(text: &str, item: &Item, checked: bool, meta: &Meta) -> String {
    let mut out = String::with_capacity(text.len() + 64);
    let mark = match (checked, item.checked) {
        (true, true) => &text[item.check_at..item.check_at + 1], // keep `x` or `X`
        (true, false) => "x",
        (false, _) => " ",
    };
    out.push_str(&text[..item.check_at]);
    out.push_str(mark);
    match item.meta_span {
        Some((from, to)) => {
            let between = &text[item.check_at + 1..from];
            if meta.entries.is_empty() {
                // No metadata left: drop the comment and the blank before it.
                out.push_str(between.trim_end());
            } else {
                out.push_str(between);
                out.push_str(&meta.render());
            }
            out.push_str(&text[to..]);
        }
        None => {
            out.push_str(&text[item.check_at + 1..item.insert_at]);
            if !meta.entries.is_empty() {
                out.push(' ');
                out.push_str(&meta.render());
            }
            out.push_str(&text[item.insert_at..]);
        }
    }
    out
}

/// Gives every item without a valid, unique id a fresh one, editing only those items' lines.
pub fn assign_ids(text: &str) -> String {
    let checklist = Checklist::parse(text);
    if !checklist.needs_ids() {
        return text.to_string();
    }
    let mut used = checklist.ids();
    let mut seen = HashSet::new();
    // Edit from the last item up so earlier offsets stay valid.
    let mut assignments = Vec::new();
    for (n, item) in checklist.items.iter().enumerate() {
        match item.meta.id() {
            Some(id) if seen.insert(id.clone()) => {}
            _ => assignments.push(n),
        }
    }
    let mut fresh = Vec::new();
    for &n in &assignments {
        let id = fresh_id(&checklist.items[n].title, n, &used);
        used.insert(id.clone());
        fresh.push((n, id));
    }
    let mut out = text.to_string();
    for (n, id) in fresh.into_iter().rev() {
        let item = &checklist.items[n];
        match item.meta_span {
            // No id key yet: slip `id:…, ` in front of the existing entries, touching nothing else.
            Some((from, _))
                if item.meta.get("id").is_none()
                    && !item
                        .meta
                        .entries
                        .iter()
                        .any(|(k, _)| k.eq_ignore_ascii_case("id")) =>
            {
                let body = from + "<!--".len();
                let at = body + (out[body..].len() - out[body..].trim_start().len());
                out.insert_str(at, &format!("id:{id}, "));
            }
            _ => {
                let mut meta = item.meta.clone();
                meta.set("id", id.as_str());
                out = rewrite_item(&out, item, item.checked, &meta);
            }
        }
    }
    out
}

/// `wp-` + three base-36 characters of a hash of the title and position; on a collision the
/// hash is salted, and after a few tries the id grows a character.
pub fn fresh_id(title: &str, position: usize, used: &HashSet<BeadId>) -> BeadId {
    for attempt in 0u64.. {
        let len = 3 + (attempt / 16) as usize;
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for byte in title
            .trim()
            .bytes()
            .chain(position.to_le_bytes())
            .chain(attempt.to_le_bytes())
        {
            h ^= u64::from(byte);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        let mut s = String::new();
        for _ in 0..len {
            s.push(char::from_digit((h % 36) as u32, 36).expect("base 36"));
            h /= 36;
        }
        let id = BeadId::new(&format!("wp-{s}")).expect("valid id");
        if !used.contains(&id) {
            return id;
        }
    }
    unreachable!("the id space is unbounded")
}

/// Appends an open item `- [ ] <title> <!-- id:… -->` and its description, indented under it,
/// in the file's line endings; an empty file gets a `# WORKPLAN` heading first. `title` must
/// already be one line that cannot end the comment ([`super::meta_safe`]).
pub fn append_item(text: &mut String, id: &BeadId, title: &str, description: &str, priority: u8) {
    let nl = if text.contains("\r\n") { "\r\n" } else { "\n" };
    if text.trim_start_matches('\u{feff}').trim().is_empty() {
        text.push_str(&format!("# WORKPLAN{nl}{nl}"));
    } else if !text.ends_with('\n') {
        text.push_str(nl);
    }
    let mut meta = Meta::default();
    meta.set("id", id.as_str());
    if priority.min(4) != DEFAULT_PRIORITY {
        meta.set("priority", &priority.min(4).to_string());
    }
    text.push_str(&format!("- [ ] {title} {}{nl}", meta.render()));
    let desc: Vec<&str> = description.lines().collect();
    let last = desc.iter().rposition(|l| !l.trim().is_empty());
    for line in desc.iter().take(last.map_or(0, |n| n + 1)) {
        let line = line.trim_end();
        if line.is_empty() {
            text.push_str(nl);
        } else {
            text.push_str(&format!("  {line}{nl}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::strip_ids;
    use super::*;

    /// Markdown-ish lines, including the awkward ones.
    fn line() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        prop_oneof![
            Just("- [ ] task".to_string()),
            Just("* [x] done <!-- slice:a, touches:b,c -->".to_string()),
            Just("+ [X] Done too\t".to_string()),
            Just("- [ ]".to_string()),
            Just("  - [ ] nested".to_string()),
            Just("   - [ ] three in".to_string()),
            Just("    - [ ] four in".to_string()),
            Just("- [ ] note <!-- a plain note -->".to_string()),
            Just("- [ ] empty <!-- -->".to_string()),
            Just("- [ ] odd <!-- k:v --> tail".to_string()),
            Just("- [] not a box".to_string()),
            Just("-[ ] not a box".to_string()),
            Just("```".to_string()),
            Just("~~~~".to_string()),
            Just("  ```rust".to_string()),
            Just("## Phase".to_string()),
            Just("".to_string()),
            Just("  indented description".to_string()),
            Just("\tTabbed".to_string()),
            "[a-hj-zé✓ \\[\\]x:,<!>-]{0,24}".prop_map(|s| s),
            "[a-z ]{0,10}".prop_map(|s| format!("- [ ] {s}")),
        ]
    }

    fn document() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        (
            any::<bool>(),
            proptest::collection::vec((line(), any::<bool>()), 0..24),
            any::<bool>(),
        )
            .prop_map(|(bom, lines, final_newline)| {
                let mut s = if bom {
                    "\u{feff}".to_string()
                } else {
                    String::new()
                };
                let n = lines.len();
                for (i, (l, crlf)) in lines.into_iter().enumerate() {
                    s.push_str(&l);
                    if i + 1 < n || final_newline {
                        s.push_str(if crlf { "\r\n" } else { "\n" });
                    }
                }
                s
            })
    }

    proptest::proptest! {
        #[test]
        fn assigning_ids_only_adds_ids(text in document()) {
            let before = Checklist::parse(&text);
            let with_ids = assign_ids(&text);
            proptest::prop_assert_eq!(strip_ids(&with_ids), text.clone());
            let after = Checklist::parse(&with_ids);
            proptest::prop_assert!(!after.needs_ids());
            proptest::prop_assert_eq!(after.items.len(), before.items.len());
            for (a, b) in before.items.iter().zip(&after.items) {
                proptest::prop_assert_eq!(&a.title, &b.title);
                proptest::prop_assert_eq!(&a.description, &b.description);
                proptest::prop_assert_eq!(a.checked, b.checked);
            }
            proptest::prop_assert_eq!(assign_ids(&with_ids), with_ids.clone(), "idempotent");
        }

        #[test]
        fn duplicated_ids_are_made_unique(text in document(), dup in 0usize..8) {
            // Copy an item line (id and all) as a person pasting it would.
            let with_ids = assign_ids(&text);
            let lines: Vec<&str> = with_ids.split('\n').collect();
            let items: Vec<&str> = lines.iter().copied().filter(|l| l.contains("id:wp-")).collect();
            proptest::prop_assume!(!items.is_empty());
            let copy = format!("{with_ids}\n{}\n", items[dup % items.len()].trim_end_matches('\r'));
            let fixed = assign_ids(&copy);
            let checklist = Checklist::parse(&fixed);
            proptest::prop_assert!(!checklist.needs_ids());
            proptest::prop_assert_eq!(checklist.ids().len(), checklist.items.len());
        }
    }
}
