//! What a forge last answered for each URL, with its `ETag`: the next request for the URL asks
//! `If-None-Match`, and a `304` is answered from here. Kept between ticks (serde), one per
//! project, so a tick where nothing changed reads nothing new.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The cache: URL path → (ETag, body).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Conditional {
    entries: BTreeMap<String, Entry>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Entry {
    etag: String,
    body: serde_json::Value,
}

impl Conditional {
    /// The ETag to send for `path`, if its answer is kept under one.
    pub fn etag(&self, path: &str) -> Option<&str> {
        self.entries
            .get(path)
            .map(|e| e.etag.as_str())
            .filter(|t| !t.is_empty())
    }

    /// The kept answer for `path`.
    pub fn body(&self, path: &str) -> Option<&serde_json::Value> {
        self.entries.get(path).map(|e| &e.body)
    }

    /// Keeps `body` for `path` under `etag`.
    pub fn keep(&mut self, path: &str, etag: &str, body: serde_json::Value) {
        self.entries.insert(
            path.to_string(),
            Entry {
                etag: etag.to_string(),
                body,
            },
        );
    }

    /// Keeps `body` for `path` for good: an answer that cannot change (a finished job's log),
    /// read once and never asked for again.
    pub fn keep_final(&mut self, path: &str, body: serde_json::Value) {
        self.keep(path, "", body);
    }

    /// Forgets every answer whose path `f` names.
    pub fn forget_where(&mut self, f: impl Fn(&str) -> bool) {
        self.entries.retain(|k, _| !f(k));
    }

    /// Forgets every answer under `prefix` (a pull request that ended).
    pub fn forget(&mut self, prefix: &str) {
        self.entries.retain(|k, _| !k.starts_with(prefix));
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}
