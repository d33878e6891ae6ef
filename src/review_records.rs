//! The beads in review of a project, as their workers recorded them
//! ([`crate::review::InReview`], one file per bead beside its other working files): written
//! whole (temp + rename) by the worker that opens or acts on a pull request, read by the tick
//! and every view. A file that cannot be read is named, never taken for "not in review".

use anyhow::{Context, Result};

use crate::model::BeadId;
use crate::review::InReview;
use crate::system::paths::Paths;

/// The bead's pull request, if it is in review.
pub fn load(paths: &Paths, slug: &str, bead: &BeadId) -> Result<Option<InReview>> {
    let file = paths.review(slug, bead);
    let bytes = match std::fs::read(&file) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", file.display())),
    };
    let mut rec: InReview = serde_json::from_slice(&bytes).with_context(|| {
        format!(
            "{} is not a review record; `braids retry {bead}` starts the bead afresh",
            file.display()
        )
    })?;
    // Whose and which branch are braids' own, never what the file says: a record edited to
    // name another branch must not make braids push to it or delete it.
    rec.bead = bead.to_string();
    rec.branch = crate::review::branch_of(bead.as_str());
    Ok(Some(rec))
}

/// Every bead of `slug` in review, in bead order; the records that cannot be read, as errors.
pub fn load_all(paths: &Paths, slug: &str) -> (Vec<InReview>, Vec<String>) {
    let mut found = Vec::new();
    let mut errors = Vec::new();
    let Ok(entries) = std::fs::read_dir(paths.braids_dir.join("work").join(slug)) else {
        return (found, errors);
    };
    let mut beads: Vec<BeadId> = entries
        .flatten()
        .filter_map(|e| BeadId::new(&e.file_name().to_string_lossy()).ok())
        .collect();
    beads.sort();
    for bead in beads {
        match load(paths, slug, &bead) {
            Ok(Some(r)) => found.push(r),
            Ok(None) => {}
            Err(e) => errors.push(format!("{e:#}")),
        }
    }
    (found, errors)
}

/// Records `review` for `slug`.
pub fn save(paths: &Paths, slug: &str, bead: &BeadId, review: &InReview) -> Result<()> {
    let mut json = serde_json::to_vec_pretty(review)?;
    json.push(b'\n');
    crate::system::atomic::write(&paths.review(slug, bead), &json)
}

/// The bead is out of review: its record and its forge cache go.
pub fn remove(paths: &Paths, slug: &str, bead: &BeadId) {
    let _ = std::fs::remove_file(paths.review(slug, bead));
    let _ = std::fs::remove_file(paths.review_cache(slug, bead));
}
