//! The closed value sets of CONTRACTS 1.1–1.3, each with one tolerant parser.
//!
//! People and agents write `Active`, `**active**`, `ask first`, `research_only` or
//! `active (since Monday)`. All of those mean one thing, so parsing normalises case, emphasis,
//! separators and trailing commentary once, here, instead of in every reader.

use std::fmt;

/// A value that is not one of an enumeration's spellings.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{value}` is not a valid {what}; use one of: {expected}")]
pub struct ParseEnumError {
    pub what: &'static str,
    pub value: String,
    pub expected: &'static str,
}

/// Strips emphasis and code marks and lowercases, so `**Active**` reads as `active`.
fn normalise(raw: &str) -> String {
    raw.trim()
        .trim_matches(|c: char| matches!(c, '*' | '_' | '`' | '"' | '\''))
        .trim()
        .to_lowercase()
}

/// Candidate spellings of a value, most specific first: the whole text, then its first one and
/// two words (so trailing commentary like `active (since Monday)` is ignored).
fn candidates(raw: &str) -> Vec<String> {
    let norm = normalise(raw);
    let dashed = |s: &str| s.replace(['_', ' '], "-");
    let words: Vec<&str> = norm
        .split(|c: char| c.is_whitespace() || matches!(c, '(' | ',' | ';' | '<' | '#' | '—'))
        .filter(|w| !w.is_empty())
        .collect();
    let mut out = vec![dashed(&norm)];
    if words.len() >= 2 {
        out.push(dashed(&format!("{} {}", words[0], words[1])));
    }
    if let Some(first) = words.first() {
        out.push(dashed(first.trim_matches(|c: char| {
            matches!(c, '*' | '_' | '`' | '.' | ':')
        })));
    }
    out
}

macro_rules! closed_enum {
    (
        $(#[$meta:meta])*
        $name:ident, $what:literal {
            $( $variant:ident => $canon:literal $(| $alias:literal)* ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
        pub enum $name {
            $( #[serde(rename = $canon)] $variant, )+
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];
            /// The spellings accepted, for error messages.
            pub const EXPECTED: &'static str = concat!($($canon, " "),+);

            /// The canonical spelling, as written by braids.
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $canon,)+ }
            }

            /// Parses tolerantly: any case, emphasis, `_` or space for `-`, trailing commentary.
            pub fn parse(raw: &str) -> Result<Self, ParseEnumError> {
                for cand in candidates(raw) {
                    match cand.as_str() {
                        $( $canon $(| $alias)* => return Ok($name::$variant), )+
                        _ => {}
                    }
                }
                Err(ParseEnumError {
                    what: $what,
                    value: raw.trim().to_string(),
                    expected: Self::EXPECTED.trim_end(),
                })
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl std::str::FromStr for $name {
            type Err = ParseEnumError;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Self::parse(s)
            }
        }
    };
}

closed_enum! {
    /// A project's status in the registry and in PROJECT.md (1.1, 1.2). Never `complete`.
    ProjectStatus, "project status" {
        Active => "active",
        Paused => "paused",
        Blocked => "blocked",
    }
}

closed_enum! {
    /// Scheduling priority (1.2). Declaration order is scheduling order.
    Priority, "priority" {
        High => "high",
        Normal => "normal" | "medium",
        Low => "low",
    }
}

closed_enum! {
    /// How freely a worker's agent may act (1.2, 3.11).
    Autonomy, "autonomy" {
        Full => "full",
        AskFirst => "ask-first",
        ResearchOnly => "research-only",
    }
}

closed_enum! {
    /// How often a project reports progress unprompted (1.2).
    Checkin, "checkin" {
        Daily => "daily",
        Weekly => "weekly",
        OnDemand => "on-demand" | "ondemand" | "none" | "off",
    }
}

closed_enum! {
    /// An iteration's status (1.3).
    IterationStatus, "iteration status" {
        Planning => "planning",
        Active => "active",
        Complete => "complete" | "completed" | "done",
    }
}

closed_enum! {
    /// The notification events of 1.2, in the order the Notifications table lists them.
    NotificationEvent, "notification event" {
        IterationStart => "iteration-start",
        BeadStart => "bead-start",
        BeadComplete => "bead-complete",
        IterationComplete => "iteration-complete",
        NoReadyBeads => "no-ready-beads",
        Question => "question",
        Blocker => "blocker",
        Review => "review",
    }
}

// The enums come from a macro that cannot mark a `#[default]` variant.
#[allow(clippy::derivable_impls)]
impl Default for Priority {
    fn default() -> Self {
        Priority::Normal
    }
}
// The enums come from a macro that cannot mark a `#[default]` variant.
#[allow(clippy::derivable_impls)]
impl Default for Autonomy {
    fn default() -> Self {
        Autonomy::Full
    }
}
// The enums come from a macro that cannot mark a `#[default]` variant.
#[allow(clippy::derivable_impls)]
impl Default for Checkin {
    fn default() -> Self {
        Checkin::OnDemand
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tolerant_spellings() {
        assert_eq!(
            ProjectStatus::parse("**Active**"),
            Ok(ProjectStatus::Active)
        );
        assert_eq!(
            ProjectStatus::parse("active (since monday)"),
            Ok(ProjectStatus::Active)
        );
        assert_eq!(ProjectStatus::parse(" PAUSED "), Ok(ProjectStatus::Paused));
        assert_eq!(Autonomy::parse("ask first"), Ok(Autonomy::AskFirst));
        assert_eq!(Autonomy::parse("research_only"), Ok(Autonomy::ResearchOnly));
        assert_eq!(Checkin::parse("On-Demand"), Ok(Checkin::OnDemand));
        assert_eq!(
            IterationStatus::parse("`complete`"),
            Ok(IterationStatus::Complete)
        );
        assert_eq!(Priority::parse("high — ship it"), Ok(Priority::High));
    }

    #[test]
    fn c1_1_complete_is_not_a_project_status() {
        let err = ProjectStatus::parse("complete").unwrap_err();
        assert!(err.to_string().contains("active paused blocked"), "{err}");
    }

    #[test]
    fn near_misses_are_rejected() {
        assert!(ProjectStatus::parse("activated").is_err());
        assert!(ProjectStatus::parse("").is_err());
        assert!(Priority::parse("urgent").is_err());
    }

    #[test]
    fn canonical_round_trip() {
        for e in NotificationEvent::ALL {
            assert_eq!(NotificationEvent::parse(e.as_str()), Ok(*e));
        }
        assert!(Priority::High < Priority::Normal && Priority::Normal < Priority::Low);
    }
}
