//! `braids tick`. (In progress.)
use crate::paths::Paths;
pub fn run(_paths: &Paths, _args: super::TickArgs) -> anyhow::Result<i32> {
    anyhow::bail!("not implemented yet")
}
pub fn status(_paths: &Paths, _json: bool) -> anyhow::Result<i32> {
    anyhow::bail!("not implemented yet")
}
