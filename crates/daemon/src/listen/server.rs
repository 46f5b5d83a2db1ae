//! The HTTP servers: hyper's HTTP/1 serving the daemon's axum router, the OTLP receiver
//! and each tap, with the guards `axum::serve` lacks (docs/limits.md):
//!
//! - a **header-read timeout**: a connection that has not sent a complete request header
//!   within it (a slowloris, or a keep-alive connection with no next request) is closed;
//! - a **body-read timeout**: a request body that stalls that long, or arrives slower than
//!   a floor, is cut ([`super::paced`]);
//! - an **idle timeout**: a connection with no request in progress and no byte read or
//!   written for that long is closed;
//! - a **connection cap**: at the cap, a new connection closes the longest-idle connection
//!   that has no request in progress, else the one whose request body lags the most, or is
//!   itself closed when every one is busy. New clients are therefore served at once even
//!   while idle sockets or trickled bodies fill the cap, and a listener never holds more
//!   descriptors than its cap, which [`super::fds`] fits under the descriptor limit.
//!
//! Failures to accept (out of descriptors) are logged when they start or change, and at
//! most once a minute while they go on, with the number since the last line.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use bytes::Bytes;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::{Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::activity::Activity;
use super::paced::ClientBody;

/// A listener's guards, from the config with the cap fitted to the descriptor limit
/// (super::fds).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ServerLimits {
    pub max_connections: usize,
    pub header_read_timeout: Duration,
    pub idle_timeout: Duration,
    /// The longest a request body may stall; it must also average [`MIN_BODY_RATE`].
    pub body_read_timeout: Duration,
    /// Whether responses get a `Date` header when the handler set none. An origin server
    /// sends one (RFC 9110 §6.6.1); the tap does not, since it passes on the upstream's
    /// headers and adds none of its own.
    pub date_header: bool,
}

/// Why a connection was closed by the server, the `reason` of the `*_connections_closed_total`
/// families.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Closed {
    /// No complete request header within the header-read timeout.
    HeaderTimeout,
    /// No request and no traffic for the idle timeout.
    IdleTimeout,
    /// A request body stalled, or arrived slower than the floor.
    BodyTimeout,
    /// Closed to make room for a new connection at the cap.
    Evicted,
    /// Refused at the cap because every connection had a request in progress.
    Refused,
}

impl goodput_core::export::LabelValue for Closed {
    const ALL: &'static [Closed] = &Closed::ALL;
    fn as_str(self) -> &'static str {
        Closed::as_str(self)
    }
}

impl Closed {
    pub const ALL: [Closed; 5] =
        [Closed::HeaderTimeout, Closed::IdleTimeout, Closed::BodyTimeout, Closed::Evicted, Closed::Refused];

    pub fn as_str(self) -> &'static str {
        match self {
            Closed::HeaderTimeout => "header_timeout",
            Closed::IdleTimeout => "idle_timeout",
            Closed::BodyTimeout => "body_timeout",
            Closed::Evicted => "evicted",
            Closed::Refused => "refused",
        }
    }
}

/// Live counters of one listener, for /metrics.
#[derive(Debug, Default)]
pub struct ConnStats {
    open: AtomicU64,
    limit: AtomicU64,
    closed: [AtomicU64; Closed::ALL.len()],
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

/// The open connections, by id.
#[derive(Default)]
struct Table(Mutex<HashMap<u64, Arc<Activity>>>);

impl Table {
    fn lock(&self) -> MutexGuard<'_, HashMap<u64, Arc<Activity>>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Tells one connection to close to make room, and takes it off the table at once, so
    /// that its slot is free before its task has ended: the longest-idle connection without
    /// a request in progress, else the one whose lagging request body was heard from last
    /// the longest ago. False when every connection is busy with something else.
    fn evict(&self, now_ms: u64) -> bool {
        let mut t = self.lock();
        let quiet = |a: &Arc<Activity>| a.last_ms.load(Ordering::Relaxed);
        let idlest = t.iter().filter(|(_, a)| !a.busy()).min_by_key(|(_, a)| quiet(a)).map(|(id, _)| *id);
        let victim = idlest
            .or_else(|| t.iter().filter(|(_, a)| a.body_lags(now_ms)).min_by_key(|(_, a)| quiet(a)).map(|(id, _)| *id));
        let Some(a) = victim.and_then(|id| t.remove(&id)) else { return false };
        a.close.notify_one();
        true
    }
}

/// One connection's place in its listener's table; it leaves the table when the last
/// holder is gone (the connection's task, and a relay it was upgraded to).
struct Slot {
    id: u64,
    table: Arc<Table>,
    stats: Arc<ConnStats>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        // An evicted connection left the table (and the open count) when it was evicted.
        if self.table.lock().remove(&self.id).is_some() {
            self.stats.open.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// A request's hold on its connection's slot, in the request's extensions: a handler that
/// takes the connection over (a protocol upgrade) keeps [`Held::hold`] for as long as it
/// uses it, so that the connection stays counted, and is not closed as idle or evicted.
#[derive(Clone)]
pub struct Held {
    slot: Arc<Slot>,
    activity: Arc<Activity>,
}

/// What [`Held::hold`] returns; the hold ends when it is dropped.
pub struct Hold {
    _slot: Arc<Slot>,
    _busy: InFlight,
}

impl Held {
    pub fn hold(&self) -> Hold {
        Hold { _slot: self.slot.clone(), _busy: InFlight::new(self.activity.clone()) }
    }
}

/// Serves `router` on `listener` until `stop` turns true, then lets requests in progress
/// finish (the caller bounds how long it waits).
pub async fn serve(
    listener: impl Into<Arc<TcpListener>>,
    router: Router,
    limits: ServerLimits,
    stats: Arc<ConnStats>,
    stop: watch::Receiver<bool>,
) {
    let handler = move |req: Request<ClientBody>| tower_service::Service::call(&mut router.clone(), req.map(Body::new));
    serve_with(listener, limits, stats, stop, "HTTP connections".into(), handler).await;
}

/// Serves `handler` on `listener` with the guards of `limits` until `stop` turns true, then
/// lets requests in progress finish. The socket may be shared: a server that stops lets go
/// of it, and another started on it (a config reload with new settings for the same
/// address) goes on accepting there while the first one's requests finish. `what` names
/// the listener in log lines ("connections to the tap of target \"llama\"").
pub async fn serve_with<H, F, B>(
    listener: impl Into<Arc<TcpListener>>,
    limits: ServerLimits,
    stats: Arc<ConnStats>,
    mut stop: watch::Receiver<bool>,
    what: String,
    handler: H,
) where
    H: Fn(Request<ClientBody>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Result<Response<B>, Infallible>> + Send + 'static,
    B: hyper::body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let listener: Arc<TcpListener> = listener.into();
    stats.limit.store(limits.max_connections as u64, Ordering::Relaxed);
    let epoch = Instant::now();
    let table = Arc::new(Table::default());
    let mut conns = JoinSet::new();
    let mut next_id = 0u64;
    let mut failing = AcceptLog::default();
    loop {
        let stream = tokio::select! {
            r = listener.accept() => match r {
                Ok((s, _)) => {
                    failing.recovered(&what);
                    s
                }
                Err(e) => {
                    // A descriptor shortage must not become a busy loop, nor a log line per try.
                    failing.failed(&what, &e);
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => continue,
            _ = stopped(&mut stop) => break,
        };
        let full = table.lock().len() >= limits.max_connections;
        if full {
            if table.evict(epoch.elapsed().as_millis() as u64) {
                stats.open.fetch_sub(1, Ordering::Relaxed);
                stats.count(Closed::Evicted);
            } else {
                stats.count(Closed::Refused);
                drop(stream);
                continue;
            }
        }
        next_id += 1;
        let activity = Arc::new(Activity::new(epoch));
        table.lock().insert(next_id, activity.clone());
        stats.open.fetch_add(1, Ordering::Relaxed);
        let slot = Arc::new(Slot { id: next_id, table: table.clone(), stats: stats.clone() });
        let conn = Connection { slot, activity, stats: stats.clone(), limits };
        conns.spawn(crate::wakes::in_task(conn.run(stream, handler.clone(), stop.clone())));
    }
    drop(listener);
    while conns.join_next().await.is_some() {}
}

/// Accept failures as the log sees them: the first of a run, a change of error, and then
/// at most one line a minute.
#[derive(Default)]
struct AcceptLog {
    last: Option<(Instant, String)>,
    unlogged: u64,
}

impl AcceptLog {
    const EVERY: Duration = Duration::from_secs(60);

    fn failed(&mut self, what: &str, e: &std::io::Error) {
        let message = e.to_string();
        match &self.last {
            Some((at, m)) if *m == message && at.elapsed() < Self::EVERY => self.unlogged += 1,
            _ => {
                if self.unlogged > 0 {
                    tracing::warn!(
                        "cannot accept {what}: {e} ({} more times since the last message; the descriptor limit, ulimit -n, may be too low)",
                        self.unlogged
                    );
                } else {
                    tracing::warn!("cannot accept {what}: {e}");
                }
                self.last = Some((Instant::now(), message));
                self.unlogged = 0;
            }
        }
    }

    fn recovered(&mut self, what: &str) {
        if let Some((_, m)) = self.last.take() {
            tracing::info!("accepting {what} again after {} failures ({m})", self.unlogged + 1);
            self.unlogged = 0;
        }
    }
}

/// Resolves once `stop` is true (the watch guard never outlives the call); never when its
/// sender is gone without saying so.
async fn stopped(stop: &mut watch::Receiver<bool>) {
    if stop.wait_for(|s| *s).await.is_err() {
        std::future::pending::<()>().await;
    }
}

struct Connection {
    slot: Arc<Slot>,
    activity: Arc<Activity>,
    stats: Arc<ConnStats>,
    limits: ServerLimits,
}

impl Connection {
    async fn run<H, F, B>(self, stream: TcpStream, handler: H, mut stop: watch::Receiver<bool>)
    where
        H: Fn(Request<ClientBody>) -> F + Send + Sync + 'static,
        F: Future<Output = Result<Response<B>, Infallible>> + Send + 'static,
        B: hyper::body::Body<Data = Bytes> + Send + 'static,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let _ = stream.set_nodelay(true);
        let io = TokioIo::new(Tracked { inner: stream, activity: self.activity.clone() });
        let held = Held { slot: self.slot.clone(), activity: self.activity.clone() };
        let body_timeout = self.limits.body_read_timeout;
        let service = hyper::service::service_fn(move |req: Request<Incoming>| {
            let guard = InFlight::new(held.activity.clone());
            let mut req = req.map(|b| ClientBody::new(b, held.activity.clone(), body_timeout));
            req.extensions_mut().insert(held.clone());
            let response = handler(req);
            async move {
                let r = response.await;
                drop(guard);
                r
            }
        });
        let mut builder = http1::Builder::new();
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(self.limits.header_read_timeout)
            .keep_alive(true)
            .auto_date_header(self.limits.date_header);
        let conn = builder.serve_connection(io, service).with_upgrades();
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
                _ = self.activity.close.notified() => return, // counted by the evicter
                _ = stopped(&mut stop), if !draining => {
                    draining = true;
                    conn.as_mut().graceful_shutdown();
                }
                _ = &mut check => {
                    let quiet = self.activity.idle_for();
                    if !self.activity.busy() && quiet >= idle {
                        break Some(Closed::IdleTimeout);
                    }
                    let wait = if self.activity.busy() { idle } else { idle - quiet };
                    check.as_mut().reset(Instant::now() + wait);
                }
            }
        };
        let closed =
            if self.activity.body_timed_out.load(Ordering::Relaxed) { Some(Closed::BodyTimeout) } else { closed };
        if let Some(why) = closed {
            self.stats.count(why);
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
}

impl AsyncRead for Tracked {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(r, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.touch();
        }
        r
    }
}

impl AsyncWrite for Tracked {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, data);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
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
            self.activity.touch();
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
