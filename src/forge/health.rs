//! Each forge's breaker ([`crate::retry::forge_breaker::ForgeBreaker`]) as every runner shares it: the tick
//! before it watches a forge's requests, a worker before and after it opens, looks at or
//! merges one. Kept in `attempts.json` beside the provider breaker, updated under its lock.

use chrono::{DateTime, Utc};

use crate::forge::ForgeError;
use crate::retry::forge_breaker::{ForgeTransition, Look};
use crate::retry::store::Store;
use crate::system::paths::Paths;

/// Whether forge `name` may be asked at `now`.
pub fn look(paths: &Paths, name: &str, now: DateTime<Utc>) -> Look {
    Store::in_dir(&paths.braids_dir)
        .load()
        .forges
        .get(name)
        .map_or(Look::Ask, |b| b.look(now))
}

/// Records how asking forge `name` went at `now`: an outage opens its breaker (or, open,
/// pushes its next probe back), anything else it answered closes it. Returns the sentence to
/// tell when that changed whether it is asked, logged here too.
pub fn heard<T>(
    paths: &Paths,
    name: &str,
    outcome: &Result<T, ForgeError>,
    now: DateTime<Utc>,
) -> Option<String> {
    let outage = match outcome {
        Err(e) if e.is_outage() => Some(e),
        _ => None,
    };
    let store = Store::in_dir(&paths.braids_dir);
    // Nothing to write for the usual answer of a forge that was never paused.
    if outage.is_none() && !store.load().forges.contains_key(name) {
        return None;
    }
    let why = outage.map(ToString::to_string).unwrap_or_default();
    let changed = store.update(|a| match outage {
        Some(e) => {
            let reset = match e {
                ForgeError::RateLimited { reset } => {
                    reset.and_then(|r| DateTime::from_timestamp(r, 0))
                }
                _ => None,
            };
            a.forges
                .entry(name.to_string())
                .or_default()
                .failed(now, &why, reset)
        }
        None => {
            let t = a.forges.get_mut(name).and_then(|b| b.answered());
            a.forges.remove(name);
            t
        }
    });
    let t: Option<ForgeTransition> = match changed {
        Ok(t) => t,
        Err(e) => {
            tracing::warn!("cannot record how forge `{name}` answered: {e:#}");
            None
        }
    };
    let said = t.map(|t| t.message(name, &why))?;
    tracing::warn!("{said}");
    Some(said)
}
