//! The OpenClaw gateway as braids asks it: `openclaw gateway call <method> --params <json>
//! --json`, an argv with the parameters as one JSON argument, never a shell string. The token
//! travels in the environment (`OPENCLAW_GATEWAY_TOKEN`, read from `[openclaw] token_file`),
//! not on the command line where `ps` shows it; the URL too (`OPENCLAW_GATEWAY_URL`), since the
//! CLI refuses `--url` without a token on the command line.
//!
//! What comes back is parsed by pure functions ([`live_rows`], [`Started::from`],
//! [`Waited::from`]) so their rules have table tests without a gateway.

use std::ffi::OsString;
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use serde_json::{json, Value};

use super::OpenClawSettings;
use crate::system::proc::Invocation;

/// A client of one gateway, through the `openclaw` CLI.
#[derive(Debug, Clone)]
pub struct Gateway {
    settings: OpenClawSettings,
}

/// Why a call failed: the CLI could not be run, it timed out, or the gateway said no.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("openclaw gateway call {method}: {detail}")]
pub struct CallError {
    pub method: String,
    pub detail: String,
}

impl Gateway {
    pub fn new(settings: OpenClawSettings) -> Gateway {
        Gateway { settings }
    }

    pub fn settings(&self) -> &OpenClawSettings {
        &self.settings
    }

    /// The environment every `openclaw` command of this installation gets.
    pub fn env(&self) -> Result<Vec<(OsString, OsString)>, String> {
        let s = &self.settings;
        let mut env: Vec<(OsString, OsString)> = vec![
            // Without it the CLI re-spawns itself into a group of its own, out of reach of the
            // deadline that kills the caller's group.
            ("OPENCLAW_NO_RESPAWN".into(), "1".into()),
            ("OPENCLAW_NO_AUTO_UPDATE".into(), "1".into()),
        ];
        for (key, value) in [
            ("OPENCLAW_GATEWAY_URL", &s.url),
            ("OPENCLAW_CONFIG_PATH", &s.config),
            ("OPENCLAW_STATE_DIR", &s.state_dir),
        ] {
            if !value.is_empty() {
                env.push((key.into(), value.into()));
            }
        }
        if !s.token_file.is_empty() {
            let token = std::fs::read_to_string(&s.token_file).map_err(|e| {
                format!(
                    "cannot read the gateway token from {} ([openclaw] token_file): {e}",
                    s.token_file
                )
            })?;
            let token = token.trim();
            if token.is_empty() {
                return Err(format!(
                    "the gateway token file {} ([openclaw] token_file) is empty",
                    s.token_file
                ));
            }
            env.push(("OPENCLAW_GATEWAY_TOKEN".into(), token.into()));
        }
        Ok(env)
    }

    /// Calls `method` with `params`; the gateway's answer, or why there is none. `wait` is how
    /// long the gateway may take to answer (the CLI's `--timeout`); the command gets half a
    /// minute more for its own start-up.
    pub fn call(&self, method: &str, params: &Value, wait: Duration) -> Result<Value, CallError> {
        self.call_watched(method, params, wait, None)
    }

    /// [`Gateway::call`], telling `watch` the command's process group (see
    /// [`crate::system::proc::Invocation::watch`]).
    pub fn call_watched(
        &self,
        method: &str,
        params: &Value,
        wait: Duration,
        watch: Option<crate::system::proc::GroupWatch>,
    ) -> Result<Value, CallError> {
        let fail = |detail: String| CallError {
            method: method.to_string(),
            detail,
        };
        let args: Vec<OsString> = vec![
            self.settings.program.clone().into(),
            "gateway".into(),
            "call".into(),
            method.into(),
            "--params".into(),
            params.to_string().into(),
            "--json".into(),
            "--timeout".into(),
            wait.as_millis().max(1).to_string().into(),
        ];
        let mut inv = Invocation::new(args)
            .timeout(wait + Duration::from_secs(30))
            .watch(watch);
        for (k, v) in self.env().map_err(fail)? {
            inv = inv.env(k, v);
        }
        let out = inv.run().map_err(|e| fail(e.to_string()))?;
        if out.timed_out {
            return Err(fail(format!(
                "no answer within {}s",
                (wait + Duration::from_secs(30)).as_secs()
            )));
        }
        answer(&out.stdout, &out.stderr, out.success()).map_err(fail)
    }

    /// The default per-call wait, `[openclaw] timeout_secs`.
    pub fn wait(&self) -> Duration {
        Duration::from_secs(self.settings.timeout_secs.max(1))
    }

    /// Every session with a run going on, as the gateway lists them (one call).
    pub fn live(&self) -> Result<Vec<Row>, CallError> {
        let v = self.call("sessions.list", &json!({"activeOnly": true}), self.wait())?;
        Ok(live_rows(&v))
    }

    /// The keys of every session labelled exactly `label`, live or not.
    pub fn keys_labelled(&self, label: &str) -> Result<Vec<String>, CallError> {
        let v = self.call("sessions.list", &json!({"label": label}), self.wait())?;
        Ok(rows(&v)
            .into_iter()
            .filter(|r| r.label.as_deref() == Some(label))
            .map(|r| r.key)
            .collect())
    }

    /// Aborts the run of `key` (and what is queued for it), then deletes the session: the
    /// gateway stops its tool processes. A key that does not exist is not an error.
    pub fn end(&self, key: &str) -> Result<(), CallError> {
        self.abort(key)?;
        self.delete(key)
    }

    /// Stops the run of `key` and drops what is queued for it; the session stays.
    pub fn abort(&self, key: &str) -> Result<(), CallError> {
        self.call(
            "sessions.abort",
            &json!({"key": key, "clearQueued": true}),
            self.wait(),
        )
        .map(drop)
    }

    /// Deletes the session `key`; one that does not exist is not an error.
    pub fn delete(&self, key: &str) -> Result<(), CallError> {
        self.call("sessions.delete", &json!({"key": key}), self.wait())
            .map(drop)
    }
}

/// The JSON the CLI printed, or the gateway's own words for why not. The CLI prints its error
/// as JSON on stdout (`{"ok": false, "error": {"message": …}}`) and exits 1.
fn answer(stdout: &str, stderr: &str, success: bool) -> Result<Value, String> {
    let parsed: Option<Value> = serde_json::from_str(stdout.trim()).ok();
    let said = |v: &Value| {
        v.pointer("/error/message")
            .and_then(Value::as_str)
            .map(|m| m.lines().next().unwrap_or("").to_string())
    };
    match parsed {
        Some(v) if v.get("ok") == Some(&Value::Bool(false)) => {
            Err(said(&v).unwrap_or_else(|| "the gateway said no, without a reason".into()))
        }
        Some(v) if success => Ok(v),
        Some(v) => Err(said(&v).unwrap_or_else(|| "the command failed".into())),
        None => {
            let text = if stderr.trim().is_empty() {
                stdout.trim()
            } else {
                stderr.trim()
            };
            Err(format!(
                "not a JSON answer: {}",
                text.lines().next().unwrap_or("no output")
            ))
        }
    }
}

/// One session as `sessions.list` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub key: String,
    pub label: Option<String>,
    /// `running`, `done`, `killed`, …
    pub status: Option<String>,
    pub has_active_run: bool,
    pub started_at: Option<DateTime<Utc>>,
    pub cwd: Option<String>,
    /// `provider/model`, as the session runs it.
    pub model: Option<String>,
}

impl Row {
    /// Whether an agent works in this session now: a run is active, and OpenClaw does not call
    /// the session done or killed.
    pub fn is_live(&self) -> bool {
        match self.status.as_deref() {
            Some("running") => true,
            Some("done" | "killed" | "failed" | "aborted" | "timeout" | "error") => false,
            _ => self.has_active_run,
        }
    }
}

/// Every row of a `sessions.list` answer that has a key.
pub fn rows(v: &Value) -> Vec<Row> {
    let text = |r: &Value, k: &str| r.get(k).and_then(Value::as_str).map(str::to_string);
    v.get("sessions")
        .and_then(Value::as_array)
        .map(|a| a.as_slice())
        .unwrap_or_default()
        .iter()
        .filter_map(|r| {
            Some(Row {
                key: text(r, "key")?,
                label: text(r, "label"),
                status: text(r, "status"),
                has_active_run: r.get("hasActiveRun").and_then(Value::as_bool) == Some(true),
                started_at: r
                    .get("startedAt")
                    .or_else(|| r.get("createdAt"))
                    .and_then(Value::as_i64)
                    .and_then(|ms| Utc.timestamp_millis_opt(ms).single()),
                cwd: text(r, "spawnedCwd"),
                model: match (text(r, "modelProvider"), text(r, "model")) {
                    (Some(p), Some(m)) => Some(format!("{p}/{m}")),
                    (None, m) => m,
                    (Some(_), None) => None,
                },
            })
        })
        .collect()
}

/// The rows of a `sessions.list` answer whose session is live.
pub fn live_rows(v: &Value) -> Vec<Row> {
    rows(v).into_iter().filter(Row::is_live).collect()
}

/// What `sessions.create` answered: the run it started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Started {
    pub key: String,
    pub run_id: String,
}

impl Started {
    pub fn from(v: &Value) -> Result<Started, String> {
        let run_id = v
            .get("runId")
            .and_then(Value::as_str)
            .filter(|r| !r.is_empty())
            .ok_or("the session was created but no run started (no runId in the answer)")?;
        Ok(Started {
            key: v
                .get("key")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            run_id: run_id.to_string(),
        })
    }
}

/// How a run ended, from `agent.wait`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Waited {
    Ok { reply: String },
    TimedOut,
    Failed { why: String },
}

impl Waited {
    pub fn from(v: &Value) -> Waited {
        let reply = v
            .pointer("/terminalReply/text")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        match v.get("status").and_then(Value::as_str) {
            Some("ok") => Waited::Ok { reply },
            Some("timeout") => Waited::TimedOut,
            other => Waited::Failed {
                why: v
                    .get("error")
                    .and_then(|e| e.as_str().or_else(|| e.get("message")?.as_str()))
                    .map(str::to_string)
                    .unwrap_or_else(|| {
                        format!("the run ended with status {}", other.unwrap_or("unknown"))
                    }),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_the_json_or_the_gateways_words() {
        let cases: &[(&str, &str, bool, Result<&str, &str>)] = &[
            (r#"{"ok": true, "key": "k"}"#, "", true, Ok("k")),
            (r#"{"runId": "r", "status": "ok"}"#, "", true, Ok("")),
            (
                r#"{"ok": false, "error": {"type": "x", "message": "Gateway not reachable at ws://h (ECONNREFUSED).\nmore"}}"#,
                "",
                false,
                Err("Gateway not reachable at ws://h (ECONNREFUSED)."),
            ),
            (
                r#"{"ok": false}"#,
                "",
                true,
                Err("the gateway said no, without a reason"),
            ),
            (
                "",
                "Error: unknown command\n",
                false,
                Err("not a JSON answer: Error: unknown command"),
            ),
            ("{}", "", false, Err("the command failed")),
        ];
        for (stdout, stderr, ok, want) in cases {
            let got = answer(stdout, stderr, *ok);
            match (got, want) {
                (Ok(v), Ok(key)) => assert_eq!(
                    v.get("key").and_then(Value::as_str).unwrap_or(""),
                    *key,
                    "{stdout}"
                ),
                (Err(e), Err(w)) => assert_eq!(e, *w, "{stdout}"),
                (got, want) => panic!("{stdout}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn rows_read_the_list_and_liveness_follows_status_then_active_run() {
        let v: Value = serde_json::from_str(
            r#"{"count": 5, "sessions": [
              {"key": "agent:main:project:a:a-1", "label": "project:a:a-1", "status": "running",
               "hasActiveRun": true, "startedAt": 1795702261655, "spawnedCwd": "/p/a",
               "modelProvider": "standin", "model": "m2"},
              {"key": "agent:main:project:a:a-2", "label": "project:a:a-2", "status": "done",
               "hasActiveRun": false},
              {"key": "agent:main:project:a:a-3", "label": "project:a:a-3", "status": "killed",
               "hasActiveRun": true},
              {"key": "agent:main:main", "hasActiveRun": true},
              {"label": "no key"}
            ]}"#,
        )
        .unwrap();
        let all = rows(&v);
        assert_eq!(all.len(), 4, "a row without a key is skipped");
        assert_eq!(all[0].model.as_deref(), Some("standin/m2"));
        assert_eq!(all[0].cwd.as_deref(), Some("/p/a"));
        assert_eq!(
            all[0].started_at.map(|t| t.timestamp_millis()),
            Some(1795702261655)
        );
        let live: Vec<_> = live_rows(&v).into_iter().map(|r| r.key).collect();
        assert_eq!(
            live,
            ["agent:main:project:a:a-1", "agent:main:main"],
            "done and killed are not live, whatever hasActiveRun says"
        );
        assert!(rows(&json!({"ok": true})).is_empty());
    }

    #[test]
    fn a_start_needs_a_run_and_a_wait_says_how_it_ended() {
        let s = Started::from(&json!({"ok": true, "key": "k", "runId": "r1", "status": "started"}));
        assert_eq!(
            s,
            Ok(Started {
                key: "k".into(),
                run_id: "r1".into()
            })
        );
        assert!(Started::from(&json!({"ok": true, "key": "k"})).is_err());
        assert_eq!(
            Waited::from(&json!({"status": "ok", "terminalReply": {"text": "done"}})),
            Waited::Ok {
                reply: "done".into()
            }
        );
        assert_eq!(
            Waited::from(&json!({"status": "timeout"})),
            Waited::TimedOut
        );
        assert_eq!(
            Waited::from(&json!({"status": "error", "error": "model refused"})),
            Waited::Failed {
                why: "model refused".into()
            }
        );
        assert_eq!(
            Waited::from(&json!({"status": "aborted"})),
            Waited::Failed {
                why: "the run ended with status aborted".into()
            }
        );
    }
}
