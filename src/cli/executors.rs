//! `braids executors`.

use anyhow::Result;
use serde::Serialize;

use crate::app::agents::Recipe;
use crate::system::paths::Paths;

use super::{ExecutorsArgs, Output, EXIT_OK};

#[derive(Serialize)]
#[serde(transparent)]
struct Recipes(Vec<Recipe>);

impl Output for Recipes {
    fn text(&self) -> String {
        crate::app::agents::markdown(&self.0)
    }
}

pub fn run(paths: &Paths, a: ExecutorsArgs) -> Result<i32> {
    // The recipes read this installation's settings; without a readable config.toml, the defaults.
    let config = crate::config::Config::load(&paths.config())
        .map(|l| l.config)
        .unwrap_or_default();
    let config = if a.defaults {
        crate::config::Config::default()
    } else {
        config
    };
    Recipes(crate::app::agents::recipes(&config)).print(a.json);
    Ok(EXIT_OK)
}
