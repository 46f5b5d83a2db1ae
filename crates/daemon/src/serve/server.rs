//! The HTTP server: hyper's HTTP/1 serving the axum router, with the guards `axum::serve`
//! lacks (docs/limits.md):
//!
//! - a **header-read timeout**: a connection that has not sent a complete request header
//!   within it (a slowloris, or a keep-alive connection with no next request) is closed;
//! - an **idle timeout**: a connection with no request in progress and no byte read or
//!   written for that long is closed;
//! - a **connection cap**: at the cap, a new connection closes the longest-idle connection
//!   that has no request in progress, or is itself closed when every one is busy. New
//!   clients are therefore served at once even while idle sockets fill the cap, and the
//!   server never holds more descriptors than the cap, leaving the rest to scraping.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;

/// The server's guards, from `server:` in the config with the cap fitted to the
/// descriptor limit (super::fds).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ServerLimits {
    pub max_connections: usize,
    pub header_read_timeout: Duration,
    pub idle_timeout: Duration,
}

/// Why a connection was closed by the server, the `reason` of
/// `llm_slo_http_connections_closed_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Closed {
    /// No complete request header within `server.header_read_timeout`.
    HeaderTimeout,
    /// No request and no traffic for `server.idle_timeout`.
    IdleTimeout,
    /// Closed to make room for a new connection at `server.max_connections`.
    Evicted,
    /// Refused at `server.max_connections` because every connection had a request in progress.
    Refused,
}

impl Closed {
    pub const ALL: [Closed; 4] = [Closed::HeaderTimeout, Closed::IdleTimeout, Closed::Evicted, Closed::Refused];

    pub fn as_str(self) -> &'static str {
        match self {
            Closed::HeaderTimeout => "header_timeout",
            Closed::IdleTimeout => "idle_timeout",
            Closed::Evicted => "evicted",
            Closed::Refused => "refused",
        }
    }
}

/// Live counters of the server, for /metrics.
#[derive(Debug, Default)]
pub struct ConnStats {
    open: AtomicU64,
    limit: AtomicU64,
    closed: [AtomicU64; 4],
}

impl ConnStats {
    /// Connections open now, not counting those evicted and about to close.
    pub fn open(&self) -> u64 {
        self.open.load(Ordering::Relaxed)
    }

    /// The connection cap in force (after fitting it to the descriptor limit).
    pub fn limit(&self) -> u64 {
        self.limit.load(Ordering::Relaxed)
    }

    pub fn closed(&self, why: Closed) -> u64 {
        self.closed[why as usize].load(Ordering::Relaxed)
    }

    fn count(&self, why: Closed) {
        self.closed[why as usize].fetch_add(1, Ordering::Relaxed);
    }
}

/// What the accept loop knows of one connection.
struct Activity {
    /// Milliseconds since the server's epoch of the last byte read or written.
    last_ms: AtomicU64,
    in_flight: AtomicUsize,
    close: Notify,
}

impl Activity {
    fn touch(&self, epoch: Instant) {
        self.last_ms.store(epoch.elapsed().as_millis() as u64, Ordering::Relaxed);
    }

    fn idle_for(&self, epoch: Instant) -> Duration {
        let now = epoch.elapsed().as_millis() as u64;
        Duration::from_millis(now.saturating_sub(self.last_ms.load(Ordering::Relaxed)))
    }

    fn busy(&self) -> bool {
        self.in_flight.load(Ordering::Relaxed) > 0
    }
}

/// The open connections, by id.
#[derive(Default)]
struct Table(Mutex<HashMap<u64, Arc<Activity>>>);

impl Table {
    fn lock(&self) -> MutexGuard<'_, HashMap<u64, Arc<Activity>>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Tells the longest-idle connection without a request in progress to close, and takes
    /// it off the table at once, so that its slot is free before its task has ended.
    fn evict_idlest(&self) -> bool {
        let mut t = self.lock();
        let idlest = t
            .iter()
            .filter(|(_, a)| !a.busy())
            .min_by_key(|(_, a)| a.last_ms.load(Ordering::Relaxed))
            .map(|(id, _)| *id);
        let Some(a) = idlest.and_then(|id| t.remove(&id)) else { return false };
        a.close.notify_one();
        true
    }
}

/// Serves `router` on `listener` until `stop` turns true, then lets requests in progress
/// finish (the caller bounds how long it waits).
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: ServerLimits,
    stats: Arc<ConnStats>,
    mut stop: watch::Receiver<bool>,
) {
    stats.limit.store(limits.max_connections as u64, Ordering::Relaxed);
    let epoch = Instant::now();
    let table = Arc::new(Table::default());
    let mut conns = JoinSet::new();
    let mut next_id = 0u64;
    let mut last_accept_warning: Option<Instant> = None;
    loop {
        let stream = tokio::select! {
            r = listener.accept() => match r {
                Ok((s, _)) => s,
                Err(e) => {
                    // A descriptor shortage must not become a busy loop, nor a log line per try.
                    if last_accept_warning.is_none_or(|t| t.elapsed() > Duration::from_secs(60)) {
                        tracing::warn!("cannot accept HTTP connections: {e}");
                        last_accept_warning = Some(Instant::now());
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => continue,
            _ = stopped(&mut stop) => break,
        };
        let full = table.lock().len() >= limits.max_connections;
        if full {
            if table.evict_idlest() {
                stats.open.fetch_sub(1, Ordering::Relaxed);
                stats.count(Closed::Evicted);
            } else {
                stats.count(Closed::Refused);
                drop(stream);
                continue;
            }
        }
        next_id += 1;
        let activity = Arc::new(Activity {
            last_ms: AtomicU64::new(epoch.elapsed().as_millis() as u64),
            in_flight: AtomicUsize::new(0),
            close: Notify::new(),
        });
        table.lock().insert(next_id, activity.clone());
        stats.open.fetch_add(1, Ordering::Relaxed);
        let conn = Connection { id: next_id, activity, epoch, table: table.clone(), stats: stats.clone(), limits };
        conns.spawn(conn.run(stream, router.clone(), stop.clone()));
    }
    drop(listener);
    while conns.join_next().await.is_some() {}
}

/// Resolves once `stop` is true (the watch guard never outlives the call).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

struct Connection {
    id: u64,
    activity: Arc<Activity>,
    epoch: Instant,
    table: Arc<Table>,
    stats: Arc<ConnStats>,
    limits: ServerLimits,
}

impl Connection {
    async fn run(self, stream: TcpStream, router: Router, mut stop: watch::Receiver<bool>) {
        let io = TokioIo::new(Tracked { inner: stream, activity: self.activity.clone(), epoch: self.epoch });
        let activity = self.activity.clone();
        let service = hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
            let guard = InFlight::new(activity.clone());
            let response = tower_service::Service::call(&mut router.clone(), req.map(Body::new));
            async move {
                let r = response.await;
                drop(guard);
                r
            }
        });
        let mut builder = http1::Builder::new();
        builder.timer(TokioTimer::new()).header_read_timeout(self.limits.header_read_timeout).keep_alive(true);
        let conn = builder.serve_connection(io, service);
        tokio::pin!(conn);
        let idle = self.limits.idle_timeout;
        let check = tokio::time::sleep(idle);
        tokio::pin!(check);
        let mut draining = false;
        let closed = loop {
            tokio::select! {
                r = conn.as_mut() => break match r {
                    Err(e) if e.is_timeout() => Some(Closed::HeaderTimeout),
                    _ => None,
                },
                _ = self.activity.close.notified() => break None, // counted by the evicter
                _ = stopped(&mut stop), if !draining => {
                    draining = true;
                    conn.as_mut().graceful_shutdown();
                }
                _ = &mut check => {
                    let quiet = self.activity.idle_for(self.epoch);
                    if !self.activity.busy() && quiet >= idle {
                        break Some(Closed::IdleTimeout);
                    }
                    let wait = if self.activity.busy() { idle } else { idle - quiet };
                    check.as_mut().reset(Instant::now() + wait);
                }
            }
        };
        if let Some(why) = closed {
            self.stats.count(why);
        }
        // An evicted connection left the table (and the open count) when it was evicted.
        if self.table.lock().remove(&self.id).is_some() {
            self.stats.open.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// Marks a request in progress on its connection for as long as it lives.
struct InFlight(Arc<Activity>);

impl InFlight {
    fn new(a: Arc<Activity>) -> InFlight {
        a.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight(a)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A TCP stream that notes the time of every byte read or written, for the idle timeout.
struct Tracked {
    inner: TcpStream,
    activity: Arc<Activity>,
    epoch: Instant,
}

impl AsyncRead for Tracked {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(r, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.touch(self.epoch);
        }
        r
    }
}

impl AsyncWrite for Tracked {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, data);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch(self.epoch);
        }
        r
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch(self.epoch);
        }
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
