//! A real OpenClaw gateway of its own, with a [`StandinModel`] behind it: for the OpenClaw
//! session tests and `cargo bench --bench sessions` (which includes this file by path, so it
//! uses nothing of the test support but the stand-in model).
//!
//! The gateway runs on a free loopback port with token auth, its state, config and home in a
//! temporary folder, from the Node 24 + `openclaw` install in /opt/openclaw (`.ci/run` puts it
//! there). It is ready 15 to 60 s after its start on two busy cores.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::standin_model::StandinModel;

pub const TOKEN: &str = "braids-test-token";

/// One session as the gateway lists it.
#[derive(Debug, Clone)]
pub struct GatewaySession {
    pub key: String,
    pub label: String,
    /// Running, or with a run going on.
    pub live: bool,
    /// `provider/model`.
    pub model: String,
    /// The session's own thinking level; `None`: the model's default applies.
    pub thinking: Option<String>,
}

pub struct Claw {
    pub dir: tempfile::TempDir,
    pub port: u16,
    gateway: Child,
    pub model: StandinModel,
}

/// The folder holding `node` (24) and `openclaw`, or why there is none.
pub fn install_dir() -> Result<PathBuf, String> {
    let dir = PathBuf::from("/opt/openclaw/bin");
    if dir.join("openclaw").is_file() && dir.join("node").is_file() {
        Ok(dir)
    } else {
        Err("OpenClaw is not installed in /opt/openclaw (.ci/run installs it)".into())
    }
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Claw {
    /// A gateway that answers `health`, or why not.
    pub fn start() -> Result<Claw, String> {
        let bin = install_dir()?;
        let dir = tempfile::Builder::new()
            .prefix("braids-openclaw-")
            .tempdir()
            .unwrap();
        let model = StandinModel::start();
        let config = json!({
            "gateway": {"mode": "local"},
            "models": {"providers": {"standin": model.provider()}},
            "agents": {"defaults": {"model": {"primary": "standin/m1"}}},
        });
        std::fs::create_dir_all(dir.path().join("state")).unwrap();
        std::fs::write(dir.path().join("openclaw.json"), config.to_string()).unwrap();
        std::fs::write(dir.path().join("token"), format!("{TOKEN}\n")).unwrap();
        // The CLI as braids and the notifier run it: a wrapper that puts Node 24 first.
        std::fs::create_dir_all(dir.path().join("bin")).unwrap();
        let wrapper = dir.path().join("bin/openclaw");
        std::fs::write(
            &wrapper,
            format!(
                "#!/bin/sh\nPATH={}:$PATH exec {}/openclaw \"$@\"\n",
                bin.display(),
                bin.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(
            &wrapper,
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        let port = free_port();
        let mut cmd = Command::new(&wrapper);
        cmd.args(["gateway", "run", "--port", &port.to_string()])
            .args(["--bind", "loopback", "--auth", "token", "--token", TOKEN])
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(dir.path().join("gateway.log")).unwrap())
            .stderr(std::fs::File::create(dir.path().join("gateway.err")).unwrap());
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        for (k, v) in Claw::env_of(dir.path(), port) {
            cmd.env(k, v);
        }
        let gateway =
            super::procs::spawn(&mut cmd).map_err(|e| format!("cannot start the gateway: {e}"))?;
        let claw = Claw {
            dir,
            port,
            gateway,
            model,
        };
        let deadline = Instant::now() + Duration::from_secs(240);
        loop {
            match claw.call("health", json!({})) {
                Ok(_) => return Ok(claw),
                Err(e) if Instant::now() > deadline => {
                    return Err(format!("the gateway did not answer within 240 s: {e}"))
                }
                Err(_) => std::thread::sleep(Duration::from_millis(500)),
            }
        }
    }

    /// What every `openclaw` command of this gateway's clients gets.
    pub fn env_of(dir: &Path, port: u16) -> Vec<(String, String)> {
        let d = dir.display();
        vec![
            ("OPENCLAW_HOME".into(), format!("{d}/home")),
            ("OPENCLAW_STATE_DIR".into(), format!("{d}/state")),
            ("OPENCLAW_CONFIG_PATH".into(), format!("{d}/openclaw.json")),
            (
                "OPENCLAW_GATEWAY_URL".into(),
                format!("ws://127.0.0.1:{port}"),
            ),
            ("OPENCLAW_GATEWAY_TOKEN".into(), TOKEN.into()),
            ("OPENCLAW_NO_AUTO_UPDATE".into(), "1".into()),
            ("OPENCLAW_DISABLE_BONJOUR".into(), "1".into()),
            ("OPENCLAW_NO_RESPAWN".into(), "1".into()),
        ]
    }

    /// `openclaw <args>` as the test's own client.
    pub fn cli(&self, args: &[&str]) -> std::process::Output {
        let mut cmd = Command::new(self.dir.path().join("bin/openclaw"));
        cmd.args(args).stdin(Stdio::null());
        for (k, v) in Claw::env_of(self.dir.path(), self.port) {
            cmd.env(k, v);
        }
        cmd.output().unwrap()
    }

    /// A gateway method's answer, or what went wrong.
    pub fn call(&self, method: &str, params: Value) -> Result<Value, String> {
        let out = self.cli(&[
            "gateway",
            "call",
            method,
            "--params",
            &params.to_string(),
            "--json",
        ]);
        let text = String::from_utf8_lossy(&out.stdout);
        match serde_json::from_str::<Value>(&text) {
            Ok(v) if out.status.success() && v["ok"] != json!(false) => Ok(v),
            _ => Err(format!(
                "{method}: {text} {}",
                String::from_utf8_lossy(&out.stderr)
            )),
        }
    }

    /// Every session the gateway has, read with this client's own parser rather than braids'.
    pub fn sessions(&self) -> Vec<GatewaySession> {
        let v = self.call("sessions.list", json!({})).unwrap();
        let text = |s: &Value, k: &str| s[k].as_str().unwrap_or_default().to_string();
        v["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| GatewaySession {
                key: text(s, "key"),
                label: text(s, "label"),
                live: s["status"] == "running" || s["hasActiveRun"] == true,
                model: format!("{}/{}", text(s, "modelProvider"), text(s, "model")),
                thinking: s["thinkingLevel"].as_str().map(str::to_string),
            })
            .collect()
    }

    /// `[openclaw]` for an installation that uses this gateway.
    pub fn config(&self) -> String {
        let d = self.dir.path().display();
        format!(
            "[openclaw]\nprogram = \"{d}/bin/openclaw\"\nurl = \"ws://127.0.0.1:{}\"\ntoken_file = \"{d}/token\"\nconfig = \"{d}/openclaw.json\"\nstate_dir = \"{d}/state\"\n",
            self.port
        )
    }

    /// The settings [`Claw::config`] writes, for a backend built in-process.
    #[allow(dead_code)]
    pub fn settings(&self) -> braids::session::openclaw::OpenClawSettings {
        let d = self.dir.path().display();
        braids::session::openclaw::OpenClawSettings {
            program: format!("{d}/bin/openclaw"),
            url: format!("ws://127.0.0.1:{}", self.port),
            token_file: format!("{d}/token"),
            config: format!("{d}/openclaw.json"),
            state_dir: format!("{d}/state"),
            ..Default::default()
        }
    }
}

impl Drop for Claw {
    fn drop(&mut self) {
        use nix::sys::signal::{killpg, Signal};
        let group = nix::unistd::Pid::from_raw(self.gateway.id() as i32);
        let _ = killpg(group, Signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.gateway.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = killpg(group, Signal::SIGKILL);
        let _ = self.gateway.wait();
    }
}
