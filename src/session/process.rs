//! Local-process session backend. (Implemented by the sessions work.)
