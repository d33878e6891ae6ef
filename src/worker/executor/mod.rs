//! Running the agent. The executor is an argv template from config.toml (or a project's
//! `Executor` field), never a shell string; its output, stdout included, passes through the worker
//! (`tee.rs`) to its stderr, which the session backend writes to the session log — the worker's stdout is kept for
//! `braids worker --json`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

pub mod openclaw;
pub mod preset;
pub mod stop;
pub mod tee;

use crate::model::BeadId;
use crate::notifier::expand;
use crate::system::proc::{Detach, ProcessGroup};

/// One executor run's inputs.
#[derive(Debug, Clone)]
pub struct ExecRequest {
    pub project: PathBuf,
    /// Where the agent runs: the bead's own worktree, or the project when shared.
    pub workspace: PathBuf,
    pub bead: BeadId,
    pub prompt_file: PathBuf,
    /// Where the deliverable must be written.
    pub deliverable: PathBuf,
    /// Where the status report must be written (the bead's own `executor-result`).
    pub result_file: PathBuf,
    pub timeout: Duration,
    /// Touched while the agent prints or changes files (see [`tee`]).
    pub activity: PathBuf,
    /// The role, when this run is one of a protocol team step's agents running at once.
    pub role: Option<String>,
}

/// How the run ended.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExecResult {
    pub code: Option<i32>,
    pub timed_out: bool,
    /// The last kilobytes of what the agent printed (stdout and stderr).
    pub tail: String,
    /// What a preset's CLI said of the run, read from its machine output.
    pub agent: Option<crate::agent::AgentOutcome>,
}

/// `Sync`: the roles of a protocol team step run at once, from threads of one worker.
pub trait Executor: Sync {
    fn run(&self, req: &ExecRequest) -> anyhow::Result<ExecResult>;

    /// Why no agent can be run at all (nothing configured), before a prompt is written.
    fn unavailable(&self) -> Option<String> {
        None
    }
}

/// An argv template with `{prompt_file}`, `{project}`, `{workspace}`, `{bead}`,
/// `{deliverable}`, `{result_file}`, `{timeout}` placeholders.
pub struct ArgvExecutor {
    pub template: Vec<String>,
    /// Between SIGTERM and SIGKILL on timeout.
    pub grace: Duration,
    pub sandbox: crate::system::sandbox::Settings,
}

impl ArgvExecutor {
    pub fn argv(&self, req: &ExecRequest) -> Vec<String> {
        let prompt = req.prompt_file.to_string_lossy();
        let project = req.project.to_string_lossy();
        let workspace = req.workspace.to_string_lossy();
        let timeout = req.timeout.as_secs().to_string();
        let deliverable = req.deliverable.to_string_lossy();
        let result_file = req.result_file.to_string_lossy();
        let vars = [
            ("prompt_file", &*prompt),
            ("project", &*project),
            ("workspace", &*workspace),
            ("bead", req.bead.as_str()),
            ("deliverable", &*deliverable),
            ("result_file", &*result_file),
            ("timeout", timeout.as_str()),
        ];
        self.template.iter().map(|a| expand(a, &vars)).collect()
    }
}

impl Executor for ArgvExecutor {
    fn unavailable(&self) -> Option<String> {
        self.template
            .is_empty()
            .then(|| "no executor is configured: set [worker] executor in config.toml".into())
    }

    fn run(&self, req: &ExecRequest) -> anyhow::Result<ExecResult> {
        let argv = self.argv(req);
        let (program, args) = argv
            .split_first()
            .ok_or_else(|| anyhow::anyhow!("the executor command is empty"))?;
        let mut cmd = Command::new(program);
        cmd.args(args);
        // The prompt also arrives on stdin, which is how `claude -p` and `codex exec -` read it.
        let (res, _) = run_agent(&mut cmd, req, true, (self.grace, &self.sandbox), None)?;
        Ok(res)
    }
}

/// Runs an agent process in the workspace, in a process group of its own, under the request's
/// timeout, with braids' variables in its environment, inside the sandbox when one is set;
/// `prompt_on_stdin` gives it the prompt file as standard input (else none). `lines` reads its
/// stdout as it comes. Returns the result and the end of its stderr.
pub(super) fn run_agent(
    cmd: &mut Command,
    req: &ExecRequest,
    prompt_on_stdin: bool,
    (grace, sandbox): (Duration, &crate::system::sandbox::Settings),
    lines: Option<tee::LineSink>,
) -> anyhow::Result<(ExecResult, String)> {
    let program = cmd.get_program().to_string_lossy().into_owned();
    let choice = sandbox.choice().map_err(anyhow::Error::msg)?;
    // Its own temp folder, beside its prompt and outside every project.
    let work = req.prompt_file.parent().unwrap_or(&req.workspace);
    let tmp = work.join("tmp");
    // The bead's own folders: a worktree braids made, and its temp folder. A shared work tree
    // is the person's checkout, where their own shell and editor live: never scanned.
    let mut folders = vec![tmp.clone()];
    if req.workspace != req.project {
        folders.push(req.workspace.clone());
    }
    let container = crate::system::container::Container::create(
        &sandbox.braids_dir,
        &format!("{}_{}", dir_name(&req.project), req.bead),
        folders,
    );
    let mut wrapped = None;
    if choice.is_on() {
        let mut own = vec![work.to_path_buf()];
        own.extend(crate::system::sandbox::policy::named_paths(
            cmd,
            &sandbox.home,
        ));
        let place = crate::system::sandbox::Place {
            workspace: req.workspace.clone(),
            project: req.project.clone(),
            tmp: tmp.clone(),
            own,
            protect: crate::workspace::guard::redirecting_admin_files(&req.workspace),
        };
        let policy = sandbox.policy(&place);
        wrapped = Some(sandbox.wrap(&choice, cmd, &policy, &tmp)?);
    }
    tracing::info!(
        bead = %req.bead,
        "agent sandbox: {} ({}); processes: {}",
        match choice.kind {
            crate::system::sandbox::Kind::Off => "none",
            k => k.as_str(),
        },
        choice.why,
        container.cgroup().map_or("scan of its folders".into(), |c| format!("cgroup {}", c.display()))
    );
    let cmd = wrapped.as_mut().unwrap_or(cmd);
    let stdin = if prompt_on_stdin {
        std::fs::File::open(&req.prompt_file)
            .map(Stdio::from)
            .unwrap_or_else(|_| Stdio::null())
    } else {
        Stdio::null()
    };
    // PWD too: some CLIs (opencode) take their working directory from it, not from getcwd.
    cmd.current_dir(&req.workspace)
        .env("PWD", &req.workspace)
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env("BRAIDS_BEAD", req.bead.as_str())
        .env("BRAIDS_PROMPT_FILE", &req.prompt_file)
        .env("BRAIDS_RESULT_FILE", &req.result_file)
        .env("BRAIDS_PROJECT", &req.project)
        .env("BRAIDS_WORKSPACE", &req.workspace)
        .env(
            "BRAIDS_WORKSPACE_ID",
            crate::workspace::workspace_id(&req.workspace),
        );
    // From a worktree, `br`/`bd` must still reach the project's one database.
    let beads = req.project.join(".beads");
    if req.workspace != req.project && beads.is_dir() {
        cmd.env("BEADS_DIR", &beads);
    }
    // The agent dies with its worker, however the worker dies (SIGKILL included): the kernel
    // kills it when the thread that started it, which waits for it here, is gone.
    let worker = std::process::id();
    // SAFETY: prctl and getppid are async-signal-safe; nothing else runs in the child.
    unsafe {
        use std::os::unix::process::CommandExt;
        cmd.pre_exec(move || {
            use nix::libc;
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The worker died before the death signal was armed.
            if libc::getppid() as u32 != worker {
                return Err(std::io::Error::other("the worker is gone"));
            }
            Ok(())
        });
    }
    container.join_on_exec(cmd);
    // A group of its own, so a timeout stops everything the agent started but not the worker.
    let mut group = ProcessGroup::spawn(cmd, Detach::Group)
        .map_err(|e| anyhow::anyhow!("cannot start executor `{program}`: {e}"))?;
    let pgid = group.id() as i32;
    stop::agent_started(pgid);
    let outputs: Vec<Box<dyn std::io::Read + Send>> = match group.leader() {
        Some(child) => {
            let out = child
                .stdout
                .take()
                .map(|o| Box::new(o) as Box<dyn std::io::Read + Send>);
            let err = child
                .stderr
                .take()
                .map(|e| Box::new(e) as Box<dyn std::io::Read + Send>);
            out.into_iter().chain(err).collect()
        }
        None => Vec::new(),
    };
    let tee = tee::Tee::start_with(outputs, req.activity.clone(), &req.workspace, true, lines);
    let timed_out = !group.wait(Some(req.timeout));
    if timed_out {
        tracing::warn!(bead = %req.bead, "executor exceeded {}s; stopping it", req.timeout.as_secs());
        let _ = group.terminate(grace);
    }
    // Whatever the agent left running goes with it: its group, its container, and anything
    // still in its workspace however it got away.
    let status = group.finish();
    let ended = container.end();
    if ended != Default::default() {
        tracing::info!(
            bead = %req.bead,
            "stopped {} process(es) the agent left in its cgroup and {} found in its folders",
            ended.cgroup,
            ended.scanned
        );
    }
    stop::agent_gone(pgid);
    let status = status?;
    let (tail, stderr) = tee.finish_both();
    Ok((
        ExecResult {
            code: status.code(),
            timed_out,
            tail,
            agent: None,
        },
        stderr,
    ))
}

/// The last part of `dir`, for names.
fn dir_name(dir: &Path) -> String {
    dir.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Where the worker keeps a bead's prompt: outside the project, so it is never committed.
pub fn work_dir(braids_dir: &Path, slug: &str, bead: &BeadId) -> PathBuf {
    braids_dir.join("work").join(slug).join(bead.as_str())
}

/// The part of WorkerTimeout the agent may use, counted from the worker's start: a tenth (at
/// most five minutes) is kept for the fixed steps after it, so the worker blocks or completes
/// the bead itself before the tick would stop it as a zombie (2.6).
pub(in crate::worker) fn agent_budget(worker_timeout: Duration) -> Duration {
    worker_timeout - (worker_timeout / 10).min(Duration::from_secs(300))
}

#[cfg(test)]
mod budget_tests {
    use super::*;

    #[test]
    fn agent_budget_keeps_a_tenth_for_the_fixed_steps() {
        let s = Duration::from_secs;
        assert_eq!(agent_budget(s(3)), Duration::from_millis(2700));
        assert_eq!(agent_budget(s(1000)), s(900));
        assert_eq!(agent_budget(s(3600)), s(3300), "at most five minutes");
        assert_eq!(agent_budget(s(36_000)), s(35_700));
    }
}

#[cfg(test)]
mod docs_tests {
    /// Every placeholder an argv template may use and every `BRAIDS_*` variable an agent gets
    /// has a row in the placeholder table of docs/agents.md.
    #[test]
    fn every_placeholder_and_variable_is_in_the_docs_placeholder_table() {
        let readme =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/agents.md"))
                .expect("docs/agents.md");
        let source = include_str!("mod.rs");
        let quoted = |after: &str| -> Vec<String> {
            source
                .split(after)
                .skip(1)
                .filter_map(|rest| rest.split('"').next())
                .filter(|n| !n.is_empty() && !n.contains(' '))
                .map(str::to_string)
                .collect()
        };
        // The placeholders: the names in `let vars = [ ("name", …), … ];`.
        let vars = source
            .split("let vars = [")
            .nth(1)
            .and_then(|v| v.split("];").next());
        let mut names: Vec<String> = vars
            .unwrap_or_default()
            .split("(\"")
            .skip(1)
            .filter_map(|rest| rest.split('"').next())
            .map(|p| format!("`{{{p}}}`"))
            .collect();
        names.extend(quoted(".env(\"").into_iter().map(|v| format!("`{v}`")));
        names.extend(["`BRAIDS_LABEL`".to_string(), "`BRAIDS_SESSION`".to_string()]);
        assert!(
            names.len() > 10,
            "the names were not found in exec.rs: {names:?}"
        );
        let rows: Vec<&str> = readme.lines().filter(|l| l.starts_with("| ")).collect();
        let missing: Vec<&String> = names
            .iter()
            .filter(|n| n.as_str() != "`PWD`" && !rows.iter().any(|r| r.contains(n.as_str())))
            .collect();
        assert!(
            missing.is_empty(),
            "not in the placeholder table of docs/agents.md: {missing:?}"
        );
    }
}
