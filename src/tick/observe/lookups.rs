//! Which beads a project's observation asks its tracker about: those of its running sessions
//! (under its own label) and of the claims that are its own (by directory, 2.10). `decide`
//! reads their statuses for the zombie order and the claims; the simulation asks the same
//! function, so its model tracker is asked what the real one would be.

use std::collections::BTreeSet;
use std::path::Path;

use crate::model::BeadId;
use crate::session::Session;
use crate::tick::orchestrator_state::Claim;

/// The beads to look up for one project, and how many sessions and claims named them.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub struct Lookups<'a> {
    pub beads: BTreeSet<&'a BeadId>,
    /// Its running sessions.
    pub sessions: usize,
    /// Its claims.
    pub claims: usize,
}

/// The lookups of the project `slug` at `root`. Pure.
pub fn bead_lookups<'a>(
    slug: &str,
    root: &Path,
    sessions: &'a [Session],
    claims: &'a [Claim],
) -> Lookups<'a> {
    let mine: Vec<&BeadId> = sessions
        .iter()
        .filter(|s| s.label.slug() == slug && s.running)
        .map(|s| s.label.bead())
        .collect();
    let claimed: Vec<&BeadId> = claims
        .iter()
        .filter(|c| c.belongs_to(slug, root))
        .map(|c| &c.bead)
        .collect();
    Lookups {
        sessions: mine.len(),
        claims: claimed.len(),
        beads: mine.into_iter().chain(claimed).collect(),
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::model::SessionLabel;

    fn session(label: &str, running: bool) -> Session {
        Session {
            label: SessionLabel::parse(label).unwrap(),
            id: label.into(),
            backend: crate::session::BackendKind::Process,
            pid: None,
            started_at: chrono::DateTime::UNIX_EPOCH,
            running,
            worker_gone: false,
            queued: false,
            ended: None,
            log: None,
        }
    }

    fn claim(slug: &str, path: Option<&str>, bead: &str) -> Claim {
        Claim {
            project: slug.into(),
            path: path.map(PathBuf::from),
            bead: BeadId::new(bead).unwrap(),
            claimed_at: chrono::DateTime::UNIX_EPOCH,
        }
    }

    #[test]
    fn bead_lookups_table() {
        // (what exists) → the beads project `a` at /p/a looks up
        type Row<'a> = (&'a str, Vec<Session>, Vec<Claim>, &'a [&'a str]);
        let rows: [Row; 7] = [
            (
                "its running session",
                vec![session("project:a:a-1", true)],
                vec![],
                &["a-1"],
            ),
            (
                "an ended session",
                vec![session("project:a:a-1", false)],
                vec![],
                &[],
            ),
            (
                "another project's session",
                vec![session("project:b:b-1", true)],
                vec![],
                &[],
            ),
            (
                "its claim by directory",
                vec![],
                vec![claim("a0", Some("/p/a"), "a-2")],
                &["a-2"],
            ),
            (
                "an old claim by slug",
                vec![],
                vec![claim("a", None, "a-3")],
                &["a-3"],
            ),
            (
                "its slug, another directory",
                vec![],
                vec![claim("a", Some("/p/b"), "b-2")],
                &[],
            ),
            (
                "a session and a claim on one bead",
                vec![session("project:a:a-1", true)],
                vec![claim("a", Some("/p/a"), "a-1")],
                &["a-1"],
            ),
        ];
        for (what, sessions, claims, want) in rows {
            let got = bead_lookups("a", Path::new("/p/a"), &sessions, &claims);
            let beads: Vec<&str> = got.beads.iter().map(|b| b.as_str()).collect();
            assert_eq!(beads, want, "{what}");
        }
        let s = [session("project:a:a-1", true)];
        let c = [claim("a", Some("/p/a"), "a-1")];
        let got = bead_lookups("a", Path::new("/p/a"), &s, &c);
        assert_eq!(
            (got.sessions, got.claims),
            (1, 1),
            "both count towards reach"
        );
    }
}
