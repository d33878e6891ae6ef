//! `braids serve` in a sandbox, for the HTTP tests: started on a free port, stopped on drop.

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::time::Duration;

use super::Sandbox;

pub struct Served {
    child: Child,
    /// `http://127.0.0.1:PORT`
    pub base: String,
    pub token: String,
    /// The one-time login link it printed at start.
    pub login: String,
}

impl Sandbox {
    /// Starts `braids serve --listen 127.0.0.1:0` and waits for its address.
    pub fn serve(&self) -> Served {
        self.serve_with(&["--listen", "127.0.0.1:0"])
    }

    /// `braids serve <args>`; the token is read from `--token-file` when given.
    pub fn serve_with(&self, args: &[&str]) -> Served {
        let mut all = vec!["serve"];
        all.extend_from_slice(args);
        let mut child = self
            .command(&all)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut line = String::new();
        let mut login = String::new();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        out.read_line(&mut line).unwrap();
        out.read_line(&mut login).unwrap();
        let login = login
            .split_whitespace()
            .find(|w| w.starts_with("http://"))
            .unwrap_or_else(|| panic!("no login link in {login:?}"))
            .to_string();
        let at = line
            .find("http://")
            .unwrap_or_else(|| panic!("no address in {line:?}"));
        let base = line[at..]
            .split_whitespace()
            .next()
            .unwrap()
            .trim_end_matches('/')
            .to_string();
        let token_file = args
            .iter()
            .position(|a| *a == "--token-file")
            .map_or(self.braids_dir().join("serve.token"), |i| {
                args[i + 1].into()
            });
        let token = std::fs::read_to_string(token_file)
            .unwrap()
            .trim()
            .to_string();
        Served {
            child,
            base,
            token,
            login,
        }
    }
}

/// A response: status, headers we look at, body.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub csp: Option<String>,
    pub body: String,
}

impl Reply {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
}

pub fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .timeout_global(Some(Duration::from_secs(60)))
        .build()
        .into()
}

fn reply(r: Result<ureq::http::Response<ureq::Body>, ureq::Error>) -> Reply {
    let mut r = r.unwrap();
    Reply {
        status: r.status().as_u16(),
        csp: r
            .headers()
            .get("content-security-policy")
            .map(|v| v.to_str().unwrap().to_string()),
        body: r.body_mut().read_to_string().unwrap_or_default(),
    }
}

impl Served {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// A GET as a script makes it, with the token in `Authorization: Bearer`.
    pub fn get(&self, path: &str) -> Reply {
        reply(
            agent()
                .get(format!("{}{path}", self.base))
                .header("Authorization", &format!("Bearer {}", self.token))
                .call(),
        )
    }

    /// A GET with no credential at all.
    pub fn get_anon(&self, path: &str) -> Reply {
        reply(agent().get(format!("{}{path}", self.base)).call())
    }

    /// Visits a login link as a browser would: the status, and the session cookie it set
    /// (`name=value`) with its attributes.
    pub fn visit_login(&self, link: &str) -> (u16, Option<String>, Option<String>) {
        let r = agent().get(link).call().unwrap();
        let header = |n: &str| r.headers().get(n).map(|v| v.to_str().unwrap().to_string());
        (
            r.status().as_u16(),
            header("set-cookie"),
            header("location"),
        )
    }

    /// Logs in with the link printed at start, as a browser: the session cookie (`name=value`).
    pub fn browser_cookie(&self) -> String {
        let (status, cookie, _) = self.visit_login(&self.login);
        assert_eq!(status, 303, "the login link: {cookie:?}");
        cookie.unwrap().split(';').next().unwrap().to_string()
    }

    /// A request as the logged-in browser makes it: `cookie` (`name=value`) and `headers`.
    pub fn with_cookie(
        &self,
        method: &str,
        path: &str,
        cookie: &str,
        headers: &[(&str, &str)],
        form: Option<&[(&str, &str)]>,
    ) -> Reply {
        let url = format!("{}{path}", self.base);
        if method == "GET" {
            let mut req = agent().get(url).header("Cookie", cookie);
            for (k, v) in headers {
                req = req.header(*k, *v);
            }
            return reply(req.call());
        }
        let mut req = agent().post(url).header("Cookie", cookie);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        match form {
            Some(f) => reply(req.send_form(f.iter().copied())),
            None => reply(req.send_json(serde_json::json!({}))),
        }
    }

    /// Stops the server with SIGTERM; whether it exited within `limit`.
    pub fn stop(&mut self, limit: Duration) -> bool {
        let pid = nix::unistd::Pid::from_raw(i32::try_from(self.child.id()).unwrap());
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
        let start = std::time::Instant::now();
        while start.elapsed() < limit {
            if self.child.try_wait().unwrap().is_some() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        false
    }

    pub fn get_with_token(&self, path: &str) -> Reply {
        reply(
            agent()
                .get(format!("{}{path}", self.base))
                .header("X-Braids-Token", &self.token)
                .call(),
        )
    }

    pub fn get_with_host(&self, path: &str, host: &str) -> Reply {
        reply(
            agent()
                .get(format!("{}{path}", self.base))
                .header("Host", host)
                .header("Authorization", &format!("Bearer {}", self.token))
                .call(),
        )
    }

    /// A POST with a JSON body and, when given, a token in the header.
    pub fn post(&self, path: &str, token: Option<&str>, body: serde_json::Value) -> Reply {
        let mut req = agent().post(format!("{}{path}", self.base));
        if let Some(t) = token {
            req = req.header("X-Braids-Token", t);
        }
        reply(req.send_json(body))
    }

    /// A POST with the token in the header and `body` sent as a form, as `curl -d` does.
    pub fn post_form_raw(&self, path: &str, token: &str, body: &str) -> Reply {
        reply(
            agent()
                .post(format!("{}{path}", self.base))
                .header("X-Braids-Token", token)
                .header("Content-Type", "application/x-www-form-urlencoded")
                .send(body),
        )
    }

    /// A form POST without a session.
    pub fn post_form(&self, path: &str, fields: &[(&str, &str)]) -> Reply {
        reply(
            agent()
                .post(format!("{}{path}", self.base))
                .send_form(fields.iter().copied()),
        )
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
