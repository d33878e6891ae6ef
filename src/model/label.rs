//! Session labels, `project:<slug>:<bead-id>` (CONTRACTS 2.5).
//!
//! The label is the only thing that ties a live session to a project and a bead, so it must be
//! impossible to forge: the slug cannot contain `:` and the bead id is validated, which makes
//! `project:<slug>:` an exact prefix for counting a project's workers.

use std::fmt;

use super::bead::{BeadId, BeadIdError};

/// Why a string is not a worker label.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LabelError {
    #[error("label `{0}` does not start with `project:`")]
    Prefix(String),
    #[error("label `{0}` has no bead id after the slug")]
    Shape(String),
    #[error("slug `{0}` must match [a-z0-9][a-z0-9-]* (at most 64 characters)")]
    Slug(String),
    #[error(transparent)]
    Bead(#[from] BeadIdError),
}

/// Checks a project slug: `[a-z0-9][a-z0-9-]*`, at most 64 characters.
pub fn validate_slug(slug: &str) -> Result<(), LabelError> {
    let ok = !slug.is_empty()
        && slug.len() <= 64
        && slug.as_bytes()[0].is_ascii_alphanumeric()
        && slug
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(LabelError::Slug(slug.escape_debug().to_string()))
    }
}

/// A worker session's label.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionLabel {
    slug: String,
    bead: BeadId,
}

impl SessionLabel {
    pub fn new(slug: &str, bead: BeadId) -> Result<Self, LabelError> {
        validate_slug(slug)?;
        Ok(SessionLabel {
            slug: slug.to_string(),
            bead,
        })
    }

    pub fn parse(raw: &str) -> Result<Self, LabelError> {
        let rest = raw
            .strip_prefix("project:")
            .ok_or_else(|| LabelError::Prefix(raw.into()))?;
        let (slug, bead) = rest
            .split_once(':')
            .ok_or_else(|| LabelError::Shape(raw.into()))?;
        SessionLabel::new(slug, BeadId::new(bead)?)
    }

    pub fn slug(&self) -> &str {
        &self.slug
    }

    pub fn bead(&self) -> &BeadId {
        &self.bead
    }

    /// The `project:<slug>` prefix the orchestrator counts by (2.5).
    pub fn project_prefix(slug: &str) -> String {
        format!("project:{slug}")
    }
}

impl fmt::Display for SessionLabel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "project:{}:{}", self.slug, self.bead)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c2_5_label_round_trip() {
        let l = SessionLabel::new("my-app", BeadId::new("my-app-x1y").unwrap()).unwrap();
        assert_eq!(l.to_string(), "project:my-app:my-app-x1y");
        assert_eq!(SessionLabel::parse(&l.to_string()).unwrap(), l);
        assert!(l
            .to_string()
            .starts_with(&SessionLabel::project_prefix("my-app")));
    }

    #[test]
    fn c2_5_labels_cannot_be_forged() {
        for bad in [
            "project:a:b:c",
            "project:A:b",
            "proj:a:b",
            "project:a",
            "project::b",
            "project:a:b c",
        ] {
            assert!(SessionLabel::parse(bad).is_err(), "{bad} parsed");
        }
        // a slug that is a prefix of another never matches its sessions by accident
        assert!(
            !"project:app2:x1".starts_with(&format!("{}:", SessionLabel::project_prefix("app")))
        );
    }

    #[test]
    fn slugs() {
        for good in ["a", "my-app", "0x", "a-"] {
            validate_slug(good).unwrap();
        }
        for bad in ["", "-a", "A", "a_b", "a:b", "a/b", "a b", "ä"] {
            assert!(validate_slug(bad).is_err(), "{bad:?}");
        }
    }
}
