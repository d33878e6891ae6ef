//! What Slurm's commands print, read without judgement: `squeue`'s rows, `scontrol show job -o`
//! and `sacct -P` lines, and what a job's state means for braids. Pure, so the odd lines a
//! real cluster prints are table tests here rather than surprises in a tick.

use chrono::{DateTime, Local, NaiveDateTime, TimeZone, Utc};

use crate::model::SessionLabel;

/// The `squeue --format` braids asks for: job id, state, reason, submit time, start time (the
/// expected one while pending), then the name last, so nothing in it can shift the others.
pub const FORMAT: &str = "%i|%T|%r|%V|%S|%j";

/// One job as `squeue` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub job: String,
    pub state: String,
    pub reason: String,
    pub submitted: Option<DateTime<Utc>>,
    /// When it started running; Slurm's `--time` counts from here.
    pub started: Option<DateTime<Utc>>,
    /// `None` for a job whose name is not a braids label (someone else's job).
    pub label: Option<SessionLabel>,
}

/// Reads `squeue --noheader --format=FORMAT`; lines that do not have its shape are skipped
/// (and returned, for a warning).
pub fn parse_squeue(text: &str) -> (Vec<Row>, Vec<String>) {
    let mut rows = Vec::new();
    let mut odd = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let parts: Vec<&str> = line.splitn(6, '|').collect();
        let [job, state, reason, submitted, started, name] = parts[..] else {
            odd.push(line.to_string());
            continue;
        };
        let job = job.trim();
        if job.is_empty() || !job.bytes().all(|b| b.is_ascii_digit() || b == b'_') {
            odd.push(line.to_string());
            continue;
        }
        rows.push(Row {
            job: job.to_string(),
            state: state.trim().to_string(),
            reason: reason.trim().to_string(),
            submitted: slurm_time(submitted.trim()),
            started: slurm_time(started.trim()),
            label: SessionLabel::parse(name.trim()).ok(),
        });
    }
    (rows, odd)
}

/// Slurm prints times in the cluster's local time, without a zone.
pub fn slurm_time(raw: &str) -> Option<DateTime<Utc>> {
    let naive = NaiveDateTime::parse_from_str(raw, "%Y-%m-%dT%H:%M:%S").ok()?;
    Local
        .from_local_datetime(&naive)
        .earliest()
        .map(|t| t.with_timezone(&Utc))
}

/// Whether a job in this state still holds its bead: queued, running or being cleaned up.
pub fn is_live(state: &str) -> bool {
    matches!(
        base_state(state),
        "PENDING"
            | "RUNNING"
            | "CONFIGURING"
            | "COMPLETING"
            | "SUSPENDED"
            | "REQUEUED"
            | "REQUEUE_HOLD"
            | "REQUEUE_FED"
            | "RESIZING"
            | "SIGNALING"
            | "STAGE_OUT"
            | "STOPPED"
    )
}

/// Waiting for resources: no agent runs yet.
pub fn is_queued(state: &str) -> bool {
    matches!(base_state(state), "PENDING" | "CONFIGURING")
}

/// `sacct` may print `CANCELLED by 0`; `squeue` a plain word.
fn base_state(state: &str) -> &str {
    state.split_whitespace().next().unwrap_or("")
}

/// Why Slurm itself ended a job, for people; `None` when the worker ended on its own
/// (COMPLETED, FAILED: the worker reported that itself) or braids cancelled it.
pub fn ended_why(state: &str, reason: &str) -> Option<String> {
    let base = base_state(state);
    let what = match base {
        "TIMEOUT" => "it reached its time limit (WorkerTimeout)",
        "OUT_OF_MEMORY" => "it ran out of memory (raise Memory: in PROJECT.md)",
        "NODE_FAIL" => "its node failed",
        "BOOT_FAIL" => "its node failed to boot",
        "PREEMPTED" => "it was preempted",
        "DEADLINE" => "it reached its deadline",
        "CANCELLED" => "it was cancelled outside braids",
        _ => return None,
    };
    let reason = reason.trim();
    let detail = if reason.is_empty() || reason == "None" {
        base.to_string()
    } else {
        format!("{base}, {reason}")
    };
    Some(format!("Slurm ended the job: {what} ({detail})"))
}

/// A finished job as `scontrol show job -o` or `sacct` still know it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finished {
    pub state: String,
    pub reason: String,
    pub exit_code: String,
}

/// Reads one `scontrol show job -o ID` line: `JobId=7 JobName=… JobState=TIMEOUT
/// Reason=TimeLimit … ExitCode=0:9 …`. The name may hold spaces, so keys are found by their
/// ` Key=` boundary rather than by splitting the whole line.
pub fn parse_scontrol(text: &str) -> Option<Finished> {
    let line = text.lines().find(|l| l.contains("JobState="))?;
    let get = |key: &str| -> String {
        let pat = format!(" {key}=");
        let start = line
            .find(&pat)
            .map(|i| i + pat.len())
            .or_else(|| line.strip_prefix(&pat[1..]).map(|_| pat.len() - 1));
        start
            .map(|s| {
                line[s..]
                    .split_whitespace()
                    .next()
                    .unwrap_or("")
                    .to_string()
            })
            .unwrap_or_default()
    };
    let state = get("JobState");
    (!state.is_empty()).then(|| Finished {
        state,
        reason: get("Reason"),
        exit_code: get("ExitCode"),
    })
}

/// Reads `sacct -n -P -X -j ID -o State,ExitCode`: `TIMEOUT|0:0`.
pub fn parse_sacct(text: &str) -> Option<Finished> {
    let line = text.lines().find(|l| l.contains('|'))?;
    let (state, exit) = line.split_once('|')?;
    let state = state.trim();
    (!state.is_empty()).then(|| Finished {
        state: state.to_string(),
        reason: String::new(),
        exit_code: exit.trim().to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn squeue_rows_keep_braids_labels_and_skip_odd_lines() {
        let text = "12|RUNNING|None|2026-11-23T10:00:00|2026-11-23T10:05:00|project:app:app-1\n\
                    13|PENDING|Resources|2026-11-23T10:00:01|N/A|project:app:app-2\n\
                    14|RUNNING|None|2026-11-23T10:00:02|2026-11-23T10:00:02|someone's job|with a bar\n\
                    garbage\n\
                    x1|RUNNING|None|2026-11-23T10:00:00|N/A|project:app:app-3\n";
        let (rows, odd) = parse_squeue(text);
        assert_eq!(rows.len(), 3);
        assert_eq!(
            rows[0].label.as_ref().unwrap().to_string(),
            "project:app:app-1"
        );
        assert_eq!(rows[1].state, "PENDING");
        assert_eq!(rows[1].reason, "Resources");
        assert!(rows[0].submitted.is_some());
        assert_eq!(
            rows[0].started.unwrap() - rows[0].submitted.unwrap(),
            chrono::Duration::minutes(5)
        );
        assert_eq!(rows[1].started, None);
        assert_eq!(rows[2].label, None, "not a label: another user's job name");
        assert_eq!(
            odd,
            vec![
                "garbage".to_string(),
                "x1|RUNNING|None|2026-11-23T10:00:00|N/A|project:app:app-3".into()
            ]
        );
    }

    #[test]
    fn states_that_hold_a_bead() {
        for s in [
            "PENDING",
            "RUNNING",
            "COMPLETING",
            "CONFIGURING",
            "SUSPENDED",
        ] {
            assert!(is_live(s), "{s}");
        }
        for s in [
            "COMPLETED",
            "FAILED",
            "TIMEOUT",
            "CANCELLED",
            "CANCELLED by 0",
            "OUT_OF_MEMORY",
            "NODE_FAIL",
            "",
        ] {
            assert!(!is_live(s), "{s}");
        }
        assert!(is_queued("PENDING"));
        assert!(!is_queued("RUNNING"));
    }

    #[test]
    fn why_slurm_ended_a_job() {
        assert_eq!(
            ended_why("TIMEOUT", "TimeLimit").unwrap(),
            "Slurm ended the job: it reached its time limit (WorkerTimeout) (TIMEOUT, TimeLimit)"
        );
        assert!(ended_why("OUT_OF_MEMORY", "None")
            .unwrap()
            .contains("ran out of memory (raise Memory: in PROJECT.md) (OUT_OF_MEMORY)"));
        assert!(ended_why("CANCELLED by 0", "")
            .unwrap()
            .contains("cancelled outside braids"));
        assert_eq!(ended_why("COMPLETED", "None"), None);
        assert_eq!(ended_why("FAILED", "NonZeroExitCode"), None);
    }

    #[test]
    fn scontrol_and_sacct_lines() {
        let line = "JobId=7 JobName=project:app:app-1 UserId=root(0) JobState=TIMEOUT Reason=TimeLimit Dependency=(null) ExitCode=0:9 RunTime=00:01:10";
        assert_eq!(
            parse_scontrol(line),
            Some(Finished {
                state: "TIMEOUT".into(),
                reason: "TimeLimit".into(),
                exit_code: "0:9".into()
            })
        );
        assert_eq!(
            parse_scontrol("slurm_load_jobs error: Invalid job id specified"),
            None
        );
        assert_eq!(
            parse_sacct("OUT_OF_MEMORY|0:125\n").map(|f| f.state),
            Some("OUT_OF_MEMORY".into())
        );
        assert_eq!(parse_sacct("SLURM accounting storage is disabled\n"), None);
    }
}
