//! The context packet (`.claw/context/current.md`): what the coder needs for one task, built by
//! code from the tree, never by a model. The seed spends a cheap model on this; braids spends
//! nothing. [`gather`] reads (slices, contracts, specs, with the exploration tools); [`render`]
//! is pure and lays it out in the seed's sections.

use std::path::Path;

use super::tasks::{Plan, Task};
use super::tools;

/// Everything a packet shows, gathered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet {
    pub task: String,
    pub phase: String,
    pub done: usize,
    pub remaining: usize,
    pub slices: Vec<SliceContext>,
    /// (file, its header docblock), for the files the task touches.
    pub contracts: Vec<(String, String)>,
    /// (spec file, excerpt).
    pub specs: Vec<(String, String)>,
    /// A person's note, given with `braids resume --note`.
    pub note: Option<String>,
    /// The last validation's failure, on a retry.
    pub previous_failure: Option<String>,
    /// The validation commands, shown so the coder can run them first.
    pub validation: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SliceContext {
    pub name: String,
    pub primary: bool,
    pub doc: String,
    pub files: Vec<String>,
}

/// How many files of a slice, specs and spec lines a packet lists at most.
const MAX_FILES: usize = 40;
const MAX_SPECS: usize = 3;
const SPEC_LINES: usize = 40;

/// Reads what the packet for `task` needs from the project at `root`.
pub fn gather(
    root: &Path,
    plan: &Plan,
    task: &Task,
    note: Option<String>,
    previous_failure: Option<String>,
    validation: &[Vec<String>],
) -> Packet {
    let (done, remaining) = plan.progress(task.phase);
    let all = tools::list_slices(root);
    let wanted =
        |name: &str| task.slice.as_deref() == Some(name) || task.touches.iter().any(|t| t == name);
    let slices = all
        .iter()
        .filter(|s| wanted(&s.name))
        .map(|s| {
            let dir = root.join(&s.dir);
            let doc = std::fs::read_to_string(dir.join("slice.md")).unwrap_or_default();
            let mut files: Vec<String> = tools::walk_files(&dir)
                .into_iter()
                .map(|p| p.strip_prefix(&dir).unwrap_or(&p).display().to_string())
                .filter(|f| f != "slice.md")
                .collect();
            files.truncate(MAX_FILES);
            SliceContext {
                name: s.name.clone(),
                primary: task.slice.as_deref() == Some(s.name.as_str()),
                doc: doc.trim().to_string(),
                files,
            }
        })
        .collect();
    let contracts = if task.touches.is_empty() {
        Vec::new()
    } else {
        tools::walk_files(root)
            .into_iter()
            .filter_map(|p| {
                let stem = p.file_stem()?.to_str()?;
                let rel = p.strip_prefix(root).ok()?.display().to_string();
                let named = task.touches.iter().any(|t| t == stem || *t == rel);
                if !named {
                    return None;
                }
                let text = std::fs::read_to_string(&p).ok()?;
                let ext = p.extension().and_then(|e| e.to_str()).unwrap_or("");
                Some((rel, tools::header_docblock(&text, ext)?))
            })
            .collect()
    };
    Packet {
        task: task.title.clone(),
        phase: plan.phases.get(task.phase).cloned().unwrap_or_default(),
        done,
        remaining,
        slices,
        contracts,
        specs: specs(root, task),
        note,
        previous_failure,
        validation: validation.iter().map(|argv| shown(argv)).collect(),
    }
}

/// An argv as a shell would read it back (quoted where needed), for people and coders.
pub fn shown(argv: &[String]) -> String {
    shlex::try_join(argv.iter().map(String::as_str)).unwrap_or_else(|_| argv.join(" "))
}

/// The specs in `.claw/specs/` that name the task's slice or a file it touches, or whose name
/// does; the first lines of each.
fn specs(root: &Path, task: &Task) -> Vec<(String, String)> {
    let dir = root.join(".claw/specs");
    let Ok(rd) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut names: Vec<_> = rd
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    names.sort();
    let keys: Vec<String> = task
        .slice
        .iter()
        .chain(&task.touches)
        .map(|k| k.to_lowercase())
        .collect();
    names
        .into_iter()
        .filter_map(|p| {
            let text = std::fs::read_to_string(&p).ok()?;
            let name = p.file_name()?.to_string_lossy().into_owned();
            let hay = format!("{}\n{}", name.to_lowercase(), text.to_lowercase());
            keys.iter().any(|k| hay.contains(k.as_str())).then(|| {
                let excerpt: Vec<&str> = text.lines().take(SPEC_LINES).collect();
                (name, excerpt.join("\n").trim().to_string())
            })
        })
        .take(MAX_SPECS)
        .collect()
}

/// The packet in the seed's layout.
pub fn render(p: &Packet) -> String {
    let mut o = String::new();
    o.push_str(&format!("## Task\n> {}\n\n", p.task));
    o.push_str("## Phase Context\n");
    let phase = if p.phase.is_empty() {
        "Tasks"
    } else {
        &p.phase
    };
    o.push_str(&format!(
        "{phase} — {} done, {} remaining\n\n",
        p.done, p.remaining
    ));
    if let Some(n) = &p.note {
        o.push_str(&format!("## Supervisor Note\n{}\n\n", n.trim()));
    }
    if let Some(f) = &p.previous_failure {
        o.push_str("## Previous Attempt\nValidation failed:\n\n```\n");
        o.push_str(f.trim_end());
        o.push_str("\n```\n\n");
    }
    o.push_str("## Relevant Slices\n\n");
    if p.slices.is_empty() {
        o.push_str("(the task names no slice)\n\n");
    }
    for s in &p.slices {
        let role = if s.primary { "primary" } else { "touched" };
        o.push_str(&format!("### {} ({role})\n", s.name));
        if !s.doc.is_empty() {
            o.push_str(&format!("{}\n", s.doc));
        }
        o.push_str("\nFiles:\n");
        for f in &s.files {
            o.push_str(&format!("- {f}\n"));
        }
        o.push('\n');
    }
    if !p.contracts.is_empty() {
        o.push_str("### Key Contracts\n\n");
        for (file, doc) in &p.contracts {
            o.push_str(&format!("#### {file}\n{doc}\n\n"));
        }
    }
    if !p.specs.is_empty() {
        o.push_str("## Related Specs\n\n");
        for (name, text) in &p.specs {
            o.push_str(&format!("### {name}\n{text}\n\n"));
        }
    }
    o.push_str("## Instructions\n");
    o.push_str("1. Implement ONLY the task above.\n");
    o.push_str("2. Follow the existing patterns of the slice.\n");
    if p.validation.is_empty() {
        o.push_str("3. Run the tests before you finish.\n");
    } else {
        o.push_str(&format!(
            "3. Run the checks before you finish; braids runs them after you: {}.\n",
            p.validation
                .iter()
                .map(|v| format!("`{v}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    o.push_str(
        "4. Do not check off the task, commit or push: braids does that once the checks pass.\n",
    );
    o.push_str(concat!(
        "5. Emit a CLAW_STATUS block when done, as the last thing you print (or write it to the ",
        "file named by $BRAIDS_RESULT_FILE). `status` is done, failed, or needs_human with your ",
        "`question`:\n\n",
        "CLAW_STATUS\nstatus: done\nsummary: <what you did, one sentence>\nfiles_changed:\n",
        "  - <path>\ntests_passed: true\nEND_CLAW_STATUS\n"
    ));
    o
}
