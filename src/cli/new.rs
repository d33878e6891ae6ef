//! `braids new`. (In progress.)
use crate::paths::Paths;
pub fn run(_paths: &Paths, _args: super::NewArgs) -> anyhow::Result<i32> {
    anyhow::bail!("not implemented yet")
}
