//! The `br` adapter. (Implemented by the tracker work.)
use super::TrackerOptions;

pub struct Br {
    #[allow(dead_code)]
    opts: TrackerOptions,
}

impl Br {
    pub fn new(opts: TrackerOptions) -> Self {
        Br { opts }
    }
}
