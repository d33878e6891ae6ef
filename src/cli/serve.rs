//! `braids serve`.

use anyhow::Result;

use crate::system::paths::Paths;

use super::{ServeArgs, EXIT_OK};

pub fn run(paths: &Paths, a: ServeArgs) -> Result<i32> {
    if a.login {
        let token_file = a
            .token_file
            .unwrap_or_else(|| crate::serve::default_token_file(paths));
        println!("{}", crate::serve::login_link(a.listen, &token_file)?);
        return Ok(EXIT_OK);
    }
    crate::serve::run(
        paths,
        crate::serve::Options {
            listen: a.listen,
            token_file: a.token_file,
        },
    )?;
    Ok(EXIT_OK)
}
