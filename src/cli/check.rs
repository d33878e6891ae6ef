//! `braids check`. (In progress.)
use crate::paths::Paths;
pub fn run(_paths: &Paths, _args: super::CheckArgs) -> anyhow::Result<i32> {
    anyhow::bail!("not implemented yet")
}
