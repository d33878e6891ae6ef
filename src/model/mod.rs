//! Value types shared by every layer: the enumerations the contracts fix (CONTRACTS 1.1–1.3),
//! bead identities, iteration names, session labels (2.5) and spawn messages (2.4).
//!
//! They live apart from the readers so the pure `decide` step and the I/O edges agree on one
//! vocabulary without depending on each other.

mod bead;
mod enums;
mod iteration;
mod label;
mod spawn;

pub use bead::{Bead, BeadId, BeadIdError, BeadStatus, ISSUE_PREFIX};
pub use enums::{
    Autonomy, Checkin, IterationStatus, NotificationEvent, ParseEnumError, Priority, ProjectStatus,
};
pub use iteration::{IterationName, IterationNameError};
pub use label::{validate_slug, LabelError, SessionLabel};
pub use spawn::{SpawnMessage, SpawnMessageError};
