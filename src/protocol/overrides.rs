//! A project's `.ai/step-rules.yaml` (seed 002, "Custom Rules Table"): the defaults
//! overridden field by field. Read from the project root only: an agent's workspace is the
//! agent's to write, and a rules file there would let it rewrite its own routing.
//!
//! Every mistake is a [`Problem`] with the line it is on and the fix: an unknown step, field or
//! reason, a route to a step that does not exist, a value of the wrong kind, and a
//! `post_check` written as a plain string (a shell string runs only when the project says so,
//! as `{shell: "…"}`). The YAML is parsed by serde-saphyr; lines are found by walking the
//! block structure of the text along the key path, since the values carry no positions.

use std::path::Path;

use serde_json::{Map, Value};

use super::rules::{PostCheck, Role, Rules, Runner};
use super::step::{Reason, Step};
use crate::format::project::test_command::{check_words, TestCommand};

pub const FILE: &str = ".ai/step-rules.yaml";

/// One mistake in the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// 1-based; 0 when the file as a whole is the problem.
    pub line: usize,
    pub message: String,
    pub fix: String,
}

impl Problem {
    /// One sentence naming the file, the line and the fix.
    pub fn sentence(&self) -> String {
        match self.line {
            0 => format!("{FILE}: {}; {}", self.message, self.fix),
            n => format!("{FILE}:{n}: {}; {}", self.message, self.fix),
        }
    }
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.sentence())
    }
}

/// The rules of the project at `root`: the defaults, overridden by its rules file if any.
pub fn load(root: &Path) -> Result<Rules, Problem> {
    match crate::system::atomic::read(&root.join(FILE)) {
        Ok(bytes) => parse(&String::from_utf8_lossy(&bytes)).map_err(|mut p| p.remove(0)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Rules::defaults()),
        Err(e) => Err(Problem {
            line: 0,
            message: format!("cannot be read ({e})"),
            fix: "check its permissions".into(),
        }),
    }
}

const FIELDS: &[&str] = &[
    "display_name",
    "next_on_pass",
    "next_on_fail",
    "on_fail",
    "max_attempts",
    "timeout_min",
    "requires_human",
    "claude_reads",
    "claude_writes",
    "post_check",
    "test_command",
    "step_instruction",
    "treat_failing_as_pass",
    "runner",
    "team_roles",
];

/// The defaults merged with `text`; every problem found, in line order.
pub fn parse(text: &str) -> Result<Rules, Vec<Problem>> {
    let mut rules = Rules::defaults();
    let lines = Lines::new(text);
    let value: Value = match serde_saphyr::from_str(text) {
        Ok(v) => v,
        Err(e) => {
            let msg = e.to_string();
            return Err(vec![Problem {
                line: line_in(&msg).unwrap_or(1),
                message: format!("is not valid YAML ({})", first_line(&msg)),
                fix: "correct the YAML (`steps:` then one mapping per step)".into(),
            }]);
        }
    };
    let mut problems = Vec::new();
    let top = match value {
        Value::Null => return Ok(rules),
        Value::Object(m) => m,
        _ => {
            return Err(vec![Problem {
                line: 1,
                message: "is not a mapping".into(),
                fix: "start the file with `steps:` and one mapping per step under it".into(),
            }])
        }
    };
    for key in top.keys().filter(|k| *k != "steps") {
        problems.push(Problem {
            line: lines.find(&[key]),
            message: format!("unknown top-level key `{key}`"),
            fix: "put every override under `steps:`".into(),
        });
    }
    let steps = match top.get("steps") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(_) => {
            problems.push(Problem {
                line: lines.find(&["steps"]),
                message: "`steps` is not a mapping".into(),
                fix: "write one mapping per step under `steps:`".into(),
            });
            Map::new()
        }
    };
    for (name, body) in &steps {
        let at = |path: &[&str]| {
            let mut p = vec!["steps", name.as_str()];
            p.extend_from_slice(path);
            lines.find(&p)
        };
        let Some(step) = Step::parse(name).filter(|s| *s != Step::Done) else {
            problems.push(Problem {
                line: at(&[]),
                message: format!("unknown step `{name}`"),
                fix: format!("use one of {}", Step::spellings().replace(", done", "")),
            });
            continue;
        };
        let fields = match body {
            Value::Null => continue,
            Value::Object(m) => m,
            _ => {
                problems.push(Problem {
                    line: at(&[]),
                    message: format!("step `{name}` is not a mapping"),
                    fix: "give its fields as `field: value` lines under it".into(),
                });
                continue;
            }
        };
        let rule = rules
            .steps
            .get_mut(&step)
            .expect("every step but done has a rule");
        let mut roles: Option<Vec<(usize, Role)>> = None;
        for (field, v) in fields {
            let line = at(&[field]);
            let mut bad = |message: String, fix: &str| {
                problems.push(Problem {
                    line,
                    message,
                    fix: fix.to_string(),
                })
            };
            if !FIELDS.contains(&field.as_str()) {
                bad(
                    format!("unknown field `{field}` in step `{name}`"),
                    &format!("use one of {}", FIELDS.join(", ")),
                );
                continue;
            }
            match field.as_str() {
                "display_name" | "step_instruction" => match v.as_str() {
                    Some(s) if field == "display_name" => rule.display_name = s.to_string(),
                    Some(s) => rule.step_instruction = s.to_string(),
                    None => bad(
                        format!("`{field}` of `{name}` is not text"),
                        "write it as a string",
                    ),
                },
                "next_on_pass" => match route(v, true) {
                    Ok(to) => rule.next_on_pass = to,
                    Err(e) => bad(
                        format!("`next_on_pass` of `{name}` {e}"),
                        "route to one of the steps, or done",
                    ),
                },
                "next_on_fail" => match route(v, false) {
                    Ok(to) => rule.on_fail.default = Some(to),
                    Err(e) => bad(
                        format!("`next_on_fail` of `{name}` {e}"),
                        "route to one of the steps but done",
                    ),
                },
                "on_fail" => {
                    let Some(m) = v.as_object() else {
                        bad(
                            format!("`on_fail` of `{name}` is not a mapping"),
                            "write `default:` and reasons, each with a step",
                        );
                        continue;
                    };
                    for (reason, to) in m {
                        let line = at(&["on_fail", reason]);
                        let target = match route(to, false) {
                            Ok(t) => t,
                            Err(e) => {
                                problems.push(Problem {
                                    line,
                                    message: format!("`on_fail.{reason}` of `{name}` {e}"),
                                    fix: "route to one of the steps but done".into(),
                                });
                                continue;
                            }
                        };
                        if reason == "default" {
                            rule.on_fail.default = Some(target);
                        } else if let Some(r) = Reason::parse(reason) {
                            rule.on_fail.by_reason.insert(r, target);
                        } else {
                            problems.push(Problem {
                                line,
                                message: format!(
                                    "unknown reason `{reason}` in `on_fail` of `{name}`"
                                ),
                                fix: format!("use default or one of {}", Reason::spellings()),
                            });
                        }
                    }
                }
                "max_attempts" | "timeout_min" => {
                    match v.as_u64().filter(|n| *n >= 1 && *n <= 10_000) {
                        Some(n) if field == "max_attempts" => rule.max_attempts = n as u32,
                        Some(n) => rule.timeout_min = n as u32,
                        None => bad(
                            format!("`{field}` of `{name}` is {v}, not a whole number from 1"),
                            "write a whole number, 1 or more",
                        ),
                    }
                }
                "requires_human" | "treat_failing_as_pass" => match v.as_bool() {
                    Some(b) if field == "requires_human" => rule.requires_human = b,
                    Some(b) => rule.treat_failing_as_pass = b,
                    None => bad(
                        format!("`{field}` of `{name}` is {v}, not true or false"),
                        "write true or false",
                    ),
                },
                "claude_reads" | "claude_writes" => match string_list(v) {
                    Some(list) if field == "claude_reads" => rule.claude_reads = list,
                    Some(list) => rule.claude_writes = list,
                    None => bad(
                        format!("`{field}` of `{name}` is not a list of paths"),
                        "write a list, e.g. [docs/sdd.md]",
                    ),
                },
                "post_check" => match post_check(v) {
                    Ok(pc) => rule.post_check = pc,
                    Err((message, fix)) => bad(format!("`post_check` of `{name}` {message}"), fix),
                },
                "test_command" => match test_command(v) {
                    Ok(tc) => rule.test_command = tc,
                    Err((message, fix)) => {
                        bad(format!("`test_command` of `{name}` {message}"), fix)
                    }
                },
                "runner" => match v.as_str() {
                    Some("braids") => rule.runner = Runner::Braids,
                    Some("executor") => rule.runner = Runner::Executor,
                    _ => bad(
                        format!("`runner` of `{name}` is {v}"),
                        "write braids or executor",
                    ),
                },
                "team_roles" => {
                    let Some(m) = v.as_object() else {
                        bad(
                            format!("`team_roles` of `{name}` is not a mapping"),
                            "write one `role: {claude_reads: […], claude_writes: […]}` per role",
                        );
                        continue;
                    };
                    let mut got = Vec::new();
                    for (role, spec) in m {
                        let line = at(&["team_roles", role]);
                        match team_role(role, spec) {
                            Ok(r) => got.push((line, r)),
                            Err(message) => problems.push(Problem {
                                line,
                                message: format!("team role `{role}` of `{name}` {message}"),
                                fix:
                                    "give it claude_reads and claude_writes lists, and nothing else"
                                        .into(),
                            }),
                        }
                    }
                    roles = Some(got);
                }
                _ => unreachable!("every field in FIELDS is handled"),
            }
        }
        if let Some(mut got) = roles {
            // In the order written (the parsed mapping is sorted by name).
            got.sort_by_key(|(line, _)| *line);
            rule.team_roles = got.into_iter().map(|(_, r)| r).collect();
        }
    }
    check_routes(&rules, &lines, &mut problems);
    if problems.is_empty() {
        Ok(rules)
    } else {
        problems.sort_by_key(|p| p.line);
        Err(problems)
    }
}

/// A human step cannot be a team step, and nothing may route to `bootstrap` from the chain:
/// the checks a table as a whole needs beyond its single values.
fn check_routes(rules: &Rules, lines: &Lines, problems: &mut Vec<Problem>) {
    for rule in rules.steps.values() {
        if rule.requires_human && !rule.team_roles.is_empty() {
            problems.push(Problem {
                line: lines.find(&["steps", rule.step.as_str(), "team_roles"]),
                message: format!(
                    "`{}` needs a person, so it has no executors to form a team",
                    rule.step
                ),
                fix: "remove its team_roles".into(),
            });
        }
    }
}

fn route(v: &Value, done_ok: bool) -> Result<Step, String> {
    let Some(s) = v.as_str() else {
        return Err(format!("is {v}, not a step"));
    };
    match Step::parse(s.trim()) {
        Some(Step::Done) if !done_ok => {
            Err("routes to `done`, which a failure cannot reach".into())
        }
        Some(step) => Ok(step),
        None => Err(format!(
            "routes to `{s}`, which is not a step (steps: {})",
            Step::spellings()
        )),
    }
}

fn string_list(v: &Value) -> Option<Vec<String>> {
    v.as_array()?
        .iter()
        .map(|x| x.as_str().map(String::from))
        .collect()
}

type Fix = (String, &'static str);

fn post_check(v: &Value) -> Result<Option<PostCheck>, Fix> {
    match v {
        Value::Null => Ok(None),
        Value::Array(_) => match string_list(v) {
            Some(argv) if !argv.is_empty() && !argv[0].trim().is_empty() => Ok(Some(PostCheck::Argv(argv))),
            Some(_) => Err(("is an empty command".into(), "name the program and its arguments, e.g. [cargo, test]")),
            None => Err(("has an argument that is not text".into(), "quote every argument")),
        },
        Value::Object(m) => match (m.get("shell").and_then(Value::as_str), m.len()) {
            (Some(s), 1) if !s.trim().is_empty() => Ok(Some(PostCheck::Shell(s.to_string()))),
            _ => Err(("is a mapping other than {shell: \"…\"}".into(), "write an argv list, or {shell: \"command\"} to run it through sh")),
        },
        Value::String(_) => Err((
            "is a plain string, which braids never hands to a shell unasked".into(),
            "write it as an argv list ([go, vet, ./...]), or as {shell: \"…\"} to run it through sh",
        )),
        _ => Err((format!("is {v}"), "write an argv list, or {shell: \"…\"}")),
    }
}

/// `test_command:` is an argv list, `{shell: "…"}`, or either as `{argv: […], report: path}` /
/// `{shell: "…", report: path}` when the runner writes a JUnit XML report.
fn test_command(v: &Value) -> Result<Option<TestCommand>, Fix> {
    const FIX: &str =
        "write an argv list ([cargo, test]), {shell: \"…\"}, and `report: <junit.xml>` beside argv or shell if the runner writes one";
    let report = |m: &Map<String, Value>| -> Result<Option<String>, Fix> {
        match m.get("report") {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(r)) if !r.trim().is_empty() => Ok(Some(r.trim().to_string())),
            Some(other) => Err((format!("has report {other}, not a path"), FIX)),
        }
    };
    match v {
        Value::Null => Ok(None),
        Value::Array(_) => {
            let argv = string_list(v)
                .ok_or_else(|| ("has an argument that is not text".to_string(), FIX))?;
            check_words(&argv)?;
            Ok(Some(TestCommand::argv(argv, None)))
        }
        Value::Object(m) => {
            if let Some(k) = m
                .keys()
                .find(|k| !["argv", "shell", "report"].contains(&k.as_str()))
            {
                return Err((format!("has an unknown key `{k}`"), FIX));
            }
            let report = report(m)?;
            match (m.get("argv"), m.get("shell").and_then(Value::as_str)) {
                (Some(a), None) => {
                    let argv = string_list(a).ok_or_else(|| {
                        ("has an argv that is not a list of text".to_string(), FIX)
                    })?;
                    check_words(&argv)?;
                    Ok(Some(TestCommand::argv(argv, report)))
                }
                (None, Some(s)) if !s.trim().is_empty() => Ok(Some(TestCommand::shell(s, report))),
                _ => Err(("needs exactly one of argv or shell".into(), FIX)),
            }
        }
        Value::String(_) => Err((
            "is a plain string, which braids never hands to a shell unasked".into(),
            "write it as an argv list ([cargo, test]), or as {shell: \"…\"} to run it through sh",
        )),
        _ => Err((format!("is {v}"), FIX)),
    }
}

fn team_role(name: &str, spec: &Value) -> Result<Role, String> {
    let m = spec.as_object().ok_or("is not a mapping")?;
    if let Some(k) = m
        .keys()
        .find(|k| *k != "claude_reads" && *k != "claude_writes")
    {
        return Err(format!("has an unknown field `{k}`"));
    }
    let list = |k: &str| match m.get(k) {
        None => Some(Vec::new()),
        Some(v) => string_list(v),
    };
    Ok(Role {
        name: name.to_string(),
        claude_reads: list("claude_reads").ok_or("has claude_reads that is not a list of paths")?,
        claude_writes: list("claude_writes")
            .ok_or("has claude_writes that is not a list of paths")?,
    })
}

/// "... at line 3 column 7" → 3.
fn line_in(msg: &str) -> Option<usize> {
    let at = msg.find("line ")?;
    let digits: String = msg[at + 5..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or(s)
}

/// The text's lines, for finding where a key path is written (block style; a key inside a
/// flow mapping is found at its parent's line).
struct Lines<'a> {
    lines: Vec<(usize, &'a str)>,
}

impl<'a> Lines<'a> {
    fn new(text: &'a str) -> Lines<'a> {
        let lines = text
            .lines()
            .map(|l| {
                let indent = l.len() - l.trim_start().len();
                (indent, l.trim())
            })
            .collect();
        Lines { lines }
    }

    /// The 1-based line of `path`, as deep as it can be followed; 1 when not even its first
    /// key is found.
    fn find(&self, path: &[&str]) -> usize {
        let mut found = 0;
        let mut from = 0;
        let mut parent_indent: Option<usize> = None;
        for key in path {
            let mut hit = None;
            for (i, (indent, text)) in self.lines.iter().enumerate().skip(from) {
                if text.is_empty() || text.starts_with('#') {
                    continue;
                }
                if parent_indent.is_some_and(|p| *indent <= p) && i > from {
                    break;
                }
                let k = text.trim_start_matches("- ");
                let named = [
                    format!("{key}:"),
                    format!("\"{key}\":"),
                    format!("'{key}':"),
                ];
                if named.iter().any(|n| k.starts_with(n.as_str())) {
                    hit = Some((i, *indent));
                    break;
                }
            }
            let Some((i, indent)) = hit else {
                break;
            };
            found = i + 1;
            from = i + 1;
            parent_indent = Some(indent);
        }
        found.max(1)
    }
}

#[cfg(test)]
mod tests;
