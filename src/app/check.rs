//! `braids check`: every file-format and cross-cutting contract that can be verified without
//! running anything — 1.1–1.6, at most one active iteration (1.3), completed iterations
//! unchanged since the commit that completed them (4.5), deliverables named and sectioned (1.4),
//! no project inside the agent workspace (4.1). Each finding names a file, a line, a section
//! and a fix. A broken project yields findings; it never stops the check of the others.
//!
//! One check asks a program: every story of an iteration not yet complete must be a bead the
//! project's tracker knows, or the iteration could never complete (1.3, 3.7). The tracker is
//! only read (`list`; the native tracker writes no ids). A tracker that cannot be asked is a
//! warning, since the files themselves may be fine.

use std::collections::BTreeMap;
use std::path::Path;

use crate::config::Config;

use super::check_config::{capitalised, line_named, unreadable};
pub use super::check_config::{check_config, sandbox_summary, SandboxSummary};
use crate::format::iteration::Iteration;
use crate::format::{self, deliverable};
use crate::git::{self, Frozen};
use crate::model::{BeadId, IterationStatus};
use crate::system::diag::{Diagnostic, Severity};
use crate::system::paths::Paths;
use crate::tick::orchestrator_state::OrchestratorState;

/// Why there is nothing to check: no installation, or a config.toml that cannot be read
/// (whatever else `check` would say would come from defaults the ticks do not use).
#[derive(Debug)]
pub enum Unusable {
    NoInstallation(String),
    Config(Diagnostic),
}

/// The findings for a whole installation. `Err` only when there is nothing to check.
pub fn check_installation(paths: &Paths) -> Result<Vec<Diagnostic>, Unusable> {
    let reg_path = format::layout::registry_file(paths);
    if !reg_path.exists() {
        return Err(Unusable::NoInstallation(format!(
            "{} does not exist; run `braids init` to create the installation",
            reg_path.display()
        )));
    }
    let config = match crate::config::Config::load(&paths.config()) {
        Ok(l) => l.config,
        Err(e) => return Err(Unusable::Config(unreadable(&paths.config(), &e))),
    };
    let registry = format::registry::read_registry(paths);
    let mut out = registry.diagnostics;
    out.extend(format::registry::check_paths(
        &registry.value,
        &reg_path,
        paths,
    ));
    let roots: Vec<_> = registry
        .value
        .entries
        .iter()
        .map(|e| e.path.clone())
        .collect();
    out.extend(format::layout::shadowed(paths, &roots));
    let mut config_problems = std::collections::BTreeSet::new();
    let mut presets: std::collections::BTreeSet<crate::agent::Preset> =
        config.worker.executor.preset().into_iter().collect();
    for entry in &registry.value.entries {
        out.extend(check_project(&entry.slug, &entry.path, &config, paths));
        let project_md = format::layout::project_file(&entry.path);
        let project = format::project::read_project(&entry.path).value;
        out.extend(super::check_review::check(
            &entry.path,
            &project_md,
            &project,
            &config,
            &paths.home,
        ));
        out.extend(super::check_issues::check(
            &entry.path,
            &project_md,
            &project,
            &config,
            paths,
        ));
        config_problems.extend(preflight_of_config(&entry.path, &config));
        let project = format::project::read_project(&entry.path).value;
        presets.extend(
            config
                .agent_for(&project, &format::layout::project_file(&entry.path))
                .ok()
                .and_then(|c| c.preset()),
        );
    }
    out.extend(super::agents::check(&paths.config(), &config, &presets));
    // A problem of config.toml's is the same for every project: said once, where it is fixed.
    let text = crate::system::atomic::read(&paths.config())
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    for why in config_problems {
        out.push(Diagnostic::error(
            &paths.config(),
            line_named(&text, &why),
            "preflight",
            why,
            "until it is fixed, ticks claim nothing for the projects that use it",
        ));
    }
    out.extend(check_config(&paths.config()));
    if let Err(w) = OrchestratorState::load(&paths.state()) {
        out.push(Diagnostic::error(
            &paths.state(),
            None,
            "1.6",
            w,
            "delete the file; the next tick rewrites it",
        ));
    }
    let status = paths.status();
    if status.exists() && !status.is_file() {
        out.push(Diagnostic::error(
            &status,
            None,
            "1.5",
            "STATUS.md is not a regular file",
            "remove it; the next full tick regenerates it",
        ));
    }
    out.sort_by(|a, b| (&a.path, a.line).cmp(&(&b.path, b.line)));
    Ok(out)
}

/// The preflight problem of the project at `root` when it comes from config.toml.
fn preflight_of_config(root: &Path, config: &Config) -> Option<String> {
    let project = format::project::read_project(root).value;
    match config.preflight_at(&project, &format::layout::project_file(root)) {
        Some((why, None)) => Some(why),
        _ => None,
    }
}

/// Findings for one project's files. Its Path itself is checked with the registry
/// ([`format::registry::check_paths`]); a project that is not there has nothing more to check.
pub fn check_project(slug: &str, root: &Path, config: &Config, paths: &Paths) -> Vec<Diagnostic> {
    let trackers = &config.tracker;
    let mut out = Vec::new();
    let project_md = format::layout::project_file(root);
    let project = match crate::system::atomic::read(&project_md) {
        Ok(bytes) => format::layout::parse_project(&format::decode(&bytes), &project_md),
        Err(_) => return out,
    };
    out.extend(project.diagnostics);
    // The tick's preflight, when PROJECT.md's `Executor:` is the problem (config.toml's are
    // reported once by `check_installation`): with it, ticks claim nothing for the project.
    if let Some((why, Some(line))) = config.preflight_at(&project.value, &project_md) {
        out.push(Diagnostic::error(
            &project_md,
            Some(line),
            "preflight",
            why,
            "until it is fixed, ticks claim nothing for this project",
        ));
    }
    if let Some(why) = crate::workspace::cannot_host(root, &project.value) {
        out.push(Diagnostic::error(
            root,
            None,
            "preflight",
            why,
            "until it is fixed, ticks claim nothing for this project",
        ));
    }
    if let Some((line, message, fix)) = crate::workspace::WorkspaceMode::problem(&project.value) {
        out.push(Diagnostic::error(
            &project_md,
            Some(line),
            "workspace",
            message,
            fix,
        ));
    }
    for e in config.workspace.escaping(Some(&project.value)) {
        if let Some(line) = e.line {
            out.push(Diagnostic::error(
                &project_md,
                Some(line),
                "workspace",
                e.sentence().replacen(e.key, &capitalised(e.key), 1),
                crate::config::Escaping::FIX,
            ));
        }
    }
    let setup = config.workspace.pooling(&project.value).setup;
    if let Some(program) = setup.first().filter(|p| which::which(p).is_err()) {
        out.push(Diagnostic::warning(
            &project_md,
            project.value.field("setup").map(|f| f.line),
            "workspace",
            format!("the setup command's program `{program}` is not found here, so every new workspace's setup fails"),
            "install it, or write the command's full path",
        ));
    }
    let base = crate::workspace::base_branch_of(root, &project.value).ok();
    if let Some(branch) = base.filter(|b| crate::git::remote_without_upstream(root, b)) {
        out.push(Diagnostic::warning(
            root,
            None,
            "4.4",
            format!("the repository has a remote but its branch {branch} has no upstream, so workers commit and never push"),
            format!("run `git -C {} push -u origin {branch}` once (or remove the remote)", root.display()),
        ));
    }
    let (placement, unusable) = crate::session::Placement::of(&project.value);
    for p in unusable {
        out.push(Diagnostic::error(
            &project_md,
            Some(p.line),
            "1.2",
            format!(
                "{} (until it is fixed no worker of the project starts)",
                p.message
            ),
            p.fix,
        ));
    }
    let backend = placement.backend_or(config.sessions.backend);
    if backend == crate::session::BackendKind::Slurm
        && crate::system::proc::Invocation::new([&config.slurm.sbatch, "--version"])
            .run()
            .map_or(true, |o| !o.success())
    {
        out.push(Diagnostic::error(
            &project_md,
            placement.backend.and(project.value.field("backend").map(|f| f.line)),
            "1.2",
            format!("the project runs its workers on Slurm, but `{} --version` does not run here", config.slurm.sbatch),
            "install the Slurm client (sbatch, squeue, scancel, scontrol) or set their paths under [slurm] in config.toml",
        ));
    }
    if backend == crate::session::BackendKind::OpenClaw {
        let gateway = crate::session::openclaw::Gateway::new(config.openclaw.clone());
        if let Err(e) = gateway.call("health", &serde_json::json!({}), gateway.wait()) {
            out.push(Diagnostic::error(
                &project_md,
                placement.backend.and(project.value.field("backend").map(|f| f.line)),
                "1.2",
                format!("the project's agents are OpenClaw sessions, but the gateway does not answer: {}", e.detail),
                "start the gateway (`openclaw gateway run`), or set url and token_file under [openclaw] in config.toml",
            ));
        }
    }
    if let Some(f) = project.value.field("dailybudget") {
        if let Err(why) = crate::cost::parse_budget(&f.value) {
            out.push(Diagnostic::error(
                &project_md,
                Some(f.line),
                "9.4",
                format!("{why} (until it is fixed the project has no budget)"),
                "write an amount in dollars, like `DailyBudget: 20 USD`, or remove the line",
            ));
        }
    }
    if crate::claw::is_claw(&project.value, root) {
        let plan = crate::tracker::claw::plan_file(root);
        if !plan.is_file() {
            out.push(Diagnostic::error(
                &project_md,
                project.value.field("pipeline").map(|f| f.line),
                "8.8",
                "the project runs the claw loop but has no .claw/WORKPLAN.md, so it has no task to work",
                "write the tasks as a checklist in .claw/WORKPLAN.md, or remove `Pipeline: claw`",
            ));
        }
        let yaml = root.join(".claw/config.yaml");
        match crate::claw::config::load(root) {
            Err(e) => {
                let text = format!("{e:#}");
                let text = text.strip_prefix(&format!("{}: ", yaml.display())).unwrap_or(&text).to_string();
                out.push(Diagnostic::error(
                    &yaml,
                    crate::claw::config::error_line(&text),
                    "8.8",
                    format!("{text} (each task the loop starts pauses it until this is fixed)"),
                    "write validation as a list of argv lists (`- [cargo, test]`), retries and stuck_after as numbers, timeout as a duration (`10m`)",
                ));
            }
            Ok(c) if c.validation.is_empty() => out.push(Diagnostic::warning(
                &yaml,
                None,
                "8.8",
                "the claw loop has no validation commands, so every task the coder finishes is checked off unchecked",
                "list the project's checks under `validation:`, for example `- [cargo, test]`",
            )),
            Ok(_) => {}
        }
        if let Some(p) = crate::claw::loopstate::load(root).paused {
            out.push(Diagnostic::warning(
                &crate::claw::loopstate::path(root),
                None,
                "8.8",
                format!("the claw loop is paused: {}", p.reason),
                format!("see .claw/ISSUES.md, then run `braids resume {slug}`"),
            ));
        }
    }
    out.extend(check_protocol(root, &project_md, &project.value));
    // read_iterations reports every 1.3 problem, two active iterations included (once).
    let iterations = format::iteration::read_iterations(root);
    out.extend(iterations.diagnostics);
    let kind = crate::tick::observe::tracker_kind(&project.value, trackers.kind, root);
    let timeout = std::time::Duration::from_secs(trackers.timeout_secs.max(1));
    let options = crate::tracker::TrackerOptions {
        project: root.to_path_buf(),
        timeout,
        program: None,
        installation: Some(paths.clone()),
    };
    out.extend(check_stories(&iterations.value, kind, &options));
    if crate::protocol::Pipeline::of(&project.value) == crate::protocol::Pipeline::Protocol {
        out.extend(check_cycles(kind, &options));
    }
    for it in &iterations.value {
        let ids = it
            .stories
            .iter()
            .chain(&it.maybe_stories)
            .map(|s| s.id.clone());
        out.extend(check_deliverables(&it.dir, &ids.collect::<Vec<_>>()));
        if it.status == Some(IterationStatus::Complete) {
            match git::check_frozen(root, &it.dir) {
                Ok(Frozen::Modified {
                    commit,
                    paths: changed,
                }) => {
                    for p in changed {
                        out.push(Diagnostic::error(
                            &root.join(&p),
                            None,
                            "4.5",
                            format!("iteration {} is complete but this file changed since commit {commit} completed it", it.name),
                            format!("restore it with `git checkout {commit} -- {}` (or remove the new file); record new work in a new iteration", p.display()),
                        ));
                    }
                }
                Ok(Frozen::Uncommitted) => out.push(Diagnostic::warning(
                    &it.file(),
                    None,
                    "4.5",
                    format!(
                        "iteration {} is marked complete but that was never committed",
                        it.name
                    ),
                    "commit the iteration (`git commit`) so its frozen state is recorded",
                )),
                Ok(Frozen::Intact { .. } | Frozen::NoHistory) => {}
                Err(e) => out.push(Diagnostic::warning(
                    &it.dir,
                    None,
                    "4.5",
                    format!("cannot check history: {e}"),
                    "check the repository with `git status`",
                )),
            }
        }
    }
    out
}

/// 10.1, 10.3: a `Pipeline:` braids knows, and for a protocol project (or any project with a
/// rules file) every problem of `.ai/step-rules.yaml` and every story file braids cannot use.
fn check_protocol(
    root: &Path,
    project_md: &Path,
    project: &format::project::ProjectConfig,
) -> Vec<Diagnostic> {
    use crate::protocol::{overrides, story_state, Pipeline};
    let mut out = Vec::new();
    if let Some(f) = project.field("pipeline") {
        if Pipeline::parse(&f.value).is_none() {
            out.push(Diagnostic::error(
                project_md,
                Some(f.line),
                "10.3",
                format!(
                    "`Pipeline: {}` is not a pipeline braids knows (the project runs as `single`)",
                    f.value.trim()
                ),
                "write `Pipeline: protocol`, `Pipeline: claw`, or remove the line",
            ));
        }
    }
    if let Some(f) = project.field("protocolstate") {
        if crate::protocol::single::Layout::parse(&f.value).is_none() {
            out.push(Diagnostic::error(
                project_md,
                Some(f.line),
                "10.12",
                format!("`ProtocolState: {}` is not a layout braids knows (read as per-story)", f.value.trim()),
                "write `ProtocolState: single` (the seed's .ai/STATE.json) or `ProtocolState: per-story`",
            ));
        }
    }
    let rules_file = root.join(overrides::FILE);
    if Pipeline::of(project) != Pipeline::Protocol && !rules_file.exists() {
        return out;
    }
    if let Ok(bytes) = crate::system::atomic::read(&rules_file) {
        if let Err(problems) = overrides::parse(&String::from_utf8_lossy(&bytes)) {
            for p in problems {
                out.push(Diagnostic::error(
                    &rules_file,
                    (p.line > 0).then_some(p.line),
                    "10.3",
                    format!(
                        "{} (until it is fixed, ticks claim nothing for this project)",
                        p.message
                    ),
                    p.fix,
                ));
            }
        }
    }
    for (bead, loaded) in story_state::load_all(root) {
        if let story_state::Loaded::Invalid(e) = loaded {
            out.push(Diagnostic::error(
                &story_state::path_of(root, &bead),
                None,
                "10.1",
                format!("{} (the story is held)", e.problem),
                e.fix,
            ));
        }
    }
    out
}

/// 1.3, 3.7: every story of an iteration that is not complete is a bead the tracker knows, and
/// a Stories entry starting with a plain word the tracker does not know (`TBD:`) is prose. The
/// tracker is asked only when there is an entry to check, and read only.
fn check_stories(
    iterations: &[Iteration],
    kind: crate::tracker::TrackerKind,
    options: &crate::tracker::TrackerOptions,
) -> Vec<Diagnostic> {
    let root = &options.project;
    let Some(first) = iterations.iter().find(|i| {
        !i.maybe_stories.is_empty()
            || (i.status != Some(IterationStatus::Complete) && !i.stories.is_empty())
    }) else {
        return Vec::new();
    };
    let kind = match kind {
        crate::tracker::TrackerKind::Auto => crate::tracker::detect(root),
        k => k,
    };
    let listed =
        crate::forge::tracker::open_read_only(kind, options.clone()).and_then(|t| t.list());
    let all = match listed {
        Ok(all) => all,
        Err(e) => {
            let fix = match kind {
                crate::tracker::TrackerKind::Br | crate::tracker::TrackerKind::Bd => format!(
                    "make `{} list` work in {} (is it installed and on PATH?), then run `braids check` again",
                    kind.as_str(),
                    root.display()
                ),
                crate::tracker::TrackerKind::Github | crate::tracker::TrackerKind::Gitlab => format!(
                    "fix what the sentence names (docs/issues.md gives the setup), then run `braids check` again"
                ),
                _ => "make .braids/WORKPLAN.md readable, then run `braids check` again".into(),
            };
            return vec![Diagnostic::warning(
                &first.file(),
                None,
                "1.3",
                format!("the project's tracker cannot be asked ({e}), so the Stories were not checked against it"),
                fix,
            )];
        }
    };
    let known: std::collections::BTreeSet<&BeadId> = all.iter().map(|b| &b.id).collect();
    let known = |id: &BeadId| known.contains(id);
    let mut out = Vec::new();
    for it in iterations {
        let unknown = format::iteration::unknown_stories(it, known, kind.as_str());
        out.extend(unknown.into_iter().map(|(_, d)| d));
        out.extend(format::iteration::prose_entries(it, known));
    }
    out
}

/// 10.10: a dependency cycle among the project's open beads is an error naming the cycle: no
/// story in it could ever start. Each open bead is shown once (the listing has no edges).
fn check_cycles(
    kind: crate::tracker::TrackerKind,
    options: &crate::tracker::TrackerOptions,
) -> Vec<Diagnostic> {
    use crate::tracker::TrackerKind;
    let root = &options.project;
    let kind = match kind {
        TrackerKind::Auto => crate::tracker::detect(root),
        k => k,
    };
    let Ok(tracker) = crate::forge::tracker::open_read_only(kind, options.clone()) else {
        return Vec::new(); // check_stories says the tracker cannot be asked
    };
    let Ok(all) = tracker.list() else {
        return Vec::new();
    };
    let graph: std::collections::BTreeMap<BeadId, Vec<BeadId>> = all
        .iter()
        .filter(|b| b.status != crate::model::BeadStatus::Closed)
        .filter_map(|b| {
            let deps = match b.dependencies.is_empty() {
                false => b.dependencies.clone(),
                true => tracker.show(&b.id).ok()??.dependencies,
            };
            Some((b.id.clone(), deps))
        })
        .collect();
    let Some(cycle) = crate::protocol::deps::cycle(&graph) else {
        return Vec::new();
    };
    let file = match kind {
        TrackerKind::Br | TrackerKind::Bd => root.join(".beads"),
        _ => root.join(".braids/WORKPLAN.md"),
    };
    let shown: Vec<&str> = cycle.iter().map(BeadId::as_str).collect();
    let (a, b) = (shown[0], shown.get(1).copied().unwrap_or(shown[0]));
    vec![Diagnostic::error(
        &file,
        None,
        "10.10",
        format!(
            "the beads {} → {} depend on each other in a cycle, so none of their stories can ever start",
            shown.join(" → "),
            shown[0]
        ),
        match kind {
            TrackerKind::Br => format!("remove one of the dependencies, e.g. `br dep remove {a} {b}`"),
            TrackerKind::Bd => format!("remove one of the dependencies, e.g. `bd dep remove {a} {b}`"),
            _ => "remove one of the dependencies from .braids/WORKPLAN.md".to_string(),
        },
    )]
}

/// Deliverables in one iteration directory: named `<suffix>-<kebab>.md`, with a Summary, one
/// per bead (1.4).
pub fn check_deliverables(dir: &Path, stories: &[BeadId]) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    let mut names: Vec<_> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "md"))
        .collect();
    names.sort();
    let mut per_bead: BTreeMap<&BeadId, Vec<&Path>> = BTreeMap::new();
    for p in &names {
        let file = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if file.eq_ignore_ascii_case("ITERATION.md") {
            continue;
        }
        let text = std::fs::read(p)
            .map(|b| format::decode(&b).into_owned())
            .unwrap_or_default();
        out.extend(deliverable::check(p, &text));
        if let Some((prefix, _)) = deliverable::parse_name(file) {
            if let Some(bead) = stories.iter().find(|b| b.matches_prefix(&prefix)) {
                per_bead.entry(bead).or_default().push(p);
            }
        }
    }
    for (bead, files) in per_bead {
        if files.len() > 1 {
            for f in &files[1..] {
                out.push(Diagnostic::error(
                    f,
                    None,
                    "1.4",
                    format!(
                        "bead {bead} has {} deliverables in this iteration; one is allowed",
                        files.len()
                    ),
                    "merge them into one file",
                ));
            }
        }
    }
    out
}

/// Counts findings by severity: (errors, warnings).
pub fn tally(d: &[Diagnostic]) -> (usize, usize) {
    let e = d.iter().filter(|x| x.severity == Severity::Error).count();
    (e, d.len() - e)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str) -> Vec<Diagnostic> {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("config.toml");
        std::fs::write(&f, text).unwrap();
        check_config(&f)
    }

    #[test]
    fn c1_2_check_validates_checkin_time_and_weekday_with_their_lines() {
        assert!(check("[checkin]\ntime = \"18:30\"\nweekday = \"fri\"\n").is_empty());
        let d = check("# mine\n[tracker]\ntimeout_secs = 30\n[checkin]\nweekday = \"friday-ish\"\ntime = \"25:99\"\n");
        assert_eq!(d.len(), 2, "{d:?}");
        let time = d.iter().find(|x| x.message.contains("time")).unwrap();
        assert_eq!(time.line, Some(6));
        assert!(time.fix.contains("HH:MM"), "{time:?}");
        let day = d.iter().find(|x| x.message.contains("weekday")).unwrap();
        assert_eq!(day.line, Some(5));
        assert!(d.iter().all(|x| x.severity == Severity::Error));
    }

    #[test]
    fn a_config_that_does_not_parse_is_one_finding_with_its_line() {
        let d = check("[tracker]\ntimeout_secs = = 3\n");
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].line, Some(2));
    }
}
