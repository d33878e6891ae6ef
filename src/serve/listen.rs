//! The accept loop: hyper's HTTP/1 connection under the limits `[serve]` sets, so a client
//! cannot hold the server by sending nothing or sending slowly (a header-read timeout and an
//! idle timeout per connection) or by opening many connections (a cap, past which a
//! connection gets a 503 and is closed). axum's own `serve` has no such limits.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::Request;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::time::{Instant, Sleep};
use tower::{Service, ServiceExt};

use crate::config::ServeConfig;

/// Serves `app` on `listener` until `stop` resolves; then open connections get `grace` to
/// finish (an event stream never does).
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: &ServeConfig,
    stop: impl Future<Output = ()>,
    grace: Duration,
) {
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let graceful = GracefulShutdown::new();
    let mut make = app.into_make_service_with_connect_info::<SocketAddr>();
    let mut stop = std::pin::pin!(stop);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                // Out of file descriptors and the like: the next accept may do.
                Err(e) => {
                    tracing::warn!("braids serve: cannot accept a connection: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut stop => break,
        };
        let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
            tokio::spawn(refuse(stream, limits.max_connections));
            continue;
        };
        let _ = stream.set_nodelay(true);
        let Ok(svc) = make.call(peer).await;
        // Requests being answered: hyper watches the socket meanwhile, and a slow answer is
        // not the client's silence.
        let busy = Arc::new(AtomicUsize::new(0));
        let counting = Arc::clone(&busy);
        let svc = svc
            .map_request(|r: Request<Incoming>| r.map(axum::body::Body::new))
            .map_future(move |answer| {
                let answering = Answering::start(&counting);
                async move {
                    let response = answer.await;
                    drop(answering);
                    response
                }
            });
        let svc = TowerToHyperService::new(svc);
        let io = TokioIo::new(Idle::new(stream, limits.idle_timeout, busy));
        let conn = hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(limits.header_timeout)
            .serve_connection(io, svc);
        let watched = graceful.watch(conn);
        tokio::spawn(async move {
            // A closed or timed-out connection is the client's business, not an error.
            let _ = watched.await;
            drop(slot);
        });
    }
    drop(listener);
    let _ = tokio::time::timeout(grace, graceful.shutdown()).await;
}

/// The answer to a connection over the cap: a 503 saying which setting to raise.
async fn refuse(mut stream: TcpStream, cap: usize) {
    let body = format!(
        "braids serve has {cap} connections open, its limit (max_connections in config.toml's \
         [serve]); try again shortly\n"
    );
    let head = format!(
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: close\r\nRetry-After: 5\r\n\r\n",
        body.len()
    );
    let write = async {
        stream.write_all(head.as_bytes()).await?;
        stream.write_all(body.as_bytes()).await?;
        stream.shutdown().await
    };
    let _ = tokio::time::timeout(Duration::from_secs(5), write).await;
}

/// One request being answered on a connection, counted until its answer is ready (or given
/// up).
struct Answering(Arc<AtomicUsize>);

impl Answering {
    fn start(busy: &Arc<AtomicUsize>) -> Answering {
        busy.fetch_add(1, Ordering::SeqCst);
        Answering(Arc::clone(busy))
    }
}

impl Drop for Answering {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A socket that fails with `TimedOut` once no byte went either way for `limit` while no
/// request was being answered; an event stream's keep-alive comments count, so only a silent
/// connection ends.
struct Idle {
    io: TcpStream,
    limit: Duration,
    deadline: Pin<Box<Sleep>>,
    busy: Arc<AtomicUsize>,
}

impl Idle {
    fn new(io: TcpStream, limit: Duration, busy: Arc<AtomicUsize>) -> Self {
        Idle {
            io,
            limit,
            deadline: Box::pin(tokio::time::sleep(limit)),
            busy,
        }
    }

    fn active(&mut self) {
        let at = Instant::now() + self.limit;
        self.deadline.as_mut().reset(at);
    }

    /// `Pending` stays `Pending` until the deadline, then becomes the timeout error.
    fn idle<T>(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<T>> {
        if self.busy.load(Ordering::SeqCst) > 0 {
            self.active();
        }
        match self.deadline.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the connection was idle past idle_timeout",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl AsyncRead for Idle {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match Pin::new(&mut self.io).poll_read(cx, buf) {
            Poll::Pending => self.idle(cx),
            ready => {
                self.active();
                ready
            }
        }
    }
}

impl AsyncWrite for Idle {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match Pin::new(&mut self.io).poll_write(cx, buf) {
            Poll::Pending => self.idle(cx),
            ready => {
                self.active();
                ready
            }
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}
