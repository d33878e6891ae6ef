//! Pushes owed from earlier runs (CONTRACTS 4.4): retried by the tick in projects with no
//! worker running, with a backoff for a remote that keeps failing.

use std::time::Duration;

use crate::tick::decide::Plan;

/// Retries the pushes that failed earlier (4.4), in projects with no worker running (a running
/// worker pushes its own commits).
///
/// A push that keeps failing is retried with a backoff (`PushDebt::next_try`), unless the run
/// was forced; while it waits, the project's one problem says so.
pub fn retry_pushes(
    reports: &[crate::tick::observe::ProjectReport],
    plan: &Plan,
    timeout: Duration,
    now: chrono::DateTime<chrono::Utc>,
    force: bool,
) -> Retried {
    let mut out = Retried::default();
    let (pushed, errors) = (&mut out.pushed, &mut out.errors);
    for r in reports.iter().filter(|r| r.push_pending) {
        if plan.healthy.get(&r.slug).copied().unwrap_or(0) > 0 {
            continue;
        }
        if let Some(n) = r.not_pushed.as_ref().filter(|n| n.waits(now, force)) {
            errors.push(format!("{}: {}", r.slug, n.line()));
            continue;
        }
        // The workers' repository lock, without waiting: a worker committing now pushes itself.
        let Ok(Some(_lock)) = crate::git::RepoLock::try_acquire(&r.path) else {
            continue;
        };
        let base = match r.config.as_deref() {
            Some(c) => crate::workspace::base_branch_of(&r.path, c),
            None => crate::workspace::base_branch(&r.path),
        };
        let Some(base) = base.ok().filter(|b| crate::git::has_upstream(&r.path, b)) else {
            // Nowhere to push now (the remote or the upstream was removed, the base unknown):
            // the debt stays, shown, until a push can pay it.
            errors.push(format!(
                "{}: not pushed, and its base branch has no upstream to push to now",
                r.slug
            ));
            continue;
        };
        match crate::git::push_recorded(&r.path, &base, timeout) {
            Ok(p) => {
                tracing::info!(project = %r.slug, "pending push retried: pushed");
                let owed = crate::git::take_owed(&r.path);
                if !owed.is_empty() {
                    out.owed.push((r.slug.clone(), owed));
                }
                errors.extend(
                    p.kept
                        .iter()
                        .map(|k| format!("{}: not pushed: {k}", r.slug)),
                );
                pushed.push(r.slug.clone());
            }
            Err(e) => errors.push(format!(
                "{}: push still failing (retried next run): {e:#}",
                r.slug
            )),
        }
    }
    out
}

/// What [`retry_pushes`] did.
#[derive(Debug, Default)]
pub struct Retried {
    /// The projects pushed.
    pub pushed: Vec<String>,
    pub errors: Vec<String>,
    /// Notifications that waited for a push now made, by project.
    pub owed: Vec<(String, Vec<crate::git::Owed>)>,
}
