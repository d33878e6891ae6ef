//! Creating a project (`braids new`): scaffolds it (git repository, `.braids/PROJECT.md`, `AGENTS.md`, a bead
//! tracker) and registers it.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use serde::Serialize;

use crate::format;
use crate::model::{validate_slug, Priority, ProjectStatus};
use crate::system::atomic;
use crate::system::paths::Paths;
use crate::system::proc::Invocation;
use crate::system::templates;
use crate::tracker;

/// What `braids new` is asked for.
#[derive(Debug, Clone)]
pub struct NewProject {
    pub slug: String,
    /// Default: `$BRAIDS_HOME/<slug>`.
    pub path: Option<PathBuf>,
    pub priority: String,
    pub max_workers: u32,
    pub channel: Option<String>,
    pub tracker: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct NewReport {
    pub slug: String,
    pub path: PathBuf,
    pub tracker: &'static str,
    pub created: Vec<PathBuf>,
}

/// How the registry shows a path: under `$BRAIDS_HOME` or `~` when it is.
fn display_path(paths: &Paths, p: &Path) -> String {
    if let Ok(rest) = p.strip_prefix(&paths.braids_home) {
        if paths.braids_home == paths.home.join("Projects") {
            return format!("~/Projects/{}", rest.display());
        }
        return format!("$BRAIDS_HOME/{}", rest.display());
    }
    if let Ok(rest) = p.strip_prefix(&paths.home) {
        return format!("~/{}", rest.display());
    }
    p.display().to_string()
}

/// Scaffolds and registers the project.
pub fn create(paths: &Paths, a: NewProject) -> Result<NewReport> {
    validate_slug(&a.slug).map_err(|e| anyhow!("{e}"))?;
    let priority = Priority::parse(&a.priority).map_err(|e| anyhow!("--priority: {e}"))?;
    if a.max_workers == 0 {
        bail!("--max-workers must be a positive integer");
    }
    if let Some(c) = &a.channel {
        if c.chars().any(char::is_control) {
            bail!("--channel must be one line");
        }
    }
    super::init::ensure(paths)?;
    let reg_path = crate::format::layout::registry_file(paths);
    let reg_text = std::fs::read(&reg_path)
        .map(|b| format::decode(&b).into_owned())
        .with_context(|| format!("cannot read {}", reg_path.display()))?;
    let existing = crate::format::layout::parse_registry(&reg_text, &reg_path, paths).value;
    if let Some(e) = existing.entries.iter().find(|e| e.slug == a.slug) {
        bail!(
            "project {} already exists in {} (line {}, path {})",
            a.slug,
            reg_path.display(),
            e.line,
            e.path.display()
        );
    }
    let root = match &a.path {
        Some(p) if p.is_absolute() => crate::system::paths::normalize(p),
        Some(p) => crate::system::paths::normalize(&std::env::current_dir()?.join(p)),
        None => paths.braids_home.join(&a.slug),
    };
    if paths.in_workspace(&root) {
        bail!("{} is inside the agent workspace {}; projects never go there (4.1): choose another --path", root.display(), paths.workspace.display());
    }
    if root.to_string_lossy().chars().any(char::is_control) {
        bail!("the project path must not contain control characters");
    }
    let project_md = crate::format::layout::project_file(&root);
    if project_md.exists() {
        bail!(
            "{} already exists; register the project by adding a row to {}",
            project_md.display(),
            reg_path.display()
        );
    }
    std::fs::create_dir_all(&root).with_context(|| format!("cannot create {}", root.display()))?;

    let wanted = match a.tracker.as_deref().map(tracker::TrackerKind::parse) {
        None => tracker::TrackerKind::Auto,
        Some(Some(
            k @ (tracker::TrackerKind::Auto
            | tracker::TrackerKind::Br
            | tracker::TrackerKind::Workplan),
        )) => k,
        Some(_) => bail!(
            "--tracker must be br, workplan or auto (bd projects are initialised with `bd init`)"
        ),
    };
    let use_br = match wanted {
        tracker::TrackerKind::Br => true,
        tracker::TrackerKind::Workplan => false,
        _ => root.join(".beads").is_dir() || tracker::on_path("br"),
    };
    let mut created = Vec::new();
    if crate::git::init(&root)? {
        created.push(root.join(".git"));
    }
    let channel = a.channel.clone().unwrap_or_else(|| "none".into());
    let max = a.max_workers.to_string();
    let vars = [
        ("name", a.slug.as_str()),
        ("priority", priority.as_str()),
        ("max_workers", max.as_str()),
        ("channel", channel.as_str()),
    ];
    let mut project_text = templates::render(templates::PROJECT, &vars);
    if wanted != tracker::TrackerKind::Auto {
        project_text = project_text.replace(
            "- **Channel:**",
            &format!("- **Tracker:** {}\n- **Channel:**", wanted.as_str()),
        );
    }
    atomic::write(&project_md, project_text.as_bytes())?;
    created.push(project_md);
    let agents = root.join("AGENTS.md");
    if atomic::write_new(
        &agents,
        templates::render(templates::AGENTS, &vars).as_bytes(),
    )? {
        created.push(agents);
    }
    std::fs::create_dir_all(root.join(".braids/iterations"))?;
    // The native tracker's lock file is machine state, not project history.
    atomic::write_new(&root.join(".braids/.gitignore"), b".workplan.lock\n")?;

    let kind = if use_br && root.join(".beads").is_dir() {
        "br"
    } else if use_br {
        let out = Invocation::new(["br", "init", "--prefix", a.slug.as_str()])
            .cwd(&root)
            .run()
            .map_err(|e| anyhow!("{e}"))?;
        if !out.success() {
            bail!(
                "`br init` failed in {}: {}",
                root.display(),
                out.stderr.trim()
            );
        }
        created.push(root.join(".beads"));
        "br"
    } else {
        let wp = root.join(".braids/WORKPLAN.md");
        if atomic::write_new(&wp, templates::WORKPLAN.as_bytes())? {
            created.push(wp);
        }
        "workplan"
    };
    let mut to_commit: Vec<PathBuf> = vec![root.join(".braids"), root.join("AGENTS.md")];
    if root.join(".beads").is_dir() {
        to_commit.push(root.join(".beads"));
    }
    crate::git::commit_paths(
        &root,
        &to_commit,
        &format!("Scaffold braids project {}", a.slug),
    )?;

    let updated = crate::format::layout::upsert_project(
        &reg_text,
        &reg_path,
        &a.slug,
        ProjectStatus::Active,
        priority,
        &display_path(paths, &root),
    )
    .map_err(|e| anyhow!("{}: {e}", reg_path.display()))?;
    atomic::write(&reg_path, updated.as_bytes())?;
    crate::tick::orchestrator_state::wake(paths, crate::tick::orchestrator_state::WAKE_WAIT);
    Ok(NewReport {
        slug: a.slug,
        path: root,
        tracker: kind,
        created,
    })
}
