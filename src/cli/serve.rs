//! `braids serve`.

use anyhow::Result;

use crate::system::paths::Paths;

use super::{ServeArgs, EXIT_OK};

pub fn run(paths: &Paths, a: ServeArgs) -> Result<i32> {
    crate::serve::run(
        paths,
        crate::serve::Options {
            listen: a.listen,
            token_file: a.token_file,
        },
    )?;
    Ok(EXIT_OK)
}
