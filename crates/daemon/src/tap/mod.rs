//! The tap: a pass-through HTTP proxy in front of an engine's API that measures every
//! generation request as it streams by (docs/request-path.md).
//!
//! Clients (or the Kubernetes Service's targetPort) talk to the tap; the tap forwards each
//! request to the engine and each response back, frame by frame, unchanged, over pooled
//! keep-alive upstream connections with TCP_NODELAY on both legs. What the bytes mean is
//! the core's business (`goodput_core::request`): this module only times them and keeps a
//! measurement from ever failing a request. Each measured request ends as one
//! [`RequestRecord`](crate::requests::RequestRecord) pushed into the daemon's
//! [`Inbox`]; what is not measured is counted by reason ([`metrics`]).

mod body;
mod measure;
pub mod metrics;
mod proxy;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::config::TapConfig;
use crate::requests::Inbox;
use measure::Ctx;
pub use metrics::{TapMetrics, TapStats};
use proxy::Proxy;

/// A connection to the upstream that is not up within this long fails the request (502).
/// The engine is meant to be beside the tap, where a refused connection fails at once.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long an idle pooled upstream connection is kept. uvicorn (vLLM, SGLang) closes idle
/// keep-alive connections after 5 s by default; hyper notices the close and reconnects.
pub const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// A started tap.
#[derive(Debug, Clone)]
pub struct Tap {
    /// The bound address (resolves port 0).
    pub addr: SocketAddr,
    pub stats: Arc<TapStats>,
    /// A copy of every record it made (tests pair them with an engine's ground truth).
    #[cfg(feature = "test-hooks")]
    pub seen: Seen,
}

/// The records a tap made, kept for tests (the inbox itself is drained by the evaluator);
/// at most [`Seen::KEPT`].
#[cfg(feature = "test-hooks")]
#[derive(Debug, Clone, Default)]
pub struct Seen(Arc<std::sync::Mutex<Vec<crate::requests::RequestRecord>>>);

#[cfg(feature = "test-hooks")]
impl Seen {
    pub const KEPT: usize = 100_000;

    fn keep(&self, r: &crate::requests::RequestRecord) {
        let mut v = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if v.len() < Self::KEPT {
            v.push(r.clone());
        }
    }

    /// Every record kept so far, in the order the requests ended.
    pub fn records(&self) -> Vec<crate::requests::RequestRecord> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// Binds the tap of `target` and starts serving it in `tasks` until `stop` turns true.
/// Errors only when the listen address cannot be bound.
pub async fn start(
    target: &str,
    config: &TapConfig,
    inbox: Inbox,
    stop: watch::Receiver<bool>,
    tasks: &mut JoinSet<()>,
) -> std::io::Result<Tap> {
    let listener = TcpListener::bind(config.listen).await.map_err(|e| {
        std::io::Error::new(
            e.kind(),
            format!("cannot listen on {} for the tap of target {target:?}: {e}", config.listen),
        )
    })?;
    let addr = listener.local_addr()?;
    let stats = Arc::new(TapStats::default());
    #[cfg(feature = "test-hooks")]
    let seen = Seen::default();
    let ctx = Arc::new(Ctx {
        target: target.to_string(),
        inbox,
        stats: stats.clone(),
        epoch: Instant::now(),
        #[cfg(feature = "test-hooks")]
        seen: seen.clone(),
    });
    let mut http = HttpConnector::new();
    http.set_nodelay(true);
    http.set_connect_timeout(Some(CONNECT_TIMEOUT));
    let client = Client::builder(TokioExecutor::new())
        .pool_idle_timeout(POOL_IDLE_TIMEOUT)
        .pool_timer(TokioTimer::new())
        .build(http);
    let upstream = &config.upstream;
    let origin = format!("{}://{}", upstream.scheme(), &upstream[url::Position::BeforeHost..url::Position::AfterPort]);
    let proxy = Arc::new(Proxy {
        client,
        origin,
        prefix: upstream.path().trim_end_matches('/').to_string(),
        inject_usage: config.inject_usage,
        ctx,
    });
    tracing::info!(target_name = %target, %addr, upstream = %upstream, "tap is listening");
    tasks.spawn(serve(listener, proxy, stop));
    Ok(Tap {
        addr,
        stats,
        #[cfg(feature = "test-hooks")]
        seen,
    })
}

/// Accepts connections until `stop`; then lets the requests in progress finish (the
/// daemon's shutdown bounds how long).
async fn serve(listener: TcpListener, proxy: Arc<Proxy>, mut stop: watch::Receiver<bool>) {
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    conns.spawn(connection(stream, proxy.clone(), stop.clone()));
                }
                Err(e) => {
                    // Out of descriptors, most likely: give connections time to close.
                    tracing::warn!(target_name = %proxy.ctx_target(), error = %e, "tap: cannot accept a connection");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
            _ = stopped(&mut stop) => break,
        }
    }
    drop(listener);
    while conns.join_next().await.is_some() {}
}

/// Serves one client connection (HTTP/1.1 keep-alive, upgrades relayed).
async fn connection(stream: TcpStream, proxy: Arc<Proxy>, mut stop: watch::Receiver<bool>) {
    let _ = stream.set_nodelay(true);
    let svc = service_fn(move |req| proxy.clone().handle(req));
    let conn =
        http1::Builder::new().timer(TokioTimer::new()).serve_connection(TokioIo::new(stream), svc).with_upgrades();
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => {}
        _ = stopped(&mut stop) => {
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        }
    }
}

/// Resolves when `stop` turns true; never when its sender is gone without saying so.
async fn stopped(stop: &mut watch::Receiver<bool>) {
    if stop.wait_for(|s| *s).await.is_err() {
        std::future::pending::<()>().await;
    }
}

impl Proxy {
    fn ctx_target(&self) -> &str {
        &self.ctx.target
    }
}
