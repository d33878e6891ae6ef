//! `braids iteration`. (In progress.)
use crate::paths::Paths;
pub fn run(_paths: &Paths, _cmd: super::IterationCommand) -> anyhow::Result<i32> {
    anyhow::bail!("not implemented yet")
}
