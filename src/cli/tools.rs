//! `braids tools …`: the exploration tools, printed for a person or an agent.

use anyhow::Result;
use serde::Serialize;

use super::{Output, ToolsArgs, ToolsCommand, EXIT_FINDINGS, EXIT_OK, EXIT_USAGE};
use crate::claw::tools;

#[derive(Serialize)]
#[serde(transparent)]
struct Slices(Vec<tools::Slice>);

impl Output for Slices {
    fn text(&self) -> String {
        self.0
            .iter()
            .map(|s| format!("{}  {}\n", s.name, s.dir.display()))
            .collect()
    }
}

#[derive(Serialize)]
struct Contract {
    file: String,
    contract: Option<String>,
}

impl Output for Contract {
    fn text(&self) -> String {
        match &self.contract {
            Some(c) => c.clone(),
            None => format!("{} has no header docblock", self.file),
        }
    }
}

impl Output for tools::SliceDeps {
    fn text(&self) -> String {
        let list = |v: &[String]| {
            if v.is_empty() {
                "nothing".to_string()
            } else {
                v.join(", ")
            }
        };
        format!(
            "imports from: {}\nimported by: {}\n",
            list(&self.imports_from),
            list(&self.imported_by)
        )
    }
}

#[derive(Serialize)]
#[serde(transparent)]
struct Hits(Vec<tools::Hit>);

impl Output for Hits {
    fn text(&self) -> String {
        self.0
            .iter()
            .map(|h| format!("{}:{}: {}\n", h.file, h.line, h.text))
            .collect()
    }
}

impl Output for crate::worker::ask::Answer {
    fn text(&self) -> String {
        let mut used = vec![self.executor.to_string()];
        used.extend(self.model.clone());
        if let (Some(i), Some(o)) = (self.usage.tokens_in, self.usage.tokens_out) {
            used.push(format!("{i} tokens in, {o} out"));
        }
        if let Some(c) = self.usage.cost_usd {
            used.push(format!("${:.4}", crate::cost::exact(c)));
        }
        format!("{}\n\n({})\n", self.answer, used.join(", "))
    }
}

pub fn run(paths: &crate::system::paths::Paths, a: ToolsArgs) -> Result<i32> {
    let root = match a.dir {
        Some(d) => d,
        None => std::env::current_dir()?,
    };
    if !root.is_dir() {
        anyhow::bail!(
            "{} is not a directory; --dir names the source tree to look in",
            root.display()
        );
    }
    match a.tool {
        ToolsCommand::ListSlices => Slices(tools::list_slices(&root)).print(a.json),
        ToolsCommand::ShowContract { file } => {
            let contract = tools::show_contract(&root, &file)?;
            let found = contract.is_some();
            Contract {
                file: file.display().to_string(),
                contract,
            }
            .print(a.json);
            if !found {
                return Ok(EXIT_FINDINGS);
            }
        }
        ToolsCommand::SliceDeps { slice } => tools::slice_deps(&root, &slice)?.print(a.json),
        ToolsCommand::Ask { question, files } => {
            let config = crate::config::Config::load(&paths.config())?.config;
            // An agent runs with its workspace named; it may ask about that tree only.
            let workspace = std::env::var_os("BRAIDS_WORKSPACE").map(std::path::PathBuf::from);
            let root = match config.ask.executor {
                Some(_) => crate::worker::ask::scope(paths, &config, &root, workspace.as_deref())?,
                None => root,
            };
            let Some(answer) = crate::worker::ask::ask(&config, &root, &question, &files)? else {
                eprintln!(
                    "braids: tools ask is off: name a cheap agent in config.toml, e.g. [ask] executor = \"claude-code\" and model = \"claude-haiku-4-5\""
                );
                return Ok(EXIT_USAGE);
            };
            answer.print(a.json);
        }
        ToolsCommand::FindSymbol { name } => {
            let hits = tools::find_symbol(&root, &name)?;
            let found = !hits.is_empty();
            Hits(hits).print(a.json);
            if !found {
                return Ok(EXIT_FINDINGS);
            }
        }
    }
    Ok(EXIT_OK)
}
