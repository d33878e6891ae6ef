//! The HTTP handlers: JSON reads, the dashboard's pages, the live event stream, and the
//! actions, each calling the same use case as its CLI command (`crate::app`). Blocking work
//! (trackers, files, signals) runs on tokio's blocking pool.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{FromRequest, Path, Request, State};
use axum::http::{header, StatusCode};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::{Extension, Form, Json};
use serde::Deserialize;
use tokio_stream::wrappers::BroadcastStream;
use tokio_stream::StreamExt;

use super::login::Credential;
use super::page::{self, Ctx};
use super::{auth, Server};

/// Runs `f` on the blocking pool and turns its error into a response.
async fn blocking<T: Send + 'static>(
    s: &Arc<Server>,
    f: impl FnOnce(&Server) -> anyhow::Result<T> + Send + 'static,
) -> Result<T, Response> {
    let s = Arc::clone(s);
    match tokio::task::spawn_blocking(move || f(&s)).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(error(&e)),
        Err(e) => Err((StatusCode::INTERNAL_SERVER_ERROR, format!("braids: {e}")).into_response()),
    }
}

/// A use case's error as JSON: 404 for what does not exist, 409 for what cannot be done now.
fn error(e: &anyhow::Error) -> Response {
    let text = format!("{e:#}");
    let code = if text.starts_with("no bead") || text.starts_with("no project") {
        StatusCode::NOT_FOUND
    } else if [
        "the answer is empty",
        "a rejection needs",
        "--block needs",
        "is ambiguous",
    ]
    .iter()
    .any(|w| text.contains(w))
    {
        StatusCode::BAD_REQUEST
    } else {
        StatusCode::CONFLICT
    };
    (code, Json(serde_json::json!({ "error": text }))).into_response()
}

fn json_bytes(bytes: Bytes) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], bytes).into_response()
}

pub async fn state(State(s): State<Arc<Server>>) -> Response {
    match blocking(&s, |s| s.snapshot()).await {
        Ok(snap) => json_bytes(snap.json.clone()),
        Err(r) => r,
    }
}

pub async fn project(State(s): State<Arc<Server>>, Path(slug): Path<String>) -> Response {
    let r = blocking(&s, move |s| {
        let snap = s.snapshot()?;
        let report = snap
            .picture
            .status
            .projects
            .iter()
            .find(|r| r.slug == slug)
            .cloned();
        let beads = crate::app::beads::list(&s.inst, &slug, &[], chrono::Utc::now())?;
        Ok(serde_json::json!({
            "project": report,
            "detail": snap.picture.details.get(&slug),
            "beads": beads,
        }))
    })
    .await;
    match r {
        Ok(v) => Json(v).into_response(),
        Err(r) => r,
    }
}

pub async fn bead(State(s): State<Arc<Server>>, Path(id): Path<String>) -> Response {
    match blocking(&s, move |s| {
        crate::app::beads::one(&s.inst, &id, chrono::Utc::now())
    })
    .await
    {
        Ok((slug, row)) => {
            Json(serde_json::json!({ "project": slug, "bead": row })).into_response()
        }
        Err(r) => r,
    }
}

pub async fn events(State(s): State<Arc<Server>>) -> Response {
    let Ok(permit) = Arc::clone(&s.streams).try_acquire_owned() else {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            [(header::RETRY_AFTER, "5")],
            format!(
                "braids serve has {} event streams open, its limit (max_event_streams in \
                 config.toml's [serve])\n",
                s.inst.config.serve.max_event_streams
            ),
        )
            .into_response();
    };
    let stream = BroadcastStream::new(s.events.subscribe()).map(move |item| {
        // Held as long as the stream is: the client's slot frees when it goes.
        let _slot = &permit;
        // A client that fell behind is told to read the state again.
        let data = item.unwrap_or_else(|_| Arc::from(r#"{"type":"resync"}"#));
        Ok::<_, std::convert::Infallible>(SseEvent::default().data(&*data))
    });
    Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response()
}

/// What a page's forms carry: the session's CSRF value, for a browser that logged in. A
/// script's token is never put in a page.
fn ctx(cred: Option<&Extension<Credential>>) -> Ctx<'_> {
    Ctx {
        csrf: match cred.map(|c| &c.0) {
            Some(Credential::Session { csrf }) => Some(csrf),
            _ => None,
        },
    }
}

/// The picture rendered by `render` for this client.
async fn picture_page(
    s: &Arc<Server>,
    cred: Option<Extension<Credential>>,
    render: fn(&crate::app::dashboard::Picture, Ctx<'_>) -> maud::Markup,
) -> Response {
    match blocking(s, |s| s.snapshot()).await {
        Ok(snap) => Html(render(&snap.picture, ctx(cred.as_ref())).into_string()).into_response(),
        Err(r) => r,
    }
}

pub async fn index(State(s): State<Arc<Server>>, cred: Option<Extension<Credential>>) -> Response {
    picture_page(&s, cred, page::dashboard).await
}

/// `#main` alone, for the page's live update.
pub async fn fragment(
    State(s): State<Arc<Server>>,
    cred: Option<Extension<Credential>>,
) -> Response {
    picture_page(&s, cred, page::main).await
}

pub async fn status_page(State(s): State<Arc<Server>>) -> Response {
    let r =
        blocking(&s, |s| {
            Ok(std::fs::read_to_string(s.inst.paths.status()).unwrap_or_else(|_| {
            "STATUS.md has not been written yet: it is written by every full `braids tick`.".into()
        }))
        })
        .await;
    match r {
        Ok(text) => Html(page::document("STATUS.md — braids", &text).into_string()).into_response(),
        Err(r) => r,
    }
}

pub async fn bead_page(
    State(s): State<Arc<Server>>,
    cred: Option<Extension<Credential>>,
    Path(id): Path<String>,
) -> Response {
    let r = blocking(&s, move |s| {
        let (slug, row) = crate::app::beads::one(&s.inst, &id, chrono::Utc::now())?;
        let root = crate::app::iteration::locate(&s.inst.paths, &slug)?.path;
        let deliverable = crate::app::beads::deliverable(&root, &row.id);
        let held = row
            .waiting
            .as_ref()
            .and_then(|w| w.kept.as_ref())
            .and_then(|k| crate::workspace::held_diff(&root, &k.branch, &k.commit).ok());
        Ok((slug, row, deliverable, held))
    })
    .await;
    match r {
        Ok((slug, row, deliverable, held)) => Html(
            page::bead(&slug, &row, deliverable, held.as_ref(), ctx(cred.as_ref())).into_string(),
        )
        .into_response(),
        Err(r) => r,
    }
}

/// What an action may carry, as JSON or as a form.
#[derive(Debug, Default, Deserialize)]
pub struct ActionBody {
    /// A dashboard form's proof that it is braids' own page (the session's CSRF value).
    #[serde(default)]
    pub csrf: Option<String>,
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub note: Option<String>,
    #[serde(default)]
    pub reason: Option<String>,
    /// `kill`: block with this reason instead of requeueing.
    #[serde(default)]
    pub block: Option<String>,
}

/// The body, and whether the action came from one of braids' pages (a form carrying the
/// session's CSRF value), which is answered with the dashboard rather than JSON. A body that is
/// JSON is read as JSON whatever its content type (`curl -d` says it is a form). The guard has
/// checked the credential; a browser's session must also show the action is its page's own:
/// the form's CSRF value, or the header only same-origin script can send, and never a
/// request the browser says came from another site.
async fn read_action(s: &Server, req: Request) -> Result<(ActionBody, bool), Response> {
    let headers = req.headers().clone();
    let cred = req.extensions().get::<Credential>().cloned();
    // A body that stalls is the client's silence, though a request is open: it ends at the
    // idle timeout (the connection's own idle clock waits while a request is answered).
    let limit = s.inst.config.serve.idle_timeout;
    let bytes = tokio::time::timeout(limit, Bytes::from_request(req, &()))
        .await
        .map_err(|_| {
            (
                StatusCode::REQUEST_TIMEOUT,
                "the request's body did not arrive within idle_timeout (config.toml's [serve])\n",
            )
                .into_response()
        })?
        .map_err(IntoResponse::into_response)?;
    let text = std::str::from_utf8(&bytes).unwrap_or("").trim_start();
    let body = if text.is_empty() {
        ActionBody::default()
    } else if text.starts_with('{') || text.starts_with("null") {
        serde_json::from_str::<Option<ActionBody>>(text)
            .map(Option::unwrap_or_default)
            .map_err(|e| {
                (
                    StatusCode::BAD_REQUEST,
                    Json(serde_json::json!({ "error": format!("the body is not the JSON this action takes: {e}") })),
                )
                    .into_response()
            })?
    } else {
        let req = Request::builder()
            .method(axum::http::Method::POST)
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(axum::body::Body::from(bytes))
            .map_err(|e| (StatusCode::BAD_REQUEST, e.to_string()).into_response())?;
        Form::<ActionBody>::from_request(req, &())
            .await
            .map_err(IntoResponse::into_response)?
            .0
    };
    let refuse = |code: StatusCode, why: &str| {
        (code, Json(serde_json::json!({ "error": why }))).into_response()
    };
    match cred {
        Some(Credential::Token) => Ok((body, false)),
        Some(Credential::Session { csrf }) => {
            let site = headers
                .get("sec-fetch-site")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("same-origin");
            let own_script = headers.contains_key(auth::REQUEST_HEADER);
            let own_form = body
                .csrf
                .as_deref()
                .is_some_and(|c| auth::matches(&csrf, c));
            if !matches!(site, "same-origin" | "none") {
                Err(refuse(
                    StatusCode::FORBIDDEN,
                    "an action from another site is refused",
                ))
            } else if own_form || own_script {
                Ok((body, own_form))
            } else {
                Err(refuse(
                    StatusCode::FORBIDDEN,
                    "a browser's action needs the dashboard's form or the X-Braids-Request header",
                ))
            }
        }
        None => Err(refuse(
            StatusCode::UNAUTHORIZED,
            "actions need the server's token in the Authorization header",
        )),
    }
}

/// The answer to an action: JSON, or for a form the dashboard again (errors as a page).
async fn respond(
    s: &Arc<Server>,
    form: bool,
    f: impl FnOnce(&Server) -> anyhow::Result<serde_json::Value> + Send + 'static,
) -> Response {
    let r = blocking(s, f).await;
    s.invalidate();
    match (r, form) {
        (Ok(v), false) => Json(v).into_response(),
        (Ok(_), true) => Redirect::to("/").into_response(),
        (Err(r), false) => r,
        (Err(r), true) => {
            let code = r.status();
            let body = axum::body::to_bytes(r.into_body(), 1 << 16)
                .await
                .unwrap_or_default();
            let msg: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
            let text = msg["error"]
                .as_str()
                .unwrap_or("the action failed")
                .to_string();
            let page = page::document(
                "braids — action refused",
                &format!("# Not done\n\n{text}\n\n[Back to the dashboard](/)\n"),
            );
            (code, Html(page.into_string())).into_response()
        }
    }
}

/// An action: the body and the token read first, then `f` on the blocking pool.
async fn act(
    s: &Arc<Server>,
    req: Request,
    f: impl FnOnce(&Server, ActionBody) -> anyhow::Result<serde_json::Value> + Send + 'static,
) -> Response {
    match read_action(s, req).await {
        Ok((body, form)) => respond(s, form, move |s| f(s, body)).await,
        Err(r) => r,
    }
}

pub async fn project_action(
    State(s): State<Arc<Server>>,
    Path((slug, action)): Path<(String, String)>,
    req: Request,
) -> Response {
    act(&s, req, move |s, body| {
        let paths = &s.inst.paths;
        let changed = match action.as_str() {
            "pause" => {
                crate::app::pause::set_status(paths, &slug, crate::model::ProjectStatus::Paused)?
            }
            "resume" => crate::app::pause::resume(paths, &slug, body.note)?,
            other => anyhow::bail!("no project action {other}; use pause or resume"),
        };
        Ok(serde_json::to_value(changed)?)
    })
    .await
}

pub async fn bead_action(
    State(s): State<Arc<Server>>,
    Path((id, action)): Path<(String, String)>,
    req: Request,
) -> Response {
    act(&s, req, move |s, body| {
        let inst = &s.inst;
        let now = chrono::Utc::now();
        Ok(match action.as_str() {
            "answer" => serde_json::to_value(crate::app::answer::answer(
                inst,
                &id,
                body.text.as_deref().unwrap_or(""),
                now,
            )?)?,
            "retry" => serde_json::to_value(crate::app::retry::retry(inst, &id)?)?,
            "kill" => {
                let after = match body.block {
                    Some(r) => crate::app::sessions::AfterKill::Block(r),
                    None => crate::app::sessions::AfterKill::Requeue,
                };
                serde_json::to_value(crate::app::sessions::kill(inst, &id, after)?)?
            }
            "approve" => serde_json::to_value(crate::app::answer::approve(
                inst,
                &id,
                body.note.as_deref(),
                now,
            )?)?,
            "reject" => serde_json::json!({
                "blocked": crate::app::answer::reject(inst, &id, body.reason.as_deref().unwrap_or(""))?
            }),
            other => anyhow::bail!("no bead action {other}; use answer, retry, kill, approve or reject"),
        })
    })
    .await
}
