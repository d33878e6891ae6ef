//! `braids init`: prints what [`crate::app::init::ensure`] created and kept.

use anyhow::Result;

use crate::app::init::{ensure, InitReport};
use crate::system::paths::Paths;

use super::{Output, EXIT_OK};

impl Output for InitReport {
    fn text(&self) -> String {
        let mut o = String::new();
        for p in &self.created {
            o.push_str(&format!("created {}\n", p.display()));
        }
        for p in &self.kept {
            o.push_str(&format!("exists  {}\n", p.display()));
        }
        o
    }
}

pub fn run(paths: &Paths, json: bool) -> Result<i32> {
    ensure(paths)?.print(json);
    Ok(EXIT_OK)
}
