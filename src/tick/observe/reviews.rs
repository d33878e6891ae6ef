//! The pull requests of beads in review, looked at once a run: each project's records
//! (`app::reviews`), its forge reached once, each request observed with the conditional cache
//! kept beside its record, so a request where nothing changed costs only `304`s. What the
//! forge says goes into the project's view for `decide`; a forge that cannot be asked leaves
//! the request unobserved (nothing is done about it this run) and says why in the report.
//!
//! The cache is written here, as it is read: it is the forge's answer kept for the next look,
//! not braids' state, and losing it costs only full reads.

use crate::config::Config;
use crate::forge::health;
use crate::forge::{connect, Conditional};
use crate::model::BeadId;
use std::collections::BTreeSet;

use crate::retry::forge_breaker::Look;
use crate::review::{Landing, ReviewSettings, Watched};
use crate::system::paths::Paths;
use crate::tick::decide::ProjectView;

/// Fills each project's `reviews`; returns one line per problem. A `read_only` look (`status`,
/// a dry run) never moves a forge's breaker: only a run does.
pub(super) fn watch(
    config: &Config,
    paths: &Paths,
    read_only: bool,
    projects: &mut [ProjectView],
    reports: &mut [super::ProjectReport],
) -> Vec<String> {
    let mut problems = Vec::new();
    let now = chrono::Utc::now();
    // Forges paused with nothing of theirs in review are probed through their repository.
    let open: BTreeSet<String> = crate::retry::store::Store::in_dir(&paths.braids_dir)
        .load()
        .forges
        .into_keys()
        .collect();
    let mut paused = open.clone();
    // What a forge answered is written only when it changes its breaker: an outage, or the
    // first answer of a paused forge.
    let heard = |name: &str, outcome: Result<(), &crate::forge::ForgeError>| {
        if !read_only && (outcome.is_err() || open.contains(name)) {
            let _ = health::heard(paths, name, &outcome.map_err(Clone::clone), now);
        }
    };
    for (p, report) in projects.iter_mut().zip(reports.iter_mut()) {
        let (records, errors) = crate::review_records::load_all(paths, &p.slug);
        problems.extend(errors.into_iter().map(|e| format!("{}: {e}", p.slug)));
        if records.is_empty() && paused.is_empty() {
            continue;
        }
        let settings = ReviewSettings::of(&crate::format::project::read_project(&p.path).value).0;
        if settings.landing != Landing::PullRequest && records.is_empty() {
            continue;
        }
        let attempts = crate::review::attempts(config.worker.retries);
        let target = crate::workspace::base_branch(&p.path)
            .map_err(|e| format!("{e:#}"))
            .and_then(|base| connect::target(config, &settings, &p.path, &base));
        let forge = target
            .as_ref()
            .map_err(Clone::clone)
            .and_then(|t| Ok((connect::connect(t, &paths.home)?, t.forge.name.clone())));
        if records.is_empty() {
            if let Ok((f, name)) = &forge {
                if paused.remove(name) && health::look(paths, name, now) == Look::Probe {
                    let probed = f.probe();
                    heard(name, probed.as_ref().err().map_or(Ok(()), Err));
                }
            }
            continue;
        }
        // A paused forge is not asked; a probe is one look, and an outage ends this run's
        // asking (each request would fail the same way).
        let mut asking = match &forge {
            Err(why) => {
                problems.push(format!(
                    "{}: its pull requests are not watched: {why}",
                    p.slug
                ));
                0
            }
            Ok((_, name)) => match health::look(paths, name, now) {
                Look::Ask => usize::MAX,
                Look::Probe => 1,
                Look::Paused { until, why } => {
                    problems.push(format!(
                        "{}: its pull requests wait: forge `{name}` is paused until {} ({why})",
                        p.slug,
                        until.format("%H:%M:%S UTC")
                    ));
                    0
                }
            },
        };
        for rec in records {
            let Ok(bead) = BeadId::new(&rec.bead) else {
                continue;
            };
            let pr = match &forge {
                Ok((f, name)) if asking > 0 && rec.opened() => {
                    asking -= 1;
                    let file = paths.review_cache(&p.slug, &bead);
                    let mut cache: Conditional = std::fs::read(&file)
                        .ok()
                        .and_then(|b| serde_json::from_slice(&b).ok())
                        .unwrap_or_default();
                    let looked = f.observe(rec.number, &mut cache);
                    heard(name, looked.as_ref().map(|_| ()));
                    match looked {
                        Ok(o) => {
                            if o.not_modified < o.requests {
                                if let Ok(json) = serde_json::to_vec(&cache) {
                                    let _ = crate::system::atomic::write(&file, &json);
                                }
                            }
                            Some(o.pr)
                        }
                        Err(e) => {
                            if e.is_outage() {
                                asking = 0;
                            }
                            problems.push(format!(
                                "{}: cannot look at {} of {bead}: {e}",
                                p.slug,
                                rec.named()
                            ));
                            None
                        }
                    }
                }
                _ => None,
            };
            // Its branch is pushed but the forge did not open it: a worker opens it once the
            // forge may be asked (that is a probe's one look).
            let to_open = !rec.opened() && asking > 0;
            if to_open {
                asking -= 1;
            }
            let watched = Watched {
                bead: bead.clone(),
                to_open,
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
        Some(Step::Open) => "its branch is pushed: braids opens its pull request".into(),
        Some(Step::Wait { why }) => why,
        Some(Step::Merge { .. }) => "green: braids merges it".into(),
        Some(Step::Done { .. }) => "merged: its bead closes".into(),
        Some(Step::Blocked { why } | Step::GiveUp { why }) => why,
        Some(Step::Rework(_)) => "an attempt answers the forge".into(),
        Some(Step::Rebase) => "behind its base".into(),
    }
}
