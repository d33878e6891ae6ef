//! The report's tuples as named objects in JSON (`status --json`, the HTTP API): scripts read
//! `iteration.status`, never `iteration[1]`.

use serde::ser::{SerializeSeq, SerializeStruct};
use serde::Serializer;

use crate::model::{BeadId, BeadStatus, IterationName, IterationStatus};

pub fn iteration<S: Serializer>(
    it: &Option<(IterationName, Option<IterationStatus>)>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match it {
        None => s.serialize_none(),
        Some((name, status)) => {
            let mut o = s.serialize_struct("Iteration", 2)?;
            o.serialize_field("name", &name.to_string())?;
            o.serialize_field("status", status)?;
            o.end()
        }
    }
}

pub fn stories<S: Serializer>(
    stories: &[(BeadId, String, Option<BeadStatus>)],
    s: S,
) -> Result<S::Ok, S::Error> {
    #[derive(serde::Serialize)]
    struct Story<'a> {
        id: &'a BeadId,
        title: &'a str,
        status: &'a Option<BeadStatus>,
    }
    let mut seq = s.serialize_seq(Some(stories.len()))?;
    for (id, title, status) in stories {
        seq.serialize_element(&Story { id, title, status })?;
    }
    seq.end()
}
