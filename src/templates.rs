//! The files braids writes for people, embedded in the binary so a fresh install needs nothing
//! beside the executable.
