//! `braids serve`: a local HTTP server (axum on tokio) with a JSON API, a live event stream and
//! a server-rendered dashboard, acting through the same use cases as the CLI (`crate::app`).
//!
//! Reads share one snapshot of the picture ([`crate::app::dashboard::picture`]), made at most
//! once a second and again after every event or action, so a hundred dashboards and scripts
//! polling cost one observation. One thread follows every project's journal and hands each
//! event to the stream's clients.
//!
//! Security: it listens on 127.0.0.1 unless told otherwise, and refuses a non-loopback address
//! without `--token-file`; every request but the static files and the login link needs the
//! token or a browser session from a one-time link (`auth.rs`, `login.rs`), and no page carries
//! the token; actions are POSTs only;
//! when on loopback, a request for another host name is refused (DNS rebinding); every
//! response carries a strict Content-Security-Policy (scripts and styles only from the server
//! itself, nothing inline), and every piece of text in a page is escaped.

mod api;
mod auth;
mod chart;
mod listen;
mod login;
mod page;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use tokio::sync::broadcast;

use crate::app::dashboard::Picture;
use crate::config::installation::Installation;
use crate::system::paths::Paths;

/// How long a snapshot of the picture serves reads when nothing happened.
const FRESH: Duration = Duration::from_secs(1);

const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// How `braids serve` was asked to run.
pub struct Options {
    pub listen: SocketAddr,
    /// The token file; by default `serve.token` in braids' directory, made on first start.
    pub token_file: Option<PathBuf>,
}

/// The picture and its JSON, shared by every read until the next change.
pub struct Snapshot {
    pub picture: Picture,
    pub json: Bytes,
    made: Instant,
    generation: u64,
}

pub struct Server {
    pub inst: Installation,
    pub token: String,
    pub events: broadcast::Sender<Arc<str>>,
    /// One permit per open event stream, up to `[serve] max_event_streams`.
    pub streams: Arc<tokio::sync::Semaphore>,
    loopback: bool,
    /// The port listened on, once bound: it names the session cookie.
    port: std::sync::OnceLock<u16>,
    pub logins: login::Logins,
    /// Bumped by every event and action: the snapshot is then stale.
    generation: AtomicU64,
    snapshot: Mutex<Option<Arc<Snapshot>>>,
}

impl Server {
    /// The current snapshot; one caller makes a new one while the others wait for it.
    pub fn snapshot(&self) -> Result<Arc<Snapshot>> {
        let mut held = self.snapshot.lock().unwrap_or_else(|p| p.into_inner());
        let generation = self.generation.load(Ordering::SeqCst);
        if let Some(s) = held.as_ref() {
            if s.generation == generation && s.made.elapsed() < FRESH {
                return Ok(Arc::clone(s));
            }
        }
        let picture = crate::app::dashboard::picture(&self.inst, chrono::Utc::now())?;
        let json = Bytes::from(serde_json::to_vec(&picture)?);
        let snap = Arc::new(Snapshot {
            picture,
            json,
            made: Instant::now(),
            generation,
        });
        *held = Some(Arc::clone(&snap));
        Ok(snap)
    }

    pub fn port(&self) -> u16 {
        self.port.get().copied().unwrap_or(0)
    }

    pub fn invalidate(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
    }
}

/// Where the token lives unless `--token-file` says otherwise.
pub fn default_token_file(paths: &Paths) -> PathBuf {
    paths.braids_dir.join("serve.token")
}

/// A fresh one-time login link from the server listening at `listen` (`braids serve --login`).
pub fn login_link(listen: SocketAddr, token_file: &std::path::Path) -> Result<String> {
    login::request_link(listen, token_file)
}

/// Starts the server and serves until SIGINT or SIGTERM.
pub fn run(paths: &Paths, opts: Options) -> Result<()> {
    let loopback = opts.listen.ip().is_loopback();
    if !loopback && opts.token_file.is_none() {
        bail!(
            "--listen {} is reachable from other machines; give --token-file with a token only you hold, or listen on 127.0.0.1",
            opts.listen
        );
    }
    let token_file = opts
        .token_file
        .clone()
        .unwrap_or_else(|| default_token_file(paths));
    let token = auth::load(&token_file, opts.token_file.is_none())?;
    let inst = crate::config::installation::open(paths)?;
    let (events, _) = broadcast::channel(1024);
    let max_streams = inst.config.serve.max_event_streams;
    let server = Arc::new(Server {
        inst,
        token,
        events,
        streams: Arc::new(tokio::sync::Semaphore::new(max_streams)),
        loopback,
        port: std::sync::OnceLock::new(),
        logins: login::Logins::default(),
        generation: AtomicU64::new(0),
        snapshot: Mutex::new(None),
    });
    follow_events(&server)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(opts.listen)
            .await
            .with_context(|| format!("cannot listen on {}", opts.listen))?;
        let addr = listener.local_addr()?;
        let _ = server.port.set(addr.port());
        // One write, so a reader that stops after these lines never breaks a later print.
        println!(
            "braids serve: listening on http://{addr}/ (scripts send the token in {})\n\
             log in: {} (works once, for {} minutes; `braids serve --login` prints another)",
            token_file.display(),
            login::link(&format!("http://{addr}"), &server.logins.mint()?),
            login::CODE_TTL.as_secs() / 60
        );
        let app = router(Arc::clone(&server));
        // Open event streams never end by themselves: a graceful stop waits for the other
        // requests, then at most two seconds more.
        let limits = server.inst.config.serve.clone();
        listen::serve(listener, app, &limits, shutdown(), Duration::from_secs(2)).await;
        Ok(())
    })
}

fn router(server: Arc<Server>) -> Router {
    Router::new()
        .route("/", get(api::index))
        .route("/fragment", get(api::fragment))
        .route("/status", get(api::status_page))
        .route("/beads/{id}", get(api::bead_page))
        .route(
            "/static/app.js",
            get(|| asset("text/javascript", include_str!("assets/app.js"))),
        )
        .route(
            "/static/app.css",
            get(|| asset("text/css", include_str!("assets/app.css"))),
        )
        .route(
            "/favicon.ico",
            get(|| asset("image/svg+xml", include_str!("assets/favicon.svg"))),
        )
        .route("/login", get(login::login))
        .route("/api/v1/login", post(login::mint))
        .route("/api/v1/state", get(api::state))
        .route("/api/v1/projects/{slug}", get(api::project))
        .route("/api/v1/beads/{id}", get(api::bead))
        .route("/api/v1/events", get(api::events))
        .route(
            "/api/v1/projects/{slug}/{action}",
            post(api::project_action),
        )
        .route("/api/v1/beads/{id}/{action}", post(api::bead_action))
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&server),
            guard,
        ))
        .with_state(server)
}

async fn asset(kind: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, kind),
            (header::CACHE_CONTROL, "max-age=300"),
        ],
        body,
    )
        .into_response()
}

/// Refuses requests for other host names on loopback and requests without a credential (the
/// token, or a browser's session), hands the credential on to the handlers, and adds the
/// security headers to every response.
async fn guard(State(s): State<Arc<Server>>, mut req: Request, next: Next) -> Response {
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    let path = req.uri().path();
    let public = path.starts_with("/static/") || path == "/favicon.ico" || path == "/login";
    let api = path.starts_with("/api/");
    let given = auth::given(req.headers());
    let wrong_token = given.is_some_and(|t| !auth::matches(&s.token, t));
    let credential = if given.is_some() && !wrong_token {
        Some(login::Credential::Token)
    } else {
        login::cookie(req.headers(), &login::cookie_name(s.port()))
            .and_then(|id| s.logins.session(id))
    };
    let peer = req
        .extensions()
        .get::<axum::extract::ConnectInfo<SocketAddr>>()
        .map(|c| c.0);
    let mut resp = if s.loopback && !auth::loopback_host(host) {
        (
            StatusCode::MISDIRECTED_REQUEST,
            "braids serve answers only to localhost on this address\n",
        )
            .into_response()
    } else if public {
        next.run(req).await
    } else if wrong_token {
        (
            StatusCode::FORBIDDEN,
            axum::Json(serde_json::json!({ "error": "the token is not this server's" })),
        )
            .into_response()
    } else if credential.is_none() && s.loopback && !peer.is_some_and(auth::owner_connects) {
        // Another user of this machine: nothing without the token.
        (
            StatusCode::FORBIDDEN,
            "braids serve answers only to the user who runs it; others need the server's \
             token in the Authorization header\n",
        )
            .into_response()
    } else if let Some(c) = credential {
        req.extensions_mut().insert(c);
        next.run(req).await
    } else if api {
        (
            StatusCode::UNAUTHORIZED,
            axum::Json(serde_json::json!({ "error": "this needs the server's token (Authorization: Bearer <token>) or a browser logged in with `braids serve --login`" })),
        )
            .into_response()
    } else {
        login::refused("This dashboard needs a login.")
    };
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    resp
}

/// One thread follows every project's journal from now on: each event goes to the stream's
/// clients and makes the snapshot stale.
fn follow_events(server: &Arc<Server>) -> Result<()> {
    let sources = crate::app::event_feed::sources(&server.inst.paths, None)?;
    let weak = Arc::downgrade(server);
    static NEVER: AtomicBool = AtomicBool::new(false);
    std::thread::Builder::new()
        .name("events".into())
        .spawn(move || {
            let all: Vec<&crate::events::stream::Source> = sources.iter().collect();
            let mut cursor = crate::events::stream::cursor_at_end(&all);
            crate::app::event_feed::follow(&sources, &mut cursor, &NEVER, |e| {
                let Some(s) = weak.upgrade() else {
                    return false;
                };
                s.invalidate();
                let json = serde_json::to_string(e).unwrap_or_default();
                // No client listening is not an error.
                let _ = s.events.send(Arc::from(json));
                true
            });
        })
        .context("cannot start the event thread")?;
    Ok(())
}

async fn shutdown() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = term => {}
    }
}
