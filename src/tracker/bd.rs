//! The `bd` adapter. (Implemented by the tracker work.)
use super::TrackerOptions;

pub struct Bd {
    #[allow(dead_code)]
    opts: TrackerOptions,
}

impl Bd {
    pub fn new(opts: TrackerOptions) -> Self {
        Bd { opts }
    }
}
