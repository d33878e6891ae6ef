//! `braids migrate --to md|edn`.

use anyhow::Result;

use super::{MigrateArgs, Output, EXIT_OK};
use crate::app::migrate::{Form, Migrated};
use crate::system::paths::Paths;

impl Output for Migrated {
    fn text(&self) -> String {
        if self.files.is_empty() {
            let form = if self.to == Form::Md {
                "markdown"
            } else {
                "EDN"
            };
            return format!("nothing to convert: every file is in the {form} form already\n");
        }
        let mut o = String::new();
        for f in &self.files {
            if self.dry_run {
                o.push_str(&format!(
                    "would write {} (in place of {}):\n{}\n",
                    f.to.display(),
                    f.from.display(),
                    f.text
                ));
            } else {
                o.push_str(&format!(
                    "wrote {} in place of {}\n",
                    f.to.display(),
                    f.from.display()
                ));
            }
        }
        if !self.dry_run {
            o.push_str(
                "commit the projects' changed files with git; `braids check` reads the new ones\n",
            );
        }
        o
    }
}

pub fn run(paths: &Paths, a: MigrateArgs) -> Result<i32> {
    let to = match a.to {
        super::FormArg::Md => Form::Md,
        super::FormArg::Edn => Form::Edn,
    };
    crate::app::migrate::migrate(paths, to, a.dry_run)?.print(a.json);
    Ok(EXIT_OK)
}
