//! Running one dispatched step: the executor (or a team of executors on threads, one per
//! role, merged into one HANDOFF), or braids itself for the `commit` step; and the step's
//! `post_check`, always argv.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Result;

use crate::model::{Bead, BeadId};
use crate::protocol::handoff::{self, Handoff};
use crate::protocol::story_state::StoryState;
use crate::protocol::{team, Rule, Runner, Status};
use crate::workspace::Workspace;

use super::super::context::Loaded;
use super::super::executor::stop;
use super::super::{clip, work_dir, ExecRequest, ExecResult, Run, Worker};
use super::Ran;

/// Paths braids' own `commit` step leaves out: status reports, the executor's notes, and what
/// `update-memory` writes after the commit (seed 002: not PROJECT_MEMORY.md, not history.md).
const NOT_COMMITTED: &[&str] = &[
    handoff::EXECUTOR_RESULT,
    super::super::report::OWN_DIR,
    handoff::HANDOFF,
    ".ai/handoffs",
    handoff::HISTORY,
    "PROJECT_MEMORY.md",
    ".braids/iterations",
];

impl Worker<'_> {
    /// Runs one dispatched step and says what it reported.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn run_step(
        &self,
        run: &mut Run<'_, '_>,
        l: &Loaded,
        ws: &Workspace,
        bead: &Bead,
        state: &StoryState,
        rule: &Rule,
        roles: &[crate::protocol::rules::Role],
        prompt: &str,
        timeout: Duration,
    ) -> Result<Ran> {
        if rule.runner == Runner::Braids {
            let research = l.project.autonomy == crate::model::Autonomy::ResearchOnly;
            return Ok(Ran::Report(Some(Box::new(
                self.commit_step(run, ws, bead, research)?,
            ))));
        }
        let wd = work_dir(&self.paths.braids_dir, &l.slug, &bead.id);
        let tag = format!("{}-{}", state.step, state.attempt);
        if roles.len() <= 1 {
            let prompt_file = wd.join(format!("prompt-{tag}.md"));
            crate::system::atomic::write(&prompt_file, prompt.as_bytes())?;
            crate::system::atomic::write(&wd.join("prompt.md"), prompt.as_bytes())?;
            let before = stamp(&ws.dir, &ws.dir.join(handoff::HANDOFF));
            let _ = std::fs::remove_file(ws.dir.join(handoff::EXECUTOR_RESULT));
            let res = self.exec(run, l, ws, &bead.id, &prompt_file, timeout);
            if res.timed_out {
                return Ok(Ran::TimedOut);
            }
            let fresh = stamp(&ws.dir, &ws.dir.join(handoff::HANDOFF)) != before
                || ws.dir.join(handoff::EXECUTOR_RESULT).exists();
            let found = fresh
                .then(|| handoff::read(&ws.dir, handoff::HANDOFF))
                .flatten();
            let _ = std::fs::remove_file(ws.dir.join(handoff::EXECUTOR_RESULT));
            return Ok(Ran::Report(found.map(|h| Box::new(with_exit(h, &res)))));
        }
        // A team: one executor per role at once, each with its own prompt and handoff file.
        let mut jobs = Vec::new();
        for role in roles {
            // The note was taken into the step's prompt by the dispatch; each role gets it.
            let p = crate::protocol::prompt::build_for(state, rule, None, Some(role));
            let p = super::super::context::story_prompt(l, &carry_note(prompt, p));
            let file = wd.join(format!("prompt-{tag}-{}.md", role.name));
            crate::system::atomic::write(&file, p.as_bytes())?;
            let _ = std::fs::remove_file(ws.dir.join(team::handoff_of(&role.name)));
            jobs.push((role.name.clone(), file));
        }
        run.step(
            "team",
            format!(
                "{} roles at once: {}",
                jobs.len(),
                jobs.iter()
                    .map(|j| j.0.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        );
        // While the agents run, a stop goes through at once and takes every agent's group
        // with it (see `worker/stop.rs`); the fixed steps after them hold it again.
        run.hold = None;
        let results: Vec<(String, ExecResult)> = std::thread::scope(|s| {
            let handles: Vec<_> = jobs
                .iter()
                .map(|(name, file)| {
                    let req = ExecRequest {
                        role: Some(name.clone()),
                        ..self.request(l, ws, &bead.id, file, timeout)
                    };
                    let name = name.clone();
                    s.spawn(move || {
                        let res = self.executor.run(&req).unwrap_or_else(|e| ExecResult {
                            code: None,
                            timed_out: false,
                            tail: format!("failed to start: {e}"),
                            ..ExecResult::default()
                        });
                        (name, res)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("a role's thread"))
                .collect()
        });
        run.hold = Some(stop::Hold::marking(
            self.paths.finishing(&l.slug, &run.msg.bead),
        ));
        if results.iter().any(|(_, r)| r.timed_out) {
            return Ok(Ran::TimedOut);
        }
        let found: Vec<(String, Option<Handoff>)> = results
            .iter()
            .map(|(name, res)| {
                let rel = team::handoff_of(name);
                let h = handoff::read_file(&ws.dir.join(&rel)).map(|h| with_exit(h, res));
                (name.clone(), h)
            })
            .collect();
        let merged = team::merge(state, &found);
        crate::system::beneath::write(
            &ws.dir,
            Path::new(handoff::HANDOFF),
            merged.text.as_bytes(),
        )?;
        for (file, roles) in &merged.conflicts {
            run.step(
                "team",
                format!("conflict: {file} written by {}", roles.join(" and ")),
            );
        }
        Ok(Ran::Report(Some(Box::new(merged.handoff))))
    }

    pub(super) fn request(
        &self,
        l: &Loaded,
        ws: &Workspace,
        bead: &BeadId,
        prompt: &Path,
        timeout: Duration,
    ) -> ExecRequest {
        ExecRequest {
            project: ws.project.clone(),
            workspace: ws.dir.clone(),
            bead: bead.clone(),
            prompt_file: prompt.to_path_buf(),
            deliverable: ws.here(&l.iteration.dir),
            result_file: ws.dir.join(handoff::EXECUTOR_RESULT),
            timeout,
            activity: self.paths.activity(&l.slug, bead),
            role: None,
        }
    }

    /// One executor run; a failure to start is an exit without a report.
    pub(super) fn exec(
        &self,
        run: &mut Run<'_, '_>,
        l: &Loaded,
        ws: &Workspace,
        bead: &BeadId,
        prompt: &Path,
        timeout: Duration,
    ) -> ExecResult {
        run.hold = None;
        let req = self.request(l, ws, bead, prompt, timeout);
        let res = self.executor.run(&req).unwrap_or_else(|e| ExecResult {
            code: None,
            timed_out: false,
            tail: format!("failed to start: {e}"),
            ..ExecResult::default()
        });
        run.hold = Some(stop::Hold::marking(
            self.paths.finishing(&l.slug, &run.msg.bead),
        ));
        res
    }

    /// braids' own `commit` step: the story's changes staged and committed with a conventional
    /// message carrying the story id; the hash recorded. Nothing to commit still passes, with
    /// the current commit. A research-only project commits nothing here: only the deliverable
    /// lands, at `done`, as for a bead (3.11).
    pub(super) fn commit_step(
        &self,
        run: &mut Run<'_, '_>,
        ws: &Workspace,
        bead: &Bead,
        research_only: bool,
    ) -> Result<Handoff> {
        if research_only {
            run.step(
                "commit",
                "research-only: nothing committed; only the deliverable lands",
            );
            return Ok(Handoff {
                status: Some(Status::Pass),
                summary: Some("research-only: nothing committed".into()),
                source: "braids",
                ..Handoff::default()
            });
        }
        let _lock = crate::app::iteration::RepoLock::acquire(&ws.project)?;
        let skip = commit_step_skips(&ws.dir);
        let message = format!(
            "feat({}): {}",
            bead.id,
            super::super::first_line(&bead.title)
        );
        let oid = crate::git::commit_all_except(&ws.dir, &skip, &[], &message)?;
        let hash = match oid {
            Some(o) => o.to_string(),
            None => crate::git::open(&ws.dir)?
                .head()?
                .peel_to_commit()?
                .id()
                .to_string(),
        };
        run.step("commit", format!("{hash} {message}"));
        Ok(Handoff {
            status: Some(Status::Pass),
            summary: Some(message),
            commit_hash: Some(hash),
            source: "braids",
            ..Handoff::default()
        })
    }
}

/// What braids' `commit` step leaves out of the story's commit in workspace `dir`.
fn commit_step_skips(dir: &Path) -> Vec<PathBuf> {
    NOT_COMMITTED
        .iter()
        .chain(&crate::lifecycle::TRACKER_FILES)
        .chain(crate::events::GENERATED)
        .map(|p| dir.join(p))
        .collect()
}

/// A human instruction in the step's prompt goes into every role's prompt too.
pub(super) fn carry_note(step_prompt: &str, role_prompt: String) -> String {
    let Some(start) = step_prompt.find("=== Human Instruction ===") else {
        return role_prompt;
    };
    let block = &step_prompt[start..];
    let end = block
        .find("==========================\n")
        .map_or(block.len(), |e| e + 27);
    format!("{role_prompt}\n{}", &block[..end])
}

/// A report from an executor that exited non-zero without saying `failing` is not a pass.
pub(super) fn with_exit(mut h: Handoff, res: &ExecResult) -> Handoff {
    if res.code != Some(0) && h.status == Some(Status::Pass) {
        h.warnings.push(format!(
            "the executor reported pass but exited with {}",
            crate::system::proc::exit_text(res.code)
        ));
        h.status = Some(Status::Failing);
    }
    h
}

/// Runs a `post_check` argv in the workspace: never through a shell unless the project's own
/// rules said `{shell: …}` (then it is `sh -c` with the string as one argument).
pub(super) fn post_check(dir: &Path, argv: &[String]) -> (bool, String) {
    let out = crate::system::proc::Invocation::new(argv.iter().map(String::as_str))
        .cwd(dir)
        .timeout(Duration::from_secs(600))
        .run();
    match out {
        Ok(o) if o.success() => (true, String::new()),
        Ok(o) => (false, clip(&format!("{}{}", o.stdout, o.stderr), 300)),
        Err(e) => (false, format!("{e}")),
    }
}

type Stamp = Option<(Vec<u8>, Option<std::time::SystemTime>)>;

/// `p` as it is now, read beneath the workspace `root`.
pub(super) fn stamp(root: &Path, p: &Path) -> Stamp {
    let bytes = crate::system::beneath::read(root, p).ok()?;
    Some((bytes, std::fs::metadata(p).and_then(|m| m.modified()).ok()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_post_check_is_argv_and_never_reaches_a_shell_unasked() {
        let dir = tempfile::tempdir().unwrap();
        let argv = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        // a report's text in an argument stays an argument
        let (ok, _) = post_check(dir.path(), &argv(&["test", "-e", "$(touch pwned); x"]));
        assert!(!ok);
        assert!(!dir.path().join("pwned").exists());
        assert!(post_check(dir.path(), &argv(&["true"])).0);
        let (ok, detail) = post_check(
            dir.path(),
            &argv(&["sh", "-c", "echo lint: 3 problems; exit 1"]),
        );
        assert!(!ok);
        assert!(detail.contains("lint: 3 problems"), "{detail}");
        let (ok, detail) = post_check(dir.path(), &argv(&["no-such-program-anywhere"]));
        assert!(!ok && !detail.is_empty());
        // a shell string runs only as `sh -c <string>`, written by the project itself
        let shell = crate::protocol::PostCheck::Shell("touch made-by-the-project".into()).argv();
        assert!(post_check(dir.path(), &shell).0);
        assert!(dir.path().join("made-by-the-project").exists());
    }

    /// Seed 002's commit step: "Do NOT commit PROJECT_MEMORY.md or .ai/history.md".
    #[test]
    fn c10_7_the_commit_step_leaves_out_the_memory_history_and_reports() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let git = |args: &[&str]| {
            let out = std::process::Command::new("git")
                .args(args)
                .current_dir(root)
                .output()
                .unwrap();
            assert!(out.status.success(), "git {args:?}: {out:?}");
            String::from_utf8(out.stdout).unwrap()
        };
        git(&["init", "-q", "-b", "main"]);
        git(&["config", "user.name", "t"]);
        git(&["config", "user.email", "t@t.invalid"]);
        let write = |rel: &str, text: &str| {
            let p = root.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        for rel in ["src/a.rs", "PROJECT_MEMORY.md", ".ai/history.md"] {
            write(rel, "before\n");
        }
        git(&["add", "-A"]);
        git(&["commit", "-qm", "start"]);
        for rel in [
            "src/a.rs",
            "src/new.rs",
            "PROJECT_MEMORY.md",
            ".ai/history.md",
            ".ai/HANDOFF.md",
            ".ai/executor-result",
        ] {
            write(rel, "after\n");
        }
        let oid =
            crate::git::commit_all_except(root, &commit_step_skips(root), &[], "feat(b-1): x")
                .unwrap();
        assert!(oid.is_some());
        let files = git(&["show", "--name-only", "--format=", "HEAD"]);
        assert_eq!(
            files.lines().collect::<Vec<_>>(),
            ["src/a.rs", "src/new.rs"],
            "only the story's changes"
        );
        let left = git(&["status", "--porcelain"]);
        assert!(
            left.contains("PROJECT_MEMORY.md") && left.contains(".ai/history.md"),
            "left for update-memory: {left}"
        );
    }

    #[test]
    fn the_note_reaches_every_role() {
        let step =
            "header\n\n=== Human Instruction ===\nUse UTC\n==========================\n\nrest";
        let role = carry_note(step, "role prompt".into());
        assert!(
            role.ends_with("=== Human Instruction ===\nUse UTC\n==========================\n"),
            "{role}"
        );
        assert_eq!(carry_note("no note", "role".into()), "role");
    }
}
