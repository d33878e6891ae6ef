//! Phase 1 (3.1): what the worker reads before it touches the bead — the iteration, the context
//! files in their fixed order (missing ones skipped, 3.9), the project's configuration — and the
//! prompt built from them.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, Result};

use crate::format::{self, deliverable, iteration::Iteration, project::ProjectConfig};
use crate::model::{Autonomy, Bead, SpawnMessage};
use crate::system::paths::Paths;

use super::{report, Run};

/// Everything loaded before work (3.1).
pub(super) struct Loaded {
    pub(super) slug: String,
    pub(super) project: ProjectConfig,
    pub(super) iteration: Iteration,
    pub(super) context: Vec<(PathBuf, String)>,
}

impl Loaded {
    /// Where the bead's deliverable belongs: its iteration's directory (1.4).
    pub(super) fn deliverable_for(&self, bead: &Bead) -> PathBuf {
        self.iteration
            .dir
            .join(deliverable::file_name(&bead.id, &bead.title))
    }
}

/// The slug of the project at `root`, from the registry; the directory name otherwise.
pub fn slug_for(paths: &Paths, root: &Path) -> String {
    let reg = format::registry::read_registry(paths).value;
    reg.entries
        .iter()
        .find(|e| crate::system::paths::normalize(&e.path) == crate::system::paths::normalize(root))
        .map(|e| e.slug.clone())
        .unwrap_or_else(|| {
            root.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        })
}

/// Reads the context in the order of 3.1, skipping what is missing (3.9).
pub(super) fn load(paths: &Paths, msg: &SpawnMessage, run: &mut Run<'_, '_>) -> Result<Loaded> {
    let root = &msg.project;
    // PROJECT.md, or the config.edn that stands for it.
    let project_md = format::layout::project_file(root);
    let iterations = format::iteration::read_iterations(root).value;
    // By the directory's name; `Iteration: 1` from an older braids still finds `001`.
    let iteration = msg
        .iteration
        .find(&iterations, |i| i.name)
        .cloned()
        .ok_or_else(|| {
            anyhow!(
                "iteration {} of {} does not exist (no .braids/iterations/{}/ITERATION.md)",
                msg.iteration,
                root.display(),
                msg.iteration
            )
        })?;
    let order = [
        project_md.clone(),
        paths.workspace_agents(),
        root.join("AGENTS.md"),
        iteration.file(),
    ];
    let mut context = Vec::new();
    for p in order {
        match std::fs::read(&p) {
            Ok(b) => {
                run.step("context", format!("read {}", p.display()));
                context.push((p, format::decode(&b).into_owned()));
            }
            Err(_) => run.step("context", format!("skipped {} (missing)", p.display())),
        }
    }
    let project = context
        .iter()
        .find(|(p, _)| *p == project_md)
        .map(|(p, t)| format::layout::parse_project(t, p).value)
        .unwrap_or_default();
    Ok(Loaded {
        slug: slug_for(paths, root),
        project,
        iteration,
        context,
    })
}

/// The Guardrails of PROJECT.md and of the iteration, as the prompt lists them.
fn guardrails(l: &Loaded) -> String {
    let mut parts = Vec::new();
    if let Some(g) = l
        .project
        .guardrails
        .as_deref()
        .filter(|g| !g.trim().is_empty())
    {
        parts.push(format!("From PROJECT.md:\n\n{}", g.trim()));
    }
    if let Some(g) = l
        .iteration
        .guardrails
        .as_deref()
        .filter(|g| !g.trim().is_empty())
    {
        parts.push(format!("From this iteration:\n\n{}", g.trim()));
    }
    if parts.is_empty() {
        "None are written for this project or iteration.".into()
    } else {
        parts.join("\n\n")
    }
}

fn autonomy_rules(a: Autonomy) -> &'static str {
    match a {
        Autonomy::Full => "You may change code, tests and docs as the work requires.",
        Autonomy::ResearchOnly => "Research only: gather information and write it up. Change no code; braids lands nothing but the deliverable.",
        Autonomy::AskFirst => "A person approved this plan. Carry it out as described.",
    }
}

/// The rules an agent works under, the same for a bead and for every step of a protocol
/// story: the autonomy, the Guardrails and how to stop on a conflict, and the context files in
/// the order of 3.1.
fn rules(l: &Loaded) -> String {
    let context: String = l
        .context
        .iter()
        .map(|(p, t)| format!("## {}\n\n{}\n\n", p.display(), t.trim_end()))
        .collect();
    crate::system::templates::render(
        crate::system::templates::RULES,
        &[
            ("autonomy", l.project.autonomy.as_str()),
            ("guardrails", &guardrails(l)),
            ("autonomy_rules", autonomy_rules(l.project.autonomy)),
            ("context", &context),
        ],
    )
}

/// A protocol story's step prompt under the rules a bead's prompt has: the rules first, then
/// the step.
pub(super) fn story_prompt(l: &Loaded, step_prompt: &str) -> String {
    format!("{}# Your step\n\n{step_prompt}", rules(l))
}

/// The agent's prompt: the bead, the autonomy rules, the context read by [`load`], and where
/// the deliverable and the status report go.
pub(super) fn prompt(
    l: &Loaded,
    bead: &Bead,
    work_in: &Path,
    deliverable: &Path,
    earlier: &[crate::retry::Failure],
    answers: &[crate::answers::Answer],
    review: &str,
) -> String {
    let it = l.iteration.name.to_string();
    let path = work_in.to_string_lossy();
    let dl = deliverable.to_string_lossy();
    crate::system::templates::render(
        crate::system::templates::PROMPT,
        &[
            ("bead", bead.id.as_str()),
            ("project_name", l.project.name.as_deref().unwrap_or(&l.slug)),
            ("iteration", &it),
            ("bead_title", &bead.title),
            (
                "bead_description",
                if bead.description.trim().is_empty() {
                    "(no description)"
                } else {
                    &bead.description
                },
            ),
            ("rules", &rules(l)),
            ("project_path", &path),
            ("deliverable", &dl),
            ("result_file", &report::own_file(&bead.id).to_string_lossy()),
            ("earlier", &earlier_attempts(earlier)),
            ("answers", &crate::answers::prompt_block(answers)),
            ("review", review),
        ],
    )
}

/// What a retry's agent is told about the attempts before it, oldest first; nothing on a
/// first attempt.
fn earlier_attempts(failures: &[crate::retry::Failure]) -> String {
    if failures.is_empty() {
        return String::new();
    }
    let lines: String = failures
        .iter()
        .map(|f| format!("- {}: {}\n", f.at.format("%Y-%m-%d %H:%M UTC"), f.why))
        .collect();
    format!(
        "\n# Earlier attempts of this bead failed\n\n{lines}\nFind out why before you start \
         again; do not repeat what failed.\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{BeadId, BeadStatus};

    #[test]
    fn c3_10_the_prompt_lists_the_guardrails_and_how_to_stop_on_a_conflict() {
        let project = format::project::parse_project(
            "# App\n\n- **Status:** active\n- **Priority:** normal\n- **Autonomy:** full\n\n## Guardrails\n\n- Never touch the billing schema.\n",
            Path::new("/p/.braids/PROJECT.md"),
        )
        .value;
        let iteration = format::iteration::parse_iteration(
            "# Iteration 1\n\n- **Status:** active\n\n## Stories\n\n- a-1: x\n\n## Guardrails\n\n- No new dependencies.\n",
            Path::new("/p/.braids/iterations/001/ITERATION.md"),
            1,
            PathBuf::from("/p/.braids/iterations/001"),
        )
        .value;
        let l = Loaded {
            slug: "app".into(),
            project,
            iteration,
            context: vec![],
        };
        let bead = Bead::new(BeadId::new("a-1").unwrap(), "x", BeadStatus::Open);
        let p = prompt(
            &l,
            &bead,
            Path::new("/w"),
            Path::new("/w/d.md"),
            &[],
            &[],
            "",
        );
        assert!(p.contains("Never touch the billing schema."), "{p}");
        assert!(!p.contains("Earlier attempts"), "a first attempt: {p}");
        assert!(p.contains("No new dependencies."), "{p}");
        assert!(p.contains("reason: guardrail_conflict"), "{p}");
        // nothing written: the prompt says so rather than leaving an empty section
        let mut bare = l;
        bare.project.guardrails = None;
        bare.iteration.guardrails = None;
        let p = prompt(
            &bare,
            &bead,
            Path::new("/w"),
            Path::new("/w/d.md"),
            &[],
            &[],
            "",
        );
        assert!(p.contains("None are written"), "{p}");
        // a retry is told what went wrong before
        let at = chrono::DateTime::UNIX_EPOCH;
        let failed = [crate::retry::Failure::new(
            at,
            "exit 1, status failing: 3 tests fail",
        )];
        let p = prompt(
            &bare,
            &bead,
            Path::new("/w"),
            Path::new("/w/d.md"),
            &failed,
            &[],
            "",
        );
        assert!(
            p.contains("# Earlier attempts of this bead failed")
                && p.contains("- 1970-01-01 00:00 UTC: exit 1, status failing: 3 tests fail"),
            "{p}"
        );
    }

    #[test]
    fn c10_13_a_story_step_prompt_has_the_beads_rules() {
        let md = "# App\n\n- **Status:** active\n- **Priority:** normal\n- **Autonomy:** research-only\n\n## Guardrails\n\n- Never touch the billing schema.\n";
        let project = format::project::parse_project(md, Path::new("/p/.braids/PROJECT.md")).value;
        let iteration = format::iteration::parse_iteration(
            "# Iteration 1\n\n- **Status:** active\n\n## Stories\n\n- a-1: x\n",
            Path::new("/p/.braids/iterations/001/ITERATION.md"),
            1,
            PathBuf::from("/p/.braids/iterations/001"),
        )
        .value;
        let l = Loaded {
            slug: "app".into(),
            project,
            iteration,
            context: vec![
                (PathBuf::from("/p/.braids/PROJECT.md"), md.into()),
                (PathBuf::from("/p/AGENTS.md"), "Use tabs.".into()),
            ],
        };
        let p = story_prompt(&l, "You are executing step BDD for a-1.");
        let at = |needle: &str| p.find(needle).unwrap_or_else(|| panic!("{needle} in {p}"));
        // the context in the order of 3.1, before the step
        assert!(at("## /p/.braids/PROJECT.md") < at("## /p/AGENTS.md"));
        assert!(at("Use tabs.") < at("# Your step"));
        assert!(at("# Your step") < at("You are executing step BDD"));
        // the guardrails and how to stop, the autonomy: the bead prompt's own text
        assert!(at("# Guardrails (never break one)") < at("# Your step"));
        assert!(p.contains("From PROJECT.md:\n\n- Never touch the billing schema."));
        assert!(p.contains("reason: guardrail_conflict"));
        assert!(p.contains("# Autonomy: research-only") && p.contains("Change no code"));
        let bead = Bead::new(BeadId::new("a-1").unwrap(), "x", BeadStatus::Open);
        let b = prompt(
            &l,
            &bead,
            Path::new("/w"),
            Path::new("/w/d.md"),
            &[],
            &[],
            "",
        );
        assert!(b.contains(&rules(&l)), "one text for both pipelines");
    }
}
