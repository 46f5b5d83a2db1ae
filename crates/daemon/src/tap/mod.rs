//! The tap: a pass-through HTTP proxy in front of an engine's API that measures every
//! generation request as it streams by (docs/request-path.md).
//!
//! Clients (or the Kubernetes Service's targetPort) talk to the tap; the tap forwards each
//! request to the engine and each response back, frame by frame, unchanged, over pooled
//! keep-alive upstream connections with TCP_NODELAY on both legs. What the bytes mean is
//! the core's business (`goodput_core::request`): this module only times them and keeps a
//! measurement from ever failing a request. Each measured request ends as one
//! [`RequestRecord`](crate::request::RequestRecord) pushed into the daemon's
//! [`Inbox`]; what is not measured is counted by reason ([`metrics`]).

mod body;
mod conn;
mod headers;
mod measure;
pub mod metrics;
mod proxy;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hyper_util::client::legacy::connect::HttpConnector;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::config::TapConfig;
use crate::inbox::Inbox;
use crate::listen::paced::ClientBody;
use crate::listen::server::{ServerLimits, serve_with};
#[cfg(feature = "test-hooks")]
use crate::seen::Seen;
use conn::{Connector, Upstream};
use measure::Ctx;
pub use metrics::{TapMetrics, TapStats};
use proxy::Proxy;

/// A connection to the upstream that is not up within this long fails the request (502).
/// The engine is meant to be beside the tap, where a refused connection fails at once.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

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

/// Binds the tap of `target` and starts serving it in `tasks` until `stop` turns true, with
/// at most `max_connections` client connections (the config's, fitted to the descriptor
/// limit: crate::listen::fds). Errors only when the listen address cannot be bound.
pub async fn start(
    target: &str,
    config: &TapConfig,
    max_connections: usize,
    inbox: Inbox,
    stop: watch::Receiver<bool>,
    tasks: &mut JoinSet<()>,
) -> std::io::Result<Tap> {
    let listener = Arc::new(bind(target, config).await?);
    start_on(listener, target, config, max_connections, inbox, Arc::default(), stop, tasks)
}

/// Binds `tap.listen` of `target`; the error names the target.
pub async fn bind(target: &str, config: &TapConfig) -> std::io::Result<TcpListener> {
    TcpListener::bind(config.listen).await.map_err(|e| {
        std::io::Error::new(
            e.kind(),
            format!("cannot listen on {} for the tap of target {target:?}: {e}", config.listen),
        )
    })
}

/// [`start`] on a socket already bound, counting in `stats`: a config reload starts a tap
/// with new settings on the socket the previous one served (which then lets requests in
/// progress finish under the old settings), or on a new one when `tap.listen` changed.
#[allow(clippy::too_many_arguments)]
pub fn start_on(
    listener: Arc<TcpListener>,
    target: &str,
    config: &TapConfig,
    max_connections: usize,
    inbox: Inbox,
    stats: Arc<TapStats>,
    stop: watch::Receiver<bool>,
    tasks: &mut JoinSet<()>,
) -> std::io::Result<Tap> {
    let addr = listener.local_addr()?;
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
    let upstream = &config.upstream;
    let origin = format!("{}://{}", upstream.scheme(), &upstream[url::Position::BeforeHost..url::Position::AfterPort]);
    let key = origin.parse().ok().and_then(|uri| crate::http1::Origin::of(&uri)).ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("the tap of target {target:?}: upstream {upstream} names no host to connect to"),
        )
    })?;
    // Idle upstream connections count against the tap's descriptors (two per client
    // connection), so no more are kept than there can be clients.
    let proxy = Arc::new(Proxy {
        upstream: Upstream::new(Connector(http), key, max_connections),
        origin,
        prefix: upstream.path().trim_end_matches('/').to_string(),
        inject_usage: config.inject_usage,
        ctx,
    });
    tracing::info!(target_name = %target, %addr, upstream = %upstream, max_connections, "tap is listening");
    let g = config.guards;
    let limits = ServerLimits {
        max_connections,
        header_read_timeout: g.header_read_timeout,
        idle_timeout: g.idle_timeout,
        body_read_timeout: g.body_read_timeout,
        date_header: false,
    };
    let what = format!("connections to the tap of target {target:?}");
    let handler = move |req: hyper::Request<ClientBody>| proxy.clone().handle(req);
    tasks.spawn(serve_with(listener, limits, stats.conns.clone(), stop, what, handler));
    Ok(Tap {
        addr,
        stats,
        #[cfg(feature = "test-hooks")]
        seen,
    })
}
