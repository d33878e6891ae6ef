//! The pull requests of beads in review, looked at once a run: each project's records
//! (`app::reviews`), its forge reached once, each request observed with the conditional cache
//! kept beside its record, so a request where nothing changed costs only `304`s. What the
//! forge says goes into the project's view for `decide`; a forge that cannot be asked leaves
//! the request unobserved (nothing is done about it this run) and says why in the report.
//!
//! The cache is written here, as it is read: it is the forge's answer kept for the next look,
//! not braids' state, and losing it costs only full reads.

use crate::config::Config;
use crate::forge::{connect, Conditional};
use crate::model::BeadId;
use crate::review::{ReviewSettings, Watched};
use crate::system::paths::Paths;
use crate::tick::decide::ProjectView;

/// Fills each project's `reviews`; returns one line per problem.
pub(super) fn watch(
    config: &Config,
    paths: &Paths,
    projects: &mut [ProjectView],
    reports: &mut [super::ProjectReport],
) -> Vec<String> {
    let mut problems = Vec::new();
    for (p, report) in projects.iter_mut().zip(reports.iter_mut()) {
        let (records, errors) = crate::app::reviews::load_all(paths, &p.slug);
        problems.extend(errors.into_iter().map(|e| format!("{}: {e}", p.slug)));
        if records.is_empty() {
            continue;
        }
        let settings = ReviewSettings::of(&crate::format::project::read_project(&p.path).value).0;
        let attempts = crate::review::attempts(config.worker.retries);
        let forge = crate::workspace::base_branch(&p.path)
            .map_err(|e| format!("{e:#}"))
            .and_then(|base| connect::target(config, &settings, &p.path, &base))
            .and_then(|t| connect::connect(&t, &paths.home));
        if let Err(why) = &forge {
            problems.push(format!(
                "{}: its pull requests are not watched: {why}",
                p.slug
            ));
        }
        for rec in records {
            let Ok(bead) = BeadId::new(&rec.bead) else {
                continue;
            };
            let pr = forge.as_ref().ok().and_then(|f| {
                let file = paths.review_cache(&p.slug, &bead);
                let mut cache: Conditional = std::fs::read(&file)
                    .ok()
                    .and_then(|b| serde_json::from_slice(&b).ok())
                    .unwrap_or_default();
                match f.observe(rec.number, &mut cache) {
                    Ok(o) => {
                        if o.not_modified < o.requests {
                            if let Ok(json) = serde_json::to_vec(&cache) {
                                let _ = crate::system::atomic::write(&file, &json);
                            }
                        }
                        Some(o.pr)
                    }
                    Err(e) => {
                        problems.push(format!(
                            "{}: cannot look at {} of {bead}: {e}",
                            p.slug,
                            rec.named()
                        ));
                        None
                    }
                }
            });
            let watched = Watched {
                bead: bead.clone(),
                handled: rec.handled.clone(),
                pr,
                merge: settings.merge,
                approvals: settings.approvals,
                attempts,
                pushed: rec.pushed(),
            };
            report.reviews.push(super::ReviewLine {
                bead,
                number: rec.number,
                url: rec.url.clone(),
                state: state_of(&watched, &rec.last),
            });
            p.reviews.push(watched);
        }
    }
    problems
}

/// Where a request stands for people: what braids waits for, or what the next worker does.
fn state_of(w: &Watched, last: &str) -> String {
    use crate::review::Step;
    match w.step(chrono::Utc::now()) {
        None => format!("not looked at this run; last: {last}"),
        Some(Step::Wait { why }) => why,
        Some(Step::Merge { .. }) => "green: braids merges it".into(),
        Some(Step::Done { .. }) => "merged: its bead closes".into(),
        Some(Step::Blocked { why } | Step::GiveUp { why }) => why,
        Some(Step::Rework(_)) => "an attempt answers the forge".into(),
        Some(Step::Rebase) => "behind its base".into(),
    }
}
