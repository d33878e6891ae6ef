//! Deliverable files (CONTRACTS 1.4). (Implemented by the formats work.)
