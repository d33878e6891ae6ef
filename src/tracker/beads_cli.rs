//! What the `br` and `bd` adapters share: running the tracker binary through
//! [`crate::system::proc::Invocation`], turning its exit status and output into [`TrackerError`]s, and
//! mapping its issue JSON onto [`Bead`].
//!
//! The two CLIs descend from one design and print nearly the same issue objects, but their
//! envelopes differ (`br list` wraps rows in `{"issues": [...]}`, `bd` may wrap everything in
//! `{"schema_version": 1, "data": ...}`), dependency rows come either as issues with a
//! `dependency_type` or as raw `{"depends_on_id", "type"}` records, and errors arrive either as
//! `{"error": {"code", "message"}}` (br) or `{"error": "message"}` (bd) on stdout, or as plain text
//! on stderr. Everything here is tolerant of all of those shapes.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use super::TrackerError;
use crate::model::{Bead, BeadId, BeadStatus};
use crate::system::proc::{Invocation, Output, RunError};

/// Environment variables that would point the tracker at another database than the project's.
/// Both br and bd treat an empty value as unset.
const DB_OVERRIDES: [&str; 4] = ["BD_DB", "BD_DATABASE", "BEADS_DB", "BEADS_JSONL"];

/// One tracker binary bound to one project.
#[derive(Debug, Clone)]
pub(crate) struct BeadsCli {
    /// What to execute: `br`/`bd` (looked up on PATH) or an explicit path.
    program: PathBuf,
    /// Short name used in error messages (`br`, `bd`).
    name: &'static str,
    project: PathBuf,
    timeout: Duration,
    env: Vec<(String, String)>,
}

impl BeadsCli {
    /// Runs `program` with cwd = `project`, `BEADS_DIR=<project>/.beads` (so neither tool walks
    /// up into a parent directory's `.beads`) and every database override cleared.
    pub(crate) fn new(
        name: &'static str,
        program: Option<&Path>,
        project: &Path,
        timeout: Duration,
    ) -> Self {
        let mut env = vec![
            (
                "BEADS_DIR".to_string(),
                project.join(".beads").to_string_lossy().into_owned(),
            ),
            ("NO_COLOR".to_string(), "1".to_string()),
            ("RUST_LOG".to_string(), "error".to_string()),
        ];
        env.extend(DB_OVERRIDES.iter().map(|k| (k.to_string(), String::new())));
        BeadsCli {
            program: program
                .map(Path::to_path_buf)
                .unwrap_or_else(|| PathBuf::from(name)),
            name,
            project: project.to_path_buf(),
            timeout,
            env,
        }
    }

    /// `ready`, shared by br and bd: every ready bead (no page limit), open ones only (older bd
    /// also lists in_progress beads), most urgent first.
    pub(crate) fn ready(&self) -> Result<Vec<Bead>, TrackerError> {
        self.ready_sorted(Some("priority"))
    }

    /// [`BeadsCli::ready`] with `--sort=<sort>`, or the tracker's default order.
    pub(crate) fn ready_sorted(&self, sort: Option<&str>) -> Result<Vec<Bead>, TrackerError> {
        let mut args: Vec<String> = vec!["ready".into(), "--json".into()];
        args.extend(sort.map(|s| format!("--sort={s}")));
        args.push("--limit=0".into());
        let mut beads: Vec<_> = self
            .issues(&args)?
            .into_iter()
            .map(|i| i.bead)
            .filter(|b| b.status == BeadStatus::Open)
            .collect();
        sort_by_urgency(&mut beads);
        Ok(beads)
    }

    /// `list`, shared by br and bd: every bead, closed ones included, no page limit.
    pub(crate) fn list_all(&self) -> Result<Vec<Bead>, TrackerError> {
        let args: Vec<String> = ["list", "--json", "--all", "--limit=0"]
            .map(String::from)
            .into();
        Ok(self.issues(&args)?.into_iter().map(|i| i.bead).collect())
    }

    /// `create`, shared by br and bd: one open bead, its id read from the printed issue.
    pub(crate) fn create(
        &self,
        title: &str,
        description: &str,
        priority: u8,
    ) -> Result<BeadId, TrackerError> {
        let mut args = vec![
            "create".to_string(),
            format!("--title={}", one_line(title)),
            format!("--priority={}", priority.min(4)),
        ];
        if !description.trim().is_empty() {
            args.push(format!("--description={description}"));
        }
        args.push("--json".to_string());
        let out = self.run_ok(&args)?;
        let issues = parse_issues(&out.stdout).map_err(|d| self.garbage(&args, d))?;
        match issues.as_slice() {
            [one] => Ok(one.bead.id.clone()),
            _ => Err(self.garbage(
                &args,
                format!("expected one created issue, got {}", issues.len()),
            )),
        }
    }

    /// Adds an environment variable for every call.
    pub(crate) fn with_env(mut self, key: &str, value: &str) -> Self {
        self.env.retain(|(k, _)| k != key);
        self.env.push((key.to_string(), value.to_string()));
        self
    }

    /// `br show x --json`, for error messages.
    pub(crate) fn describe(&self, args: &[String]) -> String {
        let mut s = self.name.to_string();
        for a in args {
            s.push(' ');
            if a.is_empty() || a.contains(char::is_whitespace) {
                s.push_str(&format!("{a:?}"));
            } else {
                s.push_str(a);
            }
        }
        s
    }

    /// Runs the tracker. Only "could not run it" and "it did not finish" are errors here; the
    /// exit status is the caller's to judge.
    pub(crate) fn run(&self, args: &[String]) -> Result<Output, TrackerError> {
        let mut argv: Vec<OsString> = Vec::with_capacity(args.len() + 1);
        argv.push(self.program.clone().into_os_string());
        argv.extend(args.iter().map(OsString::from));
        // Never run beside a link in its folder: br would refuse, or read through it.
        super::links::remove_links(&self.project.join(".beads"));
        let mut inv = Invocation::new(argv)
            .cwd(&self.project)
            .timeout(self.timeout);
        for (k, v) in &self.env {
            inv = inv.env(k, v);
        }
        let out = inv.run().map_err(|e| match e {
            RunError::NotFound { .. } => TrackerError::NotInstalled {
                program: self.program.to_string_lossy().into_owned(),
            },
            RunError::Spawn { source, .. }
                if source.kind() == std::io::ErrorKind::PermissionDenied =>
            {
                TrackerError::NotInstalled {
                    program: self.program.to_string_lossy().into_owned(),
                }
            }
            RunError::Spawn { program, source } => {
                TrackerError::Io(format!("cannot start `{program}`: {source}"))
            }
        })?;
        if out.timed_out {
            return Err(TrackerError::Timeout {
                command: self.describe(args),
                secs: self.timeout.as_secs().max(1),
            });
        }
        Ok(out)
    }

    /// Runs the tracker and insists on exit 0; anything else is [`TrackerError::Failed`] carrying
    /// the tracker's own message.
    pub(crate) fn run_ok(&self, args: &[String]) -> Result<Output, TrackerError> {
        let out = self.run(args)?;
        if out.success() {
            Ok(out)
        } else {
            Err(self.failed(args, &out))
        }
    }

    pub(crate) fn failed(&self, args: &[String], out: &Output) -> TrackerError {
        let info = ErrorInfo::from_output(out);
        TrackerError::Failed {
            command: self.describe(args),
            code: out
                .code
                .map_or_else(|| "signal".to_string(), |c| c.to_string()),
            message: info.message,
        }
    }

    pub(crate) fn garbage(&self, args: &[String], detail: impl Into<String>) -> TrackerError {
        TrackerError::Garbage {
            command: self.describe(args),
            detail: detail.into(),
        }
    }

    /// Runs a read command and parses the issues it prints.
    pub(crate) fn issues(&self, args: &[String]) -> Result<Vec<RawIssue>, TrackerError> {
        let out = self.run_ok(args)?;
        parse_issues(&out.stdout).map_err(|d| self.garbage(args, d))
    }
}

/// A tracker's error, as well as it can be read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ErrorInfo {
    /// br's machine code (`ISSUE_NOT_FOUND`, `VALIDATION_FAILED`, …); bd has none.
    pub code: Option<String>,
    pub message: String,
    /// br's `context.searched_id` and friends.
    pub context: Option<Value>,
}

impl ErrorInfo {
    /// br and bd print `--json` errors on stdout (`{"error": {...}}` / `{"error": "..."}`), bd
    /// sometimes on stderr, and both print plain text on stderr otherwise.
    pub(crate) fn from_output(out: &Output) -> ErrorInfo {
        for text in [&out.stdout, &out.stderr] {
            if let Ok(docs) = json_documents(text) {
                for doc in docs.iter().rev() {
                    let doc = unwrap_envelope(doc);
                    if let Some(info) = ErrorInfo::from_json(doc) {
                        return info;
                    }
                }
            }
        }
        let message = [out.stderr.trim(), out.stdout.trim()]
            .into_iter()
            .find(|s| !s.is_empty())
            .map(|s| truncate(s, 2000))
            .unwrap_or_else(|| "no output".to_string());
        ErrorInfo {
            code: None,
            message,
            context: None,
        }
    }

    fn from_json(doc: &Value) -> Option<ErrorInfo> {
        match doc.get("error")? {
            Value::String(s) => Some(ErrorInfo {
                code: None,
                message: s.clone(),
                context: None,
            }),
            Value::Object(o) => Some(ErrorInfo {
                code: o.get("code").and_then(Value::as_str).map(str::to_string),
                message: o
                    .get("message")
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .unwrap_or_else(|| Value::Object(o.clone()).to_string()),
                context: o.get("context").cloned().filter(|c| !c.is_null()),
            }),
            _ => None,
        }
    }

    /// Whether the tracker said the bead does not exist.
    pub(crate) fn is_not_found(&self) -> bool {
        if self.code.as_deref() == Some("ISSUE_NOT_FOUND") {
            return true;
        }
        let m = self.message.to_ascii_lowercase();
        m.contains("not found") || m.contains("no issue found") || m.contains("does not exist")
    }
}

fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// Every JSON document in `text` (br prints two on some failures). Blank output is no documents.
pub(crate) fn json_documents(text: &str) -> Result<Vec<Value>, String> {
    let trimmed = text.trim_start_matches('\u{feff}');
    serde_json::Deserializer::from_str(trimmed)
        .into_iter::<Value>()
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{e} in {:?}", truncate(text.trim(), 200)))
}

/// bd's optional `{"schema_version": N, "data": <payload>}` envelope.
fn unwrap_envelope(v: &Value) -> &Value {
    match v {
        Value::Object(o) if o.contains_key("schema_version") && o.contains_key("data") => {
            &o["data"]
        }
        _ => v,
    }
}

/// One issue row: the bead plus what the adapters need beyond it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RawIssue {
    pub bead: Bead,
    /// br's optimistic-concurrency token (`--if-unchanged`).
    pub updated_at: Option<String>,
}

/// Parses the issues in a read command's output: an array, `{"issues": [...]}`, one issue
/// object, bd's envelope around any of those, or nothing at all (no issues).
pub(crate) fn parse_issues(stdout: &str) -> Result<Vec<RawIssue>, String> {
    let docs = json_documents(stdout)?;
    let mut issues = Vec::new();
    for doc in &docs {
        let doc = unwrap_envelope(doc);
        if ErrorInfo::from_json(doc).is_some() {
            return Err(format!("an error object where issues were expected: {doc}"));
        }
        let rows: Vec<&Value> = match doc {
            Value::Array(a) => a.iter().collect(),
            Value::Object(o) if o.get("issues").is_some_and(Value::is_array) => o["issues"]
                .as_array()
                .map(|a| a.iter().collect())
                .unwrap_or_default(),
            Value::Object(o) if o.contains_key("id") => vec![doc],
            Value::Null => Vec::new(),
            other => {
                return Err(format!(
                    "expected issues, found {}",
                    truncate(&other.to_string(), 200)
                ))
            }
        };
        for row in rows {
            issues.push(parse_issue(row)?);
        }
    }
    Ok(issues)
}

/// Dependency types that hold a bead back (3.3). `parent-child` is hierarchy, `related` and
/// `discovered-from` are links; none of them blocks work.
fn is_blocking(dep_type: Option<&str>) -> bool {
    match dep_type.map(|t| t.trim().to_ascii_lowercase()) {
        None => true,
        Some(t) => matches!(
            t.as_str(),
            "" | "blocks" | "conditional-blocks" | "waits-for"
        ),
    }
}

/// Maps one issue object onto a [`Bead`].
pub(crate) fn parse_issue(row: &Value) -> Result<RawIssue, String> {
    let obj = row.as_object().ok_or_else(|| {
        format!(
            "expected an issue object, found {}",
            truncate(&row.to_string(), 200)
        )
    })?;
    let raw_id = obj
        .get("id")
        .and_then(Value::as_str)
        .ok_or_else(|| format!("issue without an id: {}", truncate(&row.to_string(), 200)))?;
    let id = BeadId::new(raw_id).map_err(|e| e.to_string())?;
    let text = |key: &str| obj.get(key).and_then(Value::as_str).map(str::to_string);
    let status = text("status").map_or(BeadStatus::Unknown, |s| BeadStatus::parse(&s));
    let priority = match obj.get("priority") {
        None | Some(Value::Null) => 2,
        Some(v) => {
            parse_priority(v).ok_or_else(|| format!("bead {id}: priority {v} is not 0-4"))?
        }
    };
    let mut dependencies = Vec::new();
    if let Some(Value::Array(deps)) = obj.get("dependencies") {
        for dep in deps {
            let (dep_id, dep_type) = match dep {
                Value::String(s) => (Some(s.as_str()), None),
                Value::Object(d) => (
                    d.get("depends_on_id")
                        .or_else(|| d.get("id"))
                        .and_then(Value::as_str),
                    ["dependency_type", "dep_type", "type"]
                        .iter()
                        .find_map(|k| d.get(*k).and_then(Value::as_str)),
                ),
                _ => (None, None),
            };
            let dep_id =
                dep_id.ok_or_else(|| format!("bead {id}: dependency without an id: {dep}"))?;
            if !is_blocking(dep_type) || dep_id == id.as_str() {
                continue;
            }
            let dep_id = BeadId::new(dep_id).map_err(|e| format!("bead {id}: {e}"))?;
            if !dependencies.contains(&dep_id) {
                dependencies.push(dep_id);
            }
        }
    }
    Ok(RawIssue {
        bead: Bead {
            title: text("title").unwrap_or_default(),
            status,
            priority,
            description: text("description").unwrap_or_default(),
            dependencies,
            assignee: text("assignee")
                .map(|a| a.trim().to_string())
                .filter(|a| !a.is_empty()),
            labels: obj
                .get("labels")
                .and_then(Value::as_array)
                .map(|l| {
                    l.iter()
                        .filter_map(|x| x.as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default(),
            url: None,
            id,
        },
        updated_at: text("updated_at"),
    })
}

/// `2`, `"2"`, `"P2"`; above 4 is clamped to 4 (backlog), negative or non-numeric is rejected.
fn parse_priority(v: &Value) -> Option<u8> {
    let n = match v {
        Value::Number(n) => n.as_i64()?,
        Value::String(s) => s
            .trim()
            .trim_start_matches(['P', 'p'])
            .parse::<i64>()
            .ok()?,
        _ => return None,
    };
    (n >= 0).then(|| n.min(4) as u8)
}

/// Most urgent first; the tracker's own order breaks ties (the sort is stable).
pub(crate) fn sort_by_urgency(beads: &mut [Bead]) {
    beads.sort_by_key(|b| b.priority);
}

/// The one issue with exactly this id among `issues` (trackers resolve partial ids; braids only
/// ever acts on the exact bead it asked for).
pub(crate) fn find_exact(issues: Vec<RawIssue>, id: &BeadId) -> Option<RawIssue> {
    issues.into_iter().find(|i| &i.bead.id == id)
}

/// Keeps a free-text argument on one line, for titles and reasons passed as argv: control
/// characters (a NUL cannot be an argument at all; an agent's report may hold one) become
/// spaces, and runs of whitespace one space.
pub(crate) fn one_line(s: &str) -> String {
    s.split(|c: char| c.is_control() || c.is_whitespace())
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_keeps_no_control_character() {
        assert_eq!(one_line("a\r\n  b\tc\0d\u{1b}[0m e"), "a b c d [0m e");
        assert_eq!(one_line("\0\n"), "");
    }

    fn out(code: i32, stdout: &str, stderr: &str) -> Output {
        Output {
            code: Some(code),
            stdout: stdout.into(),
            stderr: stderr.into(),
            timed_out: false,
        }
    }

    #[test]
    fn error_shapes() {
        let br = out(3, "{\"error\":{\"code\":\"ISSUE_NOT_FOUND\",\"message\":\"Issue not found: p-x\",\"context\":{\"searched_id\":\"p-x\"}}}\n", "");
        let e = ErrorInfo::from_output(&br);
        assert_eq!(e.code.as_deref(), Some("ISSUE_NOT_FOUND"));
        assert!(e.is_not_found() && e.message == "Issue not found: p-x");
        // br close prints a receipt and then the error.
        let two = out(3, "{\"closed\":[],\"skipped\":[]}\n{\"error\":{\"code\":\"NOTHING_TO_DO\",\"message\":\"Nothing to do\"}}", "");
        assert_eq!(
            ErrorInfo::from_output(&two).code.as_deref(),
            Some("NOTHING_TO_DO")
        );
        let bd = out(
            1,
            "{\n  \"error\": \"issue bd-x not found\",\n  \"schema_version\": 1\n}\n",
            "",
        );
        assert!(ErrorInfo::from_output(&bd).is_not_found());
        let env = out(
            1,
            "{\"schema_version\":1,\"data\":{\"error\":\"boom\"}}",
            "",
        );
        assert_eq!(ErrorInfo::from_output(&env).message, "boom");
        let text = out(1, "", "Error claiming bd-1: already claimed by alice\n");
        assert_eq!(
            ErrorInfo::from_output(&text).message,
            "Error claiming bd-1: already claimed by alice"
        );
        assert_eq!(ErrorInfo::from_output(&out(1, "", "")).message, "no output");
    }

    #[test]
    fn issue_shapes() {
        let list =
            r#"{"issues":[{"id":"p-1","title":"A","status":"open","priority":1}],"total":1}"#;
        assert_eq!(parse_issues(list).unwrap()[0].bead.priority, 1);
        let env = r#"{"schema_version":1,"data":[{"id":"p-1","title":"A","status":"in_progress","priority":"P0","assignee":"me"}]}"#;
        let b = &parse_issues(env).unwrap()[0].bead;
        assert_eq!(
            (b.status, b.priority, b.assignee.as_deref()),
            (BeadStatus::InProgress, 0, Some("me"))
        );
        assert!(parse_issues("").unwrap().is_empty());
        assert!(parse_issues("[]").unwrap().is_empty());
        assert!(parse_issues("not json").is_err());
        assert!(parse_issues(r#"[{"title":"no id"}]"#).is_err());
        assert!(parse_issues(r#"[{"id":"../etc","title":"x"}]"#).is_err());
        assert!(parse_issues(r#"[{"id":"p-1","priority":-1}]"#).is_err());
        assert_eq!(
            parse_issues(r#"[{"id":"p-1","priority":9}]"#).unwrap()[0]
                .bead
                .priority,
            4
        );
    }

    #[test]
    fn c3_3_only_blocking_dependencies_count() {
        let show = r#"[{"id":"p-3","title":"C","status":"open","priority":2,"assignee":"",
            "labels":["size:L", 7, "backend"],
            "dependencies":[
              {"id":"p-1","status":"open","dependency_type":"blocks"},
              {"id":"p-e","status":"open","dependency_type":"parent-child"},
              {"id":"p-r","dependency_type":"related"},
              {"issue_id":"p-3","depends_on_id":"p-2","type":"blocks"},
              {"id":"p-4","dep_type":"waits-for"},
              "p-5"
            ]}]"#;
        let b = &parse_issues(show).unwrap()[0].bead;
        let deps: Vec<&str> = b.dependencies.iter().map(BeadId::as_str).collect();
        assert_eq!(deps, ["p-1", "p-2", "p-4", "p-5"]);
        assert_eq!(b.assignee, None, "an empty assignee is no assignee");
        assert_eq!(b.labels, ["size:L", "backend"], "labels that are text");
    }
}
