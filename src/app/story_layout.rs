//! `braids story convert <slug> --to single|per-story`: moves a protocol project's story state
//! between braids' per-story files and the seed's one `.ai/STATE.json`, losing nothing, and
//! records the layout as PROJECT.md `ProtocolState:`.

use anyhow::{bail, Result};
use serde::Serialize;

use crate::config::installation::Installation;
use crate::protocol::single::{self, Layout};
use crate::protocol::story_state::{self as story, Loaded};

use super::beads;

#[derive(Debug, Serialize)]
pub struct Converted {
    pub project: String,
    pub from: &'static str,
    pub to: &'static str,
    /// The story that moved into (or out of) `.ai/STATE.json`.
    pub story: Option<String>,
    pub said: String,
}

pub fn convert(inst: &Installation, project: &str, to: &str) -> Result<Converted> {
    let Some(to) = Layout::parse(to) else {
        bail!("`{to}` is not a layout; use `single` (the seed's .ai/STATE.json) or `per-story`");
    };
    let _held = beads::hold_ticks(&inst.paths)?;
    let registry = crate::format::registry::read_registry(&inst.paths).value;
    let Some(entry) = registry.get(project) else {
        bail!("no project named {project}; `braids status` lists them");
    };
    let root = entry.path.clone();
    let pm = crate::format::layout::project_file(&root);
    if crate::format::layout::is_edn(&pm) {
        bail!(
            "{project} keeps its settings in {}; set `:protocol-state :single` (or remove it) there by hand and move the state with the story files",
            pm.display()
        );
    }
    let text = crate::system::atomic::read(&pm)
        .map(|b| crate::format::decode(&b).into_owned())
        .map_err(|e| anyhow::anyhow!("{}: cannot be read ({e})", pm.display()))?;
    let config = crate::format::project::parse_project(&text, &pm).value;
    if crate::protocol::Pipeline::of(&config) != crate::protocol::Pipeline::Protocol {
        bail!(
            "{project} does not run the protocol pipeline; add `Pipeline: protocol` to {}",
            pm.display()
        );
    }
    let from = Layout::of(&config);
    let out = |story: Option<String>, said: String| Converted {
        project: project.to_string(),
        from: from.as_str(),
        to: to.as_str(),
        story,
        said,
    };
    if from == to {
        return Ok(out(None, format!("already {}", to.as_str())));
    }
    let sessions = inst.backend.list()?;
    if let Some(s) = sessions
        .iter()
        .find(|s| s.running && s.label.slug() == project)
    {
        bail!(
            "{} is running a step of {project}; convert when no worker runs",
            s.label
        );
    }
    let mut stories = Vec::new();
    for (id, loaded) in story::load_all(&root) {
        match loaded {
            Loaded::Valid(s) => stories.push((id, s)),
            Loaded::Invalid(e) => bail!("{e}"),
            Loaded::Missing => {}
        }
    }
    let fields = with_field(&text, &config, to.as_str());
    let moved = match to {
        Layout::Single => {
            let active: Vec<&str> = stories
                .iter()
                .filter(|(_, s)| !s.is_done())
                .map(|(i, _)| i.as_str())
                .collect();
            if active.len() > 1 {
                bail!(
                    "stories {} are under way and .ai/STATE.json holds one; finish all but one first, or keep `per-story`",
                    active.join(", ")
                );
            }
            // Done stories stay in .ai/states/, where converting back finds them.
            let chosen = stories.iter().find(|(_, s)| !s.is_done());
            if let Some((_, s)) = chosen {
                crate::system::beneath::write_within(
                    &root,
                    &root.join(single::FILE),
                    single::render(s).as_bytes(),
                )?;
                crate::system::beneath::write_within(
                    &root,
                    &root.join(single::EXTRA),
                    single::render_extra(s).as_bytes(),
                )?;
            }
            crate::system::atomic::write(&pm, fields.as_bytes())?;
            if let Some((id, _)) = chosen {
                let own = root.join(story::STATES_DIR).join(format!("{id}.json"));
                std::fs::remove_file(own)?;
            }
            chosen.map(|(id, _)| id.to_string())
        }
        Layout::PerStory => {
            let chosen = stories.first();
            if let Some((id, s)) = chosen {
                let own = root.join(story::STATES_DIR).join(format!("{id}.json"));
                crate::system::beneath::write_within(&root, &own, story::render(s).as_bytes())?;
            }
            crate::system::atomic::write(&pm, fields.as_bytes())?;
            for f in [single::FILE, single::EXTRA] {
                match std::fs::remove_file(root.join(f)) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
                    _ => {}
                }
            }
            chosen.map(|(id, _)| id.to_string())
        }
    };
    let said = match &moved {
        Some(id) => format!(
            "{id}'s state moved; PROJECT.md says `ProtocolState: {}`",
            to.as_str()
        ),
        None => format!(
            "no story under way; PROJECT.md says `ProtocolState: {}`",
            to.as_str()
        ),
    };
    Ok(out(moved, said))
}

/// PROJECT.md's text with `ProtocolState:` set to `value`: its line rewritten, or a new line
/// written like the `Pipeline:` line, after it. Pure.
#[must_use]
fn with_field(text: &str, config: &crate::format::project::ProjectConfig, value: &str) -> String {
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    match (config.field("protocolstate"), config.field("pipeline")) {
        (Some(f), _) if f.line >= 1 && f.line <= lines.len() => {
            let l = &lines[f.line - 1];
            let at = l.rfind(f.value.as_str()).unwrap_or(l.len());
            lines[f.line - 1] = format!(
                "{}{value}{}",
                &l[..at],
                &l[(at + f.value.len()).min(l.len())..]
            );
        }
        (_, Some(p)) if p.line >= 1 && p.line <= lines.len() => {
            let l = lines[p.line - 1].replacen("Pipeline", "ProtocolState", 1);
            let at = l.rfind(p.value.as_str()).unwrap_or(l.len());
            let new = format!(
                "{}{value}{}",
                &l[..at],
                &l[(at + p.value.len()).min(l.len())..]
            );
            lines.insert(p.line, new);
        }
        _ => lines.push(format!("- **ProtocolState:** {value}")),
    }
    lines.join("\n") + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_field_is_rewritten_or_added_beside_pipeline() {
        let file = std::path::Path::new("PROJECT.md");
        let set = |text: &str, v: &str| {
            let c = crate::format::project::parse_project(text, file).value;
            with_field(text, &c, v)
        };
        let md = "# app\n\n- **Status:** active\n- **Pipeline:** protocol\n\n## Goal\n\nx\n";
        let single = set(md, "single");
        assert_eq!(single, "# app\n\n- **Status:** active\n- **Pipeline:** protocol\n- **ProtocolState:** single\n\n## Goal\n\nx\n");
        assert_eq!(
            set(&single, "per-story"),
            single.replace("single", "per-story")
        );
    }
}
