//! Which registered project a session or a claim belongs to (CONTRACTS 2.10): a label by its
//! slug, or by the claim made with it when the slug was renamed since; a claim by its
//! directory (by slug for one an older braids recorded). Every rule asks here, so no two rules
//! can disagree about an owner.

use std::collections::BTreeMap;
use std::path::Path;

use super::{BeadLookup, ProjectView, Snapshot};
use crate::model::{BeadId, SessionLabel};
use crate::tick::orchestrator_state::Claim;

/// The registered projects, indexed for the questions the rules ask.
pub struct Owners<'a> {
    by_slug: BTreeMap<&'a str, &'a ProjectView>,
    by_path: BTreeMap<&'a Path, &'a ProjectView>,
    /// Labels of workers started before their project's slug was renamed: the claim made with
    /// each names the old label and, by directory, the project.
    renamed: BTreeMap<(&'a str, &'a BeadId), &'a ProjectView>,
}

impl<'a> Owners<'a> {
    #[must_use]
    pub fn of(snap: &'a Snapshot) -> Self {
        let by_slug: BTreeMap<&str, &ProjectView> =
            snap.projects.iter().map(|p| (p.slug.as_str(), p)).collect();
        let by_path: BTreeMap<&Path, &ProjectView> = snap
            .projects
            .iter()
            .map(|p| (p.path.as_path(), p))
            .collect();
        let renamed = snap
            .claims
            .iter()
            .filter(|c| !by_slug.contains_key(c.project.as_str()))
            .filter_map(|c| {
                let p = by_path.get(c.path.as_deref()?)?;
                Some(((c.project.as_str(), &c.bead), *p))
            })
            .collect();
        Owners {
            by_slug,
            by_path,
            renamed,
        }
    }

    /// The project whose worker runs under `label`, counted against its MaxWorkers and under
    /// its zombie rules.
    #[must_use]
    pub fn of_label(&self, label: &SessionLabel) -> Option<&'a ProjectView> {
        self.by_slug
            .get(label.slug())
            .or_else(|| self.renamed.get(&(label.slug(), label.bead())))
            .copied()
    }

    /// The project a claim is kept for; `None` when the registry lost it for a while.
    #[must_use]
    pub fn of_claim(&self, c: &Claim) -> Option<&'a ProjectView> {
        match &c.path {
            Some(path) => self.by_path.get(path.as_path()).copied(),
            None => self.by_slug.get(c.project.as_str()).copied(),
        }
    }

    /// The registered project named `slug` this run.
    #[must_use]
    pub fn by_slug(&self, slug: &str) -> Option<&'a ProjectView> {
        self.by_slug.get(slug).copied()
    }

    /// Whether `slug` is a registered project's: a label of another slug may be a renamed
    /// project's worker, so its bead is held everywhere.
    #[must_use]
    pub fn is_registered(&self, slug: &str) -> bool {
        self.by_slug.contains_key(slug)
    }
}

/// What the tracker said about `bead` of project `p`; `Unknown` when it was not asked.
#[must_use]
pub fn lookup(p: &ProjectView, bead: &BeadId) -> BeadLookup {
    p.beads.get(bead).copied().unwrap_or(BeadLookup::Unknown)
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::super::test_support::*;
    use super::*;

    fn label(l: &str) -> SessionLabel {
        SessionLabel::parse(l).unwrap()
    }

    #[test]
    fn owners_table() {
        let mut s = snap(vec![project("a"), project("b")], vec![]);
        // a-1 was claimed under the slug a0, renamed a since; b-1 by an older braids (no path)
        let mut renamed = claim("a0", "a-1", 1);
        renamed.path = Some(PathBuf::from("/p/a"));
        let mut by_slug = claim("b", "b-1", 1);
        by_slug.path = None;
        let lost = claim("gone", "g-1", 1);
        s.claims = vec![renamed.clone(), by_slug.clone(), lost.clone()];
        let o = Owners::of(&s);
        // (label, owner's slug)
        let labels = [
            ("project:a:a-1", Some("a")),
            ("project:a0:a-1", Some("a")), // its claim names the old label
            ("project:a0:a-2", None),      // no claim says whose it is
            ("project:zz:z-1", None),
        ];
        for (l, want) in labels {
            let got = o.of_label(&label(l)).map(|p| p.slug.as_str());
            assert_eq!(got, want, "{l}");
        }
        // (claim, owner's slug)
        let claims = [
            (renamed, Some("a")), // by directory
            (by_slug, Some("b")), // by slug
            (lost, None),         // the registry lost it
        ];
        for (c, want) in claims {
            let got = o.of_claim(&c).map(|p| p.slug.as_str());
            assert_eq!(got, want, "{c:?}");
        }
        assert!(o.is_registered("a") && !o.is_registered("a0"));
        let p = ProjectView::builder("a", "/p/a")
            .bead(id("a-1"), BeadLookup::Missing)
            .build();
        assert_eq!(lookup(&p, &id("a-1")), BeadLookup::Missing);
        assert_eq!(lookup(&p, &id("a-2")), BeadLookup::Unknown, "not asked");
    }
}
