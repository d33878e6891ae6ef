//! How a browser gets in without the page ever carrying the token: `braids serve` prints a
//! one-time link (`/login?once=<code>`, good for [`CODE_TTL`]), whose visit trades the code for
//! an `HttpOnly; SameSite=Strict` session cookie and goes to `/`. A fresh link comes from the
//! token's holder (`braids serve --login`, which asks the running server with the token). A
//! request with neither the token nor a session gets a page saying so and nothing else: an
//! agent on this machine can fetch every page braids serves, so no page may hold a secret it
//! did not bring.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::Json;
use maud::html;

use super::{auth, Server};

/// How long a login link works.
pub const CODE_TTL: Duration = Duration::from_secs(300);
/// How long a browser stays logged in.
const SESSION_TTL: Duration = Duration::from_secs(7 * 24 * 3600);
/// Unused links and sessions kept at most; the oldest goes first.
const MAX_CODES: usize = 64;
const MAX_SESSIONS: usize = 256;

/// What a request proved, as the guard found it.
#[derive(Clone, Debug)]
pub enum Credential {
    /// The server's token, in a header: a script or the CLI.
    Token,
    /// A browser's session cookie; state-changing requests also show its CSRF value (the
    /// page's form field) or the header only the page's own script can send.
    Session { csrf: Arc<str> },
}

struct Session {
    csrf: Arc<str>,
    since: Instant,
}

/// The one-time codes and the sessions they became, in memory: a restart logs everyone out.
#[derive(Default)]
pub struct Logins {
    codes: Mutex<HashMap<String, Instant>>,
    sessions: Mutex<HashMap<String, Session>>,
}

impl Logins {
    /// A new one-time code.
    pub fn mint(&self) -> Result<String> {
        let code = auth::random_hex(32)?;
        let mut codes = self.codes.lock().unwrap_or_else(|p| p.into_inner());
        codes.retain(|_, at| at.elapsed() < CODE_TTL);
        if codes.len() >= MAX_CODES {
            let oldest = codes
                .iter()
                .min_by_key(|(_, at)| **at)
                .map(|(c, _)| c.clone());
            codes.remove(&oldest.unwrap_or_default());
        }
        codes.insert(code.clone(), Instant::now());
        Ok(code)
    }

    /// Trades a code for a new session's id, once and while it is fresh.
    fn redeem(&self, code: &str) -> Result<Option<String>> {
        let fresh = {
            let mut codes = self.codes.lock().unwrap_or_else(|p| p.into_inner());
            // Found by a whole, constant-time comparison, and removed whatever its age.
            let key = codes.keys().find(|k| auth::matches(k, code)).cloned();
            key.and_then(|k| codes.remove(&k))
                .is_some_and(|at| at.elapsed() < CODE_TTL)
        };
        if !fresh {
            return Ok(None);
        }
        let id = auth::random_hex(32)?;
        let csrf: Arc<str> = Arc::from(auth::random_hex(32)?);
        let mut sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        sessions.retain(|_, s| s.since.elapsed() < SESSION_TTL);
        if sessions.len() >= MAX_SESSIONS {
            let oldest = sessions
                .iter()
                .min_by_key(|(_, s)| s.since)
                .map(|(k, _)| k.clone());
            sessions.remove(&oldest.unwrap_or_default());
        }
        sessions.insert(
            id.clone(),
            Session {
                csrf,
                since: Instant::now(),
            },
        );
        Ok(Some(id))
    }

    /// The session a cookie names, while it lasts.
    pub fn session(&self, id: &str) -> Option<Credential> {
        let sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        sessions
            .iter()
            .find(|(k, s)| auth::matches(k, id) && s.since.elapsed() < SESSION_TTL)
            .map(|(_, s)| Credential::Session {
                csrf: Arc::clone(&s.csrf),
            })
    }
}

/// The session cookie's name: cookies ignore ports, so two servers on one machine need two.
pub fn cookie_name(port: u16) -> String {
    format!("braids_session_{port}")
}

/// The value of cookie `name` in the request's `Cookie` headers.
pub fn cookie<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|pair| {
            let (k, v) = pair.trim().split_once('=')?;
            (k == name).then_some(v)
        })
}

/// The link that logs a browser in with `code`, at `base` (`http://host:port`).
pub fn link(base: &str, code: &str) -> String {
    format!("{base}/login?once={code}")
}

#[derive(serde::Deserialize)]
pub struct Once {
    #[serde(default)]
    once: String,
}

/// `GET /login?once=<code>`: a fresh code becomes a session cookie and a redirect to `/`
/// (which also takes the code out of the address bar); anything else is the login page.
pub async fn login(State(s): State<Arc<Server>>, Query(q): Query<Once>) -> Response {
    let id = match s.logins.redeem(&q.once) {
        Ok(Some(id)) => id,
        Ok(None) => {
            return refused(
                "This login link was used already, has expired or is not this server's. Each \
                 link works once, for five minutes.",
            )
        }
        Err(e) => return (StatusCode::INTERNAL_SERVER_ERROR, format!("{e:#}\n")).into_response(),
    };
    let cookie = format!(
        "{}={id}; HttpOnly; SameSite=Strict; Path=/; Max-Age={}",
        cookie_name(s.port()),
        SESSION_TTL.as_secs()
    );
    (
        StatusCode::SEE_OTHER,
        [
            (header::LOCATION, "/".to_string()),
            (header::SET_COOKIE, cookie),
            (header::CACHE_CONTROL, "no-store".to_string()),
        ],
    )
        .into_response()
}

/// The page for a browser without a session: how to get one, and nothing else.
pub fn refused(why: &str) -> Response {
    let page = super::page::layout(
        "braids — log in",
        html! {
            header { h1 { "braids" } }
            section class="login" {
                p { (why) }
                p { "Log in with a link from the terminal: run " code { "braids serve --login" }
                    " (with the same " code { "--listen" } " as the server) and open the link it prints. "
                    "Scripts send the server's token in the " code { "Authorization: Bearer" } " header." }
            }
        },
    );
    (
        StatusCode::UNAUTHORIZED,
        [(header::CACHE_CONTROL, "no-store")],
        Html(page.into_string()),
    )
        .into_response()
}

/// `POST /api/v1/login`: a fresh login link, for the token's holder only (a browser's session
/// cannot make more of them).
pub async fn mint(
    State(s): State<Arc<Server>>,
    cred: Option<axum::Extension<Credential>>,
    headers: HeaderMap,
) -> Response {
    if !matches!(cred.as_deref(), Some(Credential::Token)) {
        return (
            StatusCode::FORBIDDEN,
            Json(serde_json::json!({ "error": "a login link needs the server's token in the Authorization header" })),
        )
            .into_response();
    }
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("127.0.0.1");
    match s.logins.mint() {
        Ok(code) => Json(serde_json::json!({
            "url": link(&format!("http://{host}"), &code),
            "expires_in_seconds": CODE_TTL.as_secs(),
        }))
        .into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("{e:#}\n")).into_response(),
    }
}

/// `braids serve --login`: asks the server listening at `listen` for a fresh link, with the
/// token in `token_file`.
pub fn request_link(listen: std::net::SocketAddr, token_file: &std::path::Path) -> Result<String> {
    let token = auth::load(token_file, false).with_context(|| {
        format!(
            "no token in {}: start `braids serve` first (it makes the token), or give its --token-file",
            token_file.display()
        )
    })?;
    let mut at = listen;
    if at.ip().is_unspecified() {
        at.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
    }
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(10)))
        .http_status_as_error(false)
        .build()
        .into();
    let url = format!("http://{at}/api/v1/login");
    let mut resp = match agent
        .post(&url)
        .header("Authorization", &format!("Bearer {token}"))
        .send_empty()
    {
        Ok(r) => r,
        Err(e) => bail!(
            "no braids serve answers at {at} ({e}); start it, or give the --listen it runs with"
        ),
    };
    let body = resp.body_mut().read_to_string().unwrap_or_default();
    let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
    match v["url"].as_str() {
        Some(u) if resp.status().is_success() => Ok(u.to_string()),
        _ => bail!(
            "the server at {at} gave no login link ({}: {}); is it the one whose token is in {}?",
            resp.status(),
            body.trim(),
            token_file.display()
        ),
    }
}
