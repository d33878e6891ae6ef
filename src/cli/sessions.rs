//! `braids sessions`. (In progress.)
use crate::paths::Paths;
pub fn list(_paths: &Paths, _json: bool) -> anyhow::Result<i32> {
    anyhow::bail!("not implemented yet")
}
pub fn kill(_paths: &Paths, _label: &str) -> anyhow::Result<i32> {
    anyhow::bail!("not implemented yet")
}
