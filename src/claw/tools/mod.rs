//! The exploration tools, each a function of a source tree returning a value to print.
//!
//! A **slice** is a directory holding a `slice.md` (the seed's vertical slices, such as
//! `src/slices/windows/`), named by its directory. Walks honour `.gitignore`, skip hidden
//! files and run on every core; nothing read reaches a shell.

pub mod ask;
mod contract;
mod deps;
mod slices;
mod symbol;
mod walk;

pub use contract::{header_docblock, show_contract};
pub use deps::{imports_of, slice_deps, SliceDeps};
pub use slices::{list_slices, Slice};
pub use symbol::{find_symbol, Hit};
pub use walk::all as walk_files;
