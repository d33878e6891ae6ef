//! The metadata comment that ends a WORKPLAN.md item: `<!-- key:value, key:value -->`.
//!
//! braids reads `id`, `status`, `assignee`, `priority` (0–4, default 2), `deps`
//! (space-separated ids) and `reason`; other keys (`slice`, `touches`, …) are kept as they
//! are, in their order. A segment without a colon continues the previous value
//! (`touches:a,b`).

use crate::model::BeadId;

/// The trailing `<!-- key:value, … -->` comment, in its original key order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Meta {
    pub(super) entries: Vec<(String, String)>,
}

impl Meta {
    /// Reads a comment body; `None` when it is not `key:value` metadata (an ordinary comment).
    pub fn parse(body: &str) -> Option<Meta> {
        let mut entries: Vec<(String, String)> = Vec::new();
        for segment in body.split(',') {
            let keyed = segment.split_once(':').filter(|(k, _)| {
                let k = k.trim();
                k.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
                    && k.chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            });
            match (keyed, entries.last_mut()) {
                (Some((k, v)), _) => entries.push((k.trim().to_string(), v.trim().to_string())),
                (None, Some((_, v))) => {
                    v.push(',');
                    v.push_str(segment.trim());
                }
                (None, None) if segment.trim().is_empty() => {}
                (None, None) => return None,
            }
        }
        (!entries.is_empty()).then_some(Meta { entries })
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.entries
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
            .map(|(_, v)| v.as_str())
            .filter(|v| !v.is_empty())
    }

    pub fn set(&mut self, key: &str, value: &str) {
        match self
            .entries
            .iter_mut()
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
        {
            Some(e) => e.1 = value.to_string(),
            None => self.entries.push((key.to_string(), value.to_string())),
        }
    }

    pub fn remove(&mut self, key: &str) {
        self.entries.retain(|(k, _)| !k.eq_ignore_ascii_case(key));
    }

    pub fn render(&self) -> String {
        let body: Vec<String> = self
            .entries
            .iter()
            .map(|(k, v)| format!("{k}:{v}"))
            .collect();
        format!("<!-- {} -->", body.join(", "))
    }

    pub fn id(&self) -> Option<BeadId> {
        self.get("id").and_then(|v| BeadId::new(v).ok())
    }

    pub fn deps(&self) -> Vec<BeadId> {
        let mut deps = Vec::new();
        for raw in self
            .get("deps")
            .unwrap_or("")
            .split(|c: char| c.is_whitespace() || c == ',')
        {
            if let Ok(id) = BeadId::new(raw) {
                if !deps.contains(&id) {
                    deps.push(id);
                }
            }
        }
        deps
    }
}

/// A value that can sit inside the metadata comment: one line, no commas (they separate
/// entries) and nothing that would end the comment; runs of whitespace become one space.
pub fn meta_value(s: &str) -> String {
    meta_safe(s)
        .replace(',', ";")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// `s` without the marks that open or close an HTML comment, trimmed.
pub fn meta_safe(s: &str) -> String {
    s.replace("<!--", "").replace("-->", "").trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meta_round_trip() {
        let m = Meta::parse(" id:wp-1ab, status:blocked, deps:wp-a wp-b, slice:x ").unwrap();
        assert_eq!(
            m.render(),
            "<!-- id:wp-1ab, status:blocked, deps:wp-a wp-b, slice:x -->"
        );
        assert_eq!(m.deps().len(), 2);
        assert!(Meta::parse("TODO later").is_none());
        assert_eq!(meta_value("a, b\n<!-- c -->"), "a; b c");
    }
}
